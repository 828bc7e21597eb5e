"""Add a runtime (nvidia) to containerd's CRI plugin through a drop-in file.

Pure functions, no Ansible import; the module ``containerd_runtime`` reads the
files, calls :func:`plan` and writes what it returns.

What is written:

- ``config.toml`` gets our drop-in in its top-level ``imports`` array by a
  minimal text edit (everything else byte for byte); a missing file is created
  as ``version = N`` + ``imports``. An ``imports`` glob that already matches the
  drop-in counts as present.
- the drop-in (``/etc/containerd/conf.d/99-nvidia.toml``) is generated whole, in
  the schema of config.toml (1: ``plugins.cri``, 2:
  ``plugins."io.containerd.grpc.v1.cri"``, 3: ``plugins."io.containerd.cri.v1.runtime"``),
  with the same ``version`` line (containerd reads an imported file without one
  as version 1).

Why the drop-in may carry more than the runtime: containerd before 2.0 merges
imported files plugin by plugin, replacing the whole table of a plugin (for
CRI: sandbox image, CNI paths, registries, the runc runtime...). So for
containerd 1.x the drop-in holds the complete CRI table: containerd's defaults
(``containerd config default``), overlaid with config.toml's own CRI table,
overlaid with the runtime. containerd 2.x merges tables key by key, so there
the drop-in holds only the runtime. A re-run recomputes the drop-in from
config.toml, so edits made there later (by kubeadm, kubespray...) are picked up.

SystemdCgroup follows the node unless given: the value on config.toml's runc
runtime, else true when systemd is PID 1.
"""

import fnmatch
import re

try:
    import tomllib
except ImportError:  # Python < 3.11 on the target: the small reader below
    tomllib = None

CRI_PLUGIN = {1: "cri", 2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}
DEFAULT_CONFIG = "/etc/containerd/config.toml"
DEFAULT_DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"


class ContainerdConfigError(Exception):
    """A file cannot be used as it is; the message names the file and the problem."""


# --- reading ------------------------------------------------------------------


def parse(text, path):
    """Parse TOML text into a dict; raises ContainerdConfigError naming ``path``."""
    try:
        if tomllib is not None:
            return tomllib.loads(text)
        return MiniToml(text).parse()
    except (ValueError, IndexError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise ContainerdConfigError(f"{path}: not valid TOML: {exc}") from exc


class MiniToml:
    """A TOML reader for the subset containerd configs use (Python < 3.11 only).

    Tables, dotted and quoted keys, basic and literal strings, integers,
    floats, booleans, arrays (multi-line) and inline tables; no dates,
    multi-line strings or arrays of tables.
    """

    BARE = re.compile(r"[A-Za-z0-9_-]+")
    NUMBER = re.compile(r"[+-]?[0-9_]+(\.[0-9_]+)?([eE][+-]?[0-9]+)?")

    def __init__(self, text):
        self.text = text
        self.pos = 0
        self.line = 1

    def fail(self, message):
        raise ValueError(f"{message} (at line {self.text.count(chr(10), 0, self.pos) + 1})")

    def skip(self, newlines=False):
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char in " \t\r" or (newlines and char == "\n"):
                self.pos += 1
            elif char == "#":
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            else:
                return

    def parse(self):
        root = {}
        table = root
        while True:
            self.skip(newlines=True)
            if self.pos >= len(self.text):
                return root
            if self.text.startswith("[[", self.pos):
                self.fail("arrays of tables are not supported")
            if self.text[self.pos] == "[":
                self.pos += 1
                keys = self.key()
                self.expect("]")
                table = root
                for key in keys:
                    table = table.setdefault(key, {})
                    if not isinstance(table, dict):
                        self.fail(f"{key} is not a table")
            else:
                keys = self.key()
                self.expect("=")
                self.assign(table, keys, self.value())
            self.skip()
            if self.pos < len(self.text) and self.text[self.pos] != "\n":
                self.fail("expected the end of the line")

    def assign(self, table, keys, value):
        for key in keys[:-1]:
            table = table.setdefault(key, {})
        if keys[-1] in table:
            self.fail(f"duplicate key {keys[-1]}")
        table[keys[-1]] = value

    def expect(self, char):
        self.skip()
        if not self.text.startswith(char, self.pos):
            self.fail(f"expected {char!r}")
        self.pos += 1

    def key(self):
        keys = []
        while True:
            self.skip()
            char = self.text[self.pos : self.pos + 1]
            if char in ('"', "'"):
                keys.append(self.string())
            else:
                match = self.BARE.match(self.text, self.pos)
                if not match:
                    self.fail("expected a key")
                keys.append(match.group())
                self.pos = match.end()
            self.skip()
            if not self.text.startswith(".", self.pos):
                return keys
            self.pos += 1

    def string(self):
        quote = self.text[self.pos]
        if self.text.startswith(quote * 3, self.pos):
            self.fail("multi-line strings are not supported")
        self.pos += 1
        out = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            self.pos += 1
            if char == quote:
                return "".join(out)
            if char == "\n":
                break
            if char == "\\" and quote == '"':
                code = self.text[self.pos]
                self.pos += 1
                simple = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", '"': '"', "\\": "\\"}
                if code in simple:
                    out.append(simple[code])
                elif code in "uU":
                    width = 4 if code == "u" else 8
                    out.append(chr(int(self.text[self.pos : self.pos + width], 16)))
                    self.pos += width
                else:
                    self.fail(f"bad escape \\{code}")
            else:
                out.append(char)
        self.fail("unterminated string")
        return None

    def value(self):
        self.skip()
        char = self.text[self.pos : self.pos + 1]
        if char in ('"', "'"):
            return self.string()
        if char == "[":
            self.pos += 1
            items = []
            while True:
                self.skip(newlines=True)
                if self.text.startswith("]", self.pos):
                    self.pos += 1
                    return items
                items.append(self.value())
                self.skip(newlines=True)
                if self.text.startswith(",", self.pos):
                    self.pos += 1
                elif not self.text.startswith("]", self.pos):
                    self.fail("expected ',' or ']'")
        if char == "{":
            self.pos += 1
            table = {}
            self.skip()
            if self.text.startswith("}", self.pos):
                self.pos += 1
                return table
            while True:
                keys = self.key()
                self.expect("=")
                self.assign(table, keys, self.value())
                self.skip()
                if self.text.startswith("}", self.pos):
                    self.pos += 1
                    return table
                self.expect(",")
        specials = (("true", True), ("false", False), ("+inf", float("inf")), ("-inf", float("-inf")))
        for word, result in (*specials, ("inf", float("inf"))):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return result
        match = self.NUMBER.match(self.text, self.pos)
        if not match:
            self.fail("expected a value")
        self.pos = match.end()
        number = match.group().replace("_", "")
        return float(number) if match.group(1) or match.group(2) else int(number)


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


def deep_merge(base, overlay):
    merged = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def schema_version(config, path):
    """1, 2 or 3 from the ``version`` key (absent: 1, as containerd reads it)."""
    version = config.get("version", 1)
    if version not in CRI_PLUGIN or isinstance(version, bool):
        raise ContainerdConfigError(f"{path}: unsupported config version {version!r} (known: 1, 2, 3)")
    return version


def major_version(containerd_version):
    """1 from '1.6.20~ds1' or 'v1.7.2'; None when unknown."""
    match = re.match(r"v?(\d+)\.", containerd_version or "")
    return int(match.group(1)) if match else None


def version_from_output(output):
    """The version in `containerd --version` output, e.g. '1.6.20~ds1'; None if absent."""
    for token in (output or "").split():
        if re.match(r"v?\d+\.\d+", token):
            return token.lstrip("v")
    return None


def _table(config, *keys):
    for key in keys:
        config = config.get(key) if isinstance(config, dict) else None
    return config if isinstance(config, dict) else {}


def cri_table(config, version):
    return _table(config, "plugins", CRI_PLUGIN[version])


def detect_systemd_cgroup(config, version, systemd_pid1):
    """SystemdCgroup from the runc runtime in ``config``, else whether systemd is PID 1."""
    options = _table(cri_table(config, version), "containerd", "runtimes", "runc", "options")
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
    return (
        "# Written by gpunode (containerd_runtime); changes here are overwritten.\n"
        "# Imported from config.toml; see its imports line.\n" + dumps(data)
    )


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
    systemd_cgroup, full_cri_table (bool), warnings. Raises ContainerdConfigError.
    """
    config = parse(config_text, config_path) if config_text and config_text.strip() else {}
    major = major_version(containerd_version)
    new_file_version = 3 if major is not None and major >= 2 else 2
    version = schema_version(config, config_path) if config else new_file_version
    if version == 3 and major is not None and major < 2:
        raise ContainerdConfigError(
            f"{config_path}: version 3 needs containerd 2.x, this is {containerd_version}; left unchanged"
        )
    warnings = []

    user_cri = cri_table(config, version)
    for path, text in other_imports:
        if text and text.strip():
            user_cri = deep_merge(user_cri, cri_table(parse(text, path), version))
    if systemd_cgroup is None:
        user = {"plugins": {CRI_PLUGIN[version]: user_cri}}
        systemd_cgroup = detect_systemd_cgroup(user, version, systemd_pid1)
    ours = runtime_tables(name, binary_name, runtime_type, systemd_cgroup, set_default)

    full = major is None or major < 2
    if full:
        base = {}
        if default_config_text and default_config_text.strip():
            defaults = parse(default_config_text, "containerd config default")
            plugins = _table(defaults, "plugins")
            base = _table(plugins, CRI_PLUGIN[2]) or _table(plugins, CRI_PLUGIN[version])
        else:
            warnings.append(
                "containerd's defaults (`containerd config default`) were not available: the drop-in "
                "holds config.toml's CRI settings and the runtime only"
            )
        cri = deep_merge(deep_merge(base, user_cri), ours)
    else:
        cri = ours
    if cri_disabled(config, version):
        warnings.append(
            f"{config_path}: the CRI plugin is disabled (disabled_plugins); Kubernetes cannot use "
            f"the {name} runtime until it is enabled"
        )

    new_dropin = render_dropin(version, cri)
    new_config = config_text
    if not imports_dropin(config, dropin_path) or config_text is None:
        new_config = add_import(config_text, dropin_path, version)
        check = parse(new_config, config_path)
        if not imports_dropin(check, dropin_path):
            raise ContainerdConfigError(f"{config_path}: could not add {dropin_path} to imports")
    return {
        "config_text": new_config,
        "dropin_text": new_dropin,
        "schema_version": version,
        "systemd_cgroup": systemd_cgroup,
        "full_cri_table": full,
        "warnings": warnings,
    }
