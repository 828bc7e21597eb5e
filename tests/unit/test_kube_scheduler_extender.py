"""kube_scheduler_extender module: real files in a temp dir, check mode, diff, backups, errors."""

import os
import stat
import tempfile

import kube_scheduler_extender as module
import pytest
import yaml
from ansible.module_utils import kube_scheduler as ks
from conftest import FIXTURES, shared_files

OWN = FIXTURES / "kube-scheduler"


@pytest.fixture
def node(tmp_path):
    """A control-plane /etc/kubernetes under tmp_path with the commented 1.29 manifest."""
    etc = tmp_path / "etc" / "kubernetes"
    manifests = etc / "manifests"
    manifests.mkdir(parents=True)
    manifest = manifests / "kube-scheduler.yaml"
    manifest.write_text((OWN / "kubeadm-v1.29.2-commented.yaml").read_text())
    manifest.chmod(0o600)
    return {
        "etc": etc, "manifests": manifests, "manifest": manifest,
        "args": {"kubernetes_version": "v1.29.2", "manifest_path": str(manifest),
                 "config_path": str(etc / "scheduler-extender-config.yaml"),
                 "backup_dir": str(etc / "gpunode-backups")},
    }


@pytest.fixture
def temp_dirs(monkeypatch):
    """Every directory a temp file was created in."""
    seen = []
    real = tempfile.mkstemp

    def spy(*args, **kwargs):
        seen.append(os.path.realpath(kwargs.get("dir") or tempfile.gettempdir()))
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", spy)
    return seen


def test_documentation_matches_argument_spec():
    options = yaml.safe_load(module.DOCUMENTATION)["options"]
    assert set(options) == set(module.ARGUMENT_SPEC)
    for name, spec in module.ARGUMENT_SPEC.items():
        assert options[name].get("type", "str") == spec["type"], name
        assert options[name].get("default") == spec.get("default"), name
    assert set(options["extender"]["suboptions"]) == set(module.EXTENDER_SPEC)
    for name, spec in module.EXTENDER_SPEC.items():
        assert options["extender"]["suboptions"][name].get("default") == spec.get("default"), name


def test_present_writes_config_and_manifest_and_nothing_else_in_static_dir(run_module, node, temp_dirs):
    original = node["manifest"].read_bytes()
    ok, result = run_module(module, {**node["args"], "backup": True}, diff=True)
    assert ok, result
    assert result["changed"] is True
    assert result["api_version"] == "kubescheduler.config.k8s.io/v1"
    assert sorted(os.listdir(node["manifests"])) == ["kube-scheduler.yaml"]
    assert str(node["manifests"]) not in temp_dirs
    assert stat.S_IMODE(node["manifest"].stat().st_mode) == 0o600
    config = node["etc"] / "scheduler-extender-config.yaml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert yaml.safe_load(config.read_text())["extenders"][0]["urlPrefix"].endswith("/gpushare-scheduler")
    backup = result["backup_files"][str(node["manifest"])]
    assert os.path.dirname(backup) == node["args"]["backup_dir"]
    with open(backup, "rb") as handle:
        assert handle.read() == original
    assert {d["before_header"] for d in result["diff"]} == {str(node["manifest"]), str(config)}
    assert f"--config={config}" in node["manifest"].read_text()

    ok, again = run_module(module, node["args"])
    assert ok and again["changed"] is False and again["files"] == []

    ok, gone = run_module(module, {**node["args"], "state": "absent"})
    assert ok and gone["changed"] is True
    assert node["manifest"].read_bytes() == original
    assert not config.exists()
    assert sorted(os.listdir(node["manifests"])) == ["kube-scheduler.yaml"]


def test_check_mode_writes_nothing_and_reports_the_change(run_module, node):
    before = node["manifest"].read_bytes()
    ok, result = run_module(module, node["args"], check_mode=True, diff=True)
    assert ok and result["changed"] is True
    assert node["manifest"].read_bytes() == before
    assert not (node["etc"] / "scheduler-extender-config.yaml").exists()
    assert any("--config=" in d["after"] for d in result["diff"])


def test_malformed_manifest_fails_naming_it_and_is_untouched(run_module, node):
    bad = next((p for p in shared_files("kube-scheduler", "MALFORMED-*")), None)
    text = bad.read_bytes() if bad else \
        b"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n   b: c\n"
    node["manifest"].write_bytes(text)
    ok, result = run_module(module, node["args"])
    assert not ok
    assert str(node["manifest"]) in result["msg"] and "not valid YAML" in result["msg"]
    assert node["manifest"].read_bytes() == text
    assert sorted(os.listdir(node["manifests"])) == ["kube-scheduler.yaml"]
    assert not (node["etc"] / "scheduler-extender-config.yaml").exists()


def test_backup_dir_inside_static_pod_dir_is_refused(run_module, node):
    before = node["manifest"].read_bytes()
    ok, result = run_module(module, {**node["args"], "backup": True,
                                     "backup_dir": str(node["manifests"] / "old")})
    assert not ok and "static pod directory" in result["msg"]
    assert node["manifest"].read_bytes() == before


def test_existing_config_is_merged_never_replaced(run_module, node):
    own = node["etc"] / "my-scheduler.yaml"
    own.write_text((OWN / "ksc-v1beta2-portable-commented.yaml").read_text().replace("v1beta2", "v1"))
    text = node["manifest"].read_text().replace(
        "    - --leader-elect=true\n", f"    - --leader-elect=true\n    - --config={own}\n").replace(
        "    volumeMounts:\n",
        f"    volumeMounts:\n    - mountPath: {own}\n      name: mine\n      readOnly: true\n",
    ).replace("  volumes:\n", f"  volumes:\n  - hostPath:\n      path: {own}\n    name: mine\n")
    node["manifest"].write_text(text)
    ok, result = run_module(module, node["args"])
    assert ok, result
    assert result["files"] == [str(own)] and result["config_path"] == str(own)
    assert node["manifest"].read_text() == text
    data = yaml.safe_load(own.read_text())
    assert [e["urlPrefix"] for e in data["extenders"]] == ["http://127.0.0.1:8888/storage",
                                                           "http://127.0.0.1:32766/gpushare-scheduler"]
    assert "# storage-aware filtering, owned by the storage team" in own.read_text()
    assert not (node["etc"] / "scheduler-extender-config.yaml").exists()
    ok, result = run_module(module, {**node["args"], "state": "absent"})
    assert ok and own.exists() and node["manifest"].read_text() == text
    assert [e["urlPrefix"] for e in yaml.safe_load(own.read_text())["extenders"]] == [
        "http://127.0.0.1:8888/storage"]


def test_rke2_flavor_on_files(run_module, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text((OWN / "rke2-config-commented.yaml").read_text())
    args = {"flavor": "rke2", "kubernetes_version": "v1.28.9+rke2r1", "rke2_config": str(config),
            "config_path": str(tmp_path / "extender.yaml"), "backup": True,
            "backup_dir": str(tmp_path / "backups")}
    ok, result = run_module(module, args)
    assert ok and result["changed"]
    assert f"config={tmp_path / 'extender.yaml'}" in yaml.safe_load(config.read_text())["kube-scheduler-arg"]
    assert os.listdir(tmp_path / "backups")
    ok, result = run_module(module, args)
    assert ok and not result["changed"]


def test_unknown_version_fails_cleanly(run_module, node):
    ok, result = run_module(module, {**node["args"], "kubernetes_version": "latest"})
    assert not ok and "kubernetes_version" in result["msg"]


def test_flavor_defaults_are_documented_paths():
    assert ks.DEFAULT_KUBECONFIG == {
        "kubeadm": "/etc/kubernetes/scheduler.conf",
        "rke": "/etc/kubernetes/ssl/kubecfg-kube-scheduler.yaml",
        "rke2": "/var/lib/rancher/rke2/server/cred/scheduler.kubeconfig"}


def test_restore_puts_backups_back_and_removes_created_files(run_module, node, temp_dirs):
    original = node["manifest"].read_bytes()
    ok, result = run_module(module, {**node["args"], "backup": True})
    assert ok and result["changed"]
    plan = result["rollback"]
    assert plan == {path: result["backup_files"].get(path) for path in result["files"]}
    ok, check = run_module(module, {**node["args"], "restore": plan}, check_mode=True)
    assert ok and check["changed"] and node["manifest"].read_bytes() != original
    ok, back = run_module(module, {**node["args"], "restore": plan})
    assert ok and back["changed"]
    assert node["manifest"].read_bytes() == original
    assert not (node["etc"] / "scheduler-extender-config.yaml").exists()
    assert sorted(os.listdir(node["manifests"])) == ["kube-scheduler.yaml"]
    assert str(node["manifests"]) not in temp_dirs
    ok, again = run_module(module, {**node["args"], "restore": plan})
    assert ok and not again["changed"]
