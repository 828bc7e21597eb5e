# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One call of ``kubelet_feature_gates``: its arguments and the plan it reads.

The module (``library/kubelet_feature_gates.py``, which then writes) and the one read of
every concern (``gpunode_node_state``) both call :func:`read`; it raises
:class:`~ansible.module_utils.gpunode.kubelet.plan.PlanError` (a missing PyYAML:
``MissingRequirement``).
"""

from ansible.module_utils.gpunode.host.commands import Host
from ansible.module_utils.gpunode.host.edits import diff, headers
from ansible.module_utils.gpunode.kubelet.discovery import TARGET_PATHS, PlanError
from ansible.module_utils.gpunode.kubelet.plan import plan

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
    "allow_unknown": {"type": "bool", "default": False},
    "backup": {"type": "bool", "default": False},
    "registration_taint": {"type": "str"},
    "registration_taint_state": {
        "type": "str", "choices": ["unvalidated", "absent"], "default": "unvalidated",
    },
    "validation_record": {"type": "path", "default": "/var/lib/gpunode/validated.json"},
    "registration_labels": {"type": "dict", "default": {}},
    "image_build": {"type": "bool", "default": False},
}
MUTUALLY_EXCLUSIVE = [TARGET_PATHS]
ERRORS = (PlanError,)


def read(module):
    """The plan for ``module.params``: ``result``, ``changes`` (path -> (old, new)), warnings."""
    return plan(module.params, Host(module, PlanError))


def converged(outcome):
    """Whether nothing is to write and the kubelet runs what its files say."""
    return not outcome.changes and not outcome.result.get("restart_required")


def planned_result(outcome, diff_mode):
    """What the module returns before it writes (all of it in check mode): the plan's result,
    ``restore`` (the backups of an earlier run, for a restart of what runs stale) and, in diff
    mode, ``diff``. Raises PlanError for an edit that would remove a link or follow a broken one."""
    result = dict(outcome.result)
    shown = headers(outcome.changes, PlanError)
    if diff_mode and outcome.changes:
        result["diff"] = diff(outcome.changes, shown)
    result["restore"] = [{"path": path, "backup": backup}
                         for path, backup in sorted(outcome.stale_backups.items())]
    return result


def handed_plan(outcome):
    """The plan ``gpunode_node_state`` hands to the role (``plans.kubelet``): :func:`planned_result`
    and ``edits``, the files to write as ``gpunode_planned_files`` takes them."""
    result = planned_result(outcome, False)
    result["edits"] = [{"path": path, "before": old, "after": new, "keep_mtime": path in outcome.keep_mtime}
                       for path, (old, new) in sorted(outcome.changes.items())]
    return result
