# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read and edit the kubelet's ``--feature-gates`` flag where systemd gets it from (and, with
``flag=TAINTS_FLAG``, ``--register-with-taints``, whose last value replaces the earlier ones;
``flag=LABELS_FLAG``, ``--node-labels``, given the labels of all of them: the flags are merged
into the first, as with the gates).

Two file formats (parsed by host/systemd.py, with systemd's own rules):

- ``env``: an environment file (``/etc/default/kubelet``,
  ``/etc/sysconfig/kubelet``, ``/var/lib/kubelet/kubeadm-flags.env``,
  kubespray's ``/etc/kubernetes/kubelet.env``);
- ``systemd``: a unit or drop-in (``10-kubeadm.conf``): flags in
  ``Environment="KUBELET_EXTRA_ARGS=..."`` assignments or in ``ExecStart=``.

Within a value, flags are words separated by whitespace; a word may carry
quotes (``--feature-gates="A=true,B=false"``). Edits replace the text of one
word and keep every other byte.

``set_gate_string`` edits one file on its own (all its ``--feature-gates``
merged into the first, as the kubelet merges repeated flags). ``plan_edit``
edits the files of a whole unit: it follows ``ExecStart=`` to the assignment
that really reaches the kubelet (a variable set both by ``Environment=`` and
by an ``EnvironmentFile=`` takes the file's value; a variable ExecStart never
expands reaches nothing), writes there, and checks the result by resolving
the unit again.

Standard library only: this runs on target hosts (Python 3.8+).
"""

import re
from collections import namedtuple

from ansible.module_utils.gpunode.host.systemd import (
    ENVIRONMENT,
    ENVIRONMENT_FILE,
    Arg,
    UnitError,
    environment_assignments,
    line_no,
    resolve,
    scan_env_file,
    scan_unit,
    split_words,
)
from ansible.module_utils.gpunode.kubelet.gates import GateError, format_gate_string, parse_gate_string

FlagsError = UnitError

# a place holding flags: ``start``/``end`` bound the raw flag text in the file
Container = namedtuple("Container", "label name start end")

_SECTION_RE = re.compile(r"[ \t]*\[([^\]]+)\][ \t]*$")
GATES_FLAG = "--feature-gates"
TAINTS_FLAG = "--register-with-taints"
LABELS_FLAG = "--node-labels"
DEFAULT_VARIABLE = "KUBELET_EXTRA_ARGS"


def detect_format(text):
    """``systemd`` when the file has a [Section] header, else ``env``."""
    for line in text.splitlines():
        if _SECTION_RE.match(line):
            return "systemd"
    return "env"


def _unit_containers(text):
    settings, places = scan_unit(text)
    containers, exec_start, env_files = [], None, []
    for key, start, end, line in settings:
        if key == ENVIRONMENT:
            for assignment in environment_assignments(text, None, start, end, line):
                containers.append(
                    Container(
                        f"Environment {assignment.name}", assignment.name, assignment.start, assignment.end
                    )
                )
        elif key == "ExecStart":
            exec_start = Container("ExecStart", None, start, end) if text[start:end].strip() else None
        elif key == ENVIRONMENT_FILE:
            env_files.append(text[start:end].strip())
    if exec_start is not None:
        containers.append(exec_start)
    return containers, dict(places, exec_start=exec_start, env_files=env_files)


def flag_containers(text, fmt):
    """Places in the file that hold kubelet flags, and the parsed unit info (systemd)."""
    if fmt == "env":
        return [Container(entry[0], entry[0], entry[1], entry[2]) for entry in scan_env_file(text)], {}
    return _unit_containers(text)


def gate_words(text, start, end, flag=GATES_FLAG):
    """(flag word, value word or None, gate string) for each ``flag`` in text[start:end]."""
    words = split_words(text, start, end)
    found = []
    for index, word in enumerate(words):
        if word.value.startswith(flag + "="):
            found.append((word, None, word.value[len(flag) + 1 :]))
        elif word.value == flag and index + 1 < len(words):
            nxt = words[index + 1]
            found.append((word, nxt, nxt.value))
    return found


def read_gate_values(text, fmt, flag=GATES_FLAG):
    """Every ``flag`` value in the file, in order: list of (label, raw value)."""
    containers = flag_containers(text, fmt)[0]
    return [(c.label, hit[2]) for c in containers for hit in gate_words(text, c.start, c.end, flag)]


def read_flags_gates(text, fmt):
    """The gates that the flags in ``text`` set, merged in order (later wins)."""
    gates = {}
    for label_and_value in read_gate_values(text, fmt):
        gates.update(parse_gate_string(label_and_value[1]))
    return gates


def gates_in_args(args):
    """The gates a command line sets (the kubelet merges repeated flags, later winning)."""
    gates = {}
    values = [a.value if hasattr(a, "value") else a for a in args]
    for index, value in enumerate(values):
        if value.startswith(GATES_FLAG + "="):
            gates.update(parse_gate_string(value[len(GATES_FLAG) + 1 :]))
        elif value == GATES_FLAG and index + 1 < len(values):
            gates.update(parse_gate_string(values[index + 1]))
    return gates


def flag_values(args, name):
    """Every value of ``--name=value`` / ``--name value`` in a command line, in order."""
    flag = "--" + name
    values = [a.value if hasattr(a, "value") else a for a in args]
    found = []
    for index, value in enumerate(values):
        if value.startswith(flag + "="):
            found.append(value[len(flag) + 1 :])
        elif value == flag and index + 1 < len(values):
            found.append(values[index + 1])
    return found


def flag_value(args, name):
    """The last value of ``--name=value`` / ``--name value`` in a command line, or None."""
    found = flag_values(args, name)
    return found[-1] if found else None


def _quoted_like(raw_value, new_value):
    if raw_value.startswith('"'):
        return f'"{new_value}"'
    if raw_value.startswith("'"):
        return f"'{new_value}'"
    return new_value


def _span_edits(text, start, end, gate_string, first=True, *, flag=GATES_FLAG):
    """Edits making text[start:end] carry ``<flag>=<gate_string>`` once (or none)."""
    edits = []
    found = gate_words(text, start, end, flag)
    for index, (flag_word, value_word) in enumerate(hit[:2] for hit in found):
        if index == 0 and first and gate_string:
            if value_word is None:
                raw_value = text[flag_word.start : flag_word.end][len(flag) + 1 :]
                value = _quoted_like(raw_value, gate_string)
                edits.append((flag_word.start, flag_word.end, f"{flag}={value}"))
            else:
                raw_value = text[value_word.start : value_word.end]
                edits.append((value_word.start, value_word.end, _quoted_like(raw_value, gate_string)))
            continue
        cut_end = value_word.end if value_word is not None else flag_word.end
        cut_start = flag_word.start
        while cut_start > start and text[cut_start - 1] in " \t":
            cut_start -= 1
        if cut_start == start:
            while cut_end < end and text[cut_end] in " \t":
                cut_end += 1
        edits.append((cut_start, cut_end, ""))
    if not found and gate_string and first:
        body = text[start:end]
        edits.append((end, end, (" " if body.strip() else "") + f"{flag}={gate_string}"))
    return edits


def keep_line_endings(before, after):
    """``after`` with the line endings of ``before``: a CRLF file (first line ends CRLF) stays CRLF."""
    first = before.find("\n")
    if first > 0 and before[first - 1] == "\r":
        return re.sub(r"(?<!\r)\n", "\r\n", after)
    return after


def _apply(text, edits):
    new = text
    for start, end, replacement in sorted(edits, reverse=True):
        new = new[:start] + replacement + new[end:]
    return keep_line_endings(text, new)


def _append_env_line(text, name, value):
    line = f"{name}={value}"
    if not text:
        return line + "\n"
    if text.endswith("\n"):
        return keep_line_endings(text, text + line + "\n")
    return keep_line_endings(text, text + "\n" + line)


def _new_environment_edit(text, places, name, value):
    line = f'Environment="{name}={value}"'
    anchor = places.get("last_env")
    if anchor is None and places.get("first_exec") is not None:
        start = places["first_exec"]
        return (start, start, line + "\n")
    if anchor is None:
        anchor = places.get("service")
    if anchor is None:
        raise FlagsError("no [Service] section")
    return (anchor, anchor, "\n" + line)


def set_gate_string(text, fmt, gate_string, variable=None, flag=GATES_FLAG):
    """Make one file's kubelet flags carry exactly ``<flag>=<gate_string>`` (``--feature-gates``).

    Returns (new_text, where). ``gate_string`` empty removes the flag.
    ``variable`` names the variable to add the flag to when none holds it
    (default: KUBELET_EXTRA_ARGS, or the only variable that holds flags).
    Whether the result reaches the kubelet is for the caller to decide, by
    resolving the unit with the new text (check_reaches_kubelet).
    """
    containers, info = flag_containers(text, fmt)
    edits = []
    where = None
    first = True
    for container in containers:
        found = gate_words(text, container.start, container.end, flag)
        if found:
            edits += _span_edits(text, container.start, container.end, gate_string, first, flag=flag)
            if first and gate_string:
                where = container.label
            where = where or container.label
            first = False
    if first and gate_string:
        word = f"{flag}={gate_string}"
        target = _pick_container(text, fmt, containers, info, variable)
        if target is not None:
            where = target.label
            edits += _span_edits(text, target.start, target.end, gate_string, flag=flag)
        elif fmt == "env":
            name = variable or DEFAULT_VARIABLE
            return _append_env_line(text, name, word), name
        else:
            name = variable or DEFAULT_VARIABLE
            where = f"Environment {name}"
            edits.append(_new_environment_edit(text, info, name, word))
    return _apply(text, edits), where


def _pick_container(text, fmt, containers, info, variable):
    by_name = {c.name: c for c in containers if c.name}
    if variable:
        return by_name.get(variable)
    if DEFAULT_VARIABLE in by_name:
        return by_name[DEFAULT_VARIABLE]
    if fmt == "env":
        return _env_flags_holder(text, containers)
    exec_start = info.get("exec_start")
    if exec_start is None:
        raise FlagsError("no [Service] ExecStart= line: cannot tell how the kubelet gets its flags")
    if not re.search(r"\$\{?" + DEFAULT_VARIABLE + r"\b", text[exec_start.start : exec_start.end]):
        return exec_start  # the variable would not reach the kubelet: add the flag to ExecStart
    return None


# The flags that mark the variable with the kubelet's own command line: kubespray's
# KUBELET_ARGS (roles/kubernetes/node/templates/kubelet.env.v1beta1.j2), kubeadm's
# KUBELET_KUBECONFIG_ARGS/KUBELET_CONFIG_ARGS.
_KUBELET_OWN_FLAGS = ("--config", "--kubeconfig")


def _holds_own_flags(text, container):
    for word in split_words(text, container.start, container.end):
        if word.value.split("=", 1)[0] in _KUBELET_OWN_FLAGS:
            return True
    return False


def _env_flags_holder(text, containers):
    """The variable of an environment file that takes a new flag, with no unit to tell.

    Never a variable the file does not have (a unit that expands other ones,
    such as kubespray's, would never see it): the one variable with the
    kubelet's own flags (``--config``/``--kubeconfig``), else the one variable
    holding flags at all. None for a file without variables (an empty
    /etc/default/kubelet: KUBELET_EXTRA_ARGS, kubeadm's). Otherwise refused,
    naming the file's variables.
    """
    own = [c for c in containers if _holds_own_flags(text, c)]
    if len(own) == 1:
        return own[0]
    if not own:
        with_flags = [c for c in containers if text[c.start : c.end].lstrip().startswith("-")]
        if len(with_flags) == 1:
            return with_flags[0]
    names = sorted({c.name for c in containers if c.name})
    if not names:
        return None
    which = "several variables hold the kubelet's --config/--kubeconfig" if own else (
        "no variable holds the kubelet's --config/--kubeconfig, and not exactly one holds flags"
    )
    raise FlagsError(
        f"{which} (this file sets {', '.join(names)}; none is {DEFAULT_VARIABLE}): set flags_variable "
        "(role kubelet_gpu: kubelet_gpu_flags_variable) to the variable the kubelet's unit expands "
        "(its ExecStart=)"
    )


# ---------------------------------------------------------------- a whole unit


class FlagsPlan:
    """Where the gates go in a unit's files, and the files' new texts."""

    def __init__(self, where, texts, warnings):
        self.where = where  # e.g. "/etc/default/kubelet KUBELET_EXTRA_ARGS"
        self.texts = texts  # path -> new text (only files that change)
        self.warnings = warnings


def _label(assignment, command):
    if assignment is None:
        return f"{command.exec_start[0]} ExecStart"
    if assignment.kind == ENVIRONMENT:
        return f"{assignment.path} Environment {assignment.name}"
    return f"{assignment.path} {assignment.name}"


def _flag_holders(command):
    """Variables that ExecStart expands and whose value holds flags, in ExecStart order."""
    holders = []
    for name in command.referenced:
        winner = command.winner(name)
        if winner is not None and command.value(winner).lstrip().startswith("-") and name not in holders:
            holders.append(name)
    return holders


def _writable_env_file(command):
    """The last EnvironmentFile= of the unit (created when missing), or None."""
    if not command.environment_files:
        return None
    return command.environment_files[-1][0]


def _gate_sources(command, flag=GATES_FLAG):
    """Where the ``flag`` flags that reach the kubelet come from, in order, each once."""
    sources = []
    for arg in command.args:
        if arg.value.split("=", 1)[0] == flag and arg.source not in sources:
            sources.append(arg.source)
    return sources


def _target_variable(command, variable, flag=GATES_FLAG):
    """The variable the new flag goes to (None: the ExecStart line); refused where it does not reach."""
    name = variable
    if name is None:
        if DEFAULT_VARIABLE in command.referenced:
            name = DEFAULT_VARIABLE
        else:
            holders = _flag_holders(command)
            name = holders[-1] if holders else None
    if name is not None and name not in command.referenced:
        raise FlagsError(
            f"ExecStart= ({command.exec_start[0]} line {command.exec_start[3]}) never expands ${name}: "
            f"a {flag} flag in {name} would not reach the kubelet"
        )
    return name


def _place_new_flag(command, texts, edits, name, gate_string, *, flag=GATES_FLAG):
    """Edits (in ``edits``, or whole texts in ``texts``) adding the flag; where it went."""
    where = command.winner(name) if name else None
    if where is not None or name is None:
        path, start, end = _span_of(command, where)
        edits.setdefault(path, []).extend(_span_edits(texts[path], start, end, gate_string, flag=flag))
        return where
    word = f"{flag}={gate_string}"
    env_file = _writable_env_file(command)
    if env_file is not None:
        texts[env_file] = _append_env_line(texts.get(env_file) or "", name, word)
        return f"{env_file} {name}"
    path = command.exec_start[0]
    edits.setdefault(path, []).append(_new_environment_edit(texts[path], command.places[path], name, word))
    return f"{path} Environment {name}"


def plan_edit(command, unit_files, read_file, gate_string, variable=None, *, flag=GATES_FLAG):
    """FlagsPlan putting ``<flag>=<gate_string>`` (``--feature-gates``) where it reaches the kubelet.

    ``command`` is the resolved unit (host/systemd.py resolve() of ``unit_files``
    with ``read_file``). Existing ``--feature-gates`` flags that reach the
    kubelet are merged into the first; otherwise the flag goes to
    ``variable`` (default KUBELET_EXTRA_ARGS when ExecStart expands it, else
    the last variable ExecStart expands that holds flags, else the
    ExecStart line itself), at the assignment of it that wins. Raises
    FlagsError when the result would not reach the kubelet.
    """
    if command.exec_start is None:
        raise FlagsError("the unit has no ExecStart=: cannot tell how the kubelet gets its flags")
    texts = {path: command.texts[path] for path in command.texts}
    edits = {}
    warnings = []
    sources = _gate_sources(command, flag)
    if sources:
        where = sources[0]
        for index, source in enumerate(sources):
            path, start, end = _span_of(command, source)
            span = _span_edits(texts[path], start, end, gate_string, index == 0, flag=flag)
            edits.setdefault(path, []).extend(span)
    elif not gate_string:
        return FlagsPlan(None, {}, warnings)
    else:
        name = _target_variable(command, variable, flag)
        where = _place_new_flag(command, texts, edits, name, gate_string, flag=flag)
    for path, path_edits in edits.items():
        texts[path] = _apply(texts[path], path_edits)
    label = where if isinstance(where, str) else _label(where, command)
    changed = {path: text for path, text in texts.items() if text != command.texts.get(path)}
    _check_reaches(unit_files, read_file, changed, gate_string, flag)
    return FlagsPlan(label, changed, warnings)


def _span_of(command, source):
    if source is None:
        path, start, end, _line = command.exec_start
        return path, start, end
    return source.path, source.start, source.end


def _check_reaches(unit_files, read_file, changed, gate_string, flag=GATES_FLAG):
    """Resolve the unit again with the new texts: the kubelet must get exactly these gates."""
    new_units = [(path, changed.get(path, text)) for path, text in unit_files]

    def read_new(path):
        return changed[path] if path in changed else read_file(path)

    command = resolve(new_units, read_new)
    if flag != GATES_FLAG:
        got = flag_value(command.args, flag[2:])
        if (got or "") != gate_string:
            raise FlagsError(f"after the edit systemd would start the kubelet with {flag}={got or '(none)'}, "
                             f"not {gate_string or '(none)'}: {explain_overrides(command)}")
        return
    wanted = parse_gate_string(gate_string)
    got = gates_in_args(command.args)
    if got != wanted:
        raise FlagsError(
            f"after the edit systemd would start the kubelet with --feature-gates={format_gate_string(got)}, "
            f"not {format_gate_string(wanted)}: {explain_overrides(command)}"
        )


def _assigned_names(command):
    """The variables the kubelet sees: those ExecStart expands (all that are set, without ExecStart)."""
    if command.exec_start is not None:
        return list(dict.fromkeys(command.referenced))
    return list(dict.fromkeys(a.name for a in command.environment + command.file_assignments))


def reaching_args(command):
    """The arguments the kubelet gets from the unit.

    A drop-in given on its own (the kubelet's unit not found) may have no
    ``ExecStart=``: its variables then count as if ExecStart expanded each of
    them, with systemd's precedence deciding each variable's value.
    """
    if command.exec_start is not None:
        return command.args
    args = []
    for name in _assigned_names(command):
        winner = command.winner(name)
        args += [Arg(word.value, winner) for word in split_words(command.value(winner))]
    return args


def explain_overrides(command):
    """Why assignments of the variables ExecStart expands do not reach it (for messages)."""
    reasons = []
    for name in _assigned_names(command):
        winner = command.winner(name)
        for lost in command.overridden(name):
            if winner is None:
                continue
            how = (
                "EnvironmentFile= wins over Environment= whatever their order"
                if winner.kind == ENVIRONMENT_FILE and lost.kind == ENVIRONMENT
                else "the later assignment wins"
            )
            reasons.append(
                f"{lost.path} line {lost.line} sets {name} but {winner.path} line {winner.line} sets it too "
                f"and {how}"
            )
    return "; ".join(reasons) or "the flag is not in a place ExecStart expands"


def _gates_from(command, path):
    """Whether a --feature-gates argument the kubelet gets comes from the file ``path``."""
    for arg in reaching_args(command):
        if arg.value.startswith(GATES_FLAG):
            origin = arg.source.path if arg.source is not None else command.exec_start[0]
            if origin == path:
                return True
    return False


def check_reaches_kubelet(command, path, gates, absent=(), edited=False):
    """Why a flags file edited on its own does not give the kubelet ``gates``, or None.

    ``command`` is the unit resolved with the edited file; ``absent`` are
    gates that must no longer reach the kubelet. With ``edited``, the gates
    must also come from ``path`` itself (an edit there that another file
    overrides is not applied, even when that file happens to carry them).
    """
    got = gates_in_args(reaching_args(command))
    missing = {name: value for name, value in gates.items() if got.get(name) is not value}
    still = [name for name in absent if name in got]
    dead = edited and bool(gates) and not _gates_from(command, path)
    if not missing and not still and not dead:
        return None
    if path not in command.texts:
        return (
            f"{path} is not read by the kubelet's unit (its files: "
            f"{', '.join(command.texts)}), so the gates written there never reach the kubelet"
        )
    text = command.texts[path]
    entries = scan_env_file(text) if text is not None and detect_format(text) == "env" else []
    unused = [
        entry[0]
        for entry in entries
        if entry[0] not in command.referenced and GATES_FLAG in text[entry[1] : entry[2]]
    ]
    detail = explain_overrides(command)
    if unused and command.exec_start is not None:
        detail += (
            f"; ExecStart ({command.exec_start[0]} line {command.exec_start[3]}) never expands "
            f"{', '.join('$' + n for n in unused)}"
        )
    if dead and not missing and not still:
        return f"the --feature-gates flag written in {path} does not reach the kubelet: {detail}"
    return f"systemd would start the kubelet with --feature-gates={format_gate_string(got)}: {detail}"


__all__ = [
    "TAINTS_FLAG",
    "FlagsError",
    "GateError",
    "check_reaches_kubelet",
    "detect_format",
    "flag_containers",
    "flag_value",
    "gates_in_args",
    "line_no",
    "plan_edit",
    "reaching_args",
    "read_flags_gates",
    "read_gate_values",
    "set_gate_string",
    "split_words",
]
