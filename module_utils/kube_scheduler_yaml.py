"""Comment-preserving edits of YAML text, located with ``yaml.compose`` marks.

Every edit is a text splice: the lines around it (comments, indentation, quoting,
line ends, a missing final newline) are left as they were. After each splice the
result is parsed again and compared with the same change applied to the parsed
data; a splice that would mean anything else raises ``YamlSpliceError``, so a
caller never writes a file whose meaning differs from what it planned.

Paths are tuples of mapping keys (str) and sequence indexes (int). Where a key
occurs twice in a mapping, the last one counts, as in ``yaml.safe_load``.

Standard library and PyYAML only: this runs on target hosts.
"""

import copy

import yaml


class YamlSpliceError(ValueError):
    """The edit cannot be made as a text splice (the caller may re-dump instead)."""


def load(text):
    return yaml.safe_load(text)


def _compose(text):
    return yaml.compose(text, Loader=yaml.SafeLoader)


def _eol(text):
    return "\r\n" if "\r\n" in text else "\n"


def _line_start(text, index):
    return text.rfind("\n", 0, index) + 1


def _line_end(text, index):
    end = text.find("\n", index)
    return len(text) if end < 0 else end + 1


def _child(node, key):
    if isinstance(node, yaml.MappingNode):
        found = None
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                found = (key_node, value_node)
        return found
    if (
        isinstance(node, yaml.SequenceNode)
        and isinstance(key, int)
        and -len(node.value) <= key < len(node.value)
    ):
        return None, node.value[key]
    return None


def find(root, path):
    """(key_node, node) at path, or None."""
    key_node, node = None, root
    for key in path:
        found = _child(node, key)
        if found is None:
            return None
        key_node, node = found
    return key_node, node


def _data_at(data, path):
    for key in path:
        data = data[key]
    return data


def _is_block(node):
    return isinstance(node, yaml.CollectionNode) and not node.flow_style and node.value


def _content_end(text, node):
    """Index just after the last line that holds node's content (its trailing comment included)."""
    last = node
    while _is_block(last):
        last = last.value[-1][1] if isinstance(last, yaml.MappingNode) else last.value[-1]
    end = last.end_mark.index
    if isinstance(last, yaml.ScalarNode) and last.style in ("|", ">"):
        # a block scalar ends at the start of the next line; trailing blank lines are not its content
        while (
            end > 0 and text[end - 1] in "\r\n" and text[_line_start(text, end - 1) : end - 1].strip() == ""
        ):
            end = _line_start(text, end - 1)
        return end if end == 0 or text[end - 1] == "\n" else _line_end(text, end)
    return _line_end(text, max(end - 1, last.start_mark.index))


def _dump(value, flow):
    out = yaml.safe_dump(
        value, default_flow_style=flow, sort_keys=False, width=float("inf"), allow_unicode=True
    )
    if out.endswith("\n...\n"):
        out = out[: -len("\n...\n")]
    return out.rstrip("\n")


def _flow(value):
    return _dump(value, True)


def _insert_lines(text, index, lines):
    """Insert whole lines (without line ends) at index, a line start or len(text)."""
    eol = _eol(text)
    block = eol.join(lines)
    if index >= len(text):
        if text and not text.endswith("\n"):
            return text + eol + block  # keep the missing final newline missing
        return text + block + eol
    return text[:index] + block + eol + text[index:]


def _checked(text, new_text, mutate, what):
    expected = copy.deepcopy(load(text))
    expected = mutate(expected)
    try:
        got = load(new_text)
    except yaml.YAMLError as exc:
        raise YamlSpliceError(f"{what}: the splice does not parse ({exc})") from exc
    if got != expected:
        raise YamlSpliceError(f"{what}: the splice would change more than intended")
    return new_text


def _seq_item_lines(text, seq, item):
    """Render item as block lines matching the dash column and gap of seq's items."""
    ref = seq.value[-1]
    start = ref.start_mark.index
    prefix = text[_line_start(text, start) : start]
    dash = prefix.rfind("-")
    if dash < 0:
        raise YamlSpliceError("sequence item without a dash on its line")
    gap = len(prefix) - dash
    lines = _dump([item], False).split("\n")
    out = []
    for n, line in enumerate(lines):
        if n == 0:
            out.append(" " * dash + "-" + " " * (gap - 1) + line[2:])
        else:
            out.append(" " * (dash + gap) + line[2:])
    return out


def _mapping_column(mapping):
    return mapping.value[0][0].start_mark.column


def _key_lines(key, value, column, seq_indent):
    lines = _dump({key: value}, False).split("\n")
    return [" " * column + (" " * seq_indent if n else "") + line for n, line in enumerate(lines)]


def _flow_replace(text, node, new_value):
    return text[: node.start_mark.index] + _flow(new_value) + text[node.end_mark.index :]


def append(text, path, item):
    """Append item to the sequence at path (block or flow)."""
    root = _compose(text)
    found = find(root, path)
    if found is None or not isinstance(found[1], yaml.SequenceNode):
        raise YamlSpliceError(f"no sequence at {'.'.join(map(str, path))}")
    seq = found[1]
    if seq.flow_style or not seq.value:
        current = _data_at(load(text), path)
        new = _flow_replace(text, seq, [*current, item])
    else:
        new = _insert_lines(text, _content_end(text, seq), _seq_item_lines(text, seq, item))

    def mutate(data):
        _data_at(data, path).append(item)
        return data

    return _checked(text, new, mutate, "append")


def set_key(text, path, value, seq_indent=0):
    """Set mapping key path[-1] under the mapping at path[:-1] (created keys go last)."""
    parent_path, key = tuple(path[:-1]), path[-1]
    root = _compose(text)
    if root is None and not parent_path:
        new = "\n".join(_key_lines(key, value, 0, seq_indent)) + "\n"
        return _checked(text, new, lambda data: {key: value}, "set")
    found = find(root, parent_path)
    if found is None or not isinstance(found[1], yaml.MappingNode):
        raise YamlSpliceError(f"no mapping at {'.'.join(map(str, parent_path)) or 'the top'}")
    mapping = found[1]
    existing = _child(mapping, key)
    if existing is not None:
        old = existing[1]
        scalar_new = not isinstance(value, dict | list) or not value
        if (
            isinstance(old, yaml.ScalarNode)
            and old.style not in ("|", ">")
            and old.value != ""
            and scalar_new
        ):
            new = text[: old.start_mark.index] + _flow(value) + text[old.end_mark.index :]
        elif isinstance(old, yaml.CollectionNode) and old.flow_style and scalar_new:
            new = _flow_replace(text, old, value)
        elif (
            isinstance(old, yaml.ScalarNode)
            and old.value == ""
            and old.style is None
            and old.start_mark.index == old.end_mark.index
        ):
            # "key:" with nothing after it: the value goes on the following lines
            column = existing[0].start_mark.column
            nested = _dump(value, False).split("\n")
            shift = column + (seq_indent if isinstance(value, list) else 2)
            nested = [" " * shift + line for line in nested]
            new = _insert_lines(text, _line_end(text, old.end_mark.index), nested)
        else:
            raise YamlSpliceError(f"cannot replace the value of {key} in place")
    elif mapping.flow_style or not mapping.value:
        current = dict(_data_at(load(text), parent_path) or {})
        current[key] = value
        new = _flow_replace(text, mapping, current)
    else:
        lines = _key_lines(key, value, _mapping_column(mapping), seq_indent)
        new = _insert_lines(text, _content_end(text, mapping), lines)

    def mutate(data):
        if not parent_path and data is None:
            return {key: value}
        _data_at(data, parent_path)[key] = value
        return data

    return _checked(text, new, mutate, "set")


def _remove_block_span(text, start_node_index, end_node, allowed_prefix):
    line_start = _line_start(text, start_node_index)
    prefix = text[line_start:start_node_index]
    if prefix.strip(" ") not in allowed_prefix:
        raise YamlSpliceError("the item shares its line with other content")
    end = _content_end(text, end_node)
    new = text[:line_start] + text[end:]
    if end >= len(text) and line_start > 0 and not text.endswith("\n"):
        # the removed item was the last line of a file without a final newline
        new = new[: -len(_eol(text))] if new.endswith(_eol(text)) else new
    return new


def remove(text, path):
    """Remove the mapping key or sequence item at path."""
    parent_path, key = tuple(path[:-1]), path[-1]
    root = _compose(text)
    found = find(root, parent_path)
    if found is None:
        raise YamlSpliceError(f"nothing at {'.'.join(map(str, parent_path))}")
    parent = found[1]
    child = _child(parent, key)
    if child is None:
        raise YamlSpliceError(f"nothing at {'.'.join(map(str, path))}")
    key_node, node = child

    def mutate(data):
        del _data_at(data, parent_path)[key]
        return data

    if parent.flow_style:
        current = copy.deepcopy(_data_at(load(text), parent_path))
        del current[key]
        new = _flow_replace(text, parent, current)
    elif len(parent.value) == 1:
        raise YamlSpliceError("removing the only entry would leave an empty block")
    elif isinstance(parent, yaml.SequenceNode):
        new = _remove_block_span(text, node.start_mark.index, node, ("-",))
    else:
        new = _remove_block_span(text, key_node.start_mark.index, node, ("",))
    return _checked(text, new, mutate, "remove")


def replace_item(text, path, item):
    """Replace the block sequence item at path by item, in the same place."""
    parent_path, index = tuple(path[:-1]), path[-1]
    root = _compose(text)
    found = find(root, parent_path)
    if found is None or not isinstance(found[1], yaml.SequenceNode):
        raise YamlSpliceError(f"no sequence at {'.'.join(map(str, parent_path))}")
    seq = found[1]
    node = seq.value[index]
    if seq.flow_style:
        current = copy.deepcopy(_data_at(load(text), parent_path))
        current[index] = item
        new = _flow_replace(text, seq, current)
    else:
        line_start = _line_start(text, node.start_mark.index)
        if text[line_start : node.start_mark.index].strip(" ") != "-":
            raise YamlSpliceError("the item shares its line with other content")
        lines = _seq_item_lines(text, seq, item)
        end = _content_end(text, node)
        eol = _eol(text)
        tail = text[end:]
        block = eol.join(lines) + (eol if end < len(text) or text.endswith("\n") else "")
        new = text[:line_start] + block + tail

    def mutate(data):
        _data_at(data, parent_path)[index] = item
        return data

    return _checked(text, new, mutate, "replace")


def sequence_indent(text):
    """How far the file indents block sequences under their key (0 for kubeadm style)."""
    root = _compose(text)
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key_node, value in node.value:
                if _is_block(value) and isinstance(value, yaml.SequenceNode):
                    start = value.value[0].start_mark.index
                    prefix = text[_line_start(text, start) : start]
                    return max(prefix.rfind("-") - key_node.start_mark.column, 0)
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return 0
