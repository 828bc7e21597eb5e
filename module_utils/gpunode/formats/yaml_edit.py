# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Comment- and layout-preserving edits of block-style YAML text.

Hand-edited files (RKE ``cluster.yml``, RKE2 ``config.yaml``, a kubelet
``config.yaml`` with comments) must keep every byte that an edit does not
touch: comments, blank lines, key order, quoting, indentation, a missing final
newline. PyYAML cannot round-trip comments, so this module parses the text with
``yaml.compose`` only to validate it and to find where keys and values start
and end (node marks, ``formats/yaml_text.py``), then splices new text into the
original string.

Every edit checks itself: the new text is parsed again and must load to the
data the edit meant to produce (``yaml_text.load``), else ``YamlEditError`` is
raised and the caller still holds the original text.

Paths are lists of keys (str) for mappings and indices (int) for sequences:
``["services", "kubelet", "extra_args", "feature-gates"]`` or
``["kubelet-arg", 0]``.

Standard library and PyYAML only: this runs on target hosts, where PyYAML
(python3-yaml) may be missing; modules check ``YAML_IMPORT_ERROR`` and fail
with ``missing_required_lib`` before calling anything here.
"""

import copy

from ansible.module_utils.gpunode.formats.yaml_text import (
    MISSING,
    YAML_IMPORT_ERROR,
    YamlEditError,
    checked,
    colon_after,
    content_end,
    data_get,
    data_remove,
    data_set,
    end_of_line,
    existing,
    indent_steps,
    is_null,
    keeps_crlf,
    load,
    nest,
    render_block,
    render_flow,
    render_scalar,
    root_mapping,
    splice,
    start_of_line,
    step_below,
    walk,
    yaml,
)

# the public API; YAML_IMPORT_ERROR and yaml (None without PyYAML) are what modules check
__all__ = [
    "YAML_IMPORT_ERROR",
    "YamlEditError",
    "append_to_list",
    "apply_ops_to_data",
    "edit",
    "get",
    "is_flow",
    "remove_branch",
    "remove_key",
    "set_scalar",
    "set_value",
    "yaml",
]

# ---------------------------------------------------------------- public API


def get(text, path, default=None):
    """The value at ``path`` (plain Python data), or ``default`` when absent."""
    data = load(text)
    if data is None:
        return default
    return data_get(data, list(path), default)


def _replace_collection(text, chain, value, map_step, seq_offset):
    """Edits that replace the collection at the end of ``chain`` by ``value`` (a collection).

    A flow collection stays flow; a block one is re-written in block style at
    the same column (comments inside the old value go with it).
    """
    key_node, node = chain[-1]
    if node.flow_style or not node.value:
        return [(node.start_mark.index, node.end_mark.index, render_flow(value))]
    end = end_of_line(text, content_end(node, text))
    if key_node is None:
        # an item of a block sequence: its text starts after the dash
        if not isinstance(value, dict):
            return [(node.start_mark.index, end, render_flow(value))]
        column = node.start_mark.column
        return [(node.start_mark.index, end, render_block(value, column, map_step, seq_offset)[column:])]
    first = node.value[0][0] if isinstance(node, yaml.MappingNode) else node.value[0]
    if isinstance(node, yaml.SequenceNode):
        dash = text.rfind("-", 0, first.start_mark.index)
        column = dash - start_of_line(text, dash)
        start = start_of_line(text, dash)
    else:
        column = first.start_mark.column
        start = start_of_line(text, first.start_mark.index)
    if text[start : (dash if isinstance(node, yaml.SequenceNode) else first.start_mark.index)].strip():
        raise YamlEditError(
            "the value shares its first line with other content; not replaced in place",
            node.start_mark.line + 1,
            node.start_mark.column + 1,
        )
    return [(start, end, render_block(value, column, map_step, seq_offset))]


def _blank_before(text, index):
    """``index`` moved left over the spaces and tabs before it."""
    while index > 0 and text[index - 1] in " \t":
        index -= 1
    return index


def _block_under_key(text, node, block):
    """Edits that put ``block`` on the lines after ``node``'s and remove ``node``'s inline text."""
    eol = end_of_line(text, node.end_mark.index)
    edits = [(eol, eol, "\n" + block)]
    if node.start_mark.index != node.end_mark.index:
        edits.append((_blank_before(text, node.start_mark.index), node.end_mark.index, ""))
    return edits


def _set_in_place(text, chain, path, value, steps):
    """Edits that replace the value at the end of ``chain`` (the whole path exists)."""
    map_step, seq_offset = steps
    is_list = isinstance(value, (list, tuple))
    is_collection = is_list or isinstance(value, dict)
    key_node, node = chain[-1]
    if isinstance(node, yaml.ScalarNode) and not is_null(node) and not is_collection:
        style = node.style if node.style in ('"', "'") else None
        return [(node.start_mark.index, node.end_mark.index, render_scalar(value, style))]
    if isinstance(node, yaml.CollectionNode) and is_collection:
        return _replace_collection(text, chain, list(value) if is_list else value, map_step, seq_offset)
    if not (is_null(node) or (isinstance(node, yaml.ScalarNode) and is_collection)):
        raise YamlEditError(
            f"{'.'.join(map(str, path))} holds a {node.id}; not replaced by a scalar",
            node.start_mark.line + 1,
            node.start_mark.column + 1,
        )
    # a null (or, for a collection, a scalar) value is replaced in place
    if key_node is None:
        return [(node.start_mark.index, node.end_mark.index, render_flow(value))]
    if not is_collection or not value:
        text_value = render_flow(value)
        if node.start_mark.index == node.end_mark.index:
            colon = colon_after(key_node, text) + 1
            return [(colon, colon, " " + text_value)]
        return [(node.start_mark.index, node.end_mark.index, text_value)]
    indent = seq_offset if is_list else step_below(chain, map_step)
    block = render_block(
        list(value) if is_list else value, key_node.start_mark.column + indent, map_step, seq_offset
    )
    return _block_under_key(text, node, block)


def _add_to_flow_mapping(text, chain, new_value, steps):
    """Edits that add ``new_value`` (nested keys) to the flow mapping at the end of ``chain``."""
    map_step, seq_offset = steps
    key_node, node = chain[-1]
    if node.value:
        end = content_end(node.value[-1][1], text)
        entry = render_flow(new_value)[1:-1]
        return [(end, end, ", " + entry)]
    if key_node is None:
        return [(node.start_mark.index, node.end_mark.index, render_flow(new_value))]
    step = step_below(chain, map_step)
    block = render_block(new_value, key_node.start_mark.column + step, map_step, seq_offset)
    return [(_blank_before(text, node.start_mark.index), node.end_mark.index, "\n" + block)]


def _add_missing(text, chain, path, rest, value, *, steps):
    """Edits that create the missing keys ``rest`` below the end of ``chain``, holding ``value``."""
    map_step, seq_offset = steps
    key_node, node = chain[-1]
    new_value = nest(rest, list(value) if isinstance(value, (list, tuple)) else value)
    if is_null(node) and key_node is not None:
        step = step_below(chain, map_step)
        block = render_block(new_value, key_node.start_mark.column + step, map_step, seq_offset)
        return _block_under_key(text, node, block)
    if node is None:  # empty document
        block = render_block(new_value, 0, map_step, seq_offset)
        if not text:
            return [(0, 0, block + "\n")]
        return [(len(text), len(text), block + "\n" if text.endswith("\n") else "\n" + block)]
    if not isinstance(node, yaml.MappingNode):
        where = ".".join(map(str, path[: len(path) - len(rest)])) or "the document"
        raise YamlEditError(
            f"{where} holds a {node.id}, not a mapping; cannot add {rest[0]!r}",
            node.start_mark.line + 1,
            node.start_mark.column + 1,
        )
    if node.flow_style:
        return _add_to_flow_mapping(text, chain, new_value, steps)
    column = node.value[0][0].start_mark.column
    block = render_block(new_value, column, map_step, seq_offset)
    eol = end_of_line(text, content_end(node, text))
    return [(eol, eol, "\n" + block)]


def _set_node(text, path, value):
    """Edits (start, end, replacement) that make ``path`` hold ``value``.

    ``value`` is a scalar, a list or a mapping; a collection is written in
    block style at the file's indentation (in flow style where it replaces a
    flow collection).
    """
    root = root_mapping(text)
    chain, rest = walk(root, path)
    steps = indent_steps(root, text)
    if not rest:
        return _set_in_place(text, chain, path, value, steps)
    return _add_missing(text, chain, path, rest, value, steps=steps)


@keeps_crlf
def set_scalar(text, path, value):
    """Set the scalar at ``path`` to ``value``, creating missing mappings.

    An existing scalar keeps its quoting style; a key whose value is null
    (``cluster_name:``) gets the value; a flow mapping (``extra_args: {}``)
    gains the key (an empty one becomes a block mapping).
    """
    path = list(path)
    if not path:
        raise YamlEditError("empty path")
    new_text = splice(text, _set_node(text, path, value))
    expected = data_set(copy.deepcopy(load(text)), path, value)
    return checked(new_text, expected, f"set {'.'.join(map(str, path))}")


def _removed_from_flow(text, parent, items, position, first_index):
    """The span that removes item ``position`` of a flow collection (with its comma)."""
    if len(items) == 1:
        return parent.start_mark.index + 1, parent.end_mark.index - 1
    if position == 0:
        nxt = items[1] if isinstance(parent, yaml.SequenceNode) else parent.value[1][0]
        return first_index, nxt.start_mark.index
    return content_end(items[position - 1], text), content_end(items[position], text)


def _removed_from_block(text, path, parent, items, position, *, first_index):
    """The span that removes item ``position`` of a block collection (its whole lines)."""
    node = items[position]
    is_seq = isinstance(parent, yaml.SequenceNode)
    if is_seq:
        first_index = text.rfind("-", 0, node.start_mark.index)
    line_start = start_of_line(text, first_index)
    end = end_of_line(text, content_end(node, text))
    if text[line_start:first_index].strip() == "":
        if end < len(text):
            return line_start, end + 1
        return (line_start - 1 if line_start > 0 else line_start), end
    if position + 1 < len(items):
        # e.g. the first key of a mapping that is a sequence item: "- name: x"
        nxt = items[position + 1] if is_seq else parent.value[position + 1][0]
        return first_index, nxt.start_mark.index
    raise YamlEditError(
        f"cannot remove {'.'.join(map(str, path))}: it shares its line with other content",
        node.start_mark.line + 1,
        node.start_mark.column + 1,
    )


@keeps_crlf
def remove_key(text, path):
    """Remove the key (or sequence item) at ``path``; unchanged when absent.

    A block mapping or list that becomes empty is written as ``{}`` or ``[]``.
    """
    path, chain = existing(text, path)
    if chain is None:
        return text
    parent_key, parent = chain[-2]
    key_node, node = chain[-1]
    is_seq = isinstance(parent, yaml.SequenceNode)
    if is_seq:
        items = parent.value
        position = path[-1] % len(items)
    else:
        items = [pair[1] for pair in parent.value]
        position = [pair[0] for pair in parent.value].index(key_node)
    first_index = node.start_mark.index if is_seq else key_node.start_mark.index
    if parent.flow_style:
        edits = [(*_removed_from_flow(text, parent, items, position, first_index), "")]
    else:
        edits = [(*_removed_from_block(text, path, parent, items, position, first_index=first_index), "")]
        if len(items) == 1 and parent_key is not None:
            colon = colon_after(parent_key, text) + 1
            edits.append((colon, colon, " []" if is_seq else " {}"))
    new_text = splice(text, edits)
    expected = data_remove(copy.deepcopy(load(text)), path)
    return checked(new_text, expected, f"remove {'.'.join(map(str, path))}")


@keeps_crlf
def append_to_list(text, path, item):
    """Append ``item`` to the list at ``path`` (created when missing or null).

    A scalar at ``path`` becomes a list whose first item is the old value
    (RKE2 accepts ``node-label: x`` as well as a list).
    """
    path = list(path)
    if not path:
        raise YamlEditError("empty path")
    root = root_mapping(text)
    chain, rest = walk(root, path)
    current = data_get(load(text) or {}, path, None)
    if rest or is_null(chain[-1][1]):
        return _finish_list(text, path, _set_node(text, path, [item]), [item])
    key_node, node = chain[-1]
    seq_offset = indent_steps(root, text)[1]
    if isinstance(node, yaml.ScalarNode):
        if key_node is None:
            raise YamlEditError("cannot turn a sequence item into a list", node.start_mark.line + 1)
        old_raw = text[node.start_mark.index : node.end_mark.index]
        style = node.style if node.style in ('"', "'") else None
        pad = " " * (key_node.start_mark.column + seq_offset)
        block = f"\n{pad}- {old_raw}\n{pad}- {render_scalar(item, style)}"
        start = _blank_before(text, node.start_mark.index)
        return _finish_list(text, path, [(start, node.end_mark.index, block)], [current, item])
    if not isinstance(node, yaml.SequenceNode):
        raise YamlEditError(
            f"{'.'.join(map(str, path))} holds a mapping, not a list",
            node.start_mark.line + 1,
            node.start_mark.column + 1,
        )
    expected = [*current, item]
    if node.flow_style:
        if node.value:
            end = content_end(node.value[-1], text)
            return _finish_list(text, path, [(end, end, ", " + render_flow(item))], expected)
        if key_node is None:
            return _finish_list(
                text, path, [(node.start_mark.index, node.end_mark.index, render_flow([item]))], expected
            )
        pad = " " * (key_node.start_mark.column + seq_offset)
        start = _blank_before(text, node.start_mark.index)
        return _finish_list(
            text, path, [(start, node.end_mark.index, f"\n{pad}- {render_flow(item)}")], expected
        )
    last = node.value[-1]
    dash = text.rfind("-", 0, node.value[0].start_mark.index)
    column = dash - start_of_line(text, dash)
    eol = end_of_line(text, content_end(last, text))
    if isinstance(item, dict) and item:
        map_step = indent_steps(root, text)[0]
        block = render_block([item], column, map_step, seq_offset)
        return _finish_list(text, path, [(eol, eol, "\n" + block)], expected)
    style = last.style if isinstance(last, yaml.ScalarNode) and last.style in ('"', "'") else None
    rendered = render_scalar(item, style) if not isinstance(item, (dict, list)) else render_flow(item)
    return _finish_list(text, path, [(eol, eol, f"\n{' ' * column}- {rendered}")], expected)


def _finish_list(text, path, edits, expected_list):
    new_text = splice(text, edits)
    expected = data_set(copy.deepcopy(load(text)), path, expected_list)
    return checked(new_text, expected, f"append to {'.'.join(map(str, path))}")


def is_flow(text, path):
    """Whether the collection at ``path`` is written in flow style (``{}``, ``[a, b]``)."""
    chain, rest = walk(root_mapping(text), list(path))
    node = chain[-1][1]
    return not rest and isinstance(node, yaml.CollectionNode) and bool(node.flow_style)


@keeps_crlf
def set_value(text, path, value):
    """Make ``path`` hold ``value``: a scalar, a list or a mapping.

    Missing mappings on the way are created. A collection is written in block
    style at the file's indentation, a mapping inside a list as ``- key: v``
    with its other keys aligned; an existing flow collection stays flow. A
    collection replaced in block style loses the comments inside it (they
    described the old value); every other line of the file is kept.
    """
    path = list(path)
    if not path:
        raise YamlEditError("empty path")
    if isinstance(value, tuple):
        value = list(value)
    new_text = splice(text, _set_node(text, path, value))
    expected = data_set(copy.deepcopy(load(text)), path, value)
    return checked(new_text, expected, f"set {'.'.join(map(str, path))}")


@keeps_crlf
def remove_branch(text, path, keep=1):
    """Remove ``path`` and every block collection above it that would be left empty.

    The inverse of creating ``path`` with :func:`set_value` where its parents
    did not exist: the file comes back byte for byte. Flow collections, the
    document itself and the first ``keep`` levels of ``path`` are never
    removed (one left empty is written ``{}``). Unchanged when ``path`` is absent.
    """
    path, chain = existing(text, path)
    if chain is None:
        return text
    cut = len(path)
    while cut > max(keep, 1):
        parent = chain[cut - 1][1]
        if parent.flow_style or len(parent.value) != 1:
            break
        cut -= 1
    return remove_key(text, path[:cut])


_EDITS = {
    "set": lambda text, op: set_value(text, op[1], op[2]),
    "append": lambda text, op: append_to_list(text, op[1], op[2]),
    "remove": lambda text, op: remove_key(text, op[1]),
    "remove_branch": lambda text, op: remove_branch(text, op[1], *op[2:]),
}


def _apply_op_to_data(data, op):
    kind, path = op[0], list(op[1])
    if kind == "set":
        return data_set(data, path, copy.deepcopy(op[2]))
    if kind == "append":
        current = data_get(data, path, None)
        if isinstance(current, list):
            current.append(copy.deepcopy(op[2]))
            return data
        items = [] if current is None else [current]
        return data_set(data, path, [*items, copy.deepcopy(op[2])])
    if data_get(data, path) is MISSING:
        return data
    if kind == "remove_branch":
        keep = max(op[2] if len(op) > 2 else 1, 1)
        while len(path) > keep and len(data_get(data, path[:-1])) == 1:
            path = path[:-1]
    return data_remove(data, path)


def apply_ops_to_data(data, ops):
    """The parsed data with the ops of :func:`edit` applied (a copy; ``data`` is kept)."""
    data = copy.deepcopy(data) if data is not None else {}
    for op in ops:
        data = _apply_op_to_data(data, op)
    return data


def edit(text, ops, rewrite=False):
    """Apply ``ops`` in order; returns ``(new_text, rewritten)``.

    An op is ``("set", path, value)``, ``("append", path, item)``,
    ``("remove", path)`` or ``("remove_branch", path[, keep])``. Each is a splice that
    keeps every other byte of the file (see the functions of the same names).
    Where an edit cannot be made exactly, YamlEditError is raised, unless
    ``rewrite`` is true: then the whole document is dumped again from the
    parsed data with the ops applied (same meaning; comments, quoting and
    layout are lost) and ``rewritten`` is True. Text that does not parse
    always raises.
    """
    data = load(text)
    new_text = text
    try:
        for op in ops:
            new_text = _EDITS[op[0]](new_text, op)
    except YamlEditError:
        if not rewrite:
            raise
        data = apply_ops_to_data(data, ops)
        dumped = yaml.safe_dump(data, default_flow_style=False, sort_keys=False, allow_unicode=True)
        return (dumped.replace("\n", "\r\n") if "\r\n" in text else dumped), True
    return new_text, False
