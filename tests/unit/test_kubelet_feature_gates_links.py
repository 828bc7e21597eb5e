"""kubelet_feature_gates on files that are symbolic links: the target is edited, the link kept.

Each editable kubelet file (a KubeletConfiguration, an environment file with
KUBELET_EXTRA_ARGS, a systemd drop-in, RKE2's config.yaml) is made a link of
each layout (tests/unit/symlinks.py); a drop-in the module would delete is
refused when it is a link.
"""

import os

import kubelet_feature_gates
import pytest
import yaml
from symlinks import ELSEWHERE, LAYOUTS, Link, backup_text, snapshot
from test_kubelet_plan import kubeadm_node

CONFIG = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfeatureGates:\n  A: true\n"
ENV = 'KUBELET_EXTRA_ARGS="--v=2"\n'
DROPIN = (
    "[Service]\n"
    'Environment="KUBELET_KUBECONFIG_ARGS=--kubeconfig=/etc/kubernetes/kubelet.conf"\n'
    "ExecStart=\n"
    "ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_EXTRA_ARGS\n"
)
RKE2 = 'token: x\nkubelet-arg:\n  - "cluster-domain=cluster.local"\n'


def _converge(run_module, tmp_path, link, args):
    """Check mode writes nothing and names the link; the run edits the target; a second run is a no-op."""
    before = snapshot(tmp_path)
    ok, result = run_module(kubelet_feature_gates, args, check_mode=True, diff=True)
    assert ok and result["changed"], result
    assert snapshot(tmp_path) == before
    assert result["diff"]["before_header"] == f"{link.path} -> {link.target.resolve()}"
    old = link.text()
    ok, result = run_module(kubelet_feature_gates, args)
    assert ok and result["changed"], result
    assert link.kept() and link.text() != old
    assert result["files"] == [str(link.path)]
    if args.get("backup"):
        assert backup_text(result["backup_file"]) == old
        assert result["restore"] == [{"path": str(link.path), "backup": result["backup_file"]}]
    ok, again = run_module(kubelet_feature_gates, args)
    assert ok and not again["changed"] and link.kept()
    return result


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_linked_kubelet_configuration(run_module, tmp_path, layout):
    link = Link.make(tmp_path / "var" / "lib" / "kubelet" / "config.yaml", layout, CONFIG, root=tmp_path)
    args = {"gates": {"DynamicResourceAllocation": True}, "kubernetes_version": "1.30.2",
            "config_file": str(link.path), "backup": True}
    _converge(run_module, tmp_path, link, args)
    assert yaml.safe_load(link.text())["featureGates"] == {"A": True, "DynamicResourceAllocation": True}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_linked_flags_environment_file(run_module, tmp_path, layout):
    link = Link.make(tmp_path / "etc" / "default" / "kubelet", layout, ENV, root=tmp_path)
    args = {"gates": {"DevicePlugins": True}, "kubernetes_version": "1.10.13",
            "flags_file": str(link.path), "backup": True}
    _converge(run_module, tmp_path, link, args)
    assert link.text() == 'KUBELET_EXTRA_ARGS="--v=2 --feature-gates=DevicePlugins=true"\n'


@pytest.mark.parametrize("layout", ELSEWHERE)
def test_a_linked_systemd_dropin(run_module, tmp_path, layout):
    path = tmp_path / "etc" / "systemd" / "system" / "kubelet.service.d" / "10-kubeadm.conf"
    link = Link.make(path, layout, DROPIN, root=tmp_path)
    args = {"gates": {"DevicePlugins": True}, "kubernetes_version": "1.10.13",
            "flags_file": str(link.path), "backup": True}
    _converge(run_module, tmp_path, link, args)
    assert 'Environment="KUBELET_EXTRA_ARGS=--feature-gates=DevicePlugins=true"' in link.text()
    # the backup is next to the link, as for a file, and the drop-in folder holds no second .conf
    assert [n for n in os.listdir(path.parent) if n.endswith(".conf")] == ["10-kubeadm.conf"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_linked_rke2_config(run_module, tmp_path, layout):
    link = Link.make(tmp_path / "etc" / "rancher" / "rke2" / "config.yaml", layout, RKE2, root=tmp_path)
    args = {"gates": {"KubeletPodResourcesGetAllocatable": True}, "kubernetes_version": "1.24.17",
            "rke2_config": str(link.path)}
    _converge(run_module, tmp_path, link, args)
    assert yaml.safe_load(link.text())["kubelet-arg"][-1] == \
        "feature-gates=KubeletPodResourcesGetAllocatable=true"


def test_a_dangling_flags_file_link_gets_its_target_created(run_module, tmp_path):
    link = Link.make(tmp_path / "etc" / "default" / "kubelet", "absolute", None, root=tmp_path)
    args = {"gates": {"DevicePlugins": True}, "kubernetes_version": "1.8.15", "flags_file": str(link.path)}
    ok, result = run_module(kubelet_feature_gates, args)
    assert ok and result["changed"] and link.kept()
    assert link.text() == "KUBELET_EXTRA_ARGS=--feature-gates=DevicePlugins=true\n"


@pytest.mark.parametrize("check_mode", [True, False])
def test_an_own_dropin_to_delete_that_is_a_link_is_refused(run_module, tmp_path, check_mode):
    conf_d = "/etc/kubernetes/kubelet.conf.d"
    node = kubeadm_node(tmp_path, kubeadm_flags=f"--config-dir={tmp_path}{conf_d}")
    dropin = node.path(f"{conf_d}/90-gpunode-feature-gates.conf")
    link = Link.make(dropin, "absolute", "kind: KubeletConfiguration\nfeatureGates:\n  DevicePlugins: true\n",
                     root=tmp_path)
    before = snapshot(tmp_path)
    # DevicePlugins was removed in 1.28: taken out, the drop-in would be left empty and deleted
    ok, result = run_module(kubelet_feature_gates, node.args(gates={"DevicePlugins": True}),
                            check_mode=check_mode)
    assert not ok
    assert result["msg"].startswith(f"{dropin}: a symbolic link to {link.target.resolve()}, not a file "
                                    "gpunode created; neither the link nor its target is removed")
    assert snapshot(tmp_path) == before
