"""The validated concern: gpu_validate's record read by gpunode_node_state, so that site.yml leaves a
validated, converged node out of the validation play (no round trip) and validates the others."""

import json

import gpunode_node_state
import pytest
from ansible.module_utils.gpunode.validate import marker
from test_node_state import concerns, node  # noqa: F401 (the fixture)


def write(path, **record):
    path.write_text(json.dumps(dict({"passed": True, "failed_checks": [], "driver_version": "535.129.03"},
                                    **record)))
    return str(path)


def read_all(run_module, node_args, validated):
    args = dict(concerns(node_args), validated=validated)
    ok, result = run_module(gpunode_node_state, args, check_mode=True)
    assert ok, result
    return result


def test_a_passed_validation_with_the_loaded_driver_is_converged(node, run_module, tmp_path):  # noqa: F811
    result = read_all(run_module, node, {"marker": write(tmp_path / "validated.json")})
    assert result["converged"]["validated"] is True
    facts = result["ansible_facts"]["gpu_validate"]
    assert (facts["passed"], facts["failed_checks"], facts["ran"]) == (True, [], False)
    assert facts["validated_at"].endswith("Z")


@pytest.mark.parametrize("record, why", [
    (None, "not validated yet"),
    ({"passed": False, "failed_checks": ["xid"]}, "the last validation failed"),
    ({"driver_version": "535.104.05"}, "validated with driver 535.104.05, 535.129.03 is loaded now"),
])
def test_a_node_not_validated_with_this_driver_is_validated_again(node, run_module, tmp_path,  # noqa: F811
                                                                 record, why):
    path = tmp_path / "validated.json"
    if record is not None:
        write(path, **record)
    result = read_all(run_module, node, {"marker": str(path)})
    assert result["converged"]["validated"] is False
    assert result["reasons"]["validated"] == f"read again by its role: {path}: {why}"
    assert "gpu_validate" not in result["ansible_facts"]


def test_a_change_before_it_validates_again(node, run_module, tmp_path):  # noqa: F811
    args = dict(concerns(node, driver={"version": "535.183.01"}),
                validated={"marker": write(tmp_path / "validated.json")})
    ok, result = run_module(gpunode_node_state, args, check_mode=True)
    assert ok, result
    assert result["converged"] == {"driver": False, "container_runtime": False, "kubelet": False,
                                   "validated": False}


def test_the_record_is_the_verdict_without_a_time():
    outcome = {"passed": False, "failed_checks": ["ecc", "xid"]}
    assert marker.content(outcome, "580.159.04") == {
        "passed": False, "failed_checks": ["ecc", "xid"], "driver_version": "580.159.04"}
    assert marker.content(outcome, "580.159.04", None) == marker.content(outcome, "580.159.04")


def test_the_record_keeps_the_fabrics_state_for_the_next_runs_table(tmp_path):
    record = marker.content({"passed": True, "failed_checks": []}, "580.95.05", "Completed")
    assert record == {"passed": True, "failed_checks": [], "driver_version": "580.95.05",
                      "fabric": "Completed"}
    path = tmp_path / "validated.json"
    path.write_text(json.dumps(record))
    done, facts, _why = marker.read(str(path), "580.95.05")
    assert done and facts["gpu_validate"]["fabric"] == "Completed"
    assert marker.read(write(tmp_path / "old.json"))[1]["gpu_validate"]["fabric"] is None


def test_an_unreadable_record_is_not_converged(tmp_path):
    path = tmp_path / "validated.json"
    path.write_text("[1]")
    assert marker.read(str(path)) == (False, {}, f"{path}: not a JSON object")
    path.write_text("{")
    done, _facts, why = marker.read(str(path))
    assert not done
    assert why.startswith(f"{path}: unreadable (")


def test_a_wanted_boot_unit_not_installed_yet_is_not_converged_where_systemd_runs(tmp_path, monkeypatch):
    """A node validated before its boot unit was wanted gets it: the validation play runs there."""
    record = write(tmp_path / "validated.json")
    unit = tmp_path / "gpunode-boot-validate.service"
    systemd = tmp_path / "run-systemd-system"
    monkeypatch.setattr(marker.systemd, "BOOTED_MARKER", str(systemd))
    assert marker.read(record, boot_unit=str(unit))[0] is True  # no systemd runs: no unit to install
    systemd.mkdir()
    assert marker.read(record, boot_unit=str(unit)) == (
        False, marker.read(record)[1], f"{unit}: the boot unit is not installed yet")
    assert marker.read(record)[0] is True  # none wanted
    unit.write_text("[Unit]\n")
    assert marker.read(record, boot_unit=str(unit))[0] is True
