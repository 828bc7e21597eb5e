"""gpu_cluster_addons in dra mode: NVIDIA's DRA driver on host-installed drivers.

The pure part (module_utils/gpunode/addons/dra*.py) on every target Python:
objects per Kubernetes version validated strictly with kubernetes-validate,
RBAC per version, node pools (label, affinity), the DRA preflight over a table
of nodes. Then the plan module's main(), and (controller) the role rendered
through ansible-playbook: every file valid for 1.34-1.37, a second run in
check mode changes nothing, a pool switch takes the DRA files away.
"""

import copy
import json
import pathlib
import re
import sys

import gpu_cluster_addons_plan as plan_module
import pytest
import yaml
from ansible.module_utils.gpunode.addons import dra, dra_objects, dra_preflight
from playbook_run import ansible_playbook

ROOT = pathlib.Path(__file__).resolve().parents[2]
VERSIONS = ["1.34", "1.35", "1.36", "1.37"]

# --- a table of nodes, as the node roles publish their facts ------------------------

GPU_OK = {
    "present": True,
    "gpu_count": 1,
    "models": ["GA100 [A100 SXM4 80GB]"],
    "loaded_driver_version": "580.95.05",
    "devices": [{"address": "0000:00:1e.0", "kind": "gpu", "name": "GA100 [A100 SXM4 80GB]"}],
}
RUNTIME_CDI = {
    "kubelet_engine": "containerd",
    "engines": {
        "containerd": {"nvidia_runtime": True, "default_runtime": "nvidia", "managed_by": "containerd"}
    },
    "cdi": {"enabled": True, "spec_dirs": ["/etc/cdi", "/var/run/cdi"]},
}
KUBELET_OK = {"present": True, "kubernetes_version": "1.35.2", "gates": {}}


def node(host="gpu-a", allocation="dra", gpu=None, runtime=None, kubelet=None, **changes):
    record = {
        "host": host,
        "allocation": allocation,
        "nvidia_gpu": copy.deepcopy(GPU_OK if gpu is None else gpu),
        "container_runtime": copy.deepcopy(RUNTIME_CDI if runtime is None else runtime),
        "kubelet": copy.deepcopy(KUBELET_OK if kubelet is None else kubelet),
    }
    record.update(changes)
    return record


CONTAINERD_17_NO_CDI = dict(RUNTIME_CDI, cdi={"enabled": False, "spec_dirs": []})
REFUSED = [
    ("kubelet 1.33", {"kubelet": dict(KUBELET_OK, kubernetes_version="v1.33.5")}, "needs Kubernetes 1.34.2"),
    ("kubelet 1.34.1", {"kubelet": dict(KUBELET_OK, kubernetes_version="1.34.1")}, "its kubelet is 1.34.1"),
    ("containerd 1.7 without CDI", {"runtime": CONTAINERD_17_NO_CDI}, "CDI is off in containerd"),
    ("driver 550", {"gpu": dict(GPU_OK, loaded_driver_version="550.163.01")}, "branch 565 or later"),
    ("no driver loaded", {"gpu": dict(GPU_OK, loaded_driver_version=None)}, "no NVIDIA driver loaded"),
    (
        "gate removed in 1.34",
        {"kubelet": dict(KUBELET_OK, gates={"DevicePluginCDIDevices": True})},
        "DevicePluginCDIDevices is not known to Kubernetes 1.35.2",
    ),
    (
        "DRA gate locked on in 1.35",
        {"kubelet": dict(KUBELET_OK, gates={"DynamicResourceAllocation": False})},
        "DynamicResourceAllocation is locked to true",
    ),
    (
        "DRA gate off in 1.34",
        {
            "kubelet": dict(
                KUBELET_OK, kubernetes_version="1.34.3", gates={"DynamicResourceAllocation": False}
            )
        },
        "DynamicResourceAllocation=false",
    ),
    (
        "CDI specs read elsewhere",
        {"runtime": dict(RUNTIME_CDI, cdi={"enabled": True, "spec_dirs": ["/etc/cdi"]})},
        "not from /var/run/cdi",
    ),
]


def _record(changes):
    args = {k: (None if v == "missing" else v) for k, v in changes.items()}
    record = node(**{k: v for k, v in args.items() if v is not None})
    for key, value in args.items():
        if value is None:
            record[{"gpu": "nvidia_gpu", "runtime": "container_runtime", "kubelet": "kubelet"}[key]] = None
    return record


@pytest.mark.parametrize(("case", "changes", "reason"), REFUSED, ids=[c[0] for c in REFUSED])
def test_preflight_refuses_a_node_that_cannot_take_dra_naming_host_and_reason(case, changes, reason):
    with pytest.raises(dra.DraError) as err:
        dra_preflight.preflight([_record(changes)], "1.37")
    assert "gpu-a: " in str(err.value), case
    assert reason in str(err.value), str(err.value)


UNKNOWN = [
    ("no kubelet facts", {"kubelet": "missing"}, "no ansible_facts.kubelet_gpu"),
    ("no kubelet yet", {"kubelet": {"present": False, "kubernetes_version": None}}, "no kubelet found on it"),
    ("no runtime facts", {"runtime": "missing"}, "no ansible_facts.nvidia_container_runtime"),
    (
        "runtime facts without CDI",
        {"runtime": {"kubelet_engine": "containerd"}},
        "whether containerd has CDI",
    ),
    ("no GPU facts", {"gpu": "missing"}, "no ansible_facts.nvidia_gpu"),
    ("GPU facts without a driver", {"gpu": {"present": True, "gpu_count": 1}}, "which driver is loaded"),
]


@pytest.mark.parametrize(("case", "changes", "reason"), UNKNOWN, ids=[c[0] for c in UNKNOWN])
def test_preflight_says_which_fact_is_missing_without_refusing(case, changes, reason):
    warnings = dra_preflight.preflight([_record(changes)], "1.37")
    assert len(warnings) == 1 and warnings[0].startswith("gpu-a: DRA preflight cannot check: "), case
    assert reason in warnings[0], warnings


@pytest.mark.parametrize("kubelet", ["1.34.2", "v1.35.0", "1.36.1+rke2r1", "1.37.0"])
def test_preflight_passes_a_ready_node(kubelet):
    assert dra_preflight.preflight([node(kubelet=dict(KUBELET_OK, kubernetes_version=kubelet))], "1.37") == []


def test_preflight_checks_dra_nodes_only_and_names_every_refused_host():
    old = dict(KUBELET_OK, kubernetes_version="1.30.4")
    records = [
        node("plugin-node", allocation="device-plugin", kubelet=old),
        node("dra-old", kubelet=old),
        node("dra-nocdi", runtime=CONTAINERD_17_NO_CDI),
        node("dra-good"),
    ]
    with pytest.raises(dra.DraError) as err:
        dra_preflight.preflight(records, "1.35")
    message = str(err.value)
    assert "dra-old: " in message and "dra-nocdi: " in message
    assert "plugin-node" not in message and "dra-good" not in message


def test_preflight_names_a_kubelet_newer_than_the_cluster():
    with pytest.raises(dra.DraError, match=r"newer than the cluster 1\.34\.0"):
        dra_preflight.preflight([node(kubelet=dict(KUBELET_OK, kubernetes_version="1.36.0"))], "1.34")


# --- objects per version --------------------------------------------------------------


def _validate(obj, version, name):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")  # not a Debian package (3.14 run)
    try:
        kubernetes_validate.validate(obj, f"{version}.0", strict=True)
    except kubernetes_validate.ValidationError as exc:
        pytest.fail(f"{version} {name}: {exc.message} at {list(exc.path)}")


@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_and_example_validates_strictly_for_its_version(version):
    for name, obj in {**dra_objects.manifests(version), **dra_objects.examples(version)}.items():
        _validate(obj, version, name)
        assert name.split("-")[1] == obj["kind"].lower(), name


def test_strict_validation_would_catch_a_misspelt_field():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    ds = dra_objects.manifests("1.35")["50-daemonset-dra-driver-nvidia-gpu-kubelet-plugin.yaml"]
    ds["spec"]["template"]["spec"]["nodeSelektor"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, "1.35.0", strict=True)


@pytest.mark.parametrize("version", ["1.32", "1.33.4"])
def test_before_1_34_dra_mode_is_refused_with_the_reason(version):
    with pytest.raises(dra.DraError, match=r"1\.34\.2 or later"):
        dra_objects.manifests(version)


@pytest.mark.parametrize("version", VERSIONS)
def test_device_classes_use_resource_v1_and_extended_resource_from_1_37(version):
    classes = [o for o in dra_objects.manifests(version).values() if o["kind"] == "DeviceClass"]
    assert {c["metadata"]["name"] for c in classes} == {"gpu.nvidia.com", "mig.nvidia.com"}
    assert {c["apiVersion"] for c in classes} == {"resource.k8s.io/v1"}
    gpu = next(c for c in classes if c["metadata"]["name"] == "gpu.nvidia.com")
    assert (gpu["spec"].get("extendedResourceName") == "nvidia.com/gpu") is (version == "1.37")
    assert ("30-pod-extended-resource-gpu.yaml" in dra_objects.examples(version)) is (version == "1.37")
    off = dra_objects.manifests(version, {"extended_resource": False})["40-deviceclass-gpu-nvidia-com.yaml"]
    assert "extendedResourceName" not in off["spec"]


def test_examples_claim_one_gpu_and_one_mig_slice():
    ex = dra_objects.examples("1.36")
    gpu = ex["10-resourceclaimtemplate-single-gpu.yaml"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert gpu == {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}
    mig = ex["20-resourceclaimtemplate-mig-1g-10gb.yaml"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert mig["deviceClassName"] == "mig.nvidia.com"
    assert "profile == '1g.10gb'" in mig["selectors"][0]["cel"]["expression"]
    pod = ex["21-pod-mig-1g-10gb.yaml"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "mig-1g-10gb"}]
    assert pod["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]


def _daemonset(version="1.35", given=None):
    return dra_objects.manifests(version, given)["50-daemonset-dra-driver-nvidia-gpu-kubelet-plugin.yaml"]


def test_kubelet_plugin_runs_on_the_dra_pool_with_the_host_driver_and_kubelet_paths():
    spec = _daemonset()["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.allocation": "dra"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert [c["name"] for c in spec["containers"]] == ["gpus"]  # no compute-domains container
    ctr = spec["containers"][0]
    env = {e["name"]: e.get("value") for e in ctr["env"]}
    assert env["NVIDIA_DRIVER_ROOT"] == "/" and env["CDI_ROOT"] == "/var/run/cdi"
    assert env["KUBELET_PLUGINS_DIRECTORY_PATH"] == "/var/lib/kubelet/plugins"
    assert ctr["image"] == "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.5.0"
    mounts = {m["mountPath"]: m for m in ctr["volumeMounts"]}
    assert set(mounts) == {
        "/var/lib/kubelet/plugins_registry",
        "/var/lib/kubelet/plugins",
        "/var/run/cdi",
        "/driver-root",
    }
    assert mounts["/var/lib/kubelet/plugins"]["mountPropagation"] == "Bidirectional"
    paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    assert paths["driver-root"] == "/" and paths["cdi"] == "/var/run/cdi"
    for c in spec["initContainers"] + spec["containers"]:
        assert set(c["resources"]["requests"]) == {"cpu", "memory"} == set(c["resources"]["limits"])
    assert spec["priorityClassName"] == "system-node-critical"


def test_settings_reach_the_objects_and_unknown_or_relative_ones_fail():
    given = {
        "kubelet_root": "/var/snap/microk8s/common/var/lib/kubelet",
        "cdi_root": "/etc/cdi",
        "namespace": "gpu",
        "version": "v0.5.1",
        "tolerations": [{"key": "x", "operator": "Exists"}],
    }
    ds = _daemonset(given=given)
    spec = ds["spec"]["template"]["spec"]
    assert ds["metadata"]["namespace"] == "gpu"
    assert spec["containers"][0]["image"].endswith(":v0.5.1")
    paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    assert (
        paths["plugins"] == "/var/snap/microk8s/common/var/lib/kubelet/plugins" and paths["cdi"] == "/etc/cdi"
    )
    assert {"key": "x", "operator": "Exists"} in spec["tolerations"]
    objects = dra_objects.manifests("1.35", given)
    binding = objects["30-clusterrolebinding-dra-driver-nvidia-gpu-kubelet-plugin.yaml"]
    assert binding["subjects"][0]["namespace"] == "gpu"
    with pytest.raises(dra.DraError, match="unknown key 'imagge'"):
        dra_objects.manifests("1.35", {"imagge": "x"})
    with pytest.raises(dra.DraError, match="not an absolute path"):
        dra_objects.manifests("1.35", {"cdi_root": "var/run/cdi"})


def test_objects_are_deterministic():
    first = json.dumps({v: [dra_objects.manifests(v), dra_objects.examples(v)] for v in VERSIONS})
    second = json.dumps({v: [dra_objects.manifests(v), dra_objects.examples(v)] for v in VERSIONS})
    assert first == second


# --- RBAC per version ---------------------------------------------------------------------

# The kubelet plugin's ClusterRole in the upstream chart, as data: kubernetes-sigs/dra-driver-nvidia-gpu
# deployments/helm/dra-driver-nvidia-gpu/templates/rbac-kubeletplugin.yaml @ 95932046 (the tree
# v0.5.0 was cut from), its ClusterRole and its per-namespace Role (deployments only with
# featureGates.MPSSupport).
CHART_KUBELET_PLUGIN = {
    ("resource.nvidia.com", "computedomains"): {"get", "list", "watch"},
    ("resource.k8s.io", "resourceclaims"): {"get", "list", "watch"},
    ("resource.k8s.io", "resourceslices"): {"get", "list", "watch", "create", "update", "delete"},
    ("", "nodes"): {"get", "list", "watch", "update", "patch"},
    ("", "pods"): {"get", "list", "watch"},
    ("resource.nvidia.com", "computedomaincliques"): {"get"},
    ("apps", "deployments"): {"get", "list", "watch", "create", "update", "patch", "delete"},
}
# What the pinned kubelet plugin (gpus container, v0.5.0) gets.
NEEDED = {
    ("", "nodes"): {"get"},
    ("resource.k8s.io", "resourceclaims"): {"get", "list", "watch"},
    ("resource.k8s.io", "resourceslices"): {"get", "list", "watch", "create", "update", "delete"},
}


def granted(rules):
    result = {}
    for rule in rules:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                result.setdefault((group, resource), set()).update(rule["verbs"])
    return result


@pytest.mark.parametrize("version", VERSIONS)
def test_pinned_driver_gets_only_what_it_calls_and_no_claim_status(version):
    role = dra_objects.manifests(version)["20-clusterrole-dra-driver-nvidia-gpu-kubelet-plugin.yaml"]
    rules = granted(role["rules"])
    assert rules == NEEDED
    assert not any(r.startswith("resourceclaims/") for _, r in rules)
    assert all("*" not in verbs for verbs in rules.values())


def test_kubelet_plugin_rbac_is_the_charts_less_what_is_documented_as_left_out():
    rules = granted(dra_objects.kubelet_plugin_rules("1.35"))
    claims = ("resource.k8s.io", "resourceclaims")
    assert rules[claims] == CHART_KUBELET_PLUGIN[claims] == {"get", "list", "watch"}
    for key, verbs in rules.items():
        assert verbs <= CHART_KUBELET_PLUGIN[key], key  # never more than the chart
    docs = (ROOT / "docs" / "DRA.md").read_text()
    for key, verbs in CHART_KUBELET_PLUGIN.items():
        missing = verbs - rules.get(key, set())
        if not missing:
            continue
        left_out, why = dra_objects.KUBELET_PLUGIN_LEFT_OUT[key]
        assert missing == set(left_out), key
        assert why and f"`{key[1]}`" in docs, key  # docs/DRA.md names what is left out


def test_a_driver_writing_device_status_gets_the_synthetic_subresource_from_1_36_never_binding():
    before = granted(dra_objects.claim_status_rules("1.35", writes_device_status=True))
    assert before == {("resource.k8s.io", "resourceclaims/status"): {"get", "patch", "update"}}
    for version in ("1.36", "1.37"):
        after = granted(dra_objects.claim_status_rules(version, writes_device_status=True))
        assert after[("resource.k8s.io", "resourceclaims/driver")] == {
            "associated-node:patch",
            "associated-node:update",
        }
        assert ("resource.k8s.io", "resourceclaims/binding") not in after
    assert dra_objects.claim_status_rules("1.37") == []  # the pinned driver writes none


# --- node pools ------------------------------------------------------------------------------


def test_allocation_defaults_to_the_mode_and_a_host_can_choose():
    hosts = ["a", "b"]
    assert dra.allocations(hosts, "nvidia", {}) == {"a": "device-plugin", "b": "device-plugin"}
    assert dra.allocations(hosts, "dra", {"b": ""}) == {"a": "dra", "b": "dra"}
    assert dra.allocations(hosts, "nvidia", {"b": "dra"}) == {"a": "device-plugin", "b": "dra"}
    with pytest.raises(dra.DraError, match="a: 'gpu'"):
        dra.allocations(hosts, "dra", {"a": "gpu"})
    with pytest.raises(dra.DraError, match="dra on b needs gpu_cluster_addons_mode nvidia or dra"):
        dra.allocations(hosts, "gpushare", {"b": "dra"})


def test_pools_label_nodes_and_say_who_offers_the_gpus():
    records = [{"host": "a", "node": "a", "labels": {"x": "1"}}, {"host": "b", "node": "b", "labels": {}}]
    labelled = dra.label_nodes(records, "dra", {"a": "dra", "b": "device-plugin"})
    assert labelled[0]["labels"] == {"x": "1", "nvidia.com/gpu.allocation": "dra"}
    assert [r["allocation"] for r in labelled] == ["dra", "device-plugin"]
    assert records[0]["labels"] == {"x": "1"}  # not changed in place
    assert dra.label_nodes(records[:1], "gpushare", {})[0]["allocation"] == "gpushare"
    assert dra.pools("dra", {"a": "dra"}) == {"device_plugin": False, "dra": True}
    assert dra.pools("dra", {"a": "dra", "b": "device-plugin"}) == {"device_plugin": True, "dra": True}
    assert dra.pools("nvidia", {}) == {"device_plugin": True, "dra": False}


def test_dra_mode_without_device_plugin_pools_takes_the_device_plugin_away_but_keeps_the_runtime_class():
    base = {
        "present": [
            {"file": "10-serviceaccount-nvidia-device-plugin.yaml", "template": "sa.j2"},
            {"file": "40-runtimeclass-nvidia.yaml", "template": "runtimeclass-nvidia.yaml.j2"},
        ],
        "absent": [{"file": "50-daemonset-gpushare-device-plugin.yaml", "template": "ds.j2"}],
    }
    only = dra.template_plan("dra", {"device_plugin": False, "dra": True}, base)
    assert [e["file"] for e in only["present"]] == ["40-runtimeclass-nvidia.yaml"]
    assert [e["file"] for e in only["absent"]] == [
        "10-serviceaccount-nvidia-device-plugin.yaml",
        "50-daemonset-gpushare-device-plugin.yaml",
    ]
    assert dra.template_plan("dra", {"device_plugin": True, "dra": True}, base) is base


# --- the plan module ---------------------------------------------------------------------------


def _args(mode, allocations, **facts):
    hosts = sorted(facts)
    return {
        "mode": mode,
        "kubernetes_version": "1.36",
        "gpu_hosts": hosts,
        "host_facts": facts,
        "allocations": allocations,
    }


GOOD_FACTS = {
    "nvidia_gpu": GPU_OK,
    "nvidia_container_runtime": RUNTIME_CDI,
    "kubelet_gpu": KUBELET_OK,
    "nodename": "x",
}


def test_plan_module_mixes_pools_and_publishes_who_offers_each_hosts_gpus(run_module):
    facts = {"gpu-a": dict(GOOD_FACTS, nodename="gpu-a"), "gpu-b": dict(GOOD_FACTS, nodename="gpu-b")}
    ok, result = run_module(plan_module, _args("nvidia", {"gpu-b": "dra"}, **facts), check_mode=True)
    assert ok, result
    assert [
        (n["node"], n["allocation"], n["labels"]["nvidia.com/gpu.allocation"]) for n in result["gpu_nodes"]
    ] == [("gpu-a", "device-plugin", "device-plugin"), ("gpu-b", "dra", "dra")]
    assert result["dra"]["enabled"] and result["dra"]["halves"] == {"device_plugin": True, "dra": True}
    assert "50-daemonset-nvidia-device-plugin.yaml" in [m["file"] for m in result["manifests"]["present"]]
    assert "50-daemonset-dra-driver-nvidia-gpu-kubelet-plugin.yaml" in result["dra"]["manifests"]
    assert [w["name"] for w in result["workloads"]] == [
        "nvidia-device-plugin-daemonset",
        "dra-driver-nvidia-gpu-kubelet-plugin",
    ]
    assert result["changed"] is False


def _driver_root_volume(result):
    daemonset = result["dra"]["manifests"]["50-daemonset-dra-driver-nvidia-gpu-kubelet-plugin.yaml"]
    volumes = daemonset["spec"]["template"]["spec"]["volumes"]
    return {v["name"]: v["hostPath"]["path"] for v in volumes}["driver-root"]


def test_the_dra_driver_takes_the_driver_root_the_nodes_driver_facts_report(run_module):
    image = dict(GOOD_FACTS, nvidia_driver={"driver_root": "/usr/local/nvidia", "origin": "image"})
    facts = {"gpu-a": dict(image, nodename="gpu-a"), "gpu-b": dict(image, nodename="gpu-b")}
    ok, result = run_module(plan_module, _args("dra", {}, **facts), check_mode=True)
    assert ok, result
    assert _driver_root_volume(result) == "/usr/local/nvidia"
    # a root the inventory gives wins; no fact at all is a driver in /
    given = dict(_args("dra", {}, **{"gpu-a": image}), dra={"driver_root": "/opt/nv"})
    ok, result = run_module(plan_module, given, check_mode=True)
    assert ok and _driver_root_volume(result) == "/opt/nv"
    ok, result = run_module(plan_module, _args("dra", {}, **{"gpu-a": GOOD_FACTS}), check_mode=True)
    assert ok and _driver_root_volume(result) == "/"


def test_dra_hosts_whose_drivers_live_in_different_roots_are_refused_naming_each(run_module):
    gke = dict(GOOD_FACTS, nodename="gpu-gke", nvidia_driver={"driver_root": "/home/kubernetes/bin/nvidia"})
    usr = dict(GOOD_FACTS, nodename="gpu-usr", nvidia_driver={"driver_root": "/"})
    ok, result = run_module(plan_module, _args("dra", {}, **{"gpu-gke": gke, "gpu-usr": usr}))
    assert not ok
    assert "/ on gpu-usr" in result["msg"] and "/home/kubernetes/bin/nvidia on gpu-gke" in result["msg"]
    # a host the device plugin serves does not count
    mixed = _args("dra", {"gpu-usr": "device-plugin"}, **{"gpu-gke": gke, "gpu-usr": usr})
    ok, result = run_module(plan_module, mixed, check_mode=True)
    assert ok and _driver_root_volume(result) == "/home/kubernetes/bin/nvidia"


def test_plan_module_refuses_before_anything_is_rendered(run_module):
    old = dict(GOOD_FACTS, kubelet_gpu=dict(KUBELET_OK, kubernetes_version="1.33.2"))
    ok, result = run_module(plan_module, _args("dra", {}, **{"gpu-old": old}))
    assert not ok
    assert "gpu-old: its kubelet is 1.33.2" in result["msg"]


def test_plan_module_warns_of_missing_facts_and_still_plans(run_module):
    facts = {"gpu-new": {"nvidia_gpu": dict(GPU_OK), "nodename": "gpu-new"}}
    ok, result = run_module(plan_module, _args("dra", {}, **facts))
    assert ok, result
    assert any(
        "gpu-new: DRA preflight cannot check: no ansible_facts.kubelet_gpu" in w
        for w in result["dra"]["unchecked"]
    )
    assert result["gpu_nodes"][0]["allocation"] == "dra"


def test_plan_module_without_dra_pools_takes_the_dra_objects_away(run_module):
    ok, result = run_module(plan_module, _args("nvidia", {}, **{"gpu-a": GOOD_FACTS}))
    assert ok, result
    assert not result["dra"]["enabled"] and not result["dra"]["manifests"]
    assert "50-daemonset-dra-driver-nvidia-gpu-kubelet-plugin.yaml" in result["dra"]["removed"]
    ok, result = run_module(plan_module, dict(_args("nvidia", {}), kubernetes_version="1.30"))
    assert ok and "40-deviceclass-gpu-nvidia-com.yaml" not in result["dra"]["removed"]


# --- the role, rendered through ansible-playbook -------------------------------------------------

PLAYBOOK = ROOT / "tests" / "fixtures" / "addons" / "render-dra.yml"


def _playbook(inventory, *args):
    return ansible_playbook(PLAYBOOK, inventory, "--forks", "16", *args, check=False,
                            ANSIBLE_CALLBACK_RESULT_FORMAT="json")


def _inventory(path, cases, gpus):
    common = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "gpu_cluster_addons_gpu_hosts": [],
    }
    groups = {
        "addons_render": {"hosts": cases, "vars": common},
        "addons_gpu": {"hosts": gpus, "vars": common},
    }
    path.write_text(json.dumps({"all": {"children": groups}}))
    return path


def _files(directory):
    result = {}
    for path in sorted(directory.rglob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert len(docs) == 1, path
        result[str(path.relative_to(directory))] = docs[0]
    return result


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("dra")
    gpus = {
        "dra-node": {
            "addons_facts": {
                "nvidia_gpu": GPU_OK,
                "nvidia_container_runtime": RUNTIME_CDI,
                "kubelet_gpu": KUBELET_OK,
            },
            "gpu_cluster_addons_gpu_allocation": "dra",
        },
        "plugin-node": {
            "addons_facts": {"nvidia_gpu": GPU_OK},
            "gpu_cluster_addons_gpu_allocation": "device-plugin",
        },
        "old-node": {
            "addons_facts": {
                "nvidia_gpu": GPU_OK,
                "nvidia_container_runtime": CONTAINERD_17_NO_CDI,
                "kubelet_gpu": KUBELET_OK,
            },
            "gpu_cluster_addons_gpu_allocation": "dra",
        },
    }
    cases = {
        f"dra-{v}": {
            "gpu_cluster_addons_mode": "dra",
            "gpu_cluster_addons_kubernetes_version": v,
            "gpu_cluster_addons_output_dir": str(out / f"dra-{v}"),
        }
        for v in VERSIONS
    }
    cases["mixed"] = {
        "gpu_cluster_addons_mode": "nvidia",
        "gpu_cluster_addons_kubernetes_version": "1.36",
        "gpu_cluster_addons_output_dir": str(out / "mixed"),
        "gpu_cluster_addons_gpu_hosts": ["dra-node", "plugin-node"],
    }
    cases["switch"] = dict(cases["dra-1.36"], gpu_cluster_addons_output_dir=str(out / "switch"))
    first = _playbook(_inventory(out / "inv-1.json", cases, gpus))
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    snapshot = {p: p.read_bytes() for p in out.rglob("*.yaml")}
    again = {k: v for k, v in cases.items() if k != "switch"}
    second = _playbook(_inventory(out / "inv-2.json", again, gpus), "--check")
    switched = _playbook(
        _inventory(
            out / "inv-3.json", {"switch": dict(cases["switch"], gpu_cluster_addons_mode="nvidia")}, gpus
        )
    )
    refused = _playbook(
        _inventory(
            out / "inv-4.json",
            {
                "refused": dict(
                    cases["mixed"],
                    gpu_cluster_addons_output_dir=str(out / "refused"),
                    gpu_cluster_addons_gpu_hosts=["old-node", "plugin-node"],
                )
            },
            gpus,
        )
    )
    return {
        "out": out,
        "first": first.stdout,
        "second": second,
        "snapshot": snapshot,
        "switched": switched,
        "refused": refused,
    }


@pytest.mark.controller(reason="renders the role through ansible-playbook")
@pytest.mark.parametrize("version", VERSIONS)
def test_role_renders_dra_valid_for_every_version(rendered, version):
    files = _files(rendered["out"] / f"dra-{version}")
    for name, obj in files.items():
        _validate(obj, version, name)
    assert "50-daemonset-dra-driver-nvidia-gpu-kubelet-plugin.yaml" in files
    assert "examples/11-pod-single-gpu.yaml" in files and "examples/21-pod-mig-1g-10gb.yaml" in files
    assert not any("nvidia-device-plugin" in n for n in files)  # no device-plugin pool, no device plugin


@pytest.mark.controller(reason="renders the role through ansible-playbook")
def test_role_renders_both_halves_for_mixed_pools_and_keeps_them_apart(rendered):
    files = _files(rendered["out"] / "mixed")
    for name, obj in files.items():
        _validate(obj, "1.36", name)
    plugin = files["50-daemonset-nvidia-device-plugin.yaml"]["spec"]["template"]["spec"]
    terms = plugin["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {"key": "nvidia.com/gpu.allocation", "operator": "NotIn", "values": ["dra"]} in terms[0][
        "matchExpressions"
    ]
    draspec = files["50-daemonset-dra-driver-nvidia-gpu-kubelet-plugin.yaml"]["spec"]["template"]["spec"]
    assert draspec["nodeSelector"]["nvidia.com/gpu.allocation"] == "dra"
    labels = re.findall(r'"kubectl label node (\S+) --overwrite ([^"]*)"', rendered["first"])
    wanted = {
        "dra-node": "nvidia.com/gpu.allocation=dra",
        "plugin-node": "nvidia.com/gpu.allocation=device-plugin",
    }
    for host, label in wanted.items():
        assert any(h == host and label in line.split() for h, line in labels), labels


@pytest.mark.controller(reason="renders the role through ansible-playbook")
def test_role_render_is_deterministic_and_check_mode_changes_nothing(rendered):
    second = rendered["second"]
    assert second.returncode == 0, second.stdout[-3000:]
    assert not re.findall(r"^changed: \[(\S+)\]", second.stdout, re.M), second.stdout[-3000:]
    assert {
        p: p.read_bytes()
        for p in rendered["out"].rglob("*.yaml")
        if "switch" not in str(p) and "refused" not in str(p)
    } == {p: b for p, b in rendered["snapshot"].items() if "switch" not in str(p)}


@pytest.mark.controller(reason="renders the role through ansible-playbook")
def test_switching_the_pool_back_takes_the_dra_objects_away(rendered):
    assert rendered["switched"].returncode == 0, rendered["switched"].stdout[-3000:]
    names = {p.name for p in (rendered["out"] / "switch").glob("*.yaml")}
    assert "50-daemonset-nvidia-device-plugin.yaml" in names
    assert not any("dra-driver" in n or "deviceclass" in n for n in names), names
    assert not list((rendered["out"] / "switch" / "examples").iterdir())


@pytest.mark.controller(reason="renders the role through ansible-playbook")
def test_role_refuses_a_node_that_cannot_take_dra_before_rendering(rendered):
    proc = rendered["refused"]
    assert proc.returncode != 0
    assert "old-node: CDI is off in containerd" in proc.stdout
    assert not (rendered["out"] / "refused").exists()


def test_offers_say_per_host_what_gives_its_gpus_to_the_cluster():
    nodes = [
        {"host": "t4", "allocation": "device-plugin", "sharing": "time-slicing x4"},
        {"host": "hgx", "allocation": "device-plugin", "sharing": "mig mixed"},
        {"host": "l40s", "allocation": "dra", "sharing": "dra"},
        {"host": "a10", "allocation": "hami", "sharing": "hami"},
        {"host": "old", "allocation": "gpushare", "sharing": "gpushare"},
    ]
    assert dra.offers(nodes) == {
        "t4": "device plugin, time-slicing x4", "hgx": "device plugin, mig mixed", "l40s": "DRA driver",
        "a10": "HAMi", "old": "gpushare",
    }
