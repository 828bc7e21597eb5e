"""The validation gate at registration: registerWithTaints in the kubelet's --config file.

Real KubeletConfiguration files (kubeadm's, from ../shared/fixtures/kubelet, and one with
the operator's comments from tests/fixtures/kubelet) get the taint while the node's
validation record does not say passed, keep the file as it is once it does (the list is read only
at registration: no restart after a validation), lose it when the gate is off, and keep the
operator's taints.
"""

import json
from pathlib import Path

import kubelet_feature_gates
import pytest
from ansible.module_utils.gpunode.formats.yaml_load import safe_load
from ansible.module_utils.gpunode.kubelet.taints import TaintError, edit, parse, wanted
from conftest import shared_path
from test_kubelet_plan import kubeadm_node

KUBEADM = "var-lib-kubelet-config.yaml-kubeadm-1.2x-acmeofmanas"
COMMENTED = "var-lib-kubelet-config.yaml-k8s1.12-comments-huisebug"
TAINT = parse("gpunode.io/gpu-unvalidated:NoSchedule")
OPERATORS = "registerWithTaints:\n- key: dedicated\n  value: gpu\n  effect: NoExecute\n"
LOCAL = Path(__file__).resolve().parents[1] / "fixtures" / "kubelet"


def real_configs():
    return [
        shared_path("fixtures", "kubelet", KUBEADM).read_text(),
        shared_path("fixtures", "kubelet", COMMENTED).read_text(),
        (LOCAL / "config-featuregates-comments.yaml").read_text(),
    ]


def test_parse_reads_kubectl_taint_syntax_and_refuses_the_rest():
    assert TAINT == {"key": "gpunode.io/gpu-unvalidated", "effect": "NoSchedule"}
    assert parse("dedicated=gpu:NoExecute") == {"key": "dedicated", "value": "gpu", "effect": "NoExecute"}
    for bad in ("gpunode.io/gpu-unvalidated", "x:NoScheduled", "bad key:NoSchedule", ":NoSchedule"):
        with pytest.raises(TaintError, match="registration_taint"):
            parse(bad)


def test_every_real_config_gets_the_taint_and_comes_back_byte_for_byte():
    for text in real_configs():
        tainted = edit(text, TAINT, True)
        data = safe_load(tainted)
        assert data["registerWithTaints"] == [TAINT]
        assert {k: v for k, v in data.items() if k != "registerWithTaints"} == safe_load(text)
        old_lines = text.splitlines()
        assert [line for line in tainted.splitlines() if line in old_lines] == old_lines  # comments kept
        assert edit(tainted, TAINT, True) == tainted  # converged: nothing to write
        assert edit(tainted, TAINT, False) == text


def test_the_operators_taints_are_kept_in_and_out():
    text = real_configs()[0] + OPERATORS
    tainted = edit(text, TAINT, True)
    assert safe_load(tainted)["registerWithTaints"] == [
        {"key": "dedicated", "value": "gpu", "effect": "NoExecute"}, TAINT,
    ]
    lifted = edit(tainted, TAINT, False)
    assert safe_load(lifted)["registerWithTaints"] == [
        {"key": "dedicated", "value": "gpu", "effect": "NoExecute"}
    ]
    assert edit(text, TAINT, False) == text


def test_a_json_config_stays_json():
    operators = [{"key": "a", "effect": "NoSchedule"}]
    text = json.dumps({"kind": "KubeletConfiguration", "registerWithTaints": operators}, indent=4) + "\n"
    tainted = edit(text, TAINT, True)
    assert json.loads(tainted)["registerWithTaints"] == [{"key": "a", "effect": "NoSchedule"}, TAINT]
    assert tainted.startswith('{\n    "kind"')
    assert json.loads(edit(tainted, TAINT, False)) == json.loads(text)


def test_a_registerWithTaints_that_is_not_a_list_is_refused():
    with pytest.raises(TaintError, match="not a list"):
        edit("kind: KubeletConfiguration\nregisterWithTaints: gpu\n", TAINT, True)


def test_wanted_follows_the_validation_record(tmp_path):
    record = tmp_path / "validated.json"
    assert wanted("unvalidated", str(record)) == (True, f"{record}: not validated yet")
    record.write_text(json.dumps({"passed": False, "failed_checks": ["ecc"], "driver_version": "580.95.05"}))
    assert wanted("unvalidated", str(record))[0] is True
    record.write_text(json.dumps({"passed": True, "failed_checks": [], "driver_version": "580.95.05"}))
    assert wanted("unvalidated", str(record))[0] is None
    assert wanted("absent", str(tmp_path / "none.json")) == (False, "the validation gate is off")


def test_the_module_taints_an_unvalidated_node_and_leaves_the_file_once_validated(run_module, tmp_path):
    config = shared_path("fixtures", "kubelet", KUBEADM).read_text()
    node = kubeadm_node(tmp_path, config=config + "failCgroupV1: false\n" + OPERATORS)
    node.run(["--config=@/var/lib/kubelet/config.yaml"], started="before")
    record = node.path("/var/lib/gpunode/validated.json")
    args = node.args(registration_taint="gpunode.io/gpu-unvalidated:NoSchedule", validation_record=record)
    before = node.read("/var/lib/kubelet/config.yaml")

    ok, check = run_module(kubelet_feature_gates, args, check_mode=True, diff=True)
    assert ok and check["changed"], check
    assert "gpunode.io/gpu-unvalidated" in check["diff"]["after"] and check["diff"]["before"] == before
    assert node.read("/var/lib/kubelet/config.yaml") == before  # check mode writes nothing
    assert check["registration_taint"]["present"] is True

    ok, first = run_module(kubelet_feature_gates, args)
    assert ok and first["changed"] and first["restart_required"]
    taints = safe_load(node.read("/var/lib/kubelet/config.yaml"))["registerWithTaints"]
    assert taints == [{"key": "dedicated", "value": "gpu", "effect": "NoExecute"}, TAINT]
    node.run(["--config=@/var/lib/kubelet/config.yaml"], started="after")
    ok, again = run_module(kubelet_feature_gates, args)
    assert ok and not again["changed"] and not again["restart_required"]

    node.write("/var/lib/gpunode/validated.json", json.dumps({"passed": True, "failed_checks": []}))
    ok, passed = run_module(kubelet_feature_gates, args)  # validated: the file is left as it is
    assert ok and not passed["changed"] and not passed["restart_required"]
    assert passed["registration_taint"]["present"] is True
    assert safe_load(node.read("/var/lib/kubelet/config.yaml"))["registerWithTaints"] == taints


def test_the_gate_switched_off_takes_the_taint_out(run_module, tmp_path):
    node = kubeadm_node(tmp_path)
    node.run(["--config=@/var/lib/kubelet/config.yaml"], started="before")
    taint = "gpunode.io/gpu-unvalidated:NoSchedule"
    ok, _ = run_module(kubelet_feature_gates, node.args(registration_taint=taint))
    assert ok and "registerWithTaints" in node.read("/var/lib/kubelet/config.yaml")
    off_args = node.args(registration_taint=taint, registration_taint_state="absent")
    ok, off = run_module(kubelet_feature_gates, off_args)
    assert ok and off["changed"]
    assert "registerWithTaints" not in node.read("/var/lib/kubelet/config.yaml")


def test_a_bad_taint_fails_before_anything_is_read(run_module, tmp_path):
    node = kubeadm_node(tmp_path)
    ok, result = run_module(kubelet_feature_gates, node.args(registration_taint="gpu-unvalidated"))
    assert not ok and "registration_taint 'gpu-unvalidated'" in result["msg"]
