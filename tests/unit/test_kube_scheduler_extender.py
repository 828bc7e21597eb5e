"""kube_scheduler_extender module: real files in a temp dir, a fake /proc, a stand-in kubectl."""

import copy
import json
import os
import shutil
import stat
import tempfile

import kube_scheduler_extender as module
import pytest
import test_verified_restart
from ansible.module_utils.gpunode.formats.yaml_load import safe_load
from ansible.module_utils.gpunode.scheduler import api as ka
from conftest import FIXTURES, ROOT, shared_files
from fake_proc import KUBEADM_SCHEDULER_ARGV as MANIFEST_ARGV
from fake_proc import FakeProc

OWN = FIXTURES / "kube-scheduler"
# the health endpoint of test_verified_restart, under a name of its own here
health_server = test_verified_restart.http_server
KUBECTL = ROOT / "tests" / "simnode" / "fakes" / "kube-scheduler" / "kubectl"


@pytest.fixture
def health(health_server):
    """kube-scheduler's health endpoint: ``url``, and ``code`` to answer (test_verified_restart's server)."""
    url, status = health_server
    status["url"] = url
    return status


@pytest.fixture
def node(tmp_path, health):
    """A control-plane /etc/kubernetes under tmp_path with the commented 1.29 manifest, an empty /proc."""
    etc = tmp_path / "etc" / "kubernetes"
    manifests = etc / "manifests"
    manifests.mkdir(parents=True)
    manifest = manifests / "kube-scheduler.yaml"
    manifest.write_text((OWN / "kubeadm-v1.29.2-commented.yaml").read_text())
    manifest.chmod(0o600)
    proc = FakeProc(tmp_path)
    return {
        "etc": etc,
        "manifests": manifests,
        "manifest": manifest,
        "proc": proc,
        "health": health,
        "config": etc / "scheduler-extender-config.yaml",
        "args": {
            "manifest_path": str(manifest),
            "config_path": str(etc / "scheduler-extender-config.yaml"),
            "backup_dir": str(etc / "gpunode-backups"),
            "proc_root": str(proc.root),
            "health_url": health["url"],
            "kubeadm_config": "skip",
        },
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


def test_documentation_names_pyyaml_and_what_the_module_returns():
    doc = safe_load(module.DOCUMENTATION)
    assert doc["requirements"] and "python3-yaml" in doc["requirements"][0]
    returned = safe_load(module.RETURN)
    assert {"restart", "changes", "kubernetes_version", "version_source", "flavor"} <= set(returned)


def test_a_run_leaves_the_argument_spec_as_it_was(run_module, node):
    """AnsibleModule fills suboption defaults into a dict default: build_module() gives it a copy,
    so a run without `extender` cannot change what later tests (and test order) see."""
    spec = copy.deepcopy(module.ARGUMENT_SPEC)
    args = {key: value for key, value in node["args"].items() if key != "extender"}
    run_module(module, args, check_mode=True)
    assert spec == module.ARGUMENT_SPEC


def test_present_writes_config_and_manifest_and_nothing_else_in_static_dir(run_module, node, temp_dirs):
    original = node["manifest"].read_bytes()
    ok, result = run_module(module, {**node["args"], "backup": True}, diff=True)
    assert ok, result
    assert result["changed"] is True
    assert result["api_version"] == "kubescheduler.config.k8s.io/v1"
    assert result["kubernetes_version"] == "1.29.2"
    assert result["version_source"].startswith("the image tag in ")
    assert sorted(os.listdir(node["manifests"])) == ["kube-scheduler.yaml"]
    assert str(node["manifests"]) not in temp_dirs
    assert stat.S_IMODE(node["manifest"].stat().st_mode) == 0o600
    assert stat.S_IMODE(node["config"].stat().st_mode) == 0o600
    assert safe_load(node["config"].read_text())["extenders"][0]["urlPrefix"].endswith(
        "/gpushare-scheduler"
    )
    backup = result["backup_files"][str(node["manifest"])]
    assert os.path.dirname(backup) == node["args"]["backup_dir"]
    with open(backup, "rb") as handle:
        assert handle.read() == original
    assert {d["before_header"] for d in result["diff"]} == {str(node["manifest"]), str(node["config"])}
    assert f"--config={node['config']}" in node["manifest"].read_text()
    # what to do next, for verified_restart: the kubelet replaces the scheduler; roll back both files
    assert result["restart"]["restore"] == [
        {"path": str(node["manifest"]), "backup": backup},
        {"path": str(node["config"]), "backup": None},
    ]
    assert result["changes"] == [
        f"kube-scheduler: extender http://127.0.0.1:32766/gpushare-scheduler "
        f"(kubescheduler.config.k8s.io/v1): {node['manifest']}, {node['config']}"
    ]
    facts = result["ansible_facts"]["gpushare_scheduler"]
    assert facts == {
        "flavor": "kubeadm",
        "kubernetes_version": "1.29.2",
        "version_source": result["version_source"],
        "api_version": "kubescheduler.config.k8s.io/v1",
        "config_path": str(node["config"]),
        "state": "present",
        "waiting_for": None,
    }

    ok, again = run_module(module, node["args"])
    assert ok and again["changed"] is False and again["files"] == [] and again["changes"] == []

    ok, gone = run_module(module, {**node["args"], "state": "absent"})
    assert ok and gone["changed"] is True
    assert node["manifest"].read_bytes() == original
    assert not node["config"].exists()
    assert sorted(os.listdir(node["manifests"])) == ["kube-scheduler.yaml"]


def test_check_mode_writes_nothing_and_reports_the_change(run_module, node):
    before = node["manifest"].read_bytes()
    ok, result = run_module(module, {**node["args"], "backup": True}, check_mode=True, diff=True)
    assert ok and result["changed"] is True
    assert node["manifest"].read_bytes() == before
    assert not node["config"].exists()
    assert not os.path.exists(node["args"]["backup_dir"])
    assert any("--config=" in d["after"] for d in result["diff"])


def test_malformed_manifest_fails_naming_it_and_is_untouched(run_module, node):
    bad = next((p for p in shared_files("kube-scheduler", "MALFORMED-*")), None)
    text = (
        bad.read_bytes()
        if bad
        else b"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n   b: c\n"
    )
    node["manifest"].write_bytes(text)
    ok, result = run_module(module, {**node["args"], "kubernetes_version": "1.16.2"})
    assert not ok
    assert str(node["manifest"]) in result["msg"] and "not valid YAML" in result["msg"]
    assert node["manifest"].read_bytes() == text
    assert sorted(os.listdir(node["manifests"])) == ["kube-scheduler.yaml"]
    assert not node["config"].exists()


def test_backup_dir_inside_static_pod_dir_is_refused(run_module, node):
    before = node["manifest"].read_bytes()
    ok, result = run_module(
        module, {**node["args"], "backup": True, "backup_dir": str(node["manifests"] / "old")}
    )
    assert not ok and "static pod directory" in result["msg"]
    assert node["manifest"].read_bytes() == before


def test_existing_config_is_merged_never_replaced(run_module, node):
    own = node["etc"] / "my-scheduler.yaml"
    own.write_text((OWN / "ksc-v1beta2-portable-commented.yaml").read_text().replace("v1beta2", "v1"))
    text = (
        node["manifest"]
        .read_text()
        .replace("    - --leader-elect=true\n", f"    - --leader-elect=true\n    - --config={own}\n")
        .replace(
            "    volumeMounts:\n",
            f"    volumeMounts:\n    - mountPath: {own}\n      name: mine\n      readOnly: true\n",
        )
        .replace("  volumes:\n", f"  volumes:\n  - hostPath:\n      path: {own}\n    name: mine\n")
    )
    node["manifest"].write_text(text)
    ok, result = run_module(module, node["args"])
    assert ok, result
    assert result["files"] == [str(own)] and result["config_path"] == str(own)
    assert node["manifest"].read_text() == text
    data = safe_load(own.read_text())
    assert [e["urlPrefix"] for e in data["extenders"]] == [
        "http://127.0.0.1:8888/storage",
        "http://127.0.0.1:32766/gpushare-scheduler",
    ]
    assert "# storage-aware filtering, owned by the storage team" in own.read_text()
    assert not node["config"].exists()
    ok, result = run_module(module, {**node["args"], "state": "absent"})
    assert ok and own.exists() and node["manifest"].read_text() == text
    assert [e["urlPrefix"] for e in safe_load(own.read_text())["extenders"]] == [
        "http://127.0.0.1:8888/storage"
    ]


def test_rke2_flavor_on_files_with_a_dropin_that_sets_the_list(run_module, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text((OWN / "rke2-config-commented.yaml").read_text())
    dropins = tmp_path / "config.yaml.d"
    dropins.mkdir()
    dropin = dropins / "50-scheduler.yaml"
    dropin.write_text("# the platform team's scheduler flags\nkube-scheduler-arg:\n  - v=4\n")
    args = {
        "flavor": "rke2",
        "kubernetes_version": "v1.28.9+rke2r1",
        "rke2_config": str(config),
        "config_path": str(tmp_path / "extender.yaml"),
        "backup": True,
        "backup_dir": str(tmp_path / "backups"),
        "proc_root": str(FakeProc(tmp_path).root),
        "health_url": "",
    }
    before = config.read_text()
    ok, result = run_module(module, args)
    assert ok and result["changed"], result
    # the drop-in's list replaces config.yaml's: the flag goes where it takes effect
    assert safe_load(dropin.read_text())["kube-scheduler-arg"] == [
        "v=4",
        f"config={tmp_path / 'extender.yaml'}",
    ]
    assert "# the platform team's scheduler flags" in dropin.read_text()
    assert safe_load(config.read_text())["kube-scheduler-extra-mount"] == [
        f"{tmp_path / 'extender.yaml'}:{tmp_path / 'extender.yaml'}:ro"
    ]
    assert result["restart"]["unit"] == "rke2-server"
    assert os.listdir(tmp_path / "backups")
    ok, result = run_module(module, args)
    assert ok and not result["changed"]
    ok, result = run_module(module, {**args, "state": "absent"})
    assert ok and config.read_text() == before
    assert dropin.read_text() == "# the platform team's scheduler flags\nkube-scheduler-arg:\n  - v=4\n"


def test_unknown_version_fails_cleanly(run_module, node):
    ok, result = run_module(module, {**node["args"], "kubernetes_version": "latest"})
    assert not ok and "kubernetes_version" in result["msg"]


def test_a_digest_pinned_image_takes_the_version_from_the_running_binary(run_module, node):
    text = (
        node["manifest"]
        .read_text()
        .replace(
            "registry.k8s.io/kube-scheduler:v1.29.2", "registry.k8s.io/kube-scheduler@sha256:" + "4" * 64
        )
    )
    node["manifest"].write_text(text)
    node["proc"].add(2314, "kube-scheduler", MANIFEST_ARGV, age=300, version="v1.29.2")
    ok, result = run_module(module, node["args"], check_mode=True)
    assert ok, result
    assert result["kubernetes_version"] == "1.29.2"
    assert result["version_source"] == f"{node['proc'].root}/2314/exe --version (kube-scheduler PID 2314)"


def test_without_any_source_of_the_version_the_failure_says_what_was_looked_at(run_module, node):
    node["manifest"].write_text(
        node["manifest"]
        .read_text()
        .replace(
            "registry.k8s.io/kube-scheduler:v1.29.2", "registry.k8s.io/kube-scheduler@sha256:" + "4" * 64
        )
    )
    ok, result = run_module(module, node["args"], check_mode=True)
    assert not ok
    assert result["msg"].startswith(
        "cannot tell the Kubernetes version (kubeadm); looked at: the image tag in "
    )
    assert result["msg"].endswith("set kubernetes_version")


def test_a_scheduler_that_runs_an_older_configuration_is_restarted_on_a_later_run(run_module, node):
    # converge, then a kill before the restart: the files are right, the scheduler is not
    ok, result = run_module(module, {**node["args"], "backup": True})
    assert ok and result["changed"]
    node["proc"].add(41, "kube-scheduler", MANIFEST_ARGV, age=600)  # still the old flags
    ok, again = run_module(module, {**node["args"], "backup": True})
    assert ok and not again["changed"]
    assert again["restart"]["wait_for_exit"] == [41]
    assert "runs with other flags than" in again["restart"]["reason"]
    # the unverified change is what to roll back if it does not come up
    assert {r["path"] for r in again["restart"]["restore"]} == {str(node["manifest"]), str(node["config"])}
    assert again["ansible_facts"]["gpushare_scheduler"]["state"] == "pending"


def test_a_healthy_current_scheduler_needs_nothing_and_clears_the_journal(run_module, node):
    ok, _ = run_module(module, {**node["args"], "backup": True})
    argv = [*MANIFEST_ARGV, f"--config={node['config']}"]
    node["proc"].add(42, "kube-scheduler", argv, age=0.0)  # started after the files were written
    journal = os.path.join(node["args"]["backup_dir"], module.JOURNAL)
    assert os.path.exists(journal)
    ok, again = run_module(module, {**node["args"], "backup": True})
    assert ok and again["restart"] is None and not again["changed"]
    assert not os.path.exists(journal)


def test_an_unhealthy_scheduler_is_waited_for_with_the_unverified_change_to_roll_back(run_module, node):
    ok, _ = run_module(module, {**node["args"], "backup": True})
    node["proc"].add(43, "kube-scheduler", [*MANIFEST_ARGV, f"--config={node['config']}"], age=0.0)
    node["health"]["code"] = 500
    ok, again = run_module(module, {**node["args"], "backup": True})
    assert ok and again["restart"]["reason"].startswith("kube-scheduler is not healthy")
    assert {r["path"] for r in again["restart"]["restore"]} == {str(node["manifest"]), str(node["config"])}


def test_the_kubeadm_config_record_waits_for_the_scheduler_then_is_written(
    run_module, node, tmp_path, monkeypatch
):
    state = tmp_path / "kubeadm-config.json"
    shutil.copy(FIXTURES / "kubeadm-config" / "configmap-v1beta4-kubeadm-dryrun.json", state)
    monkeypatch.setenv("GPUNODE_FAKE_KUBECTL_STATE", str(state))
    admin = tmp_path / "admin.conf"
    admin.write_text("apiVersion: v1\nkind: Config\n")
    args = {
        **node["args"],
        "kubeadm_config": "required",
        "kubectl": str(KUBECTL),
        "admin_kubeconfig": str(admin),
    }
    ok, check = run_module(module, args, check_mode=True, diff=True)
    assert ok and check["kubeadm_config"]["state"] == "changed"  # predicted
    assert any("kube-system/kubeadm-config" in d["before_header"] for d in check["diff"])
    ok, first = run_module(module, args)
    assert ok and first["kubeadm_config"]["state"] == "deferred"
    assert "name: config" not in json.loads(state.read_text())["data"]["ClusterConfiguration"]
    node["proc"].add(44, "kube-scheduler", [*MANIFEST_ARGV, f"--config={node['config']}"], age=0.0)
    ok, second = run_module(module, args)
    assert ok and second["changed"] and second["kubeadm_config"]["state"] == "changed"
    stored = safe_load(json.loads(state.read_text())["data"]["ClusterConfiguration"])
    assert {"name": "config", "value": str(node["config"])} in stored["scheduler"]["extraArgs"]
    assert stored["scheduler"]["extraVolumes"][0]["mountPath"] == str(node["config"])
    ok, third = run_module(module, args)
    assert ok and not third["changed"] and third["kubeadm_config"]["state"] == "recorded"


def test_without_kubectl_the_record_is_a_warning_in_auto_and_a_failure_when_required(
    run_module, node, tmp_path
):
    args = {**node["args"], "kubeadm_config": "auto", "kubectl": str(tmp_path / "no-kubectl")}
    ok, result = run_module(module, args, check_mode=True)
    assert ok and result["kubeadm_config"]["state"] == "unknown"
    ok, result = run_module(module, {**args, "kubeadm_config": "required"}, check_mode=True)
    assert not ok and result["msg"].startswith("kube-system/kubeadm-config: cannot be read")


def test_flavor_auto_finds_kubeadm(run_module, node):
    ok, result = run_module(module, {**node["args"], "flavor": "auto"}, check_mode=True)
    assert ok and result["flavor"] == "kubeadm"


def test_flavor_auto_without_any_cluster_fails_saying_what_is_missing(run_module, tmp_path):
    ok, result = run_module(
        module,
        {
            "flavor": "auto",
            "manifest_path": str(tmp_path / "none.yaml"),
            "rke2_config": str(tmp_path / "rke2" / "config.yaml"),
        },
    )
    assert not ok and result["msg"].startswith("cannot tell how kube-scheduler runs here")


def test_rke_admin_reports_what_rke_up_has_not_applied(run_module, tmp_path):
    cluster = tmp_path / "cluster.yml"
    cluster.write_text((OWN / "rke1-cluster-commented.yml").read_text())
    state = tmp_path / "cluster.rkestate"
    state.write_text(
        json.dumps(
            {
                "currentState": {
                    "rkeConfig": {"services": {"scheduler": {"extraArgs": {"v": "2"}}, "kubelet": {}}}
                }
            }
        )
    )
    args = {"flavor": "rke", "cluster_yml": str(cluster)}
    ok, result = run_module(module, args)
    assert ok and result["changed"] and result["kubernetes_version"] == "v1.26.8-rancher1-1"
    assert result["rke_up_pending"] == [
        f"services.scheduler.extra_args.config is '{ka.DEFAULT_CONFIG_PATH['rke']}' in {cluster}, "
        f"None in what the last rke up applied ({state})"
    ]
    assert result["restart"] is None
    state.write_text(
        json.dumps(
            {
                "currentState": {
                    "rkeConfig": {
                        "services": {
                            "scheduler": {"extraArgs": {"v": "2", "config": ka.DEFAULT_CONFIG_PATH["rke"]}}
                        }
                    }
                }
            }
        )
    )
    ok, result = run_module(module, args)
    assert ok and not result["changed"] and result["rke_up_pending"] == []
    state.unlink()
    ok, result = run_module(module, args)
    assert ok and result["rke_up_pending"] is None


def test_missing_pyyaml_fails_with_the_library_and_the_package(run_module, node, monkeypatch):
    monkeypatch.setattr(module, "YAML_IMPORT_ERROR", "Traceback: No module named 'yaml'")
    ok, result = run_module(module, node["args"])
    assert not ok
    assert "PyYAML (python3-yaml)" in result["msg"] and result["missing_packages"] == ["python3-yaml"]
    assert node["manifest"].read_text() == (OWN / "kubeadm-v1.29.2-commented.yaml").read_text()


def test_flavor_defaults_are_documented_paths():
    assert ka.DEFAULT_KUBECONFIG == {
        "kubeadm": "/etc/kubernetes/scheduler.conf",
        "rke": "/etc/kubernetes/ssl/kubecfg-kube-scheduler.yaml",
        "rke2": "/var/lib/rancher/rke2/server/cred/scheduler.kubeconfig",
    }
