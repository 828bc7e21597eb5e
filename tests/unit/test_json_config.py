"""module_utils/json_config: the merge, over real daemon.json files and properties."""

import json

import pytest
from ansible.module_utils.gpunode.formats.json_config import (
    JSONConfigError,
    deep_merge,
    detect_indent,
    equal,
    parse,
    plan,
)
from conftest import FIXTURES, examples, shared_files
from hypothesis import given, settings
from hypothesis import strategies as st

NVIDIA = {
    "default-runtime": "nvidia",
    "runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "runtimeArgs": []}},
}

OWN = FIXTURES / "docker"
VALID = sorted(OWN.glob("daemon.json-*")) + shared_files("docker", "daemon.json-*")
MALFORMED = sorted(OWN.glob("MALFORMED-daemon.json-*")) + shared_files("docker", "MALFORMED-daemon.json-*")


def _leaves(data, prefix=()):
    """(path, value) for every non-object value, and every empty object."""
    if isinstance(data, dict) and data:
        for key, value in data.items():
            yield from _leaves(value, (*prefix, key))
    else:
        yield prefix, data


def _get(data, path):
    for key in path:
        data = data[key]
    return data


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_real_files_merge_keeps_every_other_key(path):
    text = path.read_text(encoding="utf-8")
    before = json.loads(text)
    changed, new_text, config = plan(text, NVIDIA, str(path), docker=True)

    after = json.loads(new_text)
    assert equal(after, config)
    assert after["default-runtime"] == "nvidia"
    assert after["runtimes"]["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"
    for leaf, value in _leaves(before):
        if leaf[:1] == ("default-runtime",) or leaf[:2] == ("runtimes", "nvidia"):
            continue
        assert equal(_get(after, leaf), value), leaf
    # changed exactly when the file did not already say what we want
    assert changed == (not equal(before, config))
    assert new_text.endswith("\n")


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_real_files_second_merge_is_converged(path):
    _, once, _ = plan(path.read_text(encoding="utf-8"), NVIDIA, str(path), docker=True)
    changed, twice, _ = plan(once, NVIDIA, str(path), docker=True)
    assert not changed
    assert twice == once


def test_already_converged_file_text_is_kept_as_is():
    text = '{ "default-runtime": "nvidia", "runtimes": { "nvidia": {\n'
    text += '"path": "/usr/bin/nvidia-container-runtime", "runtimeArgs": [] } } }'
    changed, new_text, _ = plan(text, NVIDIA, "daemon.json", docker=True)
    assert not changed
    assert new_text == text


def test_args_style_runtime_is_left_alone_when_equal():
    path = OWN / "daemon.json-tabs-args-style-no-final-newline"
    text = path.read_text(encoding="utf-8")
    settings = {"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "runtimeArgs": []}}}
    changed, _, config = plan(text, settings, str(path), docker=True)
    assert not changed
    assert "runtimeArgs" not in config["runtimes"]["nvidia"]


def test_args_style_runtime_gets_runtime_args_when_different():
    text = '{"runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}}'
    settings = {"runtimes": {"nvidia": {"runtimeArgs": ["--debug"]}}}
    changed, _, config = plan(text, settings, "daemon.json", docker=True)
    assert changed
    assert config["runtimes"]["nvidia"] == {
        "args": [],
        "path": "nvidia-container-runtime",
        "runtimeArgs": ["--debug"],
    }


def test_without_docker_rules_args_style_is_not_special():
    text = '{"runtimes": {"nvidia": {"args": []}}}'
    changed, _, config = plan(text, {"runtimes": {"nvidia": {"runtimeArgs": []}}}, "x.json")
    assert changed
    assert config["runtimes"]["nvidia"] == {"args": [], "runtimeArgs": []}


@pytest.mark.parametrize("path", MALFORMED, ids=lambda p: p.name)
def test_malformed_files_name_the_file_and_position(path):
    with pytest.raises(JSONConfigError) as err:
        plan(path.read_text(encoding="utf-8"), NVIDIA, str(path), docker=True)
    message = str(err.value)
    assert message.startswith(f"{path}: ")
    if "top level" not in message:
        assert " line " in message
        assert " column " in message


def test_position_points_at_the_error():
    # the trailing comma: reported at the closing brace up to Python 3.12, at the comma from 3.13
    with pytest.raises(JSONConfigError, match=r"x\.json: line (3 column 1|2 column 9): "):
        parse('{\n  "a": 1,\n}\n', "x.json")
    with pytest.raises(JSONConfigError, match=r"x\.json: line 2 column 8: "):
        parse('{\n  "a": ,\n}\n', "x.json")


@pytest.mark.parametrize("text", [None, "", "  \n", "\n\n"])
def test_missing_or_empty_file_is_created(text):
    changed, new_text, config = plan(text, {"debug": True}, "daemon.json")
    assert changed
    assert config == {"debug": True}
    assert json.loads(new_text) == {"debug": True}


def test_empty_settings_on_missing_file_still_creates_an_object():
    changed, new_text, _ = plan(None, {}, "daemon.json")
    assert changed
    assert new_text == "{}\n"


def test_type_change_is_a_change():
    changed, _, config = plan('{"debug": 1}', {"debug": True}, "daemon.json")
    assert changed
    assert config["debug"] is True


def test_non_object_settings_are_refused():
    with pytest.raises(JSONConfigError, match="settings must be a JSON object"):
        plan("{}", ["a"], "daemon.json")


def test_byte_order_mark_is_refused():
    with pytest.raises(JSONConfigError, match="byte order mark"):
        parse('\ufeff{"a": 1}', "daemon.json")


@pytest.mark.parametrize(
    ("text", "indent"),
    [('{\n\t"a": 1\n}', "\t"), ('{\n  "a": 1\n}', 2), ('{"a": 1}', 4), ('  {\n    "a": 1\n  }', 2)],
)
def test_indentation_is_kept(text, indent):
    assert detect_indent(text) == indent


def test_lists_are_replaced_not_appended():
    merged = deep_merge({"registry-mirrors": ["a", "b"]}, {"registry-mirrors": ["c"]})
    assert merged == {"registry-mirrors": ["c"]}


def test_merge_does_not_modify_its_inputs():
    current = {"a": {"b": [1]}}
    wanted = {"a": {"c": {"d": 1}}}
    merged = deep_merge(current, wanted)
    merged["a"]["c"]["d"] = 2
    assert current == {"a": {"b": [1]}}
    assert wanted == {"a": {"c": {"d": 1}}}


# --- properties -------------------------------------------------------------

KEYS = st.text(alphabet="abcdefgh-", min_size=1, max_size=4)
SCALARS = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)
OBJECTS = st.dictionaries(KEYS, VALUES, max_size=5)


@settings(max_examples=examples(150), deadline=None)
@given(current=OBJECTS, wanted=OBJECTS)
def test_property_merge_is_idempotent(current, wanted):
    text = json.dumps(current)
    _, once, config = plan(text, wanted, "daemon.json", docker=True)
    changed, twice, again = plan(once, wanted, "daemon.json", docker=True)
    assert not changed
    assert twice == once
    assert equal(again, config)


@settings(max_examples=examples(150), deadline=None)
@given(current=OBJECTS, wanted=OBJECTS)
def test_property_keys_not_named_are_untouched(current, wanted):
    merged = deep_merge(current, wanted)
    for key, value in current.items():
        if key not in wanted:
            assert equal(merged[key], value)
        elif isinstance(value, dict) and isinstance(wanted[key], dict):
            for inner, inner_value in value.items():
                if inner not in wanted[key]:
                    assert equal(merged[key][inner], inner_value)


@settings(max_examples=examples(150), deadline=None)
@given(current=OBJECTS, wanted=OBJECTS)
def test_property_every_wanted_leaf_is_in_the_result(current, wanted):
    merged = deep_merge(current, wanted)
    for leaf, value in _leaves(wanted):
        if leaf:
            got = _get(merged, leaf)
            if isinstance(value, dict):
                assert isinstance(got, dict)
            else:
                assert equal(got, value)

