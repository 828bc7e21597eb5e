# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kubelet_gpu role's interface: its variables, their declarations, and what reaches the module.

kubelet_feature_gates refuses kubespray's /etc/kubernetes/kubelet.env (given as flags_file, no
unit to read) when it cannot tell which variable the kubelet's unit expands, and asks for
flags_variable: the role must let its users answer (kubelet_gpu_flags_variable, issue 32).
"""

import pathlib

import pytest
import yaml
from ansible.module_utils.gpunode.kubelet.flags import FlagsError, set_gate_string
from ansible.module_utils.gpunode.kubelet.state_call import ARGUMENT_SPEC
from conftest import FIXTURES

ROLE = pathlib.Path(__file__).resolve().parents[2] / "roles" / "kubelet_gpu"


def role_yaml(path):
    return yaml.safe_load((ROLE / path).read_text())


def test_the_flags_variable_is_declared_a_string():
    # the other defaults against the argument specs: test_role_interfaces.py, over every role
    options = role_yaml("meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    assert options["kubelet_gpu_flags_variable"]["type"] == "str"


def module_args(**variables):
    """The role's arguments to kubelet_feature_gates (vars/main.yml) for the defaults and ``variables``."""
    templar_module = pytest.importorskip("ansible.template")
    from ansible.parsing.dataloader import DataLoader  # noqa: PLC0415 (controller only)

    loader = DataLoader()  # the role's defaults as Ansible loads them: their templates trusted
    context = dict(loader.load_from_file(str(ROLE / "defaults" / "main.yml"), trusted_as_template=True),
                   **variables)
    templar = templar_module.Templar(loader=loader, variables=context)
    expression = role_yaml("vars/main.yml")["__kubelet_gpu_args"]
    return templar.template(templar_module.trust_as_template(expression))


@pytest.mark.controller(reason="templates the role's variables with ansible-core's Templar")
def test_kubelet_gpu_flags_variable_reaches_the_module_as_flags_variable():
    args = module_args(kubelet_gpu_flags_file="/etc/kubernetes/kubelet.env",
                       kubelet_gpu_flags_variable="KUBELET_ARGS")
    assert (args["flags_file"], args["flags_variable"]) == ("/etc/kubernetes/kubelet.env", "KUBELET_ARGS")
    assert set(args) <= set(ARGUMENT_SPEC)  # every argument is one the module takes
    # empty (the default): the module decides, as before
    assert "flags_variable" not in module_args()


def test_the_refusal_names_the_roles_variable_and_its_answer_is_taken():
    """kubespray's kubelet.env (tests/fixtures/kubelet/kubespray, SOURCE.txt) with --kubeconfig moved
    into a variable of its own: two variables hold the kubelet's flags, so the module asks."""
    text = (FIXTURES / "kubelet" / "kubespray" / "kubelet.env").read_text()
    text = text.replace("--kubeconfig=/etc/kubernetes/kubelet.conf \\\n", "") + \
        'KUBELET_KUBECONFIG="--kubeconfig=/etc/kubernetes/kubelet.conf"\n'
    with pytest.raises(FlagsError, match="kubelet_gpu_flags_variable"):
        set_gate_string(text, "env", "DevicePlugins=true")
    assert set_gate_string(text, "env", "DevicePlugins=true", "KUBELET_ARGS")[1] == "KUBELET_ARGS"


@pytest.mark.controller(reason="templates the role's variables with ansible-core's Templar")
def test_the_registration_taint_follows_the_validation_roles_key_and_the_label_reaches_the_module():
    defaults = module_args()  # a play without the validation role (playbooks/kubelet.yml)
    assert defaults["registration_taint"] == "readiness.k8s.io/gpunode-gpu-unvalidated:NoSchedule"
    assert defaults["registration_labels"] == {"nvidia.com/gpu.present": "true"}
    validate = yaml.safe_load((ROLE.parent / "gpu_validate" / "defaults" / "main.yml").read_text())
    assert validate["gpu_validate_taint_key"] + ":NoSchedule" == defaults["registration_taint"]
    # the inventory's key wins over the role's default, as over the validation role's
    assert module_args(gpu_validate_taint_key="example.com/unvalidated")["registration_taint"] == (
        "example.com/unvalidated:NoSchedule")
    assert "registration_taint" not in module_args(kubelet_gpu_registration_taint="")
    assert module_args(kubelet_gpu_registration_labels={})["registration_labels"] == {}
