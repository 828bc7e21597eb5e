"""Make the project's modules importable the way Ansible imports them.

Modules import their logic as ``ansible.module_utils.<name>``; ansible.cfg
points ``module_utils`` at ./module_utils. Here the same directory is added to
the ``ansible.module_utils`` package path, and ./library to ``sys.path``, so
tests import both without running Ansible.
"""

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
