"""module_utils/text_file: exact reads, atomic writes that keep mode and owner."""

import os
import re
import stat

import pytest
from ansible.module_utils.text_file import read_text, write_text


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
