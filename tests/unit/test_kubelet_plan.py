"""kubelet_feature_gates without a file named: it finds the kubelet, decides, and compares with what runs.

Each test builds a node in a temporary folder: a kubelet binary that prints its
version, its systemd unit files, and a /proc with the running kubelet process
(its command line, cgroup and start time) and the cgroup mounts. The module
gets the unit's files and the /proc root as arguments (what `systemctl show`
and /proc give on a real node).
"""

import json
import os
import time

import kubelet_feature_gates
import pytest
import yaml
from ansible.module_utils.gpunode.host.processes import scan, unit_of_cgroup
from ansible.module_utils.gpunode.host.systemd import parse_show
from ansible.module_utils.gpunode.kubelet import config as kubelet_config
from ansible.module_utils.gpunode.kubelet import discovery as kubelet_discovery

MOUNT_V2 = "24 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"
MOUNT_V1 = (
    "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs ro\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
)


class Node:
    """A simulated node in tmp_path (every absolute path of the node lives under it)."""

    def __init__(self, root, version="1.37.1", cgroup=MOUNT_V2):
        self.root = root
        self.kubelet = self.path("/usr/bin/kubelet")
        self.write("/usr/bin/kubelet", f"#!/bin/sh\necho 'Kubernetes v{version}'\n", mode=0o755)
        self.write("/proc/self/mountinfo", cgroup)
        self.units = []

    def path(self, path):
        return str(self.root) + path

    def write(self, path, text, mode=0o644):
        full = self.path(path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(full, mode)
        return full

    def read(self, path):
        with open(self.path(path), encoding="utf-8") as handle:
            return handle.read()

    def unit(self, path, text):
        self.units.append(self.write(path, text.replace("@", str(self.root))))

    def run(self, args, started="before"):
        """A running kubelet with ``args``; started long before the files, or after them."""
        boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        hertz = os.sysconf("SC_CLK_TCK")
        ticks = 100 if started == "before" else int((boot + 3600) * hertz)
        argv = [self.kubelet, *[a.replace("@", str(self.root)) for a in args]]
        self.write("/proc/4242/comm", "kubelet\n")
        self.write("/proc/4242/cmdline", "\0".join(argv) + "\0")
        self.write("/proc/4242/cgroup", "0::/system.slice/kubelet.service\n")
        self.write("/proc/4242/stat", f"4242 (kubelet) S 1 {' '.join(['0'] * 17)} {ticks} 0 0\n")

    def args(self, **extra):
        return {
            "proc_root": self.path("/proc"),
            "unit_files": self.units,
            "service": "kubelet.service",
            **extra,
        }


UNIT = "[Service]\nExecStart=@/usr/bin/kubelet\nRestart=always\n"
KUBEADM_DROPIN = (
    "[Service]\n"
    'Environment="KUBELET_CONFIG_ARGS=--config=@/var/lib/kubelet/config.yaml"\n'
    "EnvironmentFile=-@/var/lib/kubelet/kubeadm-flags.env\n"
    "EnvironmentFile=-@/etc/default/kubelet\n"
    "ExecStart=\n"
    "ExecStart=@/usr/bin/kubelet $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS\n"
)
CONFIG = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailCgroupV1: false\n"


def kubeadm_node(tmp_path, version="1.37.1", config=CONFIG, kubeadm_flags="", cgroup=MOUNT_V2):
    node = Node(tmp_path, version, cgroup)
    node.unit("/lib/systemd/system/kubelet.service", UNIT)
    node.unit("/etc/systemd/system/kubelet.service.d/10-kubeadm.conf", KUBEADM_DROPIN)
    node.write("/var/lib/kubelet/config.yaml", config)
    node.write("/var/lib/kubelet/kubeadm-flags.env", f'KUBELET_KUBEADM_ARGS="{kubeadm_flags}"\n')
    node.write("/etc/default/kubelet", "KUBELET_EXTRA_ARGS=\n")
    return node


def test_kubeadm_node_gets_its_gates_in_the_config_and_a_restart(run_module, tmp_path):
    node = kubeadm_node(tmp_path)
    node.run(["--config=@/var/lib/kubelet/config.yaml"], started="after")
    ok, result = run_module(
        kubelet_feature_gates, node.args(gates={"DRAConsumableCapacity": True}, backup=True)
    )
    assert ok, result
    assert result["target"] == "config"
    assert result["files"] == [node.path("/var/lib/kubelet/config.yaml")]
    assert yaml.safe_load(node.read("/var/lib/kubelet/config.yaml"))["featureGates"] == {
        "DRAConsumableCapacity": True
    }
    assert result["restart_required"] and result["service"] == "kubelet.service"
    assert not result["daemon_reload"]
    facts = result["ansible_facts"]["kubelet_gpu"]
    assert facts == {
        "present": True,
        "kubernetes_version": "1.37.1",
        "target": "config",
        "files": [node.path("/var/lib/kubelet/config.yaml")],
        "gates": {"DRAConsumableCapacity": True},
        "service": "kubelet.service",
        "restart_pending": True,
    }
    assert result["restore"] == [
        {"path": node.path("/var/lib/kubelet/config.yaml"), "backup": result["backup_file"]}
    ]


def test_a_run_killed_before_the_restart_is_finished_by_the_next(run_module, tmp_path):
    node = kubeadm_node(tmp_path)
    node.run(["--config=@/var/lib/kubelet/config.yaml"], started="before")
    args = node.args(gates={"DRAConsumableCapacity": True}, backup=True)
    ok, first = run_module(kubelet_feature_gates, args)
    assert ok and first["changed"]
    # the run stops here (no restart); the kubelet still runs from before the write
    ok, again = run_module(kubelet_feature_gates, args, check_mode=True)
    assert ok and not again["changed"]
    assert again["restart_required"]
    assert "started before" in again["stale"][0]
    # the backup of the interrupted run is what a failed restart would put back
    assert again["restore"] == [
        {"path": node.path("/var/lib/kubelet/config.yaml"), "backup": first["backup_file"]}
    ]
    # once the kubelet runs from after the write, nothing is left to do
    node.run(["--config=@/var/lib/kubelet/config.yaml"], started="after")
    ok, done = run_module(kubelet_feature_gates, args)
    assert ok and not done["changed"] and not done["restart_required"] and done["stale"] == []
    assert done["ansible_facts"]["kubelet_gpu"]["restart_pending"] is False


def test_config_dir_gets_a_dropin_and_the_main_files_stay(run_module, tmp_path):
    node = kubeadm_node(
        tmp_path, kubeadm_flags="--config-dir=@/etc/kubernetes/kubelet.conf.d".replace("@", str(tmp_path))
    )
    node.write(
        "/etc/kubernetes/kubelet.conf.d/10-site.conf",
        "kind: KubeletConfiguration\nfeatureGates:\n  A: true\n",
    )
    before = node.read("/var/lib/kubelet/config.yaml")
    ok, result = run_module(
        kubelet_feature_gates, node.args(gates={"DRAPartitionableDevices": True}, gpu_node=True), diff=True
    )
    assert ok, result
    dropin = node.path("/etc/kubernetes/kubelet.conf.d/90-gpunode-feature-gates.conf")
    assert result["target"] == "config_dir" and result["files"] == [dropin]
    assert yaml.safe_load(node.read("/etc/kubernetes/kubelet.conf.d/90-gpunode-feature-gates.conf"))[
        "featureGates"
    ] == {"DRAPartitionableDevices": True}
    assert node.read("/var/lib/kubelet/config.yaml") == before
    ok, again = run_module(
        kubelet_feature_gates, node.args(gates={"DRAPartitionableDevices": True}, gpu_node=True)
    )
    assert ok and not again["changed"]


def test_a_later_dropin_that_overrides_the_gate_is_an_error(run_module, tmp_path):
    flags = "--config-dir=" + str(tmp_path) + "/etc/kubernetes/kubelet.conf.d"
    node = kubeadm_node(tmp_path, kubeadm_flags=flags)
    node.write(
        "/etc/kubernetes/kubelet.conf.d/99-site.conf",
        "kind: KubeletConfiguration\nfeatureGates:\n  DRADeviceTaints: false\n",
    )
    ok, result = run_module(kubelet_feature_gates, node.args(gates={"DRADeviceTaints": True}))
    assert not ok
    assert "99-site.conf" in result["msg"] and "nothing written" in result["msg"]
    assert not os.path.exists(node.path("/etc/kubernetes/kubelet.conf.d/90-gpunode-feature-gates.conf"))


def test_a_flag_gate_wins_over_the_config_and_is_an_error(run_module, tmp_path):
    node = kubeadm_node(tmp_path, kubeadm_flags="--feature-gates=DRADeviceTaints=false")
    before = node.read("/var/lib/kubelet/config.yaml")
    ok, result = run_module(kubelet_feature_gates, node.args(gates={"DRADeviceTaints": True}))
    assert not ok
    assert "kubeadm-flags.env line 1 (KUBELET_KUBEADM_ARGS)" in result["msg"]
    assert node.read("/var/lib/kubelet/config.yaml") == before


def test_cgroup_v1_refusal_before_anything_is_written(run_module, tmp_path):
    node = kubeadm_node(tmp_path, version="1.35.2", config="kind: KubeletConfiguration\n", cgroup=MOUNT_V1)
    ok, result = run_module(kubelet_feature_gates, node.args(gates={"DRAConsumableCapacity": False}))
    assert not ok
    assert "cgroup v1" in result["msg"] and "nothing written" in result["msg"]
    assert node.read("/var/lib/kubelet/config.yaml") == "kind: KubeletConfiguration\n"
    # failCgroupV1: false in the config: the kubelet starts on cgroup v1
    node.write("/var/lib/kubelet/config.yaml", CONFIG)
    ok, result = run_module(kubelet_feature_gates, node.args(gates={"DRAConsumableCapacity": False}))
    assert ok and result["changed"]


@pytest.mark.parametrize("version_from", ["kubernetes_version", "kubelet_path"])
def test_with_no_kubelet_running_the_given_config_files_fail_cgroup_v1_counts(run_module, tmp_path,
                                                                               version_from):
    """An image build: no kubelet process, no unit; the version given, or the binary's; cgroup v1."""
    node = Node(tmp_path, "1.35.2", MOUNT_V1)
    config = node.write("/etc/kubernetes/kubelet-config.yaml", "kind: KubeletConfiguration\n")
    version = {"kubernetes_version": "1.35.2"} if version_from == "kubernetes_version" else {
        "kubelet_path": node.kubelet}
    args = node.args(gates={"DRAConsumableCapacity": True}, config_file=config, **version)
    ok, result = run_module(kubelet_feature_gates, args)
    assert not ok
    assert "cgroup v1" in result["msg"] and "nothing written" in result["msg"]
    assert node.read("/etc/kubernetes/kubelet-config.yaml") == "kind: KubeletConfiguration\n"
    node.write("/etc/kubernetes/kubelet-config.yaml", CONFIG)
    ok, result = run_module(kubelet_feature_gates, args)
    assert ok, result
    assert result["changed"] and result["kubernetes_version"] == "1.35.2"
    written = yaml.safe_load(node.read("/etc/kubernetes/kubelet-config.yaml"))
    assert written["failCgroupV1"] is False and written["featureGates"] == {"DRAConsumableCapacity": True}


def test_a_removed_flag_stops_the_restart_and_names_its_file(run_module, tmp_path):
    node = kubeadm_node(
        tmp_path, version="1.35.0", kubeadm_flags="--pod-infra-container-image=registry.k8s.io/pause:3.10"
    )
    ok, result = run_module(kubelet_feature_gates, node.args(gates={"KubeletPodResourcesGet": True}))
    assert not ok
    assert "--pod-infra-container-image (removed in 1.35)" in result["msg"]
    assert "kubeadm-flags.env line 1" in result["msg"]
    assert "featureGates" not in node.read("/var/lib/kubelet/config.yaml")
    # nothing to change: nothing restarted, so no refusal either
    ok, result = run_module(kubelet_feature_gates, node.args(gates={}))
    assert ok and not result["restart_required"]


def test_eks_json_config_stays_json(run_module, tmp_path):
    node = Node(tmp_path, "1.35.4")
    node.unit(
        "/etc/systemd/system/kubelet.service",
        "[Service]\nEnvironmentFile=-@/etc/eks/kubelet/environment\n"
        "ExecStart=@/usr/bin/kubelet --config @/etc/kubernetes/kubelet/config.json $NODEADM_KUBELET_ARGS\n",
    )
    node.write("/etc/eks/kubelet/environment", 'NODEADM_KUBELET_ARGS="--node-ip=10.0.0.5 --v=2"\n')
    node.write(
        "/etc/kubernetes/kubelet/config.json",
        json.dumps(
            {
                "kind": "KubeletConfiguration",
                "apiVersion": "kubelet.config.k8s.io/v1beta1",
                "failCgroupV1": False,
            },
            indent=4,
        )
        + "\n",
    )
    ok, result = run_module(
        kubelet_feature_gates, node.args(gates={"KubeletPodResourcesDynamicResources": True})
    )
    assert ok, result
    data = json.loads(node.read("/etc/kubernetes/kubelet/config.json"))
    assert data["featureGates"] == {"KubeletPodResourcesDynamicResources": True}
    assert node.read("/etc/kubernetes/kubelet/config.json").startswith('{\n    "kind"')


def test_rpm_layout_without_config_gets_the_flag_in_sysconfig(run_module, tmp_path):
    node = Node(tmp_path, "1.33.1")
    node.unit("/usr/lib/systemd/system/kubelet.service", UNIT)
    node.unit(
        "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
        "[Service]\nEnvironmentFile=-@/etc/sysconfig/kubelet\n"
        "ExecStart=\nExecStart=@/usr/bin/kubelet $KUBELET_EXTRA_ARGS\n",
    )
    node.write("/etc/sysconfig/kubelet", "KUBELET_EXTRA_ARGS=\n")
    node.run([], started="after")
    ok, result = run_module(kubelet_feature_gates, node.args(gates={"DRAPrioritizedList": True}))
    assert ok, result
    assert result["target"] == "flags"
    assert result["location"] == node.path("/etc/sysconfig/kubelet") + " KUBELET_EXTRA_ARGS"
    assert (
        node.read("/etc/sysconfig/kubelet") == "KUBELET_EXTRA_ARGS=--feature-gates=DRAPrioritizedList=true\n"
    )
    assert result["restart_required"] and not result["daemon_reload"]
    # the running kubelet lacks the flag: the next run still wants the restart
    ok, again = run_module(kubelet_feature_gates, node.args(gates={"DRAPrioritizedList": True}))
    assert ok and not again["changed"] and again["restart_required"]
    assert "has --feature-gates=(none)" in again["stale"][0]
    node.run(["--feature-gates=DRAPrioritizedList=true"], started="after")
    ok, done = run_module(kubelet_feature_gates, node.args(gates={"DRAPrioritizedList": True}))
    assert ok and not done["restart_required"]


def test_old_dropin_gets_the_flag_inline_and_a_daemon_reload(run_module, tmp_path):
    node = Node(tmp_path, "1.9.11")
    node.unit("/lib/systemd/system/kubelet.service", UNIT)
    node.unit(
        "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
        '[Service]\nEnvironment="KUBELET_CADVISOR_ARGS=--cadvisor-port=0"\nExecStart=\n'
        "ExecStart=@/usr/bin/kubelet $KUBELET_CADVISOR_ARGS $KUBELET_EXTRA_ARGS\n",
    )
    ok, result = run_module(kubelet_feature_gates, node.args(gpu_node=True))
    assert ok, result
    assert result["daemon_reload"] and result["gates"] == {"DevicePlugins": True}
    assert 'Environment="KUBELET_EXTRA_ARGS=--feature-gates=DevicePlugins=true"' in node.read(
        "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"
    )


def test_a_kubelet_newer_than_the_table(run_module, tmp_path, monkeypatch):
    warned = []
    monkeypatch.setattr(kubelet_feature_gates.AnsibleModule, "warn", lambda self, text: warned.append(text))
    node = kubeadm_node(
        tmp_path, version="1.38.0", config=CONFIG + "featureGates:\n  DynamicResourceAllocation: true\n"
    )
    ok, result = run_module(
        kubelet_feature_gates,
        node.args(gates={"DRAConsumableCapacity": True, "DynamicResourceAllocation": True}),
    )
    assert ok, result
    assert result["applied_gates"] == {"DRAConsumableCapacity": True}
    assert "planned removal in 1.38" in result["skipped_gates"]["DynamicResourceAllocation"]
    warnings = " ".join(warned)
    assert "newer than this module's gate table for DRAConsumableCapacity (last: 1.37)" in warnings
    gates = yaml.safe_load(node.read("/var/lib/kubelet/config.yaml"))["featureGates"]
    assert gates == {"DRAConsumableCapacity": True}


def test_missing_pyyaml_fails_clearly_and_writes_nothing(run_module, tmp_path, monkeypatch):
    node = kubeadm_node(tmp_path)
    monkeypatch.setattr(kubelet_config, "YAML_IMPORT_ERROR", "Traceback: No module named 'yaml'")
    monkeypatch.setattr(kubelet_discovery, "YAML_IMPORT_ERROR", "Traceback: No module named 'yaml'")
    ok, result = run_module(kubelet_feature_gates, node.args(gates={"DRAConsumableCapacity": True}))
    assert not ok
    assert (
        "PyYAML (python3-yaml)" in result["msg"]
        and node.path("/var/lib/kubelet/config.yaml") in result["msg"]
    )
    assert "featureGates" not in node.read("/var/lib/kubelet/config.yaml")


def test_proc_and_systemctl_readers(tmp_path):
    node = Node(tmp_path)
    node.run(["--v=2"])
    (process,) = scan("kubelet", node.path("/proc"))
    assert process.pid == 4242 and process.argv[1:] == ["--v=2"] and process.unit == "kubelet.service"
    assert (
        unit_of_cgroup(
            "12:pids:/docker/ab12/system.slice/kubelet.service\n"
            "1:name=systemd:/docker/ab12/system.slice/kubelet.service\n"
        )
        == "kubelet.service"
    )
    show = parse_show(
        "Id=kubelet.service\nLoadState=loaded\nDropInPaths=/a.conf /b.conf\n\n"
        "Id=rke2-agent.service\nLoadState=not-found\n"
    )
    assert [s["Id"] for s in show] == ["kubelet.service", "rke2-agent.service"]


@pytest.mark.parametrize("started", ["before", "after"])
def test_check_running_false_ignores_what_runs(run_module, tmp_path, started):
    node = kubeadm_node(tmp_path)
    node.run([], started=started)
    ok, result = run_module(kubelet_feature_gates, node.args(gates={}, check_running=False))
    assert ok and not result["restart_required"]
