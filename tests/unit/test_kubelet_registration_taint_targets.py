"""The registration taint where the kubelet's gates do not go to its --config file.

A ``--config-dir`` drop-in (whose list replaces the files' before it: it carries theirs too), the
``--register-with-taints`` flag (merged into the one there, else started from the config file's
list, which the flag replaces) and RKE2's ``node-taint``. Each: put in while the node has not
passed its validation, left as it is once it has, taken out with the gate off, the operator's
taints kept, idempotent, and nothing written in check mode.
"""

import json
import os
import pathlib

import kubelet_feature_gates
import yaml
from ansible.module_utils import basic
from ansible.module_utils.gpunode.host.files import rke2_files
from ansible.module_utils.gpunode.kubelet.rke_args import rke2_items
from ansible.module_utils.gpunode.kubelet.taints import merge_list, parse, parse_list, render_list
from test_kubelet_plan import UNIT, Node, kubeadm_node

TAINT = "gpunode.io/gpu-unvalidated:NoSchedule"
OURS = parse(TAINT)
OPERATORS = {"key": "dedicated", "value": "gpu", "effect": "NoExecute"}
CONFIG_DIR = "/etc/kubernetes/kubelet.conf.d"
DROPIN = CONFIG_DIR + "/90-gpunode-feature-gates.conf"
PASSED = json.dumps({"passed": True, "failed_checks": []})


def test_flag_values_parse_and_render_as_the_kubelet_reads_them():
    assert parse_list("dedicated=gpu:NoExecute," + TAINT) == [OPERATORS, OURS]
    assert parse_list("") == []
    assert render_list([OPERATORS, OURS]) == "dedicated=gpu:NoExecute," + TAINT
    assert merge_list([OPERATORS, {**OURS, "value": "x"}], OURS, True) == [OPERATORS, OURS]
    assert merge_list([OURS, OPERATORS], OURS, True) == [OURS, OPERATORS]  # already there: kept in place
    assert merge_list([OURS, OPERATORS], OURS, False) == [OPERATORS]


def config_dir_node(tmp_path, config_taints=None):
    config = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailCgroupV1: false\n"
    if config_taints:
        config += "registerWithTaints:\n- key: dedicated\n  value: gpu\n  effect: NoExecute\n"
    node = kubeadm_node(tmp_path, config=config, kubeadm_flags="--config-dir=" + str(tmp_path) + CONFIG_DIR)
    node.write(CONFIG_DIR + "/10-site.conf", "kind: KubeletConfiguration\nmaxPods: 200\n")
    node.run(["--config=@/var/lib/kubelet/config.yaml", "--config-dir=@" + CONFIG_DIR], started="before")
    return node


def test_config_dir_dropin_carries_the_operators_list_and_the_taint(run_module, tmp_path):
    node = config_dir_node(tmp_path, config_taints=True)
    record = node.path("/var/lib/gpunode/validated.json")
    args = node.args(registration_taint=TAINT, validation_record=record)
    main_before = node.read("/var/lib/kubelet/config.yaml")

    ok, check = run_module(kubelet_feature_gates, args, check_mode=True, diff=True)
    assert ok and check["changed"] and "gpunode.io/gpu-unvalidated" in check["diff"]["after"]
    assert not os.path.exists(node.path(DROPIN))

    ok, first = run_module(kubelet_feature_gates, args)  # the list alone: read at registration, no restart
    assert ok and first["changed"] and not first["restart_required"], first
    assert first["registration_taint"] == {"taint": TAINT, "present": True, "where": node.path(DROPIN)
                                           + " registerWithTaints", "why": f"{record}: not validated yet"}
    dropin = yaml.safe_load(node.read(DROPIN))
    assert dropin["registerWithTaints"] == [OPERATORS, OURS]  # the list replaces the main file's
    assert "featureGates" not in dropin  # no gate asked: the drop-in sets only the list
    assert node.read("/var/lib/kubelet/config.yaml") == main_before
    node.run(["--config=@/var/lib/kubelet/config.yaml", "--config-dir=@" + CONFIG_DIR], started="after")
    ok, again = run_module(kubelet_feature_gates, args)
    assert ok and not again["changed"] and not again["restart_required"]

    node.write("/var/lib/gpunode/validated.json", PASSED)
    written = node.read(DROPIN)
    ok, passed = run_module(kubelet_feature_gates, args)  # validated: left as it is
    assert ok and not passed["changed"] and passed["registration_taint"]["present"] is True
    assert node.read(DROPIN) == written

    ok, off = run_module(kubelet_feature_gates, dict(args, registration_taint_state="absent"))
    assert ok and off["changed"] and off["registration_taint"]["present"] is False
    assert not os.path.exists(node.path(DROPIN))  # nothing left to set: the main file's list applies


def test_config_dir_dropin_keeps_its_gates_when_the_taint_goes(run_module, tmp_path):
    node = config_dir_node(tmp_path)
    args = node.args(registration_taint=TAINT, gates={"DRAPartitionableDevices": True},
                     validation_record=node.path("/var/lib/gpunode/validated.json"))
    ok, first = run_module(kubelet_feature_gates, args)
    assert ok, first
    dropin = yaml.safe_load(node.read(DROPIN))
    assert dropin["featureGates"] == {"DRAPartitionableDevices": True}
    assert dropin["registerWithTaints"] == [OURS]
    ok, off = run_module(kubelet_feature_gates, dict(args, registration_taint_state="absent"))
    assert ok and off["changed"]
    assert yaml.safe_load(node.read(DROPIN)) == {"apiVersion": "kubelet.config.k8s.io/v1beta1",
                                                 "kind": "KubeletConfiguration",
                                                 "featureGates": {"DRAPartitionableDevices": True}}


def test_a_later_dropin_with_its_own_list_is_reported_not_overwritten(run_module, tmp_path, monkeypatch):
    warnings = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda _module, text: warnings.append(text))
    node = config_dir_node(tmp_path)
    node.write(CONFIG_DIR + "/99-site.conf", "kind: KubeletConfiguration\nregisterWithTaints: []\n")
    ok, result = run_module(kubelet_feature_gates, node.args(
        registration_taint=TAINT, validation_record=node.path("/var/lib/gpunode/validated.json")))
    assert ok and not result["changed"], result
    assert result["registration_taint"]["present"] is False
    assert any("99-site.conf sets registerWithTaints" in w for w in warnings), warnings
    node.write(DROPIN, "kind: KubeletConfiguration\nregisterWithTaints:\n- key: x\n  effect: NoSchedule\n")
    ok, off = run_module(kubelet_feature_gates, node.args(  # the gate off: gpunode's list goes all the same
        registration_taint=TAINT, registration_taint_state="absent",
        validation_record=node.path("/var/lib/gpunode/validated.json")))
    assert ok and off["changed"] and not os.path.exists(node.path(DROPIN)), off


def flags_node(tmp_path, extra_args=""):
    """An RPM-layout kubelet without a config file: its flags in /etc/sysconfig/kubelet."""
    node = Node(tmp_path, "1.33.1")
    node.unit("/usr/lib/systemd/system/kubelet.service", UNIT)
    node.unit(
        "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
        "[Service]\nEnvironmentFile=-@/etc/sysconfig/kubelet\n"
        "ExecStart=\nExecStart=@/usr/bin/kubelet $KUBELET_EXTRA_ARGS\n",
    )
    node.write("/etc/sysconfig/kubelet", f"KUBELET_EXTRA_ARGS={extra_args}\n")
    node.run(extra_args.split(), started="before")
    return node


def test_flags_only_kubelet_gets_the_flag_where_its_flags_reach_it(run_module, tmp_path):
    node = flags_node(tmp_path)
    args = node.args(registration_taint=TAINT, validation_record=node.path("/var/lib/gpunode/validated.json"))
    ok, check = run_module(kubelet_feature_gates, args, check_mode=True, diff=True)
    assert ok and check["changed"] and node.read("/etc/sysconfig/kubelet") == "KUBELET_EXTRA_ARGS=\n"
    ok, first = run_module(kubelet_feature_gates, args)  # read only at registration: no restart
    assert ok and first["changed"] and not first["restart_required"], first
    assert node.read("/etc/sysconfig/kubelet") == f"KUBELET_EXTRA_ARGS=--register-with-taints={TAINT}\n"
    assert first["registration_taint"]["where"].endswith("KUBELET_EXTRA_ARGS --register-with-taints")
    ok, again = run_module(kubelet_feature_gates, args)  # a kubelet running without the flag is not stale
    assert ok and not again["changed"] and not again["restart_required"] and not again["stale"], again
    ok, off = run_module(kubelet_feature_gates, dict(args, registration_taint_state="absent"))
    assert ok and off["changed"] and node.read("/etc/sysconfig/kubelet") == "KUBELET_EXTRA_ARGS=\n"


def test_the_flag_there_is_merged_into_and_the_operators_taint_stays(run_module, tmp_path):
    node = flags_node(tmp_path, "--v=2 --register-with-taints=dedicated=gpu:NoExecute")
    args = node.args(registration_taint=TAINT, validation_record=node.path("/var/lib/gpunode/validated.json"))
    ok, first = run_module(kubelet_feature_gates, args)
    assert ok and first["changed"], first
    assert node.read("/etc/sysconfig/kubelet") == (
        f"KUBELET_EXTRA_ARGS=--v=2 --register-with-taints=dedicated=gpu:NoExecute,{TAINT}\n")
    node.write("/var/lib/gpunode/validated.json", PASSED)
    ok, passed = run_module(kubelet_feature_gates, args)
    assert ok and not passed["changed"] and passed["registration_taint"]["present"] is True
    ok, off = run_module(kubelet_feature_gates, dict(args, registration_taint_state="absent"))
    assert ok and off["changed"]
    assert node.read("/etc/sysconfig/kubelet") == (
        "KUBELET_EXTRA_ARGS=--v=2 --register-with-taints=dedicated=gpu:NoExecute\n")


def test_a_flags_file_named_starts_from_the_config_files_list(run_module, tmp_path):
    """The flag replaces registerWithTaints of --config: the operator's taint there goes into it."""
    config = ("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailCgroupV1: false\n"
              "registerWithTaints:\n- key: dedicated\n  value: gpu\n  effect: NoExecute\n")
    node = kubeadm_node(tmp_path, config=config, kubeadm_flags="--node-ip=10.0.0.5")
    node.run(["--config=@/var/lib/kubelet/config.yaml"], started="before")
    flags_file = node.path("/var/lib/kubelet/kubeadm-flags.env")
    args = node.args(registration_taint=TAINT, flags_file=flags_file,
                     validation_record=node.path("/var/lib/gpunode/validated.json"))
    ok, first = run_module(kubelet_feature_gates, args)
    assert ok and first["changed"], first
    assert node.read("/var/lib/kubelet/kubeadm-flags.env") == (
        f'KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5 --register-with-taints=dedicated=gpu:NoExecute,{TAINT}"\n')
    ok, off = run_module(kubelet_feature_gates, dict(args, registration_taint_state="absent"))
    assert ok and off["changed"]  # what is left is the config file's list: the flag goes
    assert node.read("/var/lib/kubelet/kubeadm-flags.env") == 'KUBELET_KUBEADM_ARGS="--node-ip=10.0.0.5"\n'


def rke2_args(config, record, **extra):
    return {"kubernetes_version": "v1.30.4+rke2r1", "rke2_config": str(config),
            "registration_taint": TAINT, "validation_record": str(record), **extra}


def rke2_tree(folder, config_text, dropin_text):
    """RKE2's config.yaml and one drop-in in config.yaml.d (whose lists replace the config's)."""
    config = folder / "config.yaml"
    config.write_text(config_text)
    (folder / "config.yaml.d").mkdir()
    dropin = folder / "config.yaml.d" / "50-gpu.yaml"
    dropin.write_text(dropin_text)
    return config, dropin


def node_taints(config):
    texts = {name: pathlib.Path(name).read_text(encoding="utf-8") for name in rke2_files(str(config))}
    return [item[3] for item in rke2_items(texts, "node-taint")]


def test_rke2_node_taint_gets_the_taint_and_keeps_the_operators(run_module, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("# agent\nserver: https://10.0.0.1:9345\nnode-taint:\n  - dedicated=gpu:NoExecute\n")
    record = tmp_path / "validated.json"
    ok, check = run_module(kubelet_feature_gates, rke2_args(config, record), check_mode=True, diff=True)
    assert ok and check["changed"] and TAINT in check["diff"]["after"]
    assert node_taints(config) == ["dedicated=gpu:NoExecute"]
    ok, first = run_module(kubelet_feature_gates, rke2_args(config, record))
    assert ok and first["changed"] and first["registration_taint"]["present"] is True
    assert node_taints(config) == ["dedicated=gpu:NoExecute", TAINT]
    assert config.read_text().startswith("# agent\nserver: https://10.0.0.1:9345\n")
    ok, again = run_module(kubelet_feature_gates, rke2_args(config, record))
    assert ok and not again["changed"]
    record.write_text(PASSED)
    ok, passed = run_module(kubelet_feature_gates, rke2_args(config, record))
    assert ok and not passed["changed"] and passed["registration_taint"]["present"] is True
    ok, off = run_module(kubelet_feature_gates, rke2_args(config, record, registration_taint_state="absent"))
    assert ok and off["changed"] and node_taints(config) == ["dedicated=gpu:NoExecute"]


def test_rke2_dropin_that_replaces_node_taint_is_the_one_edited(run_module, tmp_path):
    config, _dropin = rke2_tree(tmp_path, "node-taint: old=x:NoSchedule\n",
                                "node-taint:\n  - dedicated=gpu:NoExecute\n")
    before = config.read_text()
    ok, result = run_module(kubelet_feature_gates, rke2_args(config, tmp_path / "none.json"))
    assert ok and result["changed"], result
    assert config.read_text() == before
    assert node_taints(config) == ["dedicated=gpu:NoExecute", TAINT]


def test_a_unit_drop_in_gets_the_flag_beside_the_gates(run_module, tmp_path):
    """kubeadm's pre-1.11 drop-in: the gate and the taint in its Environment="KUBELET_EXTRA_ARGS=..."."""
    node = Node(tmp_path, "1.9.11")
    node.unit("/lib/systemd/system/kubelet.service", UNIT)
    node.unit(
        "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
        '[Service]\nEnvironment="KUBELET_CADVISOR_ARGS=--cadvisor-port=0"\nExecStart=\n'
        "ExecStart=@/usr/bin/kubelet $KUBELET_CADVISOR_ARGS $KUBELET_EXTRA_ARGS\n",
    )
    args = node.args(gpu_node=True, registration_taint=TAINT,
                     validation_record=node.path("/var/lib/gpunode/validated.json"))
    ok, result = run_module(kubelet_feature_gates, args)
    assert ok and result["daemon_reload"], result
    flags = f"--feature-gates=DevicePlugins=true --register-with-taints={TAINT}"
    line = f'Environment="KUBELET_EXTRA_ARGS={flags}"'
    assert line in node.read("/etc/systemd/system/kubelet.service.d/10-kubeadm.conf")
    node.run(["--cadvisor-port=0", "--feature-gates=DevicePlugins=true", f"--register-with-taints={TAINT}"],
             started="after")
    ok, again = run_module(kubelet_feature_gates, args)
    assert ok and not again["changed"] and not again["restart_required"], again
