"""Code that runs on managed nodes loads on this Python.

`make unit` runs this file on every target Python (3.8 to 3.14) with only
``ansible.module_utils`` importable, as AnsiballZ gives a node: every module
and module_utils file must import there (a ``list[str]`` or ``X | None``
evaluated at import, a ``match`` statement or a standard-library module the
Python lacks fails here, with the file's name), and the scripts the simulated
nodes run (tests/simnode, on Debian 11 to 13) must compile. What only fails
when a line runs (``str.removeprefix``, ``dict | list`` in ``isinstance``) is
for the unit tests of each file, which run on the same interpreters.
"""

import importlib
import importlib.util
import pathlib
import sys

import pytest
from conftest import CONTROLLER, ROOT

MODULE_UTILS = sorted((ROOT / "module_utils").rglob("*.py"))
MODULES = sorted((ROOT / "library").glob("*.py")) + sorted(ROOT.glob("roles/*/library/*.py"))
# a module with an action plugin of its name is its documentation only (the
# action works on the controller), as ansible.builtin.debug is
ACTIONS = {path.stem for path in (ROOT / "action_plugins").glob("*.py")}


def node_scripts():
    """Python files and python3 scripts under tests/simnode (they run on the simulated nodes)."""
    for path in sorted((ROOT / "tests" / "simnode").rglob("*")):
        if not path.is_file():
            continue
        if path.suffix == ".py":
            yield path
        elif path.suffix == "":
            with path.open("rb") as handle:
                first = handle.readline()
            if first.startswith(b"#!") and b"python" in first:
                yield path


def rel(path):
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("path", MODULE_UTILS + MODULES + list(node_scripts()), ids=rel)
def test_compiles(path):
    compile(path.read_bytes(), str(path), "exec", dont_inherit=True)


@pytest.mark.parametrize("path", MODULE_UTILS, ids=rel)
def test_module_utils_imports(path):
    parts = path.relative_to(ROOT / "module_utils").with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    importlib.import_module(".".join(("ansible.module_utils", *parts)))


@pytest.mark.parametrize("path", MODULES, ids=rel)
def test_module_imports(path):
    name = f"_gpunode_target_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    if path.stem in ACTIONS:
        assert not hasattr(module, "main"), f"{rel(path)}: action_plugins/{path.stem}.py does the work"
        assert module.DOCUMENTATION and module.EXAMPLES and module.RETURN, f"{rel(path)}: documentation only"
    else:
        assert callable(getattr(module, "main", None)), f"{rel(path)} has no main()"


def test_target_files_were_found():
    assert MODULE_UTILS, "no module_utils file found: the parametrized tests would be empty"
    assert MODULES, "no module found: the parametrized tests would be empty"


def test_only_module_utils_of_ansible_core_in_target_runs():
    """In a target run the controller must not be importable (it would hide a controller import)."""
    if CONTROLLER:
        pytest.skip("controller run: ansible-core's controller is importable here by design")
    assert importlib.util.find_spec("ansible.plugins") is None
    assert pathlib.Path(importlib.import_module("ansible.module_utils.basic").__file__).is_file()
