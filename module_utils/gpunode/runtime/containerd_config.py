# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Add a runtime (nvidia) to containerd's CRI plugin through a drop-in file.

Pure functions, no Ansible import; the module ``containerd_runtime`` (and the
role's state module) read the files, call :func:`plan` and write what it
returns.

What is written:

- ``config.toml`` gets our drop-in in its top-level ``imports`` array by a
  minimal text edit (everything else byte for byte); a missing file is created
  as ``version = N`` + ``imports``. An ``imports`` glob that already matches the
  drop-in counts as present: containerd loads each file once, however many
  entries name it (``loaded`` map in ``LoadConfig``, containerd 1.3 to 2.3), so
  the ``/etc/containerd/conf.d/*.toml`` import that ``containerd config
  default`` writes from 2.2 on (containerd PR 12323, commit 9ca659a5) imports
  our drop-in exactly once. containerd reads that default import only from a
  config.toml that lists it: without a config.toml it loads no file at all
  (``cmd/containerd/command/main.go``), hence the file we create.
- the drop-in (``/etc/containerd/conf.d/99-nvidia.toml``) is generated whole,
  in the schema of config.toml and with the same ``version`` (see below).

Config versions (``version`` at the top of config.toml) and their CRI plugin:

======  ==================================  ===============================
version  CRI plugin table                   read by containerd
======  ==================================  ===============================
1       ``plugins.cri``                     1.x; 2.x migrates it on load
2       ``plugins."io.containerd.grpc.v1.cri"``  1.3+ and 2.x
3       ``plugins."io.containerd.cri.v1.runtime"``  2.0+
4       ``plugins."io.containerd.cri.v1.runtime"``  2.3+ (server settings moved)
======  ==================================  ===============================

Sources: containerd ``version/version.go`` ``ConfigVersion`` (3 in v2.0.0 to
v2.2.x, 4 in v2.3.0); ``cmd/containerd/server/config/config.go`` (v2.x: a
missing version is 0, "treated as version 1"; ``ValidateVersion`` refuses a
higher version than ``ConfigVersion``); ``services/server/config/config.go``
(v1.x: ``GetVersion`` reads a missing version as 1).

Why the drop-in carries the root config's version, never another one:

- containerd 2.0 to 2.2 migrate only version 0/1 files while loading, and
  take the ``version`` of the last file merged: a version 3 drop-in under a
  version 2 config.toml leaves config.toml's CRI settings unmigrated, and
  containerd then ignores them (verified with Debian's 2.1.9: the root's
  ``snapshotter`` was lost). With equal versions the merged config is
  migrated as a whole.
- containerd 2.3.0 refused a drop-in whose version is higher than the root's
  ("drop-in config version 4 higher than root config version 2", PR 12891,
  2026-02); PR 13939 (2026-08) reverted that, releases differ.
- containerd 1.x checks plugin names against the merged ``version``.

A config.toml without ``version`` is version 1. containerd 1.x reads it as
such; 2.3+ migrates every file before merging, so a version 1 drop-in works;
2.0 to 2.2 never move a version 1 file's CRI settings to the version 3 plugins
and ignore them (verified with 2.1.9), so neither config.toml's own CRI
settings nor a version 1 drop-in would load: that case is refused with the
fix (give config.toml a version). A version containerd cannot read (3 or 4 on
1.x, 4 before 2.3) is refused too: containerd would not start with it.

Why the drop-in may carry more than the runtime: containerd before 2.0 merges
imported files plugin by plugin, replacing the whole table of a plugin (for
CRI: sandbox image, CNI paths, registries, the runc runtime...). So for
containerd 1.x the drop-in holds the complete CRI table: containerd's defaults
(``containerd config default``), overlaid with config.toml's own CRI table
and its other imports', overlaid with the runtime. containerd 2.x merges
plugin tables key by key (containerd commit a21e379b, in v2.0.0), so there
the drop-in holds only the runtime. A re-run recomputes the drop-in from
config.toml, so edits made there later (by kubeadm, kubespray...) are picked up.

CDI (``enable_cdi``): containerd's CRI plugin supports CDI from 1.7.0 (off by
default) and enables it by default from 2.0.0, with ``cdi_spec_dirs``
``/etc/cdi`` and ``/var/run/cdi`` (``pkg/cri/config/config_unix.go`` v1.7.0,
``internal/cri/config/config_unix.go`` v2.0.0). When asked, the drop-in turns
it on where it is off; before 1.7 it cannot be.

SystemdCgroup follows the node unless given: the value on config.toml's runc
runtime, else true when systemd is PID 1.
"""

import fnmatch
import os
import re

from ansible.module_utils.gpunode.formats.json_config import deep_merge
from ansible.module_utils.gpunode.formats.kube_version import parse as parse_version
from ansible.module_utils.gpunode.formats.toml_reader import loads
from ansible.module_utils.gpunode.host import files

CRI_PLUGIN = {
    1: "cri",
    2: "io.containerd.grpc.v1.cri",
    3: "io.containerd.cri.v1.runtime",
    4: "io.containerd.cri.v1.runtime",
}
# The highest config version each containerd release line reads (ConfigVersion).
CONFIG_VERSIONS = ((2, 3, 4), (2, 0, 3), (0, 0, 2))  # (major, minor, highest version), newest first
CDI_SINCE = (1, 7)
CDI_DEFAULT_ON_SINCE = (2, 0)
CDI_SPEC_DIRS = ["/etc/cdi", "/var/run/cdi"]
DEFAULT_CONFIG = "/etc/containerd/config.toml"
DEFAULT_DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"
DROPIN_HEADER = (
    "# Written by gpunode (containerd_runtime); changes here are overwritten.\n"
    "# Imported from config.toml; see its imports line.\n"
)


class ContainerdConfigError(Exception):
    """A file cannot be used as it is; the message names the file and the problem."""


# --- reading ------------------------------------------------------------------


def parse(text, path):
    """Parse TOML text into a dict; raises ContainerdConfigError naming ``path``."""
    return loads(text, path, ContainerdConfigError)


def containerd_release(containerd_version):
    """``(major, minor)`` from ``'1.6.20~ds1'``, ``'v2.0.4'`` or ``--version`` output; None if unknown."""
    if not containerd_version:
        return None
    try:
        major, minor, _patch = parse_version(containerd_version, ContainerdConfigError, "containerd version")
    except ContainerdConfigError:
        return None
    return major, minor


def version_from_output(output):
    """The version in `containerd --version` output, e.g. ``'1.6.20~ds1'``; None if absent."""
    for token in (output or "").split():
        if re.match(r"v?\d+\.\d+", token):
            return token[1:] if token.startswith("v") else token
    return None


def highest_config_version(release):
    """The highest config ``version`` a containerd ``(major, minor)`` reads; None if unknown."""
    if release is None:
        return None
    for major, minor, version in CONFIG_VERSIONS:
        if release >= (major, minor):
            return version
    return None


def root_version(config, path):
    """config.toml's version as containerd reads it: 1 to 4 (absent means 1)."""
    version = config.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version not in (0, *CRI_PLUGIN):
        raise ContainerdConfigError(f"{path}: unsupported config version {version!r} (known: 1 to 4)")
    return version or 1


def containerd_facts(host, wanted_version):
    """(version, `containerd config default` text or None) of the node's containerd.

    ``host``: a ``host/commands.py`` Host (``which``, ``run``). The defaults are read
    for containerd before 2.0 only (its drop-in carries the whole CRI table).
    """
    binary = host.which("containerd")
    version = wanted_version
    if version is None and binary:
        rc, out, _err = host.run([binary, "--version"])
        version = version_from_output(out) if rc == 0 else None
    defaults = None
    release = containerd_release(version)
    if binary and (release is None or release < (2, 0)):
        rc, out, _err = host.run([binary, "config", "default"])
        defaults = out if rc == 0 else None
    return version, defaults


def other_imports(config_text, config_path, dropin_path, read_text):
    """(path, text) of the files config.toml imports now, in containerd's order, ours excluded.

    Relative entries are relative to config.toml's folder; globs are expanded
    and sorted, as containerd's ``resolveImports`` does.
    """
    if not config_text or not config_text.strip():
        return []
    imports = parse(config_text, config_path).get("imports", [])
    found = []
    for pattern in imports if isinstance(imports, list) else []:
        if not isinstance(pattern, str):
            continue
        absolute = pattern if os.path.isabs(pattern) else os.path.join(os.path.dirname(config_path), pattern)
        for path in sorted(files.glob(absolute)):
            if os.path.abspath(path) != os.path.abspath(dropin_path) and files.is_file(path):
                found.append((path, read_text(path, ContainerdConfigError)))
    return found


# --- writing ------------------------------------------------------------------


def _key(key):
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _string(key)


def _string(value):
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    escaped = re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\u{ord(m.group()):04x}", escaped)
    return f'"{escaped}"'


def _value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):  # a tuple: targets may run Python 3.8
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    raise ContainerdConfigError(f"cannot write a {type(value).__name__} value to TOML")


def dumps(data):
    """TOML text for a dict of tables and plain values (our drop-ins)."""
    lines = []

    def table(node, path):
        plain = [(k, v) for k, v in node.items() if not isinstance(v, dict)]
        tables = [(k, v) for k, v in node.items() if isinstance(v, dict)]
        if path and (plain or not tables):
            if lines:
                lines.append("")
            lines.append("[" + ".".join(_key(k) for k in path) + "]")
        lines.extend(f"{_key(k)} = {_value(v)}" for k, v in plain)
        for key, child in tables:
            table(child, (*path, key))

    table(data, ())
    return "\n".join(lines) + "\n"


# --- the plan -----------------------------------------------------------------


def _table(config, *keys):
    for key in keys:
        config = config.get(key) if isinstance(config, dict) else None
    return config if isinstance(config, dict) else {}


def cri_table(config, version):
    return _table(config, "plugins", CRI_PLUGIN[version])


def detect_systemd_cgroup(cri, systemd_pid1):
    """SystemdCgroup of the runc runtime in a CRI table, else whether systemd is PID 1."""
    options = _table(cri, "containerd", "runtimes", "runc", "options")
    if isinstance(options.get("SystemdCgroup"), bool):
        return options["SystemdCgroup"]
    return bool(systemd_pid1)


def cri_disabled(config, version):
    disabled = config.get("disabled_plugins", [])
    return isinstance(disabled, list) and (CRI_PLUGIN[version] in disabled or "cri" in disabled)


def imports_dropin(config, dropin_path):
    imports = config.get("imports", [])
    return isinstance(imports, list) and any(
        isinstance(item, str) and fnmatch.fnmatchcase(dropin_path, item) for item in imports
    )


def add_import(text, dropin_path, version):
    """config.toml text with ``dropin_path`` in the top-level imports array.

    A minimal edit: an existing ``imports = [...]`` is extended in place (its
    other entries kept), else a line is added after ``version = N`` (or first).
    """
    entry = _string(dropin_path)
    if text is None or not text.strip():
        return f"version = {version}\nimports = [{entry}]\n" if version > 1 else f"imports = [{entry}]\n"
    header = re.search(r"^[ \t]*\[", text, re.MULTILINE)
    top = text[: header.start()] if header else text
    pattern = r"^([ \t]*imports[ \t]*=[ \t]*\[)(.*?)(\][ \t]*)(#[^\n]*)?$"
    match = re.search(pattern, top, re.MULTILINE | re.DOTALL)
    if match:
        inner = match.group(2)
        stripped = inner.rstrip()
        if not stripped.strip():
            new_inner = entry
        elif stripped.endswith(","):
            new_inner = f"{stripped} {entry}{inner[len(stripped) :]}"
        else:
            new_inner = f"{stripped}, {entry}{inner[len(stripped) :]}"
        return text[: match.start(2)] + new_inner + text[match.end(2) :]
    line = f"imports = [{entry}]\n"
    version_line = re.search(r"^[ \t]*version[ \t]*=[^\n]*\n?", top, re.MULTILINE)
    if version_line:
        end = version_line.end()
        prefix = text[:end] if text[:end].endswith("\n") else text[:end] + "\n"
        return prefix + line + text[end:]
    return line + text


def runtime_tables(name, binary_name, runtime_type, systemd_cgroup, set_default):
    """The CRI table fragment that declares the runtime (and the default, if asked)."""
    containerd = {
        "runtimes": {
            name: {
                "runtime_type": runtime_type,
                "options": {"BinaryName": binary_name, "SystemdCgroup": systemd_cgroup},
            }
        }
    }
    if set_default:
        containerd = {"default_runtime_name": name, **containerd}
    return {"containerd": containerd}


def render_dropin(version, cri):
    """The whole drop-in text for a CRI table."""
    data = {"plugins": {CRI_PLUGIN[version]: cri}}
    if version > 1:
        data = {"version": version, **data}
    return DROPIN_HEADER + dumps(data)


def check_readable(version, release, config_path, containerd_version):
    """Refuse a config.toml that this containerd cannot read, or reads without its CRI settings."""
    highest = highest_config_version(release)
    if highest is not None and version > highest:
        if release < (2, 0):
            why = "which does not know its plugin names and would run without its CRI settings"
        else:
            why = "which refuses to start with it"
        raise ContainerdConfigError(
            f"{config_path}: config version {version} needs containerd {'2.3' if version == 4 else '2.0'} "
            f"or newer, this is {containerd_version}, {why}"
        )
    if version == 1 and release is not None and (2, 0) <= release < (2, 3):
        raise ContainerdConfigError(
            f"{config_path}: has no `version` line, so containerd {containerd_version} reads it as version 1 "
            "and ignores the CRI settings of version 1 files (2.0 to 2.2 do not migrate them; 2.3 does), "
            "so a runtime declared for it would not load either. Give the file a version: "
            "`containerd config migrate` prints it converted to version 3"
        )


def effective_cri(config, version, others, ours, release):
    """The CRI table containerd ends up with: config.toml, its other imports, then our drop-in.

    containerd 2.x merges plugin tables key by key; 1.x lets each file's CRI
    table replace the previous one whole.
    """
    tables = [cri_table(config, version)]
    tables += [cri_table(data, version) for data in others]
    tables.append(ours)
    merged = {}
    for table in tables:
        if not table:
            continue
        merged = deep_merge(merged, table) if release is None or release >= (2, 0) else table
    return merged


def cdi_state(cri, release):
    """``(enabled, spec_dirs)`` of a CRI table under containerd ``release``."""
    if release is not None and release < CDI_SINCE:
        return False, []
    default_on = release is None or release >= CDI_DEFAULT_ON_SINCE
    enabled = cri.get("enable_cdi", default_on)
    dirs = cri.get("cdi_spec_dirs", CDI_SPEC_DIRS)
    return enabled is True, list(dirs) if isinstance(dirs, list) else list(CDI_SPEC_DIRS)


def _schema(config_text, config_path, containerd_version):
    """(config, release, version): config.toml parsed, containerd's (major, minor), the version to write.

    Absent, empty or only comments: containerd runs on its defaults, and we write the newest
    version it reads (a version 1 file would lose its CRI settings on containerd 2.0 to 2.2).
    """
    config = parse(config_text, config_path) if config_text and config_text.strip() else {}
    release = containerd_release(containerd_version)
    version = highest_config_version(release) or 2 if not config else root_version(config, config_path)
    check_readable(version, release, config_path, containerd_version)
    return config, release, version


def _base_cri(default_config_text, version, warnings):
    """containerd's default CRI table (`containerd config default`), or {} with a warning."""
    if default_config_text and default_config_text.strip():
        plugins = _table(parse(default_config_text, "containerd config default"), "plugins")
        return _table(plugins, CRI_PLUGIN[2]) or _table(plugins, CRI_PLUGIN[version])
    warnings.append(
        "containerd's defaults (`containerd config default`) were not available: the drop-in "
        "holds config.toml's CRI settings and the runtime only"
    )
    return {}


def _with_cdi(cri, config, *, version, others, release, containerd_version, warnings):
    """The drop-in's CRI table with CDI turned on where containerd has it off."""
    effective_before = effective_cri(config, version, others, cri, release)
    enabled, _dirs = cdi_state(effective_before, release)
    if release is not None and release < CDI_SINCE:
        warnings.append(
            f"containerd {containerd_version} has no CDI support (it came with 1.7): "
            "devices are injected by the nvidia runtime only"
        )
    elif not enabled:
        cri = deep_merge(cri, {"enable_cdi": True})
    return cri


def _new_config(config_text, config, *, config_path, dropin_path, version):
    """config.toml's new text: created (kept comments) or with the drop-in imported."""
    new_config = config_text
    if not config:
        kept = config_text or ""
        if kept and not kept.endswith("\n"):
            kept += "\n"
        new_config = kept + add_import(None, dropin_path, version)
    elif not imports_dropin(config, dropin_path):
        new_config = add_import(config_text, dropin_path, version)
    if new_config != config_text:
        check = parse(new_config, config_path)
        if not imports_dropin(check, dropin_path):
            raise ContainerdConfigError(f"{config_path}: could not add {dropin_path} to imports")
    return new_config


def _effective(effective, release):
    """What containerd runs with, from its merged CRI table."""
    cdi_enabled, cdi_dirs = cdi_state(effective, release)
    runtimes = _table(effective, "containerd", "runtimes")
    return {
        "default_runtime": _table(effective, "containerd").get("default_runtime_name", "runc"),
        "runtimes": sorted(set(runtimes) | {"runc"}),
        "cdi_enabled": cdi_enabled,
        "cdi_spec_dirs": cdi_dirs,
    }


def plan(
    config_text,
    *,
    config_path=DEFAULT_CONFIG,
    dropin_path=DEFAULT_DROPIN,
    name="nvidia",
    binary_name="/usr/bin/nvidia-container-runtime",
    runtime_type="io.containerd.runc.v2",
    systemd_cgroup=None,
    set_default=False,
    enable_cdi=False,
    containerd_version=None,
    default_config_text=None,
    systemd_pid1=True,
    other_imports=(),
):
    """Compute config.toml's and the drop-in's new texts (None: absent file).

    The drop-in is ours and generated whole, so its current text is not needed.

    ``default_config_text`` is `containerd config default` (used for
    containerd < 2); ``other_imports`` are (path, text) of files config.toml
    already imports, merged in order (containerd 1.x lets later files win).
    Returns a dict: config_text, dropin_text (new texts), schema_version,
    systemd_cgroup, full_cri_table (bool), warnings, and ``effective``: what
    containerd runs with once it has read them (default_runtime, runtimes,
    cdi_enabled, cdi_spec_dirs). Raises ContainerdConfigError.
    """
    config, release, version = _schema(config_text, config_path, containerd_version)
    warnings = []
    others = [parse(text, path) for path, text in other_imports if text and text.strip()]
    user_cri = cri_table(config, version)
    for data in others:
        user_cri = deep_merge(user_cri, cri_table(data, version))
    if systemd_cgroup is None:
        systemd_cgroup = detect_systemd_cgroup(user_cri, systemd_pid1)
    cri = runtime_tables(name, binary_name, runtime_type, systemd_cgroup, set_default)
    full = release is None or release < (2, 0)
    if full:
        cri = deep_merge(deep_merge(_base_cri(default_config_text, version, warnings), user_cri), cri)
    if enable_cdi:
        cri = _with_cdi(cri, config, version=version, others=others, release=release,
                        containerd_version=containerd_version, warnings=warnings)
    if cri_disabled(config, version):
        warnings.append(
            f"{config_path}: the CRI plugin is disabled (disabled_plugins); Kubernetes cannot use "
            f"the {name} runtime until it is enabled"
        )
    new_dropin = render_dropin(version, cri)
    return {
        "config_text": _new_config(config_text, config, config_path=config_path, dropin_path=dropin_path,
                                   version=version),
        "dropin_text": new_dropin,
        "schema_version": version,
        "systemd_cgroup": systemd_cgroup,
        "full_cri_table": full,
        "warnings": warnings,
        "effective": _effective(effective_cri(config, version, others, cri, release), release),
    }
