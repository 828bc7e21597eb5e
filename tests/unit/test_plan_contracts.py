"""The state modules' plans are a documented contract: the roles read only keys
that the module's RETURN documents (with ``contains:``), so ``ansible-doc`` shows
what a role relies on and validate-modules checks it."""

import pathlib
import re

import gpu_cluster_addons_plan
import gpunode_node_state
import kube_scheduler_extender
import kubelet_feature_gates
import nvidia_container_runtime_state
import nvidia_driver_state
import nvidia_driver_verify
import nvidia_mig
import pytest
import yaml
from conftest import ROOT

# module -> the variable its role registers the result in
REGISTERED = {
    nvidia_driver_state: "__nvidia_driver_state",
    nvidia_driver_verify: "__nvidia_driver_final",
    nvidia_container_runtime_state: "__nvidia_container_runtime_state",
    kubelet_feature_gates: "__kubelet_gpu",
    gpunode_node_state: "gpunode_node_state",
    kube_scheduler_extender: "__gpushare_scheduler",
    nvidia_mig: "__nvidia_mig_result",
    gpu_cluster_addons_plan: "__gpu_cluster_addons_plan",
}
# what a registered result has besides the module's own return values
ANSIBLE_KEYS = {"failed", "changed", "skipped", "msg", "warnings"}


def read_keys(variable):
    """``(top, key or None)`` for every ``variable.top[.key]`` in the roles and playbooks."""
    pattern = re.compile(re.escape(variable) + r"(?:\.|\[')([a-z_]+)'?\]?(?:(?:\.|\[')([a-z_]+))?")
    found = set()
    for path in sorted([*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("roles/*/handlers/*.yml"),
                        *ROOT.glob("playbooks/**/*.yml")]):
        for match in pattern.finditer(path.read_text()):
            found.add((match.group(1), match.group(2), str(path.relative_to(ROOT))))
    return found


@pytest.mark.parametrize("module", list(REGISTERED), ids=lambda m: m.__name__)
def test_roles_read_only_documented_keys(module):
    documented = yaml.safe_load(module.RETURN)
    reads = read_keys(REGISTERED[module])
    assert reads, f"no read of {REGISTERED[module]} found: the pattern is wrong"
    for top, key, where in sorted(reads, key=lambda read: (read[0], read[1] or "", read[2])):
        if top in ANSIBLE_KEYS:
            continue
        assert top in documented, f"{where} reads {top}, which {module.__name__}'s RETURN does not document"
        if key is None or documented[top].get("type") != "dict":
            continue
        contains = documented[top].get("contains")
        assert contains, f"{module.__name__}'s RETURN documents {top} without contains:"
        assert key in contains, f"{where} reads {top}.{key}, not documented under {top}.contains"


def test_every_documented_dict_says_what_it_contains():
    for module in REGISTERED:
        for name, entry in yaml.safe_load(module.RETURN).items():
            if name in ("plan", "request", "state"):
                assert entry.get("contains"), f"{module.__name__}: {name} has no contains:"


def test_read_keys_finds_the_reads():
    assert ("plan", "converged", "roles/nvidia_driver/tasks/main.yml") in read_keys("__nvidia_driver_state")
    assert pathlib.Path(ROOT / "roles/nvidia_driver/tasks/main.yml").exists()
