"""gpunode_planned_files: the edits a read planned are written only while each file still holds
what that read found; otherwise nothing is written and the caller plans again (issue 27: one read
of the kubelet before its change, the role carrying out the plan site.yml's one read handed over)."""

import os
from pathlib import Path

import gpunode_planned_files
import pytest


def edit(path, before, after):
    return {"path": str(path), "before": before, "after": after}


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("featureGates: {}\n")
    os.chmod(path, 0o600)
    return path


def test_a_file_as_read_is_written_keeping_its_mode_with_a_backup_to_restore(run_module, config):
    ok, result = run_module(gpunode_planned_files, {
        "files": [edit(config, "featureGates: {}\n", "featureGates: {A: true}\n")], "backup": True,
    }, diff=True)
    assert ok, result
    assert result["changed"] and result["changed_since"] == []
    assert config.read_text() == "featureGates: {A: true}\n"
    assert oct(config.stat().st_mode & 0o777) == "0o600"
    backup = result["backup_file"]
    assert backup != str(config) and not backup.endswith((".yaml", ".conf"))  # no daemon loads it
    assert Path(backup).read_text() == "featureGates: {}\n"
    assert result["backup_files"] == {str(config): backup}
    assert result["restore"] == [{"path": str(config), "backup": backup}]
    assert result["diff"]["before"] == "featureGates: {}\n"
    assert result["diff"]["after_header"] == str(config)


def test_an_edit_marked_keep_mtime_keeps_the_files_time_and_another_does_not(run_module, config, tmp_path):
    """The kubelet's registration taint and labels: the running kubelet need not load them, so its
    --config file keeps its time (a later read compares the kubelet's start with it)."""
    other = tmp_path / "kubelet.env"
    other.write_text("A=1\n")
    for path in (config, other):
        os.utime(path, (1000000000, 1000000000))
    ok, result = run_module(gpunode_planned_files, {"files": [
        dict(edit(config, "featureGates: {}\n", "registerWithTaints: []\n"), keep_mtime=True),
        edit(other, "A=1\n", "A=2\n"),
    ]})
    assert ok and result["changed"], result
    assert config.read_text() == "registerWithTaints: []\n" and config.stat().st_mtime == 1000000000
    assert other.read_text() == "A=2\n" and other.stat().st_mtime > 1000000000


def test_a_file_changed_since_the_read_is_not_written_nor_any_other(run_module, config, tmp_path):
    config.write_text("featureGates: {B: true}\n")  # another run wrote it after the read
    dropin = tmp_path / "20-gpunode.conf"
    ok, result = run_module(gpunode_planned_files, {"files": [
        edit(config, "featureGates: {}\n", "featureGates: {A: true}\n"),
        edit(dropin, None, "[Service]\n"),
    ]})
    assert ok, result
    assert result["changed_since"] == [str(config)] and not result["changed"]
    assert config.read_text() == "featureGates: {B: true}\n"
    assert not dropin.exists()


def test_a_file_that_appeared_since_the_read_counts_as_changed(run_module, tmp_path):
    dropin = tmp_path / "20-gpunode.conf"
    dropin.write_text("[Service]\nEnvironment=X=1\n")
    ok, result = run_module(gpunode_planned_files, {"files": [edit(dropin, None, "[Service]\n")]})
    assert ok and result["changed_since"] == [str(dropin)], result
    assert dropin.read_text() == "[Service]\nEnvironment=X=1\n"


def test_a_new_file_is_created_and_one_planned_to_go_is_removed(run_module, config, tmp_path):
    dropin = tmp_path / "kubelet.service.d" / "20-gpunode.conf"
    ok, result = run_module(gpunode_planned_files, {"files": [
        edit(dropin, None, "[Service]\n"), edit(config, "featureGates: {}\n", None),
    ]})
    assert ok, result
    assert dropin.read_text() == "[Service]\n" and not config.exists()
    # a new file has no backup: verified_restart removes it to go back
    assert {"path": str(dropin), "backup": None} in result["restore"]


def test_check_mode_compares_and_shows_but_writes_nothing(run_module, config):
    ok, result = run_module(gpunode_planned_files, {
        "files": [edit(config, "featureGates: {}\n", "featureGates: {A: true}\n")],
    }, check_mode=True, diff=True)
    assert ok and result["changed"] and result["diff"]["after"] == "featureGates: {A: true}\n", result
    assert config.read_text() == "featureGates: {}\n"
    assert "restore" not in result


def test_nothing_to_edit_changes_nothing(run_module, config):
    ok, result = run_module(gpunode_planned_files, {"files": [edit(config, "featureGates: {}\n",
                                                                    "featureGates: {}\n")]})
    assert ok and not result["changed"] and result["changed_since"] == [], result
    ok, result = run_module(gpunode_planned_files, {"files": []})
    assert ok and not result["changed"], result


def test_a_link_is_followed_and_kept(run_module, tmp_path):
    target = tmp_path / "managed" / "config.yaml"
    target.parent.mkdir()
    target.write_text("a: 1\n")
    link = tmp_path / "config.yaml"
    link.symlink_to(os.path.relpath(target, tmp_path))
    ok, result = run_module(gpunode_planned_files, {"files": [edit(link, "a: 1\n", "a: 2\n")]}, diff=True)
    assert ok, result
    assert link.is_symlink() and target.read_text() == "a: 2\n"
    assert result["diff"]["before_header"] == f"{link} -> {target}"


def test_a_link_planned_to_go_is_refused_and_kept(run_module, tmp_path):
    target = tmp_path / "theirs.conf"
    target.write_text("x\n")
    link = tmp_path / "20-gpunode.conf"
    link.symlink_to(target)
    ok, result = run_module(gpunode_planned_files, {"files": [edit(link, "x\n", None)]})
    assert not ok and str(link) in result["msg"] and "symbolic link" in result["msg"], result
    assert link.is_symlink() and target.read_text() == "x\n"


def test_a_masked_file_is_refused_naming_it(run_module, tmp_path):
    masked = tmp_path / "10-kubeadm.conf"
    masked.symlink_to("/dev/null")
    ok, result = run_module(gpunode_planned_files, {"files": [edit(masked, "", "[Service]\n")]})
    assert not ok and str(masked) in result["msg"], result
    assert os.readlink(masked) == "/dev/null"


def test_a_path_given_twice_is_refused(run_module, config):
    ok, result = run_module(gpunode_planned_files, {"files": [
        edit(config, "featureGates: {}\n", "a\n"), edit(config, "featureGates: {}\n", "b\n"),
    ]})
    assert not ok and "given twice" in result["msg"] and str(config) in result["msg"], result
    assert config.read_text() == "featureGates: {}\n"
