"""The state modules' plans are a documented contract: the roles read only keys
that the module's RETURN documents (with ``contains:``), so ``ansible-doc`` shows
what a role relies on and validate-modules checks it."""

import pathlib
import re

import gpu_cluster_addons_plan
import gpunode_node_state
import gpunode_planned_files
import kube_scheduler_extender
import kubelet_feature_gates
import nvidia_container_runtime_state
import nvidia_driver_state
import nvidia_mig
import pytest
import yaml
from conftest import ROOT

# module -> the variable its role registers the result in
REGISTERED = {
    nvidia_driver_state: "__nvidia_driver_state",
    nvidia_container_runtime_state: "__nvidia_container_runtime_state",
    kubelet_feature_gates: "__kubelet_gpu_outcome",  # its result, or the plan handed over (the same RETURN)
    gpunode_planned_files: "__kubelet_gpu_written",
    gpunode_node_state: "gpunode_node_state",
    kube_scheduler_extender: "__gpushare_scheduler",
    nvidia_mig: "__nvidia_mig_result",
    gpu_cluster_addons_plan: "__gpu_cluster_addons_plan",
}
# (module, variable, the return value it stands for: None for the whole result) for every
# name a role reads a module's result through: the registered one, a second registration of
# the same module, and the role variables that alias a part of it (roles/*/vars/main.yml)
READS = [(module, variable, None) for module, variable in REGISTERED.items()] + [
    (nvidia_driver_state, "__nvidia_driver_replan", None),
    (nvidia_driver_state, "__nvidia_driver_plan", "plan"),
]
# reads the contract does not cover yet, each with why: the test fails once one is covered,
# so that the entry goes
UNCOVERED = {}
# what a registered result has besides the module's own return values
ANSIBLE_KEYS = {"failed", "changed", "skipped", "msg", "warnings"}


def read_keys(variable):
    """``(top, key or None, file)`` for every ``variable.top[.key]`` in the roles and playbooks."""
    pattern = re.compile(re.escape(variable) + r"(?:\.|\[')([a-z_]+)'?\]?(?:(?:\.|\[')([a-z_]+))?")
    found = set()
    for path in sorted([*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("roles/*/handlers/*.yml"),
                        *ROOT.glob("roles/*/vars/*.yml"), *ROOT.glob("playbooks/**/*.yml")]):
        for match in pattern.finditer(path.read_text()):
            found.add((match.group(1), match.group(2), str(path.relative_to(ROOT))))
    return found


def documented_keys(module, within):
    """What ``module``'s RETURN documents at the top, or under ``within``'s ``contains:``."""
    documented = yaml.safe_load(module.RETURN)
    return documented if within is None else documented[within]["contains"]


@pytest.mark.parametrize(("module", "variable", "within"), READS,
                         ids=[f"{module.__name__}:{variable}" for module, variable, _within in READS])
def test_roles_read_only_documented_keys(module, variable, within):
    documented = documented_keys(module, within)
    reads = read_keys(variable)
    name = module.__name__ + (f" {within}" if within else "")
    assert reads, f"no read of {variable} found: the pattern is wrong"
    for top, key, where in sorted(reads, key=lambda read: (read[0], read[1] or "", read[2])):
        if within is None and top in ANSIBLE_KEYS:
            continue
        assert top in documented, f"{where} reads {variable}.{top}, which {name}'s RETURN does not document"
        if key is None or documented[top].get("type") != "dict":
            continue
        contains = documented[top].get("contains")
        if (variable, top) in UNCOVERED:
            assert not contains, f"{variable}.{top} is documented now: remove it from UNCOVERED"
            continue
        assert contains, f"{name}'s RETURN documents {top} without contains:"
        assert key in contains, f"{where} reads {variable}.{top}.{key}, not documented under {top}.contains"


def test_every_documented_dict_says_what_it_contains():
    for module in REGISTERED:
        for name, entry in yaml.safe_load(module.RETURN).items():
            if name in ("plan", "request", "state"):
                assert entry.get("contains"), f"{module.__name__}: {name} has no contains:"


def test_read_keys_finds_the_reads():
    assert ("plan", "converged", "roles/nvidia_driver/tasks/main.yml") in read_keys("__nvidia_driver_state")
    assert ("hold", None, "roles/nvidia_driver/tasks/converge.yml") in read_keys("__nvidia_driver_plan")
    assert pathlib.Path(ROOT / "roles/nvidia_driver/tasks/main.yml").exists()
