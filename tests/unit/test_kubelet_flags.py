"""kubelet_flags: --feature-gates in env files and systemd drop-ins, over the real corpus."""

import string

import pytest
from ansible.module_utils.gpunode.kubelet.flags import (
    FlagsError,
    detect_format,
    flag_containers,
    read_flags_gates,
    read_gate_values,
    set_gate_string,
    split_words,
)
from conftest import FIXTURES, examples, shared_files
from hypothesis import given, settings
from hypothesis import strategies as st

CORPUS = [
    p
    for p in shared_files("kubelet") + sorted((FIXTURES / "kubelet").glob("flags-*"))
    if "config.yaml" not in p.name and not p.name.startswith("MALFORMED-")
]
MALFORMED = shared_files("kubelet", "MALFORMED-*") + sorted((FIXTURES / "kubelet").glob("MALFORMED-*"))


def ids(path):
    return path.name


def other_words(text, fmt):
    """Every word of every place holding flags, except the --feature-gates ones."""
    containers, _ = flag_containers(text, fmt)
    words = []
    for container in containers:
        skip = False
        for word in split_words(text, container.start, container.end):
            if skip:
                skip = False
                continue
            if word.value == "--feature-gates":
                skip = True
                continue
            if not word.value.startswith("--feature-gates="):
                words.append((container.label, word.value))
    return words


@pytest.mark.parametrize("path", CORPUS, ids=ids)
def test_set_gates_in_real_files(path):
    text = path.read_text()
    fmt = detect_format(text)
    before = read_flags_gates(text, fmt)
    wanted = {**before, "DevicePlugins": True}
    new, where = set_gate_string(text, fmt, ",".join(f"{k}={str(v).lower()}" for k, v in wanted.items()))
    assert where
    assert read_flags_gates(new, fmt) == wanted
    # one flag only, every other flag untouched and in order
    assert len(read_gate_values(new, fmt)) == 1
    assert other_words(new, fmt) == other_words(text, fmt)
    # one line rewritten at most (or one added), every other line byte-for-byte the same
    old_lines, new_lines = text.splitlines(), new.splitlines()
    assert len([line for line in old_lines if line not in new_lines]) <= 1
    assert len(new_lines) - len(old_lines) in (0, 1)
    assert new.endswith("\n") == text.endswith("\n")
    # and a second run is a no-op
    again, _ = set_gate_string(new, fmt, ",".join(f"{k}={str(v).lower()}" for k, v in wanted.items()))
    assert again == new


@pytest.mark.parametrize("path", MALFORMED, ids=ids)
def test_malformed_files_fail_with_the_line(path):
    text = path.read_text()
    with pytest.raises(FlagsError) as err:
        set_gate_string(text, detect_format(text), "DevicePlugins=true")
    assert err.value.line is not None
    assert f"line {err.value.line}" in str(err.value)


def test_quoted_gates_keep_their_quotes_and_other_flags():
    text = "KUBELET_EXTRA_ARGS=--feature-gates=\"A=false,B=true\" --endpoint='unix:///x.sock' --v=2"
    assert read_flags_gates(text, "env") == {"A": False, "B": True}
    new, where = set_gate_string(text, "env", "A=false,B=true,DevicePlugins=true")
    assert new == (
        'KUBELET_EXTRA_ARGS=--feature-gates="A=false,B=true,DevicePlugins=true" '
        "--endpoint='unix:///x.sock' --v=2"
    )
    assert where == "KUBELET_EXTRA_ARGS"


def test_repeated_flags_are_merged_into_the_first():
    text = 'KUBELET_EXTRA_ARGS="--feature-gates=A=true --v=2 --feature-gates B=false"\n'
    assert read_flags_gates(text, "env") == {"A": True, "B": False}
    new, _ = set_gate_string(text, "env", "A=true,B=false")
    assert new == 'KUBELET_EXTRA_ARGS="--feature-gates=A=true,B=false --v=2"\n'


def test_continuation_lines_are_followed():
    text = 'KUBELET_ARGS="--a=1 \\\n--b=2 \\\n--feature-gates=X=true"\n'
    assert read_flags_gates(text, "env") == {"X": True}
    new, _ = set_gate_string(text, "env", "X=false")
    assert new == 'KUBELET_ARGS="--a=1 \\\n--b=2 \\\n--feature-gates=X=false"\n'


def test_empty_or_missing_env_file_gets_a_variable():
    assert set_gate_string("", "env", "A=true")[0] == "KUBELET_EXTRA_ARGS=--feature-gates=A=true\n"
    text = "# managed by hand\n"
    assert set_gate_string(text, "env", "A=true")[0] == text + "KUBELET_EXTRA_ARGS=--feature-gates=A=true\n"


def test_an_env_file_with_other_variables_never_gets_an_invented_one():
    with pytest.raises(FlagsError, match=r"sets OTHER, PATH; none is KUBELET_EXTRA_ARGS\): set flags_var"):
        set_gate_string("# managed by hand\nOTHER=1\nPATH=/usr/bin", "env", "A=true")


def test_removing_the_last_gate_removes_the_flag():
    text = 'KUBELET_EXTRA_ARGS="--v=2 --feature-gates=DevicePlugins=true"\n'
    assert set_gate_string(text, "env", "")[0] == 'KUBELET_EXTRA_ARGS="--v=2"\n'


def test_flag_in_execstart_is_edited_in_place():
    text = "[Service]\nExecStart=\nExecStart=/usr/bin/kubelet --feature-gates=A=true $KUBELET_EXTRA_ARGS\n"
    new, where = set_gate_string(text, "systemd", "A=true,B=true")
    assert where == "ExecStart"
    assert new == text.replace("A=true $", "A=true,B=true $")


def test_dropin_without_the_variable_gets_an_environment_line_before_execstart():
    text = "[Service]\nExecStart=\nExecStart=/usr/bin/kubelet $KUBELET_EXTRA_ARGS\n"
    new, _ = set_gate_string(text, "systemd", "DevicePlugins=true")
    assert new == (
        '[Service]\nEnvironment="KUBELET_EXTRA_ARGS=--feature-gates=DevicePlugins=true"\n'
        "ExecStart=\nExecStart=/usr/bin/kubelet $KUBELET_EXTRA_ARGS\n"
    )


def test_unit_that_does_not_pass_the_variable_gets_the_flag_in_execstart():
    text = "[Service]\nExecStart=/usr/bin/kubelet --v=2\nRestart=always\n"
    new, where = set_gate_string(text, "systemd", "A=true")
    assert where == "ExecStart"
    assert "ExecStart=/usr/bin/kubelet --v=2 --feature-gates=A=true\n" in new


@pytest.mark.parametrize(
    ("text", "fmt", "line"),
    [
        ("KUBELET_EXTRA_ARGS=ok\nthis is not an assignment\n", "env", 2),
        ('KUBELET_EXTRA_ARGS="--v=2\n', "env", 1),
        ("Environment=A=1\n[Service]\n", "systemd", 1),
        ("[Service]\nExecStart=/usr/bin/kubelet '--x\n", "systemd", 2),
    ],
)
def test_bad_files_name_the_line(text, fmt, line):
    with pytest.raises(FlagsError) as err:
        set_gate_string(text, fmt, "A=true")
    assert err.value.line == line


FLAG_NAMES = st.text(alphabet=string.ascii_lowercase + "-", min_size=1, max_size=10).filter(
    lambda s: not s.startswith("-") and s != "feature-gates"
)
FLAG_VALUES = st.text(alphabet=string.ascii_letters + string.digits + "/:.,=_", max_size=12)
FLAGS = st.lists(st.tuples(FLAG_NAMES, FLAG_VALUES), max_size=6)
GATE_MAPS = st.dictionaries(
    st.sampled_from(["DevicePlugins", "Accelerators", "A", "B"]), st.booleans(), min_size=1, max_size=4
)


@settings(max_examples=examples(80), deadline=None)
@given(
    flags=FLAGS,
    old=st.one_of(st.none(), GATE_MAPS),
    new=GATE_MAPS,
    quote=st.sampled_from(['"', "'", ""]),
    position=st.integers(0, 6),
)
def test_property_merging_keeps_other_flags_and_is_idempotent(flags, old, new, quote, position):
    words = [f"--{name}={value}" for name, value in flags]
    if old is not None:
        words.insert(
            min(position, len(words)), "--feature-gates=" + ",".join(f"{k}={v}" for k, v in old.items())
        )
    text = f"# kubelet flags\nKUBELET_EXTRA_ARGS={quote}{' '.join(words)}{quote}\n"
    gate_string = ",".join(f"{k}={str(v).lower()}" for k, v in new.items())
    out, _ = set_gate_string(text, "env", gate_string)
    assert read_flags_gates(out, "env") == new
    assert other_words(out, "env") == other_words(text, "env")
    assert out.startswith("# kubelet flags\n")
    assert set_gate_string(out, "env", gate_string)[0] == out
