"""host/files: exact reads, atomic writes that keep mode and owner, links followed."""

import os
import re
import stat

import pytest
from ansible.module_utils.gpunode.host.backups import backup_copy
from ansible.module_utils.gpunode.host.files import (
    check_removable,
    fsync_directory,
    read_text,
    resolved_path,
    shown_path,
    write_text,
)
from symlinks import LAYOUTS, Link, backup_text, snapshot


class ConfigError(Exception):
    pass


def test_read_keeps_the_text_exactly(tmp_path):
    path = tmp_path / "a.conf"
    path.write_bytes(b"one\r\ntwo\n\tthree")
    assert read_text(str(path), ConfigError) == "one\r\ntwo\n\tthree"


def test_read_missing_is_none(tmp_path):
    assert read_text(str(tmp_path / "absent"), ConfigError) is None


def test_read_errors_name_the_path_in_the_callers_error(tmp_path):
    with pytest.raises(ConfigError, match=re.escape(f"{tmp_path}: is a directory")):
        read_text(str(tmp_path), ConfigError)
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b'{"a": "\xe9"}')
    with pytest.raises(ConfigError, match=re.escape(f"{bad}: byte 7: not UTF-8 text")):
        read_text(str(bad), ConfigError)


def test_write_new_file_gets_the_mode_asked_and_parents(tmp_path):
    path = tmp_path / "etc" / "conf.d" / "99-x.toml"
    assert write_text(str(path), "a = 1\n", new_file_mode=0o600) is True
    assert path.read_text() == "a = 1\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) & 0o755 == 0o755


def test_write_existing_keeps_its_mode_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "daemon.json"
    path.write_text("{}\n")
    path.chmod(0o640)
    assert write_text(str(path), '{"a": 1}\n', new_file_mode=0o600) is False
    assert path.read_text() == '{"a": 1}\n'
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["daemon.json"]


def test_write_through_a_temp_dir_elsewhere(tmp_path):
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    seen = []

    def replace(src, dst):
        seen.append(os.listdir(manifests))
        assert os.path.dirname(src) == str(tmp_path)
        os.replace(src, dst)

    write_text(str(manifests / "kube-scheduler.yaml"), "kind: Pod\n", tmp_dir=str(tmp_path), replace=replace)
    assert seen == [[]]
    assert os.listdir(manifests) == ["kube-scheduler.yaml"]


def test_write_failure_leaves_the_old_file_and_no_temp_file(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("old\n")

    def replace(src, dst):
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_text(str(path), "new\n", replace=replace)
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.toml"]


# ---------------------------------------------------------------- symbolic links


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_link_is_followed_the_target_written_and_the_link_kept(tmp_path, layout):
    link = Link.make(tmp_path / "etc" / "docker" / "daemon.json", layout, "{}\n", root=tmp_path)
    assert resolved_path(str(link.path)) == str(link.target.resolve())
    assert shown_path(str(link.path)) == f"{link.path} -> {link.target.resolve()}"
    assert read_text(str(link.path), ConfigError) == "{}\n"

    assert write_text(str(link.path), '{"a": 1}\n', new_file_mode=0o600) is False

    assert link.kept() and link.text() == '{"a": 1}\n'
    assert stat.S_IMODE(link.target.stat().st_mode) == 0o640  # the target's mode, not new_file_mode
    assert not [p for p in link.target.parent.iterdir() if p.name.startswith(".gpunode-")]
    assert sorted(p.name for p in link.path.parent.iterdir()) == sorted(
        ["daemon.json"] + (["daemon.json.real"] if layout == "sibling" else []))


def test_a_plain_path_is_its_own_resolved_path(tmp_path):
    path = tmp_path / "a.conf"
    assert resolved_path(str(path)) == str(path) and shown_path(str(path)) == str(path)
    path.write_text("x\n")
    assert resolved_path(str(path)) == str(path)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_dangling_link_gets_its_target_created(tmp_path, layout):
    link = Link.make(tmp_path / "etc" / "containerd" / "config.toml", layout, None, root=tmp_path)
    assert read_text(str(link.path), ConfigError) is None

    assert write_text(str(link.path), "version = 2\n", new_file_mode=0o600) is True

    assert link.kept() and link.text() == "version = 2\n"
    assert stat.S_IMODE(link.target.stat().st_mode) == 0o600


def test_a_dangling_link_into_a_missing_folder_is_refused(tmp_path):
    path = tmp_path / "daemon.json"
    os.symlink(tmp_path / "unmounted" / "docker" / "daemon.json", path)
    before = snapshot(tmp_path)
    message = f"{path}: a symbolic link to {tmp_path}/unmounted/docker/daemon.json, whose folder " \
              f"{tmp_path}/unmounted/docker does not exist"
    with pytest.raises(ConfigError, match=re.escape(message)):
        resolved_path(str(path), ConfigError)
    with pytest.raises(OSError, match=re.escape(message)):
        write_text(str(path), "{}\n")
    assert snapshot(tmp_path) == before


def test_a_link_loop_is_refused_with_the_path(tmp_path):
    one, two = tmp_path / "one.toml", tmp_path / "two.toml"
    os.symlink("two.toml", one)
    os.symlink("one.toml", two)
    with pytest.raises(ConfigError, match=re.escape(f"{one}: a symbolic link loop")):
        shown_path(str(one), ConfigError)
    with pytest.raises(OSError, match=re.escape(f"{one}: a symbolic link loop")):
        write_text(str(one), "x\n")
    assert os.readlink(one) == "two.toml" and os.readlink(two) == "one.toml"


def test_an_operators_link_is_not_removable(tmp_path):
    link = Link.make(tmp_path / "conf.d" / "99-gpunode.conf", "absolute", "x\n", root=tmp_path)
    with pytest.raises(ConfigError, match=re.escape(
            f"{link.path}: a symbolic link to {link.target.resolve()}, not a file gpunode created")):
        check_removable(str(link.path), ConfigError)
    plain = tmp_path / "plain.conf"
    plain.write_text("x\n")
    check_removable(str(plain), ConfigError)
    check_removable(str(tmp_path / "absent.conf"), ConfigError)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_backup_copy_of_a_link_is_a_plain_copy_of_the_target(tmp_path, layout):
    link = Link.make(tmp_path / "etc" / "containerd" / "config.toml", layout, "version = 2\n", root=tmp_path)
    backups = tmp_path / "backups"
    copy = backup_copy(str(link.path), str(backups))
    assert copy.startswith(str(backups) + str(link.path) + ".")
    assert backup_text(copy) == "version = 2\n"
    assert link.kept()


def test_backup_copy_of_a_dangling_link_is_none(tmp_path):
    link = Link.make(tmp_path / "config.toml", "absolute", None, root=tmp_path)
    assert backup_copy(str(link.path), str(tmp_path / "backups")) is None
    assert not (tmp_path / "backups").exists()


# ---------------------------------------------------------------- durability


def _record_fsyncs(monkeypatch, events):
    real_fsync = os.fsync

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.parametrize("layout", [None, *LAYOUTS])
def test_the_folder_is_fsynced_after_the_rename(tmp_path, monkeypatch, layout):
    path = tmp_path / "etc" / "daemon.json"
    if layout:
        target = Link.make(path, layout, "{}\n", root=tmp_path).target.resolve()
    else:
        path.parent.mkdir()
        path.write_text("{}\n")
        target = path
    events = []
    _record_fsyncs(monkeypatch, events)

    def replace(src, dst):
        events.append(("replace", dst))
        os.replace(src, dst)

    write_text(str(path), '{"a": 1}\n', replace=replace)

    assert events[0][0] == "fsync" and os.path.basename(events[0][1]).startswith(".gpunode-")  # the data
    assert events[1:] == [("replace", str(target)), ("fsync", str(target.parent))]


def test_fsync_directory_tolerates_a_filesystem_that_cannot(tmp_path, monkeypatch):
    def fsync(fd):
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(os, "fsync", fsync)
    fsync_directory(str(tmp_path / "file"))

    def broken(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError, match="Input/output error"):
        fsync_directory(str(tmp_path / "file"))
