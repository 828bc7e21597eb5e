# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Comment- and layout-preserving edits of block-style YAML text.

Hand-edited files (RKE ``cluster.yml``, RKE2 ``config.yaml``, a kubelet
``config.yaml`` with comments) must keep every byte that an edit does not
touch: comments, blank lines, key order, quoting, indentation, a missing final
newline. PyYAML cannot round-trip comments, so this module parses the text with
``yaml.compose`` only to validate it and to find where keys and values start
and end (node marks), then splices new text into the original string.

Every edit checks itself: the new text is parsed again and must load to the
data the edit meant to produce (``yaml.safe_load``), else ``YamlEditError`` is
raised and the caller still holds the original text.

Paths are lists of keys (str) for mappings and indices (int) for sequences:
``["services", "kubelet", "extra_args", "feature-gates"]`` or
``["kubelet-arg", 0]``.

Standard library and PyYAML only: this runs on target hosts, where PyYAML
(python3-yaml) may be missing; modules check ``YAML_IMPORT_ERROR`` and fail
with ``missing_required_lib`` before calling anything here.
"""

import copy
import functools
import traceback

try:
    import yaml
except ImportError:  # the node has no python3-yaml
    yaml = None
    YAML_IMPORT_ERROR = traceback.format_exc()
else:
    YAML_IMPORT_ERROR = None

_NULL_TAG = "tag:yaml.org,2002:null"
_MISSING = object()


class YamlEditError(ValueError):
    """The text does not parse, or an edit cannot be made as asked.

    ``line`` and ``column`` are 1-based when the problem has a position.
    """

    def __init__(self, message, line=None, column=None):
        if line is not None:
            message = f"line {line}, column {column}: {message}"
        super().__init__(message)
        self.line = line
        self.column = column


# ---------------------------------------------------------------- parsing


def _compose(text):
    """The root node of a single-document YAML text (None when empty)."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if mark is not None:
            raise YamlEditError(problem, mark.line + 1, mark.column + 1) from None
        raise YamlEditError(problem) from None
    except yaml.YAMLError as exc:
        raise YamlEditError(str(exc)) from None


def _load(text):
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        if mark is not None:
            raise YamlEditError(problem, mark.line + 1, mark.column + 1) from None
        raise YamlEditError(problem) from None


def _root_mapping(text):
    root = _compose(text)
    if root is not None and not isinstance(root, yaml.MappingNode):
        raise YamlEditError(
            "the document is not a mapping", root.start_mark.line + 1, root.start_mark.column + 1
        )
    return root


def _find_child(node, key):
    """The (key_node, value_node) of ``key`` in a mapping or sequence node."""
    if isinstance(node, yaml.MappingNode) and isinstance(key, str):
        found = None
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                found = (key_node, value_node)  # the last one wins, as in safe_load
        return found
    if (
        isinstance(node, yaml.SequenceNode)
        and isinstance(key, int)
        and not isinstance(key, bool)
        and -len(node.value) <= key < len(node.value)
    ):
        return (None, node.value[key])
    return None


def _walk(root, path):
    """Follow ``path``: (chain, rest) where chain holds (key_node, node) per found step."""
    chain = [(None, root)]
    for index, key in enumerate(path):
        child = _find_child(chain[-1][1], key)
        if child is None:
            return chain, list(path[index:])
        chain.append(child)
    return chain, []


# ---------------------------------------------------------------- text helpers


def _line_start(text, index):
    return text.rfind("\n", 0, index) + 1


def _line_end(text, index):
    end = text.find("\n", index)
    return len(text) if end < 0 else end


def _is_null(node):
    return isinstance(node, yaml.ScalarNode) and node.tag == _NULL_TAG


def _content_end(node, text):
    """Index just after the last character that belongs to ``node``."""
    if isinstance(node, yaml.ScalarNode):
        end = node.end_mark.index
        if node.style in ("|", ">"):
            while end > node.start_mark.index and text[end - 1] in " \t\r\n":
                end -= 1
        return end
    if node.flow_style or not node.value:
        return node.end_mark.index
    last = node.value[-1]
    if isinstance(node, yaml.MappingNode):
        key_node, value_node = last
        if _is_null(value_node) and value_node.start_mark.index == value_node.end_mark.index:
            return _colon_after(key_node, text) + 1
        return _content_end(value_node, text)
    return _content_end(last, text)


def _colon_after(key_node, text):
    """Index of the ':' that ends a mapping key."""
    index = text.find(":", key_node.end_mark.index)
    if index < 0:
        raise YamlEditError("cannot find ':' after key", key_node.end_mark.line + 1, key_node.end_mark.column)
    return index


def _render_scalar(value, style=None):
    """One-line YAML text for a scalar; ``style`` '"' or "'" keeps a quoting style."""
    if isinstance(value, (dict, list, tuple)):
        raise YamlEditError(f"expected a scalar value, got {type(value).__name__}")
    if isinstance(value, str) and ("\n" in value or "\r" in value):
        style = '"'
    kwargs = {"default_flow_style": True, "width": 1 << 30, "allow_unicode": True}
    if isinstance(value, str) and style in ('"', "'"):
        kwargs["default_style"] = style
    out = yaml.safe_dump(value, **kwargs)
    if out.endswith("\n...\n"):
        out = out[: -len("\n...\n")]
    return out.rstrip("\n")


def _render_flow(value):
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_render_scalar(k)}: {_render_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_render_flow(v) for v in value) + "]"
    return _render_scalar(value)


def _render_block(value, column, step, seq_offset):
    """Block lines (no leading/trailing newline) for a value nested at ``column``.

    ``value`` is ``{key: ...}`` or a list; scalars are rendered inline by callers.
    A mapping that is a list item is written in block style after its dash
    (``- name: x`` with the other keys aligned under ``name``).
    """
    pad = " " * column
    lines = []
    if isinstance(value, dict):
        for key, child in value.items():
            head = f"{pad}{_render_scalar(key)}:"
            if isinstance(child, dict) and child:
                lines.append(head)
                lines.append(_render_block(child, column + step, step, seq_offset))
            elif isinstance(child, (list, tuple)) and child:
                lines.append(head)
                lines.append(_render_block(list(child), column + seq_offset, step, seq_offset))
            else:
                lines.append(f"{head} {_render_flow(child)}")
    else:
        for item in value:
            if isinstance(item, dict) and item:
                inner = _render_block(item, column + 2, step, seq_offset)
                lines.append(f"{pad}- {inner[column + 2:]}")
            else:
                lines.append(f"{pad}- {_render_flow(item)}")
    return "\n".join(lines)


def _nest(rest, value):
    for key in reversed(rest):
        value = {key: value}
    return value


def _steps(root, text):
    """(mapping indentation step, sequence offset) used by the file; defaults 2 and 2."""
    step = seq = None
    stack = [root] if root is not None else []
    while stack and (step is None or seq is None):
        node = stack.pop(0)
        if isinstance(node, yaml.MappingNode) and not node.flow_style:
            for key_node, value_node in node.value:
                col = key_node.start_mark.column
                block = not value_node.flow_style if hasattr(value_node, "flow_style") else False
                if isinstance(value_node, yaml.MappingNode) and block and value_node.value:
                    child_col = value_node.value[0][0].start_mark.column
                    if step is None and child_col > col:
                        step = child_col - col
                if isinstance(value_node, yaml.SequenceNode) and block and value_node.value:
                    first = value_node.value[0]
                    dash = text.rfind("-", 0, first.start_mark.index)
                    dash_col = dash - _line_start(text, dash)
                    if seq is None and dash_col >= col:
                        seq = dash_col - col
                stack.append(value_node)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return step or 2, 2 if seq is None else seq


def _step_below(chain, fallback):
    """The indentation step seen under the deepest block mapping in ``chain``."""
    for key_node, node in reversed(chain):
        if key_node is None:
            continue
        if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
            child_col = node.value[0][0].start_mark.column
            if child_col > key_node.start_mark.column:
                return child_col - key_node.start_mark.column
    return fallback


# ---------------------------------------------------------------- data side


def _data_set(data, path, value):
    if not path:
        return value
    if data is None:
        data = {}
    node = data
    for key in path[:-1]:
        nxt = node[key] if (isinstance(node, list) or key in node) else None
        if nxt is None:
            nxt = {}
            node[key] = nxt
        node = nxt
    node[path[-1]] = value
    return data


def _data_get(data, path, default=_MISSING):
    node = data
    for key in path:
        in_dict = isinstance(node, dict) and key in node
        in_list = isinstance(node, list) and isinstance(key, int) and -len(node) <= key < len(node)
        if not (in_dict or in_list):
            return default
        node = node[key]
    return node


def _data_remove(data, path):
    parent = _data_get(data, path[:-1], None)
    if isinstance(parent, dict):
        parent.pop(path[-1], None)
    elif isinstance(parent, list):
        del parent[path[-1]]
    return data


def _splice(text, edits):
    for start, end, replacement in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def _checked(new_text, expected, what):
    loaded = _load(new_text)
    if loaded is None:
        loaded = {}
    if expected is None:
        expected = {}
    if loaded != expected:
        raise YamlEditError(f"{what}: the edited text would not load to the expected data; nothing changed")
    return new_text


def _existing(text, path):
    """``(path as a list, chain of (key_node, node))``; the chain is None when ``path`` is absent."""
    path = list(path)
    if not path:
        raise YamlEditError("empty path")
    chain, rest = _walk(_root_mapping(text), path)
    return path, None if rest else chain


def _keeps_crlf(function):
    """Edit a file with CRLF line ends as LF text and give it back with CRLF."""

    @functools.wraps(function)
    def wrapper(text, *args, **kwargs):
        if "\r\n" in text and text.count("\r\n") == text.count("\n"):
            return function(text.replace("\r\n", "\n"), *args, **kwargs).replace("\n", "\r\n")
        return function(text, *args, **kwargs)

    return wrapper


# ---------------------------------------------------------------- public API


def get(text, path, default=None):
    """The value at ``path`` (plain Python data), or ``default`` when absent."""
    data = _load(text)
    if data is None:
        return default
    return _data_get(data, list(path), default)


def _replace_collection(text, chain, value, map_step, seq_offset):
    """Edits that replace the collection at the end of ``chain`` by ``value`` (a collection).

    A flow collection stays flow; a block one is re-written in block style at
    the same column (comments inside the old value go with it).
    """
    key_node, node = chain[-1]
    if node.flow_style or not node.value:
        return [(node.start_mark.index, node.end_mark.index, _render_flow(value))]
    end = _line_end(text, _content_end(node, text))
    if key_node is None:
        # an item of a block sequence: its text starts after the dash
        if not isinstance(value, dict):
            return [(node.start_mark.index, end, _render_flow(value))]
        column = node.start_mark.column
        return [(node.start_mark.index, end, _render_block(value, column, map_step, seq_offset)[column:])]
    first = node.value[0][0] if isinstance(node, yaml.MappingNode) else node.value[0]
    if isinstance(node, yaml.SequenceNode):
        dash = text.rfind("-", 0, first.start_mark.index)
        column = dash - _line_start(text, dash)
        start = _line_start(text, dash)
    else:
        column = first.start_mark.column
        start = _line_start(text, first.start_mark.index)
    if text[start : (dash if isinstance(node, yaml.SequenceNode) else first.start_mark.index)].strip():
        raise YamlEditError(
            "the value shares its first line with other content; not replaced in place",
            node.start_mark.line + 1,
            node.start_mark.column + 1,
        )
    return [(start, end, _render_block(value, column, map_step, seq_offset))]


def _blank_before(text, index):
    """``index`` moved left over the spaces and tabs before it."""
    while index > 0 and text[index - 1] in " \t":
        index -= 1
    return index


def _block_under_key(text, node, block):
    """Edits that put ``block`` on the lines after ``node``'s and remove ``node``'s inline text."""
    eol = _line_end(text, node.end_mark.index)
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
    if isinstance(node, yaml.ScalarNode) and not _is_null(node) and not is_collection:
        style = node.style if node.style in ('"', "'") else None
        return [(node.start_mark.index, node.end_mark.index, _render_scalar(value, style))]
    if isinstance(node, yaml.CollectionNode) and is_collection:
        return _replace_collection(text, chain, list(value) if is_list else value, map_step, seq_offset)
    if not (_is_null(node) or (isinstance(node, yaml.ScalarNode) and is_collection)):
        raise YamlEditError(
            f"{'.'.join(map(str, path))} holds a {node.id}; not replaced by a scalar",
            node.start_mark.line + 1,
            node.start_mark.column + 1,
        )
    # a null (or, for a collection, a scalar) value is replaced in place
    if key_node is None:
        return [(node.start_mark.index, node.end_mark.index, _render_flow(value))]
    if not is_collection or not value:
        text_value = _render_flow(value)
        if node.start_mark.index == node.end_mark.index:
            colon = _colon_after(key_node, text) + 1
            return [(colon, colon, " " + text_value)]
        return [(node.start_mark.index, node.end_mark.index, text_value)]
    indent = seq_offset if is_list else _step_below(chain, map_step)
    block = _render_block(
        list(value) if is_list else value, key_node.start_mark.column + indent, map_step, seq_offset
    )
    return _block_under_key(text, node, block)


def _add_to_flow_mapping(text, chain, new_value, steps):
    """Edits that add ``new_value`` (nested keys) to the flow mapping at the end of ``chain``."""
    map_step, seq_offset = steps
    key_node, node = chain[-1]
    if node.value:
        end = _content_end(node.value[-1][1], text)
        entry = _render_flow(new_value)[1:-1]
        return [(end, end, ", " + entry)]
    if key_node is None:
        return [(node.start_mark.index, node.end_mark.index, _render_flow(new_value))]
    step = _step_below(chain, map_step)
    block = _render_block(new_value, key_node.start_mark.column + step, map_step, seq_offset)
    return [(_blank_before(text, node.start_mark.index), node.end_mark.index, "\n" + block)]


def _add_missing(text, chain, path, rest, value, *, steps):
    """Edits that create the missing keys ``rest`` below the end of ``chain``, holding ``value``."""
    map_step, seq_offset = steps
    key_node, node = chain[-1]
    new_value = _nest(rest, list(value) if isinstance(value, (list, tuple)) else value)
    if _is_null(node) and key_node is not None:
        step = _step_below(chain, map_step)
        block = _render_block(new_value, key_node.start_mark.column + step, map_step, seq_offset)
        return _block_under_key(text, node, block)
    if node is None:  # empty document
        block = _render_block(new_value, 0, map_step, seq_offset)
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
    block = _render_block(new_value, column, map_step, seq_offset)
    eol = _line_end(text, _content_end(node, text))
    return [(eol, eol, "\n" + block)]


def _set_node(text, path, value):
    """Edits (start, end, replacement) that make ``path`` hold ``value``.

    ``value`` is a scalar, a list or a mapping; a collection is written in
    block style at the file's indentation (in flow style where it replaces a
    flow collection).
    """
    root = _root_mapping(text)
    chain, rest = _walk(root, path)
    steps = _steps(root, text)
    if not rest:
        return _set_in_place(text, chain, path, value, steps)
    return _add_missing(text, chain, path, rest, value, steps=steps)


@_keeps_crlf
def set_scalar(text, path, value):
    """Set the scalar at ``path`` to ``value``, creating missing mappings.

    An existing scalar keeps its quoting style; a key whose value is null
    (``cluster_name:``) gets the value; a flow mapping (``extra_args: {}``)
    gains the key (an empty one becomes a block mapping).
    """
    path = list(path)
    if not path:
        raise YamlEditError("empty path")
    new_text = _splice(text, _set_node(text, path, value))
    expected = _data_set(copy.deepcopy(_load(text)), path, value)
    return _checked(new_text, expected, f"set {'.'.join(map(str, path))}")


def _removed_from_flow(text, parent, items, position, first_index):
    """The span that removes item ``position`` of a flow collection (with its comma)."""
    if len(items) == 1:
        return parent.start_mark.index + 1, parent.end_mark.index - 1
    if position == 0:
        nxt = items[1] if isinstance(parent, yaml.SequenceNode) else parent.value[1][0]
        return first_index, nxt.start_mark.index
    return _content_end(items[position - 1], text), _content_end(items[position], text)


def _removed_from_block(text, path, parent, items, position, *, first_index):
    """The span that removes item ``position`` of a block collection (its whole lines)."""
    node = items[position]
    is_seq = isinstance(parent, yaml.SequenceNode)
    if is_seq:
        first_index = text.rfind("-", 0, node.start_mark.index)
    line_start = _line_start(text, first_index)
    end = _line_end(text, _content_end(node, text))
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


@_keeps_crlf
def remove_key(text, path):
    """Remove the key (or sequence item) at ``path``; unchanged when absent.

    A block mapping or list that becomes empty is written as ``{}`` or ``[]``.
    """
    path, chain = _existing(text, path)
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
            colon = _colon_after(parent_key, text) + 1
            edits.append((colon, colon, " []" if is_seq else " {}"))
    new_text = _splice(text, edits)
    expected = _data_remove(copy.deepcopy(_load(text)), path)
    return _checked(new_text, expected, f"remove {'.'.join(map(str, path))}")


@_keeps_crlf
def append_to_list(text, path, item):
    """Append ``item`` to the list at ``path`` (created when missing or null).

    A scalar at ``path`` becomes a list whose first item is the old value
    (RKE2 accepts ``node-label: x`` as well as a list).
    """
    path = list(path)
    if not path:
        raise YamlEditError("empty path")
    root = _root_mapping(text)
    chain, rest = _walk(root, path)
    current = _data_get(_load(text) or {}, path, None)
    if rest or _is_null(chain[-1][1]):
        return _finish_list(text, path, _set_node(text, path, [item]), [item])
    key_node, node = chain[-1]
    seq_offset = _steps(root, text)[1]
    if isinstance(node, yaml.ScalarNode):
        if key_node is None:
            raise YamlEditError("cannot turn a sequence item into a list", node.start_mark.line + 1)
        old_raw = text[node.start_mark.index : node.end_mark.index]
        style = node.style if node.style in ('"', "'") else None
        pad = " " * (key_node.start_mark.column + seq_offset)
        block = f"\n{pad}- {old_raw}\n{pad}- {_render_scalar(item, style)}"
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
            end = _content_end(node.value[-1], text)
            return _finish_list(text, path, [(end, end, ", " + _render_flow(item))], expected)
        if key_node is None:
            return _finish_list(
                text, path, [(node.start_mark.index, node.end_mark.index, _render_flow([item]))], expected
            )
        pad = " " * (key_node.start_mark.column + seq_offset)
        start = _blank_before(text, node.start_mark.index)
        return _finish_list(
            text, path, [(start, node.end_mark.index, f"\n{pad}- {_render_flow(item)}")], expected
        )
    last = node.value[-1]
    dash = text.rfind("-", 0, node.value[0].start_mark.index)
    column = dash - _line_start(text, dash)
    eol = _line_end(text, _content_end(last, text))
    if isinstance(item, dict) and item:
        map_step = _steps(root, text)[0]
        block = _render_block([item], column, map_step, seq_offset)
        return _finish_list(text, path, [(eol, eol, "\n" + block)], expected)
    style = last.style if isinstance(last, yaml.ScalarNode) and last.style in ('"', "'") else None
    rendered = _render_scalar(item, style) if not isinstance(item, (dict, list)) else _render_flow(item)
    return _finish_list(text, path, [(eol, eol, f"\n{' ' * column}- {rendered}")], expected)


def _finish_list(text, path, edits, expected_list):
    new_text = _splice(text, edits)
    expected = _data_set(copy.deepcopy(_load(text)), path, expected_list)
    return _checked(new_text, expected, f"append to {'.'.join(map(str, path))}")


def is_flow(text, path):
    """Whether the collection at ``path`` is written in flow style (``{}``, ``[a, b]``)."""
    chain, rest = _walk(_root_mapping(text), list(path))
    node = chain[-1][1]
    return not rest and isinstance(node, yaml.CollectionNode) and bool(node.flow_style)


@_keeps_crlf
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
    new_text = _splice(text, _set_node(text, path, value))
    expected = _data_set(copy.deepcopy(_load(text)), path, value)
    return _checked(new_text, expected, f"set {'.'.join(map(str, path))}")


@_keeps_crlf
def remove_branch(text, path, keep=1):
    """Remove ``path`` and every block collection above it that would be left empty.

    The inverse of creating ``path`` with :func:`set_value` where its parents
    did not exist: the file comes back byte for byte. Flow collections, the
    document itself and the first ``keep`` levels of ``path`` are never
    removed (one left empty is written ``{}``). Unchanged when ``path`` is absent.
    """
    path, chain = _existing(text, path)
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
        return _data_set(data, path, copy.deepcopy(op[2]))
    if kind == "append":
        current = _data_get(data, path, None)
        if isinstance(current, list):
            current.append(copy.deepcopy(op[2]))
            return data
        items = [] if current is None else [current]
        return _data_set(data, path, [*items, copy.deepcopy(op[2])])
    if _data_get(data, path) is _MISSING:
        return data
    if kind == "remove_branch":
        keep = max(op[2] if len(op) > 2 else 1, 1)
        while len(path) > keep and len(_data_get(data, path[:-1])) == 1:
            path = path[:-1]
    return _data_remove(data, path)


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
    data = _load(text)
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
