# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What runs on the node for ``kubelet/plan.py``: the kubelet process, its systemd unit and
the unit's files resolved the way systemd builds the command line (``host/systemd.py``), or
RKE2; the kubelet's version; and the errors of the kubelet concern.

Python 3.8+, standard library (and PyYAML for YAML files): runs on targets.
"""

import os

from ansible.module_utils.gpunode.formats.yaml_edit import YAML_IMPORT_ERROR, YamlEditError
from ansible.module_utils.gpunode.formats.yaml_edit import get as yaml_get
from ansible.module_utils.gpunode.host.processes import scan
from ansible.module_utils.gpunode.host.systemd import (
    SHOW_PROPERTIES,
    UnitError,
    loaded,
    resolve,
    show,
    unit_files,
)
from ansible.module_utils.gpunode.kubelet.gates import (
    GateError,
    parse_version,
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


class MissingFile(PlanError):
    """A file the kubelet's flags name does not exist (kubeadm's config.yaml before its join)."""


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
        self.keep_mtime = []  # files whose edit the running kubelet need not load: their time is kept


class Discovery:
    """What runs on the node, as found."""

    def __init__(self):
        self.process = None
        self.units = {}
        self.service = None
        self.unit_files = []  # [(path, text)]
        self.command = None  # host/systemd.py ServiceCommand of the kubelet's unit
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
        found.unit_files = [(path, read_file(host, path)) for path in paths]
        found.command = resolve_command(found.unit_files, host)
    return found


def resolve_command(units, host):
    """host/systemd.py resolve() of [(path, text)], environment files read through ``host``."""
    try:
        return resolve(units, lambda path: read_file(host, path, missing_ok=True))
    except UnitError as exc:
        raise PlanError(f"{exc}; left unchanged") from None


def is_unit_file(path):
    """A systemd unit (``*.service``) or drop-in (``*.service.d/*.conf``), which must exist to be edited."""
    folder = os.path.basename(os.path.dirname(path))
    return path.endswith(".service") or (path.endswith(".conf") and folder.endswith(".service.d"))


def read_file(host, path, missing_ok=False):
    """The text of ``path`` through ``host``; None or PlanError when it does not exist."""
    text = host.read_text(path)
    if text is None and not missing_ok:
        raise MissingFile(f"{path}: does not exist")
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
    need_yaml(file_path)
    try:
        return yaml_get(text, path)
    except YamlEditError as exc:
        raise PlanError(f"{file_path}: {exc}; left unchanged") from None


def need_yaml(path):
    if YAML_IMPORT_ERROR is not None:
        raise MissingRequirement(
            f"{path} is YAML and this node's Python has no PyYAML (python3-yaml)", "PyYAML", path
        )
