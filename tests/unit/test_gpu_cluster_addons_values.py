"""gpu_cluster_addons: every input that lands in a manifest is checked before anything is rendered.

The plan module refuses a namespace, label, node name, RuntimeClass handler,
image, tag, resource amount, toleration or port that breaks Kubernetes'
syntax, naming the role variable (and the module option), the value and the
rule; a user's value is never rewritten (``label_value`` rewrites values from
facts only). Through ansible-playbook, a hostile inventory value fails the
role before a file is written.
"""

import json
import pathlib
import re
import sys

import gpu_cluster_addons_plan as module
import pytest
from playbook_run import ansible_playbook
from test_k8s_names import CYRILLIC_A, DIGEST, HYPHEN, assert_refused, injected

ROOT = pathlib.Path(__file__).resolve().parents[2]
T4 = {"present": True, "gpu_count": 1, "models": ["TU104GL [Tesla T4]"],
      "devices": [{"address": "0000:00:1e.0", "kind": "gpu", "name": "TU104GL [Tesla T4]"}]}
BASE = {"mode": "nvidia", "kubernetes_version": "1.30"}

OPTIONS = {  # module option -> (the name the message starts with, hostile values)
    "namespace": ("gpu_cluster_addons_namespace (namespace)",
                  [*injected("kube-system"), "Kube-System", "a" * 64, "-gpu", "gpu-", "gpu.ops", "gpu_ops",
                   f"kube{HYPHEN}system"]),
    "control_plane_label": ("gpu_cluster_addons_control_plane_label (control_plane_label)",
                            [*injected("node-role.kubernetes.io/control-plane", at=5), "x" * 64, "-a",
                             "a/b/c", f"node-role.kubernetes.io/control{HYPHEN}plane", "k=a b"]),
    "runtime_class_handler": ("gpu_cluster_addons_runtime_class_handler (runtime_class_handler)",
                              [*injected("nvidia"), "Nvidia", "nvidia_cdi", "nvidia.cdi", "a" * 64,
                               f"nvidi{CYRILLIC_A}"]),
}
LABEL_KEYS = [*injected("example.com/team"), "", "x" * 64, f"{'a' * 254}/x", "-team", "team-", "a/b/c",
              "Example.com/team", f"example.com/te{CYRILLIC_A}m"]
LABEL_VALUES = [*injected("ml-team"), "x" * 64, "-ml", "ml-", "ml.", "a/b", f"ml{HYPHEN}team", ["ml"]]
ROLE_VALUES = {  # role variable -> hostile values
    "gpu_cluster_addons_nvidia_device_plugin_image": [*injected("nvcr.io/nvidia/k8s-device-plugin"), "",
                                                      "nvcr.io/NVIDIA/k8s-device-plugin",
                                                      "nvcr.io/nvidia/x:v1",
                                                      f"nvcr.io/nvidia/k8s{HYPHEN}device-plugin"],
    "gpu_cluster_addons_nvidia_device_plugin_version": [*injected("v0.17.0"), "", "x" * 129, "-v1", ".v1",
                                                        "v0.17.0\"\nevil: true", "v1@sha256:xyz"],
    "gpu_cluster_addons_gpushare_extender_version": ["1.11 d170d8a", "1.11:d170d8a"],
    "gpu_cluster_addons_gpushare_extender_image": ["registry.example.com//acs/x", "acs/x y"],
    "gpu_cluster_addons_nvidia_device_plugin_resources": [{"requests": {"cpu": "50 m"}},
                                                          {"requests": {"gpu": 1}}, {"limit": {"cpu": 1}},
                                                          {"limits": {"memory": "-64Mi"}}],
    "gpu_cluster_addons_extra_tolerations": [[{"key": "a b", "operator": "Exists"}],
                                             [{"key": "k", "operator": "Exists", "value": "v"}],
                                             [{"key": "k", "effect": "noschedule"}], ["nvidia.com/gpu"]],
    "gpu_cluster_addons_gpushare_extender_node_port": [0, 70000, "32766"],
    "gpu_cluster_addons_field_manager": ["", "x" * 129, "gpu\nnode"],
}
CASES = [("option", option, value) for option, (_name, values) in OPTIONS.items() for value in values]
CASES += [("label key", key, None) for key in LABEL_KEYS]
CASES += [("label value", "team", value) for value in LABEL_VALUES]
CASES += [("role", variable, value) for variable, values in ROLE_VALUES.items() for value in values]


def case_args(kind, name, value):
    if kind == "option":
        return dict(BASE, **{name: value}), OPTIONS[name][0], value
    if kind == "label key":
        return dict(BASE, extra_node_labels={name: "x"}), \
            "gpu_cluster_addons_extra_node_labels (extra_node_labels) key", name
    if kind == "label value":
        return dict(BASE, extra_node_labels={name: value}), \
            f"gpu_cluster_addons_extra_node_labels (extra_node_labels)[{name!r}]", value
    option = ROLE_OPTIONS[name]
    return dict(BASE, **nested(option, value)), f"{name} ({option})", value


# role variable -> the option (path) it reaches the module in, which the message names too
ROLE_OPTIONS = {
    "gpu_cluster_addons_nvidia_device_plugin_image": "images.nvidia_device_plugin.repository",
    "gpu_cluster_addons_nvidia_device_plugin_version": "images.nvidia_device_plugin.tag",
    "gpu_cluster_addons_gpushare_extender_version": "images.gpushare_extender.tag",
    "gpu_cluster_addons_gpushare_extender_image": "images.gpushare_extender.repository",
    "gpu_cluster_addons_nvidia_device_plugin_resources": "resources.nvidia_device_plugin",
    "gpu_cluster_addons_extra_tolerations": "extra_tolerations",
    "gpu_cluster_addons_gpushare_extender_node_port": "gpushare_extender.node_port",
    "gpu_cluster_addons_field_manager": "field_manager",
}
VALID_IMAGE = {"repository": "nvcr.io/nvidia/x", "tag": "v1"}


def nested(path, value):
    """``{"images": {"x": {"tag": value}}}`` for ``images.x.tag``; an image's other part valid."""
    first, *rest = path.split(".")
    if first == "images":
        return {"images": {rest[0]: dict(VALID_IMAGE, **{rest[1]: value})}}
    return {first: {rest[0]: value}} if rest else {first: value}


@pytest.mark.parametrize(("kind", "name", "value"), CASES, ids=[f"{k}-{n}-{v!r}"[:80] for k, n, v in CASES])
def test_a_hostile_input_fails_naming_the_variable_value_and_rule(run_module, kind, name, value):
    args, shown, bad = case_args(kind, name, value)
    ok, result = run_module(module, args)
    assert not ok
    if isinstance(bad, (dict, list)):  # the message names the field inside it, and its value
        assert result["msg"].startswith(shown) and " is not " in result["msg"], result["msg"]
        assert result["msg"].endswith("nothing was rendered or applied")
    else:
        assert_refused(result, f"{shown}: {bad!r} is not ", bad, "nothing was rendered or applied")


def test_node_names_given_or_derived_must_be_kubernetes_node_names(run_module):
    facts = {"gpu-01": {"nvidia_gpu": T4, "nodename": "gpu-01"}}
    for bad in ("GPU-01", "gpu_01", "gpu-01\n", 'gpu"01', "-gpu", f"gpu{HYPHEN}01", "a" * 254):
        ok, result = run_module(module, dict(BASE, gpu_hosts=["gpu-01"], host_facts=facts,
                                             node_names={"gpu-01": bad}))
        assert not ok
        assert result["msg"].startswith(f"gpu_cluster_addons_node_name of gpu-01 (node_names): {bad!r}")
    # no node_name: the lower-cased nodename fact, which must be a DNS subdomain too
    ok, result = run_module(module, dict(BASE, gpu_hosts=["gpu-01"],
                                         host_facts={"gpu-01": {"nvidia_gpu": T4, "nodename": "gpu_01.lab"}}))
    assert not ok and result["msg"].startswith("the node name of gpu-01 "), result["msg"]
    assert "'gpu_01.lab'" in result["msg"]


def test_valid_edge_values_pass_and_are_not_rewritten(run_module):
    labels = {"example.com/a_b-c.d": "", "nvidia.com/gpu.product": "x" * 63, "team": "ML_ops.1",
              "gpunode.io/legacy": None, "count": 8}
    manifest_values = {
        "images": {"nvidia_device_plugin": {"repository": "registry.local:5000/mirror/k8s-device-plugin",
                                            "tag": f"v0.17.0@{DIGEST}"}},
        "resources": {"nvidia_device_plugin": {"requests": {"cpu": 0.05, "memory": "64Mi"},
                                               "limits": {"cpu": "500m", "memory": "0.25Gi"}}},
        "extra_tolerations": [{"operator": "Exists"},
                              {"key": "example.com/dedicated", "value": "gpu",
                               "effect": "NoExecute", "tolerationSeconds": 60}],
        "gpushare_extender": {"port": 12345, "node_port": 32766},
        "field_manager": "gpunode ops",
    }
    ok, result = run_module(module, dict(
        BASE, namespace="a" * 63, control_plane_label="example.com/infra=yes",
        runtime_class_handler="nvidia-cdi",
        extra_node_labels=labels, gpu_hosts=["gpu-01"], node_names={"gpu-01": "gpu-01.example.com"},
        host_facts={"gpu-01": {"nvidia_gpu": T4}}, **manifest_values))
    assert ok, result
    node = result["gpu_nodes"][0]
    assert node["node"] == "gpu-01.example.com"
    assert node["labels"]["example.com/a_b-c.d"] == "" and node["labels"]["team"] == "ML_ops.1"
    assert node["labels"]["gpunode.io/legacy"] is None and node["labels"]["count"] == "8"
    assert result["control_plane"]["label_keys"] == ["example.com/infra"]
    image = result["images"]["nvidia_device_plugin"]
    assert image == f"registry.local:5000/mirror/k8s-device-plugin:v0.17.0@{DIGEST}"


# --- through ansible-playbook ------------------------------------------------------------------

PLAYBOOK = """\
- name: Render with the inventory's values
  hosts: cases
  gather_facts: false
  roles:
    - role: gpu_cluster_addons
"""
ROLE_CASES = {
    "namespace": ("gpu_cluster_addons_namespace", "kube-system\nevil: true"),
    "label": ("gpu_cluster_addons_extra_node_labels", {"team": 'ml"; x'}),
    "image": ("gpu_cluster_addons_nvidia_device_plugin_image", "nvcr.io/nvidia/k8s device plugin"),
    "tag": ("gpu_cluster_addons_nvidia_device_plugin_version", 'v0.17.0"\n  privileged: true'),
    "handler": ("gpu_cluster_addons_runtime_class_handler", "Nvidia"),
    "toleration": ("gpu_cluster_addons_extra_tolerations",
                   [{"key": "k", "operator": "Exists", "value": "$x"}]),
    "resources": ("gpu_cluster_addons_nvidia_device_plugin_resources", {"limits": {"cpu": "1,5"}}),
}


@pytest.mark.controller(reason="runs the role through ansible-playbook")
def test_the_role_refuses_a_hostile_inventory_value_before_writing_a_file(tmp_path):
    out = tmp_path / "out"
    hosts = {name: {variable: value, "gpu_cluster_addons_output_dir": str(out / name)}
             for name, (variable, value) in ROLE_CASES.items()}
    hosts["valid"] = {"gpu_cluster_addons_output_dir": str(out / "valid"),
                      "gpu_cluster_addons_nvidia_device_plugin_version": f"v0.17.0@{DIGEST}",
                      "gpu_cluster_addons_extra_tolerations": [{"key": "example.com/dedicated",
                                                                "operator": "Exists"}]}
    common = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
              "gpu_cluster_addons_gpu_hosts": [], "gpu_cluster_addons_kubernetes_version": "1.30"}
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"children": {"cases": {"hosts": hosts, "vars": common}}}}))
    playbook = tmp_path / "render.yml"
    playbook.write_text(PLAYBOOK)
    proc = ansible_playbook(playbook, inventory, "--forks", "8", check=False, timeout=300,
                            ANSIBLE_STDOUT_CALLBACK="oneline", ANSIBLE_ROLES_PATH=str(ROOT / "roles"))
    failures = {match[1]: json.loads(match[2])["msg"]
                for match in re.finditer(r"^(\S+) \| FAILED! => (\{.*\})$", proc.stdout, re.M)}
    assert set(failures) == set(ROLE_CASES), proc.stdout[-3000:]
    for name, (variable, _value) in ROLE_CASES.items():
        assert failures[name].startswith(variable), failures[name]
        assert failures[name].endswith("nothing was rendered or applied"), failures[name]
        assert not (out / name).exists(), f"{name}: files were written"
    assert sorted(p.name for p in (out / "valid").iterdir())  # the valid case rendered
    daemonset = (out / "valid" / "50-daemonset-nvidia-device-plugin.yaml").read_text()
    assert f"k8s-device-plugin:v0.17.0@{DIGEST}" in daemonset


@pytest.mark.parametrize(("option", "given", "shown"), [
    ("resources", {"device_plugin": {"limits": {"cpu": 1}}},
     "resources: 'device_plugin' is not a container's name"),
    ("gpushare_extender", {"nodePort": 32766},
     "gpushare_extender: 'nodePort' is not a port's name (port, node_port)"),
])
def test_an_unknown_key_of_a_mapping_option_is_refused(run_module, option, given, shown):
    ok, result = run_module(module, dict(BASE, **{option: given}))
    assert not ok and result["msg"].startswith(shown), result
