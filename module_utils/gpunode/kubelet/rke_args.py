# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Kubelet flags in Rancher's cluster files: RKE1 ``cluster.yml`` and RKE2 ``config.yaml``.

- RKE1 runs the kubelets from ``cluster.yml`` on the admin host:
  ``services.kubelet.extra_args.feature-gates`` (one ``A=true,B=false``
  string), applied by ``rke up``.
- RKE2 turns each ``kubelet-arg`` item of ``/etc/rancher/rke2/config.yaml``
  and ``config.yaml.d/*.yaml`` (lexical order; a later ``kubelet-arg``
  replaces the list, ``kubelet-arg+`` appends; a scalar is a one-item list)
  into ``--<item>`` on the kubelet's command line; ``feature-gates=...`` items
  become ``--feature-gates`` flags, which the kubelet merges. Its ``node-taint``
  items (the same rules) are the taints the kubelet registers with.

All edits go through yaml_edit, so comments and layout survive. Standard
library and PyYAML (guarded by yaml_edit); Python 3.8+ (this runs on target hosts).
"""

from ansible.module_utils.gpunode.formats.yaml_edit import append_to_list, get, remove_key, set_scalar
from ansible.module_utils.gpunode.kubelet.gates import GateError, format_gate_string, parse_gate_string

FEATURE_GATES_ARG = "feature-gates="
RKE1_PATH = ["services", "kubelet", "extra_args", "feature-gates"]


def read_rke1_gates(text):
    """The gates of cluster.yml's services.kubelet.extra_args.feature-gates."""
    value = get(text, RKE1_PATH)
    if value is None:
        return {}
    return parse_gate_string(value)


def write_rke1_gates(text, current, merged):
    """cluster.yml with feature-gates changed from ``current`` to ``merged``."""
    if merged == current:
        return text
    if not merged:
        return remove_key(text, RKE1_PATH)
    return set_scalar(text, RKE1_PATH, format_gate_string(merged))


def rke2_items(texts, option="kubelet-arg"):
    """Effective ``option`` items across RKE2 files: list of (file, key, index, value).

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
        for key in (option, option + "+"):
            if key not in data:
                continue
            value = data[key]
            values = value if isinstance(value, list) else [value]
            if key == option:
                items = []
            items += [(path, key, index, str(v)) for index, v in enumerate(values) if v is not None]
    return items


def read_rke2_gates(items):
    """The gates that the effective kubelet-arg items set (later items win)."""
    gates = {}
    for item in items:
        value = item[3]
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
    for hit in sorted(hits, key=lambda h: (h[0], h[2]), reverse=True):
        path, key, index = hit[:3]
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


def edit_rke2_items(texts, drop, append, option):
    """New texts (path -> text) without the items ``drop`` (of :func:`rke2_items`) and with
    ``append`` (a string, or None) added to the ``option`` list of the last file that sets one
    (config.yaml when none does)."""
    texts = dict(texts)
    for path, key, index, _value in sorted(drop, key=lambda item: (item[0], item[2]), reverse=True):
        texts[path] = _rke2_remove(texts[path], key, index)
    if append is not None:
        owner = next(
            (p for p in reversed(list(texts)) if option in (get(texts[p], [], None) or {})), next(iter(texts))
        )
        texts[owner] = append_to_list(texts[owner], [option], append)
    return texts


def _rke2_set(text, key, index, value):
    if isinstance(get(text, [key]), list):
        return set_scalar(text, [key, index], value)
    return set_scalar(text, [key], value)


def _rke2_remove(text, key, index):
    if isinstance(get(text, [key]), list):
        return remove_key(text, [key, index])
    return remove_key(text, [key])


def rke2_kubelet_args(items):
    """The kubelet command-line flags RKE2 makes of the effective kubelet-arg items."""
    return ["--" + item[3] for item in items]
