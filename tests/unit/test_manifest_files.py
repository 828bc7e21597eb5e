"""module_utils/gpunode/addons/manifest_files.py and the module manifest_files."""

import os
import pathlib
import stat

import manifest_files as module
import pytest
from ansible.module_utils.gpunode.addons.manifest_files import ManifestFilesError, check_name, plan
from symlinks import LAYOUTS, Link, backup_text, snapshot

SA = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n"


def test_plan_creates_updates_removes_and_skips_identical(tmp_path):
    (tmp_path / "10-same.yaml").write_text(SA)
    (tmp_path / "20-old.yaml").write_text("old\n")
    (tmp_path / "30-gone.yaml").write_text("x\n")
    changes = plan(str(tmp_path), {"10-same.yaml": SA, "20-old.yaml": SA, "40-new.yaml": SA},
                   ["30-gone.yaml", "50-never-there.yaml"])
    assert [(c["name"], c["action"]) for c in changes] == [
        ("20-old.yaml", "update"), ("40-new.yaml", "create"), ("30-gone.yaml", "remove")]


def test_plan_adds_the_final_newline(tmp_path):
    (tmp_path / "a.yaml").write_text("kind: X\n")
    assert plan(str(tmp_path), {"a.yaml": "kind: X"}) == []


@pytest.mark.parametrize(
    "name", ["../escape.yaml", "sub/dir.yaml", ".hidden.yaml", "notyaml.txt", "", "a..b.yaml"]
)
def test_names_outside_plain_manifest_files_are_refused(name):
    with pytest.raises(ManifestFilesError, match="not a plain manifest file name"):
        check_name(name)


def test_directory_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "out"
    target.write_text("")
    with pytest.raises(ManifestFilesError, match=f"{target}: exists and is not a directory"):
        plan(str(target), {"a.yaml": SA})


def test_symlink_in_place_of_a_manifest_is_followed(tmp_path):
    (tmp_path / "elsewhere").write_text("precious\n")
    (tmp_path / "a.yaml").symlink_to(tmp_path / "elsewhere")
    [change] = plan(str(tmp_path), {"a.yaml": SA})
    assert change["action"] == "update" and change["before"] == "precious\n"
    assert change["shown"] == f"{tmp_path / 'a.yaml'} -> {(tmp_path / 'elsewhere').resolve()}"


def test_symlink_to_remove_is_refused(tmp_path):
    (tmp_path / "elsewhere").write_text("precious\n")
    (tmp_path / "a.yaml").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ManifestFilesError, match=r"a symbolic link to .*neither the link nor its target"):
        plan(str(tmp_path), {}, ["a.yaml"])


def test_symlink_to_a_directory_is_refused(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.yaml").symlink_to(tmp_path / "sub")
    with pytest.raises(ManifestFilesError, match="not a regular file"):
        plan(str(tmp_path), {"a.yaml": SA})


def test_write_and_remove_of_one_name_is_refused(tmp_path):
    with pytest.raises(ManifestFilesError, match="both to write and to remove"):
        plan(str(tmp_path), {"a.yaml": SA}, ["a.yaml"])


def test_module_writes_files_with_mode_and_is_idempotent(run_module, tmp_path):
    out = tmp_path / "new" / "dir"
    args = {"path": str(out), "files": {"10-a.yaml": SA, "20-b.yaml": SA}}
    ok, result = run_module(module, args)
    assert ok and result["changed"] and result["created"] == ["10-a.yaml", "20-b.yaml"]
    assert (out / "10-a.yaml").read_text() == SA
    assert stat.S_IMODE(os.stat(out / "10-a.yaml").st_mode) == 0o644
    assert not [p for p in out.iterdir() if p.name.startswith(".gpu-addons-")]
    ok, result = run_module(module, args)
    assert ok and not result["changed"]


def test_module_check_mode_writes_nothing_and_diff_shows_the_change(run_module, tmp_path):
    (tmp_path / "10-a.yaml").write_text("old\n")
    ok, result = run_module(module, {"path": str(tmp_path), "files": {"10-a.yaml": SA, "20-b.yaml": SA}},
                            check_mode=True, diff=True)
    assert ok and result["changed"]
    assert (tmp_path / "10-a.yaml").read_text() == "old\n" and not (tmp_path / "20-b.yaml").exists()
    assert result["diff"][0]["before"] == "old\n" and result["diff"][0]["after"] == SA
    assert result["diff"][1]["before_header"] == "/dev/null"


def test_module_check_mode_on_a_missing_directory_creates_nothing(run_module, tmp_path):
    args = {"path": str(tmp_path / "nope"), "files": {"a.yaml": SA}}
    ok, result = run_module(module, args, check_mode=True)
    assert ok and result["changed"] and not (tmp_path / "nope").exists()


def test_module_removes_the_other_modes_files_and_keeps_foreign_ones(run_module, tmp_path):
    (tmp_path / "50-daemonset-gpushare-device-plugin.yaml").write_text("x\n")
    (tmp_path / "kustomization.yaml").write_text("resources: []\n")
    ok, result = run_module(module, {"path": str(tmp_path), "files": {"50-daemonset-nvidia.yaml": SA},
                                     "remove": ["50-daemonset-gpushare-device-plugin.yaml"], "backup": True})
    assert ok and result["removed"] == ["50-daemonset-gpushare-device-plugin.yaml"]
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".yaml"))
    assert names == ["50-daemonset-nvidia.yaml", "kustomization.yaml"]
    assert len(result["backup_files"]) == 1 and pathlib.Path(result["backup_files"][0]).read_text() == "x\n"


def test_module_fails_naming_the_file_and_leaves_it_untouched(run_module, tmp_path):
    bad = tmp_path / "10-a.yaml"
    bad.write_bytes(b"\xff\xfe binary\n")
    ok, result = run_module(module, {"path": str(tmp_path), "files": {"10-a.yaml": SA}})
    assert not ok and str(bad) in result["msg"] and "not UTF-8" in result["msg"]
    assert bad.read_bytes() == b"\xff\xfe binary\n"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_module_writes_a_linked_manifest_through_the_link(run_module, tmp_path, layout):
    out = tmp_path / "gitops" / "gpu"
    link = Link.make(out / "10-a.yaml", layout, "old\n", root=tmp_path)
    args = {"path": str(out), "files": {"10-a.yaml": SA}, "backup": True, "mode": "0600"}
    before = snapshot(tmp_path)
    ok, result = run_module(module, args, check_mode=True, diff=True)
    assert ok and result["changed"] and snapshot(tmp_path) == before
    assert result["diff"][0]["before_header"] == f"{link.path} -> {link.target.resolve()}"

    ok, result = run_module(module, args)

    assert ok and result["updated"] == ["10-a.yaml"], result
    assert link.kept() and link.text() == SA
    assert stat.S_IMODE(link.target.stat().st_mode) == 0o600
    assert len(result["backup_files"]) == 1 and backup_text(result["backup_files"][0]) == "old\n"
    ok, result = run_module(module, args)
    assert ok and not result["changed"] and link.kept()


@pytest.mark.parametrize("check_mode", [True, False])
def test_module_refuses_to_remove_a_link_and_leaves_both(run_module, tmp_path, check_mode):
    link = Link.make(tmp_path / "out" / "50-daemonset-gpushare-device-plugin.yaml", "absolute", SA,
                     root=tmp_path)
    before = snapshot(tmp_path)
    ok, result = run_module(module, {"path": str(tmp_path / "out"), "files": {},
                                     "remove": ["50-daemonset-gpushare-device-plugin.yaml"]},
                            check_mode=check_mode)
    assert not ok and result["msg"].startswith(f"{link.path}: a symbolic link to {link.target.resolve()}")
    assert snapshot(tmp_path) == before


def test_module_fsyncs_the_folder_after_a_removal(run_module, tmp_path, monkeypatch):
    (tmp_path / "50-old.yaml").write_text(SA)
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), (tmp_path / "50-old.yaml").exists()))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    ok, result = run_module(module, {"path": str(tmp_path), "files": {}, "remove": ["50-old.yaml"]})
    assert ok and result["removed"] == ["50-old.yaml"]
    assert synced == [(str(tmp_path), False)]


def test_the_module_supports_check_mode(monkeypatch):
    captured = {}
    monkeypatch.setattr(module, "AnsibleModule", lambda **kwargs: captured.update(kwargs))
    module.build_module()
    assert captured["supports_check_mode"] is True


