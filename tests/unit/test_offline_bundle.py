"""module_utils/gpunode/bundle/ and library/offline_bundle_plan.py: what a bundle holds.

Which driver packages a node needs is the role's decision: test_offline_bundle_table.py
holds them against the role's own plan, node by node.
"""

import hashlib
import pathlib

import offline_bundle_plan
import pytest
import yaml
from ansible.module_utils.gpunode.addons import images as addon_images
from ansible.module_utils.gpunode.bundle import packages_index as pi
from ansible.module_utils.gpunode.bundle import plan as ob

UBUNTU = {"host": "u", "distribution": "Ubuntu", "distribution_version": "24.04", "architecture": "x86_64",
          "kernel": "6.8.0-60-generic", "gpus": ["1eb8"]}
DEBIAN = {"host": "d", "distribution": "Debian", "distribution_version": "12", "architecture": "aarch64",
          "kernel": "6.1.0-37-arm64", "gpus": ["1eb8"]}
BUILD = ["dkms", "gcc", "make"]
V100_FACTS = {"present": True, "devices": [{"device_id": "1db1", "kind": "gpu"}],
              "supported_branches": ["580", "535"], "recommended_branch": "580"}


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("1.0", "1.0", 0), ("1.0", "1.1", -1), ("1.10", "1.9", 1), ("1.0~rc1", "1.0", -1),
    ("1.0", "1.0+b1", -1), ("1:1.0", "2.0", 1), ("580.95.05-1", "580.95.05-0ubuntu1", 1),
    ("1.17.10-1", "1.18.0~rc.1-1", -1), ("535.216.03-3~deb12u1", "535.216.03-3", -1), ("1.0a", "1.0", 1),
    ("1.0-1", "1.0-1", 0), ("0.9", "1.0~", -1),
])
def test_compare_versions_as_dpkg_does(a, b, expected):
    assert pi.compare_versions(a, b) == expected
    assert pi.compare_versions(b, a) == -expected


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
    debs, external = pi.resolve(pi.parse_packages(INDEX), ["cuda-drivers-580"], "amd64")
    assert [(d["Package"], d["Version"]) for d in debs] == [
        ("cuda-drivers-580", "580.95.05-1"), ("nvidia-dkms-580", "580.95.05-1"),
        ("nvidia-driver-580", "580.95.05-1")]
    assert external == ["dkms", "libc6"]
    debs, _ = pi.resolve(pi.parse_packages(INDEX), ["cuda-drivers-580 (= 580.82.07-1)"], "amd64")
    assert ("nvidia-driver-580", "580.105.08-1") in [(d["Package"], d["Version"]) for d in debs]


def test_resolve_takes_the_roles_apt_requests_at_any_packaging_revision():
    index = INDEX + "\n" + stanza("nvidia-driver-580", "580.95.05-0ubuntu1", "nvidia-kernel-580")
    debs, _ = pi.resolve(pi.parse_packages(index), ["nvidia-driver-580=580.95.05-*"], "amd64")
    assert [(d["Package"], d["Version"]) for d in debs] == [
        ("nvidia-dkms-580", "580.95.05-1"), ("nvidia-driver-580", "580.95.05-1")]
    with pytest.raises(pi.BundleError, match=r"no nvidia-driver-580=570.1-\* for amd64 \(versions there: "
                                             r"580.105.08-1, 580.95.05-0ubuntu1, 580.95.05-1\)"):
        pi.resolve(pi.parse_packages(index), ["nvidia-driver-580=570.1-*"], "amd64")


def test_resolve_refuses_a_wanted_package_the_index_lacks_naming_the_versions_there():
    with pytest.raises(pi.BundleError, match=r"no cuda-drivers-580 \(= 580.1-1\) for amd64 "
                                             r"\(versions there: 580.82.07-1, 580.95.05-1\)"):
        pi.resolve(pi.parse_packages(INDEX), ["cuda-drivers-580 (= 580.1-1)"], "amd64")
    with pytest.raises(pi.BundleError, match="no cuda-drivers-580 for arm64"):
        pi.resolve(pi.parse_packages(INDEX), ["cuda-drivers-580"], "arm64")


@pytest.mark.parametrize(("text", "message"), [
    ("Package: a\nbroken line\n", "line 2: 'broken line' is not 'Field: value'"),
    (" leading\n", "line 1: a continuation line outside a field"),
    ("Package: a\nVersion: 1\nFilename: a.deb\n", "package a has no SHA256"),
    ("Version: 1\n", "package \\? has no Package, Filename, SHA256"),
])
def test_parse_packages_errors_name_the_index_and_line(text, message):
    with pytest.raises(pi.BundleError, match="^http://m/Packages: .*(" + message + ")"):
        pi.parse_packages(text, "http://m/Packages")


def test_downloads_join_flat_filenames_to_the_repository_and_refuse_odd_names():
    repository = {"name": "cuda-x", "url": "http://m/cuda/", "index": "http://m/cuda/Packages",
                  "arch": "amd64", "packages": ["nvidia-dkms-580"]}
    debs, external = pi.downloads(repository, INDEX, "/b")
    assert debs == [{"repository": "cuda-x", "package": "nvidia-dkms-580", "version": "580.95.05-1",
                     "url": "http://m/cuda/pool/nvidia-dkms-580_580.95.05-1.deb",
                     "dest": "/b/debs/cuda-x/nvidia-dkms-580_580.95.05-1.deb",
                     "checksum": "sha256:" + hashlib.sha256(b"nvidia-dkms-580580.95.05-1").hexdigest()}]
    assert external == ["dkms"]
    bad = INDEX.replace("./pool/nvidia-dkms-580_580.95.05-1.deb", "../etc/passwd")
    with pytest.raises(pi.BundleError, match=r"Filename '\.\./etc/passwd' is not a \.deb"):
        pi.downloads(repository, bad, "/b")


#: a pinned toolkit and its companions at its version, as the nodes install them
TOOLKIT_REPO = "https://nvidia.github.io/libnvidia-container/stable/deb"
TOOLKIT_SET = ["libnvidia-container-tools (= 1.17.8-1)", "libnvidia-container1 (= 1.17.8-1)",
               "nvidia-container-toolkit (= 1.17.8-1)", "nvidia-container-toolkit-base (= 1.17.8-1)"]


def test_plan_per_node_source_and_method():
    nodes = [
        ob.node_input("u", {}, dict(UBUNTU, package_source="cuda", branch="580", module_type="open")),
        ob.node_input("d", {}, dict(DEBIAN, branch="535")),
        ob.node_input("s", {}, dict(UBUNTU, host="s", method="ubuntu-signed", branch="580")),
        ob.node_input("r", {}, dict(UBUNTU, method="runfile", version="580.95.05", kernel="")),
    ]
    plan = ob.plan(nodes, "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)",
                   cuda_repo_base="http://mirror/cuda/", toolkit_version="1.17.8-1")
    assert [(n["host"], n["method"], n["branch"], n["version"], n["module_type"]) for n in plan["nodes"]] == [
        ("u", "packages", "580", None, "open"), ("d", "packages", "535", None, "proprietary"),
        ("s", "ubuntu-signed", "580", None, "open"), ("r", "runfile", "580", "580.95.05", "open")]
    assert [(r["name"], r["index"], r["packages"]) for r in plan["repositories"]] == [
        ("cuda-ubuntu-24.04-amd64", "http://mirror/cuda/ubuntu2404/x86_64/Packages", ["nvidia-open-580"]),
        ("toolkit-amd64", f"{TOOLKIT_REPO}/amd64/Packages", TOOLKIT_SET),
        ("toolkit-arm64", f"{TOOLKIT_REPO}/arm64/Packages", TOOLKIT_SET),
    ]
    assert plan["distro_packages"] == {
        "debian-12": sorted([*BUILD, "linux-headers-6.1.0-37-arm64", "nvidia-driver"]),
        "ubuntu-24.04": sorted([*BUILD, "linux-headers-6.8.0-60-generic",
                                "linux-modules-nvidia-580-server-open-6.8.0-60-generic",
                                "linux-modules-nvidia-580-server-open-generic",
                                "nvidia-headless-no-dkms-580-server-open", "nvidia-utils-580-server"]),
    }
    assert plan["runfiles"] == [{"name": "NVIDIA-Linux-x86_64-580.95.05.run", "checksum": "",
                                 "url": "https://us.download.nvidia.com/tesla/580.95.05/"
                                        "NVIDIA-Linux-x86_64-580.95.05.run"}]
    assert any("no nvidia_driver_runfile_checksum" in w for w in plan["warnings"])
    assert "r: the kernel is not known: its headers (linux-headers-<kernel>) are left out" in plan["warnings"]


def test_el_nodes_get_dnf_repositories_each_nodes_request_apart_and_no_apt_data():
    rocky = {"distribution": "Rocky", "distribution_version": "9.5", "architecture": "x86_64",
             "kernel": "5.14.0-503.14.1.el9_5.x86_64", "gpus": ["1eb8"], "package_source": "cuda"}
    nodes = [ob.node_input("el9", {}, dict(rocky, host="el9", branch="580")),
             ob.node_input("el9b", {}, dict(rocky, host="el9b", branch="580")),
             ob.node_input("el9c", {}, dict(rocky, host="el9c", branch="570")),
             ob.node_input("el10", {}, dict(rocky, host="el10", distribution="RedHat",
                                            distribution_version="10.0", branch="580"))]
    plan = ob.plan(nodes, "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)",
                   toolkit_version="1.17.8-1")
    repositories = {r["name"]: r for r in plan["repositories"]}
    # no apt repository for an EL node: the toolkit comes from its RPM repository ($basearch expanded)
    assert sorted(repositories) == ["cuda-rhel-10-x86_64", "cuda-rhel-9-x86_64", "toolkit-rpm-x86_64"]
    el9 = repositories["cuda-rhel-9-x86_64"]
    cuda9 = "https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/"
    assert (el9["format"], el9["index"], el9["keys"]) == ("rpm", cuda9 + "repodata/repomd.xml",
                                                          [cuda9 + "D42D0685.pub"])
    # the T4 takes the open modules; two nodes of one stream are one request, another branch its own
    assert el9["requests"] == [
        {"packages": ["nvidia-open"], "module_streams": ["nvidia-driver:580-open"], "version_locks": []},
        {"packages": ["nvidia-open"], "module_streams": ["nvidia-driver:570-open"], "version_locks": []}]
    el10 = repositories["cuda-rhel-10-x86_64"]
    assert el10["requests"] == [{"packages": ["nvidia-open"], "module_streams": [],
                                 "version_locks": ["*nvidia*580*"]}]  # EL 10: a version lock, no streams
    toolkit = repositories["toolkit-rpm-x86_64"]
    assert toolkit["index"] == "https://nvidia.github.io/libnvidia-container/stable/rpm/x86_64/repodata/repomd.xml"
    assert toolkit["packages"] == [  # a pinned toolkit pins its companions, as the role's dnf request
        "libnvidia-container-tools-1.17.8-1", "libnvidia-container1-1.17.8-1",
        "nvidia-container-toolkit-1.17.8-1", "nvidia-container-toolkit-base-1.17.8-1"]
    assert "kernel-devel-5.14.0-503.14.1.el9_5.x86_64" in plan["distro_packages"]["rhel-9"]
    assert not [w for w in plan["warnings"] if "EL node" in w]


def test_the_inventory_decides_never_the_driver_a_node_runs_now():
    facts = {"distribution": "Ubuntu", "distribution_version": "24.04", "architecture": "x86_64",
             "kernel": "6.8.0-60-generic", "nvidia_driver": {"method": "packages", "branch": "620"},
             "nvidia_gpu": {"present": True, "devices": [{"device_id": "1eb8", "kind": "gpu"}],
                            "supported_branches": ["620", "580", "570"], "recommended_branch": "620",
                            "nvswitch_count": 0}}
    pinned = ob.driver_needs(ob.node_input("g", facts, {"version": "570.133.20"}))
    assert pinned["driver"] == {"host": "g", "method": "packages", "branch": "570", "version": "570.133.20",
                                "module_type": "open"}
    assert "nvidia-headless-570-server-open=570.133.20-*" in pinned["distro_packages"]
    assert ob.driver_needs(ob.node_input("g", facts, {}))["driver"]["branch"] == "620"  # the GPUs' branch


@pytest.mark.parametrize(("given", "message"), [
    ({"gpus": ["1eb8"]}, r"^g: no distribution facts"),
    (dict(UBUNTU, gpus=None), r"^g: its GPUs are not known.*give gpus \(PCI device IDs such as 1eb8\)"),
    (dict(UBUNTU, gpus=["T4"]), r"^g: gpus: 'T4' is not a PCI device ID"),
    (dict(UBUNTU, driver_branch="580"), r"^g: unknown key\(s\) driver_branch; a node takes host, "),
    (dict(UBUNTU, fabric="nvlink"), r"^g: fabric: 'nvlink' is not one of auto, none, nvswitch, nvlink5, "),
])
def test_a_node_the_bundle_cannot_ask_about_is_refused_naming_it(given, message):
    with pytest.raises(pi.BundleError, match=message):
        ob.node_input("g", {}, given)


def test_a_given_b200_carries_its_nvlink5_fabric_a_tray_its_imex_each_from_the_archive_that_serves_it():
    b200 = dict(UBUNTU, host="b200", gpus=["2901"] * 8, package_source="cuda", branch="595")
    bundle = ob.plan([ob.node_input("b200", {}, b200)], "https://toolkit/$(ARCH)", mode="none")
    nvidia = {name for repo in bundle["repositories"] if repo["name"].startswith("cuda-")
              for name in repo["packages"]}
    assert {"nvidia-fabricmanager", "libnvidia-nscq", "libnvsdm", "nvlsm"} <= nvidia
    # the distribution's archive serves the IB tools and the cloud kernel's mlx5_ib, not NVIDIA's
    distro = set(bundle["distro_packages"]["ubuntu-24.04"])
    assert {"infiniband-diags", "linux-modules-extra-6.8.0-60-generic"} <= distro
    assert not nvidia & {"infiniband-diags", "linux-modules-extra-6.8.0-60-generic"}
    assert any("taken as nvlink5" in warning and warning.startswith("b200: ")
               for warning in bundle["warnings"])
    # the inventory's fabric wins: a B200 said to be on no fabric carries none of it, and no warning
    alone = ob.plan([ob.node_input("b200", {}, dict(b200, fabric="none"))], "https://toolkit/$(ARCH)",
                    mode="none")
    assert not {name for repo in alone["repositories"] for name in repo["packages"]} & {"nvlsm", "libnvsdm"}
    assert not any("nvlink5" in warning for warning in alone["warnings"])
    tray = dict(UBUNTU, host="tray", architecture="aarch64", kernel="6.8.0-1024-nvidia-64k",
                gpus=["2941"] * 4, package_source="cuda", branch="580")
    needs = ob.driver_needs(ob.node_input("tray", {}, tray))
    assert needs["packages"] == ["nvidia-open-580", "nvidia-imex"]  # no fabric manager, no NVLSM on a tray
    assert needs["warnings"] == []


def test_the_roles_refusals_name_the_node():
    with pytest.raises(pi.BundleError, match=r"^g: driver branch 390 cannot drive every GPU on this host"):
        ob.driver_needs(ob.node_input("g", {}, dict(UBUNTU, branch="390")))
    with pytest.raises(pi.BundleError, match=r"^g: kernel release '' is not <version>-<flavour>"):
        ob.driver_needs(ob.node_input("g", {}, dict(UBUNTU, kernel="", method="ubuntu-signed")))


CERTGEN = "docker.io/liangjw/kube-webhook-certgen:v1.1.1"
ROLES = pathlib.Path(__file__).resolve().parents[2] / "roles"


@pytest.mark.parametrize("placement", ["deployment", "extender"])
def test_hamis_bundle_carries_the_image_of_its_certificate_jobs(placement):
    """Rendered to files, HAMi's webhook certificate is made by its chart's certificate Jobs, whose
    image (job-hami-admission-*.yaml.j2: images.hami_certgen) an offline cluster must find."""
    defaults = yaml.safe_load((ROLES / "gpu_cluster_addons" / "defaults" / "main.yml").read_text())
    for job in ("create", "patch"):
        text = (ROLES / "gpu_cluster_addons" / "templates" / f"job-hami-admission-{job}.yaml.j2").read_text()
        assert 'image: "{{ __gpu_cluster_addons_plan.images.hami_certgen }}"' in text
    role_images = {name: {"repository": defaults[image], "tag": defaults.get(tag)}
                   for name, (image, tag) in addon_images.IMAGES.items()}
    addons = {"images": role_images, "hami_scheduler": placement}
    images = {i["name"]: i for i in ob.bundle_images("hami", addons, "1.33.1", [])}
    wanted = "{}:{}".format(defaults["gpu_cluster_addons_hami_certgen_image"],
                            defaults["gpu_cluster_addons_hami_certgen_version"])
    assert images["hami_certgen"]["image"] == wanted
    assert "hami_certgen" not in {i["name"] for i in ob.bundle_images("nvidia", addons, "1.33.1", [])}


def test_images_per_mode_as_pinned_with_their_archive_and_mirror_path():
    values = {"images": {
        "nvidia_device_plugin": {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": "v0.20.0"},
        "hami": {"repository": "docker.io/projecthami/hami", "tag": "v2"},
        "hami_kube_scheduler": {"repository": "registry.k8s.io/kube-scheduler"},
        "hami_certgen": {"repository": "docker.io/liangjw/kube-webhook-certgen", "tag": "v1.1.1"},
    }}
    warnings = []
    assert ob.bundle_images("nvidia", values, "", warnings) == [{
        "name": "nvidia_device_plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
        "archive": "images/nvidia_k8s-device-plugin_v0.20.0.oci.tar",
        "path": "nvidia/k8s-device-plugin:v0.20.0"}]
    hami = ob.bundle_images("hami", values, "", warnings)
    assert [i["image"] for i in hami] == ["docker.io/projecthami/hami:v2", CERTGEN]
    assert "kube-scheduler" in warnings[0]
    hami = ob.bundle_images("hami", values, "1.33.1", [])
    assert hami[1]["image"] == "registry.k8s.io/kube-scheduler:v1.33.1"
    dra = ob.bundle_images("dra", values, "", [])
    assert dra[0]["image"] == "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.5.0"
    # the role's DRA settings (their other keys are the role's, not the bundle's)
    settings = {"image": "mirror.local/dra", "version": "v0.5.1", "namespace": "x"}
    dra = ob.bundle_images("dra", {"dra": settings}, "", [])
    assert dra[0]["image"] == "mirror.local/dra:v0.5.1"
    assert ob.bundle_images("none", values, "", []) == []


def test_module_plans_from_host_facts_and_given_nodes(run_module, tmp_path):
    index = tmp_path / "toolkit.Packages"
    index.write_text(stanza("nvidia-container-toolkit", "1.17.8-1"))
    ok, result = run_module(offline_bundle_plan, {
        "nodes": [dict(UBUNTU, package_source="cuda", branch="580")],
        "host_facts": {"d": {"distribution": "Debian", "distribution_version": "12.7",
                             "architecture": "x86_64", "nvidia_gpu": V100_FACTS}},
        "host_vars": {"branch": ["535"], "method": [""], "install_prerequisites": [False]},
        "dest": str(tmp_path), "mode": "none", "indexes": {"toolkit-amd64": str(index)},
    }, check_mode=True)
    assert ok, result
    assert result["distro_packages"] == {"debian-12": ["nvidia-driver"],  # no prerequisites asked
                                         "ubuntu-24.04": sorted([*BUILD, "linux-headers-6.8.0-60-generic"])}
    assert result["nodes"][1] == {"host": "d", "method": "packages", "branch": "535", "version": None,
                                  "module_type": "proprietary"}
    assert [d["package"] for d in result["debs"]] == ["nvidia-container-toolkit"]
    ok, result = run_module(offline_bundle_plan, {"dest": str(tmp_path)})
    assert not ok and result["msg"].startswith("no GPU nodes")


def test_the_playbook_reads_every_role_value_the_bundle_asks_the_driver_with():
    playbook = yaml.safe_load((pathlib.Path(__file__).resolve().parents[2] / "playbooks/offline_bundle.yml")
                              .read_text())
    host_vars = playbook[1]["vars"]["__bundle_host_vars"]
    assert list(host_vars) == list(ob.ROLE_VALUES)
    for name, expression in host_vars.items():
        assert f"attribute='nvidia_driver_{name}', default=''" in expression, name


def test_a_role_value_outside_its_choices_is_refused_as_the_module_refuses_it():
    with pytest.raises(pi.BundleError, match=r"^g: nvidia_driver_method: 'dkms' is not one of packages, "):
        ob.driver_needs(ob.node_input("g", {}, dict(UBUNTU, method="dkms")))
