# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The taint a GPU node registers with until it has passed its validation.

The kubelet puts the taints of ``registerWithTaints`` (KubeletConfiguration,
a list of core/v1 Taint: ``key``, ``value``, ``effect``; the flag
``--register-with-taints`` is its deprecated twin) on its Node object when it
registers, so a GPU node that joins after the add-ons play starts with the
validation gate's taint (``readiness.k8s.io/gpunode-gpu-unvalidated:NoSchedule`` by default,
``gpu_validate_taint_key``) and takes no pods until the add-ons play lifts the taint
(docs/VALIDATION.md). Field reference:
https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/
(``registerWithTaints``: "an array of taints to add to a node object when the
kubelet registers itself").

The taint is put in while the node's validation record
(``/var/lib/gpunode/validated.json``, validate/marker.py) does not say passed.
Once it says passed the file is left as it is: the kubelet reads
``registerWithTaints`` only when it registers, so taking the taint out would
change the node on the run after a validation for nothing, while keeping it makes a
node that registers again start tainted until
the add-ons play lifts the taint. The gate switched off takes it out. The
operator's other taints are kept as they are.
Written where the kubelet's gates go (kubelet/registration.py): its ``--config``
file, gpunode's ``--config-dir`` drop-in, the ``--register-with-taints`` flag,
RKE2's ``node-taint``; RKE1's cluster.yml is reported, not written.

Standard library, and PyYAML for YAML files (through yaml_edit). Python 3.8+.
"""

import json
import re

from ansible.module_utils.gpunode.formats.json_config import detect_indent
from ansible.module_utils.gpunode.formats.json_config import parse as parse_json
from ansible.module_utils.gpunode.formats.yaml_edit import (
    YamlEditError,
    append_to_list,
    remove_key,
    set_value,
)
from ansible.module_utils.gpunode.kubelet.config import is_json, load
from ansible.module_utils.gpunode.validate.marker import read as read_record

EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# a qualified name (optional DNS prefix and slash) as Kubernetes validates taint keys
_KEY_RE = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


class TaintError(ValueError):
    """A taint option or a registerWithTaints that cannot be used; the message says why."""


def parse(text, option="registration_taint"):
    """``key[=value]:Effect`` (as ``kubectl taint`` writes it) -> a core/v1 Taint dict.

    ``option`` names where the text comes from, for the message.
    """
    spec, _colon, effect = str(text).strip().rpartition(":")
    key, _equals, value = spec.partition("=")
    if not spec or effect not in EFFECTS:
        raise TaintError(
            f"{option} {text!r}: not key[=value]:Effect with Effect one of {', '.join(EFFECTS)}"
        )
    name = key.rpartition("/")[2]
    if not _KEY_RE.match(key) or len(name) > 63 or not _VALUE_RE.match(value) or len(value) > 63:
        raise TaintError(
            f"{option} {text!r}: {key!r} or {value!r} is not a valid taint key or value"
        )
    taint = {"key": key, "effect": effect}
    if value:
        taint["value"] = value
    return taint


def wanted(state, record):
    """(present, why): True to put the taint in, False to take it out, None to leave the file as
    it is (the node passed: the taint acts only at registration), from ``state`` and the record."""
    if state == "absent":
        return False, "the validation gate is off"
    _converged, facts, why = read_record(record)
    if facts.get("gpu_validate", {}).get("passed"):
        return None, f"{record}: the last validation passed; registerWithTaints is left as it is"
    return True, why or f"{record}: the last validation did not pass"


def listed(text, taint):
    """Whether ``taint`` (key and effect) is in ``text``'s registerWithTaints."""
    data = load(text) if text else {}
    current = data.get("registerWithTaints") if isinstance(data, dict) else None
    return isinstance(current, list) and any(same(item, taint) for item in current)


def same(item, taint):
    """Whether ``item`` is ``taint`` by key and effect (a taint's identity on a Node), whatever its value."""
    return isinstance(item, dict) and (item.get("key"), item.get("effect")) == (taint["key"], taint["effect"])


def parse_list(value, option="--register-with-taints"):
    """The taints of a ``--register-with-taints`` value: comma-separated ``key[=value]:Effect``.

    The kubelet splits the value at commas and parses each item (kubernetes
    pkg/util/flag/flags.go, RegisterWithTaintsVar.Set); an empty value is no taint.
    """
    return [parse(item, option) for item in str(value).split(",")] if str(value).strip() else []


def render_list(taints):
    """``--register-with-taints``'s value for ``taints``."""
    return ",".join(render(taint) for taint in taints)


def merge_list(current, taint, present):
    """``current`` (a list of taints) with ``taint`` in (appended, or its value updated in place of
    the one with its key and effect) or out; the other taints kept in their order."""
    kept = [item for item in current if not same(item, taint)]
    if not present:
        return kept
    if any(item == taint for item in current) and len(kept) == len(current) - 1:
        return list(current)
    return [*kept, taint]


def edit(text, taint, present):
    """``text`` (a KubeletConfiguration, YAML or JSON) with ``taint`` in or out of registerWithTaints.

    Other taints, keys, comments and layout are kept; a list left empty is removed.
    """
    data = load(text) if text else {}
    current = data.get("registerWithTaints") if isinstance(data, dict) else None
    if current is None:
        current = []
    if not isinstance(current, list):
        raise TaintError("registerWithTaints is not a list")
    kept = [item for item in current if not same(item, taint)]
    target = merge_list(current, taint, present)
    if target == current:
        return text
    if is_json(text):
        return _edit_json(text, target)
    try:
        if not target:
            return remove_key(text, ["registerWithTaints"])
        if present and len(kept) == len(current):
            return append_to_list(text or "", ["registerWithTaints"], taint)
        return set_value(text, ["registerWithTaints"], target)
    except YamlEditError as exc:
        raise TaintError(str(exc)) from None


def _edit_json(text, target):
    data = parse_json(text, "the file")
    if target:
        data["registerWithTaints"] = target
    else:
        data.pop("registerWithTaints", None)
    if "\n" not in text.strip():
        return json.dumps(data, ensure_ascii=False) + ("\n" if text.endswith("\n") else "")
    return json.dumps(data, indent=detect_indent(text), ensure_ascii=False) + "\n"


def render(taint):
    """``key[=value]:Effect``."""
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint['key']}{value}:{taint['effect']}"
