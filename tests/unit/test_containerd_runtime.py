"""library/containerd_runtime: main() writes both files, check mode, diff, errors, running state."""

import os
import time

import containerd_runtime
import pytest
from ansible.module_utils.gpunode.formats import toml_reader
from ansible.module_utils.gpunode.host import systemd
from conftest import FIXTURES
from symlinks import ELSEWHERE, LAYOUTS, Link, backup_text, snapshot

OWN = FIXTURES / "docker"
DEFAULTS = (OWN / "containerd-config-default-1.6.20-debian.toml").read_text()
DEBIAN = OWN / "containerd-config.toml-debian-bookworm-default.toml"
OLD = 1_500_000_000


def load(text):
    return toml_reader.loads(text, "test", AssertionError)


@pytest.fixture
def containerd_16(monkeypatch):
    """The node's containerd is Debian's 1.6.20 (no binary is run)."""
    monkeypatch.setattr(
        containerd_runtime, "containerd_facts", lambda module, wanted: ("1.6.20~ds1", DEFAULTS)
    )


def _paths(tmp_path, source=DEBIAN):
    config = tmp_path / "config.toml"
    if source is not None:
        config.write_bytes(source.read_bytes())
        os.utime(config, (OLD, OLD))
    return config, tmp_path / "conf.d" / "99-nvidia.toml"


def _args(config, dropin, **extra):
    return {"config_path": str(config), "dropin_path": str(dropin), "service": "", **extra}


def test_writes_dropin_and_import_and_keeps_backups_out_of_conf_d(run_module, tmp_path, containerd_16):
    config, dropin = _paths(tmp_path)
    original = config.read_text()
    backups = tmp_path / "backups"

    ok, result = run_module(
        containerd_runtime, _args(config, dropin, backup=True, backup_dir=str(backups)), diff=True
    )

    assert ok, result
    assert result["changed"] and result["restart_required"]
    assert result["files"] == [str(dropin), str(config)]
    assert load(config.read_text())["imports"] == [str(dropin)]
    assert config.read_text().replace(f'imports = ["{dropin}"]\n', "") == original
    cri = load(dropin.read_text())["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["cni"]["bin_dir"] == "/usr/lib/cni"  # Debian's own setting survives the import
    options = cri["containerd"]["runtimes"]["nvidia"]["options"]
    assert options["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    backup = result["backup_files"][str(config)]
    assert backup.startswith(str(backups) + str(tmp_path))  # the file's own path below backup_dir
    with open(backup) as handle:
        assert handle.read() == original
    assert os.listdir(dropin.parent) == ["99-nvidia.toml"]  # nothing an imports glob could load
    assert len(result["diff"]) == 2
    assert result["effective"]["default_runtime"] == "runc"


def test_second_run_changes_nothing(run_module, tmp_path, containerd_16):
    config, dropin = _paths(tmp_path)
    run_module(containerd_runtime, _args(config, dropin, set_default=True))
    os.utime(config, (OLD, OLD))
    os.utime(dropin, (OLD, OLD))

    ok, result = run_module(containerd_runtime, _args(config, dropin, set_default=True))

    assert ok and not result["changed"] and result["files"] == []
    assert config.stat().st_mtime == OLD and dropin.stat().st_mtime == OLD
    assert result["effective"]["default_runtime"] == "nvidia"


def test_rewritten_config_gets_the_import_back(run_module, tmp_path, containerd_16):
    config, dropin = _paths(tmp_path)
    run_module(containerd_runtime, _args(config, dropin))
    config.write_bytes(DEBIAN.read_bytes())  # a tool rewrote config.toml

    ok, result = run_module(containerd_runtime, _args(config, dropin))

    assert ok and result["files"] == [str(config)]
    assert str(dropin) in load(config.read_text())["imports"]


def test_check_mode_writes_nothing(run_module, tmp_path, containerd_16):
    config, dropin = _paths(tmp_path)
    content = config.read_bytes()

    ok, result = run_module(containerd_runtime, _args(config, dropin), check_mode=True, diff=True)

    assert ok and result["changed"]
    assert config.read_bytes() == content and config.stat().st_mtime == OLD
    assert not dropin.exists()
    assert result["diff"][0]["before"] == ""


def test_missing_config_is_created(run_module, tmp_path, containerd_16):
    config, dropin = _paths(tmp_path, source=None)
    ok, result = run_module(containerd_runtime, _args(config, dropin))
    assert ok and result["changed"]
    assert load(config.read_text()) == {"version": 2, "imports": [str(dropin)]}
    assert oct(config.stat().st_mode & 0o777) == "0o644"


@pytest.mark.parametrize("source", sorted(OWN.glob("MALFORMED-containerd-*")), ids=lambda p: p.name)
def test_malformed_config_fails_untouched(run_module, tmp_path, containerd_16, source):
    config, dropin = _paths(tmp_path, source)
    content = config.read_bytes()

    ok, result = run_module(containerd_runtime, _args(config, dropin))

    assert not ok
    assert result["msg"].startswith(f"{config}: not valid TOML")
    assert result["msg"].endswith("left unchanged")
    assert config.read_bytes() == content and config.stat().st_mtime == OLD
    assert not dropin.exists()


def test_version_4_on_containerd_2_1_fails_untouched(run_module, tmp_path, monkeypatch):
    monkeypatch.setattr(containerd_runtime.AnsibleModule, "get_bin_path", lambda self, *a, **k: None)
    config, dropin = _paths(tmp_path, OWN / "containerd-config.toml-v4-containerd2.3-server-plugins.toml")

    ok, result = run_module(containerd_runtime, _args(config, dropin, containerd_version="2.1.9"))

    assert not ok
    assert "config version 4 needs containerd 2.3 or newer, this is 2.1.9" in result["msg"]
    assert config.stat().st_mtime == OLD and not dropin.exists()


def test_containerd_2_from_the_version_argument(run_module, tmp_path, monkeypatch):
    monkeypatch.setattr(containerd_runtime.AnsibleModule, "get_bin_path", lambda self, *a, **k: None)
    config, dropin = _paths(tmp_path, OWN / "containerd-config.toml-v3-containerd2.toml")

    args = _args(config, dropin, containerd_version="2.0.2", set_default=True, enable_cdi=True)
    ok, result = run_module(containerd_runtime, args)

    assert ok and result["schema_version"] == 3 and not result["full_cri_table"]
    cri = load(dropin.read_text())["plugins"]["io.containerd.cri.v1.runtime"]
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert "enable_cdi" not in cri  # on by default in 2.x
    assert result["effective"]["cdi_enabled"] is True


def test_other_imports_are_read_from_disk(run_module, tmp_path, containerd_16):
    extra = tmp_path / "extra.d"
    extra.mkdir()
    (extra / "registry.toml").write_text(
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".registry]\nconfig_path = "/r"\n'
    )
    config, dropin = _paths(tmp_path, None)
    config.write_text(f'version = 2\nimports = ["{extra}/*.toml"]\n')

    ok, _ = run_module(containerd_runtime, _args(config, dropin))

    assert ok
    cri = load(dropin.read_text())["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["registry"]["config_path"] == "/r"


def _running(monkeypatch, started, active=True):
    """containerd.service runs, its main process started at ``started``."""
    monkeypatch.setattr(
        systemd,
        "units_state",
        lambda module, units: {u: {"active": active, "pid": 4242, "loaded": True} for u in units},
    )
    monkeypatch.setattr(systemd, "process_start", lambda pid: started)


def test_a_write_the_daemon_has_not_read_needs_a_restart(run_module, tmp_path, containerd_16, monkeypatch):
    """A run killed between the write and the restart: the next run restarts."""
    config, dropin = _paths(tmp_path)
    run_module(containerd_runtime, _args(config, dropin))
    _running(monkeypatch, started=time.time() - 3600)

    ok, result = run_module(containerd_runtime, _args(config, dropin, service="containerd.service"))

    assert ok and not result["changed"]
    assert result["restart_required"]
    assert sorted(result["stale_files"]) == sorted([str(config), str(dropin)])


def test_a_daemon_started_after_the_write_needs_nothing(run_module, tmp_path, containerd_16, monkeypatch):
    config, dropin = _paths(tmp_path)
    run_module(containerd_runtime, _args(config, dropin))
    _running(monkeypatch, started=time.time() + 1)

    ok, result = run_module(
        containerd_runtime, _args(config, dropin, service="containerd.service"), check_mode=True
    )

    assert ok and not result["changed"] and not result["restart_required"] and result["stale_files"] == []


def test_a_stopped_daemon_needs_no_restart(run_module, tmp_path, containerd_16, monkeypatch):
    config, dropin = _paths(tmp_path)
    _running(monkeypatch, started=None, active=False)

    ok, result = run_module(containerd_runtime, _args(config, dropin, service="containerd.service"))

    assert ok and result["changed"] and not result["restart_required"]


def test_without_a_toml_parser_it_fails_naming_the_packages(run_module, tmp_path, monkeypatch):
    monkeypatch.setattr(containerd_runtime, "TOML_PARSER", None)
    config, dropin = _paths(tmp_path)

    ok, result = run_module(containerd_runtime, _args(config, dropin))

    assert not ok
    assert "python3-tomli" in result["msg"] and "python3-toml" in result["msg"]
    assert config.stat().st_mtime == OLD


def _linked_run(run_module, tmp_path, link, args):
    """Check mode (nothing written, diff names the link), the run, the second run; the run's result."""
    before = snapshot(tmp_path)
    ok, result = run_module(containerd_runtime, args, check_mode=True, diff=True)
    assert ok and result["changed"] and snapshot(tmp_path) == before
    assert f"{link.path} -> {link.target.resolve()}" in [d["before_header"] for d in result["diff"]]
    ok, result = run_module(containerd_runtime, args)
    assert ok and result["changed"], result
    assert link.kept()
    ok, again = run_module(containerd_runtime, args)
    assert ok and not again["changed"] and link.kept()
    return result


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_linked_config_toml_is_edited_through_the_link(run_module, tmp_path, containerd_16, layout):
    original = DEBIAN.read_text()
    link = Link.make(tmp_path / "etc" / "containerd" / "config.toml", layout, original, root=tmp_path)
    dropin = tmp_path / "etc" / "containerd" / "conf.d" / "99-nvidia.toml"
    args = _args(link.path, dropin, backup=True, backup_dir=str(tmp_path / "backups"))

    result = _linked_run(run_module, tmp_path, link, args)

    assert load(link.text())["imports"] == [str(dropin)]
    assert link.text().replace(f'imports = ["{dropin}"]\n', "") == original
    backup = result["backup_files"][str(link.path)]
    assert backup.startswith(str(tmp_path / "backups") + str(link.path) + ".")
    assert backup_text(backup) == original
    assert {"path": str(link.path), "backup": backup} in result["restore"]


@pytest.mark.parametrize("layout", ELSEWHERE)
def test_a_linked_dropin_is_edited_through_the_link(run_module, tmp_path, containerd_16, layout):
    config = tmp_path / "etc" / "containerd" / "config.toml"
    dropin = config.parent / "conf.d" / "99-nvidia.toml"
    config.parent.mkdir(parents=True)
    config.write_text(DEBIAN.read_text())
    assert run_module(containerd_runtime, _args(config, dropin))[0]
    old = dropin.read_text()
    link = Link.make(dropin, layout, old, root=tmp_path)
    args = _args(config, dropin, set_default=True, backup=True, backup_dir=str(tmp_path / "backups"))

    result = _linked_run(run_module, tmp_path, link, args)

    assert result["files"] == [str(dropin)]
    assert load(link.text())["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["default_runtime_name"] \
        == "nvidia"
    backup = result["backup_files"][str(dropin)]
    assert backup_text(backup) == old
    assert os.listdir(dropin.parent) == ["99-nvidia.toml"]  # still the link alone


