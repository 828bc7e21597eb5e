# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""systemd as gpunode reads it: ``systemctl show`` and how a service's command line is built.

``systemctl show`` (one call for all units): :func:`parse_show` turns its output
(one blank-line separated block of ``Property=value`` lines per unit, in the
order asked) into dicts; :func:`show` runs it through a
:class:`~ansible.module_utils.gpunode.host.commands.Host`; :func:`by_service`
keys the blocks by service name; :func:`units_state` and :func:`running_state`
say whether a daemon runs and has read its files (a file changed after its main
process started has not been read: a run killed between a write and the
restart leaves it so).

How systemd builds a service's command line from its unit, drop-ins and environment files.

The rules (systemd.exec(5), systemd.service(5), systemd.unit(5)):

- The unit file is read first, then its drop-ins (``<unit>.d/*.conf``) in
  lexical order of their file names; ``systemctl show -p FragmentPath,
  DropInPaths`` lists them in that order.
- ``ExecStart=`` with an empty value resets the list; a service of the
  default type runs the last one set.
- ``Environment=`` assignments accumulate in reading order, a later one
  winning for the same variable; an empty ``Environment=`` resets the list.
  ``EnvironmentFile=`` files are read in the order listed (``-`` before the
  path: ignored when missing; an empty assignment resets the list), and
  "settings from these files override settings made with Environment=";
  within and across the files, a later assignment wins.
- In ``ExecStart=``, a word ``$NAME`` becomes the variable's value split at
  whitespace (quotes in the value are honoured and removed); ``${NAME}``
  becomes exactly the value, one argument, also inside a longer word;
  ``$$`` is a literal ``$``; an unset variable is empty.
- An environment file holds ``NAME=value`` lines; empty lines and lines
  starting with ``#`` or ``;`` are comments; a value may be "double-quoted"
  (backslash escapes, may span lines) or 'single-quoted'; a backslash at the
  end of a line continues an unquoted value.

``resolve()`` applies these rules to the files' texts and says, for every
argument the program will get, where it comes from (a literal of the
``ExecStart=`` line, or which assignment of which file), so that an edit can
go where it reaches the program.

Standard library only; Python 3.8+ (this runs on target hosts).
"""

import os
import re
from collections import namedtuple

from ansible.module_utils.gpunode.host.processes import stale_files
from ansible.module_utils.gpunode.host.processes import start_time as process_start

Word = namedtuple("Word", "start end value")
# an assignment of a variable: ``start``/``end`` bound its raw value in the text of ``path``
Assignment = namedtuple("Assignment", "name path kind start end line")
# one argument the program gets: its text and the Assignment it came from (None: the ExecStart line)
Arg = namedtuple("Arg", "value source")

_ENV_LINE_RE = re.compile(r"[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)=")
_UNIT_LINE_RE = re.compile(r"[ \t]*([A-Za-z][A-Za-z0-9]*)[ \t]*=[ \t]*")
_SECTION_RE = re.compile(r"[ \t]*\[([^\]]+)\][ \t]*$")
_VAR_WORD_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)$")
_BRACED_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\$")
ENVIRONMENT = "Environment"
ENVIRONMENT_FILE = "EnvironmentFile"


class UnitError(ValueError):
    """A file that cannot be read as the format says; ``line`` is 1-based when known."""

    def __init__(self, message, line=None):
        if line is not None:
            message = f"line {line}: {message}"
        super().__init__(message)
        self.line = line


def line_no(text, index):
    return text.count("\n", 0, index) + 1


def _line_break_at(text, index, end):
    """The length of the line break (LF 1, CRLF 2) at ``text[index]`` before ``end``, else 0."""
    if index < end and text[index] == "\n":
        return 1
    return 2 if text[index:index + 2] == "\r\n" and index + 1 < end else 0


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
        if char == "\\" and _line_break_at(text, i + 1, end):
            i += _line_break_at(text, i + 1, end) + 1
            continue
        word_start = i
        buf = []
        while i < end and text[i] not in " \t\r\n":
            char = text[i]
            if char == "\\":
                if _line_break_at(text, i + 1, end):
                    i += _line_break_at(text, i + 1, end) + 1
                elif i + 1 < end:
                    buf.append(text[i + 1])
                    i += 2
                else:
                    buf.append(char)
                    i += 1
            elif char == "'":
                close = text.find("'", i + 1, end)
                if close < 0:
                    raise UnitError("unterminated ' quote", line_no(text, i))
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
                    raise UnitError('unterminated " quote', line_no(text, i))
                i = j + 1
            else:
                buf.append(char)
                i += 1
        words.append(Word(word_start, i, "".join(buf)))
    return words


# ---------------------------------------------------------------- environment files


def scan_env_file(text):
    """Assignments of an environment file: list of (name, value_start, value_end, line, quote)."""
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
            raise UnitError(f"expected NAME=value, found {stripped[:60]!r}", line_no(text, i))
        name = match.group(1)
        start = match.end()
        quote = text[start : start + 1]
        if quote in ("'", '"'):
            j = start + 1
            while j < length and text[j] != quote:
                j += 2 if (quote == '"' and text[j] == "\\") else 1
            if j >= length:
                raise UnitError(f"{name}: unterminated {quote} quote", line_no(text, start))
            value_start, value_end = start + 1, j
            eol = text.find("\n", j)
            eol = length if eol < 0 else eol
            rest = text[j + 1 : eol].strip()
            if rest and not rest.startswith("#"):
                raise UnitError(
                    f"{name}: unexpected text after the closing quote: {rest!r}", line_no(text, j)
                )
        else:
            quote = ""
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
        assignments.append((name, value_start, value_end, line_no(text, i), quote))
        i = eol + 1
    return assignments


def env_file_value(text, start, end, quote):
    """The value systemd reads for an assignment whose raw value is ``text[start:end]``."""
    raw = text[start:end]
    if quote == "'":
        return raw
    out = []
    i = 0
    while i < len(raw):
        char = raw[i]
        if char == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            if nxt != "\n":
                out.append(nxt if quote == '"' or nxt in "\\\"'$ " else char + nxt)
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


# ---------------------------------------------------------------- unit files


def logical_lines(text):
    """(start, end) of each logical line of a unit file (backslash continuations joined, CRLF read as LF)."""
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
        # systemd reads CRLF unit files: the CR is no part of the line (its span excludes it)
        lines.append((i, eol - 1 if eol > i and text[eol - 1] == "\r" else eol))
        i = eol + 1
    return lines


def inner_span(raw, name):
    """Span of the value inside one Environment= word: "NAME=..." / NAME="..." / NAME=... (or ')."""
    for quote in ('"', "'"):
        if raw.startswith(quote + name + "=") and raw.endswith(quote) and len(raw) >= len(name) + 3:
            return len(name) + 2, len(raw) - 1
        if raw.startswith(name + "=" + quote) and raw.endswith(quote) and len(raw) >= len(name) + 3:
            return len(name) + 2, len(raw) - 1
    if raw.startswith(name + "=") and '"' not in raw and "'" not in raw:
        return len(name) + 1, len(raw)
    return None


def scan_unit(text):
    """The [Service] settings of one unit file, in order: list of (key, value_start, value_end, line).

    Also returns where the [Service] header ends and where the last
    Environment= line ends (for adding a line), as a dict.
    """
    settings = []
    places = {"service": None, "last_env": None, "first_exec": None}
    section = None
    for start, end in logical_lines(text):
        line = text[start:end]
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        section_match = _SECTION_RE.match(line)
        if section_match:
            section = section_match.group(1)
            if section == "Service" and places["service"] is None:
                places["service"] = end
            continue
        match = _UNIT_LINE_RE.match(text, start, end)
        if not match:
            raise UnitError(
                f"not a [Section] header, a comment or a Key=value assignment: {stripped[:60]!r}",
                line_no(text, start),
            )
        if section is None:
            raise UnitError(f"{match.group(1)}= appears before any [Section] header", line_no(text, start))
        if section != "Service":
            continue
        key = match.group(1)
        if key == ENVIRONMENT:
            places["last_env"] = end
        if key == "ExecStart" and places["first_exec"] is None:
            places["first_exec"] = start
        settings.append((key, match.end(), end, line_no(text, start)))
    return settings, places


def environment_assignments(text, path, value_start, value_end, line):
    """The Assignments of one Environment= line."""
    found = []
    for word in split_words(text, value_start, value_end):
        name = word.value.partition("=")[0]
        if "=" not in word.value or not name:
            continue
        inner = inner_span(text[word.start : word.end], name)
        if inner is None:
            raise UnitError(f"Environment={name}: quoting this module cannot read", line)
        found.append(Assignment(name, path, ENVIRONMENT, word.start + inner[0], word.start + inner[1], line))
    return found


# ---------------------------------------------------------------- resolution


class ServiceCommand:
    """What systemd runs: the ExecStart line, the environment, and each argument's origin."""

    def __init__(self):
        self.exec_start = None  # (path, value_start, value_end, line)
        self.environment = []  # Assignments from Environment=, in order
        self.environment_files = []  # (path, optional) in order
        self.file_assignments = []  # Assignments from the environment files, in order
        self.places = {}  # path -> dict from scan_unit
        self.texts = {}  # path -> text of every file read (None: missing)
        self.args = []  # Arg list: what the program gets (argv[0] first)
        self.referenced = []  # variable names ExecStart expands, in order

    def winner(self, name):
        """The Assignment whose value the program sees for ``name``, or None when unset."""
        for assignment in reversed(self.file_assignments):
            if assignment.name == name:
                return assignment
        for assignment in reversed(self.environment):
            if assignment.name == name:
                return assignment
        return None

    def value(self, assignment):
        text = self.texts[assignment.path]
        if assignment.kind == ENVIRONMENT:
            if text[assignment.start - 1 : assignment.start] == "'":
                return text[assignment.start : assignment.end]
            return _environment_value(text[assignment.start : assignment.end])
        quote = text[assignment.start - 1 : assignment.start] if assignment.start > 0 else ""
        quote = quote if quote in ("'", '"') and text[assignment.end : assignment.end + 1] == quote else ""
        return env_file_value(text, assignment.start, assignment.end, quote)

    def overridden(self, name):
        """Assignments of ``name`` that the program never sees (another one wins)."""
        winner = self.winner(name)
        return [a for a in self.environment + self.file_assignments if a.name == name and a != winner]


def _environment_value(raw):
    """The value of an Environment= assignment from its raw text (backslash escapes undone)."""
    return re.sub(r"\\(.)", r"\1", raw, flags=re.DOTALL)


def resolve(unit_files, read_file):
    """ServiceCommand of a unit: ``unit_files`` is [(path, text)] (fragment, then drop-ins).

    ``read_file(path)`` returns an environment file's text, or None when it
    does not exist. Raises UnitError (with the path in the message).
    """
    command = ServiceCommand()
    for path, text in unit_files:
        command.texts[path] = text
        try:
            settings, places = scan_unit(text)
        except UnitError as exc:
            raise UnitError(f"{path}: {exc}") from None
        command.places[path] = places
        for key, value_start, value_end, line in settings:
            value = text[value_start:value_end].strip()
            if key == "ExecStart":
                command.exec_start = (path, value_start, value_end, line) if value else None
            elif key == ENVIRONMENT:
                if not value:
                    command.environment = []
                    continue
                try:
                    command.environment += environment_assignments(text, path, value_start, value_end, line)
                except UnitError as exc:
                    raise UnitError(f"{path}: {exc}") from None
            elif key == ENVIRONMENT_FILE:
                if not value:
                    command.environment_files = []
                    continue
                optional = value.startswith("-")
                command.environment_files.append((value.lstrip("-").strip(), optional))
    for env_path, _optional in command.environment_files:
        text = read_file(env_path)
        command.texts[env_path] = text
        if text is None:
            continue
        try:
            scanned = scan_env_file(text)
        except UnitError as exc:
            raise UnitError(f"{env_path}: {exc}") from None
        command.file_assignments += [
            Assignment(entry[0], env_path, ENVIRONMENT_FILE, entry[1], entry[2], entry[3])
            for entry in scanned
        ]
    if command.exec_start is not None:
        command.args, command.referenced = _expand(command)
    return command


def _expand(command):
    path, value_start, value_end, _line = command.exec_start
    text = command.texts[path]
    args, referenced = [], []
    words = split_words(text, value_start, value_end)
    for index, word in enumerate(words):
        raw = text[word.start : word.end]
        value = word.value
        if index == 0:
            value = value.lstrip("@-:+!")
        whole = _VAR_WORD_RE.match(raw)
        if whole:
            name = whole.group(1)
            referenced.append(name)
            winner = command.winner(name)
            if winner is not None:
                args += [Arg(w.value, winner) for w in split_words(command.value(winner))]
            continue
        if "$" in raw:
            value, names = _expand_braced(raw, value, command)
            referenced += names
            source = command.winner(names[0]) if len(names) == 1 and raw == "${" + names[0] + "}" else None
            args.append(Arg(value, source))
            continue
        args.append(Arg(value, None))
    return args, referenced


def _expand_braced(raw, value, command):
    names = []

    def substitute(match):
        if match.group(0) == "$$":
            return "$"
        names.append(match.group(1))
        winner = command.winner(match.group(1))
        return command.value(winner) if winner is not None else ""

    expanded = _BRACED_RE.sub(substitute, value)
    return expanded, names


# ---------------------------------------------------------------- systemctl show

# what the kubelet concern asks for its units
SHOW_PROPERTIES = (
    "Id",
    "LoadState",
    "ActiveState",
    "UnitFileState",
    "MainPID",
    "FragmentPath",
    "DropInPaths",
    "NeedDaemonReload",
)


def parse_show(text):
    """``systemctl show`` output (blank-line separated units) -> list of dicts, in order."""
    units, current = [], {}
    for line in (text or "").splitlines():
        if not line.strip():
            if current:
                units.append(current)
                current = {}
            continue
        key, _sep, value = line.partition("=")
        current[key] = value
    if current:
        units.append(current)
    return units


def show(host, units, properties):
    """The blocks of ``systemctl show -p PROPERTIES -- UNITS``; None without systemctl or when it fails."""
    systemctl = host.which("systemctl")
    if not systemctl or not units:
        return None
    rc, out, _err = host.run([systemctl, "show", "--no-pager", "-p", ",".join(properties), "--", *units])
    return parse_show(out) if rc == 0 else None


def by_service(blocks):
    """``{service: {"load", "active", "enabled"}}`` keyed by ``Id`` without ``.service``."""
    units = {}
    for raw in blocks:
        block = {key.strip(): value.strip() for key, value in raw.items()}
        if block.get("Id"):
            units[block["Id"].rsplit(".service", 1)[0]] = {
                "load": block.get("LoadState"),
                "active": block.get("ActiveState"),
                "enabled": block.get("UnitFileState"),
            }
    return units


#: The properties :func:`services_state` asks for.
SERVICE_PROPERTIES = ("Id", "LoadState", "ActiveState", "UnitFileState")


#: systemd creates this folder when it boots as the service manager (sd_booted(3)).
BOOTED_MARKER = "/run/systemd/system"


def booted(is_dir=os.path.isdir):
    """Whether systemd runs this host as its service manager (sd_booted(3): ``/run/systemd/system``
    exists). An image host or a container may have ``systemctl`` and no systemd running: nothing
    can be started, stopped or restarted through it there."""
    return bool(is_dir(BOOTED_MARKER))


def available(host):
    """Whether the node has systemd (its ``systemctl``); image hosts and containers may not."""
    return bool(host.which("systemctl"))


def services_state(host, units):
    """``{service: {"load", "active", "enabled"}}`` of ``units`` (:func:`by_service`); {} without
    systemctl."""
    return by_service(show(host, units, SERVICE_PROPERTIES) or [])


def is_active(host, unit):
    """Whether ``unit`` runs (``systemctl is-active --quiet``); False without systemctl."""
    systemctl = host.which("systemctl")
    return bool(systemctl) and host.run([systemctl, "is-active", "--quiet", unit])[0] == 0


def control(host, verb, unit):
    """``systemctl VERB UNIT`` (``start``, ``stop``): "" when done, else why not."""
    systemctl = host.which("systemctl")
    if not systemctl:
        return "no systemctl on this host"
    rc, out, err = host.run([systemctl, verb, unit])
    return "" if rc == 0 else (err or out).strip() or f"rc {rc}"


def unit_files(block):
    """The unit's files in the order systemd applies them: fragment, then drop-ins."""
    files = [block["FragmentPath"]] if block.get("FragmentPath") else []
    return files + [path for path in (block.get("DropInPaths") or "").split() if path]


def loaded(block):
    return bool(block) and block.get("LoadState") == "loaded"


def units_state(host, units):
    """``{unit: {"active": bool, "pid": int|None, "loaded": bool, "failed": bool}}`` for systemd
    ``units`` (``failed``: ActiveState ``failed``, e.g. after StartLimitBurst, until reset-failed).

    Units systemd does not know are ``loaded: False``. Without systemctl,
    every unit is reported inactive and unloaded.
    """
    states = {unit: {"active": False, "pid": None, "loaded": False, "failed": False} for unit in units}
    blocks = show(host, units, ("Id", "LoadState", "ActiveState", "MainPID")) or []
    for unit, block in zip(units, blocks):  # one block per unit, in the order asked
        pid = int(block.get("MainPID", "0") or 0)
        states[unit] = {
            "active": block.get("ActiveState") == "active",
            "pid": pid or None,
            "loaded": loaded(block),
            "failed": block.get("ActiveState") == "failed",
        }
    return states


def running_state(host, service, paths):
    """``(unit state or None, stale files)`` for the daemon of ``service`` and its ``paths``.

    None when ``service`` is empty or systemd does not know it; the stale files
    are those changed after the running main process started.
    """
    if not service:
        return None, []
    state = units_state(host, [service])[service]
    if not state["loaded"]:
        return None, []
    started = process_start(state["pid"]) if state["active"] and state["pid"] else None
    return state, stale_files(started, paths)


def restart_required(host, service, paths, changed):
    """``(restart required, stale files)``: the one rule for a daemon whose ``paths`` a module edits.

    Without a unit systemd knows, a restart is required when the files ``changed``; with one,
    when it is running and the files changed now or after its main process started.
    """
    unit, stale = running_state(host, service, paths)
    if unit is None:
        return changed, stale
    return unit["active"] and (changed or bool(stale)), stale
