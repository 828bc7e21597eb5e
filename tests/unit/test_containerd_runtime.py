"""library/containerd_runtime: main() writes both files, check mode, diff, errors."""

import os

import containerd_runtime
import pytest
import tomllib
import yaml
from conftest import FIXTURES

OWN = FIXTURES / "docker"
DEFAULTS = (OWN / "containerd-config-default-1.6.20-debian.toml").read_text()
DEBIAN = OWN / "containerd-config.toml-debian-bookworm-default.toml"
OLD = 1_500_000_000


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
    return {"config_path": str(config), "dropin_path": str(dropin), **extra}


def test_writes_dropin_and_import(run_module, tmp_path, containerd_16):
    config, dropin = _paths(tmp_path)
    original = config.read_text()

    ok, result = run_module(containerd_runtime, _args(config, dropin, backup=True), diff=True)

    assert ok, result
    assert result["changed"] and result["restart_required"]
    assert result["files"] == [str(dropin), str(config)]
    assert tomllib.loads(config.read_text())["imports"] == [str(dropin)]
    assert config.read_text().replace(f'imports = ["{dropin}"]\n', "") == original
    cri = tomllib.loads(dropin.read_text())["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["cni"]["bin_dir"] == "/usr/lib/cni"  # Debian's own setting survives the import
    options = cri["containerd"]["runtimes"]["nvidia"]["options"]
    assert options["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    with open(result["backup_files"][str(config)]) as handle:
        assert handle.read() == original
    assert len(result["diff"]) == 2


def test_second_run_changes_nothing(run_module, tmp_path, containerd_16):
    config, dropin = _paths(tmp_path)
    run_module(containerd_runtime, _args(config, dropin))
    os.utime(config, (OLD, OLD))
    os.utime(dropin, (OLD, OLD))

    ok, result = run_module(containerd_runtime, _args(config, dropin))

    assert ok and not result["changed"] and result["files"] == []
    assert config.stat().st_mtime == OLD and dropin.stat().st_mtime == OLD


def test_rewritten_config_gets_the_import_back(run_module, tmp_path, containerd_16):
    config, dropin = _paths(tmp_path)
    run_module(containerd_runtime, _args(config, dropin))
    config.write_bytes(DEBIAN.read_bytes())  # a tool rewrote config.toml

    ok, result = run_module(containerd_runtime, _args(config, dropin))

    assert ok and result["files"] == [str(config)]
    assert str(dropin) in tomllib.loads(config.read_text())["imports"]


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
    assert tomllib.loads(config.read_text()) == {"version": 2, "imports": [str(dropin)]}
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


def test_containerd_2_from_the_version_argument(run_module, tmp_path, monkeypatch):
    monkeypatch.setattr(containerd_runtime.AnsibleModule, "get_bin_path", lambda self, *a, **k: None)
    config, dropin = _paths(tmp_path, OWN / "containerd-config.toml-v3-containerd2.toml")

    args = _args(config, dropin, containerd_version="2.0.2", set_default=True)
    ok, result = run_module(containerd_runtime, args)

    assert ok and result["schema_version"] == 3 and not result["full_cri_table"]
    cri = tomllib.loads(dropin.read_text())["plugins"]["io.containerd.cri.v1.runtime"]
    assert cri["containerd"]["default_runtime_name"] == "nvidia"


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
    cri = tomllib.loads(dropin.read_text())["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["registry"]["config_path"] == "/r"


def test_documentation_matches_argument_spec():
    doc = yaml.safe_load(containerd_runtime.DOCUMENTATION)["options"]
    spec = containerd_runtime.ARGUMENT_SPEC
    assert set(doc) == set(spec)
    for name, option in spec.items():
        assert doc[name]["type"] == option["type"], name
        assert doc[name].get("default") == option.get("default"), name
