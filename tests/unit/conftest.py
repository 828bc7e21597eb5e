"""Make the project's modules importable the way Ansible imports them.

Modules import their logic as ``ansible.module_utils.<name>``; ansible.cfg
points ``module_utils`` at ./module_utils. Here the same directory is added to
the ``ansible.module_utils`` package path, and ./library to ``sys.path``, so
tests import both without running Ansible.

Two contexts (``make unit``, scripts/unit-tests.py):

- target: Python 3.8 to 3.14 with only ``ansible.module_utils`` importable (what
  AnsiballZ ships to a managed node). Tests of code that runs on nodes run here.
- controller: the project's .venv, where ansible-core's controller is
  importable. Tests marked ``@pytest.mark.controller(reason=...)`` (filter
  plugins, templates, ansible-playbook) need it; in a target context they are
  skipped with that reason, never silently. A module that skips itself as a
  whole at import (``pytest.importorskip`` or ``pytest.skip(...,
  allow_module_level=True)`` at module level) is an error: its tests would
  vanish without a count.

Real-world fixtures are read from ../shared (``shared_files``, ``shared_path``):
without it about 200 test cases have nothing to run on, so the session stops
at once with a message saying so. Someone who knows those tests will not run
sets ``GPUNODE_TESTS_WITHOUT_SHARED=1``: the session then runs, the tests that
read ../shared are skipped or not generated, and the summary says how many.
A shared file or pattern that matches nothing is an error either way.
"""

import importlib.util
import os
import pathlib
import sys

import ansible.module_utils
import pytest
from ansible.module_utils import _internal as _module_utils_internal
from ansible.module_utils import basic
from ansible.module_utils.common import warnings as module_warnings
from ansible.module_utils.testing import patch_module_args

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
SHARED_FIXTURES = SHARED / "fixtures"
FIXTURES = ROOT / "tests" / "fixtures"
WITHOUT_SHARED_VARIABLE = "GPUNODE_TESTS_WITHOUT_SHARED"
WITHOUT_SHARED = os.environ.get(WITHOUT_SHARED_VARIABLE) == "1"
#: scripts/unit-tests.py gives the Hypothesis properties their full examples on the supported range's
#: ends and the controller, and a share of them (GPUNODE_HYPOTHESIS_SHARE=4: a quarter) on the Pythons
#: between, which run the same code paths; every run draws new examples
HYPOTHESIS_SHARE = int(os.environ.get("GPUNODE_HYPOTHESIS_SHARE", "1"))
_not_generated = []  # shared_files() selections that gave no case because ../shared is absent

ansible.module_utils.__path__.append(str(ROOT / "module_utils"))
sys.path.insert(0, str(ROOT / "library"))

# True where ansible-core's controller is importable (the controller's Python);
# False in make unit's target environments, which hold ansible.module_utils only.
CONTROLLER = importlib.util.find_spec("ansible.cli") is not None


def pytest_collection_modifyitems(config, items):
    """In a target context, skip tests marked controller, saying why."""
    if CONTROLLER:
        return
    python = ".".join(map(str, sys.version_info[:2]))
    for item in items:
        marker = item.get_closest_marker("controller")
        if marker is not None:
            why = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "needs the controller")
            item.add_marker(pytest.mark.skip(
                reason=f"controller-side ({why}): ansible-core's controller is not importable on "
                       f"Python {python}; make unit runs this test on the controller's Python"))


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """A test module skipped as a whole is an error: its tests would vanish uncounted."""
    report = yield
    if isinstance(collector, pytest.Module) and report.skipped:
        longrepr = report.longrepr
        why = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        report.outcome = "failed"
        report.longrepr = (
            f"{collector.path}: the whole module skipped itself at import ({why}); its tests would "
            "vanish without a count. Skip single tests, or mark controller-side tests "
            "@pytest.mark.controller(reason=...) and import controller-only packages inside them."
        )
    return report


def shared_present():
    return SHARED_FIXTURES.is_dir()


def pytest_configure(config):
    if shared_present() or WITHOUT_SHARED:
        return
    raise pytest.UsageError(
        f"{SHARED_FIXTURES} is missing: the unit tests read real-world fixtures from ../shared "
        "(beside the repository) and about 200 test cases would not run without them. Put the "
        f"shared checkout there, or, knowing that those tests will not run, set {WITHOUT_SHARED_VARIABLE}=1."
    )


def pytest_terminal_summary(terminalreporter):
    if shared_present():
        return
    skipped = [r for r in terminalreporter.stats.get("skipped", [])
               if "../shared is absent" in str(r.longrepr)]
    terminalreporter.write_sep("=", "WITHOUT ../shared", yellow=True, bold=True)
    terminalreporter.write_line(
        f"{SHARED} is absent and {WITHOUT_SHARED_VARIABLE}=1: {len(skipped)} tests skipped, and "
        f"{len(_not_generated)} parametrized selections of shared files generated no case: "
        + ", ".join(sorted(set(_not_generated)))
    )


def examples(count):
    """The Hypothesis examples of a property on this run: ``count``, or its share (at least 20)."""
    return max(20, count // HYPOTHESIS_SHARE)


def load_file(path, name):
    """Import a Python file that is not a package module (a script, a plugin) under ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shared_path(*parts):
    """A path under ../shared. Missing: the test fails (skipped only when ../shared is opted out)."""
    path = SHARED.joinpath(*parts)
    if not shared_present() and WITHOUT_SHARED:
        pytest.skip(f"{path}: ../shared is absent ({WITHOUT_SHARED_VARIABLE}=1)")
    if not path.exists():
        pytest.fail(f"{path} is missing from ../shared", pytrace=False)
    return path


def shared_files(folder, pattern="*"):
    """Files of a ../shared/fixtures folder for parametrize (SOURCE.txt aside).

    Nothing matching is an error (the cases would vanish); [] only when
    ../shared is absent and opted out (GPUNODE_TESTS_WITHOUT_SHARED=1).
    """
    directory = SHARED_FIXTURES / folder
    if not shared_present() and WITHOUT_SHARED:
        _not_generated.append(f"{folder}/{pattern}")
        return []
    files = sorted(p for p in directory.glob(pattern) if p.name != "SOURCE.txt")
    if not files:
        raise FileNotFoundError(f"shared_files({folder!r}, {pattern!r}): nothing in {directory} matches")
    return files


class AnsibleExitJson(Exception):
    """Raised by exit_json in tests; .result holds the module's result."""


class AnsibleFailJson(Exception):
    """Raised by fail_json in tests; .result holds the module's result."""


def _exit_json(self, **kwargs):
    kwargs.setdefault("changed", False)
    raise AnsibleExitJson(kwargs)


def _fail_json(self, msg, **kwargs):
    kwargs["failed"] = True
    kwargs["msg"] = msg
    raise AnsibleFailJson(kwargs)


@pytest.fixture(autouse=True)
def _module_process_state(request, monkeypatch):
    """Every test starts and ends with no module warning or deprecation recorded, and
    tests not marked controller see module_utils as a module process on a node does.

    ``AnsibleModule.warn``/``deprecate`` record into process-wide state
    (ansible.module_utils.common.warnings), which a module process starts empty;
    kept across tests, a test reading warnings would see an earlier test's. Once
    any test imports ansible-core's controller, ``ansible.module_utils._internal.is_controller``
    is True for the rest of the process and warnings go to the controller's display
    instead of the module's result: a module's tests would then depend on which tests
    ran before them.
    """
    if request.node.get_closest_marker("controller") is None:
        monkeypatch.setattr(_module_utils_internal, "is_controller", False)
    for state in (module_warnings._global_warnings, module_warnings._global_deprecations):
        state.clear()
    yield
    for state in (module_warnings._global_warnings, module_warnings._global_deprecations):
        state.clear()


@pytest.fixture(autouse=True)
def _node_lock_in_tmp(tmp_path_factory, monkeypatch):
    """Modules run by tests take the node's lock under a temp folder, never /run/gpunode."""
    monkeypatch.setattr("ansible.module_utils.gpunode.host.lock.LOCK_DIR",
                        str(tmp_path_factory.getbasetemp() / "run-gpunode"))


@pytest.fixture
def run_module(monkeypatch):
    """Run a module's main() with arguments; returns (ok, result).

    ``run_module(module, {"path": ...}, check_mode=True, diff=True)``
    """

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail_json)

    def _run(module, args, check_mode=False, diff=False):
        payload = dict(args)
        payload["_ansible_check_mode"] = check_mode
        payload["_ansible_diff"] = diff
        payload.setdefault("_ansible_remote_tmp", "/tmp")
        payload.setdefault("_ansible_keep_remote_files", False)
        with patch_module_args(payload):
            try:
                module.main()
            except AnsibleExitJson as exc:
                return True, exc.args[0]
            except AnsibleFailJson as exc:
                return False, exc.args[0]
        raise AssertionError("module returned without exit_json or fail_json")

    return _run
