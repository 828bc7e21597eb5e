# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Merge settings into a JSON configuration file such as /etc/docker/daemon.json.

Pure functions, no Ansible import: the module ``docker_daemon_config`` reads the
file, calls :func:`plan`, and writes the text it returns only when the parsed
result differs from what is there.

Rules:

- An absent, empty or whitespace-only file is an empty object.
- Objects are merged key by key, recursively; any other value (string, number,
  boolean, null, list) given in the settings replaces the current one. Keys
  that the settings do not name are kept, with their values and order.
- "Converged" means semantically equal parsed JSON, with types compared
  strictly (``1``, ``1.0`` and ``true`` are different values).
- The text written keeps the file's indentation (tabs or N spaces; 4 spaces
  for a new file) and its line endings (CRLF when its first line ends with
  CRLF, as a file edited on Windows does; LF for a new file), is UTF-8 and ends
  with a newline.

Docker specifics (:func:`docker_settings`): Docker reads a runtime's arguments
from ``runtimeArgs``; ``nvidia-ctk runtime configure`` writes ``args``, which
dockerd ignores. When a runtime in the file already has ``args`` equal to the
wanted ``runtimeArgs`` (typically both empty), the file is left as its author
wrote it; when they differ, ``runtimeArgs`` is added (``args`` is kept, it is
not ours to delete).
"""

import json
import re

DEFAULT_INDENT = 4


class JSONConfigError(Exception):
    """The file cannot be used as it is; the message names the file and the problem."""


def parse(text, path):
    """Parse a JSON object from ``text``; empty text is ``{}``.

    Raises JSONConfigError naming ``path`` and the line and column of a syntax
    error, or saying that the top level is not an object.
    """
    if text.startswith("\ufeff"):
        raise JSONConfigError(f"{path}: line 1 column 1: UTF-8 byte order mark, dockerd rejects it")
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JSONConfigError(f"{path}: line {exc.lineno} column {exc.colno}: {exc.msg}") from exc
    if not isinstance(data, dict):
        raise JSONConfigError(f"{path}: the top level is a {type(data).__name__}, not a JSON object")
    return data


def deep_merge(current, settings):
    """Return a new dict: ``settings`` merged into ``current`` (neither is modified)."""
    merged = dict(current)
    for key, value in settings.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = _copy(value)
    return merged


def _copy(value):
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def equal(left, right):
    """Semantic JSON equality with strict types (``True != 1``, ``1 != 1.0``)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(equal(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(equal(left[i], right[i]) for i in range(len(left)))
    return left == right


def detect_indent(text):
    """The indentation unit of ``text``: a tab, or a number of spaces (default 4)."""
    for line in text.splitlines():
        match = re.match(r"^([ \t]+)\S", line)
        if not match:
            continue
        unit = match.group(1)
        if set(unit) == {"\t"}:
            return "\t"
        if set(unit) == {" "}:
            return len(unit)
    return DEFAULT_INDENT


def detect_newline(text):
    """The line ending of ``text``: CRLF when its first line ends with one, else LF."""
    first = text.find("\n")
    return "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


def render(data, indent=DEFAULT_INDENT, newline="\n"):
    """Pretty-printed JSON text with a trailing newline (JSON escapes a newline inside a string)."""
    return (json.dumps(data, indent=indent, ensure_ascii=False) + "\n").replace("\n", newline)


def docker_settings(current, settings):
    """Adapt ``settings`` for daemon.json: honour an equal ``args`` (nvidia-ctk style).

    Returns a new settings dict; see the module docstring.
    """
    wanted = settings.get("runtimes")
    have = current.get("runtimes")
    if not isinstance(wanted, dict) or not isinstance(have, dict):
        return settings
    runtimes = {}
    for name, runtime in wanted.items():
        existing = have.get(name)
        if (
            isinstance(runtime, dict)
            and isinstance(existing, dict)
            and "runtimeArgs" in runtime
            and "runtimeArgs" not in existing
            and "args" in existing
            and equal(existing["args"], runtime["runtimeArgs"])
        ):
            runtimes[name] = {k: v for k, v in runtime.items() if k != "runtimeArgs"}
        else:
            runtimes[name] = runtime
    return {**settings, "runtimes": runtimes}


def plan(text, settings, path, docker=False):
    """Decide what to do with a file whose content is ``text`` (None: absent).

    Returns ``(changed, new_text, config)``; ``new_text`` is what to write
    (the current text when nothing changes). Raises JSONConfigError.
    """
    if not isinstance(settings, dict):
        raise JSONConfigError(f"{path}: settings must be a JSON object, got {type(settings).__name__}")
    current = parse(text or "", path)
    if docker:
        settings = docker_settings(current, settings)
    config = deep_merge(current, settings)
    if text is not None and text.strip() and equal(current, config):
        return False, text, config
    indent = detect_indent(text) if text else DEFAULT_INDENT
    return True, render(config, indent, detect_newline(text or "")), config
