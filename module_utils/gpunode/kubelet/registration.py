# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The registration taint and labels, written where the kubelet's gates go (kubelet/targets.py).

The kubelet reads both only when it creates its Node: a change of them alone restarts no kubelet
(kubelet/plan.py). The labels (kubelet/labels.py) have no KubeletConfiguration field: they go to
``--node-labels`` where the flags go (the flags' place also where the gates go to a config file),
merged with the operator's, or RKE2's ``node-label`` items; never to RKE1's cluster.yml.

Whether it is wanted is kubelet/taints.py's ``wanted``: put in while the node has not passed its
validation, left as it is once it has (read only at registration), taken out with the gate off.
Where, per target, keeping the taints the operator set elsewhere:

- ``config``: ``registerWithTaints`` of the ``--config`` file (taints.edit).
- ``config_dir``: gpunode's drop-in. A list in a drop-in replaces the one before it ("the entire
  list will be overridden", https://kubernetes.io/docs/reference/node/kubelet-config-directory-merging/),
  so the drop-in holds the list the kubelet gets from the files before it, plus the taint; with
  the taint out, the drop-in's list goes (the files before it apply again). A later drop-in that
  sets the list wins: reported, not written.
- ``flags``: ``--register-with-taints=key=value:Effect,...`` (comma-separated, as the kubelet
  parses it: kubernetes pkg/util/flag/flags.go, RegisterWithTaintsVar; its reference:
  https://kubernetes.io/docs/reference/command-line-tools-reference/kubelet/). The last such flag
  replaces the config file's list, so a new flag starts from that list; an existing one is merged
  into, at the assignment that reaches ExecStart (kubelet/flags.py).
- ``rke2``: ``node-taint`` items of config.yaml and config.yaml.d/ (RKE2 hands them to the kubelet
  as its registration taints: https://docs.rke2.io/reference/linux_agent_config, "node-taint").
- ``rke1``: not written. ``services.kubelet.extra_args`` of cluster.yml reaches every node's
  kubelet, so a taint there would keep CPU and control-plane nodes unschedulable too; reported.

Python 3.8+, standard library (and PyYAML for YAML files): runs on targets.
"""

from ansible.module_utils.gpunode.kubelet.discovery import PlanError, read_file
from ansible.module_utils.gpunode.kubelet.flags import (
    LABELS_FLAG,
    TAINTS_FLAG,
    FlagsError,
    explain_overrides,
    flag_value,
    flag_values,
    plan_edit,
    reaching_args,
    read_gate_values,
    set_gate_string,
)
from ansible.module_utils.gpunode.kubelet.labels import LabelError, merged, new_value
from ansible.module_utils.gpunode.kubelet.rke_args import edit_rke2_items, rke2_items
from ansible.module_utils.gpunode.kubelet.taints import (
    TaintError,
    edit,
    listed,
    merge_list,
    parse,
    parse_list,
    render,
    render_list,
    same,
    wanted,
)

TAINTS_NAME = TAINTS_FLAG[2:]
LABELS_NAME = LABELS_FLAG[2:]


def registration_taint(result, params, target, kind, taint):
    """Put ``taint`` in (or out of) the place the kubelet registers from; what was decided.

    Edits ``result.changes`` (path -> (old, new)) and the target's new texts; returns the
    module's ``registration_taint`` (None without a taint).
    """
    if taint is None:
        return None
    present, why = wanted(params["registration_taint_state"], params["validation_record"])
    decided = {"taint": render(taint), "present": present, "why": why, "where": None}
    writer = WRITERS.get(kind)
    if writer is None:
        if present:
            result.warnings.append(
                f"registration taint {decided['taint']} not set: {target.label} is cluster.yml's "
                "services.kubelet.extra_args, which every node's kubelet gets; the add-ons play taints "
                "the GPU nodes that have not passed once they joined"
            )
        decided["present"] = False
        return decided
    try:
        registers, where, changes = writer(target, taint, present, result.changes)
    except TaintError as exc:
        raise PlanError(f"{target.label}: {exc}; left unchanged") from None
    _record(result, changes)
    if registers is None:  # a later setting replaces the list gpunode would write
        result.warnings.append(f"registration taint {decided['taint']} not set: {where}")
        return dict(decided, present=False)
    _warn_flag_override(result, target, kind, decided["taint"])
    return dict(decided, present=registers, where=where)


def registration_labels(result, params, target, kind, flags_target):
    """Put the labels ``registration_labels`` where the kubelet registers its Node from: the flags
    (``flags_target()``, the flags' place, where the gates go to a config file), RKE2's node-label;
    none on RKE1 (every node's kubelet). Edits ``result.changes``; returns the module's
    ``registration_labels`` (None without labels)."""
    labels = params.get("registration_labels") or {}
    if not labels:
        return None
    decided = {"labels": dict(labels), "present": False, "where": None}
    try:
        if kind == "rke1":
            raise PlanError(f"{target.label} is cluster.yml's services.kubelet.extra_args, which every "
                            "node's kubelet gets; the add-ons play labels the GPU nodes")
        place = flags_target() if kind in ("config", "config_dir") else target
        where, changes = (_rke2_labels if kind == "rke2" else _label_flags)(place, labels, result.changes)
    except LabelError as exc:  # the operator's --node-labels, which the kubelet would refuse too
        raise PlanError(f"{target.label}: {exc}; left unchanged") from None
    except PlanError as exc:  # where the gates go to a file, flags that cannot be placed do not fail
        if kind not in ("rke1", "config", "config_dir"):
            raise
        result.warnings.append(f"registration labels {shown_labels(labels)} not set: {exc}")
        return decided
    _record(result, changes)
    return dict(decided, present=True, where=where)


def shown_labels(labels):
    """``key=value,...``, as --node-labels writes labels."""
    return ",".join(f"{key}={value}" for key, value in labels.items())


def _record(result, changes):
    """Put a writer's ``changes`` (path -> (old, new)) into ``result.changes``; unchanged ones out."""
    for path, (old, new) in changes.items():
        if (new or "") != (old or "") or (new is None and old is not None):
            result.changes[path] = (old, new)
        else:
            result.changes.pop(path, None)


def _warn_flag_override(result, target, kind, rendered):
    if kind in ("config", "config_dir") and flag_value(target.next_args(), TAINTS_NAME) is not None:
        result.warnings.append(
            f"registration taint {rendered}: the kubelet also gets {TAINTS_FLAG} "
            f"(from {target.flags_origin(TAINTS_FLAG)}), which replaces the list of its config files"
        )


def _pending(changes, path, original):
    return changes[path][1] if path in changes else original


def _taint_list(value, where):
    """A registerWithTaints value as a list of taints; TaintError when it is not one."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(i, dict) and "key" in i for i in value):
        raise TaintError(f"{where}: registerWithTaints is not a list of taints")
    return list(value)


def _config_list(documents):
    """(path, list) of the last document that sets registerWithTaints, or (None, [])."""
    found = (None, [])
    for path, data in documents:
        if "registerWithTaints" in data:
            found = (path, _taint_list(data["registerWithTaints"], path))
    return found


# ---------------------------------------------------------------- per target


def _config(target, taint, present, changes):
    old = target.text
    current = target.new_text if target.new_text is not None else old or ""
    where = f"{target.path} registerWithTaints"
    if present is None:
        return listed(current, taint), where, {}
    target.new_text = edit(current, taint, present)
    return present, where, {target.path: (old, target.new_text)}


def _config_dir(target, taint, present, changes):
    where = f"{target.path} registerWithTaints"
    documents = target.config_documents({target.path: "{}"})  # the drop-in's place, without its keys
    index = [path for path, _data in documents].index(target.path)
    base = _config_list(documents[:index])[1]
    later, later_list = _config_list(documents[index + 1 :])
    own = None if target.taints is None else _taint_list(target.taints, target.path)
    if later is not None and present is not False:  # the later list wins; gpunode's is not written
        if present is None:
            return any(same(item, taint) for item in later_list), where, {}
        return None, f"{later} sets registerWithTaints, which replaces the list of {target.path}", {}
    if present is None:
        return any(same(item, taint) for item in (base if own is None else own)), where, {}
    if present:
        wanted_list = merge_list(base if own is None else own, taint, True)
        if own is None and wanted_list == base:
            return True, _config_list(documents[:index])[0] + " registerWithTaints", {}
        if wanted_list != own:
            target.set_taints(wanted_list)
    elif own is not None:
        target.set_taints(None)
    return present, where, {target.path: (target.text, target.new_text)}


def _flags(target, taint, present, changes):
    """--register-with-taints: in the flags file named, or where it reaches ExecStart."""
    base = _config_list(target.config_documents())[1]
    if target.path:
        return _flags_file(target, (taint, present, base), changes)
    raw = flag_value(reaching_args(target.new_command or target.command), TAINTS_NAME)
    value = _new_value(raw, base, taint, present)
    if value is None:
        return _registers(raw, base, taint), f"{target.label} {TAINTS_FLAG}", {}
    where, edits = _unit_edit(target, TAINTS_FLAG, value, changes)
    return bool(present), where, edits


def _unit_edit(target, flag, value, changes):
    """(where, edits): ``flag=value`` put where it reaches ExecStart (kubelet/flags.py plan_edit)."""
    texts = {path: new for path, (_old, new) in changes.items()}
    units = [(path, texts.get(path, text)) for path, text in target.unit_files]

    def read_new(path):
        return texts[path] if path in texts else read_file(target.host, path, missing_ok=True)

    try:
        command, variable = target.new_command or target.command, target.params["flags_variable"]
        flags_plan = plan_edit(command, units, read_new, value, variable, flag=flag)
    except FlagsError as exc:
        raise PlanError(f"{target.label}: {exc}; left unchanged") from None
    target.set_new_args({**texts, **flags_plan.texts})
    edits = {path: (target.command.texts.get(path), new) for path, new in flags_plan.texts.items()}
    return f"{flags_plan.where or target.label} {flag}", edits


def _flags_file(target, request, changes):
    taint, present, base = request
    text = _pending(changes, target.path, target.text) or ""
    values = read_gate_values(text, target.fmt, TAINTS_FLAG)
    raw = values[-1][1] if values else None
    value = _new_value(raw, base, taint, present)
    if value is None and len(values) > 1 and present is not None:
        value = raw  # several flags, the last of which wins: one is left, with its value
    if value is None:
        return _registers(raw, base, taint), f"{target.path} {TAINTS_FLAG}", {}

    def reaching(args):  # what the kubelet gets, when it is not ``value``
        got = flag_value(args, TAINTS_NAME)
        return None if (got or "") == value else got or "none"

    where, edits = _file_edit(target, (TAINTS_FLAG, value, reaching), text, changes)
    return bool(present), where, edits


def _file_edit(target, request, text, changes):
    """(where, edits): ``flag=value`` in the flags file ``target.path``, whose ``text`` is pending;
    ``reaching(args)`` says what the kubelet would get instead (None: it gets what was asked)."""
    flag, value, reaching = request
    path = target.path
    try:
        new, where = set_gate_string(text, target.fmt, value, target.params["flags_variable"], flag=flag)
    except FlagsError as exc:
        raise PlanError(f"{path}: {exc}; left unchanged") from None
    if target.command is not None:
        target.set_new_args({**{p: n for p, (_o, n) in changes.items()}, path: new})
        got = reaching(reaching_args(target.new_command))
        if got is not None:
            raise PlanError(
                f"{path}: {flag}={value or '(none)'} written there would not reach the kubelet, "
                f"which would get {got}: {explain_overrides(target.new_command)}; left unchanged"
            )
    return f"{path} {where or ''}".strip() + f" {flag}", {path: (target.text, new)}


def _label_flags(target, labels, changes):
    """--node-labels merged with the labels the flags give (repeated flags add up): into the first
    in the flags file named, or the first that reaches ExecStart (a new one where the gates go)."""
    if target.path:
        text = _pending(changes, target.path, target.text) or ""
        values = [raw for _label, raw in read_gate_values(text, target.fmt, LABELS_FLAG)]
    else:
        values = flag_values(reaching_args(target.new_command or target.command), LABELS_NAME)
    value = new_value(values, labels)
    if value is None:
        return f"{target.path or target.label} {LABELS_FLAG}", {}
    if not target.path:
        return _unit_edit(target, LABELS_FLAG, value, changes)

    def reaching(args):
        got = flag_values(args, LABELS_NAME)
        return None if new_value(got, labels) is None else ",".join(got) or "none"

    return _file_edit(target, (LABELS_FLAG, value, reaching), text, changes)


def _new_value(raw, base, taint, present):
    """The flag's new value ("" removes it), or None to leave the flags as they are."""
    current = parse_list(raw) if raw is not None else base
    if present is None or (raw is None and not present):
        return None
    new_list = merge_list(current, taint, present)
    if new_list == current:
        return None
    if not present and new_list == base:
        return ""  # what is left is the config file's list: the flag is not needed
    return render_list(new_list)


def _registers(raw, base, taint):
    return any(same(item, taint) for item in (parse_list(raw) if raw is not None else base))


def _rke2(target, taint, present, changes):
    where = f"{target.path} node-taint"
    texts = {path: _pending(changes, path, text) for path, text in target.texts.items()}
    items = rke2_items(texts, "node-taint")
    matching = [item for item in items if same(parse(item[3], f"{item[0]} node-taint"), taint)]
    exact = [item for item in matching if parse(item[3], where) == taint]
    if present is None:
        return bool(matching), where, {}
    if present and len(matching) == 1 and exact:
        return True, where, {}
    new_texts = edit_rke2_items(texts, matching, render(taint) if present else None, "node-taint")
    before = {path: (text if target.host.exists(path) else None) for path, text in target.texts.items()}
    edits = {path: (before[path], new) for path, new in new_texts.items() if new != texts[path]}
    return present, where, edits


def _rke2_labels(target, labels, changes):
    """RKE2's (and k3s') node-label items: each of ``labels`` once, with its value."""
    texts = {path: _pending(changes, path, text) for path, text in target.texts.items()}
    new_texts = dict(texts)
    for key, value in labels.items():
        items = rke2_items(new_texts, "node-label")
        matching = [item for item in items if item[3].partition("=")[0].strip() == key]
        if len(matching) != 1 or merged([matching[0][3]]) != {key: value}:
            new_texts = edit_rke2_items(new_texts, matching, f"{key}={value}", "node-label")
    before = {path: (text if target.host.exists(path) else None) for path, text in target.texts.items()}
    edits = {path: (before[path], new) for path, new in new_texts.items() if new != texts[path]}
    return f"{target.path} node-label", edits


WRITERS = {"config": _config, "config_dir": _config_dir, "flags": _flags, "rke2": _rke2}
