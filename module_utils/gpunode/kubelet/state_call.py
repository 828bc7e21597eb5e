# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One call of ``kubelet_feature_gates``: its arguments and the plan it reads.

The module (``library/kubelet_feature_gates.py``, which then writes) and the one read of
every concern (``gpunode_node_state``) both call :func:`read`; it raises
:class:`~ansible.module_utils.gpunode.kubelet.plan.PlanError` (a missing PyYAML:
``MissingRequirement``).
"""

import os
import time

from ansible.module_utils.gpunode.common.commands import C_LOCALE
from ansible.module_utils.gpunode.host.files import read_text
from ansible.module_utils.gpunode.kubelet.plan import TARGET_PATHS, PlanError, plan

ARGUMENT_SPEC = {
    "gates": {"type": "dict", "default": {}},
    "gpu_node": {"type": "bool", "default": False},
    "legacy_accelerators": {"type": "bool", "default": False},
    "kubernetes_version": {"type": "str"},
    "kubelet_path": {"type": "path"},
    "target": {"type": "str", "choices": ["auto", "config", "flags", "rke2"], "default": "auto"},
    "config_file": {"type": "path"},
    "flags_file": {"type": "path"},
    "flags_format": {"type": "str", "choices": ["auto", "env", "systemd"], "default": "auto"},
    "flags_variable": {"type": "str"},
    "rke_cluster_yml": {"type": "path"},
    "rke2_config": {"type": "path"},
    "service": {"type": "str"},
    "unit_files": {"type": "list", "elements": "path"},
    "proc_root": {"type": "path", "default": "/proc"},
    "check_running": {"type": "bool", "default": True},
    "restart_planned": {"type": "bool", "default": False},
    "allow_unknown": {"type": "bool", "default": False},
    "backup": {"type": "bool", "default": False},
}
MUTUALLY_EXCLUSIVE = [TARGET_PATHS]
ERRORS = (PlanError,)


class Host:
    """The node, as kubelet_plan sees it: files, commands and clocks."""

    def __init__(self, module):
        self.module = module

    def read_text(self, path):
        return read_text(path, PlanError)

    def exists(self, path):
        return os.path.exists(path)

    def isdir(self, path):
        return os.path.isdir(path)

    def listdir(self, path):
        return os.listdir(path)

    def mtime(self, path):
        try:
            return os.stat(path).st_mtime
        except OSError:
            return None

    def which(self, name, opt_dirs=None):
        return self.module.get_bin_path(name, opt_dirs=opt_dirs or [])

    def run(self, argv):
        return self.module.run_command(argv, environ_update=C_LOCALE)

    def boot_time(self):
        return time.clock_gettime(time.CLOCK_BOOTTIME)

    def wall_time(self):
        return time.time()


def read(module):
    """The plan for ``module.params``: ``result``, ``changes`` (path -> (old, new)), warnings."""
    return plan(module.params, Host(module))


def converged(outcome):
    """Whether nothing is to write and the kubelet runs what its files say."""
    return not outcome.changes and not outcome.result.get("restart_required")
