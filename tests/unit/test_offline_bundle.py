"""module_utils/gpunode/common/offline_bundle.py and library/offline_bundle_plan.py: what a bundle holds."""

import hashlib

import offline_bundle_plan
import pytest
from ansible.module_utils.gpunode.common import offline_bundle as ob

UBUNTU = {"host": "u", "distribution": "Ubuntu", "distribution_version": "24.04", "architecture": "x86_64"}
DEBIAN = {"host": "d", "distribution": "Debian", "distribution_version": "12", "architecture": "aarch64"}


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("1.0", "1.0", 0), ("1.0", "1.1", -1), ("1.10", "1.9", 1), ("1.0~rc1", "1.0", -1),
    ("1.0", "1.0+b1", -1), ("1:1.0", "2.0", 1), ("580.95.05-1", "580.95.05-0ubuntu1", 1),
    ("1.17.10-1", "1.18.0~rc.1-1", -1), ("535.216.03-3~deb12u1", "535.216.03-3", -1), ("1.0a", "1.0", 1),
    ("1.0-1", "1.0-1", 0), ("0.9", "1.0~", -1),
])
def test_compare_versions_as_dpkg_does(a, b, expected):
    assert ob.compare_versions(a, b) == expected
    assert ob.compare_versions(b, a) == -expected


def stanza(name, version, depends="", provides=""):
    text = f"Package: {name}\nVersion: {version}\nArchitecture: amd64\n"
    text += f"Filename: ./pool/{name}_{version}.deb\n"
    text += f"SHA256: {hashlib.sha256(name.encode() + version.encode()).hexdigest()}\n"
    text += f"Depends: {depends}\n" if depends else ""
    text += f"Provides: {provides}\n" if provides else ""
    return text


INDEX = "\n".join([
    stanza("cuda-drivers-580", "580.82.07-1", "nvidia-driver-580 (>= 580.82.07)"),
    stanza("cuda-drivers-580", "580.95.05-1", "nvidia-driver-580 (= 580.95.05-1) | nvidia-driver-580-open"),
    stanza("nvidia-driver-580", "580.95.05-1", "nvidia-kernel-580, libc6"),
    stanza("nvidia-driver-580", "580.105.08-1", "nvidia-kernel-580"),
    stanza("nvidia-dkms-580", "580.95.05-1", "dkms (>= 1.95)", provides="nvidia-kernel-580 (= 580.95.05)"),
])


def test_resolve_takes_the_newest_version_honours_exact_constraints_and_follows_virtual_packages():
    debs, external = ob.resolve(ob.parse_packages(INDEX), ["cuda-drivers-580"], "amd64")
    assert [(d["Package"], d["Version"]) for d in debs] == [
        ("cuda-drivers-580", "580.95.05-1"), ("nvidia-dkms-580", "580.95.05-1"),
        ("nvidia-driver-580", "580.95.05-1")]
    assert external == ["dkms", "libc6"]
    debs, _ = ob.resolve(ob.parse_packages(INDEX), ["cuda-drivers-580 (= 580.82.07-1)"], "amd64")
    assert ("nvidia-driver-580", "580.105.08-1") in [(d["Package"], d["Version"]) for d in debs]


def test_resolve_refuses_a_wanted_package_the_index_lacks_naming_the_versions_there():
    with pytest.raises(ob.BundleError, match=r"no cuda-drivers-580 \(= 580.1-1\) for amd64 "
                                             r"\(versions there: 580.82.07-1, 580.95.05-1\)"):
        ob.resolve(ob.parse_packages(INDEX), ["cuda-drivers-580 (= 580.1-1)"], "amd64")
    with pytest.raises(ob.BundleError, match="no cuda-drivers-580 for arm64"):
        ob.resolve(ob.parse_packages(INDEX), ["cuda-drivers-580"], "arm64")


@pytest.mark.parametrize(("text", "message"), [
    ("Package: a\nbroken line\n", "line 2: 'broken line' is not 'Field: value'"),
    (" leading\n", "line 1: a continuation line outside a field"),
    ("Package: a\nVersion: 1\nFilename: a.deb\n", "package a has no SHA256"),
    ("Version: 1\n", "package \\? has no Package, Filename, SHA256"),
])
def test_parse_packages_errors_name_the_index_and_line(text, message):
    with pytest.raises(ob.BundleError, match="^http://m/Packages: .*(" + message + ")"):
        ob.parse_packages(text, "http://m/Packages")


def test_downloads_join_flat_filenames_to_the_repository_and_refuse_odd_names():
    repository = {"name": "cuda-x", "url": "http://m/cuda/", "index": "http://m/cuda/Packages",
                  "arch": "amd64", "packages": ["nvidia-dkms-580"]}
    debs, external = ob.downloads(repository, INDEX, "/b")
    assert debs == [{"package": "nvidia-dkms-580", "version": "580.95.05-1",
                     "url": "http://m/cuda/pool/nvidia-dkms-580_580.95.05-1.deb",
                     "dest": "/b/debs/cuda-x/nvidia-dkms-580_580.95.05-1.deb",
                     "checksum": "sha256:" + hashlib.sha256(b"nvidia-dkms-580580.95.05-1").hexdigest()}]
    assert external == ["dkms"]
    bad = INDEX.replace("./pool/nvidia-dkms-580_580.95.05-1.deb", "../etc/passwd")
    with pytest.raises(ob.BundleError, match=r"Filename '\.\./etc/passwd' is not a \.deb"):
        ob.downloads(repository, bad, "/b")


def test_plan_per_node_source_and_method():
    nodes = [
        ob.node_record("u", {}, dict(UBUNTU, package_source="cuda", branch="580", module_type="open")),
        ob.node_record("d", {}, dict(DEBIAN, branch="535")),
        ob.node_record("s", {}, dict(UBUNTU, host="s", method="ubuntu-signed", branch="580",
                                     kernel="6.8.0-60-generic")),
        ob.node_record("r", {}, dict(UBUNTU, method="runfile", version="580.95.05")),
    ]
    plan = ob.plan(nodes, "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)",
                   cuda_repo_base="http://mirror/cuda/", toolkit_version="1.17.8-1")
    assert [(r["name"], r["index"], r["packages"]) for r in plan["repositories"]] == [
        ("cuda-ubuntu-24.04-amd64", "http://mirror/cuda/ubuntu2404/x86_64/Packages", ["nvidia-open-580"]),
        ("toolkit-amd64", "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/Packages",
         ["nvidia-container-toolkit (= 1.17.8-1)"]),
        ("toolkit-arm64", "https://nvidia.github.io/libnvidia-container/stable/deb/arm64/Packages",
         ["nvidia-container-toolkit (= 1.17.8-1)"]),
    ]
    assert plan["distro_packages"] == {
        "debian-12": ["nvidia-driver"],
        "ubuntu-24.04": ["linux-modules-nvidia-580-server-6.8.0-60-generic",
                         "nvidia-headless-no-dkms-580-server", "nvidia-utils-580-server"],
    }
    assert plan["runfiles"] == [{"name": "NVIDIA-Linux-x86_64-580.95.05.run", "checksum": "",
                                 "url": "https://us.download.nvidia.com/tesla/580.95.05/"
                                        "NVIDIA-Linux-x86_64-580.95.05.run"}]
    assert any("no nvidia_driver_runfile_checksum" in w for w in plan["warnings"])


def test_node_record_from_facts_and_refusals():
    facts = {"distribution": "Ubuntu", "distribution_version": "24.04", "architecture": "x86_64",
             "kernel": "6.8.0-60-generic", "nvidia_driver": {"method": "packages", "branch": "570"},
             "nvidia_gpu": {"recommended_branch": "580", "nvswitch_count": 4}}
    record = ob.node_record("g", facts, {})
    assert (record["branch"], record["fabricmanager"], record["kernel"]) == ("570", True, "6.8.0-60-generic")
    assert ob.node_record("g", facts, {"version": "580.95.05"})["branch"] == "570"  # the facts' branch
    assert ob.node_record("g", dict(facts, nvidia_driver={}), {})["branch"] == "580"
    with pytest.raises(ob.BundleError, match=r"^g: no distribution facts"):
        ob.node_record("g", {}, {"branch": "580"})
    with pytest.raises(ob.BundleError, match=r"^g: no driver branch"):
        ob.node_record("g", dict(facts, nvidia_driver={}, nvidia_gpu={}), {})


def test_images_per_mode_as_pinned_with_their_archive_and_mirror_path():
    values = {"gpu_cluster_addons_nvidia_device_plugin_image": "nvcr.io/nvidia/k8s-device-plugin",
              "gpu_cluster_addons_nvidia_device_plugin_version": "v0.20.0",
              "gpu_cluster_addons_hami_image": "docker.io/projecthami/hami",
              "gpu_cluster_addons_hami_version": "v2",
              "gpu_cluster_addons_hami_kube_scheduler_image": "registry.k8s.io/kube-scheduler",
              "gpu_cluster_addons_image_registry": "registry.local:5000/m"}
    warnings = []
    assert ob.bundle_images("nvidia", values, "", warnings) == [{
        "name": "nvidia_device_plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
        "archive": "images/nvidia_k8s-device-plugin_v0.20.0.oci.tar",
        "path": "nvidia/k8s-device-plugin:v0.20.0"}]
    hami = ob.bundle_images("hami", values, "", warnings)
    assert [i["image"] for i in hami] == ["docker.io/projecthami/hami:v2"] and "kube-scheduler" in warnings[0]
    hami = ob.bundle_images("hami", values, "1.33.1", [])
    assert hami[1]["image"] == "registry.k8s.io/kube-scheduler:v1.33.1"
    dra = ob.bundle_images("dra", values, "", [])
    assert dra[0]["image"] == "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.5.0"
    assert ob.bundle_images("none", values, "", []) == []


def test_module_plans_from_host_facts_and_given_nodes(run_module, tmp_path):
    index = tmp_path / "toolkit.Packages"
    index.write_text(stanza("nvidia-container-toolkit", "1.17.8-1"))
    ok, result = run_module(offline_bundle_plan, {
        "nodes": [dict(UBUNTU, package_source="cuda", branch="580")],
        "host_facts": {"d": {"distribution": "Debian", "distribution_version": "12.7",
                             "architecture": "x86_64"}},
        "host_vars": {"branch": ["535"], "method": [""]},
        "dest": str(tmp_path), "mode": "none", "indexes": {"toolkit-amd64": str(index)},
    }, check_mode=True)
    assert ok, result
    assert result["distro_packages"] == {"debian-12": ["nvidia-driver"]}
    assert [d["package"] for d in result["debs"]] == ["nvidia-container-toolkit"]
    ok, result = run_module(offline_bundle_plan, {"dest": str(tmp_path)})
    assert not ok and result["msg"].startswith("no GPU nodes")
