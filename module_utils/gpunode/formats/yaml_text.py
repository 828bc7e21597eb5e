# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The text side of ``formats/yaml_edit.py``: where nodes of a YAML text start and end
(``yaml.compose`` marks), how a value renders at a column, and the data an edit must load
to, so that ``yaml_edit`` can splice new text into the original string and check it.
A text is composed and loaded by the loader ``formats/yaml_load.safe_loader(text)``
picks for it (libyaml's for ASCII text, where its marks are the pure loader's).

Standard library and PyYAML only: this runs on target hosts, where PyYAML
(python3-yaml) may be missing; modules check ``YAML_IMPORT_ERROR`` and fail
with ``missing_required_lib`` before calling anything here.
"""

import functools
import traceback

from ansible.module_utils.gpunode.formats.yaml_load import safe_loader

try:
    import yaml
except ImportError:  # the node has no python3-yaml
    yaml = None
    YAML_IMPORT_ERROR = traceback.format_exc()
else:
    YAML_IMPORT_ERROR = None


_NULL_TAG = "tag:yaml.org,2002:null"
MISSING = object()


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
        return yaml.compose(text, Loader=safe_loader(text))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if mark is not None:
            raise YamlEditError(problem, mark.line + 1, mark.column + 1) from None
        raise YamlEditError(problem) from None
    except yaml.YAMLError as exc:
        raise YamlEditError(str(exc)) from None


def load(text):
    """The data of ``text``, parsed by the loader that gives its marks (the same verdicts)."""
    try:
        return yaml.load(text, Loader=safe_loader(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        if mark is not None:
            raise YamlEditError(problem, mark.line + 1, mark.column + 1) from None
        raise YamlEditError(problem) from None


def root_mapping(text):
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


def walk(root, path):
    """Follow ``path``: (chain, rest) where chain holds (key_node, node) per found step."""
    chain = [(None, root)]
    for index, key in enumerate(path):
        child = _find_child(chain[-1][1], key)
        if child is None:
            return chain, list(path[index:])
        chain.append(child)
    return chain, []


# ---------------------------------------------------------------- text helpers


def start_of_line(text, index):
    return text.rfind("\n", 0, index) + 1


def end_of_line(text, index):
    end = text.find("\n", index)
    return len(text) if end < 0 else end


def is_null(node):
    return isinstance(node, yaml.ScalarNode) and node.tag == _NULL_TAG


def content_end(node, text):
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
        if is_null(value_node) and value_node.start_mark.index == value_node.end_mark.index:
            return colon_after(key_node, text) + 1
        return content_end(value_node, text)
    return content_end(last, text)


def colon_after(key_node, text):
    """Index of the ':' that ends a mapping key."""
    index = text.find(":", key_node.end_mark.index)
    if index < 0:
        raise YamlEditError("cannot find ':' after key", key_node.end_mark.line + 1, key_node.end_mark.column)
    return index


def render_scalar(value, style=None):
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


def render_flow(value):
    if isinstance(value, dict):
        return "{" + ", ".join(f"{render_scalar(k)}: {render_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(render_flow(v) for v in value) + "]"
    return render_scalar(value)


def render_block(value, column, step, seq_offset):
    """Block lines (no leading/trailing newline) for a value nested at ``column``.

    ``value`` is ``{key: ...}`` or a list; scalars are rendered inline by callers.
    A mapping that is a list item is written in block style after its dash
    (``- name: x`` with the other keys aligned under ``name``).
    """
    pad = " " * column
    lines = []
    if isinstance(value, dict):
        for key, child in value.items():
            head = f"{pad}{render_scalar(key)}:"
            if isinstance(child, dict) and child:
                lines.append(head)
                lines.append(render_block(child, column + step, step, seq_offset))
            elif isinstance(child, (list, tuple)) and child:
                lines.append(head)
                lines.append(render_block(list(child), column + seq_offset, step, seq_offset))
            else:
                lines.append(f"{head} {render_flow(child)}")
    else:
        for item in value:
            if isinstance(item, dict) and item:
                inner = render_block(item, column + 2, step, seq_offset)
                lines.append(f"{pad}- {inner[column + 2:]}")
            else:
                lines.append(f"{pad}- {render_flow(item)}")
    return "\n".join(lines)


def nest(rest, value):
    for key in reversed(rest):
        value = {key: value}
    return value


def indent_steps(root, text):
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
                    dash_col = dash - start_of_line(text, dash)
                    if seq is None and dash_col >= col:
                        seq = dash_col - col
                stack.append(value_node)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return step or 2, 2 if seq is None else seq


def step_below(chain, fallback):
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


def data_set(data, path, value):
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


def data_get(data, path, default=MISSING):
    node = data
    for key in path:
        in_dict = isinstance(node, dict) and key in node
        in_list = isinstance(node, list) and isinstance(key, int) and -len(node) <= key < len(node)
        if not (in_dict or in_list):
            return default
        node = node[key]
    return node


def data_remove(data, path):
    parent = data_get(data, path[:-1], None)
    if isinstance(parent, dict):
        parent.pop(path[-1], None)
    elif isinstance(parent, list):
        del parent[path[-1]]
    return data


def splice(text, edits):
    for start, end, replacement in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def checked(new_text, expected, what):
    loaded = load(new_text)
    if loaded is None:
        loaded = {}
    if expected is None:
        expected = {}
    if loaded != expected:
        raise YamlEditError(f"{what}: the edited text would not load to the expected data; nothing changed")
    return new_text


def existing(text, path):
    """``(path as a list, chain of (key_node, node))``; the chain is None when ``path`` is absent."""
    path = list(path)
    if not path:
        raise YamlEditError("empty path")
    chain, rest = walk(root_mapping(text), path)
    return path, None if rest else chain


def keeps_crlf(function):
    """Edit a file with CRLF line ends as LF text and give it back with CRLF."""

    @functools.wraps(function)
    def wrapper(text, *args, **kwargs):
        if "\r\n" in text and text.count("\r\n") == text.count("\n"):
            return function(text.replace("\r\n", "\n"), *args, **kwargs).replace("\n", "\r\n")
        return function(text, *args, **kwargs)

    return wrapper
