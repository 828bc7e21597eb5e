"""GPU work and disruption: the processes holding a GPU (host/processes.gpu_holders), whether a
node's plans disrupt them (rollout/disruption.py) and the message that refuses the node."""

import base64
import json
import os
import platform

import pytest
from ansible.module_utils.gpunode.host import processes
from ansible.module_utils.gpunode.host.commands import Host
from ansible.module_utils.gpunode.kubelet import identity
from ansible.module_utils.gpunode.rollout import disruption
from fake_proc import FakeProc

# the kubelet's identity is read through the host layer's file queries only
HOST = Host(None, identity.IdentityError)
NOT_LOOKED_FOR = {"serving": False, "node_name": None, "rollout": False}

TRAIN = ["python3", "train.py", "--epochs", "3"]
#: the training job as gpu_work returns it: a systemd service's process, in no pod
TRAIN_WORK = {"pid": 4242, "command": "python3 train.py --epochs 3", "unit": "train.service", "pod": None,
              "pod_name": None}


@pytest.fixture
def proc(tmp_path, monkeypatch):
    """A node's /proc: a training job on GPU 0, persistenced on every GPU, nvidia-smi (control device
    only), a shell, and the kernel's processes with no fd folder."""
    fake = FakeProc(tmp_path)
    fake.open_files(fake.add(4242, "python3", TRAIN), "/dev/null", "/dev/nvidiactl", "/dev/nvidia-uvm",
                    "/dev/nvidia0", unit="train.service")
    fake.open_files(fake.add(812, "nvidia-persistenced", ["/usr/bin/nvidia-persistenced"]),
                    "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1", unit="nvidia-persistenced.service")
    fake.open_files(fake.add(900, "nvidia-smi", ["nvidia-smi"]), "/dev/nvidiactl",
                    "/dev/nvidia-caps/nvidia-cap1")
    fake.open_files(fake.add(901, "bash", ["bash"]), "/dev/pts/0", "/dev/nvidia10x")
    fake.add(2, "kthreadd", [])
    monkeypatch.setattr(processes, "PROC", str(fake.root))
    monkeypatch.setattr(processes, "CONTAINERD_BUNDLES", (str(tmp_path / "no-containerd"),))  # none here
    return fake


@pytest.fixture
def kubeconfigs(tmp_path, monkeypatch):
    """Where kubeadm, RKE2 and k3s write the kubelet's kubeconfig, under a temporary root: none yet."""
    paths = [tmp_path / "etc/kubernetes/kubelet.conf", tmp_path / "rke2/agent/kubelet.kubeconfig",
             tmp_path / "k3s/agent/kubelet.kubeconfig"]
    monkeypatch.setattr(identity, "KUBECONFIGS", tuple(str(path) for path in paths))
    return paths


def kubelet_kubeconfig(path, user=None):
    """A kubelet's kubeconfig at ``path``: credentials as data (the certificate here is no real one, so
    the name comes from --hostname-override or the hostname), or ``user`` as given."""
    data = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nbm90IERFUg==\n-----END CERTIFICATE-----\n")
    data = data.decode()
    user = {"client-certificate-data": data, "client-key-data": data} if user is None else user
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "kubelet",
        "clusters": [{"name": "k", "cluster": {"server": "https://10.0.0.1:6443"}}],
        "contexts": [{"name": "kubelet", "context": {"cluster": "k", "user": "node"}}],
        "users": [{"name": "node", "user": user}]}))


def test_a_process_holding_a_gpu_device_is_found_with_its_command_line_and_unit(proc):
    assert processes.gpu_holders(str(proc.root)) == [
        (812, ["/usr/bin/nvidia-persistenced"], "nvidia-persistenced.service", None, None),
        (4242, TRAIN, "train.service", None, None),
    ]


POD = "4d5a9c02-3b1e-4a34-9d1f-2f6c1e6b7a11"
CONTAINER = "0f3c" * 16


@pytest.mark.parametrize(("cgroup", "pod"), [
    # cgroup v2, the kubelet's systemd cgroup driver (kubeadm's default), a BestEffort and a Guaranteed pod
    (f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{POD.replace('-', '_')}.slice/"
     f"cri-containerd-{CONTAINER}.scope\n", POD),
    (f"0::/kubepods.slice/kubepods-pod{POD.replace('-', '_')}.slice/cri-containerd-{CONTAINER}.scope\n", POD),
    # cgroupfs driver (k3s), and cgroup v1 with a line per controller
    (f"0::/kubepods/burstable/pod{POD}/{CONTAINER}\n", POD),
    (f"12:memory:/kubepods/besteffort/pod{POD}/{CONTAINER}\n1:name=systemd:/kubepods/besteffort/pod{POD}/"
     f"{CONTAINER}\n", POD),
    # a plain Docker container, a service, a user's shell: no pod
    (f"0::/system.slice/docker-{CONTAINER}.scope\n", None),
    ("0::/system.slice/train.service\n", None),
    ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
    ("0::/system.slice/pod-manager.service\n", None),
])
def test_the_pod_of_a_process_is_read_from_its_cgroup_as_the_kubelet_names_it(cgroup, pod):
    assert processes.pod_of_cgroup(cgroup) == pod


def test_work_in_a_pod_is_named_by_its_pod_and_the_refusal_says_a_drain_pauses_gpunodes_daemonsets(
        proc, kubeconfigs):
    plugin = proc.add(3100, "nvidia-device-pl", ["nvidia-device-plugin"])
    proc.open_files(plugin, "/dev/nvidiactl", "/dev/nvidia0",
                    cgroup=f"0::/kubepods/besteffort/pod{POD}/{CONTAINER}\n")
    got = disruption.assess(driver_change(unload=True), ["nvidia-persistenced"], False, host=HOST,
                            node="gpu-01")
    assert got["disruption"]["gpu_work"] == [
        {"pid": 3100, "command": "nvidia-device-plugin", "unit": None, "pod": POD, "pod_name": None},
        TRAIN_WORK]
    assert f"pid 3100 (pod {POD}): nvidia-device-plugin; pid 4242 (train.service)" in got["refusal"]
    assert ("1 of them in pods: a drain evicts those but a DaemonSet's, and pauses gpunode's own GPU "
            "DaemonSets (device plugin, dcgm-exporter) there.") in got["refusal"]


def test_fds_that_cannot_be_read_are_skipped(proc):
    proc.open_files(proc.add(5000, "other", ["other-user-job"]), "/dev/nvidia1")
    proc.open_files(proc.add(5001, "gone", ["exited-job"]), "/dev/nvidia2")
    denied, gone = str(proc.root / "5000" / "fd"), str(proc.root / "5001" / "fd" / "0")

    def listdir(path):
        if path == denied:
            raise PermissionError(13, "Permission denied", path)
        return os.listdir(path)

    def readlink(path):
        if path == gone:
            raise FileNotFoundError(2, "No such file or directory", path)
        return os.readlink(path)

    found = processes.gpu_holders(str(proc.root), listdir=listdir, readlink=readlink)
    assert [holder.pid for holder in found] == [812, 4242]


def test_gpu_work_leaves_out_the_services_gpunode_stops_itself(proc):
    assert disruption.gpu_work(["nvidia-persistenced", "nvidia-dcgm"]) == [TRAIN_WORK]
    assert [p["pid"] for p in disruption.gpu_work(["train.service"])] == [812]


def driver_plan(loaded="535.129.03", **steps):
    plan = {"install": False, "unload": False, "load": False, "reboot_required": False, **steps}
    return {"plan": plan, "before": {"loaded_version": loaded},
            "request": {"version": "570.133.20", "wanted": "570.133.20"}}


def driver_change(**steps):
    """A read whose driver changes: the concerns after it are not read."""
    return {"converged": {"driver": False, "container_runtime": False, "kubelet": False, "validated": False},
            "reasons": {"driver": "changes planned", "container_runtime": "a concern before it changes",
                        "kubelet": "a concern before it changes", "validated": "a concern before it changes"},
            "plans": {"driver": driver_plan(**steps)}}


NOT_READ = ["container_runtime: not read (a concern before it changes)",
            "kubelet: not read (a concern before it changes)"]


@pytest.mark.parametrize("steps, why", [
    ({"install": True, "unload": True, "load": True},
     ["driver install 535.129.03 -> 570.133.20", "driver reload"]),
    ({"install": True, "reboot_required": True}, ["driver install 535.129.03 -> 570.133.20", "reboot"]),
    ({"unload": True, "load": True}, ["driver reload"]),
    ({"fabric": {"restart": ["nvidia-imex"]}}, ["fabric daemon restart (nvidia-imex)"]),
    ({}, []),  # a hold, a persistence unit: nothing that stops the GPUs
])
def test_each_driver_step_that_stops_the_gpus_is_a_reason_and_later_concerns_are_unknown(steps, why):
    assert disruption.reasons(driver_change(**steps)) == why + NOT_READ


def test_a_first_install_on_a_host_without_a_loaded_module_is_never_disruptive(proc):
    read = driver_change(install=True, load=True)
    read["plans"]["driver"]["before"]["loaded_version"] = None
    assert disruption.assess(read, [], False, host=HOST, node="gpu-01") == {
        "disruption": {"disruptive": False, "reasons": [], "gpu_work": [], **NOT_LOOKED_FOR}, "refusal": None}


def converged_driver(runtime=None, kubelet=None):
    plans = {name: plan for name, plan in (("container_runtime", runtime), ("kubelet", kubelet)) if plan}
    converged = {"driver": True, "container_runtime": runtime is None,
                 "kubelet": runtime is None and kubelet is None}
    reasons = {name: "changes planned" for name in plans}
    if runtime:
        reasons["kubelet"] = "a concern before it changes"
    return {"converged": converged, "reasons": reasons, "plans": plans}


def runtime_plan(**restarts):
    plan = {"docker": {"restart": False}, "containerd": {"restart": False},
            "rancher": {"flavor": None, "restart": False}}
    for name, value in restarts.items():
        plan[name].update(value)
    return {"plan": plan}


def test_engine_and_kubelet_restarts_are_reasons():
    assert disruption.reasons(converged_driver(kubelet={"restart_required": True})) == ["kubelet restart"]
    assert disruption.reasons(converged_driver(kubelet={"restart_required": False})) == []
    read = converged_driver(runtime=runtime_plan(containerd={"restart": True}, docker={"restart": True}))
    assert disruption.reasons(read) == ["container engine restart (docker, containerd)",
                                        "kubelet: not read (a concern before it changes)"]
    read = converged_driver(runtime=runtime_plan(rancher={"flavor": "rke2", "restart": True}))
    assert disruption.reasons(read)[0] == "container engine restart (rke2)"


def test_a_concern_whose_read_failed_is_unknown_and_a_converged_node_or_one_not_given_is_not():
    read = {"converged": {"driver": True, "container_runtime": True, "kubelet": False},
            "reasons": {"kubelet": "read again by its role: PyYAML is missing"}, "plans": {}}
    assert disruption.reasons(read) == ["kubelet: not read (read again by its role: PyYAML is missing)"]
    assert disruption.reasons(converged_driver()) == []
    assert disruption.reasons({"converged": {"validated": False}, "reasons": {}, "plans": {}}) == []


def test_a_disruptive_change_on_a_node_with_gpu_work_is_refused_naming_node_work_reasons_variables(
        proc, kubeconfigs):
    got = disruption.assess(driver_change(install=True, unload=True), ["nvidia-persistenced"], False,
                            host=HOST, node="gpu-01")
    assert got["disruption"]["gpu_work"] == [TRAIN_WORK]
    assert "in pods" not in got["refusal"]
    assert got["refusal"] == (
        "gpu-01: refused, GPU work runs here and this run would disrupt it (driver install 535.129.03 -> "
        "570.133.20, driver reload, container_runtime: not read (a concern before it changes), kubelet: not "
        "read (a concern before it changes)): pid 4242 (train.service): python3 train.py --epochs 3. Nothing "
        "was changed. Stop that work, have the node drained first (gpunode_rollout_drain: true (with "
        "gpunode_rollout_kubeconfig); a process a drain does not end still refuses it), or set "
        "gpunode_rollout_allow_in_use: true to change the node anyway (the work may fail).")


def test_allowed_or_without_gpu_work_nothing_is_refused_and_the_disruption_is_still_told(proc, kubeconfigs):
    allowed = disruption.assess(driver_change(unload=True), [], True, host=HOST, node="gpu-01")
    assert allowed["refusal"] is None and allowed["disruption"]["disruptive"]
    assert [p["pid"] for p in allowed["disruption"]["gpu_work"]] == [812, 4242]
    idle = disruption.assess(driver_change(unload=True), ["nvidia-persistenced", "train"], False, host=HOST)
    assert idle["refusal"] is None
    assert idle["disruption"] == {"disruptive": True, "reasons": ["driver reload", *NOT_READ], "gpu_work": [],
                                  "serving": False, "node_name": platform.node().lower(), "rollout": False}


def test_nothing_disruptive_scans_no_proc_and_reads_no_kubeconfig(monkeypatch):
    monkeypatch.setattr(processes, "gpu_holders", lambda *args: pytest.fail("scanned /proc"))
    monkeypatch.setattr(identity, "identity", lambda *args, **kwargs: pytest.fail("read the kubelet"))
    assert disruption.assess(converged_driver(), [], False)["disruption"] == {
        "disruptive": False, "reasons": [], "gpu_work": [], **NOT_LOOKED_FOR}


def test_a_node_with_gpu_work_serves_and_rolls_and_with_a_drain_it_is_not_refused(proc, kubeconfigs):
    got = disruption.assess(driver_change(unload=True), ["nvidia-persistenced"], False, drain=True, host=HOST)
    assert got["refusal"] is None
    assert [p["pid"] for p in got["disruption"]["gpu_work"]] == [4242]
    assert got["disruption"]["serving"] and got["disruption"]["rollout"]
    assert got["disruption"]["node_name"] == platform.node().lower()  # not registered: the hostname


@pytest.mark.parametrize("where", [0, 1, 2], ids=["kubeadm", "rke2", "k3s"])
def test_a_registered_node_serves_named_as_its_kubelet_names_it(proc, kubeconfigs, where):
    kubelet_kubeconfig(kubeconfigs[where])
    proc.add(700, "kubelet", ["/usr/bin/kubelet", "--hostname-override=GPU-7"])
    got = disruption.assess(driver_change(unload=True), ["nvidia-persistenced", "train"], False, host=HOST)
    assert got["disruption"]["gpu_work"] == [] and got["refusal"] is None
    assert dict(got["disruption"], reasons=None) == {
        "disruptive": True, "reasons": None, "gpu_work": [], "serving": True, "node_name": "gpu-7",
        "rollout": True}


def test_a_kubelet_whose_kubeconfig_is_not_written_yet_leaves_the_node_unregistered(proc, kubeconfigs):
    """A kubelet running before `kubeadm join` (kubeadm's drop-in names --kubeconfig, the file is not
    there): the node serves nothing, so a first converge is never serialized; the file, once there,
    registers it."""
    kubelet = ["/usr/bin/kubelet", "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
               f"--kubeconfig={kubeconfigs[0]}"]
    proc.add(700, "kubelet", kubelet)
    got = disruption.assess(driver_change(unload=True), ["nvidia-persistenced", "train"], False, host=HOST)
    assert (got["disruption"]["serving"], got["disruption"]["rollout"]) == (False, False)
    kubelet_kubeconfig(kubeconfigs[0])
    got = disruption.assess(driver_change(unload=True), ["nvidia-persistenced", "train"], False, host=HOST)
    assert (got["disruption"]["serving"], got["disruption"]["rollout"]) == (True, True)


def test_a_kubeconfig_whose_credentials_cannot_be_read_still_registers_the_node_named_by_its_host(
        proc, kubeconfigs):
    kubelet_kubeconfig(kubeconfigs[0], user={"token": "no client certificate"})
    got = disruption.assess(driver_change(unload=True), ["nvidia-persistenced", "train"], False, host=HOST)
    assert got["disruption"]["rollout"] and got["disruption"]["node_name"] == platform.node().lower()


def test_a_first_install_never_rolls_even_on_a_registered_node(proc, kubeconfigs):
    kubelet_kubeconfig(kubeconfigs[0])
    read = driver_change(install=True, load=True)
    read["plans"]["driver"]["before"]["loaded_version"] = None
    assert disruption.assess(read, [], False, host=HOST)["disruption"]["rollout"] is False


def test_under_containerd_the_pod_is_named_from_its_containers_spec(proc, kubeconfigs, tmp_path, monkeypatch):
    """containerd keeps a running container's OCI spec in its bundle, with the CRI plugin's annotations
    of the pod (io.kubernetes.cri.sandbox-namespace, -name); RKE2/k3s' containerd under /run/k3s."""
    system, rke2 = tmp_path / "run/containerd/k8s.io", tmp_path / "run/k3s/containerd/k8s.io"
    monkeypatch.setattr(processes, "CONTAINERD_BUNDLES", (str(system), str(rke2)))
    other = "9a1b" * 16
    for pid, cgroup in ((3100, f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
                               f"{POD.replace('-', '_')}.slice/cri-containerd-{CONTAINER}.scope\n"),
                        (3200, f"0::/kubepods/burstable/pod{POD}/{other}\n")):
        exporter = proc.add(pid, "dcgm-exporter", ["/usr/bin/dcgm-exporter"])
        proc.open_files(exporter, "/dev/nvidia0", cgroup=cgroup)
    (system / CONTAINER).mkdir(parents=True)
    (system / CONTAINER / "config.json").write_text(json.dumps({"ociVersion": "1.2.0", "annotations": {
        "io.kubernetes.cri.container-type": "container", "io.kubernetes.cri.container-name": "exporter",
        "io.kubernetes.cri.sandbox-namespace": "gpunode-system",
        "io.kubernetes.cri.sandbox-name": "dcgm-exporter-x7k2p"}}))
    (rke2 / other).mkdir(parents=True)
    (rke2 / other / "config.json").write_text("{not json")  # unreadable: the pod's uid stands
    work = {p["pid"]: p for p in disruption.gpu_work(["nvidia-persistenced"])}
    assert (work[3100]["pod"], work[3100]["pod_name"]) == (POD, "gpunode-system/dcgm-exporter-x7k2p")
    assert (work[3200]["pod"], work[3200]["pod_name"]) == (POD, None)
    refusal = disruption.assess(driver_change(unload=True), ["nvidia-persistenced"], False, host=HOST,
                                node="gpu-01")["refusal"]
    assert "pid 3100 (pod gpunode-system/dcgm-exporter-x7k2p): /usr/bin/dcgm-exporter" in refusal
    assert f"pid 3200 (pod {POD}): /usr/bin/dcgm-exporter" in refusal
    assert "2 of them in pods" in refusal
