"""yaml_edit: layout-preserving edits, checked against real hand-edited files."""

import difflib
import string

import pytest
import yaml
from ansible.module_utils.gpunode.formats.yaml_edit import (
    YamlEditError,
    append_to_list,
    get,
    remove_key,
    set_scalar,
)
from ansible.module_utils.gpunode.formats.yaml_load import safe_load
from conftest import FIXTURES, examples, shared_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

RKE1 = shared_files("rke", "rke1-*")
RKE2 = shared_files("rke", "rke2-*")
KUBELET_CONFIGS = shared_files("kubelet", "var-lib-kubelet-config.yaml-*")
OWN = sorted((FIXTURES / "kubelet").glob("*.yaml"))
ALL_YAML = RKE1 + RKE2 + KUBELET_CONFIGS + OWN
KUBELET_GATES = ["services", "kubelet", "extra_args", "feature-gates"]


def ids(path):
    return path.name


def changed_lines(old, new):
    """Lines of ``old`` that an edit removed or rewrote."""
    matcher = difflib.SequenceMatcher(a=old.splitlines(True), b=new.splitlines(True), autojunk=False)
    return [
        line
        for tag, i1, i2, _, _ in matcher.get_opcodes()
        if tag in ("delete", "replace")
        for line in old.splitlines(True)[i1:i2]
    ]


def test_set_scalar_replaces_only_the_value_and_keeps_quotes():
    text = 'a:\n  b: "old"  # keep me\n  c: 1\n'
    assert set_scalar(text, ["a", "b"], "new") == 'a:\n  b: "new"  # keep me\n  c: 1\n'
    single = "a: 'x'\n"
    assert set_scalar(single, ["a"], "y") == "a: 'y'\n"


def test_set_scalar_fills_a_null_value_and_an_empty_flow_mapping():
    assert set_scalar("a:\nb: 2\n", ["a"], "v") == "a: v\nb: 2\n"
    text = "s:\n  kubelet:\n    extra_args: {}\n    image: ''\n"
    out = set_scalar(text, ["s", "kubelet", "extra_args", "feature-gates"], "A=true")
    assert out == "s:\n  kubelet:\n    extra_args:\n      feature-gates: A=true\n    image: ''\n"


def test_set_scalar_adds_into_a_flow_mapping_with_entries():
    out = set_scalar("x: {a: 1}\n", ["x", "b"], 2)
    assert out == "x: {a: 1, b: 2}\n"


def test_set_scalar_under_a_null_key_creates_a_nested_block():
    out = set_scalar("cluster:  # comment\nz: 1\n", ["cluster", "a", "b"], True)
    assert out == "cluster:  # comment\n  a:\n    b: true\nz: 1\n"
    assert get(out, ["cluster", "a", "b"]) is True


def test_set_scalar_uses_the_files_indentation():
    text = "services:\n    etcd:\n        snapshot: true\n"
    out = set_scalar(text, ["services", "kubelet", "extra_args", "v"], 4)
    assert out.startswith(text)
    assert "\n    kubelet:\n" in out
    assert safe_load(out)["services"]["kubelet"] == {"extra_args": {"v": 4}}


def test_no_final_newline_is_kept():
    out = set_scalar("a: 1\nb: 2", ["c"], 3)
    assert out == "a: 1\nb: 2\nc: 3"
    assert set_scalar("a: 1", ["a"], 5) == "a: 5"


def test_empty_document_gets_the_key():
    assert set_scalar("", ["a", "b"], 1) == "a:\n  b: 1\n"
    assert set_scalar("# only a comment\n", ["a"], 1) == "# only a comment\na: 1\n"


def test_set_scalar_refuses_to_replace_a_mapping():
    with pytest.raises(YamlEditError, match="mapping"):
        set_scalar("a:\n  b: 1\n", ["a"], "x")


def test_set_scalar_refuses_to_descend_into_a_scalar():
    with pytest.raises(YamlEditError, match="not a mapping"):
        set_scalar("a: 1\n", ["a", "b"], "x")


@pytest.mark.parametrize(
    ("text", "line"),
    [("a: [1, 2\nb: 3\n", 2), ("a: 1\n b: 2\n", 2), ("a:\n\t- 1\n", 2), ("- 1\n- 2\n", None)],
)
def test_bad_input_raises_with_position(text, line):
    with pytest.raises(YamlEditError) as err:
        set_scalar(text, ["x"], 1)
    if line is not None:
        assert err.value.line == line
        assert f"line {line}" in str(err.value)


@pytest.mark.parametrize("path", shared_files("kube-scheduler", "MALFORMED-*"), ids=ids)
def test_malformed_shared_yaml_raises(path):
    with pytest.raises(YamlEditError):
        set_scalar(path.read_text(), ["x"], 1)


@pytest.mark.parametrize("path", RKE1, ids=ids)
def test_rke1_feature_gates_edit_touches_only_its_line(path):
    text = path.read_text()
    value = "DevicePlugins=true"
    out = set_scalar(text, KUBELET_GATES, value)
    assert get(out, KUBELET_GATES) == value
    old = get(text, KUBELET_GATES)
    removed = changed_lines(text, out)
    if old is None:
        # only an empty flow mapping may be rewritten, nothing else
        assert all("{}" in line for line in removed), removed
    else:
        assert len(removed) == 1
        assert "feature-gates" in removed[0]
    # everything else is still there, including the final-newline state
    assert out.endswith("\n") == text.endswith("\n")
    expected = safe_load(text)
    expected.setdefault("services", {}).setdefault("kubelet", {})
    kubelet = expected["services"]["kubelet"]
    if not kubelet.get("extra_args"):
        kubelet["extra_args"] = {}
    kubelet["extra_args"]["feature-gates"] = value
    assert safe_load(out) == expected
    # a second identical edit is a no-op
    assert set_scalar(out, KUBELET_GATES, value) == out


@pytest.mark.parametrize("path", RKE2, ids=ids)
def test_rke2_append_kubelet_arg_keeps_the_file(path):
    text = path.read_text()
    out = append_to_list(text, ["kubelet-arg"], "feature-gates=DevicePlugins=true")
    before = get(text, ["kubelet-arg"], [])
    assert get(out, ["kubelet-arg"]) == [*before, "feature-gates=DevicePlugins=true"]
    assert changed_lines(text, out) == [] or not text.endswith("\n")
    assert out.endswith("\n") == text.endswith("\n")
    # comments survive
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            assert line in out.splitlines()


def test_append_keeps_the_quoting_of_existing_items():
    text = 'kubelet-arg:\n  - "a=1"\n'
    assert append_to_list(text, ["kubelet-arg"], "b=2") == 'kubelet-arg:\n  - "a=1"\n  - "b=2"\n'


def test_append_turns_a_scalar_into_a_list_keeping_the_old_item():
    text = 'debug: true\nnode-label: "rke2"\n\n'
    out = append_to_list(text, ["node-label"], "gpu=true")
    assert out == 'debug: true\nnode-label:\n  - "rke2"\n  - "gpu=true"\n\n'


def test_append_to_flow_lists():
    assert append_to_list("node-taint: []\n", ["node-taint"], "a") == "node-taint:\n  - a\n"
    assert append_to_list("x: [a]\n", ["x"], "b") == "x: [a, b]\n"
    assert append_to_list("x:\n", ["x"], "b") == "x:\n  - b\n"


def test_append_follows_indentless_sequences():
    text = "a:\n- 1\nb:\n  c: 1\n"
    assert append_to_list(text, ["b", "d"], "x") == "a:\n- 1\nb:\n  c: 1\n  d:\n  - x\n"


def test_remove_key_takes_its_lines_only():
    text = "a:\n  # about b\n  b: 1\n  # about c\n  c: 2\n"
    assert remove_key(text, ["a", "b"]) == "a:\n  # about b\n  # about c\n  c: 2\n"
    assert remove_key(text, ["a", "zz"]) == text


def test_remove_last_key_leaves_an_empty_mapping():
    text = "extra_args:\n  feature-gates: A=true\nimage: x"
    out = remove_key(text, ["extra_args", "feature-gates"])
    assert out == "extra_args: {}\nimage: x"


def test_remove_list_items():
    text = 'kubelet-arg:\n  - "a=1"\n  - "feature-gates=X=true"\n'
    assert remove_key(text, ["kubelet-arg", 1]) == 'kubelet-arg:\n  - "a=1"\n'
    assert remove_key(text, ["kubelet-arg", 0]) == 'kubelet-arg:\n  - "feature-gates=X=true"\n'
    single = "x:\n  - a\ny: 1\n"
    assert remove_key(single, ["x", 0]) == "x: []\ny: 1\n"
    assert remove_key("x: [a, b, c]\n", ["x", 1]) == "x: [a, c]\n"
    assert remove_key("x: {a: 1, b: 2}\n", ["x", "a"]) == "x: {b: 2}\n"


def test_remove_first_key_of_a_sequence_item_mapping():
    text = "nodes:\n- address: a\n  user: u\n"
    assert remove_key(text, ["nodes", 0, "address"]) == "nodes:\n- user: u\n"


def test_get():
    text = "a:\n  b: [1, 2]\n"
    assert get(text, ["a", "b", 1]) == 2
    assert get(text, ["a", "x"], "d") == "d"
    assert get("", ["a"]) is None


# ---------------------------------------------------------------- properties

KEYS = st.text(alphabet=string.ascii_lowercase + "-_", min_size=1, max_size=8).filter(
    lambda k: k not in ("y", "n", "yes", "no", "on", "off", "null", "true", "false")
)
SCALARS = st.one_of(
    st.booleans(),
    st.integers(-1000, 1000),
    st.text(alphabet=string.ascii_letters + string.digits + "=,.:/ -", max_size=20),
)
TREES = st.recursive(
    SCALARS,
    lambda children: st.dictionaries(KEYS, children, min_size=1, max_size=4),
    max_leaves=12,
).filter(lambda t: isinstance(t, dict))


def _dump(tree, indent):
    body = yaml.safe_dump(tree, default_flow_style=False, indent=indent, sort_keys=False)
    # a comment after each top-level entry: edits must keep them all
    return "".join(line + ("  # note\n" if not line.startswith(" ") else "\n") for line in body.splitlines())


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=TREES, path=st.lists(KEYS, min_size=1, max_size=3), value=SCALARS, indent=st.sampled_from([2, 4]))
def test_property_set_scalar_loads_as_expected_and_is_idempotent(tree, path, value, indent):
    text = _dump(tree, indent)
    try:
        out = set_scalar(text, path, value)
    except YamlEditError as exc:
        # only refused where the path runs through a scalar or ends on a collection
        node = tree
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
            if not isinstance(node, dict):
                break
        assert "not a mapping" in str(exc) or "not replaced" in str(exc)
        return
    assert get(out, path) == value
    assert set_scalar(out, path, value) == out
    assert out.count("# note") == text.count("# note")


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    doc=st.sampled_from(ALL_YAML or [None]),
    key=KEYS,
    value=SCALARS,
)
def test_property_add_then_remove_restores_the_file(doc, key, value):
    if doc is None:
        pytest.skip("no corpus")
    text = doc.read_text()
    if get(text, [key]) is not None or key in (safe_load(text) or {}):
        return
    added = set_scalar(text, [key], value)
    assert remove_key(added, [key]) == text
