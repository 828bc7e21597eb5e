"""library/docker_daemon_config: main() on real files, check mode, diff, errors."""

import json
import os
import shutil
import stat

import docker_daemon_config
import pytest
import yaml
from conftest import FIXTURES, shared_files
from symlinks import LAYOUTS, Link, backup_text, snapshot

NVIDIA = {
    "default-runtime": "nvidia",
    "runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "runtimeArgs": []}},
}
OWN = FIXTURES / "docker"
VALID = sorted(OWN.glob("daemon.json-*")) + shared_files("docker", "daemon.json-*")
MALFORMED = sorted(OWN.glob("MALFORMED-daemon.json-*")) + shared_files("docker", "MALFORMED-daemon.json-*")
OLD = 1_500_000_000


def _place(source, tmp_path, mode=0o640):
    target = tmp_path / "etc" / "docker" / "daemon.json"
    target.parent.mkdir(parents=True)
    shutil.copyfile(source, target)
    os.chmod(target, mode)
    os.utime(target, (OLD, OLD))
    return target


@pytest.mark.parametrize("source", VALID, ids=lambda p: p.name)
def test_merges_into_real_files_and_keeps_mode(run_module, tmp_path, source):
    target = _place(source, tmp_path)
    before = json.loads(source.read_text(encoding="utf-8"))

    ok, result = run_module(docker_daemon_config, {"path": str(target), "settings": NVIDIA})

    assert ok, result
    on_disk = json.loads(target.read_text(encoding="utf-8"))
    assert on_disk == result["config"]
    assert on_disk["default-runtime"] == "nvidia"
    for key in before:
        if key not in NVIDIA:
            assert on_disk[key] == before[key]
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert result["changed"] == (target.stat().st_mtime != OLD)
    assert target.read_text(encoding="utf-8").endswith("\n") or not result["changed"]


@pytest.mark.parametrize("source", VALID, ids=lambda p: p.name)
def test_second_run_does_not_rewrite(run_module, tmp_path, source):
    target = _place(source, tmp_path)
    run_module(docker_daemon_config, {"path": str(target), "settings": NVIDIA})
    os.utime(target, (OLD, OLD))
    content = target.read_bytes()

    ok, result = run_module(docker_daemon_config, {"path": str(target), "settings": NVIDIA})

    assert ok and not result["changed"]
    assert target.read_bytes() == content
    assert target.stat().st_mtime == OLD


@pytest.mark.parametrize("source", MALFORMED, ids=lambda p: p.name)
def test_malformed_file_fails_cleanly_and_is_untouched(run_module, tmp_path, source):
    target = _place(source, tmp_path)
    content = target.read_bytes()

    ok, result = run_module(docker_daemon_config, {"path": str(target), "settings": NVIDIA, "backup": True})

    assert not ok
    assert result["msg"].startswith(f"{target}: ")
    assert "left unchanged" in result["msg"]
    assert target.read_bytes() == content
    assert target.stat().st_mtime == OLD
    assert sorted(os.listdir(target.parent)) == ["daemon.json"]


def test_malformed_message_has_line_and_column(run_module, tmp_path):
    target = _place(OWN / "MALFORMED-daemon.json-trailing-comma", tmp_path)
    ok, result = run_module(docker_daemon_config, {"path": str(target), "settings": NVIDIA})
    assert not ok
    # where this Python's json reports it: line 4 column 1 up to 3.12, the comma itself from 3.13
    try:
        json.loads(target.read_text())
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
    assert where in ("line 4 column 1", "line 3 column 16")
    assert f"{target}: {where}: " in result["msg"]


def test_check_mode_reports_change_and_writes_nothing(run_module, tmp_path):
    target = _place(OWN / "daemon.json-log-mirror-runsc", tmp_path)
    content = target.read_bytes()

    ok, result = run_module(
        docker_daemon_config, {"path": str(target), "settings": NVIDIA}, check_mode=True, diff=True
    )

    assert ok and result["changed"]
    assert target.read_bytes() == content
    assert target.stat().st_mtime == OLD
    assert result["diff"]["before"] == content.decode()
    assert json.loads(result["diff"]["after"])["default-runtime"] == "nvidia"


def test_check_mode_on_converged_file_reports_no_change(run_module, tmp_path):
    target = _place(OWN / "daemon.json-log-mirror-runsc", tmp_path)
    run_module(docker_daemon_config, {"path": str(target), "settings": NVIDIA})
    ok, result = run_module(docker_daemon_config, {"path": str(target), "settings": NVIDIA}, check_mode=True)
    assert ok and not result["changed"]


def test_missing_file_and_directory_are_created(run_module, tmp_path):
    target = tmp_path / "etc" / "docker" / "daemon.json"

    ok, result = run_module(docker_daemon_config, {"path": str(target), "settings": NVIDIA}, diff=True)

    assert ok and result["changed"]
    assert json.loads(target.read_text()) == NVIDIA
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert result["diff"]["before"] == ""
    assert result["backup_file"] is None


def test_missing_file_in_check_mode_is_not_created(run_module, tmp_path):
    target = tmp_path / "daemon.json"
    ok, result = run_module(docker_daemon_config, {"path": str(target), "settings": NVIDIA}, check_mode=True)
    assert ok and result["changed"]
    assert not target.exists()


def test_empty_file_is_filled(run_module, tmp_path):
    target = tmp_path / "daemon.json"
    target.write_text("")
    ok, result = run_module(docker_daemon_config, {"path": str(target), "settings": {}})
    assert ok and result["changed"]
    assert target.read_text() == "{}\n"


def test_backup_keeps_the_original_bytes(run_module, tmp_path):
    source = OWN / "daemon.json-tabs-args-style-no-final-newline"
    target = _place(source, tmp_path)

    ok, result = run_module(
        docker_daemon_config, {"path": str(target), "settings": {"debug": True}, "backup": True}
    )

    assert ok and result["changed"]
    assert result["backup_file"]
    with open(result["backup_file"], "rb") as handle:
        assert handle.read() == source.read_bytes()
    assert target.read_text().startswith('{\n\t"runtimes"')


def test_mode_argument_is_applied(run_module, tmp_path):
    target = _place(OWN / "daemon.json-log-mirror-runsc", tmp_path)
    run_module(docker_daemon_config, {"path": str(target), "settings": NVIDIA})
    ok, result = run_module(docker_daemon_config, {"path": str(target), "settings": NVIDIA, "mode": "0600"})
    assert ok and result["changed"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_directory_path_fails(run_module, tmp_path):
    ok, result = run_module(docker_daemon_config, {"path": str(tmp_path), "settings": NVIDIA})
    assert not ok
    assert result["msg"] == f"{tmp_path}: is a directory, not a regular file; left unchanged"


def test_non_utf8_file_fails_untouched(run_module, tmp_path):
    target = tmp_path / "daemon.json"
    target.write_bytes(b'{"a": "\xff"}')
    ok, result = run_module(docker_daemon_config, {"path": str(target), "settings": NVIDIA})
    assert not ok
    assert "not UTF-8" in result["msg"]
    assert target.read_bytes() == b'{"a": "\xff"}'


LOG = '{\n  "log-driver": "json-file"\n}\n'


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_linked_daemon_json_is_edited_through_the_link(run_module, tmp_path, layout):
    link = Link.make(tmp_path / "etc" / "docker" / "daemon.json", layout, LOG, root=tmp_path)
    args = {"path": str(link.path), "settings": NVIDIA, "backup": True}
    before = snapshot(tmp_path)

    ok, result = run_module(docker_daemon_config, args, check_mode=True, diff=True)
    assert ok and result["changed"] and snapshot(tmp_path) == before
    assert result["diff"]["before_header"] == f"{link.path} -> {link.target.resolve()}"
    assert result["diff"]["before"] == LOG

    ok, result = run_module(docker_daemon_config, args)
    assert ok and result["changed"], result
    assert link.kept()
    assert json.loads(link.text()) == {"log-driver": "json-file", **NVIDIA}
    assert stat.S_IMODE(link.target.stat().st_mode) == 0o640
    assert backup_text(result["backup_file"]) == LOG
    assert result["restore"] == [{"path": str(link.path), "backup": result["backup_file"]}]

    ok, result = run_module(docker_daemon_config, args)
    assert ok and not result["changed"] and result["backup_file"] is None


def test_a_dangling_link_gets_its_target_created(run_module, tmp_path):
    link = Link.make(tmp_path / "etc" / "docker" / "daemon.json", "relative", None, root=tmp_path)
    ok, result = run_module(docker_daemon_config, {"path": str(link.path), "settings": NVIDIA})
    assert ok and result["changed"] and link.kept()
    assert json.loads(link.text()) == NVIDIA
    assert stat.S_IMODE(link.target.stat().st_mode) == 0o644


def test_a_link_into_a_missing_folder_fails_naming_both(run_module, tmp_path):
    path = tmp_path / "daemon.json"
    os.symlink(tmp_path / "unmounted" / "daemon.json", path)
    ok, result = run_module(docker_daemon_config, {"path": str(path), "settings": NVIDIA})
    assert not ok and result["msg"] == (
        f"{path}: a symbolic link to {tmp_path}/unmounted/daemon.json, whose folder "
        f"{tmp_path}/unmounted does not exist; left unchanged")
    assert os.readlink(path) == str(tmp_path / "unmounted" / "daemon.json")


def test_mode_of_a_linked_file_is_set_on_the_target(run_module, tmp_path):
    link = Link.make(tmp_path / "etc" / "docker" / "daemon.json", "absolute", LOG, root=tmp_path)
    ok, result = run_module(docker_daemon_config, {"path": str(link.path), "settings": {}, "mode": "0600"})
    assert ok and result["changed"] and link.kept()
    assert stat.S_IMODE(link.target.stat().st_mode) == 0o600


def test_return_documents_what_the_module_returns():
    returned = yaml.safe_load(docker_daemon_config.RETURN)
    assert {"changed", "diff", "backup_file", "config"} <= set(returned)


