# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Plan the kubelet's feature gates on a node: where they go, what to write, whether to restart.

One call answers everything the role needs (issue: a converged node costs
one round trip):

1. What runs: the kubelet process (host/processes.py), its systemd unit and the
   unit's files, resolved the way systemd builds the command line
   (host/systemd.py); or RKE2 (config.yaml and config.yaml.d/, kubelet-arg);
   or RKE1's cluster.yml on the admin host.
2. Its version (``kubelet --version`` of the binary the unit starts, once).
3. Where gates go, in the order the kubelet reads them: a drop-in gpunode
   owns in the ``--config-dir`` directory when the kubelet reads one (the
   main files untouched); else the ``--config`` file (YAML or JSON); else the
   flags, at the assignment that really reaches ExecStart (kubelet/flags.py).
   An explicit ``config_file``/``flags_file``/``rke2_config``/
   ``rke_cluster_yml`` is used as given, and checked the same way.
4. The gates: checked against the version (kubelet/gates.py), merged with what
   the files hold; a later drop-in or a ``--feature-gates`` flag that would
   override them (flags win over the config, per gate) is an error.
5. Whether the kubelet must restart: the files change (not only in the taints and labels it
   registers its Node with, which it reads only then), or what runs is
   older than the files (its ``--feature-gates`` differ from what the files
   give, its start time is older than a config file it reads, or systemd
   has not reloaded a changed unit), so that a run killed between the write
   and the restart is finished by the next run.
6. Before any restart: a kubelet that would not come back (a flag this
   version removed, cgroup v1 from 1.35 without ``failCgroupV1: false``) is an
   error, and nothing is written.

The parts: ``kubelet/discovery.py`` (1, 2), ``kubelet/targets.py`` (where gates go, read and
written); this file decides (3 to 6).

Domain errors are PlanError; the module turns them into fail_json once.
Python 3.8+, standard library (and PyYAML for YAML files): runs on targets.
"""

import os
import re

from ansible.module_utils.gpunode.formats.kube_version import text as version_text
from ansible.module_utils.gpunode.host.processes import wall_time
from ansible.module_utils.gpunode.host.systemd import booted
from ansible.module_utils.gpunode.kubelet.compat import (
    cgroup_v1_refusal,
    cgroup_version,
    config_dir_read,
    removed_flags,
)
from ansible.module_utils.gpunode.kubelet.discovery import (
    _BACKUP_RE,
    FALLBACK_CONFIG,
    TARGET_PATHS,
    Discovery,
    MissingFile,
    Plan,
    PlanError,
    detect_version,
    discover,
    read_file,
)
from ansible.module_utils.gpunode.kubelet.flags import (
    flag_value,
    gates_in_args,
)
from ansible.module_utils.gpunode.kubelet.gates import (
    GateError,
    decide,
    format_gate_string,
    format_version,
    gates_needed,
    merge,
    refused_in_file,
)
from ansible.module_utils.gpunode.kubelet.inputs import InputError, check_params
from ansible.module_utils.gpunode.kubelet.registration import (
    registration_labels,
    registration_taint,
    shown_labels,
)
from ansible.module_utils.gpunode.kubelet.taints import TaintError
from ansible.module_utils.gpunode.kubelet.taints import parse as parse_taint
from ansible.module_utils.gpunode.kubelet.targets import TARGETS

# ---------------------------------------------------------------- the plan


def plan(params, host):
    """Everything the module returns, and the files to write; raises PlanError."""
    try:
        check_params(params)  # before anything is read
        taint = parse_taint(params["registration_taint"]) if params.get("registration_taint") else None
    except (InputError, TaintError) as exc:
        raise PlanError(str(exc)) from None
    result = Plan()
    kind = _kind(params)
    found = Discovery() if kind == "rke1" else discover(params, host)
    rke1_text = read_file(host, params["rke_cluster_yml"]) if kind == "rke1" else None
    version = detect_version(params, host, found, rke1_text)
    if version is None:
        return _no_kubelet(result, params, booted(host.isdir))
    version_str = format_version(version)
    needed, asked, apply, skipped = _decide(params, version_str, result)
    if kind == "auto" or (kind in ("config", "flags") and not params[kind + "_file"]):
        kind = _auto_kind(kind, params, host, found, version)
    target, not_joined = _target(params, host, found, version, kind)
    if target is None:
        return _no_kubelet(result, params, True, reason=not_joined)
    merged = _edit(result, target, (apply, skipped, asked), version_str)
    restarting = set(result.changes)  # the gates' files: their change restarts the kubelet
    registration = registration_taint(result, params, target, kind, taint)
    labels = registration_labels(result, params, target, kind,
                                 lambda: TARGETS["flags"](params, host, found, version))
    _check_overrides(target, apply, target.effective(merged))
    restart, reasons, daemon_reload = _restart(result, params, host, found, target=target, kind=kind,
                                               version=version, merged=merged, restarting=restarting)
    result.result = {
        "changed": bool(result.changes),
        "restart_required": restart,
        "applied_gates": apply,
        "skipped_gates": skipped,
        "gates": merged,
        "kubernetes_version": version_str,
        "needed_gates": needed,
        "target": kind,
        "location": target.label,
        "files": sorted(result.changes),
        "service": target.service,
        "daemon_reload": daemon_reload,
        "stale": reasons,
        "present": True,
        "registration_taint": registration,
        "registration_labels": labels,
        "summary": _summary(merged, target.label, registration, labels),
        "ansible_facts": {
            "kubelet_gpu": {
                "present": True,
                "kubernetes_version": version_str,
                "target": kind,
                "files": target.files,
                "gates": merged,
                "service": target.service,
                "restart_pending": restart,  # the role sets it false once it restarted
            }
        },
    }
    return result


def _summary(merged, where, registration, labels):
    """One line for gpunode_changes: the gates, where they are, what the kubelet registers with."""
    line = f"kubelet gates {format_gate_string(merged) or '(none)'} in {where}"
    if registration and registration["present"]:
        line += f"; registers with {registration['taint']}"
    if labels and labels["present"]:
        line += f"; registers with labels {shown_labels(labels['labels'])}"
    return line


def _edit(result, target, request, version_str):
    """The gates the target holds after the edit; fills ``result.changes`` and its warnings.

    ``request`` is (apply, skipped, asked) of :func:`_decide`.
    """
    apply, skipped, asked = request
    current = target.read()
    remove = {name for name in skipped if name in current}
    merged = merge(current, apply, remove)
    for why in refused_in_file({k: v for k, v in current.items() if k not in asked}, version_str).values():
        result.warnings.append(
            f"{target.label}: {why}; the kubelet would refuse it (not asked about, left as it is)"
        )
    target.request = (apply, skipped)
    changes = target.write(current, merged)
    merged = target.gates if target.gates is not None else merged
    result.warnings += target.warnings
    result.changes = {path: (old, new) for path, (old, new) in changes.items() if old != new}
    return merged


def _restart(result, params, host, found, *, target, kind, version, merged, restarting):
    """(restart, stale reasons, daemon_reload): what the kubelet needs after the edit.

    A file that changes only in what the kubelet reads when it creates its Node (registration
    taint and labels: not in ``restarting``) restarts nothing; a config file it reads keeps its
    modification time then (``keep_mtime``), so that the next run does not take the running
    kubelet for older than its settings.
    """
    stale, reasons, daemon_reload = _running_state(params, host, found, target, merged)
    restart = any(path in restarting for path in result.changes) or stale
    result.keep_mtime = sorted(path for path in target.config_files()
                               if path in result.changes and path not in restarting
                               and result.changes[path][0] is not None)
    if restart and kind != "rke1":
        _check_restartable(host, params, target, version)
    if stale and not result.changes:
        result.stale_backups = _latest_backups(host, target)
    unit_paths = {unit[0] for unit in target.unit_files or found.unit_files}
    daemon_reload = daemon_reload or any(path in unit_paths for path in result.changes)
    return restart, reasons, daemon_reload


def _decide(params, version_str, result):
    """(needed, asked, apply, skipped): the gates asked for, checked against the version."""
    needed = gates_needed(version_str, params["legacy_accelerators"]) if params["gpu_node"] else {}
    asked = {**needed, **(params["gates"] or {})}
    try:
        apply, skipped, warnings = decide(asked, version_str, params["allow_unknown"])
    except GateError as exc:
        where = next((params[name] for name in TARGET_PATHS if params[name]), "kubelet feature gates")
        raise PlanError(f"{where}: {exc}; nothing written") from None
    result.warnings += warnings
    return needed, asked, apply, skipped


def _kind(params):
    if params["rke_cluster_yml"]:
        return "rke1"
    if params["rke2_config"]:
        return "rke2"
    if params["config_file"]:
        return "config"
    if params["flags_file"]:
        return "flags"
    return params["target"]


def _auto_kind(kind, params, host, found, version):
    """Where the gates go when no file is named: the order the kubelet reads them in."""
    if found.rke2 or kind == "rke2":
        return "rke2"
    args = found.next_args()
    if kind != "flags" and flag_value(args, "config-dir") and config_dir_read(version, found.environment()):
        return "config_dir"
    if kind != "flags" and (flag_value(args, "config") or (not args and host.exists(FALLBACK_CONFIG))):
        return "config"
    if kind == "config":
        raise PlanError(
            "the kubelet is started without --config (its command line: "
            f"{' '.join(args) or 'none found'}); set config_file, or use the flags"
        )
    return "flags"


#: What the run's table says of a host without a kubelet (kubelet_gpu.skipped), by whether systemd runs it.
NO_KUBELET = "kubelet: no kubelet on this host (no process, unit or binary): no feature gates set"
NO_SERVICE_MANAGER = ("kubelet: no service manager (systemd) on this host to run a kubelet: "
                      "no feature gates set")


def no_kubelet_reason(systemd_runs):
    """Why the kubelet's gates were skipped on a host without a kubelet: a host systemd runs may get
    one later (a node that has not joined yet); one without systemd (an image host's container)
    runs none that gpunode could restart."""
    return NO_KUBELET if systemd_runs else NO_SERVICE_MANAGER


def _target(params, host, found, version, kind):
    """``(target, None)``, or ``(None, why)`` for an image build before the join: the configuration file
    the kubelet's flags name is not there yet (kubeadm's join writes it)."""
    try:
        return TARGETS[kind](params, host, found, version), None
    except MissingFile as exc:
        if not params.get("image_build"):
            raise
        return None, (f"kubelet: {exc} yet (an image build before the join): no feature gates set; the join "
                      "writes it, run the node plays after it (docs/ROLES.md, \"Join flows\")")


def _no_kubelet(result, params, systemd_runs, reason=None):
    if reason or systemd_runs:
        result.warnings.append(reason or (
            "No kubelet on this host (no kubelet process, unit or binary found): no feature gates set. "
            "Run again once the node has joined the cluster, or pass kubernetes_version to write the files "
            "anyway."
        ))
    result.result = {
        "changed": False,
        "restart_required": False,
        "applied_gates": {},
        "skipped_gates": {},
        "gates": {},
        "kubernetes_version": None,
        "needed_gates": {},
        "target": None,
        "location": None,
        "files": [],
        "service": None,
        "daemon_reload": False,
        "stale": [],
        "present": False,
        "ansible_facts": {
            "kubelet_gpu": {
                "present": False,
                "kubernetes_version": None,
                "target": None,
                "files": [],
                "gates": {},
                "service": None,
                "restart_pending": False,
                # read by the run's table (gpunode_summary), as nvidia_driver.skipped
                "skipped": [reason or no_kubelet_reason(systemd_runs)],
            }
        },
    }
    return result


def _check_overrides(target, apply, effective_gates):
    for name, value in apply.items():
        if effective_gates.get(name, value) is not value:
            raise PlanError(
                f"{target.label}: {name}={'true' if value else 'false'} would not take effect: "
                f"{target.override_source(name)} sets {name}={'true' if effective_gates[name] else 'false'} "
                "and wins over it; change that setting (or put the gate there); nothing written"
            )


def _running_state(params, host, found, target, merged):
    """(stale, reasons, daemon_reload): what runs is older than the files."""
    reasons = []
    daemon_reload = False
    if target.unit_is_target and found.need_reload:
        reasons.append(f"systemd has not reloaded {found.service} since its files changed")
        daemon_reload = True
    process = found.process
    if not params["check_running"] or process is None:
        return bool(reasons), reasons, daemon_reload
    running = gates_in_args(process.argv)
    flag_gates = target.flag_gates(merged)
    if running != flag_gates:
        reasons.append(
            f"the running kubelet (PID {process.pid}) has --feature-gates="
            f"{format_gate_string(running) or '(none)'}, its files give --feature-gates="
            f"{format_gate_string(flag_gates) or '(none)'}"
        )
    started = wall_time(process.started_after_boot, host.boot_time(), host.wall_time())
    for path in target.config_files():
        mtime = host.mtime(path)
        if mtime is not None and mtime > started:
            reasons.append(f"the running kubelet (PID {process.pid}) started before {path} was last written")
    return bool(reasons), reasons, daemon_reload


def _check_restartable(host, params, target, version):
    """Refuse to restart a kubelet that would not come back."""
    args = target.next_args()
    gone = removed_flags(args, version)
    if gone:
        listed = ", ".join(f"{flag} (removed in {removed})" for flag, removed in gone)
        raise PlanError(
            f"the kubelet's command line carries {listed}: a {version_text(version)} kubelet refuses to "
            f"start with it; remove it from {target.flags_origin(gone[0][0])} first; nothing written, "
            "nothing restarted"
        )
    mountinfo = host.read_text(os.path.join(params["proc_root"], "self", "mountinfo"))
    refusal = cgroup_v1_refusal(version, cgroup_version(mountinfo), target.fail_cgroup_v1())
    if refusal:
        raise PlanError(f"{target.label}: {refusal}; nothing written, nothing restarted")


def _latest_backups(host, target):
    """For a restart without a change (a run killed before its restart): each file's newest backup."""
    backups = {}
    for path in target.files:
        directory, name = os.path.split(path)
        try:
            names = host.listdir(directory)
        except OSError:
            continue
        pattern = re.compile(re.escape(name) + _BACKUP_RE)
        candidates = sorted(
            (match.group(2), int(match.group(1)), n) for n in names for match in [pattern.match(n)] if match
        )
        if candidates:
            backups[path] = os.path.join(directory, candidates[-1][2])
        elif target.owned(path):
            backups[path] = None
    return backups
