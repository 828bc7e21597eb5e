"""The kubelet_feature_gates module: main() end to end, check mode, diff, every error path."""

import os
import pathlib
import shutil
import stat

import kubelet_feature_gates
import pytest
from ansible.module_utils.gpunode.formats.yaml_load import safe_load
from ansible.module_utils.gpunode.host.files import rke2_files
from ansible.module_utils.gpunode.kubelet.rke_args import read_rke2_gates, rke2_items
from conftest import FIXTURES, shared_files


def ids(path):
    return path.name


def copy(src, tmp_path, name=None):
    dest = tmp_path / (name or src.name)
    shutil.copyfile(src, dest)
    os.chmod(dest, stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
    return dest


@pytest.fixture
def config(tmp_path):
    return copy(FIXTURES / "kubelet" / "config-featuregates-comments.yaml", tmp_path, "config.yaml")


def test_config_file_gets_the_gate_and_keeps_the_rest(run_module, config):
    before = config.read_text()
    ok, result = run_module(
        kubelet_feature_gates,
        {
            "gates": {"DynamicResourceAllocation": True},
            "kubernetes_version": "v1.30.2",
            "config_file": str(config),
        },
        diff=True,
    )
    assert ok, result
    assert result["changed"] and result["restart_required"]
    assert result["applied_gates"] == {"DynamicResourceAllocation": True}
    after = config.read_text()
    data = safe_load(after)
    assert data["featureGates"] == {
        "KubeletPodResourcesGetAllocatable": True,
        "GracefulNodeShutdown": True,
        "DynamicResourceAllocation": True,
    }
    for line in before.splitlines():
        assert line in after.splitlines()
    assert result["diff"]["before"] == before and result["diff"]["after"] == after
    ok, again = run_module(
        kubelet_feature_gates,
        {
            "gates": {"DynamicResourceAllocation": True},
            "kubernetes_version": "v1.30.2",
            "config_file": str(config),
        },
    )
    assert ok and not again["changed"]
    assert config.read_text() == after


def test_check_mode_reports_but_does_not_write(run_module, config):
    before = config.read_bytes()
    ok, result = run_module(
        kubelet_feature_gates,
        {
            "gates": {"DynamicResourceAllocation": True},
            "kubernetes_version": "1.30.2",
            "config_file": str(config),
        },
        check_mode=True,
        diff=True,
    )
    assert ok and result["changed"]
    assert "DynamicResourceAllocation: true" in result["diff"]["after"]
    assert config.read_bytes() == before


def test_refused_gate_fails_with_the_reason_and_writes_nothing(run_module, config):
    before = config.read_bytes()
    ok, result = run_module(
        kubelet_feature_gates,
        {"gates": {"Accelerators": True}, "kubernetes_version": "1.28.2", "config_file": str(config)},
    )
    assert not ok
    assert (
        "Accelerators was removed in Kubernetes 1.11; this kubelet is 1.28.2 and would not start"
        in result["msg"]
    )
    assert str(config) in result["msg"]
    assert config.read_bytes() == before


def test_locked_gate_with_the_other_value_fails(run_module, config):
    ok, result = run_module(
        kubelet_feature_gates,
        {
            "gates": {"KubeletPodResourcesGetAllocatable": False},
            "kubernetes_version": "1.29.0",
            "config_file": str(config),
        },
    )
    assert not ok and "locked to true" in result["msg"]


def test_removed_graduated_gate_is_skipped_and_taken_out_of_the_file(run_module, tmp_path):
    path = tmp_path / "kubelet"
    path.write_text('KUBELET_EXTRA_ARGS="--v=2 --feature-gates=DevicePlugins=true,Foo=false"\n')
    ok, result = run_module(
        kubelet_feature_gates,
        {"gates": {"DevicePlugins": True}, "kubernetes_version": "1.30.1", "flags_file": str(path)},
    )
    assert ok, result
    assert result["changed"]
    assert "removed in 1.28" in result["skipped_gates"]["DevicePlugins"]
    assert result["applied_gates"] == {}
    assert path.read_text() == 'KUBELET_EXTRA_ARGS="--v=2 --feature-gates=Foo=false"\n'


def test_unknown_gate_needs_allow_unknown(run_module, config):
    args = {"gates": {"MadeUpGate": True}, "kubernetes_version": "1.30.0", "config_file": str(config)}
    ok, result = run_module(kubelet_feature_gates, args)
    assert not ok and "allow_unknown" in result["msg"]
    ok, result = run_module(kubelet_feature_gates, {**args, "allow_unknown": True})
    assert ok and result["applied_gates"] == {"MadeUpGate": True}


@pytest.mark.parametrize("path", shared_files("kubelet", "MALFORMED-*"), ids=ids)
def test_malformed_dropin_fails_and_is_untouched(run_module, tmp_path, path):
    target = copy(path, tmp_path)
    before = target.read_bytes()
    ok, result = run_module(
        kubelet_feature_gates,
        {
            "gates": {"DevicePlugins": True},
            "kubernetes_version": "1.9.3",
            "flags_file": str(target),
            "backup": True,
        },
    )
    assert not ok
    assert str(target) in result["msg"] and "line 1" in result["msg"]
    assert target.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == [target.name]


def test_version_is_detected_from_the_kubelet(run_module, tmp_path):
    kubelet = tmp_path / "kubelet"
    kubelet.write_text("#!/bin/sh\necho 'Kubernetes v1.9.11'\n")
    kubelet.chmod(0o755)
    dropin = (
        copy(shared_files("kubelet", "10-kubeadm.conf-1.8-1.10-official")[0], tmp_path, "10-kubeadm.conf")
        if (shared_files("kubelet", "10-kubeadm.conf-1.8-1.10-official"))
        else None
    )
    if dropin is None:
        dropin = tmp_path / "10-kubeadm.conf"
        dropin.write_text("[Service]\nExecStart=\nExecStart=/usr/bin/kubelet $KUBELET_EXTRA_ARGS\n")
    ok, result = run_module(
        kubelet_feature_gates,
        {
            "gates": {"DevicePlugins": True},
            "kubelet_path": str(kubelet),
            "flags_file": str(dropin),
            "backup": True,
        },
    )
    assert ok, result
    assert result["kubernetes_version"] == "1.9.11"
    assert 'Environment="KUBELET_EXTRA_ARGS=--feature-gates=DevicePlugins=true"' in dropin.read_text()
    assert os.path.exists(result["backup_file"])


def test_failing_kubelet_version_is_reported(run_module, tmp_path, config):
    kubelet = tmp_path / "kubelet"
    kubelet.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    kubelet.chmod(0o755)
    ok, result = run_module(
        kubelet_feature_gates,
        {"gates": {"DevicePlugins": True}, "kubelet_path": str(kubelet), "config_file": str(config)},
    )
    assert not ok and "boom" in result["msg"]


def test_missing_env_file_is_created(run_module, tmp_path):
    path = tmp_path / "default-kubelet"
    ok, result = run_module(
        kubelet_feature_gates,
        {"gates": {"DevicePlugins": True}, "kubernetes_version": "1.8.15", "flags_file": str(path)},
    )
    assert ok and result["changed"]
    assert path.read_text() == "KUBELET_EXTRA_ARGS=--feature-gates=DevicePlugins=true\n"


def test_missing_config_file_fails(run_module, tmp_path):
    ok, result = run_module(
        kubelet_feature_gates,
        {
            "gates": {"DevicePlugins": True},
            "kubernetes_version": "1.20.0",
            "config_file": str(tmp_path / "nope"),
        },
    )
    assert not ok and "does not exist" in result["msg"]


@pytest.mark.parametrize("path", shared_files("kubelet", "var-lib-kubelet-config.yaml-*"), ids=ids)
def test_real_kubelet_configs(run_module, tmp_path, path):
    target = copy(path, tmp_path)
    before = target.read_text()
    args = {
        "gates": {"KubeletPodResourcesGetAllocatable": True},
        "kubernetes_version": "1.25.4",
        "config_file": str(target),
    }
    ok, result = run_module(kubelet_feature_gates, args)
    assert ok, result
    after = target.read_text()
    assert safe_load(after) == {
        **safe_load(before),
        "featureGates": {"KubeletPodResourcesGetAllocatable": True},
    }
    # every original line is still there, in order
    remaining = iter(after.splitlines())
    assert all(line in remaining for line in before.splitlines())
    ok, again = run_module(kubelet_feature_gates, args)
    assert ok and not again["changed"]


@pytest.mark.parametrize("path", shared_files("rke", "rke1-*"), ids=ids)
def test_rke1_cluster_yml(run_module, tmp_path, path):
    target = copy(path, tmp_path, "cluster.yml")
    before = safe_load(target.read_text())
    args = {"gates": {"DevicePlugins": True}, "rke_cluster_yml": str(target)}
    if not before.get("kubernetes_version"):
        args["kubernetes_version"] = "v1.9.7-rancher1"
    ok, result = run_module(kubelet_feature_gates, args)
    assert ok, result
    gates = safe_load(target.read_text())["services"]["kubelet"]["extra_args"]["feature-gates"]
    assert "DevicePlugins=true" in gates.split(",")
    old = ((before.get("services") or {}).get("kubelet") or {}).get("extra_args") or {}
    if old.get("feature-gates"):
        assert gates.startswith(old["feature-gates"])


def test_rke2_dropin_that_replaces_kubelet_arg_is_the_one_edited(run_module, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text('# base\nkubelet-arg:\n  - "max-pods=200"\ntoken: x\n')
    dropins = tmp_path / "config.yaml.d"
    dropins.mkdir()
    (dropins / "10-a.yaml").write_text("kubelet-arg:\n  - v=2\n  - feature-gates=Foo=true\n")
    (dropins / "20-b.yaml").write_text("kubelet-arg+:\n  - feature-gates=DevicePlugins=true\n")
    base_before = config.read_text()
    ok, result = run_module(
        kubelet_feature_gates,
        {
            "gates": {"DevicePlugins": True},
            "kubernetes_version": "v1.28.3+rke2r1",
            "rke2_config": str(config),
        },
    )
    assert ok, result
    # DevicePlugins is gone in 1.28 and must leave the effective kubelet-arg list; Foo stays
    assert config.read_text() == base_before
    texts = {name: pathlib.Path(name).read_text() for name in rke2_files(str(config))}
    items = rke2_items(texts)
    assert read_rke2_gates(items) == {"Foo": True}
    assert [value for _, _, _, value in items if not value.startswith("feature-gates=")] == ["v=2"]
    assert not any("DevicePlugins" in text for text in texts.values())
    assert result["gates"] == {"Foo": True}
    assert sorted(result["files"]) == sorted(str(dropins / n) for n in ("10-a.yaml", "20-b.yaml"))


def test_rke2_without_gates_appends_to_config(run_module, tmp_path):
    config = tmp_path / "config.yaml"
    text = shared_files("rke", "rke2-config.yaml-kubelet-arg-samsonnguyen")
    config.write_text(text[0].read_text() if text else 'kubelet-arg:\n  - "cluster-domain=cluster.local"\n')
    ok, result = run_module(
        kubelet_feature_gates,
        {
            "gates": {"KubeletPodResourcesGetAllocatable": True},
            "kubernetes_version": "1.24.17",
            "rke2_config": str(config),
        },
    )
    assert ok and result["changed"]
    assert (
        safe_load(config.read_text())["kubelet-arg"][-1]
        == "feature-gates=KubeletPodResourcesGetAllocatable=true"
    )


def test_at_most_one_target_and_none_means_find_the_kubelet(run_module, config, tmp_path):
    # no file named and no kubelet on this host (an empty /proc, no unit): nothing to do, said so
    ok, result = run_module(
        kubelet_feature_gates,
        {"gates": {"DevicePlugins": True}, "proc_root": str(tmp_path), "unit_files": []},
    )
    assert ok and not result["changed"] and result["present"] is False
    assert result["ansible_facts"]["kubelet_gpu"]["present"] is False
    ok, result = run_module(
        kubelet_feature_gates,
        {"gates": {"DevicePlugins": True}, "config_file": str(config), "flags_file": str(config)},
    )
    assert not ok and "mutually exclusive" in result["msg"]


@pytest.mark.parametrize(
    ("version", "legacy", "expected"),
    [
        ("1.9.11", False, {"DevicePlugins": True}),
        ("1.9.11", True, {"DevicePlugins": True, "Accelerators": True}),
        ("1.20.15", True, {}),
    ],
)
def test_gpu_node_asks_for_what_the_version_needs(run_module, tmp_path, version, legacy, expected):
    path = tmp_path / "kubelet"
    args = {
        "gpu_node": True,
        "legacy_accelerators": legacy,
        "kubernetes_version": version,
        "flags_file": str(path),
    }
    ok, result = run_module(kubelet_feature_gates, args)
    assert ok, result
    assert result["needed_gates"] == expected
    assert result["gates"] == expected
    assert result["changed"] is bool(expected)
    assert path.exists() is bool(expected)


def test_gpu_node_takes_a_leftover_deviceplugins_out_after_an_upgrade(run_module, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(
        "kind: KubeletConfiguration\nfeatureGates:\n  DevicePlugins: true  # from 1.9 days\nport: 10250\n"
    )
    args = {"gpu_node": True, "kubernetes_version": "1.28.2", "config_file": str(path)}
    ok, result = run_module(kubelet_feature_gates, args)
    assert ok, result
    assert result["changed"]
    assert "DevicePlugins" in result["skipped_gates"]
    assert path.read_text() == "kind: KubeletConfiguration\nfeatureGates: {}\nport: 10250\n"
    ok, again = run_module(kubelet_feature_gates, args)
    assert ok and not again["changed"]
    # a 1.28 node without the leftover: nothing to write
    path.write_text("kind: KubeletConfiguration\nport: 10250\n")
    ok, clean = run_module(kubelet_feature_gates, args)
    assert ok and not clean["changed"]


def test_explicit_gates_win_over_the_gpu_defaults(run_module, tmp_path):
    path = tmp_path / "kubelet"
    args = {
        "gpu_node": True,
        "gates": {"DevicePlugins": False},
        "kubernetes_version": "1.9.1",
        "flags_file": str(path),
    }
    ok, result = run_module(kubelet_feature_gates, args)
    assert ok, result
    assert result["gates"] == {"DevicePlugins": False}


@pytest.mark.parametrize(("systemd_runs", "expected"), [
    (True, ("kubelet: no kubelet on this host", True)),
    (False, ("kubelet: no service manager (systemd) on this host to run a kubelet", False)),
])
def test_a_host_without_a_kubelet_is_skipped_saying_why(run_module, tmp_path, monkeypatch, systemd_runs,
                                                         expected):
    reason, warned = expected
    from ansible.module_utils.common.warnings import get_warning_messages  # noqa: PLC0415
    from ansible.module_utils.gpunode.host import systemd  # noqa: PLC0415

    monkeypatch.setattr(systemd, "BOOTED_MARKER", str(tmp_path / "run-systemd-system"))
    if systemd_runs:
        (tmp_path / "run-systemd-system").mkdir()
    ok, result = run_module(kubelet_feature_gates,
                            {"gates": {"DevicePlugins": True}, "proc_root": str(tmp_path), "unit_files": []})
    assert ok and not result["changed"] and not result["restart_required"]
    (skipped,) = result["ansible_facts"]["kubelet_gpu"]["skipped"]
    assert skipped.startswith(reason)
    # where systemd runs, a kubelet may come (a node not joined yet): the run warns as before
    assert any("No kubelet on this host" in w for w in get_warning_messages()) is warned
