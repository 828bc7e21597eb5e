# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""scripts/unit-tests.py: the container run of a target Python pyenv lacks, the random order."""

import pathlib

import pytest
from conftest import ROOT, load_file

pytestmark = pytest.mark.controller(reason="make unit's runner runs on the controller")


@pytest.fixture(scope="module")
def unit_tests():
    return load_file(ROOT / "scripts" / "unit-tests.py", "unit_tests_script")


def test_python_3_14_runs_in_debian_sid(unit_tests):
    assert unit_tests.CONTAINER_PYTHONS == {"3.14": "sid"}


def test_the_container_sees_the_checkout_read_only_and_no_network(unit_tests, tmp_path):
    run = unit_tests.Run("py3.14", "target", None, image="gpunode-sid-unit:latest")
    module_utils = tmp_path / "site-packages" / "ansible" / "module_utils"
    argv = unit_tests.container_argv(run, module_utils, tmp_path / "target-newest")
    assert argv[:4] == ["docker", "run", "--rm", "--network"] and argv[4] == "none"
    assert argv[-2:] == ["gpunode-sid-unit:latest", "python3"]
    mounts = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-v"]
    assert f"{ROOT}:{ROOT}:ro" in mounts and f"{module_utils}:{module_utils}:ro" in mounts
    writable = [mount for mount in mounts if not mount.endswith(":ro")]
    assert writable == [f"{run.junit.parent}:{run.junit.parent}"]
    assert f"PYTHONPATH={tmp_path / 'target-newest'}" in argv


def test_the_interpreter_question_needs_no_ansible(unit_tests, capsys):
    """scripts/bootstrap.sh asks it with the system python3 for .venv-newest's interpreter."""
    rc = unit_tests.main(["--interpreter", "3.999"])
    assert rc == 1 and capsys.readouterr().out.strip() == ""


def test_the_seed_comes_from_unit_seed(unit_tests, monkeypatch):
    monkeypatch.setenv("UNIT_SEED", "4242")
    assert unit_tests.parse_args([]).seed == 4242
    monkeypatch.delenv("UNIT_SEED")
    assert 0 <= unit_tests.parse_args([]).seed < 10**6


def test_another_venv_without_ansible_has_no_module_utils(unit_tests, tmp_path):
    assert unit_tests.venv_module_utils(pathlib.Path(tmp_path)) is None
