"""Read and edit ``--feature-gates`` in the files that hold kubelet flags.

Two formats:

- ``env``: an environment file as systemd's ``EnvironmentFile=`` reads it
  (``/etc/default/kubelet``, ``/etc/sysconfig/kubelet``,
  ``/var/lib/kubelet/kubeadm-flags.env``): ``NAME=value`` lines, the value
  unquoted, "double-quoted" (backslash escapes, may span lines) or
  'single-quoted'; a backslash at the end of a line continues the value.
- ``systemd``: a unit or drop-in (``10-kubeadm.conf``): flags in
  ``Environment="KUBELET_EXTRA_ARGS=..."`` assignments or in ``ExecStart=``.

Within a value, flags are words separated by whitespace; a word may carry
quotes (``--feature-gates="A=true,B=false"``). Edits replace the text of one
word and keep every other byte. All ``--feature-gates`` flags found are merged
into the first one (the kubelet merges repeated flags the same way: later
entries win), the others are removed.

The YAML targets are here too: a KubeletConfiguration file (``featureGates``),
RKE1 ``cluster.yml`` (``services.kubelet.extra_args.feature-gates``) and RKE2
``config.yaml`` plus ``config.yaml.d/*.yaml`` (``kubelet-arg`` items
``feature-gates=...``), all edited through yaml_edit so comments survive.

Standard library and PyYAML only: this runs on target hosts.
"""

import os
import re
from collections import namedtuple

from ansible.module_utils.kubelet_gates import GateError, format_gate_string, parse_bool, parse_gate_string
from ansible.module_utils.yaml_edit import YamlEditError, append_to_list, get, remove_key, set_scalar

Word = namedtuple("Word", "start end value")
# a place holding flags: ``start``/``end`` bound the raw flag text in the file
Container = namedtuple("Container", "label name start end")

_ENV_LINE_RE = re.compile(r"[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)=")
_UNIT_LINE_RE = re.compile(r"[ \t]*([A-Za-z][A-Za-z0-9]*)[ \t]*=[ \t]*")
_SECTION_RE = re.compile(r"[ \t]*\[([^\]]+)\][ \t]*$")
_GATES = "--feature-gates"
DEFAULT_VARIABLE = "KUBELET_EXTRA_ARGS"


class FlagsError(ValueError):
    """The file cannot be read as the format says; ``line`` is 1-based when known."""

    def __init__(self, message, line=None):
        if line is not None:
            message = f"line {line}: {message}"
        super().__init__(message)
        self.line = line


def _line_no(text, index):
    return text.count("\n", 0, index) + 1


def split_words(text, start=0, end=None):
    """Shell-like words of ``text[start:end]`` with their raw spans and unquoted values."""
    end = len(text) if end is None else end
    words = []
    i = start
    while i < end:
        char = text[i]
        if char in " \t\r\n":
            i += 1
            continue
        if char == "\\" and i + 1 < end and text[i + 1] == "\n":
            i += 2
            continue
        word_start = i
        buf = []
        while i < end and text[i] not in " \t\r\n":
            char = text[i]
            if char == "\\":
                if i + 1 < end and text[i + 1] == "\n":
                    i += 2
                elif i + 1 < end:
                    buf.append(text[i + 1])
                    i += 2
                else:
                    buf.append(char)
                    i += 1
            elif char == "'":
                close = text.find("'", i + 1, end)
                if close < 0:
                    raise FlagsError("unterminated ' quote", _line_no(text, i))
                buf.append(text[i + 1 : close])
                i = close + 1
            elif char == '"':
                j = i + 1
                while j < end and text[j] != '"':
                    if text[j] == "\\" and j + 1 < end:
                        if text[j + 1] != "\n":
                            buf.append(text[j + 1])
                        j += 2
                        continue
                    buf.append(text[j])
                    j += 1
                if j >= end:
                    raise FlagsError('unterminated " quote', _line_no(text, i))
                i = j + 1
            else:
                buf.append(char)
                i += 1
        words.append(Word(word_start, i, "".join(buf)))
    return words


# ---------------------------------------------------------------- env files


def _scan_env(text):
    """Assignments of an env file: list of (name, value_start, value_end, line)."""
    assignments = []
    i = 0
    length = len(text)
    while i < length:
        eol = text.find("\n", i)
        eol = length if eol < 0 else eol
        stripped = text[i:eol].strip()
        if not stripped or stripped[0] in "#;":
            i = eol + 1
            continue
        match = _ENV_LINE_RE.match(text, i, eol)
        if not match:
            raise FlagsError(f"expected NAME=value, found {stripped[:60]!r}", _line_no(text, i))
        name = match.group(1)
        start = match.end()
        quote = text[start : start + 1]
        if quote in ("'", '"'):
            j = start + 1
            while j < length and text[j] != quote:
                j += 2 if (quote == '"' and text[j] == "\\") else 1
            if j >= length:
                raise FlagsError(f"{name}: unterminated {quote} quote", _line_no(text, start))
            value_start, value_end = start + 1, j
            eol = text.find("\n", j)
            eol = length if eol < 0 else eol
            rest = text[j + 1 : eol].strip()
            if rest and not rest.startswith("#"):
                raise FlagsError(
                    f"{name}: unexpected text after the closing quote: {rest!r}", _line_no(text, j)
                )
        else:
            j = start
            while True:
                eol = text.find("\n", j)
                eol = length if eol < 0 else eol
                if eol > start and text[eol - 1] == "\\" and eol < length:
                    j = eol + 1
                    continue
                break
            value_start, value_end = start, eol
            while value_end > value_start and text[value_end - 1] in " \t\r":
                value_end -= 1
        assignments.append((name, value_start, value_end, _line_no(text, i)))
        i = eol + 1
    return assignments


def _env_containers(text):
    return [Container(name, name, start, end) for name, start, end, _ in _scan_env(text)]


# ---------------------------------------------------------------- unit files


def _logical_lines(text):
    """(start, end) of each logical line of a unit file (backslash continuations joined)."""
    lines = []
    i = 0
    length = len(text)
    while i < length:
        j = i
        while True:
            eol = text.find("\n", j)
            eol = length if eol < 0 else eol
            stripped = text[i:eol].lstrip()
            is_comment = stripped[:1] in ("#", ";") and j == i
            if not is_comment and text[j:eol].rstrip().endswith("\\") and eol < length:
                j = eol + 1
                continue
            break
        lines.append((i, eol))
        i = eol + 1
    return lines


def _scan_unit(text):
    """Parse a unit file: dict with environment words, exec_start span, env files, service span."""
    info = {"environment": [], "exec_start": None, "env_files": [], "service": None, "last_env": None}
    section = None
    for start, end in _logical_lines(text):
        line = text[start:end]
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        section_match = _SECTION_RE.match(line)
        if section_match:
            section = section_match.group(1)
            if section == "Service" and info["service"] is None:
                info["service"] = end
            continue
        match = _UNIT_LINE_RE.match(text, start, end)
        if not match:
            raise FlagsError(
                f"not a [Section] header, a comment or a Key=value assignment: {stripped[:60]!r}",
                _line_no(text, start),
            )
        if section is None:
            raise FlagsError(f"{match.group(1)}= appears before any [Section] header", _line_no(text, start))
        if section != "Service":
            continue
        key = match.group(1)
        value_start, value_end = match.end(), end
        if key == "Environment":
            info["last_env"] = end
            for word in split_words(text, value_start, value_end):
                name = word.value.partition("=")[0]
                raw = text[word.start : word.end]
                inner = _inner_span(raw, name)
                if inner is None:
                    continue
                info["environment"].append(
                    Container(f"Environment {name}", name, word.start + inner[0], word.start + inner[1])
                )
        elif key == "ExecStart":
            if text[value_start:value_end].strip():
                info["exec_start"] = Container("ExecStart", None, value_start, value_end)
            else:
                info["exec_start"] = None
            if info.get("first_exec") is None:
                info["first_exec"] = start
        elif key == "EnvironmentFile":
            info["env_files"].append(text[value_start:value_end].strip())
    return info


def _inner_span(raw, name):
    """Span of the flags text inside one Environment word: "NAME=..." / NAME="..." / NAME=..."""
    if raw.startswith('"' + name + "=") and raw.endswith('"') and len(raw) >= len(name) + 3:
        return len(name) + 2, len(raw) - 1
    if raw.startswith(name + '="') and raw.endswith('"'):
        return len(name) + 2, len(raw) - 1
    if raw.startswith(name + "=") and '"' not in raw and "'" not in raw:
        return len(name) + 1, len(raw)
    return None


# ---------------------------------------------------------------- shared logic


def detect_format(text):
    """``systemd`` when the file has a [Section] header, else ``env``."""
    for line in text.splitlines():
        if _SECTION_RE.match(line):
            return "systemd"
    return "env"


def _gate_words(text, container):
    """(word, value_word_or_None) pairs for each --feature-gates flag in a container."""
    words = split_words(text, container.start, container.end)
    found = []
    for index, word in enumerate(words):
        if word.value.startswith(_GATES + "="):
            found.append((word, None, word.value[len(_GATES) + 1 :]))
        elif word.value == _GATES and index + 1 < len(words):
            nxt = words[index + 1]
            found.append((word, nxt, nxt.value))
    return found


def flag_containers(text, fmt):
    """Places in the file that hold kubelet flags, and the parsed unit info (systemd)."""
    if fmt == "env":
        return _env_containers(text), {}
    info = _scan_unit(text)
    containers = list(info["environment"])
    if info["exec_start"] is not None:
        containers.append(info["exec_start"])
    return containers, info


def read_gate_values(text, fmt):
    """Every --feature-gates value in the file, in order: list of (label, raw gate string)."""
    containers, _ = flag_containers(text, fmt)
    return [(c.label, value) for c in containers for _, _, value in _gate_words(text, c)]


def _quoted_like(raw_value, new_value):
    if raw_value.startswith('"'):
        return f'"{new_value}"'
    if raw_value.startswith("'"):
        return f"'{new_value}'"
    return new_value


def set_gate_string(text, fmt, gate_string, variable=None):
    """Make the file's kubelet flags carry exactly ``--feature-gates=<gate_string>``.

    Returns (new_text, where, warnings). ``gate_string`` empty removes the flag.
    ``variable`` names the variable to add the flag to when none holds it
    (default: KUBELET_EXTRA_ARGS, or the only variable that holds flags).
    """
    containers, info = flag_containers(text, fmt)
    warnings = []
    edits = []
    where = None
    found = [(c, hit) for c in containers for hit in _gate_words(text, c)]
    for index, (container, (flag_word, value_word, _)) in enumerate(found):
        if index == 0 and gate_string:
            where = container.label
            if value_word is None:
                raw_value = text[flag_word.start : flag_word.end][len(_GATES) + 1 :]
                edits.append(
                    (flag_word.start, flag_word.end, f"{_GATES}={_quoted_like(raw_value, gate_string)}")
                )
            else:
                raw_value = text[value_word.start : value_word.end]
                edits.append((value_word.start, value_word.end, _quoted_like(raw_value, gate_string)))
            continue
        end = value_word.end if value_word is not None else flag_word.end
        start = flag_word.start
        while start > container.start and text[start - 1] in " \t":
            start -= 1
        if start == container.start:
            while end < container.end and text[end] in " \t":
                end += 1
        edits.append((start, end, ""))
        where = where or container.label
    if not found and gate_string:
        flag = f"{_GATES}={gate_string}"
        target = _pick_container(text, fmt, containers, info, variable)
        if target is not None:
            where = target.label
            body = text[target.start : target.end]
            edits.append((target.end, target.end, (" " if body.strip() else "") + flag))
        elif fmt == "env":
            name = variable or DEFAULT_VARIABLE
            where = name
            line = f"{name}={flag}"
            if not text:
                edits.append((0, 0, line + "\n"))
            elif text.endswith("\n"):
                edits.append((len(text), len(text), line + "\n"))
            else:
                edits.append((len(text), len(text), "\n" + line))
        else:
            name = variable or DEFAULT_VARIABLE
            where = f"Environment {name}"
            edits.append(_new_environment_line(text, info, name, flag))
    if fmt == "systemd" and info.get("env_files") and where and where.startswith("Environment"):
        warnings.append(
            f"{where} may be overridden: variables from EnvironmentFile= "
            f"({', '.join(info['env_files'])}) take precedence over Environment="
        )
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text, where, warnings


def _pick_container(text, fmt, containers, info, variable):
    by_name = {c.name: c for c in containers if c.name}
    if variable:
        return by_name.get(variable)
    if DEFAULT_VARIABLE in by_name:
        return by_name[DEFAULT_VARIABLE]
    if fmt == "env":
        with_flags = [c for c in containers if text[c.start : c.end].lstrip().startswith("-")]
        return with_flags[0] if len(with_flags) == 1 else None
    exec_start = info.get("exec_start")
    if exec_start is None:
        raise FlagsError("no [Service] ExecStart= line: cannot tell how the kubelet gets its flags")
    if not re.search(r"\$\{?" + DEFAULT_VARIABLE + r"\b", text[exec_start.start : exec_start.end]):
        return exec_start  # the variable would not reach the kubelet: add the flag to ExecStart
    return None


def _new_environment_line(text, info, name, flag):
    line = f'Environment="{name}={flag}"'
    anchor = info.get("last_env")
    if anchor is None and info.get("first_exec") is not None:
        start = info["first_exec"]
        return (start, start, line + "\n")
    if anchor is None:
        anchor = info.get("service")
    if anchor is None:
        raise FlagsError("no [Service] section")
    return (anchor, anchor, "\n" + line)


def read_flags_gates(text, fmt):
    """The gates that the flags in ``text`` set, merged in order (later wins)."""
    gates = {}
    for _, value in read_gate_values(text, fmt):
        gates.update(parse_gate_string(value))
    return gates


# ---------------------------------------------------------------- YAML targets

FEATURE_GATES_ARG = "feature-gates="
RKE1_PATH = ["services", "kubelet", "extra_args", "feature-gates"]


def read_config_gates(text):
    """featureGates of a KubeletConfiguration text (YamlEditError/GateError when unusable)."""
    data = get(text, [], None) if text.strip() else None
    if not isinstance(data, dict):
        raise GateError("not a KubeletConfiguration: the document is not a mapping")
    kind = data.get("kind")
    if kind not in (None, "KubeletConfiguration"):
        raise GateError(f"not a KubeletConfiguration (kind: {kind})")
    gates = data.get("featureGates") or {}
    if not isinstance(gates, dict):
        raise GateError("featureGates is not a mapping")
    for name, value in gates.items():
        if not isinstance(value, bool):
            raise GateError(f"featureGates.{name}: {value!r} is not true or false")
    return dict(gates)


def write_config_gates(text, current, merged):
    for name in current:
        if name not in merged:
            text = remove_key(text, ["featureGates", name])
    for name, value in merged.items():
        if current.get(name) is not value:
            text = set_scalar(text, ["featureGates", name], value)
    return text


def read_rke1_gates(text):
    value = get(text, RKE1_PATH)
    if value is None:
        return {}
    return parse_gate_string(value)


def write_rke1_gates(text, current, merged):
    if merged == current:
        return text
    if not merged:
        return remove_key(text, RKE1_PATH)
    return set_scalar(text, RKE1_PATH, format_gate_string(merged))


def rke2_files(config_path):
    """config.yaml then config.yaml.d/*.yaml (and .yml) in the order RKE2 reads them."""
    files = [config_path]
    dropins = config_path + ".d"
    if os.path.isdir(dropins):
        files += [
            os.path.join(dropins, name)
            for name in sorted(os.listdir(dropins))
            if name.endswith((".yaml", ".yml"))
        ]
    return files


def rke2_items(texts):
    """Effective kubelet-arg items across RKE2 files: list of (file, key, index, value).

    A later ``kubelet-arg`` replaces the list, ``kubelet-arg+`` appends to it.
    ``texts`` maps path -> text, in reading order.
    """
    items = []
    for path, text in texts.items():
        data = get(text, [], None) if text.strip() else None
        if data is None:
            continue
        if not isinstance(data, dict):
            raise GateError(f"{path}: the document is not a mapping")
        for key in ("kubelet-arg", "kubelet-arg+"):
            if key not in data:
                continue
            value = data[key]
            values = value if isinstance(value, list) else [value]
            if key == "kubelet-arg":
                items = []
            items += [(path, key, index, str(v)) for index, v in enumerate(values) if v is not None]
    return items


def read_rke2_gates(items):
    gates = {}
    for _, _, _, value in items:
        if value.startswith(FEATURE_GATES_ARG):
            gates.update(parse_gate_string(value[len(FEATURE_GATES_ARG) :]))
    return gates


def write_rke2_gates(texts, items, current, merged):
    """New texts (path -> text) so that the effective kubelet-arg carries ``merged``."""
    texts = dict(texts)
    if merged == current:
        return texts
    hits = [item for item in items if item[3].startswith(FEATURE_GATES_ARG)]
    value = FEATURE_GATES_ARG + format_gate_string(merged)
    keep = hits[-1] if hits and merged else None
    # remove surplus items from the highest index down, so indices stay valid
    for path, key, index, _ in sorted(hits, key=lambda h: (h[0], h[2]), reverse=True):
        if keep is not None and (path, key, index) == keep[:3]:
            texts[path] = _rke2_set(texts[path], key, index, value)
        else:
            texts[path] = _rke2_remove(texts[path], key, index)
    if not hits and merged:
        owner = next(
            (p for p in reversed(list(texts)) if "kubelet-arg" in (get(texts[p], [], None) or {})), None
        )
        owner = owner or next(iter(texts))
        texts[owner] = append_to_list(texts[owner], ["kubelet-arg"], value)
    return texts


def _rke2_set(text, key, index, value):
    if isinstance(get(text, [key]), list):
        return set_scalar(text, [key, index], value)
    return set_scalar(text, [key], value)


def _rke2_remove(text, key, index):
    if isinstance(get(text, [key]), list):
        return remove_key(text, [key, index])
    return remove_key(text, [key])


__all__ = [
    "FlagsError",
    "GateError",
    "YamlEditError",
    "detect_format",
    "parse_bool",
    "read_config_gates",
    "read_flags_gates",
    "read_rke1_gates",
    "read_rke2_gates",
    "rke2_files",
    "rke2_items",
    "set_gate_string",
    "write_config_gates",
    "write_rke1_gates",
    "write_rke2_gates",
]
