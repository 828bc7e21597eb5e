# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Plan the kubelet's feature gates on a node: where they go, what to write, whether to restart.

One call answers everything the role needs (issue: a converged node costs
one round trip):

1. What runs: the kubelet process (kubelet_node), its systemd unit and the
   unit's files, resolved the way systemd builds the command line
   (systemd_exec); or RKE2 (config.yaml and config.yaml.d/, kubelet-arg);
   or RKE1's cluster.yml on the admin host.
2. Its version (``kubelet --version`` of the binary the unit starts, once).
3. Where gates go, in the order the kubelet reads them: a drop-in gpunode
   owns in the ``--config-dir`` directory when the kubelet reads one (the
   main files untouched); else the ``--config`` file (YAML or JSON); else the
   flags, at the assignment that really reaches ExecStart (kubelet_flags).
   An explicit ``config_file``/``flags_file``/``rke2_config``/
   ``rke_cluster_yml`` is used as given, and checked the same way.
4. The gates: checked against the version (kubelet_gates), merged with what
   the files hold; a later drop-in or a ``--feature-gates`` flag that would
   override them (flags win over the config, per gate) is an error.
5. Whether the kubelet must restart: the files change, or what runs is
   older than the files (its ``--feature-gates`` differ from what the files
   give, its start time is older than a config file it reads, or systemd
   has not reloaded a changed unit), so that a run killed between the write
   and the restart is finished by the next run.
6. Before any restart: a kubelet that would not come back (a flag this
   version removed, cgroup v1 from 1.35 without ``failCgroupV1: false``) is an
   error, and nothing is written.

Domain errors are PlanError; the module turns them into fail_json once.
Python 3.8+, standard library (and PyYAML for YAML files): runs on targets.
"""

import os
import re

from ansible.module_utils.gpunode.formats.kube_version import text as version_text
from ansible.module_utils.gpunode.formats.yaml_edit import YAML_IMPORT_ERROR, YamlEditError
from ansible.module_utils.gpunode.formats.yaml_edit import get as yaml_get
from ansible.module_utils.gpunode.host.processes import scan, wall_time
from ansible.module_utils.gpunode.host.systemd import (
    SHOW_PROPERTIES,
    UnitError,
    loaded,
    resolve,
    show,
    unit_files,
)
from ansible.module_utils.gpunode.kubelet.compat import (
    cgroup_v1_refusal,
    cgroup_version,
    config_dir_read,
    removed_flags,
)
from ansible.module_utils.gpunode.kubelet.config import (
    DROPIN_NAME,
    ConfigError,
    MissingYaml,
    dropin_files,
    effective,
    render_dropin,
)
from ansible.module_utils.gpunode.kubelet.config import read as read_config
from ansible.module_utils.gpunode.kubelet.config import write_gates as write_config_gates
from ansible.module_utils.gpunode.kubelet.flags import (
    FlagsError,
    check_reaches_kubelet,
    detect_format,
    flag_value,
    gates_in_args,
    plan_edit,
    reaching_args,
    read_flags_gates,
    read_gate_values,
    set_gate_string,
)
from ansible.module_utils.gpunode.kubelet.gates import (
    GateError,
    decide,
    format_gate_string,
    format_version,
    gates_needed,
    merge,
    parse_version,
    refused_in_file,
)
from ansible.module_utils.gpunode.kubelet.inputs import InputError, check_params
from ansible.module_utils.gpunode.kubelet.rke_args import (
    read_rke1_gates,
    read_rke2_gates,
    rke2_files,
    rke2_items,
    rke2_kubelet_args,
    write_rke1_gates,
    write_rke2_gates,
)

TARGET_PATHS = ("config_file", "flags_file", "rke_cluster_yml", "rke2_config")
KUBELET_UNIT = "kubelet.service"
RKE2_UNITS = ("rke2-server.service", "rke2-agent.service")
RKE2_BIN = "/var/lib/rancher/rke2/bin"
RKE2_CONFIG = "/etc/rancher/rke2/config.yaml"
# where a node without a running kubelet or unit keeps its gates (kubeadm's files)
FALLBACK_CONFIG = "/var/lib/kubelet/config.yaml"
FALLBACK_ENV_FILE = "/etc/default/kubelet"
_BACKUP_RE = r"\.(\d+)\.(\d{4}-\d\d-\d\d@\d\d:\d\d:\d\d)~$"


class PlanError(Exception):
    """What the module reports with fail_json; the message names the file and the problem."""


class MissingRequirement(PlanError):
    """A Python library the node lacks (PyYAML for a YAML file)."""

    def __init__(self, message, library, path):
        super().__init__(message)
        self.library = library
        self.path = path


class Plan:
    """The outcome: the module's result, the file changes and the warnings."""

    def __init__(self):
        self.result = {}
        self.changes = {}  # path -> (old text or None, new text or None: delete)
        self.warnings = []
        self.stale_backups = {}  # path -> backup of an earlier run, for a rollback of a stale restart


class Discovery:
    """What runs on the node, as found."""

    def __init__(self):
        self.process = None
        self.units = {}
        self.service = None
        self.unit_files = []  # [(path, text)]
        self.command = None  # systemd_exec.ServiceCommand of the kubelet's unit
        self.rke2 = False
        self.need_reload = False

    def next_args(self):
        """The kubelet's arguments at its next start (the unit's files), else what runs now."""
        if self.command is not None and self.command.exec_start is not None:
            return [arg.value for arg in self.command.args]
        return list(self.process.argv) if self.process else []

    def environment(self):
        if self.command is None:
            return {}
        names = [a.name for a in self.command.environment + self.command.file_assignments]
        return {name: self.command.value(self.command.winner(name)) for name in names}


# ---------------------------------------------------------------- discovery


def discover(params, host):
    """Find the kubelet: its process, its unit (or RKE2's), the unit's files resolved."""
    found = Discovery()
    processes = scan("kubelet", params["proc_root"])
    units = [params["service"]] if params["service"] else []
    if processes and processes[-1].unit:
        units.append(processes[-1].unit)
    units += [KUBELET_UNIT, *RKE2_UNITS]
    units = [u if u.endswith(".service") else u + ".service" for u in dict.fromkeys(units)]
    found.units = {block.get("Id"): block for block in show(host, units, SHOW_PROPERTIES) or []}
    rke2_units = [u for u in RKE2_UNITS if loaded(found.units.get(u))]
    explicit = next((name for name in TARGET_PATHS if params[name]), None)
    found.rke2 = explicit == "rke2_config" or (
        explicit is None
        and params["target"] in ("auto", "rke2")
        and (
            params["target"] == "rke2"
            or any(p.unit in RKE2_UNITS for p in processes)
            or (rke2_units and host.exists(RKE2_CONFIG))
        )
    )
    if found.rke2:
        active = [u for u in rke2_units if found.units[u].get("ActiveState") == "active"]
        enabled = [u for u in rke2_units if found.units[u].get("UnitFileState") == "enabled"]
        found.service = params["service"] or next(iter(active + enabled + rke2_units), "rke2-agent.service")
        found.process = next(
            (p for p in processes if p.unit == found.service), processes[-1] if processes else None
        )
        return found
    found.process = processes[-1] if processes else None
    found.service = params["service"] or (
        found.process.unit if found.process and found.process.unit else None
    )
    if found.service is None and loaded(found.units.get(KUBELET_UNIT)):
        found.service = KUBELET_UNIT
    if found.service and not found.service.endswith(".service"):
        found.service += ".service"
    block = found.units.get(found.service or KUBELET_UNIT, {})
    paths = params["unit_files"] if params["unit_files"] is not None else unit_files(block)
    if paths:
        found.need_reload = block.get("NeedDaemonReload") == "yes"
        found.unit_files = [(path, _read(host, path)) for path in paths]
        found.command = _resolve(found.unit_files, host)
    return found


def _resolve(units, host):
    """systemd_exec.resolve of [(path, text)], environment files read through ``host``."""
    try:
        return resolve(units, lambda path: _read(host, path, missing_ok=True))
    except UnitError as exc:
        raise PlanError(f"{exc}; left unchanged") from None


def _read(host, path, missing_ok=False):
    text = host.read_text(path)
    if text is None and not missing_ok:
        raise PlanError(f"{path}: does not exist")
    return text


# ---------------------------------------------------------------- version


def detect_version(params, host, found, rke1_text=None):
    """The kubelet's version as a tuple, or None when there is no kubelet to ask."""
    if params["kubernetes_version"]:
        return _parse(params["kubernetes_version"])
    if params["rke_cluster_yml"]:
        version = _yaml_get(rke1_text or "", ["kubernetes_version"], params["rke_cluster_yml"])
        if version:
            return _parse(str(version))
        raise PlanError(
            f"{params['rke_cluster_yml']}: no kubernetes_version in the file; pass kubernetes_version"
        )
    binary = params["kubelet_path"]
    if binary is None and found.rke2:
        binary = os.path.join(RKE2_BIN, "kubelet") if host.exists(os.path.join(RKE2_BIN, "kubelet")) else None
    if binary is None:
        args = found.next_args()
        if args and args[0].startswith("/") and host.exists(args[0]):
            binary = args[0]
    if binary is None:
        binary = host.which("kubelet", [RKE2_BIN])
    if binary is None:
        return None
    rc, out, err = host.run([binary, "--version"])
    if rc != 0:
        raise PlanError(f"{binary} --version failed (rc={rc}): {(err or out).strip()}")
    return _parse(out)


def _parse(text):
    try:
        return parse_version(text)
    except GateError as exc:
        raise PlanError(str(exc)) from None


def _yaml_get(text, path, file_path):
    _need_yaml(file_path)
    try:
        return yaml_get(text, path)
    except YamlEditError as exc:
        raise PlanError(f"{file_path}: {exc}; left unchanged") from None


def _need_yaml(path):
    if YAML_IMPORT_ERROR is not None:
        raise MissingRequirement(
            f"{path} is YAML and this node's Python has no PyYAML (python3-yaml)", "PyYAML", path
        )


# ---------------------------------------------------------------- the plan


def plan(params, host):
    """Everything the module returns, and the files to write; raises PlanError."""
    try:
        check_params(params)  # before anything is read
    except InputError as exc:
        raise PlanError(str(exc)) from None
    result = Plan()
    kind = _kind(params)
    found = Discovery() if kind == "rke1" else discover(params, host)
    rke1_text = _read(host, params["rke_cluster_yml"]) if kind == "rke1" else None
    version = detect_version(params, host, found, rke1_text)
    if version is None:
        return _no_kubelet(result, params)
    version_str = format_version(version)
    needed, asked, apply, skipped = _decide(params, version_str, result)
    if kind == "auto" or (kind in ("config", "flags") and not params[kind + "_file"]):
        kind = _auto_kind(kind, params, host, found, version)
    target = TARGETS[kind](params, host, found, version)
    merged = _edit(result, target, (apply, skipped, asked), version_str)
    _check_overrides(target, apply, target.effective(merged))
    restart, reasons, daemon_reload = _restart(
        result, params, host, found, target=target, kind=kind, version=version, merged=merged
    )
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
        "summary": f"kubelet gates {format_gate_string(merged) or '(none)'} in {target.label}",
        "ansible_facts": {
            "kubelet_gpu": {
                "present": True,
                "kubernetes_version": version_str,
                "target": kind,
                "files": target.files,
                "gates": merged,
                "service": target.service,
                "restart_pending": restart and not params["restart_planned"],
            }
        },
    }
    return result


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


def _restart(result, params, host, found, *, target, kind, version, merged):
    """(restart, stale reasons, daemon_reload): what the kubelet needs after the edit."""
    stale, reasons, daemon_reload = _running_state(params, host, found, target, merged)
    restart = bool(result.changes) or stale
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


def _no_kubelet(result, params):
    result.warnings.append(
        "No kubelet on this host (no kubelet process, unit or binary found): no feature gates set. "
        "Run again once the node has joined the cluster, or pass kubernetes_version to write the files "
        "anyway."
    )
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


# ---------------------------------------------------------------- targets


class Target:
    """Where the gates are: read them, write them, say what the kubelet gets."""

    label = None
    service = None
    files = ()
    unit_is_target = False
    warnings = ()
    gates = None  # the gates after write() when they differ from the merge of the file's (see FlagsTarget)
    unit_files = ()  # the unit's files as resolved for this target, when not those found
    request = ({}, {})

    def __init__(self, params, host, found, version):
        self.params = params
        self.host = host
        self.found = found
        self.version = version
        self.service = found.service

    def read(self):
        raise NotImplementedError

    def write(self, current, merged):
        raise NotImplementedError

    def next_args(self):
        return self.found.next_args()

    def flag_gates(self, merged):
        """The gates the kubelet's flags give at its next start."""
        return gates_in_args(self.next_args())

    def effective(self, merged):
        """The gates the kubelet runs with after the change (flags win per gate)."""
        return {**merged, **self.flag_gates(merged)}

    def override_source(self, name):
        return self.flags_origin("--feature-gates")

    def flags_origin(self, flag):
        command = self.found.command
        if command is None:
            return "the kubelet's command line"
        for arg in command.args:
            if arg.value.startswith(flag):
                if arg.source is None:
                    return f"{command.exec_start[0]} (ExecStart=)"
                return f"{arg.source.path} line {arg.source.line} ({arg.source.name})"
        return "the kubelet's command line"

    def config_files(self):
        return []

    def fail_cgroup_v1(self):
        documents = self._config_documents()
        return effective(documents)[1]

    def _config_documents(self, replace=None):
        """The kubelet's config documents in its order: --config, then --config-dir drop-ins."""
        replace = replace or {}
        args = self.next_args()
        docs = []
        config = flag_value(args, "config")
        paths = [config] if config else []
        directory = flag_value(args, "config-dir")
        if directory and config_dir_read(self.version, self.found.environment()):
            dropins = set(dropin_files(directory, self.host.listdir, self.host.isdir))
            own = os.path.join(directory, DROPIN_NAME)
            if own in replace:
                dropins.add(own)
            paths += sorted(dropins, key=lambda p: os.path.relpath(p, directory).split(os.sep))
        for path in paths:
            text = replace[path] if path in replace else self.host.read_text(path)
            if not text:
                continue
            try:
                docs.append((path, read_config(text)[0]))
            except MissingYaml:
                _need_yaml(path)
            except ConfigError as exc:
                raise PlanError(f"{path}: {exc}; left unchanged") from None
        return [doc[1] for doc in docs]

    def owned(self, path):
        return False


class ConfigTarget(Target):
    """A KubeletConfiguration file (YAML or JSON): featureGates."""

    def __init__(self, params, host, found, version):
        super().__init__(params, host, found, version)
        self.path = params["config_file"] or flag_value(found.next_args(), "config") or FALLBACK_CONFIG
        self.label = f"{self.path} featureGates"
        self.files = [self.path]
        self.text = _read(host, self.path)

    def read(self):
        try:
            return read_config(self.text)[1]
        except MissingYaml:
            _need_yaml(self.path)
        except ConfigError as exc:
            raise PlanError(f"{self.path}: {exc}; left unchanged") from None

    def write(self, current, merged):
        try:
            self.new_text = write_config_gates(self.text, current, merged)
        except (ConfigError, YamlEditError) as exc:
            raise PlanError(f"{self.path}: {exc}; left unchanged") from None
        return {self.path: (self.text, self.new_text)}

    def effective(self, merged):
        documents = self._config_documents({self.path: self.new_text})
        gates = effective(documents)[0] if documents else dict(merged)
        return {**gates, **self.flag_gates(merged)}

    def override_source(self, name):
        if name in self.flag_gates({}):
            return self.flags_origin("--feature-gates")
        return "a drop-in of the kubelet's --config-dir"

    def config_files(self):
        return [self.path]


class ConfigDirTarget(Target):
    """gpunode's own drop-in in the kubelet's --config-dir; the main files are not touched."""

    def __init__(self, params, host, found, version):
        super().__init__(params, host, found, version)
        self.directory = flag_value(found.next_args(), "config-dir")
        self.path = os.path.join(self.directory, DROPIN_NAME)
        self.label = f"{self.path} featureGates"
        self.files = [self.path]
        self.text = host.read_text(self.path)
        self.api_version = None

    def read(self):
        if not self.text:
            return {}
        try:
            data, gates = read_config(self.text)
        except MissingYaml:
            _need_yaml(self.path)
        except ConfigError as exc:
            raise PlanError(f"{self.path}: {exc}; left unchanged") from None
        self.api_version = data.get("apiVersion")
        return gates

    def write(self, current, merged):
        if merged == current and (self.text is not None or not merged):
            self.new_text = self.text
        else:
            self.new_text = render_dropin(merged, self.api_version) if merged else None
        return {self.path: (self.text, self.new_text)}

    def effective(self, merged):
        documents = self._config_documents({self.path: self.new_text or ""})
        return {**effective(documents)[0], **self.flag_gates(merged)}

    def override_source(self, name):
        if name in self.flag_gates({}):
            return self.flags_origin("--feature-gates")
        later = [p for p in dropin_files(self.directory, self.host.listdir, self.host.isdir) if p > self.path]
        return f"a drop-in read after {DROPIN_NAME} ({', '.join(later) or 'in ' + self.directory})"

    def config_files(self):
        return [self.path] if self.new_text is not None else []

    def owned(self, path):
        return path == self.path


class FlagsTarget(Target):
    """The kubelet's --feature-gates flag, where it reaches ExecStart."""

    def __init__(self, params, host, found, version):
        super().__init__(params, host, found, version)
        self.path = params["flags_file"]
        self.command = found.command
        self.unit_files = found.unit_files
        self.request = ({}, {})  # (gates to set, gates skipped), set by plan() before write()
        if self.path:
            self.text = host.read_text(self.path)
            if self.text is None and params["flags_format"] == "systemd":
                raise PlanError(f"{self.path}: does not exist")
            self.fmt = (
                "env"
                if self.text is None
                else (
                    params["flags_format"] if params["flags_format"] != "auto" else detect_format(self.text)
                )
            )
            self.files = [self.path]
            self.label = self.path
            if self.command is None and self.fmt == "systemd" and self.text is not None:
                # the unit was not found: the drop-in alone is the unit, its environment files read
                self.unit_files = [(self.path, self.text)]
                self.command = _resolve(self.unit_files, host)
        elif self.command is None:
            if found.process is not None:
                raise PlanError(
                    f"the kubelet (PID {found.process.pid}) runs, but its systemd unit was not found, so "
                    "where its flags come from is unknown; set flags_file (or config_file)"
                )
            self.path = FALLBACK_ENV_FILE
            self.text = host.read_text(self.path)
            self.fmt = "env"
            self.files = [self.path]
            self.label = self.path
        else:
            self.files = sorted(p for p in self.command.texts if self.command.texts[p] is not None)
            self.label = "the kubelet's flags"
        self.new_args = None
        self.new_command = None
        self.unit_is_target = True

    def read(self):
        try:
            if self.path:
                return read_flags_gates(self.text or "", self.fmt)
            return gates_in_args(self.command.args)
        except (FlagsError, GateError) as exc:
            raise PlanError(f"{self.path or self.label}: {exc}; left unchanged") from None

    def write(self, current, merged):
        gate_string = format_gate_string(merged)
        try:
            if self.path:
                return self._write_file(current, merged, gate_string)
            flags_plan = plan_edit(
                self.command,
                self.unit_files,
                lambda path: _read(self.host, path, missing_ok=True),
                gate_string,
                self.params["flags_variable"],
            )
        except (FlagsError, GateError) as exc:
            raise PlanError(f"{self.label}: {exc}; left unchanged") from None
        self.label = flags_plan.where or self.label
        self.files = sorted({*self.files, *flags_plan.texts})
        self._set_new_args(flags_plan.texts)
        return {path: (self.command.texts.get(path), text) for path, text in flags_plan.texts.items()}

    def _write_file(self, current, merged, gate_string):
        text = self.text or ""
        if merged == current and list(merged) == list(current) and len(read_gate_values(text, self.fmt)) <= 1:
            new = text
        else:
            new, where = set_gate_string(text, self.fmt, gate_string, self.params["flags_variable"])
            self.label = f"{self.path} {where}" if where else self.path
        if self.command is not None:
            self._set_new_args({self.path: new})
            problem = check_reaches_kubelet(
                self.new_command, self.path, merged, set(current) - set(merged), edited=new != text
            )
            if problem:
                return self._write_where_it_reaches(problem)
        if self.text is None and not new:
            return {}
        return {self.path: (self.text, new)}

    def _write_where_it_reaches(self, problem):
        """The file's edit would not reach the kubelet: write at the assignment that wins, or fail.

        The gates are then those the kubelet runs with now, updated by the
        request (what the overridden file held never reached it).
        """
        if self.path not in self.command.texts or self.command.exec_start is None:
            raise PlanError(f"{self.path}: {problem}; nothing written")
        apply, skipped = self.request
        live = gates_in_args(self.command.args)
        gates = merge(live, apply, {name for name in skipped if name in live})
        try:
            flags_plan = plan_edit(
                self.command,
                self.unit_files,
                lambda path: _read(self.host, path, missing_ok=True),
                format_gate_string(gates),
                self.params["flags_variable"],
            )
        except FlagsError as exc:
            raise PlanError(f"{self.path}: {problem}; and elsewhere: {exc}; nothing written") from None
        self.gates = gates
        self.label = flags_plan.where or self.label
        existing = [path for path, text in self.command.texts.items() if text is not None]
        self.files = sorted({*self.files, *existing, *flags_plan.texts})
        self._set_new_args(flags_plan.texts)
        return {path: (self.command.texts.get(path), text) for path, text in flags_plan.texts.items()}

    def _set_new_args(self, texts):
        units = [(path, texts.get(path, text)) for path, text in self.unit_files]

        def read_new(path):
            return texts[path] if path in texts else _read(self.host, path, missing_ok=True)

        self.new_command = resolve(units, read_new)
        self.new_args = [arg.value for arg in self.new_command.args]

    def next_args(self):
        return self.new_args if self.new_args is not None else self.found.next_args()

    def flag_gates(self, merged):
        if self.command is None:
            return dict(merged)
        if self.new_command is not None and self.new_command.exec_start is None:
            return gates_in_args(reaching_args(self.new_command))
        return gates_in_args(self.next_args())

    def effective(self, merged):
        documents = self._config_documents()
        return {**effective(documents)[0], **self.flag_gates(merged)}

    def override_source(self, name):
        return self.flags_origin("--feature-gates")


class Rke2Target(Target):
    """RKE2's config.yaml and config.yaml.d/: kubelet-arg items feature-gates=..."""

    def __init__(self, params, host, found, version):
        super().__init__(params, host, found, version)
        self.path = params["rke2_config"] or RKE2_CONFIG
        self.texts = {}
        for name in rke2_files(self.path):
            self.texts[name] = _read(host, name, missing_ok=(name == self.path)) or ""
        self.files = list(self.texts)
        self.label = f"{self.path} kubelet-arg"
        self.new_items = None

    def read(self):
        for path, text in self.texts.items():
            if text.strip():
                _need_yaml(path)
        try:
            self.items = rke2_items(self.texts)
            return read_rke2_gates(self.items)
        except (GateError, YamlEditError) as exc:
            raise PlanError(f"{self.path}: {exc}; left unchanged") from None

    def write(self, current, merged):
        try:
            new_texts = write_rke2_gates(self.texts, self.items, current, merged)
            self.new_items = rke2_items(new_texts)
        except (GateError, YamlEditError) as exc:
            raise PlanError(f"{self.path}: {exc}; left unchanged") from None
        before = {path: (text if self.host.exists(path) else None) for path, text in self.texts.items()}
        return {
            path: (before[path], new)
            for path, new in new_texts.items()
            if new != (before[path] or "") or (before[path] is None and new)
        }

    def next_args(self):
        args = rke2_kubelet_args(self.new_items if self.new_items is not None else self.items)
        running = list(self.found.process.argv) if self.found.process else []
        return args + [a for a in running if a.startswith(("--config=", "--config-dir="))]

    def flag_gates(self, merged):
        return gates_in_args(rke2_kubelet_args(self.new_items if self.new_items is not None else self.items))

    def effective(self, merged):
        return self.flag_gates(merged)

    def override_source(self, name):
        return f"a later kubelet-arg item of {self.path} or its config.yaml.d/"

    def flags_origin(self, flag):
        return f"the kubelet-arg items of {self.path} or its config.yaml.d/"


class Rke1Target(Target):
    """RKE1's cluster.yml on the admin host: services.kubelet.extra_args.feature-gates."""

    def __init__(self, params, host, found, version):
        super().__init__(params, host, found, version)
        self.path = params["rke_cluster_yml"]
        self.text = _read(host, self.path)
        self.files = [self.path]
        self.label = f"{self.path} services.kubelet.extra_args.feature-gates"
        self.service = None

    def read(self):
        _need_yaml(self.path)
        try:
            return read_rke1_gates(self.text)
        except (GateError, YamlEditError) as exc:
            raise PlanError(f"{self.path}: {exc}; left unchanged") from None

    def write(self, current, merged):
        try:
            return {self.path: (self.text, write_rke1_gates(self.text, current, merged))}
        except (GateError, YamlEditError) as exc:
            raise PlanError(f"{self.path}: {exc}; left unchanged") from None

    def next_args(self):
        return []

    def effective(self, merged):
        return dict(merged)


TARGETS = {
    "config": ConfigTarget,
    "config_dir": ConfigDirTarget,
    "flags": FlagsTarget,
    "rke2": Rke2Target,
    "rke1": Rke1Target,
}
