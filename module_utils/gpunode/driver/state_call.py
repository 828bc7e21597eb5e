# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One call of ``nvidia_driver_state``: its arguments and what it returns.

The module (``library/nvidia_driver_state.py``) and the one read of every concern
(``gpunode_node_state``) both call :func:`read`; ``nvidia_driver_verify`` calls it with
its later ``stage`` (the checks after the install and after the run). It raises one of
:data:`ERRORS`.
"""

import os
import platform

from ansible.module_utils.common.sys_info import get_distribution, get_distribution_version
from ansible.module_utils.gpunode.driver.driver import DriverError
from ansible.module_utils.gpunode.driver.gpu import GpuDetectError, detect
from ansible.module_utils.gpunode.driver.stages import evaluate
from ansible.module_utils.gpunode.formats import values
from ansible.module_utils.gpunode.host.commands import Host
from ansible.module_utils.gpunode.host.packages import DpkgError
from ansible.module_utils.gpunode.host.packages_rpm import RpmError

ARGUMENT_SPEC = {
    "gpu": {"type": "dict"},
    "pci_ids_path": {"type": "path"},
    "require_gpu": {"type": "bool", "default": False},
    "require_branch": {"type": "bool", "default": False},
    "method": {"type": "str", "choices": ["packages", "runfile", "ubuntu-signed", "preinstalled"],
               "default": "packages"},
    "refreshed": {"type": "bool", "default": False},
    "version": {"type": "str"},
    "branch": {"type": "str"},
    "check_branch": {"type": "bool", "default": True},
    "module_type": {"type": "str", "choices": ["auto", "open", "proprietary"], "default": "auto"},
    "package_source": {"type": "str", "choices": ["distro", "cuda"], "default": "distro"},
    "apt_repository": {"type": "str"},
    "apt_key_url": {"type": "str", "no_log": False},
    "keyring": {"type": "path", "default": "/etc/apt/keyrings/gpunode-nvidia-driver.asc"},
    "rpm_repository": {"type": "str"},
    "rpm_key_url": {"type": "str", "no_log": False},
    "hold": {"type": "bool", "default": True},
    "install_prerequisites": {"type": "bool", "default": True},
    "blacklist_nouveau": {"type": "bool", "default": True},
    "blacklist_path": {"type": "path", "default": "/etc/modprobe.d/blacklist-nouveau.conf"},
    "persistence": {"type": "bool", "default": True},
    "fabricmanager": {"type": "str", "choices": ["auto", "always", "never"], "default": "auto"},
    "signing_key": {"type": "path"},
    "signing_cert": {"type": "path"},
    "runfile_url": {"type": "str"},
    "runfile_checksum": {"type": "str", "no_log": False},
    "runfile_extra_flags": {"type": "list", "elements": "str", "default": []},
    "distribution": {"type": "str"},
    "distribution_version": {"type": "str"},
    "architecture": {"type": "str"},
    "kernel": {"type": "str"},
    "sysfs_root": {"type": "path", "default": "/sys"},
    "proc_root": {"type": "path", "default": "/proc"},
    "modules_dir": {"type": "path", "default": "/lib/modules"},
}
ERRORS = (DriverError, GpuDetectError, DpkgError, RpmError)
# The syntax of each value that lands in a file or on a command line, checked before anything is
# read: the signing key and certificate are quoted values of DKMS's shell-sourced framework.conf and
# --module-signing-*-key= flags of the installer; the keyring is the source line's signed-by; the
# source line is one line of a sources file.
VALUE_RULES = {
    "signing_key": values.optional(values.word_path),
    "signing_cert": values.optional(values.word_path),
    "keyring": values.word_path,
    "apt_repository": values.optional(values.one_line),
    "rpm_repository": values.optional(values.one_line),
    "rpm_key_url": values.optional(values.one_line),
    "blacklist_path": values.path,
}


def os_info(params):
    """The node's distribution, architecture and kernel: the arguments, else as fact gathering reads them."""
    return {
        "distribution": params["distribution"] or get_distribution(),
        "distribution_version": params["distribution_version"] or get_distribution_version(),
        "architecture": params["architecture"] or platform.machine(),
        "kernel": params["kernel"] or os.uname().release,
    }


def read(module, params=None, stage="plan", ran=None, before=None):
    """The result for ``params`` (default ``module.params``, the arguments of
    ``nvidia_driver_state``) at ``stage``: ``plan``, or ``installed`` / ``final`` with the
    plan that ran (``ran``) and the facts before it (``before``). Raises one of :data:`ERRORS`."""
    params = dict(module.params if params is None else params, stage=stage, ran=ran, before=before)
    try:
        values.check(params, VALUE_RULES)
    except values.ValueSyntaxError as exc:
        raise DriverError(f"{exc}; nothing was read or written") from exc
    facts = {}
    gpu = params["gpu"]
    if gpu is None:
        gpu, warnings = detect(params["sysfs_root"], params["proc_root"], params["pci_ids_path"],
                               require_gpu=params["require_gpu"], require_branch=params["require_branch"],
                               machine=platform.machine())
        for warning in warnings:
            module.warn(warning)
        params["gpu"] = facts["nvidia_gpu"] = gpu
    if not gpu.get("present"):
        return {"changed": False, "ansible_facts": facts, "msg": "no NVIDIA GPU: nothing to do",
                "plan": {"converged": True, "disruptive": False, "reasons": []}}
    result = evaluate(Host(module), params, gpu, os_info(params))
    facts.update(result["ansible_facts"])
    result["ansible_facts"] = facts
    return result


def converged(result):
    """Whether a plan (``stage`` ``plan``) leaves nothing to do."""
    return bool(result["plan"]["converged"])
