"""kube_scheduler_extender on files that are symbolic links: the target is edited, the link kept.

The kubeadm manifest (links into another folder only: the kubelet runs every
file of the static pod directory), the scheduler configuration, RKE's
cluster.yml and RKE2's config.yaml, each as a link of each layout
(tests/unit/symlinks.py). A configuration file to remove that is a link is
refused.
"""

import os

import kube_scheduler_extender as module
import pytest
from ansible.module_utils.gpunode.formats.yaml_load import safe_load
from fake_proc import FakeProc
from symlinks import ELSEWHERE, LAYOUTS, Link, backup_text, snapshot
from test_kube_scheduler_extender import OWN, health, health_server, node  # noqa: F401 (fixtures)

URL = "http://127.0.0.1:32766/gpushare-scheduler"


def _check_mode_writes_nothing(run_module, tmp_path, args, link):
    before = snapshot(tmp_path)
    ok, result = run_module(module, args, check_mode=True, diff=True)
    assert ok and result["changed"], result
    assert snapshot(tmp_path) == before
    assert f"{link.path} -> {link.target.resolve()}" in [d["before_header"] for d in result["diff"]]


@pytest.mark.parametrize("layout", ELSEWHERE)
def test_a_linked_kubeadm_manifest(run_module, tmp_path, node, layout):  # noqa: F811 (the fixture)
    original = node["manifest"].read_text()
    link = Link.make(node["manifest"], layout, original, root=tmp_path)
    args = {**node["args"], "backup": True}
    _check_mode_writes_nothing(run_module, tmp_path, args, link)

    ok, result = run_module(module, args)

    assert ok and result["changed"], result
    assert link.kept() and f"--config={node['config']}" in link.text()
    assert os.listdir(node["manifests"]) == ["kube-scheduler.yaml"]  # no temp file, no backup there
    backup = result["backup_files"][str(link.path)]
    assert backup_text(backup) == original
    assert result["restart"]["restore"][0] == {"path": str(link.path), "backup": backup}
    ok, again = run_module(module, node["args"])
    assert ok and not again["changed"] and link.kept()
    ok, gone = run_module(module, {**node["args"], "state": "absent"})
    assert ok and gone["changed"] and link.kept() and link.text() == original
    assert not node["config"].exists()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_linked_scheduler_configuration(run_module, tmp_path, node, layout):  # noqa: F811 (the fixture)
    link = Link.make(node["config"], layout, None, root=tmp_path)  # dangling: the target is created
    ok, result = run_module(module, node["args"])
    assert ok and result["changed"], result
    assert link.kept() and safe_load(link.text())["extenders"][0]["urlPrefix"] == URL

    other = {**node["args"], "backup": True, "extender": {"url_prefix": "http://127.0.0.1:8000/x"}}
    old = link.text()
    _check_mode_writes_nothing(run_module, tmp_path, other, link)
    ok, result = run_module(module, other)
    assert ok and result["changed"] and result["files"] == [str(link.path)], result
    assert link.kept() and safe_load(link.text())["extenders"][0]["urlPrefix"] == "http://127.0.0.1:8000/x"
    assert backup_text(result["backup_files"][str(link.path)]) == old
    ok, again = run_module(module, other)
    assert ok and not again["changed"]

    # removing the configuration: the link is the operator's, neither it nor its target goes
    manifest = node["manifest"].read_bytes()
    before = snapshot(tmp_path)
    for check_mode in (True, False):
        ok, result = run_module(module, {**node["args"], "state": "absent"}, check_mode=check_mode)
        assert not ok and result["msg"].startswith(
            f"{link.path}: a symbolic link to {link.target.resolve()}, not a file gpunode created")
        assert snapshot(tmp_path) == before and node["manifest"].read_bytes() == manifest


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_linked_rke2_config(run_module, tmp_path, layout):
    original = (OWN / "rke2-config-commented.yaml").read_text()
    link = Link.make(tmp_path / "etc" / "rancher" / "rke2" / "config.yaml", layout, original, root=tmp_path)
    args = {
        "flavor": "rke2",
        "kubernetes_version": "v1.28.9+rke2r1",
        "rke2_config": str(link.path),
        "config_path": str(tmp_path / "extender.yaml"),
        "backup": True,
        "backup_dir": str(tmp_path / "backups"),
        "proc_root": str(FakeProc(tmp_path).root),
        "health_url": "",
    }
    _check_mode_writes_nothing(run_module, tmp_path, args, link)
    ok, result = run_module(module, args)
    assert ok and result["changed"], result
    assert link.kept()
    assert f"config={tmp_path / 'extender.yaml'}" in safe_load(link.text())["kube-scheduler-arg"]
    assert backup_text(result["backup_files"][str(link.path)]) == original
    ok, again = run_module(module, args)
    assert ok and not again["changed"]
    ok, gone = run_module(module, {**args, "state": "absent"})
    assert ok and gone["changed"] and link.kept() and link.text() == original


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_linked_rke_cluster_yml(run_module, tmp_path, layout):
    original = (OWN / "rke1-cluster-commented.yml").read_text()
    link = Link.make(tmp_path / "rke" / "cluster.yml", layout, original, root=tmp_path)
    args = {"flavor": "rke", "cluster_yml": str(link.path), "backup": True}
    _check_mode_writes_nothing(run_module, tmp_path, args, link)
    ok, result = run_module(module, args)
    assert ok and result["changed"], result
    assert link.kept()
    assert safe_load(link.text())["services"]["scheduler"]["extra_args"]["config"]
    backup = result["backup_files"][str(link.path)]
    assert os.path.dirname(backup) == str(link.path.parent)  # RKE keeps backups beside cluster.yml
    assert backup_text(backup) == original
    ok, again = run_module(module, args)
    assert ok and not again["changed"] and link.kept()
