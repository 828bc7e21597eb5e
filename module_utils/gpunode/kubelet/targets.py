# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where the kubelet's feature gates go, one class per target: the ``--config`` file, a
drop-in of ``--config-dir``, the flags (at the assignment that reaches ExecStart), RKE2's
config.yaml and RKE1's cluster.yml. Each reads the gates the kubelet gets from it and
writes the merged ones (part of ``kubelet/plan.py``).

Python 3.8+, standard library (and PyYAML for YAML files): runs on targets.
"""

import os

from ansible.module_utils.gpunode.formats.yaml_edit import YamlEditError
from ansible.module_utils.gpunode.host.files import rke2_files
from ansible.module_utils.gpunode.host.systemd import resolve
from ansible.module_utils.gpunode.kubelet.compat import config_dir_read
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
from ansible.module_utils.gpunode.kubelet.discovery import (
    FALLBACK_CONFIG,
    FALLBACK_ENV_FILE,
    RKE2_CONFIG,
    PlanError,
    is_unit_file,
    need_yaml,
    read_file,
    resolve_command,
)
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
    format_gate_string,
    merge,
)
from ansible.module_utils.gpunode.kubelet.rke_args import (
    read_rke1_gates,
    read_rke2_gates,
    rke2_items,
    rke2_kubelet_args,
    write_rke1_gates,
    write_rke2_gates,
)

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
        return [doc[1] for doc in self.config_documents(replace)]

    def config_path(self, args):
        """The --config file the kubelet reads, as ``args`` (its next start) say."""
        return flag_value(args, "config")

    def config_documents(self, replace=None):
        """(path, data) of each config document the kubelet reads, in its order."""
        replace = replace or {}
        args = self.next_args()
        docs = []
        config = self.config_path(args)
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
                need_yaml(path)
            except ConfigError as exc:
                raise PlanError(f"{path}: {exc}; left unchanged") from None
        return docs

    def owned(self, path):
        return False


class ConfigTarget(Target):
    """A KubeletConfiguration file (YAML or JSON): featureGates."""

    def __init__(self, params, host, found, version):
        super().__init__(params, host, found, version)
        self.path = params["config_file"] or flag_value(found.next_args(), "config") or FALLBACK_CONFIG
        self.label = f"{self.path} featureGates"
        self.files = [self.path]
        self.text = read_file(host, self.path)

    def read(self):
        try:
            return read_config(self.text)[1]
        except MissingYaml:
            need_yaml(self.path)
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

    def config_path(self, args):
        """Where no kubelet command is known (none runs, no unit: an image build), this file is the
        configuration the kubelet will be given (its failCgroupV1 counts), as for _auto_kind."""
        return flag_value(args, "config") or (None if args else self.path)

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
        self.taints = None  # the drop-in's registerWithTaints (kubelet/registration.py edits it)
        self.merged = {}

    def read(self):
        if not self.text:
            return {}
        try:
            data, gates = read_config(self.text)
        except MissingYaml:
            need_yaml(self.path)
        except ConfigError as exc:
            raise PlanError(f"{self.path}: {exc}; left unchanged") from None
        self.api_version = data.get("apiVersion")
        self.taints = data.get("registerWithTaints")
        return gates

    def write(self, current, merged):
        self.merged = merged
        if merged == current and (self.text is not None or not merged):
            self.new_text = self.text
        else:
            self.new_text = render_dropin(merged, self.api_version, self.taints)
        return {self.path: (self.text, self.new_text)}

    def set_taints(self, taints):
        """The drop-in with registerWithTaints ``taints`` (None: without the key), its gates kept."""
        self.taints = taints
        self.new_text = render_dropin(self.merged, self.api_version, taints)

    def effective(self, merged):
        documents = self._config_documents({self.path: self.new_text or ""})
        return {**effective(documents)[0], **self.flag_gates(merged)}

    def override_source(self, name):
        if name in self.flag_gates({}):
            return self.flags_origin("--feature-gates")
        later = [p for p in dropin_files(self.directory, self.host.listdir, self.host.isdir) if p > self.path]
        return f"a drop-in read after {DROPIN_NAME} ({', '.join(later) or 'in ' + self.directory})"

    def config_files(self):
        """The drop-in, while it sets gates (registerWithTaints alone is read only at registration)."""
        return [self.path] if self.new_text is not None and self.merged else []

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
            if self.text is None and (params["flags_format"] == "systemd" or is_unit_file(self.path)):
                raise PlanError(f"{self.path}: does not exist; a systemd unit or drop-in is never created "
                                "(systemd would not read one without its [Service] section): name the "
                                "kubelet's existing unit, drop-in or environment file; left unchanged")
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
                self.command = resolve_command(self.unit_files, host)
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
                lambda path: read_file(self.host, path, missing_ok=True),
                gate_string,
                self.params["flags_variable"],
            )
        except (FlagsError, GateError) as exc:
            raise PlanError(f"{self.label}: {exc}; left unchanged") from None
        self.label = flags_plan.where or self.label
        self.files = sorted({*self.files, *flags_plan.texts})
        self.set_new_args(flags_plan.texts)
        return {path: (self.command.texts.get(path), text) for path, text in flags_plan.texts.items()}

    def _write_file(self, current, merged, gate_string):
        text = self.text or ""
        if merged == current and list(merged) == list(current) and len(read_gate_values(text, self.fmt)) <= 1:
            new = text
        else:
            new, where = set_gate_string(text, self.fmt, gate_string, self.params["flags_variable"])
            self.label = f"{self.path} {where}" if where else self.path
        if self.command is not None:
            self.set_new_args({self.path: new})
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
                lambda path: read_file(self.host, path, missing_ok=True),
                format_gate_string(gates),
                self.params["flags_variable"],
            )
        except FlagsError as exc:
            raise PlanError(f"{self.path}: {problem}; and elsewhere: {exc}; nothing written") from None
        self.gates = gates
        self.label = flags_plan.where or self.label
        existing = [path for path, text in self.command.texts.items() if text is not None]
        self.files = sorted({*self.files, *existing, *flags_plan.texts})
        self.set_new_args(flags_plan.texts)
        return {path: (self.command.texts.get(path), text) for path, text in flags_plan.texts.items()}

    def set_new_args(self, texts):
        units = [(path, texts.get(path, text)) for path, text in self.unit_files]

        def read_new(path):
            return texts[path] if path in texts else read_file(self.host, path, missing_ok=True)

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
            self.texts[name] = read_file(host, name, missing_ok=(name == self.path)) or ""
        self.files = list(self.texts)
        self.label = f"{self.path} kubelet-arg"
        self.new_items = None

    def read(self):
        for path, text in self.texts.items():
            if text.strip():
                need_yaml(path)
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
        self.text = read_file(host, self.path)
        self.files = [self.path]
        self.label = f"{self.path} services.kubelet.extra_args.feature-gates"
        self.service = None

    def read(self):
        need_yaml(self.path)
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
