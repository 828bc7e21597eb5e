"""gpunode_node_state: every concern of a node read in one call, with each concern's own code.

The verdict per concern must be the one its own state module reaches (a role ends on it
without reading again), a later concern counts only when every earlier one is converged,
and a concern whose read fails is left to its role, which fails with its own message.
"""

import copy
import json
import platform

import gpunode_node_state
import gpunode_planned_files
import kubelet_feature_gates
import nvidia_container_runtime_state
import nvidia_driver_state
import pytest
from ansible.module_utils.gpunode import node_state
from ansible.module_utils.gpunode.host import processes
from ansible.module_utils.gpunode.kubelet import identity
from ansible.module_utils.gpunode.kubelet import state_call as kubelet_state_call
from ansible.module_utils.gpunode.runtime import reader as crr
from fake_proc import FakeProc
from test_container_runtime_state import WANTED, build, converge, fresh_node
from test_kubelet_plan import kubeadm_node
from test_nvidia_driver_modules import FakeHost
from test_nvidia_driver_modules import converged as converged_driver

# the cgroup driver given, so that the plan does not depend on whether this machine runs systemd
RUNTIME_ARGS = dict({key: WANTED[key] for key in nvidia_container_runtime_state.ARGUMENT_SPEC
                     if key in WANTED}, containerd_systemd_cgroup=True)


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node whose three concerns are converged: driver 535 loaded and held, the
    toolkit and both engines as the role leaves them, the kubelet's gates set and loaded."""
    (tmp_path / "driver").mkdir()
    driver = FakeHost(tmp_path / "driver")
    driver.install(monkeypatch)
    converged_driver(driver)
    # the fake host answers every command of this module run: the kubelet's too
    driver.commands["kubelet --version"] = (0, "Kubernetes v1.37.1\n", "")
    runtime = converge(fresh_node(), build(fresh_node(), containerd_systemd_cgroup=True)[0])
    monkeypatch.setattr(crr.NodeReader, "read", lambda self: copy.deepcopy(runtime))
    kubelet = kubeadm_node(tmp_path / "kubelet",
                           config="apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                                  "featureGates:\n  DRAConsumableCapacity: true\n")
    kubelet.run(["--config=@/var/lib/kubelet/config.yaml"], started="after")
    return {
        "driver": driver.args(branch="535", version="535.129.03"),
        "container_runtime": dict(RUNTIME_ARGS),
        "kubelet": kubelet.args(gates={"DRAConsumableCapacity": True}),
    }


def concerns(node, **changed):
    return {name: dict(node[name], **changed.get(name, {}))
            for name in ("driver", "container_runtime", "kubelet")}


def own_verdicts(run_module, args):
    """What each concern's own module says in check mode: converged or not."""
    ok, driver = run_module(nvidia_driver_state, args["driver"], check_mode=True)
    assert ok, driver
    ok, runtime = run_module(nvidia_container_runtime_state, args["container_runtime"], check_mode=True)
    assert ok, runtime
    ok, kubelet = run_module(kubelet_feature_gates, args["kubelet"], check_mode=True)
    assert ok, kubelet
    return {"driver": driver["plan"]["converged"], "container_runtime": not runtime["plan"]["changes"],
            "kubelet": not kubelet["changed"] and not kubelet["restart_required"]}


def test_a_converged_node_is_recognized_in_one_read_with_every_fact(node, run_module):
    args = concerns(node)
    assert own_verdicts(run_module, args) == {"driver": True, "container_runtime": True, "kubelet": True}
    ok, result = run_module(gpunode_node_state, args, check_mode=True)
    assert ok, result
    assert not result["changed"]
    assert result["converged"] == {"driver": True, "container_runtime": True, "kubelet": True}
    assert result["reasons"] == {}
    facts = result["ansible_facts"]
    assert facts["nvidia_driver"]["loaded_version"] == "535.129.03"
    assert facts["nvidia_container_runtime"]["engines"]["docker"]["default_runtime"] == "nvidia"
    assert facts["kubelet_gpu"]["gates"] == {"DRAConsumableCapacity": True}


def test_a_kubelet_with_changes_is_handed_to_its_role_with_the_files_to_write(node, run_module, monkeypatch):
    args = concerns(node, kubelet={"gates": {"DRAConsumableCapacity": True, "DRAPartitionableDevices": True}})
    assert own_verdicts(run_module, args)["kubelet"] is False
    ok, own = run_module(kubelet_feature_gates, args["kubelet"], check_mode=True)
    assert ok, own
    ok, result = run_module(gpunode_node_state, args, check_mode=True)
    assert ok, result
    assert result["converged"] == {"driver": True, "container_runtime": True, "kubelet": False}
    assert result["reasons"] == {"kubelet": "changes planned"}
    assert set(result["plans"]) == {"kubelet"}
    handed = dict(result["plans"]["kubelet"])
    edits = handed.pop("edits")
    assert handed == own  # what its own module says in check mode: the role reads nothing again
    assert result["ansible_facts"]["kubelet_gpu"] == own["ansible_facts"]["kubelet_gpu"]
    assert [e["path"] for e in edits] == own["files"]
    # the role writes them (roles/kubelet_gpu/tasks/main.yml) without the kubelet's read
    with monkeypatch.context() as patched:
        patched.setattr(kubelet_state_call, "read", lambda module: pytest.fail("kubelet read"))
        ok, written = run_module(gpunode_planned_files, {"files": edits})
    assert ok and written["changed"] and written["changed_since"] == [], written
    # the files are now what the kubelet's own module wants
    ok, after = run_module(kubelet_feature_gates, args["kubelet"], check_mode=True)
    assert ok and not after["changed"] and after["applied_gates"] == own["applied_gates"], after


def test_after_a_driver_change_nothing_later_is_read_or_counts_as_converged(node, run_module, monkeypatch):
    args = concerns(node, driver={"version": "535.183.01"})
    assert own_verdicts(run_module, args) == {"driver": False, "container_runtime": True, "kubelet": True}
    # their roles read them once, after the driver's change: a read here would be a second
    monkeypatch.setattr(crr.NodeReader, "read", lambda self: pytest.fail("runtime read"))
    monkeypatch.setattr(kubelet_state_call, "read", lambda module: pytest.fail("kubelet read"))
    ok, result = run_module(gpunode_node_state, args, check_mode=True)
    assert ok, result
    assert result["converged"] == {"driver": False, "container_runtime": False, "kubelet": False}
    assert result["reasons"] == {"driver": "changes planned",
                                 "container_runtime": "a concern before it changes",
                                 "kubelet": "a concern before it changes"}
    assert set(result["ansible_facts"]) == {"nvidia_driver"}  # of the plan handed to the driver role


def test_the_runtime_is_read_with_the_driver_the_driver_read_found(node, run_module, monkeypatch):
    seen = []
    real = crr.NodeReader.__init__

    def init(self, module, wanted, tools):
        seen.append(wanted["driver_version"])
        real(self, module, wanted, tools)

    monkeypatch.setattr(crr.NodeReader, "__init__", init)
    ok, _result = run_module(gpunode_node_state, concerns(node), check_mode=True)
    assert ok and seen == ["535.129.03"]


@pytest.mark.parametrize(("concern", "bad", "message"), [
    ("driver", {"keyring": "keyring.asc"}, "keyring: 'keyring.asc' is not"),
    ("driver", {"method": "apt"}, "driver: value of method must be one of"),
    ("container_runtime", {"engines": "podman"}, "engines must be 'auto' or a list"),
    ("kubelet", {"gates": {"dynamicResourceAllocation": True}}, "did you mean"),
    ("kubelet", {"config_file": "/x.yaml", "flags_file": "/y.env"}, "mutually exclusive"),
])
def test_a_concern_whose_read_fails_is_left_to_its_role(node, run_module, concern, bad, message):
    ok, result = run_module(gpunode_node_state, concerns(node, **{concern: bad}), check_mode=True)
    assert ok, result  # the read itself never fails: the role fails with its own module's message
    assert result["converged"][concern] is False
    assert result["reasons"][concern].startswith("read again by its role: ")
    assert message in result["reasons"][concern]
    # nothing after it counts, nor is read before its role has run
    later = node_state.CONCERNS[node_state.CONCERNS.index(concern) + 1:]
    assert {name: result["reasons"][name] for name in later if name in result["reasons"]} == \
        {name: "a concern before it changes" for name in later if name in result["converged"]}


def test_concerns_not_given_are_not_read(node, run_module, monkeypatch):
    monkeypatch.setattr(crr.NodeReader, "read", lambda self: pytest.fail("runtime read"))
    ok, result = run_module(gpunode_node_state, {"driver": node["driver"]}, check_mode=True)
    assert ok and result["converged"] == {"driver": True}


def test_a_driver_with_changes_is_handed_to_its_role_as_its_own_module_plans_it(node, run_module):
    args = concerns(node, driver={"version": "535.183.01"})
    ok, own = run_module(nvidia_driver_state, args["driver"], check_mode=True)
    assert ok and not own["plan"]["converged"], own
    ok, result = run_module(gpunode_node_state, args, check_mode=True)
    assert ok, result
    handed = result["plans"]["driver"]
    # the driver role carries this plan out without reading the node again (its tasks/plan.yml)
    for key in ("request", "plan", "before", "state", "ansible_facts"):
        assert handed[key] == own[key], key
    assert result["ansible_facts"]["nvidia_driver"] == own["ansible_facts"]["nvidia_driver"]
    assert "nvidia_container_runtime" not in result["ansible_facts"]  # read again after the driver's change


def test_a_converged_driver_hands_nothing_over(node, run_module):
    ok, result = run_module(gpunode_node_state, concerns(node), check_mode=True)
    assert ok and result["plans"] == {}


def test_a_runtime_with_changes_after_a_converged_driver_is_handed_to_its_role(node, run_module):
    args = concerns(node, container_runtime={"version": "1.18.0-1"})
    ok, own = run_module(nvidia_container_runtime_state, args["container_runtime"], check_mode=True)
    assert ok and own["plan"]["changes"], own
    ok, result = run_module(gpunode_node_state, args, check_mode=True)
    assert ok, result
    assert result["converged"] == {"driver": True, "container_runtime": False, "kubelet": False}
    assert set(result["plans"]) == {"container_runtime"}  # the driver is converged: nothing to carry out
    # the runtime role carries this plan out without reading the node again (its tasks/state.yml)
    assert result["plans"]["container_runtime"]["plan"] == own["plan"]
    published = result["ansible_facts"]["nvidia_container_runtime"]
    assert published == own["ansible_facts"]["nvidia_container_runtime"]


def test_a_runtime_read_before_a_driver_change_is_not_handed_over(node, run_module):
    args = concerns(node, driver={"version": "535.183.01"},
                    container_runtime={"version": "1.18.0-1"})
    ok, result = run_module(gpunode_node_state, args, check_mode=True)
    assert ok, result
    # the driver's change may change what the runtime needs: its role reads it after the driver's
    assert set(result["plans"]) == {"driver"}
    assert "nvidia_container_runtime" not in result["ansible_facts"]


def test_a_driver_change_on_a_node_with_gpu_work_returns_the_refusal(node, run_module, monkeypatch, tmp_path):
    proc = FakeProc(tmp_path)
    proc.open_files(proc.add(4242, "python3", ["python3", "train.py"]), "/dev/nvidia0", unit="train.service")
    proc.open_files(proc.add(812, "nvidia-persistenced", ["nvidia-persistenced"]), "/dev/nvidia0",
                    unit="nvidia-persistenced.service")
    monkeypatch.setattr(processes, "PROC", str(proc.root))
    monkeypatch.setattr(identity, "KUBECONFIGS", (str(tmp_path / "kubelet.conf"),))
    args = concerns(node, driver={"version": "535.183.01"})
    ok, result = run_module(gpunode_node_state, dict(args, gpu_services=["nvidia-persistenced"]),
                            check_mode=True)
    assert ok, result
    assert result["converged"]["driver"] is False and "driver" in result["plans"]  # the read as before
    assert result["disruption"]["reasons"][:2] == ["driver install 535.129.03 -> 535.183.01", "driver reload"]
    assert result["disruption"]["gpu_work"] == [
        {"pid": 4242, "command": "python3 train.py", "unit": "train.service", "pod": None, "pod_name": None}]
    assert "pid 4242 (train.service): python3 train.py" in result["refusal"]
    ok, allowed = run_module(gpunode_node_state, dict(args, allow_in_use=True), check_mode=True)
    assert ok and allowed["refusal"] is None and len(allowed["disruption"]["gpu_work"]) == 2


def test_a_converged_node_is_not_disruptive(node, run_module, monkeypatch):
    monkeypatch.setattr(processes, "gpu_holders", lambda *args: pytest.fail("scanned /proc"))
    ok, result = run_module(gpunode_node_state, concerns(node), check_mode=True)
    assert ok and result["disruption"] == {"disruptive": False, "reasons": [], "gpu_work": [],
                                           "serving": False, "node_name": None, "rollout": False}
    assert result["refusal"] is None


def test_a_registered_node_rolls_and_with_a_drain_its_gpu_work_is_not_refused(
        node, run_module, monkeypatch, tmp_path):
    """GPU work makes a node serve, and so does the kubelet's kubeconfig (its credentials unreadable here:
    named by the hostname); with drain the read refuses nothing: the rolling path drains, reads again."""
    proc = FakeProc(tmp_path)
    proc.open_files(proc.add(4242, "python3", ["python3", "train.py"]), "/dev/nvidia0", unit="train.service")
    monkeypatch.setattr(processes, "PROC", str(proc.root))
    kubeconfig = tmp_path / "etc" / "kubernetes" / "kubelet.conf"
    monkeypatch.setattr(identity, "KUBECONFIGS", (str(kubeconfig),))
    args = dict(concerns(node, driver={"version": "535.183.01"}), gpu_services=["nvidia-persistenced"])
    ok, result = run_module(gpunode_node_state, args, check_mode=True)
    assert ok and result["disruption"]["rollout"] and result["refusal"]  # GPU work: it serves
    ok, idle = run_module(gpunode_node_state, dict(args, gpu_services=["train"]), check_mode=True)
    assert ok and not idle["disruption"]["serving"] and not idle["disruption"]["rollout"]
    kubeconfig.parent.mkdir(parents=True)
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://10.0.0.1:6443"}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "users": [{"name": "u", "user": {"client-certificate": "/no.crt", "client-key": "/no.key"}}]}))
    ok, drained = run_module(gpunode_node_state, dict(args, drain=True), check_mode=True)
    assert ok and drained["refusal"] is None
    assert drained["disruption"]["rollout"] and drained["disruption"]["node_name"] == platform.node().lower()
    assert [p["pid"] for p in drained["disruption"]["gpu_work"]] == [4242]
    ok, registered = run_module(gpunode_node_state, dict(args, gpu_services=["train"]), check_mode=True)
    assert ok and registered["disruption"]["gpu_work"] == [] and registered["disruption"]["rollout"]
