"""kube_scheduler_yaml: splices keep every other line and mean exactly the planned change."""

import yaml
from ansible.module_utils import kube_scheduler_yaml as ky
from hypothesis import given, settings
from hypothesis import strategies as st

KEYS = st.sampled_from(["a", "b", "name", "path", "mountPath", "readOnly", "x-y"])
SCALARS = st.one_of(st.booleans(), st.integers(-5, 500),
                    st.sampled_from(["", "v", "--flag=1", "a: b", "#x", "/p"]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, min_size=1, max_size=3), st.dictionaries(KEYS, inner, min_size=1, max_size=3)),
    max_leaves=8)


def with_comments(text):
    """Put a full-line comment before every line and a trailing comment on scalar lines."""
    out = []
    for n, line in enumerate(text.splitlines()):
        indent = len(line) - len(line.lstrip())
        out.append(" " * indent + f"# note {n}")
        stripped = line.rstrip()
        trailing = not stripped.endswith((":", "|", ">", "-")) and "'" not in stripped and '"' not in stripped
        out.append(f"{line}  # t{n}" if trailing else line)
    return "\n".join(out) + "\n"


def is_subsequence(small, big):
    it = iter(big)
    return all(any(line == other for other in it) for line in small)


@settings(max_examples=60, deadline=None)
@given(st.lists(SCALARS, min_size=1, max_size=4), VALUES, st.sampled_from([0, 2, 4]))
def test_append_keeps_lines_and_means_the_append(items, item, indent):
    class Dumper(yaml.SafeDumper):
        def increase_indent(self, flow=False, indentless=False):
            return super().increase_indent(flow, indentless and indent == 0)

    text = with_comments(yaml.dump({"top": {"list": items}, "z": 1}, Dumper=Dumper, indent=max(indent, 2),
                                   sort_keys=False))
    try:
        new = ky.append(text, ("top", "list"), item)
    except ky.YamlSpliceError:
        return  # refused: the caller re-dumps; never a wrong file
    data = yaml.safe_load(new)
    assert data["top"]["list"] == [*items, item] and data["z"] == 1
    assert is_subsequence(text.splitlines(), new.splitlines())
    back = ky.remove(new, ("top", "list", len(items)))
    assert back == text


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(KEYS, SCALARS, min_size=1, max_size=4), KEYS, VALUES)
def test_set_key_keeps_lines(mapping, key, value):
    text = with_comments(yaml.safe_dump({"outer": mapping, "tail": [1, 2]}, sort_keys=False))
    try:
        new = ky.set_key(text, ("outer", key), value)
    except ky.YamlSpliceError:
        return
    expected = {"outer": {**mapping, key: value}, "tail": [1, 2]}
    assert yaml.safe_load(new) == expected
    if key not in mapping:
        assert is_subsequence(text.splitlines(), new.splitlines())


def test_flow_sequence_and_missing_final_newline():
    text = "command: [kube-scheduler, --v=2]  # flow\nname: x"
    new = ky.append(text, ("command",), "--config=/etc/k.yaml")
    assert yaml.safe_load(new)["command"][-1] == "--config=/etc/k.yaml"
    assert new.endswith("name: x") and "# flow" in new


def test_crlf_is_kept():
    text = "list:\r\n- a  # one\r\n- b\r\nother: 1\r\n"
    new = ky.append(text, ("list",), "c")
    assert new == "list:\r\n- a  # one\r\n- b\r\n- c\r\nother: 1\r\n"
    assert ky.remove(new, ("list", 2)) == text


def test_refuses_what_it_cannot_splice():
    text = "list:\n- only\n"
    try:
        ky.remove(text, ("list", 0))
    except ky.YamlSpliceError as exc:
        assert "empty" in str(exc)
    else:
        raise AssertionError("removing the only item of a block list must be refused")
