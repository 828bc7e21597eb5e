"""yaml_load: libyaml's loader wherever its marks are the pure loader's, and the YAML editor
cutting at the right places under either loader (non-ASCII text, CRLF, a BOM)."""

import re

import pytest
import yaml
from ansible.module_utils.gpunode.formats import yaml_load, yaml_text
from ansible.module_utils.gpunode.formats.yaml_edit import (
    append_to_list,
    edit,
    remove_key,
    set_scalar,
    set_value,
)
from conftest import FIXTURES, ROOT, shared_files

HAS_LIBYAML = getattr(yaml, "CSafeLoader", None) is not None
WITHOUT_LIBYAML = "this PyYAML was built without libyaml (no CSafeLoader)"
needs_libyaml = pytest.mark.skipif(not HAS_LIBYAML, reason=WITHOUT_LIBYAML)
BOM = "\ufeff"


@pytest.fixture(params=["pure", "libyaml", "libyaml-forced"])
def loader(request, monkeypatch):
    """Which loader gives the editor its marks.

    pure: a PyYAML without libyaml (a node's distribution package may be one);
    libyaml: as shipped, ``safe_loader`` choosing per text;
    libyaml-forced: libyaml's marks whatever the text (what the rule avoids on a BOM).
    """
    if request.param == "pure":
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    elif not HAS_LIBYAML:
        pytest.skip(WITHOUT_LIBYAML)
    elif request.param == "libyaml-forced":
        monkeypatch.setattr(yaml_text, "safe_loader", lambda text=None: yaml.CSafeLoader)
    return request.param


# ---------------------------------------------------------------- the choice


def test_without_libyaml_every_text_gets_the_pure_loader(monkeypatch):
    monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    for text in (None, "a: 1\n", "ä: 1\n", BOM + "a: 1\n"):
        assert yaml_load.safe_loader(text) is yaml.SafeLoader
    assert yaml_load.safe_load("a: [1, 2]\n") == {"a": [1, 2]}
    assert list(yaml_load.safe_load_all("a: 1\n---\nb: 2\n")) == [{"a": 1}, {"b": 2}]


@needs_libyaml
def test_libyaml_reads_data_and_gives_marks_of_ascii_text_only():
    assert yaml_load.safe_loader() is yaml.CSafeLoader
    assert yaml_load.safe_loader("a: 1\r\nb: '#'\n") is yaml.CSafeLoader
    for text in ("a: é\n", "# ü\na: 1\n", BOM + "a: 1\n", "a: 1 # \u2028\n", b"a: 1\n"):
        assert yaml_load.safe_loader(text) is yaml.SafeLoader, repr(text)


@needs_libyaml
def test_data_loads_go_through_libyaml(monkeypatch):
    used = []

    class Spy(yaml.CSafeLoader):
        def __init__(self, stream):
            used.append(stream)
            super().__init__(stream)

    monkeypatch.setattr(yaml, "CSafeLoader", Spy)
    assert yaml_load.safe_load("ü: [1]\n") == {"ü": [1]}
    assert list(yaml_load.safe_load_all("a: 1\n---\nb: 2\n")) == [{"a": 1}, {"b": 2}]
    assert used == ["ü: [1]\n", "a: 1\n---\nb: 2\n"]


@needs_libyaml
def test_libyaml_counts_a_text_with_a_bom_one_short():
    """Why a BOM text gets the pure loader: libyaml drops the BOM before it counts.

    Should a libyaml count from the string's start, this fails: the rule may then be relaxed.
    """
    text = BOM + "a: 1\n"
    pure = yaml.compose(text, Loader=yaml.SafeLoader).value[0][1]
    fast = yaml.compose(text, Loader=yaml.CSafeLoader).value[0][1]
    assert text[pure.start_mark.index : pure.end_mark.index] == "1"
    assert fast.start_mark.index == pure.start_mark.index - 1
    assert fast.end_mark.index == pure.end_mark.index - 1


def test_product_code_parses_yaml_only_through_safe_loader():
    """One choice of loader: no yaml.safe_load / load / compose elsewhere, no loader class named."""
    call = re.compile(r"\byaml\.(safe_load|load|full_load|unsafe_load|compose)(_all)?\b(?!`)")
    named = re.compile(r"\b(C?(Safe|Full|Unsafe|Base)?Loader)\b")
    offenders = []
    for folder in ("library", "module_utils", "action_plugins", "filter_plugins"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "yaml_load.py":
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#", 1)[0]
                if (call.search(code) and "Loader=safe_loader(" not in code) or (
                    named.search(code) and "safe_loader" not in code
                ):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


# ---------------------------------------------------------------- marks over real files

YAML_FILES = sorted(
    [p for p in FIXTURES.rglob("*") if p.suffix in (".yaml", ".yml")]
    + shared_files("kube-scheduler", "*.y*ml")
    + shared_files("kubelet")
    + shared_files("rke")
    + shared_files("manifests", "*.y*ml")
)


def _what_the_editor_reads(text, loader_class):
    """Per node: kind, tag, value, quoting, start mark, end index, flow or block (and a
    scalar's or flow collection's end line and column); or the error's position."""
    try:
        roots = list(yaml.compose_all(text, Loader=loader_class))
    except yaml.MarkedYAMLError as exc:
        return ("error", exc.problem_mark.line, exc.problem_mark.column)
    seen, stack = [], list(roots)
    while stack:
        node = stack.pop()
        inline = isinstance(node, yaml.ScalarNode) or bool(node.flow_style)
        seen.append((
            node.id, node.tag,
            node.value if isinstance(node, yaml.ScalarNode) else None,
            node.style or None if isinstance(node, yaml.ScalarNode) else bool(node.flow_style),
            node.start_mark.index, node.start_mark.line, node.start_mark.column, node.end_mark.index,
            (node.end_mark.line, node.end_mark.column) if inline else None,
        ))
        if isinstance(node, yaml.MappingNode):
            stack.extend(part for pair in node.value for part in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return seen


@needs_libyaml
@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: p.name)
def test_libyaml_gives_the_pure_loaders_marks_on_ascii_files(path, crlf):
    text = path.read_text(encoding="utf-8")
    if crlf:
        text = text.replace("\n", "\r\n")
    if not text.isascii():
        assert yaml_load.safe_loader(text) is yaml.SafeLoader
        return
    pure = _what_the_editor_reads(text, yaml.SafeLoader)
    assert pure, path
    assert _what_the_editor_reads(text, yaml.CSafeLoader) == pure


# ---------------------------------------------------------------- the editor under each loader

TEXT = (
    "# Grüße — Konfiguration ✓\n"
    'namé: "wert ü"  # kommentar é\n'
    "liste:\n"
    "  - ä\n"
    "  - 'b'\n"
    "日本: 1\n"
    "z: 😀  # end\n"
)
EDITS = {
    "set a quoted non-ASCII value": (
        lambda text: set_scalar(text, ["namé"], "neu ö"),
        TEXT.replace('namé: "wert ü"', 'namé: "neu ö"'),
    ),
    "append to a list after a non-ASCII item": (
        lambda text: append_to_list(text, ["liste"], "ç"),
        TEXT.replace("  - 'b'\n", "  - 'b'\n  - 'ç'\n"),
    ),
    "remove a non-ASCII key": (
        lambda text: remove_key(text, ["日本"]),
        TEXT.replace("日本: 1\n", ""),
    ),
    "set the value after an emoji line": (
        lambda text: set_scalar(text, ["z"], "ok"),
        TEXT.replace("z: 😀  # end", "z: ok  # end"),
    ),
    "add a non-ASCII branch at the end": (
        lambda text: set_value(text, ["neu", "schlüssel"], "wert"),
        TEXT + "neu:\n  schlüssel: wert\n",
    ),
    "several edits in one go": (
        lambda text: edit(text, [("set", ["namé"], "x"), ("remove", ["liste", 0]), ("set", ["日本"], 2)])[0],
        TEXT.replace('"wert ü"', '"x"').replace("  - ä\n", "").replace("日本: 1", "日本: 2"),
    ),
}
ASCII = "a: 1  # one\nb:\n  - x\n  - 'y'\nc: {d: 2}\n"
ASCII_EDITS = {
    "set the first value": (
        lambda text: set_scalar(text, ["a"], 9),
        ASCII.replace("a: 1", "a: 9"),
    ),
    "append to a block list": (
        lambda text: append_to_list(text, ["b"], "z"),
        ASCII.replace("'y'\n", "'y'\n  - 'z'\n"),
    ),
    "add to a flow mapping": (
        lambda text: set_scalar(text, ["c", "e"], 3),
        ASCII.replace("{d: 2}", "{d: 2, e: 3}"),
    ),
    "remove the first key (a BOM stays)": (
        lambda text: remove_key(text, ["a"]),
        ASCII.replace("a: 1  # one\n", ""),
    ),
}


def _variant(text, kind):
    if "crlf" in kind:
        text = text.replace("\n", "\r\n")
    if "bom" in kind:
        text = BOM + text
    return text


@pytest.mark.parametrize("kind", ["lf", "crlf"])
@pytest.mark.parametrize("name", sorted(EDITS))
def test_non_ascii_edits_cut_at_the_right_places(loader, name, kind):
    change, expected = EDITS[name]
    assert change(_variant(TEXT, kind)) == _variant(expected, kind)


@pytest.mark.parametrize("kind", ["lf", "crlf"])
@pytest.mark.parametrize("name", sorted(ASCII_EDITS))
def test_ascii_edits_cut_at_the_right_places(loader, name, kind):
    change, expected = ASCII_EDITS[name]
    assert change(_variant(ASCII, kind)) == _variant(expected, kind)


@pytest.mark.parametrize("loader", ["pure", "libyaml"], indirect=True)
@pytest.mark.parametrize("kind", ["bom", "bom-crlf"])
@pytest.mark.parametrize("name", sorted(EDITS) + sorted(f"ascii: {n}" for n in ASCII_EDITS))
def test_a_text_with_a_bom_is_cut_at_the_right_places(loader, name, kind):
    if name.startswith("ascii: "):
        (change, expected), text = ASCII_EDITS[name[len("ascii: ") :]], ASCII
    else:
        (change, expected), text = EDITS[name], TEXT
    assert change(_variant(text, kind)) == _variant(expected, kind)


def test_mixed_line_ends_are_kept_under_either_loader(loader):
    text = "a: 1\r\nb: é\nc:\r\n  - x\n"
    assert set_scalar(text, ["c", 0], "y") == "a: 1\r\nb: é\nc:\r\n  - y\n"
    assert set_scalar("a: 1\r\nb: 2\n", ["b"], 3) == "a: 1\r\nb: 3\n"
