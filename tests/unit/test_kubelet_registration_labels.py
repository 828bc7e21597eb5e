"""What the kubelet reads only when it creates its Node: the registration labels, and no restart.

``nvidia.com/gpu.present=true`` (the role's default) goes where the flags go, ``--node-labels``
(KubeletConfiguration has no field for labels), merged with the operator's labels: into
kubeadm's kubeadm-flags.env as kubeadm wrote it (../shared/fixtures/kubelet), into
/etc/sysconfig/kubelet, and RKE2's ``node-label`` list of the config.yaml.d drop-in that sets
it. A change of the registration taint or labels alone writes the files and restarts no kubelet,
neither in that run nor in the next (a --config file keeps its modification time); a change of
the gates still restarts it.
"""

import os
import time

import kubelet_feature_gates
import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.gpunode.formats.values import ValueSyntaxError
from ansible.module_utils.gpunode.kubelet.labels import LabelError, check, merged, new_value
from conftest import shared_path
from test_kubelet_plan import CONFIG, UNIT, Node, kubeadm_node
from test_kubelet_registration_taint_targets import flags_node, node_taints, rke2_args, rke2_tree

TAINT = "readiness.k8s.io/gpunode-gpu-unvalidated:NoSchedule"
OURS = {"nvidia.com/gpu.present": "true"}
FLAGS = "/var/lib/kubelet/kubeadm-flags.env"
LABEL = "--node-labels=nvidia.com/gpu.present=true"


def test_label_flags_add_up_as_the_kubelet_reads_them():
    assert merged(["a=1, b = 2", "b=3", ""]) == {"a": "1", "b": "3"}
    assert new_value(["example.com/pool=gpu-a"], OURS) == "example.com/pool=gpu-a,nvidia.com/gpu.present=true"
    assert new_value(["nvidia.com/gpu.present=false"], OURS) == "nvidia.com/gpu.present=true"
    assert new_value(["x=1", "nvidia.com/gpu.present=true"], OURS) is None  # in effect: nothing to write
    with pytest.raises(LabelError, match="'gpu' is not key=value"):
        merged(["a=1,gpu"])


@pytest.mark.parametrize("labels", [{"node-role.kubernetes.io/gpu": "true"}, {"k8s.io/x": "y"},
                                    {"example.com/pool": "a,b"}, {"example.com/pool": True}, {"a b": "x"}])
def test_labels_the_kubelet_would_not_start_with_are_refused(labels):
    with pytest.raises(ValueSyntaxError, match="registration_labels"):
        check("registration_labels", labels)


def test_the_kubelets_own_namespaces_are_taken():
    check("registration_labels", {"node.kubernetes.io/gpu": "true", "kubelet.kubernetes.io/x": "",
                                  "nvidia.com/gpu.present": "true"})


def test_a_refused_label_fails_before_anything_is_read(run_module, tmp_path):
    node = kubeadm_node(tmp_path)
    ok, result = run_module(kubelet_feature_gates,
                            node.args(registration_labels={"node-role.kubernetes.io/gpu": "true"}))
    assert not ok and "registration_labels key: 'node-role.kubernetes.io/gpu'" in result["msg"], result
    assert "nothing read, nothing written" in result["msg"]


def age(node, *paths):
    """Files written long before the kubelet started (Node.run's "before": a second after boot)."""
    boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    for path in paths:
        os.utime(node.path(path), (boot - 60, boot - 60))
    return boot - 60


def test_kubeadm_node_registers_with_taint_and_label_and_nothing_restarts(run_module, tmp_path):
    """kubeadm's kubeadm-flags.env (a real one) with the operator's --node-labels: ours merged in."""
    written = shared_path("fixtures", "kubelet", "var-lib-kubelet-kubeadm-flags.env-crio-salpadding")
    written = written.read_text()
    flags = written.replace(" --v=8", " --node-labels=example.com/pool=gpu-a --v=8")
    assert flags != written
    node = kubeadm_node(tmp_path)
    node.write(FLAGS, flags)
    node.run(["--config=@/var/lib/kubelet/config.yaml", "--node-labels=example.com/pool=gpu-a"])
    mtime = age(node, "/var/lib/kubelet/config.yaml", FLAGS, "/etc/default/kubelet")
    args = node.args(registration_taint=TAINT, registration_labels=OURS,
                     validation_record=node.path("/var/lib/gpunode/validated.json"))

    ok, first = run_module(kubelet_feature_gates, args)
    assert ok and first["changed"] and not first["restart_required"] and not first["stale"], first
    assert not first["ansible_facts"]["kubelet_gpu"]["restart_pending"]
    assert node.read(FLAGS) == flags.replace("gpu-a", "gpu-a,nvidia.com/gpu.present=true")
    assert first["registration_labels"] == {"labels": OURS, "present": True,
                                            "where": node.path(FLAGS) + " KUBELET_KUBEADM_ARGS --node-labels"}
    config = yaml.safe_load(node.read("/var/lib/kubelet/config.yaml"))
    assert config["registerWithTaints"] == [{"key": TAINT.split(":", maxsplit=1)[0], "effect": "NoSchedule"}]
    # what the running kubelet reads is as old as before: the next run restarts nothing either
    assert os.stat(node.path("/var/lib/kubelet/config.yaml")).st_mtime == mtime
    assert node.read("/etc/default/kubelet") == "KUBELET_EXTRA_ARGS=\n"
    ok, again = run_module(kubelet_feature_gates, args)
    assert ok and not again["changed"] and not again["restart_required"], again

    ok, gates = run_module(kubelet_feature_gates, dict(args, gates={"DRAConsumableCapacity": True}))
    assert ok and gates["changed"] and gates["restart_required"], gates  # the gates still restart it


def test_without_a_label_flag_the_label_goes_where_the_flags_go(run_module, tmp_path):
    node = kubeadm_node(tmp_path, config=CONFIG)
    node.run(["--config=@/var/lib/kubelet/config.yaml"])
    age(node, "/var/lib/kubelet/config.yaml")
    ok, first = run_module(kubelet_feature_gates, node.args(registration_labels=OURS))
    assert ok and first["changed"] and not first["restart_required"], first
    default = node.path("/etc/default/kubelet")
    assert node.read("/etc/default/kubelet") == f"KUBELET_EXTRA_ARGS={LABEL}\n"  # kubeadm's files kept:
    assert node.read("/var/lib/kubelet/config.yaml") == CONFIG
    assert node.read(FLAGS) == 'KUBELET_KUBEADM_ARGS=""\n'
    assert first["summary"].endswith("; registers with labels nvidia.com/gpu.present=true")
    assert first["registration_labels"]["where"] == default + " KUBELET_EXTRA_ARGS --node-labels"


def test_flags_only_kubelet_merges_the_label_into_the_operators_flag(run_module, tmp_path):
    node = flags_node(tmp_path, "--v=2 --node-labels=example.com/pool=gpu-a")
    args = node.args(registration_taint=TAINT, registration_labels=OURS,
                     validation_record=node.path("/var/lib/gpunode/validated.json"))
    ok, check_run = run_module(kubelet_feature_gates, args, check_mode=True)
    assert ok and check_run["changed"] and "gpu.present" not in node.read("/etc/sysconfig/kubelet")
    ok, first = run_module(kubelet_feature_gates, args)
    assert ok and first["changed"] and not first["restart_required"] and not first["daemon_reload"], first
    assert node.read("/etc/sysconfig/kubelet") == (
        "KUBELET_EXTRA_ARGS=--v=2 --node-labels=example.com/pool=gpu-a,nvidia.com/gpu.present=true"
        f" --register-with-taints={TAINT}\n")
    ok, again = run_module(kubelet_feature_gates, args)  # the kubelet runs without them: not stale
    assert ok and not again["changed"] and not again["restart_required"] and not again["stale"], again


def test_a_unit_drop_in_changed_for_registration_alone_is_reloaded_not_restarted(run_module, tmp_path):
    node = Node(tmp_path, "1.9.11")
    node.unit("/lib/systemd/system/kubelet.service", UNIT)
    dropin = "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"
    node.unit(dropin, "[Service]\nExecStart=\nExecStart=@/usr/bin/kubelet $KUBELET_EXTRA_ARGS\n")
    node.run([])
    args = node.args(registration_taint=TAINT, registration_labels=OURS)
    ok, result = run_module(kubelet_feature_gates, args)
    assert ok and result["changed"] and result["daemon_reload"] and not result["restart_required"], result
    assert (f'Environment="KUBELET_EXTRA_ARGS=--register-with-taints={TAINT} '
            '--node-labels=nvidia.com/gpu.present=true"') in node.read(dropin)


def test_rke2_node_label_goes_to_the_dropin_whose_list_takes_effect(run_module, tmp_path):
    config, dropin = rke2_tree(
        tmp_path, "# agent\nserver: https://10.0.0.1:9345\nnode-label:\n  - old=x\n",
        "node-label:\n  - example.com/pool=gpu-a\nnode-taint:\n  - dedicated=gpu:NoExecute\n")
    before = config.read_text()
    record = tmp_path / "validated.json"
    args = rke2_args(config, record, registration_taint=TAINT, registration_labels=OURS)
    ok, first = run_module(kubelet_feature_gates, args)
    assert ok and first["changed"] and not first["restart_required"], first
    assert config.read_text() == before  # its list is replaced by the drop-in's
    labels = yaml.safe_load(dropin.read_text())["node-label"]
    assert labels == ["example.com/pool=gpu-a", "nvidia.com/gpu.present=true"]
    assert first["registration_labels"]["where"] == f"{config} node-label"
    assert node_taints(config) == ["dedicated=gpu:NoExecute", TAINT]
    ok, again = run_module(kubelet_feature_gates, args)
    assert ok and not again["changed"], again


def test_rke1_gets_no_label_and_says_so(run_module, tmp_path, monkeypatch):
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda _module, text: warnings.append(text))
    cluster = tmp_path / "cluster.yml"
    cluster.write_text("nodes: []\nservices:\n  kubelet:\n    extra_args: {}\n")
    args = {"rke_cluster_yml": str(cluster), "kubernetes_version": "1.27.16", "registration_labels": OURS}
    ok, result = run_module(kubelet_feature_gates, args)
    assert ok and not result["changed"] and result["registration_labels"]["present"] is False, result
    assert any("registration labels nvidia.com/gpu.present=true not set" in w for w in warnings), warnings


def test_where_the_flags_cannot_be_found_a_config_host_gets_the_taint_and_a_warning(run_module, tmp_path,
                                                                                     monkeypatch):
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda _module, text: warnings.append(text))
    node = Node(tmp_path)  # a kubelet that runs, whose unit is not found
    node.write("/var/lib/kubelet/config.yaml", CONFIG)
    node.run(["--config=@/var/lib/kubelet/config.yaml"])
    args = node.args(registration_taint=TAINT, registration_labels=OURS)
    ok, result = run_module(kubelet_feature_gates, args)
    assert ok and result["target"] == "config" and result["registration_taint"]["present"] is True, result
    assert result["registration_labels"] == {"labels": OURS, "present": False, "where": None}
    assert any(w.startswith("registration labels nvidia.com/gpu.present=true not set: the kubelet (PID 4242)")
               for w in warnings), warnings
