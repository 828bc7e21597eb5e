"""kubelet_config (KubeletConfiguration as YAML or JSON, the --config-dir drop-in) and kubelet_compat."""

import json

import pytest
import yaml
from ansible.module_utils.gpunode.kubelet.compat import (
    cgroup_v1_refusal,
    cgroup_version,
    config_dir_read,
    removed_flags,
)
from ansible.module_utils.gpunode.kubelet.config import (
    ConfigError,
    dropin_files,
    effective,
    is_json,
    read,
    render_dropin,
    write_gates,
)
from conftest import shared_files

EKS_CONFIG = """{
  "apiVersion": "kubelet.config.k8s.io/v1beta1",
  "kind": "KubeletConfiguration",
  "address": "0.0.0.0",
  "authentication": {
    "anonymous": {
      "enabled": false
    },
    "webhook": {
      "cacheTTL": "2m0s",
      "enabled": true
    }
  },
  "clusterDomain": "cluster.local",
  "featureGates": {
    "RotateKubeletServerCertificate": true
  },
  "failCgroupV1": false,
  "serverTLSBootstrap": true
}
"""


def test_json_config_stays_json_with_its_order_and_indent():
    data, gates = read(EKS_CONFIG)
    assert gates == {"RotateKubeletServerCertificate": True}
    new = write_gates(EKS_CONFIG, gates, {**gates, "DynamicResourceAllocation": True})
    parsed = json.loads(new)  # still JSON
    assert parsed["featureGates"] == {
        "RotateKubeletServerCertificate": True,
        "DynamicResourceAllocation": True,
    }
    assert list(parsed) == list(json.loads(EKS_CONFIG))
    assert {k: v for k, v in parsed.items() if k != "featureGates"} == {
        k: v for k, v in data.items() if k != "featureGates"
    }
    assert new.splitlines()[1] == '  "apiVersion": "kubelet.config.k8s.io/v1beta1",'
    # converged: the same text comes back
    assert write_gates(new, read(new)[1], read(new)[1]) == new


def test_json_config_on_one_line_and_without_gates():
    text = '{"kind":"KubeletConfiguration","apiVersion":"kubelet.config.k8s.io/v1beta1"}'
    assert is_json(text)
    new = write_gates(text, {}, {"DRAExtendedResource": True})
    assert "\n" not in new
    assert json.loads(new)["featureGates"] == {"DRAExtendedResource": True}
    assert json.loads(write_gates(new, {"DRAExtendedResource": True}, {})) == json.loads(text)


def test_malformed_json_names_the_line():
    with pytest.raises(ConfigError, match="line 2 column"):
        read('{"kind": "KubeletConfiguration",\n  "featureGates": {"A": true,}}')


@pytest.mark.parametrize(
    "path", shared_files("kubelet", "var-lib-kubelet-config.yaml-*"), ids=lambda p: p.name
)
def test_real_yaml_configs_read_and_write(path):
    text = path.read_text()
    data, gates = read(text)
    assert data["kind"] == "KubeletConfiguration"
    new = write_gates(text, gates, {**gates, "KubeletPodResourcesGet": True})
    assert yaml.safe_load(new)["featureGates"] == {**gates, "KubeletPodResourcesGet": True}


def test_not_a_kubelet_configuration():
    with pytest.raises(ConfigError, match="kind: KubeProxyConfiguration"):
        read("kind: KubeProxyConfiguration\n")
    with pytest.raises(ConfigError, match=r"featureGates\.A"):
        read("featureGates:\n  A: maybe\n")


def test_dropin_is_a_complete_kubelet_configuration():
    text = render_dropin({"DRAConsumableCapacity": True, "DRADeviceTaints": False})
    data = yaml.safe_load(text)
    assert data == {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "featureGates": {"DRAConsumableCapacity": True, "DRADeviceTaints": False},
    }
    assert text.startswith("# Written by gpunode")


def test_dropin_files_are_walked_like_the_kubelet(tmp_path):
    for name in ("20-b.conf", "10-a.conf", "30-c.yaml", "99-z.conf.1234.2026-11-23@10:00:00~"):
        (tmp_path / name).write_text("kind: KubeletConfiguration\n")
    (tmp_path / "15-sub").mkdir()
    (tmp_path / "15-sub" / "x.conf").write_text("kind: KubeletConfiguration\n")
    assert [p.replace(str(tmp_path) + "/", "") for p in dropin_files(str(tmp_path))] == [
        "10-a.conf",
        "15-sub/x.conf",
        "20-b.conf",
    ]
    assert dropin_files(str(tmp_path / "missing")) == []


def test_effective_merges_gates_per_key_and_the_last_fail_cgroup_v1():
    documents = [
        {"featureGates": {"A": True, "B": True}, "failCgroupV1": True},
        {"featureGates": {"B": False, "C": True}},
        {"featureGates": {"A": None}, "failCgroupV1": False},
    ]
    assert effective(documents) == ({"B": False, "C": True}, False)


@pytest.mark.parametrize(
    ("args", "version", "expected"),
    [
        (["--pod-infra-container-image=registry.k8s.io/pause:3.9"], "1.34.4", []),
        (
            ["--pod-infra-container-image=registry.k8s.io/pause:3.9"],
            "1.35.0",
            [("--pod-infra-container-image", "1.35")],
        ),
        (["--pod-infra-container-image", "x"], "v1.37.1", [("--pod-infra-container-image", "1.35")]),
        (["--containerd=/run/containerd/containerd.sock"], "1.36.2", []),
        (["--containerd=/run/containerd/containerd.sock"], "1.37.0", [("--containerd", "1.37")]),
        (["--housekeeping-interval=10s", "--v=2"], "1.37.0", []),
        (
            ["--storage-driver-db=x", "--containerd-namespace=k8s.io"],
            "1.38.0",
            [("--storage-driver-db", "1.37"), ("--containerd-namespace", "1.37")],
        ),
    ],
)
def test_removed_flags(args, version, expected):
    assert removed_flags(args, version) == expected


MOUNTINFO_V2 = (
    "24 1 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
)
MOUNTINFO_V1 = (
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs ro,size=4096k,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
)


def test_cgroup_version_from_mountinfo():
    assert cgroup_version(MOUNTINFO_V2) == 2
    assert cgroup_version(MOUNTINFO_V1) == 1
    assert cgroup_version("") is None


@pytest.mark.parametrize(
    ("version", "cgroup", "fail", "refused"),
    [
        ("1.34.9", 1, None, False),
        ("1.35.0", 1, None, True),
        ("1.35.0", 1, True, True),
        ("1.35.0", 1, False, False),
        ("1.37.2", 2, None, False),
        ("1.37.2", None, None, False),
    ],
)
def test_cgroup_v1_refusal(version, cgroup, fail, refused):
    why = cgroup_v1_refusal(version, cgroup, fail)
    assert bool(why) is refused
    if refused:
        assert "failCgroupV1: false" in why and "cgroup v1" in why


def test_config_dir_is_read_from_1_30_or_with_the_alpha_variable():
    assert not config_dir_read("1.27.0", {"KUBELET_CONFIG_DROPIN_DIR_ALPHA": "1"})
    assert not config_dir_read("1.29.3", {})
    assert config_dir_read("1.29.3", {"KUBELET_CONFIG_DROPIN_DIR_ALPHA": "1"})
    assert config_dir_read("1.30.0", {})
