"""kubelet_gates: the gate table over the version matrix, and the merge rules."""

import pytest
from ansible.module_utils.gpunode.kubelet.gates import (
    GATES,
    TABLE_LAST_VERSION,
    GateError,
    checked_through,
    decide,
    format_gate_string,
    gates_needed,
    merge,
    parse_bool,
    parse_gate_string,
    parse_version,
    refused_in_file,
    stage_at,
)
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.28.2", (1, 28, 2)),
        ("v1.28.2", (1, 28, 2)),
        ("Kubernetes v1.9.11", (1, 9, 11)),
        ("v1.27.4+rke2r1", (1, 27, 4)),
        ("v1.10.3-rancher2", (1, 10, 3)),
        ("1.30", (1, 30, 0)),
    ],
)
def test_parse_version(text, expected):
    assert parse_version(text) == expected


@pytest.mark.parametrize("text", ["", "latest", None])
def test_parse_version_refuses_garbage(text):
    with pytest.raises(GateError, match="Kubernetes version: cannot read a version"):
        parse_version(text)


# The facts of the issue, version by version: (gate, value, version, outcome)
MATRIX = [
    ("Accelerators", True, "1.6.0", "apply"),
    ("Accelerators", True, "1.10.13", "apply"),
    ("Accelerators", True, "1.11.0", "fail"),
    ("Accelerators", True, "1.28.2", "fail"),
    ("Accelerators", False, "1.28.2", "fail"),
    ("Accelerators", True, "1.5.8", "fail"),
    ("DevicePlugins", True, "1.7.16", "fail"),
    ("DevicePlugins", True, "1.8.0", "apply"),
    ("DevicePlugins", True, "1.9.11", "apply"),
    ("DevicePlugins", False, "1.10.0", "apply"),
    ("DevicePlugins", True, "1.25.16", "apply"),
    ("DevicePlugins", True, "1.26.0", "apply"),
    ("DevicePlugins", False, "1.26.0", "fail"),
    ("DevicePlugins", False, "1.27.9", "fail"),
    ("DevicePlugins", True, "1.28.0", "skip"),
    ("DevicePlugins", True, "1.30.1", "skip"),
    ("DevicePlugins", False, "1.30.1", "fail"),
    ("KubeletPodResources", False, "1.27.0", "apply"),
    ("KubeletPodResources", False, "1.28.0", "fail"),
    ("KubeletPodResources", True, "1.30.0", "skip"),
    ("KubeletPodResourcesGetAllocatable", True, "1.20.0", "fail"),
    ("DynamicResourceAllocation", True, "1.26.0", "apply"),
    ("DynamicResourceAllocation", True, "1.25.0", "fail"),
    ("DynamicResourceAllocation", False, "1.34.0", "apply"),
    ("DynamicResourceAllocation", False, "1.35.0", "fail"),
    ("DynamicResourceAllocation", True, "1.37.2", "apply"),
    ("DevicePluginCDIDevices", True, "1.27.0", "fail"),
    ("DevicePluginCDIDevices", False, "1.28.0", "apply"),
    ("DevicePluginCDIDevices", False, "1.31.0", "fail"),
    ("DevicePluginCDIDevices", True, "1.33.5", "apply"),
    ("DevicePluginCDIDevices", True, "1.34.0", "skip"),
    ("DevicePluginCDIDevices", False, "1.34.0", "fail"),
    ("DRAAdminAccess", True, "1.31.0", "fail"),
    ("DRAAdminAccess", False, "1.35.0", "apply"),
    ("DRAAdminAccess", False, "1.36.0", "fail"),
    ("DRAAdminAccess", True, "1.37.0", "apply"),
    ("DRAConsumableCapacity", True, "1.34.0", "apply"),
    ("DRAExtendedResource", True, "1.33.0", "fail"),
    ("DRAExtendedResource", False, "1.36.0", "apply"),
    ("DRAExtendedResource", False, "1.37.0", "fail"),
    ("DRADeviceTaints", False, "1.37.0", "apply"),
    ("DRAPartitionableDevices", True, "1.33.0", "apply"),
    ("DRAPrioritizedList", False, "1.36.0", "apply"),
    ("DRAPrioritizedList", False, "1.37.0", "fail"),
    ("KubeletPodResourcesDynamicResources", True, "1.26.0", "fail"),
    ("KubeletPodResourcesGet", True, "1.27.0", "apply"),
    ("KubeletPodResourcesGet", False, "1.36.0", "apply"),
    ("ResourceHealthStatus", True, "1.31.0", "apply"),
    ("ResourceHealthStatus", False, "1.36.0", "apply"),
    # newer than the table: what the last known version says, with a warning (see below)
    ("DRAConsumableCapacity", True, "1.38.0", "apply"),
    ("DRAExtendedResource", True, "1.38.0", "skip"),
    ("DRAExtendedResource", False, "1.38.0", "fail"),
    ("DynamicResourceAllocation", True, "1.38.0", "skip"),
    ("DRADeviceTaints", False, "1.40.0", "apply"),
    ("DRADeviceTaints", False, "1.41.0", "fail"),
    ("KubeletPodResourcesGet", True, "1.37.0", "apply"),
]


@pytest.mark.parametrize(("gate", "value", "version", "outcome"), MATRIX)
def test_version_matrix(gate, value, version, outcome):
    if outcome == "fail":
        with pytest.raises(GateError) as err:
            decide({gate: value}, version)
        # the message names the gate and the version it was checked against
        assert gate in str(err.value)
        assert version in str(err.value)
        return
    apply, skipped, _ = decide({gate: value}, version)
    if outcome == "apply":
        assert apply == {gate: value}
        assert skipped == {}
    else:
        assert apply == {}
        assert "removed" in skipped[gate]


def test_removed_gate_message_says_why():
    with pytest.raises(GateError) as err:
        decide({"Accelerators": True}, "1.28.2")
    assert "Accelerators was removed in Kubernetes 1.11; this kubelet is 1.28.2 and would not start" in str(
        err.value
    )


def test_locked_gate_message_names_the_lock():
    with pytest.raises(GateError, match="locked to true"):
        decide({"DevicePlugins": False}, "v1.26.3")


def test_unknown_gate_fails_unless_allowed():
    with pytest.raises(GateError, match="allow_unknown"):
        decide({"DevicePlugin": True}, "1.9.0")
    apply, _, warnings = decide({"DevicePlugin": True}, "1.9.0", allow_unknown=True)
    assert apply == {"DevicePlugin": True}
    assert "unchecked" in warnings[0]


def test_all_refusals_are_reported_together():
    with pytest.raises(GateError) as err:
        decide({"Accelerators": True, "Typo": True, "DevicePlugins": False}, "1.28.2")
    for name in ("Accelerators", "Typo", "DevicePlugins"):
        assert name in str(err.value)


def test_string_values_are_read_like_the_kubelet():
    assert decide({"DevicePlugins": "true"}, "1.9.0")[0] == {"DevicePlugins": True}
    with pytest.raises(GateError, match="invalid value"):
        decide({"DevicePlugins": "yes please"}, "1.9.0")


@pytest.mark.parametrize(
    ("version", "legacy", "expected"),
    [
        ("1.7.5", True, {"Accelerators": True}),
        ("1.8.0", False, {"DevicePlugins": True}),
        ("1.9.11", True, {"DevicePlugins": True, "Accelerators": True}),
        ("1.10.0", True, {"Accelerators": True}),
        ("1.10.0", False, {}),
        ("1.11.0", True, {}),
        ("1.27.9", False, {}),
        ("1.28.2", False, {"DevicePlugins": True}),
    ],
)
def test_gates_needed_by_a_gpu_node(version, legacy, expected):
    needed = gates_needed(version, legacy_accelerators=legacy)
    assert needed == expected
    # whatever the role asks for is accepted by that kubelet
    decide(needed, version)


def test_table_stages_are_contiguous_and_removal_follows_the_last():
    for name, entry in GATES.items():
        stages = entry["stages"]
        for index in range(1, len(stages)):  # pairs of stages (tests run on Python 3.8 too)
            before, after = stages[index - 1], stages[index]
            assert parse_version(after.since)[:2] == (1, parse_version(before.until)[1] + 1), name
        if entry["removed"]:
            assert parse_version(entry["removed"])[1] == parse_version(stages[-1].until)[1] + 1, name
            assert stage_at(name, entry["removed"]) is None


def test_refused_in_file_flags_what_the_kubelet_would_reject():
    assert set(refused_in_file({"DevicePlugins": True, "Other": True}, "1.30.0")) == {"DevicePlugins"}
    assert refused_in_file({"DevicePlugins": True}, "1.20.0") == {}


def test_gate_strings():
    assert parse_gate_string("A=true, B=False,,C=1") == {"A": True, "B": False, "C": True}
    assert format_gate_string({"A": True, "B": False}) == "A=true,B=false"
    with pytest.raises(GateError):
        parse_gate_string("A")
    with pytest.raises(GateError):
        parse_bool("A", "maybe")


NAMES = st.sampled_from(["A", "B", "DevicePlugins", "Accelerators", "X1"])
MAPS = st.dictionaries(NAMES, st.booleans(), max_size=5)


@given(existing=MAPS, apply=MAPS, remove=st.sets(NAMES))
def test_merge_is_idempotent_and_keeps_unasked_gates(existing, apply, remove):
    once = merge(existing, apply, remove)
    assert merge(once, apply, remove) == once
    for name, value in existing.items():
        if name not in apply and name not in remove:
            assert once[name] is value
    for name, value in apply.items():
        assert once[name] is value
    assert parse_gate_string(format_gate_string(once)) == once


@pytest.mark.parametrize(
    ("gate", "version", "last"),
    [("DRAConsumableCapacity", "1.38.0", "1.37"), ("KubeletPodResourcesGet", "1.37.1", "1.36")],
)
def test_past_the_table_the_warning_names_the_last_known_version(gate, version, last):
    apply, _, warnings = decide({gate: True}, version)
    assert apply == {gate: True}
    assert f"newer than this module's gate table for {gate} (last: {last})" in warnings[0]
    # inside the table: no warning
    assert decide({gate: True}, last)[2] == []


def test_past_the_table_a_locked_gate_is_not_written_and_says_why():
    _, skipped, warnings = decide({"DynamicResourceAllocation": True}, "1.38.0")
    assert "locked to true in Kubernetes 1.37" in skipped["DynamicResourceAllocation"]
    assert "planned removal in 1.38" in skipped["DynamicResourceAllocation"]
    assert warnings


def test_every_gate_still_known_names_how_far_its_sources_go():
    for name, entry in GATES.items():
        if not entry["removed"]:
            assert parse_version(checked_through(name)) <= parse_version(TABLE_LAST_VERSION), name
            assert stage_at(name, checked_through(name)) is not None, name


def test_gates_needed_cleans_up_every_removed_gpu_gate():
    assert gates_needed("1.34.0") == {
        "DevicePlugins": True,
        "KubeletPodResources": True,
        "KubeletPodResourcesGetAllocatable": True,
        "DevicePluginCDIDevices": True,
    }
    apply, skipped, _ = decide(gates_needed("1.34.0"), "1.34.0")
    assert apply == {} and set(skipped) == set(gates_needed("1.34.0"))
