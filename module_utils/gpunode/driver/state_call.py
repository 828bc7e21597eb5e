# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One call of ``nvidia_driver_state``: its arguments and what it returns.

The module (``library/nvidia_driver_state.py``), the one read of every concern
(``gpunode_node_state``) and ``nvidia_driver_verify`` (the check after the change) call
:func:`read` with the same request (:data:`REQUEST_SPEC`, documented once in
``doc_fragments/nvidia_driver_request.py``). It raises one of :data:`ERRORS`.
"""

import os
import platform

from ansible.module_utils.common.sys_info import get_distribution, get_distribution_version
from ansible.module_utils.gpunode.driver.driver import DriverError, image_build_params
from ansible.module_utils.gpunode.driver.fabric import CHOICES
from ansible.module_utils.gpunode.driver.gpu import NEWER_THAN_TABLE, GpuDetectError, detect
from ansible.module_utils.gpunode.driver.host import image_kernel, refresh_index
from ansible.module_utils.gpunode.driver.stages import evaluate
from ansible.module_utils.gpunode.formats import values
from ansible.module_utils.gpunode.host.commands import Host
from ansible.module_utils.gpunode.host.packages import DpkgError
from ansible.module_utils.gpunode.host.packages_rpm import RpmError

# what is wanted and where the node's trees are: the arguments of nvidia_driver_state and of
# nvidia_driver_verify (the role gives both the same, with module_defaults)
REQUEST_SPEC = {
    "gpu": {"type": "dict"},
    "pci_ids_path": {"type": "path"},
    "require_gpu": {"type": "bool", "default": False},
    "require_branch": {"type": "bool", "default": False},
    "fabric": {"type": "str", "choices": list(CHOICES), "default": "auto"},
    "method": {"type": "str", "default": "packages",
               "choices": ["packages", "runfile", "ubuntu-signed", "el-signed", "preinstalled"]},
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
    "kernel_hold": {"type": "bool", "default": False},
    "install_prerequisites": {"type": "bool", "default": True},
    "blacklist_nouveau": {"type": "bool", "default": True},
    "blacklist_path": {"type": "path", "default": "/etc/modprobe.d/blacklist-nouveau.conf"},
    "persistence": {"type": "bool", "default": True},
    "fabricmanager": {"type": "str", "choices": ["auto", "always", "never"], "default": "auto"},
    "imex_mode": {"type": "str", "choices": ["host", "dra"], "default": "dra"},
    "imex_nodes": {"type": "list", "elements": "str", "default": []},
    "imex_config": {"type": "dict", "default": {}},
    "peermem": {"type": "bool", "default": False},
    "signing_key": {"type": "path"},
    "signing_cert": {"type": "path"},
    "runfile_url": {"type": "str"},
    "runfile_checksum": {"type": "str", "no_log": False},
    "runfile_extra_flags": {"type": "list", "elements": "str", "default": []},
    "sysfs_root": {"type": "path", "default": "/sys"},
    "proc_root": {"type": "path", "default": "/proc"},
    "image_build": {"type": "bool", "default": False},
    "image_kernel": {"type": "str"},
}
# nvidia_driver_state's: the request, and whether to refresh the package index before reading it
ARGUMENT_SPEC = dict(REQUEST_SPEC, update_cache={"type": "bool", "default": False})
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
    "imex_nodes[]": values.ip_address,
    "imex_config": values.settings,
}


def os_info():
    """The node's distribution, its version, the machine and the running kernel, as fact gathering
    reads them (no option: tests give a node's through module_utils, ``evaluate``'s ``os_info``)."""
    return {
        "distribution": get_distribution(),
        "distribution_version": get_distribution_version(),
        "architecture": platform.machine(),
        "kernel": os.uname().release,
    }


def read(module, params=None, stage="plan"):
    """The result for ``params`` (default ``module.params``: the arguments of
    ``nvidia_driver_state``, or of ``nvidia_driver_verify`` with ``stage`` ``final``). With
    ``update_cache`` (never in check mode) the package index is refreshed first, so that a
    package it still lacks is missing upstream, not merely unknown. Raises one of :data:`ERRORS`."""
    params = dict(module.params if params is None else params, stage=stage)
    try:
        values.check(params, VALUE_RULES)
    except values.ValueSyntaxError as exc:
        raise DriverError(f"{exc}; nothing was read or written") from exc
    image_build = params.get("image_build")
    if image_build:
        params = image_build_params(params)
    facts = {}
    gpu = params["gpu"]
    if gpu is None:
        gpu, warnings = detect(params["sysfs_root"], params["proc_root"], params["pci_ids_path"],
                               require_gpu=params["require_gpu"], require_branch=params["require_branch"],
                               machine=platform.machine(), fabric_kind=params.get("fabric"))
        for warning in warnings:  # a GPU newer than the table: the user's pinned branch is no assumption
            if not (NEWER_THAN_TABLE in warning and (params.get("branch") or params.get("version"))):
                module.warn(warning)
        params["gpu"] = facts["nvidia_gpu"] = gpu
    if not gpu.get("present") and not image_build:
        return {"changed": False, "ansible_facts": facts, "msg": "no NVIDIA GPU: nothing to do",
                "cache_updated": False, "plan": {"converged": True, "disruptive": False, "reasons": []}}
    host = Host(module)
    params["refreshed"] = bool(params.get("update_cache")) and not module.check_mode and refresh_index(host)
    node = os_info()
    if image_build:  # the image's kernel, not the one running the build (read under proc_root)
        node["kernel"] = image_kernel(params.get("image_kernel"))
    result = evaluate(host, params, gpu, node)
    facts.update(result["ansible_facts"])
    result["ansible_facts"] = facts
    result["cache_updated"] = params["refreshed"]
    return result


def converged(result):
    """Whether a plan (``stage`` ``plan``) leaves nothing to do."""
    return bool(result["plan"]["converged"])
