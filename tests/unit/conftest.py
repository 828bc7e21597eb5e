"""Make the project's modules importable the way Ansible imports them.

Modules import their logic as ``ansible.module_utils.<name>``; ansible.cfg
points ``module_utils`` at ./module_utils. Here the same directory is added to
the ``ansible.module_utils`` package path, and ./library to ``sys.path``, so
tests import both without running Ansible.

Two contexts (``make unit``, scripts/unit-tests.py):

- target: Python 3.8 to 3.13 with only ``ansible.module_utils`` importable (what
  AnsiballZ ships to a managed node). Tests of code that runs on nodes run here.
- controller: the project's .venv, where ansible-core's controller is
  importable. Tests marked ``@pytest.mark.controller(reason=...)`` (filter
  plugins, templates, ansible-playbook) need it; in a target context they are
  skipped with that reason, never silently. A module that skips itself as a
  whole at import (``pytest.importorskip`` or ``pytest.skip(...,
  allow_module_level=True)`` at module level) is an error: its tests would
  vanish without a count.
"""

import importlib.util
import pathlib
import sys

import ansible.module_utils
import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
SHARED_FIXTURES = SHARED / "fixtures"
FIXTURES = ROOT / "tests" / "fixtures"

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


def shared_path(*parts):
    """A path under ../shared; the test is skipped when ../shared is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not present (../shared is optional)")
    return path


def shared_files(folder, pattern="*"):
    """Files of a ../shared/fixtures folder for parametrize; [] when absent."""
    directory = SHARED_FIXTURES / folder
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob(pattern) if p.name != "SOURCE.txt")


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
