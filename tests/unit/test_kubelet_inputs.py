"""Hostile inventory values for kubelet_feature_gates, per kind of value: refused before anything is read.

A gate name lands in ``--feature-gates=Name=true,...`` inside a quoted environment
value or a unit's ``Environment=``; the variable name lands on the left of ``=`` in
those files; the service goes to systemctl; paths are opened and handed on. Each
table below holds values that would break that place (or name another thing); the
module must fail naming the option and the value, without reading or writing a file.
"""

import os

import kubelet_feature_gates
import pytest
from ansible.module_utils.gpunode.kubelet import discovery as kubelet_discovery
from ansible.module_utils.gpunode.kubelet import state_call as kubelet_state_call
from ansible.module_utils.gpunode.kubelet.gates import GateError, check_gate_name, decide
from ansible.module_utils.gpunode.kubelet.inputs import InputError, check_params

LOOKALIKE = "DynamicResourceAllocat\u0456on"  # CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I

HOSTILE_GATE_NAMES = {
    "quote": 'DynamicResourceAllocation" --pod-manifest-path=/tmp/x "',
    "newline": "DynamicResourceAllocation\nKUBELET_EXTRA_ARGS=--v=9",
    "trailing-newline": "DynamicResourceAllocation\n",
    "comma": "DynamicResourceAllocation,Foo",
    "equals": "DynamicResourceAllocation=true,Foo",
    "space": "Dynamic ResourceAllocation",
    "dollar": "Dynamic$HOME",
    "backslash": "Dynamic\\ResourceAllocation",
    "empty": "",
    "unicode-lookalike": LOOKALIKE,
    "leading-digit": "1DynamicResourceAllocation",
    "underscore": "Dynamic_Resource_Allocation",
}
HOSTILE_VARIABLES = {
    "quote": 'KUBELET_EXTRA_ARGS"',
    "newline": "KUBELET_EXTRA_ARGS\nExecStart=/bin/sh",
    "comma": "A,B",
    "equals": "KUBELET_EXTRA_ARGS=--v=9",
    "space": "KUBELET EXTRA ARGS",
    "dollar": "$KUBELET_EXTRA_ARGS",
    "empty": "",
    "unicode-lookalike": "KUBELET_EXTRA_\u0410RGS",  # CYRILLIC CAPITAL A
    "leading-digit": "1KUBELET_EXTRA_ARGS",
}
HOSTILE_SERVICES = {
    "quote": 'kubelet.service"',
    "newline": "kubelet.service\nExecStart=/bin/sh",
    "comma": "kubelet.service,docker.service",
    "equals": "kubelet=service",
    "space": "kubelet service",
    "dollar": "$kubelet",
    "empty": "",
    "unicode-lookalike": "kub\u0435let.service",  # CYRILLIC SMALL IE
    "slash": "../kubelet.service",
}
HOSTILE_PATHS = {
    "newline": "/etc/default/kubelet\nKUBELET_EXTRA_ARGS=x",
    "relative": "etc/default/kubelet",
    "empty": "",
}


@pytest.fixture
def untouched(tmp_path, monkeypatch):
    """A node folder whose files must not change, and a guard that nothing is read or run."""
    flags = tmp_path / "kubelet"
    flags.write_text('KUBELET_EXTRA_ARGS="--v=2 --feature-gates=KubeletTracing=true"\n')
    config = tmp_path / "config.yaml"
    config.write_text("kind: KubeletConfiguration\nfeatureGates:\n  KubeletTracing: true\n")
    touched = []

    def guard(name):
        def record(*args, **kwargs):
            touched.append((name, args))
            raise AssertionError(f"{name} called before the options were checked: {args}")

        return record

    for name in ("read_text", "exists", "isdir", "listdir", "run", "which"):
        monkeypatch.setattr(kubelet_state_call.Host, name, guard(name))
    monkeypatch.setattr(kubelet_discovery, "scan", guard("scan"))

    def snapshot():
        return {name: (tmp_path / name).read_bytes() for name in sorted(os.listdir(tmp_path))}

    before = snapshot()
    yield {"flags": str(flags), "config": str(config), "touched": touched}
    assert snapshot() == before
    assert not touched


def refused(run_module, args):
    ok, result = run_module(kubelet_feature_gates, {"kubernetes_version": "1.30.2", **args}, diff=True)
    assert not ok, result
    return result["msg"]


@pytest.mark.parametrize("allow_unknown", [False, True], ids=["checked", "allow_unknown"])
@pytest.mark.parametrize("name", list(HOSTILE_GATE_NAMES.values()), ids=list(HOSTILE_GATE_NAMES))
def test_hostile_gate_name_is_refused(run_module, untouched, name, allow_unknown):
    msg = refused(
        run_module, {"gates": {name: True}, "flags_file": untouched["flags"], "allow_unknown": allow_unknown}
    )
    assert msg.startswith("gates: ") and repr(name) in msg
    assert "[A-Za-z][A-Za-z0-9]*" in msg and "nothing written" in msg


@pytest.mark.parametrize("allow_unknown", [False, True], ids=["checked", "allow_unknown"])
@pytest.mark.parametrize(
    ("name", "right"),
    [
        ("dynamicresourceallocation", "DynamicResourceAllocation"),
        ("DYNAMICRESOURCEALLOCATION", "DynamicResourceAllocation"),
        ("Deviceplugins", "DevicePlugins"),
    ],
)
def test_known_gate_in_the_wrong_case_points_to_the_right_name(
    run_module, untouched, name, right, allow_unknown
):
    msg = refused(
        run_module,
        {"gates": {name: True}, "config_file": untouched["config"], "allow_unknown": allow_unknown},
    )
    assert msg.startswith("gates: ") and repr(name) in msg
    assert f"did you mean {right}?" in msg


@pytest.mark.parametrize("value", ["yes", "maybe", "", None, [], {"a": 1}, "true,Foo=true"])
def test_gate_value_that_is_not_a_boolean_is_refused(run_module, untouched, value):
    msg = refused(
        run_module, {"gates": {"DynamicResourceAllocation": value}, "flags_file": untouched["flags"]}
    )
    assert msg.startswith("gates: ") and "DynamicResourceAllocation" in msg and repr(value) in msg
    assert "expected true or false" in msg


@pytest.mark.parametrize("value", [True, False, "true", "False", "1", "0", "t", "F"])
def test_boolean_words_are_accepted(value):
    check_params({"gates": {"DynamicResourceAllocation": value}})


@pytest.mark.parametrize("value", list(HOSTILE_VARIABLES.values()), ids=list(HOSTILE_VARIABLES))
def test_hostile_flags_variable_is_refused(run_module, untouched, value):
    msg = refused(
        run_module,
        {
            "gates": {"DynamicResourceAllocation": True},
            "flags_file": untouched["flags"],
            "flags_variable": value,
        },
    )
    assert msg.startswith("flags_variable: ") and repr(value) in msg and "[A-Za-z_][A-Za-z0-9_]*" in msg


@pytest.mark.parametrize("value", list(HOSTILE_SERVICES.values()), ids=list(HOSTILE_SERVICES))
def test_hostile_service_is_refused(run_module, untouched, value):
    msg = refused(
        run_module,
        {"gates": {"DynamicResourceAllocation": True}, "flags_file": untouched["flags"], "service": value},
    )
    assert msg.startswith("service: ") and repr(value) in msg and "systemd unit name" in msg


@pytest.mark.parametrize("option", ["flags_file", "config_file", "rke2_config", "kubelet_path", "proc_root"])
@pytest.mark.parametrize("value", list(HOSTILE_PATHS.values()), ids=list(HOSTILE_PATHS))
def test_hostile_path_is_refused(run_module, untouched, option, value):
    msg = refused(run_module, {"gates": {"DynamicResourceAllocation": True}, option: value})
    assert msg.startswith(f"{option}: ") and repr(value) in msg and "absolute path" in msg


@pytest.mark.parametrize("value", list(HOSTILE_PATHS.values()), ids=list(HOSTILE_PATHS))
def test_hostile_unit_file_is_refused(run_module, untouched, value):
    msg = refused(
        run_module,
        {
            "gates": {"DynamicResourceAllocation": True},
            "flags_file": untouched["flags"],
            "unit_files": [value],
        },
    )
    assert msg.startswith("unit_files: ") and repr(value) in msg


@pytest.mark.parametrize("name", list(HOSTILE_GATE_NAMES.values()), ids=list(HOSTILE_GATE_NAMES))
def test_decide_refuses_hostile_names_too(name):
    """kubelet_gates.decide() (also used without the module's check) refuses the same names."""
    with pytest.raises(GateError, match=r"not a feature gate name"):
        decide({name: True}, "1.30.2", allow_unknown=True)


def test_valid_names_pass():
    for name in ("DynamicResourceAllocation", "MadeUpGate2", "A"):
        check_gate_name(name)
    check_params(
        {
            "gates": {"DynamicResourceAllocation": True},
            "flags_variable": "_KUBELET_EXTRA_ARGS2",
            "service": "kubelet@node-1.service",
            "flags_file": "/etc/sysconfig/kubelet",
            "unit_files": ["/usr/lib/systemd/system/kubelet.service"],
        }
    )
    # a NUL never gets this far through Ansible on every Python (its syslog logging refuses it)
    nul = r"^flags_file: '/etc/default/kubelet\\x00' is not a file path \(an absolute path"
    with pytest.raises(InputError, match=nul):
        check_params({"flags_file": "/etc/default/kubelet\0"})
    with pytest.raises(InputError, match="did you mean DynamicResourceAllocation"):
        check_params({"gates": {"dynamicResourceAllocation": True}})
