# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The steps of the module ``containerd_runtime``: read, plan, compare, decide the restart, write.

The decisions are ``containerd_config.plan``'s; this file holds what the
module does around them, in order, so that the module stays glue (argument
spec, check mode, one ``fail_json`` per kind of error at the edge):

1. :func:`read_node`: config.toml, the drop-in, the files config.toml
   imports and the node's containerd (version, defaults);
2. :func:`plan_files`: the new texts (:func:`plan_node`, which nvidia_container_runtime_state
   plans with too);
3. :func:`changes`: which files differ, their diffs, the result's facts;
4. ``host/systemd.py`` ``restart_required``: whether the running containerd has read the files;
5. :func:`write`: backups and atomic writes through ``host/edits.py`` ``apply`` (not in check mode).

Helpers raise (``ContainerdConfigError``, :class:`WriteError`); the module
turns them into ``fail_json`` with the result so far.

Standard library only; Python 3.8+ (this runs on target hosts).
"""

from ansible.module_utils.gpunode.host import systemd
from ansible.module_utils.gpunode.host.edits import apply
from ansible.module_utils.gpunode.host.files import shown_path
from ansible.module_utils.gpunode.runtime.containerd_config import ContainerdConfigError, other_imports, plan


class WriteError(Exception):
    """A file could not be written; the message names it."""


def empty_result():
    """The result before anything is known (what a failure returns)."""
    return {
        "changed": False,
        "files": [],
        "backup_files": {},
        "diff": [],
        "restart_required": False,
        "stale_files": [],
        "restore": [],
    }


def read_node(host, params, read_text, containerd_facts):
    """What the plan needs of the node, read through ``read_text`` and ``containerd_facts``.

    The module passes its own names for both (its tests replace them there);
    ``host`` is a ``host/commands.py`` Host.
    Raises ContainerdConfigError naming the file.
    """
    config_path, dropin_path = params["config_path"], params["dropin_path"]
    shown = {path: shown_path(path, ContainerdConfigError) for path in (config_path, dropin_path)}
    config_text = read_text(config_path, ContainerdConfigError)
    dropin_text = read_text(dropin_path, ContainerdConfigError)
    version, defaults = containerd_facts(host, params["containerd_version"])
    return {
        "shown": shown,
        "config_text": config_text,
        "dropin_text": dropin_text,
        "version": version,
        "defaults": defaults,
        "imports": other_imports(config_text, config_path, dropin_path, read_text),
    }


def plan_node(node, systemd_pid1, **options):
    """``containerd_config.plan`` for what a read found of containerd (``config_text``, ``version``,
    ``defaults``, ``imports``) and ``options``: the one plan of config.toml and the drop-in, for
    ``containerd_runtime`` and ``nvidia_container_runtime_state``."""
    return plan(node["config_text"], containerd_version=node["version"], default_config_text=node["defaults"],
                systemd_pid1=systemd_pid1, other_imports=node["imports"], **options)


def plan_files(params, node):
    """:func:`plan_node` for the module's options and the node's files."""
    options = ("config_path", "dropin_path", "name", "binary_name", "runtime_type", "systemd_cgroup",
               "set_default", "enable_cdi")
    return plan_node(node, systemd.booted(), **{option: params[option] for option in options})


def changes(result, params, node, outcome):
    """The writes ``(path, before, after)`` the plan asks for; fills ``result`` (facts, diff, files)."""
    result.update(
        schema_version=outcome["schema_version"],
        systemd_cgroup=outcome["systemd_cgroup"],
        containerd_version=node["version"],
        full_cri_table=outcome["full_cri_table"],
        effective=outcome["effective"],
    )
    writes = []
    for path, before, after in (
        (params["dropin_path"], node["dropin_text"], outcome["dropin_text"]),
        (params["config_path"], node["config_text"], outcome["config_text"]),
    ):
        if before != after:
            writes.append((path, before, after))
            shown = node["shown"][path]
            result["diff"].append(
                {"before_header": shown, "after_header": shown, "before": before or "", "after": after}
            )
    result["files"] = [write[0] for write in writes]
    result["changed"] = bool(writes)
    return writes


def read_files(params, node):
    """Every file containerd reads of ours and config.toml's: what a restart must follow."""
    return [params["config_path"], params["dropin_path"], *(entry[0] for entry in node["imports"])]


def write(writes, params, result, replace):
    """Back up (when asked) and write each file; fills ``backup_files`` and ``restore``.

    ``replace`` is the module's ``atomic_move``. Raises WriteError naming the file.
    """
    edits = {path: (before, after) for path, before, after in writes}
    try:
        result["restore"], result["backup_files"] = apply(edits, params["backup"], replace,
                                                          params["backup_dir"])
    except OSError as exc:
        result["restore"], result["backup_files"] = exc.restore, exc.backups
        raise WriteError(str(exc)) from exc  # host/files and host/backups name the file and the cause
