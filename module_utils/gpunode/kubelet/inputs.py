# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Refuse inventory values that would break the kubelet's files or command line, before any is read.

Every value kubelet_feature_gates writes into a file (gate names and values,
the variable that gets the flag) or passes on (the service, paths) is checked
here against the syntax of the place it lands, so that no writer ever has to
quote or escape:

- a feature gate name is an identifier ``[A-Za-z][A-Za-z0-9]*`` (the kubelet
  splits ``--feature-gates`` at ``,`` and ``=``; a quote, a newline or a space
  would end the value in an environment file or a unit); a name that matches a
  known gate in another case is refused with the right spelling (the kubelet
  knows names case-sensitively and refuses to start on one it does not know);
- a gate value is a boolean (kubelet_gates.parse_bool: Go's ParseBool words);
- the variable that gets the flag is a shell/systemd variable name
  ``[A-Za-z_][A-Za-z0-9_]*``;
- the service is a systemd unit name (letters, digits and ``:-_.\\@``);
- paths are absolute, without a control character, quote or backslash;
- registration labels are label keys and values (a ``,`` or ``=`` would split the flag), none
  under kubernetes.io or k8s.io that the kubelet refuses (kubelet/labels.py).

The rules are the common ones of module_utils/gpunode/formats/values.py.

Standard library only; Python 3.8+ (runs on target hosts).
"""

from ansible.module_utils.gpunode.formats import values
from ansible.module_utils.gpunode.kubelet import labels
from ansible.module_utils.gpunode.kubelet.gates import GateError, parse_bool
from ansible.module_utils.gpunode.kubelet.gates import check_gate_name as _check_gate_name

PATH_OPTIONS = ("config_file", "flags_file", "rke_cluster_yml", "rke2_config", "kubelet_path", "proc_root")
NOTHING_DONE = "; nothing read, nothing written"


class InputError(values.ValueSyntaxError):
    """An option's value that cannot be written where it would go; the message names both."""


def _checked(rule, option, value):
    try:
        rule(option, value)
    except values.ValueSyntaxError as exc:
        raise InputError(f"{exc}{NOTHING_DONE}") from None


def check_gate_name(name, option="gates"):
    """Refuse a gate name that is not an identifier, or a known gate spelled in another case."""
    try:
        _check_gate_name(name)
    except GateError as exc:
        raise InputError(f"{option}: {exc}{NOTHING_DONE}") from None


def check_gates(gates, option="gates"):
    """Every name (check_gate_name) and value (a boolean) of ``gates``."""
    if not isinstance(gates, dict):
        raise InputError(f"{option}: expected a dict of gate name -> true/false, got {gates!r}")
    for name, value in gates.items():
        check_gate_name(name, option)
        try:
            parse_bool(name, value)
        except GateError as exc:
            raise InputError(f"{option}: {exc}{NOTHING_DONE}") from None


def check_params(params):
    """The kubelet_feature_gates options that land in files or command lines; raises InputError."""
    check_gates(params.get("gates") or {})
    if params.get("flags_variable") is not None:
        _checked(values.env_variable, "flags_variable", params["flags_variable"])
    if params.get("service") is not None:
        _checked(values.unit_name, "service", params["service"])
    for option in PATH_OPTIONS:
        if params.get(option) is not None:
            _checked(values.path, option, params[option])
    for path in params.get("unit_files") or ():
        _checked(values.path, "unit_files", path)
    _checked(labels.check, "registration_labels", params.get("registration_labels") or {})
