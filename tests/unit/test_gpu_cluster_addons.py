"""Decisions of the gpu_cluster_addons role (module_utils/gpunode/addons/ cluster, gpu_nodes,
catalogue, rollout; the plan module)."""

import pathlib
import re

import gpu_cluster_addons_plan
import pytest
import yaml
from ansible.module_utils.gpunode.addons import catalogue, gpu_nodes, rollout
from ansible.module_utils.gpunode.addons import cluster as ga
from ansible.module_utils.gpunode.addons import device_plugin_config as dpc
from conftest import shared_files

ROLE = pathlib.Path(__file__).resolve().parents[2] / "roles" / "gpu_cluster_addons"

CP = "node-role.kubernetes.io/control-plane"
MASTER = "node-role.kubernetes.io/master"
RKE1 = "node-role.kubernetes.io/controlplane"


def node(name, labels=None, taints=None, allocatable=None):
    return {
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {"taints": list(taints or [])},
        "status": {"allocatable": dict(allocatable or {})},
    }


def tolerates(tolerations, key, effect):
    """Would these tolerations let a pod onto a node tainted key:effect?"""
    for tol in tolerations:
        key_ok = (tol.get("key") == key and tol.get("operator") == "Exists") or tol.get("key") in (None, "")
        effect_ok = tol.get("effect") in (None, "", effect)
        if key_ok and effect_ok:
            return True
    return False


# --- versions ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.29", "1.29.0"),
        ("v1.28.2", "1.28.2"),
        ("v1.29.3+rke2r1", "1.29.3"),
        ("v1.27.4+k3s1", "1.27.4"),
        ("v1.28.5-eks-5e0fdde", "1.28.5"),
        ("v1.30.1-gke.1329003", "1.30.1"),
        (" 1.18.20 ", "1.18.20"),
    ],
)
def test_kube_version_reads_what_servers_report(text, expected):
    assert ga.kube_version(text) == expected


@pytest.mark.parametrize("text", ["", "latest", "1", "one.two", None])
def test_kube_version_rejects_garbage_with_the_variable_name(text):
    with pytest.raises(ga.GpuAddonsError, match="gpu_cluster_addons_kubernetes_version"):
        ga.kube_version(text)


def test_versions_compare_numerically_not_as_strings():
    # "1.9" > "1.20" as strings; 1.9 must count as older than 1.20.
    assert ga.parse_version("1.9") < ga.parse_version("1.20")
    assert ga.api_versions("1.20")["runtimeclass"] == "node.k8s.io/v1"
    assert ga.api_versions("1.19.16")["runtimeclass"] == "node.k8s.io/v1beta1"


@pytest.mark.parametrize(
    ("version", "runtimeclass", "seccomp_field", "scheduling", "ssa"),
    [
        ("1.14", "node.k8s.io/v1beta1", False, False, False),
        ("1.16", "node.k8s.io/v1beta1", False, True, False),
        ("1.18", "node.k8s.io/v1beta1", False, True, False),
        ("1.19", "node.k8s.io/v1beta1", True, True, False),
        ("1.22", "node.k8s.io/v1", True, True, True),
        ("1.35", "node.k8s.io/v1", True, True, True),
    ],
)
def test_api_versions_follow_what_each_release_serves(version, runtimeclass, seccomp_field, scheduling, ssa):
    apis = ga.api_versions(version)
    assert apis["apps"] == "apps/v1"
    assert apis["rbac"] == "rbac.authorization.k8s.io/v1"
    assert apis["runtimeclass"] == runtimeclass
    assert apis["seccomp_field"] is seccomp_field
    assert apis["runtimeclass_scheduling"] is scheduling
    assert apis["server_side_apply"] is ssa


def test_versions_older_than_supported_fail_clearly():
    with pytest.raises(ga.GpuAddonsError, match=r"1\.13\.12 is older than 1\.14"):
        ga.api_versions("v1.13.12")


def test_critical_priority_outside_kube_system_from_1_17():
    assert not ga.api_versions("1.16")["critical_priority_any_namespace"]
    assert ga.api_versions("1.17")["critical_priority_any_namespace"]


# --- control plane ------------------------------------------------------------


def test_kubeadm_modern_cluster_is_detected_by_control_plane_label():
    nodes = [
        node("cp1", {CP: ""}, [{"key": CP, "effect": "NoSchedule"}]),
        node("gpu1", {"nvidia.com/gpu.present": "true"}),
    ]
    cp = ga.control_plane(nodes)
    assert cp["label_keys"] == [CP]
    assert tolerates(cp["tolerations"], CP, "NoSchedule")
    assert cp["source"] == "detected"


def test_kubeadm_1_20_to_1_23_with_both_labels_selects_one():
    nodes = [node("cp1", {CP: "", MASTER: ""}, [{"key": MASTER, "effect": "NoSchedule"}]), node("w1")]
    cp = ga.control_plane(nodes)
    assert cp["label_keys"] == [CP]
    assert tolerates(cp["tolerations"], MASTER, "NoSchedule")


def test_old_kubeadm_cluster_uses_master_label():
    nodes = [node("m1", {MASTER: ""}, [{"key": MASTER, "effect": "NoSchedule"}]), node("w1")]
    cp = ga.control_plane(nodes)
    assert cp["label_keys"] == [MASTER]
    assert tolerates(cp["tolerations"], MASTER, "NoSchedule")


def test_rke1_cluster_uses_controlplane_true_and_tolerates_etcd():
    nodes = [
        node("rke-cp", {RKE1: "true", "node-role.kubernetes.io/etcd": "true"},
             [{"key": RKE1, "value": "true", "effect": "NoSchedule"},
              {"key": "node-role.kubernetes.io/etcd", "value": "true", "effect": "NoExecute"}]),
        node("rke-worker", {"node-role.kubernetes.io/worker": "true"}),
    ]
    cp = ga.control_plane(nodes)
    assert cp["label_keys"] == [RKE1]
    assert tolerates(cp["tolerations"], RKE1, "NoSchedule")
    assert tolerates(cp["tolerations"], "node-role.kubernetes.io/etcd", "NoExecute")


def test_rke2_server_tainted_critical_addons_only_is_tolerated():
    nodes = [
        node("srv", {CP: "true", MASTER: "true", "node-role.kubernetes.io/etcd": "true"},
             [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NoExecute"}]),
        node("agent"),
    ]
    cp = ga.control_plane(nodes)
    assert cp["label_keys"] == [CP]
    assert tolerates(cp["tolerations"], "CriticalAddonsOnly", "NoExecute")


def test_single_node_cluster_runs_anywhere_and_tolerates_its_taint():
    for labels in ({CP: ""}, {}, {MASTER: "true"}):
        cp = ga.control_plane([node("only", labels, [{"key": CP, "effect": "NoSchedule"}])])
        assert cp["label_keys"] == []
        assert tolerates(cp["tolerations"], CP, "NoSchedule")
        assert tolerates(cp["tolerations"], MASTER, "NoSchedule")


def test_managed_cluster_without_control_plane_nodes_warns():
    cp = ga.control_plane([node("w1"), node("w2")])
    assert cp["label_keys"] == []
    assert cp["warnings"] and "node port" in cp["warnings"][0]


def test_unrelated_taints_on_control_plane_are_not_tolerated():
    unreachable = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    nodes = [node("cp", {CP: ""}, [unreachable]), node("w")]
    cp = ga.control_plane(nodes)
    assert not tolerates(cp["tolerations"], "node.kubernetes.io/unreachable", "NoExecute")


@pytest.mark.parametrize(
    ("distribution", "version", "key"),
    [
        ("kubeadm", "1.18", MASTER),
        ("kubeadm", "1.19.16", MASTER),
        ("kubeadm", "1.20", CP),
        ("kubeadm", "1.30", CP),
        ("rke", "1.26", RKE1),
        ("rke2", "1.29", CP),
        ("k3s", "1.29", CP),
    ],
)
def test_distribution_picks_its_label_when_rendering(distribution, version, key):
    cp = ga.control_plane(None, distribution, version)
    assert cp["label_keys"] == [key]
    assert cp["source"] == "distribution"


def test_auto_without_nodes_matches_every_known_distribution():
    cp = ga.control_plane(None, "auto", "1.30")
    assert set(cp["label_keys"]) == {CP, MASTER, RKE1}
    for key in (CP, MASTER, RKE1):
        assert tolerates(cp["tolerations"], key, "NoSchedule")


def test_explicit_label_wins_over_detection():
    nodes = [node("cp", {CP: ""}), node("infra", {"example.com/infra": "yes"})]
    cp = ga.control_plane(nodes, "auto", "1.30", "example.com/infra=yes")
    assert cp["label_keys"] == ["example.com/infra"]
    assert cp["source"] == "variable"


def test_unknown_distribution_fails_with_choices():
    with pytest.raises(ga.GpuAddonsError, match="kubeadm"):
        ga.control_plane(None, "openshift", "1.30")


def test_tolerations_are_sorted_and_unique():
    cp = ga.control_plane(None, "auto", "1.30")
    keys = [(t["key"], t.get("effect", "")) for t in cp["tolerations"]]
    assert keys == sorted(set(keys))


# --- node labels ------------------------------------------------------------------


T4_FACTS = {
    "present": True,
    "gpu_count": 1,
    "models": ["TU104GL [Tesla T4]"],
    "devices": [
        {"address": "0000:00:1e.0", "kind": "gpu", "name": "TU104GL [Tesla T4]", "device_id": "1eb8"},
    ],
}

A100_FACTS = {
    "present": True,
    "gpu_count": 8,
    "nvswitch_count": 6,
    "models": ["GA100 [A100 SXM4 40GB]"],
    "devices": [{"address": f"0000:{i:02x}:00.0", "kind": "gpu", "name": "GA100 [A100 SXM4 40GB]"}
                for i in range(8)]
    + [{"address": "0000:c0:00.0", "kind": "nvswitch", "name": "GA100 [A100 NVSwitch]"}],
}


@pytest.mark.parametrize(
    ("model", "product", "accelerator"),
    [
        ("TU104GL [Tesla T4]", "Tesla-T4", "nvidia-tesla-t4"),
        ("GA100 [A100 SXM4 40GB]", "A100-SXM4-40GB", "nvidia-a100-sxm4-40gb"),
        # one device ID, two boards: the name keeps both (a TITAN Xp is not labelled TITAN X)
        ("GP102 [TITAN X / TITAN Xp]", "TITAN-X-TITAN-Xp", "nvidia-titan-x-titan-xp"),
        ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3", "nvidia-h100-80gb-hbm3"),
        ("Device 2330", "Device-2330", "nvidia-device-2330"),
    ],
)
def test_labels_from_pci_names(model, product, accelerator):
    facts = {"present": True, "gpu_count": 1, "models": [model],
             "devices": [{"address": "0000:01:00.0", "kind": "gpu", "name": model}]}
    labels = gpu_nodes.node_labels(facts, "nvidia")
    assert labels["nvidia.com/gpu.product"] == product
    assert labels["accelerator"] == accelerator


def test_label_values_are_valid_kubernetes_label_values():
    valid = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
    for model in ["GK210GL [Tesla K80]", "AD102 [GeForce RTX 4090 D]", "x" * 100 + " [" + "y" * 100 + "]",
                  "GH100 [H100 SXM5 80GB] (rev a1)", "  [--weird__ name..]  "]:
        labels = gpu_nodes.node_labels({"present": True, "gpu_count": 1, "models": [model]}, "gpushare")
        for key in ("nvidia.com/gpu.product", "accelerator"):
            if key in labels:
                assert valid.match(labels[key]) and len(labels[key]) <= 63, (model, labels[key])


def test_gpushare_mode_adds_the_device_plugin_selector_label():
    labels = gpu_nodes.node_labels(A100_FACTS, "gpushare")
    assert labels["gpushare"] == "true"
    assert labels["nvidia.com/gpu.count"] == "8"  # GPUs only, not the NVSwitches
    assert labels["nvidia.com/gpu.present"] == "true"


def test_nvidia_mode_removes_a_leftover_gpushare_label():
    assert gpu_nodes.node_labels(T4_FACTS, "nvidia")["gpushare"] is None


def test_extra_labels_are_added_and_can_remove():
    labels = gpu_nodes.node_labels(T4_FACTS, "nvidia", {"team": "ml", "accelerator": None})
    assert labels["team"] == "ml"
    assert labels["accelerator"] is None


def record(host, facts, nodename=None, node_name="", runtime=None):
    return {"host": host, "node_name": node_name, "nodename": nodename or "", "nvidia_gpu": facts,
            "container_runtime": runtime}


def test_gpu_nodes_use_the_kubelet_node_name():
    hosts = [record("gpu-a", T4_FACTS, "GPU-A.example.com"), record("gpu-b", A100_FACTS, node_name="b-node")]
    nodes = gpu_nodes.gpu_nodes(hosts, "gpushare")
    assert [n["node"] for n in nodes] == ["b-node", "gpu-a.example.com"]
    assert {n["host"]: n["gpu_count"] for n in nodes} == {"gpu-a": 1, "gpu-b": 8}
    assert all(n["labels"]["gpushare"] == "true" for n in nodes)


def test_gpu_hosts_without_facts_are_named_in_the_error():
    hosts = [record("gpu-a", T4_FACTS), record("gpu-b", None), record("gpu-c", None)]
    with pytest.raises(ga.GpuAddonsError, match=r"no ansible_facts\.nvidia_gpu for gpu-b, gpu-c"):
        gpu_nodes.gpu_nodes(hosts, "nvidia")


def test_gpu_host_whose_facts_found_no_gpu_is_an_error():
    with pytest.raises(ga.GpuAddonsError, match="no NVIDIA GPU detected on cpu-only"):
        gpu_nodes.gpu_nodes([record("cpu-only", {"present": False, "gpu_count": 0})], "nvidia")


def test_two_hosts_on_one_node_name_is_an_error():
    hosts = [record(h, T4_FACTS, "same") for h in ("a", "b")]
    with pytest.raises(ga.GpuAddonsError, match="several hosts map to node same"):
        gpu_nodes.gpu_nodes(hosts, "nvidia")


# --- the runtime the device plugin pods run with --------------------------------------

CONTAINERD_NVIDIA = {"kubelet_engine": "containerd",
                     "engines": {"containerd": {"nvidia_runtime": True, "default_runtime": "nvidia"}}}
CONTAINERD_RUNC = {"kubelet_engine": "containerd",
                   "engines": {"containerd": {"nvidia_runtime": True, "default_runtime": "runc"},
                               "docker": {"nvidia_runtime": True, "default_runtime": "nvidia"}}}
DOCKER_NVIDIA = {"kubelet_engine": "docker",
                 "engines": {"docker": {"nvidia_runtime": True, "default_runtime": "nvidia"}}}


def test_no_runtime_class_where_every_kubelet_engine_defaults_to_nvidia():
    decision = gpu_nodes.pod_runtime_class([record("a", T4_FACTS, runtime=CONTAINERD_NVIDIA),
                                     record("b", T4_FACTS, runtime=DOCKER_NVIDIA)])
    assert decision["name"] is None
    assert "every GPU node" in decision["reasons"][0]


def test_one_node_whose_kubelet_engine_defaults_to_runc_needs_the_runtime_class():
    # Docker on that node defaults to nvidia, but its kubelet talks to containerd.
    decision = gpu_nodes.pod_runtime_class([record("a", T4_FACTS, runtime=CONTAINERD_NVIDIA),
                                     record("b", T4_FACTS, runtime=CONTAINERD_RUNC)])
    assert decision == {"name": "nvidia",
                        "reasons": ["b: its kubelet's engine containerd runs runc by default"]}


@pytest.mark.parametrize(
    ("runtime", "reason"),
    [
        (None, "no ansible_facts.nvidia_container_runtime"),
        ({"kubelet_engine": None, "engines": {}}, "container engine of its kubelet is not known"),
        ({"kubelet_engine": "cri-o", "engines": {"docker": {"default_runtime": "nvidia"}}},
         "cri-o runs an unknown"),
    ],
)
def test_what_is_not_known_gets_the_runtime_class(runtime, reason):
    decision = gpu_nodes.pod_runtime_class([record("a", T4_FACTS, runtime=runtime)])
    assert decision["name"] == "nvidia" and reason in decision["reasons"][0]


def test_no_gpu_host_gets_the_runtime_class_and_the_setting_wins():
    assert gpu_nodes.pod_runtime_class([])["name"] == "nvidia"
    never = gpu_nodes.pod_runtime_class([record("a", T4_FACTS, runtime=CONTAINERD_RUNC)], "never")
    assert never["name"] is None
    always = gpu_nodes.pod_runtime_class([record("a", T4_FACTS, runtime=CONTAINERD_NVIDIA)], "always")
    assert always["name"] == "nvidia"
    with pytest.raises(ga.GpuAddonsError, match="gpu_cluster_addons_pod_runtime_class"):
        gpu_nodes.pod_runtime_class([], "sometimes")


def test_the_plan_module_decides_from_hostvars_facts(run_module):
    ok, result = run_module(gpu_cluster_addons_plan, {
        "mode": "nvidia",
        "kubernetes_version": "v1.37.1",
        "gpu_hosts": ["t4", "h100"],
        "host_facts": {"t4": {"nvidia_gpu": T4_FACTS, "nvidia_container_runtime": CONTAINERD_NVIDIA,
                              "nodename": "T4"},
                       "h100": {"nvidia_gpu": A100_FACTS, "nvidia_container_runtime": CONTAINERD_RUNC}},
        "node_names": {"h100": "hgx-1"},
    })
    assert ok, result
    assert result["version"] == "1.37.1" and result["resource"] == "nvidia.com/gpu"
    assert [n["node"] for n in result["gpu_nodes"]] == ["hgx-1", "t4"]
    assert result["runtime_class_name"] == "nvidia"
    assert result["runtime_class_reasons"] == ["h100: its kubelet's engine containerd runs runc by default"]
    assert "40-runtimeclass-nvidia.yaml" in [m["file"] for m in result["manifests"]["present"]]
    assert result["workloads"] == [{"kind": "DaemonSet", "name": "nvidia-device-plugin-daemonset"}]


def test_the_plan_module_refuses_applying_without_gpu_hosts(run_module):
    ok, result = run_module(gpu_cluster_addons_plan, {"mode": "gpushare", "kubernetes_version": "1.30",
                                                      "require_gpu_hosts": True})
    assert not ok and "gpu_cluster_addons_gpu_hosts" in result["msg"]
    ok, result = run_module(gpu_cluster_addons_plan, {"mode": "nvidia", "kubernetes_version": "1.16",
                                                      "namespace": "gpu"})
    assert not ok and "kube-system only" in result["msg"]


def test_shorthand_variables_make_the_same_config_as_before():
    """The older variables are a shorthand for gpu_cluster_addons_device_plugin_config: one implementation."""
    assert dpc.shorthand()["flags"]["migStrategy"] == "none"
    assert "sharing" not in dpc.shorthand(replicas=1)
    shared = dpc.shorthand("mixed", 4, True)
    assert shared["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert shared["sharing"]["timeSlicing"]["renameByDefault"] is True
    assert not hasattr(ga, "nvidia_device_plugin_config")


@pytest.mark.parametrize("path", shared_files("pci", "lspci-nn-*.txt"), ids=lambda p: p.name)
def test_labels_from_real_lspci_names(path):
    """Names as lspci -nn prints them (from pci.ids) give valid labels."""
    names = []
    for line in path.read_text(errors="replace").splitlines():
        match = re.search(r"NVIDIA Corporation (.+?) \[10de:([0-9a-f]{4})\]", line)
        if match and ("3D controller" in line or "VGA" in line):
            names.append(match.group(1))
    if not names:
        pytest.skip("no NVIDIA GPU lines")
    facts = {"present": True, "gpu_count": len(names), "models": sorted(set(names)),
             "devices": [{"address": str(i), "kind": "gpu", "name": n} for i, n in enumerate(names)]}
    labels = gpu_nodes.node_labels(facts, "nvidia")
    assert labels["nvidia.com/gpu.count"] == str(len(names))
    assert re.match(r"^[A-Za-z0-9][-A-Za-z0-9_.]*[A-Za-z0-9]$", labels["nvidia.com/gpu.product"])
    assert labels["accelerator"].startswith("nvidia-")


# --- manifest plan ----------------------------------------------------------------


def test_switching_mode_removes_the_other_device_plugin():
    nvidia = catalogue.manifest_plan("nvidia", "1.30")
    gpushare = catalogue.manifest_plan("gpushare", "1.30")
    assert "50-daemonset-gpushare-device-plugin.yaml" in {m["file"] for m in nvidia["absent"]}
    assert "50-daemonset-nvidia-device-plugin.yaml" in {m["file"] for m in gpushare["absent"]}


ALL_OPTIONS = (
    "nvidia-named", "nvidia-mps", "hami-deployment", "hami-extender", "hami-webhook", "hami-certgen",
)


@pytest.mark.parametrize("mode", [m for m in ga.MODES if m != "dra"])
def test_every_mode_removes_every_file_of_the_others(mode):
    """Modes are exclusive: what any other mode (or an option turned off) writes, this one removes."""
    everything = set()
    for other in ga.MODES:
        plan = catalogue.manifest_plan(other, "1.30", options=ALL_OPTIONS, readiness_rule=True)
        everything |= {m["file"] for m in plan["present"]}
    plan = catalogue.manifest_plan(mode, "1.30")
    present, absent = {m["file"] for m in plan["present"]}, {m["file"] for m in plan["absent"]}
    assert not present & absent
    assert present | absent == everything
    assert "40-runtimeclass-nvidia.yaml" in present  # every mode's


@pytest.mark.parametrize(("options", "present", "absent"), [
    ((), set(),
     {"30-clusterrolebinding-nvidia-device-plugin.yaml", "50-daemonset-nvidia-mps-control-daemon.yaml"}),
    (("nvidia-named",), {"20-clusterrole-nvidia-device-plugin.yaml"},
     {"50-daemonset-nvidia-mps-control-daemon.yaml"}),
    (("nvidia-mps", "hami-extender"), {"50-daemonset-nvidia-mps-control-daemon.yaml"},
     {"20-configmap-hami-kube-scheduler-extender.yaml", "20-clusterrole-nvidia-device-plugin.yaml"}),
])
def test_options_add_their_files_and_remove_them_when_off(options, present, absent):
    plan = catalogue.manifest_plan("nvidia", "1.30", options=options)
    assert present <= {m["file"] for m in plan["present"]}
    assert absent <= {m["file"] for m in plan["absent"]}


def test_hami_scheduler_placement_picks_its_files():
    own = {m["file"] for m in catalogue.manifest_plan("hami", "1.30", options=["hami-deployment"])["present"]}
    ext = {m["file"] for m in catalogue.manifest_plan("hami", "1.30", options=["hami-extender"])["present"]}
    assert {"20-configmap-hami-scheduler.yaml", "30-clusterrolebinding-hami-scheduler-kube.yaml"} <= own - ext
    assert ext - own == {"20-configmap-hami-kube-scheduler-extender.yaml"}
    assert {"50-daemonset-hami-device-plugin.yaml", "50-deployment-hami-scheduler.yaml"} <= own & ext


def test_plan_files_are_in_apply_order_and_templates_exist():
    for mode in ga.MODES:
        present = catalogue.manifest_plan(mode, "1.30", options=ALL_OPTIONS)["present"]
        files = [m["file"] for m in present]
        if files == ["40-runtimeclass-nvidia.yaml"]:
            continue  # dra: its files are module_utils/gpunode/addons/dra_objects.py's
        assert files == sorted(files)
        # ServiceAccounts and RBAC come before the workloads that use them.
        assert files[0].startswith("10-serviceaccount-")
        for entry in present:
            assert (ROLE / "templates" / entry["template"]).is_file()


def test_runtime_class_off_is_neither_written_nor_deleted():
    plan = catalogue.manifest_plan("nvidia", "1.30", runtime_class=False)
    every = [m["file"] for m in plan["present"] + plan["absent"]]
    assert "40-runtimeclass-nvidia.yaml" not in every


# --- readiness ----------------------------------------------------------------------


def test_daemonset_ready_only_when_every_pod_is():
    ds = {"metadata": {"generation": 2}, "status": {"observedGeneration": 2, "desiredNumberScheduled": 3,
                                                     "numberReady": 2, "updatedNumberScheduled": 3}}
    status = rollout.workload_status([ds], "DaemonSet", "nvidia-device-plugin-daemonset")
    assert not status["ready"] and "2/3 pods ready" in status["message"]
    ds["status"]["numberReady"] = 3
    assert rollout.workload_status([ds], "DaemonSet", "x")["ready"]


def test_daemonset_on_no_node_says_the_nodes_are_not_labelled():
    ds = {"status": {"desiredNumberScheduled": 0, "numberReady": 0}}
    status = rollout.workload_status([ds], "DaemonSet", "gpushare-device-plugin-ds")
    assert not status["ready"] and "labelled" in status["message"]


def test_deployment_and_missing_objects():
    assert not rollout.workload_status([], "Deployment", "gpushare-schd-extender")["ready"]
    dep = {"spec": {"replicas": 1}, "status": {"availableReplicas": 1, "updatedReplicas": 1}}
    assert rollout.workload_status([dep], "Deployment", "gpushare-schd-extender")["ready"]
    stale = {"metadata": {"generation": 3}, "spec": {"replicas": 1},
             "status": {"observedGeneration": 2, "availableReplicas": 1, "updatedReplicas": 1}}
    assert not rollout.workload_status([stale], "Deployment", "x")["ready"]


def test_allocatable_names_each_node_missing_its_resource():
    nodes = [
        node("gpu-a", allocatable={"nvidia.com/gpu": "4"}),
        node("gpu-b", allocatable={"nvidia.com/gpu": "0"}),
        node("gpu-c", allocatable={"cpu": "8"}),
    ]
    status = rollout.allocatable_status(nodes, ["gpu-a", "gpu-b", "gpu-c", "gpu-d"], "nvidia.com/gpu")
    assert not status["ready"]
    assert status["missing"] == ["gpu-b", "gpu-c", "gpu-d"]
    assert "gpu-d: no such node" in status["message"]
    assert rollout.allocatable_status(nodes[:1], ["gpu-a"], "nvidia.com/gpu")["ready"]


def test_gpushare_memory_quantity_counts():
    nodes = [node("g", allocatable={"aliyun.com/gpu-mem": "15", "aliyun.com/gpu-count": "1"})]
    assert rollout.allocatable_status(nodes, ["g"], "aliyun.com/gpu-mem")["ready"]



# --- role interface -------------------------------------------------------------------


def test_every_option_has_a_default():
    # each default against its declaration: test_role_interfaces.py, over every role
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())
    assert set(defaults) == set(specs["argument_specs"]["main"]["options"])


# --------------------------------------------------------------------------
# The device plugin's driver root (an image's driver under /usr/local/nvidia)
# --------------------------------------------------------------------------

def _plan_with_roots(run_module, roots, mode="nvidia", allocations=None, config=None):
    """The plan module over one T4 host per ``roots`` entry (host -> driver_root or None)."""
    facts = {host: {"nvidia_gpu": T4_FACTS, "nvidia_container_runtime": CONTAINERD_NVIDIA, "nodename": host,
                    **({"nvidia_driver": {"driver_root": root, "origin": "image"}} if root else {})}
             for host, root in roots.items()}
    args = {"mode": mode, "kubernetes_version": "1.35", "gpu_hosts": sorted(roots), "host_facts": facts,
            "allocations": allocations or {},
            "images": {"nvidia_device_plugin": {"repository": "nvcr.io/nvidia/k8s-device-plugin",
                                                "tag": "v0.20.0"}}}
    if config:
        args["device_plugin_config"] = config
    return run_module(gpu_cluster_addons_plan, args, check_mode=True)


def test_the_device_plugin_takes_the_driver_root_its_hosts_driver_facts_report(run_module):
    ok, result = _plan_with_roots(run_module, {"a": "/usr/local/nvidia", "b": "/usr/local/nvidia"})
    assert ok, result
    assert result["nvidia_device_plugin"]["driver_root"] == "/usr/local/nvidia"
    # a driver on the host, or no fact at all: / (the plugin's own default; nothing is mounted)
    ok, result = _plan_with_roots(run_module, {"a": "/", "b": None})
    assert ok and result["nvidia_device_plugin"]["driver_root"] == "/"


def test_device_plugin_hosts_in_different_driver_roots_are_refused_naming_each(run_module):
    ok, result = _plan_with_roots(run_module, {"gke": "/home/kubernetes/bin/nvidia", "usr": "/"})
    assert not ok
    assert "/ on usr; /home/kubernetes/bin/nvidia on gke" in result["msg"]
    # a host DRA serves is not the device plugin's
    ok, result = _plan_with_roots(run_module, {"gke": "/home/kubernetes/bin/nvidia", "usr": "/"},
                                  allocations={"gke": "dra"})
    assert ok and result["nvidia_device_plugin"]["driver_root"] == "/"


def test_the_config_s_nvidia_driver_root_wins_and_must_be_one_word_path(run_module):
    config = {"version": "v1", "flags": {"nvidiaDriverRoot": "/opt/nvidia"}}
    ok, result = _plan_with_roots(run_module, {"a": "/usr/local/nvidia"}, config=config)
    assert ok and result["nvidia_device_plugin"]["driver_root"] == "/opt/nvidia"
    hostile = {"version": "v1", "flags": {"nvidiaDriverRoot": "/opt/nv idia\n"}}
    ok, result = _plan_with_roots(run_module, {"a": "/"}, config=hostile)
    assert not ok and "driver root" in result["msg"] and "'/opt/nv idia\\n'" in result["msg"]


def test_modes_without_nvidia_s_device_plugin_mount_no_driver_root(run_module):
    ok, result = _plan_with_roots(run_module, {"a": "/usr/local/nvidia", "b": "/"}, mode="gpushare")
    assert ok and result["nvidia_device_plugin"]["driver_root"] == "/"


def _daemonset(plan, **overrides):
    """The device plugin DaemonSet the role's template renders for ``plan`` (Ansible's templating)."""
    from ansible.parsing.dataloader import DataLoader  # noqa: PLC0415 (controller only)
    from ansible.template import Templar, trust_as_template  # noqa: PLC0415 (controller only)

    loader = DataLoader()
    variables = {"ansible_managed": "Managed by gpunode", "ansible_check_mode": False,
                 "__gpu_cluster_addons_plan": plan}
    for name in ("defaults", "vars"):
        variables.update(loader.load_from_file(str(ROLE / name / "main.yml"), trusted_as_template=True))
    variables.update(overrides)
    text = trust_as_template((ROLE / "templates" / "daemonset-nvidia-device-plugin.yaml.j2").read_text())
    return yaml.safe_load(Templar(loader=loader, variables=variables).template(text))


@pytest.mark.controller(reason="renders the role's template through Ansible's templating")
def test_the_daemonset_mounts_an_image_s_driver_root_as_nvidia_s_chart_and_nothing_for_slash(run_module):
    ok, image = _plan_with_roots(run_module, {"a": "/usr/local/nvidia"})
    ok_host, host = _plan_with_roots(run_module, {"a": "/"})
    assert ok and ok_host
    pod = _daemonset(image)["spec"]["template"]["spec"]
    (plugin,) = [c for c in pod["containers"] if c["name"] == "nvidia-device-plugin-ctr"]
    assert {"name": "NVIDIA_DRIVER_ROOT", "value": "/usr/local/nvidia"} in plugin["env"]
    assert {"name": "driver-root", "mountPath": "/driver-root", "readOnly": True} in plugin["volumeMounts"]
    volume = {"name": "driver-root", "hostPath": {"path": "/usr/local/nvidia", "type": "Directory"}}
    assert volume in pod["volumes"]
    # a driver on the host: the DaemonSet main rendered before, unchanged (no env, mount or volume)
    plain = _daemonset(host)
    assert "driver-root" not in yaml.safe_dump(plain) and "NVIDIA_DRIVER_ROOT" not in yaml.safe_dump(plain)
