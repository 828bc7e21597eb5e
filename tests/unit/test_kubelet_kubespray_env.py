# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubespray's /etc/kubernetes/kubelet.env as flags_file without flags_variable (issue 32).

The files are kubespray's own templates rendered for a GPU node
(tests/fixtures/kubelet/kubespray/, SOURCE.txt cites roles/kubernetes/node/templates/
kubelet.env.v1beta1.j2 and kubelet.service.j2 @ 46dbdd3994b3). kubespray's unit expands
KUBELET_ARGS and its other variables, never KUBELET_EXTRA_ARGS: with the unit not there to
read, the flag must still land where the kubelet sees it, or be refused.
"""

import pytest
from ansible.module_utils.gpunode.host.systemd import resolve
from ansible.module_utils.gpunode.kubelet.flags import (
    FlagsError,
    check_reaches_kubelet,
    read_flags_gates,
    set_gate_string,
)
from conftest import FIXTURES

KUBESPRAY = FIXTURES / "kubelet" / "kubespray"
ENV_PATH = "/etc/kubernetes/kubelet.env"
UNIT_PATH = "/etc/systemd/system/kubelet.service"
# the variables the rendered kubelet.env sets, in the order the template writes them
ENV_VARIABLES = "KUBELET_ADDRESS, KUBELET_CLOUDPROVIDER, KUBELET_HOSTNAME, KUBE_LOG_LEVEL, PATH"


def rendered_env():
    return (KUBESPRAY / "kubelet.env").read_text()


def kubelet_sees(env_text):
    """The kubelet's command line as systemd would run kubespray's unit with ``env_text``."""
    unit = (KUBESPRAY / "kubelet.service").read_text()
    files = {UNIT_PATH: unit, ENV_PATH: env_text}
    return resolve([(UNIT_PATH, unit)], files.get)


def test_without_the_unit_the_flag_goes_into_kubelet_args_and_reaches_the_kubelet():
    text = rendered_env()
    new, where = set_gate_string(text, "env", "DevicePlugins=true")
    assert where == "KUBELET_ARGS"  # the variable with --config and --kubeconfig
    assert "KUBELET_EXTRA_ARGS" not in new
    assert read_flags_gates(new, "env") == {"DevicePlugins": True}
    # every line but KUBELET_ARGS' last one is byte for byte the same
    assert [line for line in text.splitlines() if line not in new.splitlines()] == [
        " --node-labels=nvidia.com/gpu.present=true\""
    ]
    command = kubelet_sees(new)
    assert check_reaches_kubelet(command, ENV_PATH, {"DevicePlugins": True}, edited=True) is None
    args = [a.value for a in command.args]
    assert "--feature-gates=DevicePlugins=true" in args
    assert "--config=/etc/kubernetes/kubelet-config.yaml" in args
    # and a second run changes nothing
    assert set_gate_string(new, "env", "DevicePlugins=true")[0] == new


def test_two_variables_with_the_kubelets_own_flags_are_refused_naming_the_variables():
    # the same file with --kubeconfig moved into a variable of its own
    text = rendered_env().replace(
        "--kubeconfig=/etc/kubernetes/kubelet.conf \\\n", ""
    ) + 'KUBELET_KUBECONFIG="--kubeconfig=/etc/kubernetes/kubelet.conf"\n'
    with pytest.raises(FlagsError) as err:
        set_gate_string(text, "env", "DevicePlugins=true")
    message = str(err.value)
    assert "several variables hold the kubelet's --config/--kubeconfig" in message
    assert "KUBELET_ARGS" in message and "KUBELET_KUBECONFIG" in message
    assert "set flags_variable" in message
    # the operator's answer is taken as given
    assert set_gate_string(text, "env", "DevicePlugins=true", "KUBELET_ARGS")[1] == "KUBELET_ARGS"


def test_flag_variables_without_the_kubelets_own_flags_are_refused_naming_them():
    text = rendered_env()
    start = text.index('KUBELET_ARGS="')
    text = text[:start] + text[text.index('"\n', start + len('KUBELET_ARGS="')) + 2 :]  # without KUBELET_ARGS
    with pytest.raises(FlagsError, match=rf"this file sets {ENV_VARIABLES}; none is KUBELET_EXTRA_ARGS\)"):
        set_gate_string(text, "env", "DevicePlugins=true")
