"""Pure logic of module_utils/gpunode/driver/ (driver.py, parsers.py, plan.py, facts.py), over real and
project fixtures."""

import pathlib
import re

import pytest
from ansible.module_utils.gpunode.driver.driver import (
    SOURCES_HEADER,
    DriverError,
    branch_of,
    branch_supported,
    build_request,
    kernel_module_type,
    resolve_wanted,
    runfile_checksum,
    runfile_flags,
    version_matches,
)
from ansible.module_utils.gpunode.driver.fabric_plan import with_fabric
from ansible.module_utils.gpunode.driver.facts import driver_facts, pending_reboot
from ansible.module_utils.gpunode.driver.parsers import (
    blacklist_complete,
    module_from_modinfo,
    parse_dkms_status,
    parse_efi_secure_boot,
    parse_mokutil_sb_state,
    parse_smi_query,
    userspace_version_from_names,
)
from ansible.module_utils.gpunode.driver.plan import (
    index_lookups,
    needs_dkms_status,
    plan,
)
from ansible.module_utils.gpunode.host.packages import parse_dpkg_query
from ansible.module_utils.gpunode.host.systemd import by_service, parse_show
from conftest import FIXTURES, ROOT, load_file, shared_files

DRIVER_FIXTURES = FIXTURES / "driver"


def version_in_name(path):
    return re.search(r"(\d+\.\d+(?:\.\d+)?)", pathlib.Path(path).name).group(1)


# ------------------------------------------------------------------ versions


@pytest.mark.parametrize("bad", ["", "latest", "535.", "r535", "535.129.03.1", "5 35"])
def test_parse_version_rejects_non_versions(bad):
    with pytest.raises(DriverError, match="not an NVIDIA driver version"):
        branch_of(bad)


def test_branch_matches_every_version_of_the_branch_only():
    assert version_matches("535.129.03", "535")
    assert not version_matches("550.54.15", "535")
    assert version_matches("535.129.03", "535.129.03")
    assert not version_matches("535.129.03", "535.154.05")
    assert not version_matches(None, "535")
    assert not version_matches("garbage", "535")


# ------------------------------------------------------------------ parsing real output


@pytest.mark.parametrize("path", shared_files("nvidia", "dkms-status-*"), ids=lambda p: p.name)
def test_parse_dkms_status_real_samples(path):
    entries = parse_dkms_status(path.read_text())
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    assert len(entries) == len(lines)
    for entry in entries:
        assert entry["status"] == "installed"
        assert entry["kernel"] and entry["arch"] == "x86_64"
        assert entry["version"] in path.read_text()


def test_parse_dkms_status_nvidia_entry_and_warning_suffix():
    nvidia = [
        e for p in shared_files("nvidia", "dkms-status-*") for e in parse_dkms_status(p.read_text())
        if e["module"] == "nvidia"
    ]
    if nvidia:
        assert nvidia[0]["version"] == "535.86.05"
    warned = [
        e for p in shared_files("nvidia", "dkms-status-warning-*") for e in parse_dkms_status(p.read_text())
    ]
    for entry in warned:
        assert entry["warning"].startswith("WARNING!")


def test_parse_dkms_status_dkms2_format():
    entries = parse_dkms_status((DRIVER_FIXTURES / "dkms-status-dkms2-two-kernels.txt").read_text())
    assert [(e["version"], e["kernel"], e["status"]) for e in entries] == [
        ("470.82.01", "5.4.0-91-generic", "installed"),
        ("470.82.01", "5.4.0-92-generic", "built"),
    ]


def test_parse_dkms_status_added_entry_and_noise_lines():
    entries = parse_dkms_status((DRIVER_FIXTURES / "dkms-status-dkms3-added-and-installed.txt").read_text())
    assert len(entries) == 2
    added, installed = entries
    assert added == {"module": "nvidia", "version": "550.54.15", "kernel": None, "arch": None,
                     "status": "added", "warning": None}
    assert installed["status"] == "installed"
    assert installed["warning"] == "original_module exists"


@pytest.mark.parametrize("path", shared_files("nvidia", "modinfo-nvidia-*"), ids=lambda p: p.name)
def test_modinfo_real_samples(path):
    module = module_from_modinfo(path.read_text())
    assert module["version"] == version_in_name(path)
    assert module["flavor"] == ("open" if "-open-" in path.name else "proprietary")
    assert module["path"].startswith("/lib/modules/")
    assert module["kernel"] in module["path"]


def test_modinfo_without_version_is_an_error():
    with pytest.raises(DriverError):
        module_from_modinfo("filename: /lib/modules/x/nvidia.ko\nlicense: NVIDIA\n")


def test_smi_query_one_line_per_gpu_and_failures():
    parsed = parse_smi_query("535.129.03, Enabled\n535.129.03, Disabled\n")
    assert parsed["driver_versions"] == ["535.129.03", "535.129.03"]
    assert parsed["persistence_mode"] == ["Enabled", "Disabled"]
    with pytest.raises(DriverError, match="mismatch"):
        parse_smi_query("Failed to initialize NVML: Driver/library version mismatch\n")
    with pytest.raises(DriverError):
        parse_smi_query("")


def test_secure_boot_sources():
    assert parse_efi_secure_boot(b"\x06\x00\x00\x00\x01") is True
    assert parse_efi_secure_boot(b"\x06\x00\x00\x00\x00") is False
    with pytest.raises(DriverError):
        parse_efi_secure_boot(b"\x06\x00")
    assert parse_mokutil_sb_state("SecureBoot enabled\n") is True
    assert parse_mokutil_sb_state("SecureBoot disabled\nPlatform is in Setup Mode\n") is False
    assert parse_mokutil_sb_state("EFI variables are not supported on this system\n") is None


def test_userspace_version_takes_the_versioned_library():
    names = ["libnvidia-ml.so", "libnvidia-ml.so.1", "libnvidia-ml.so.535.129.03", "libcuda.so.550.54.15"]
    assert userspace_version_from_names(names) == "535.129.03"
    assert userspace_version_from_names(["libnvidia-ml.so.1"]) is None


# ------------------------------------------------------------------ choices

T4 = "1eb8"
K80 = "102d"
V100 = "1db4"
H100 = "2330"
B200 = "2901"
GH200 = "2342"


def test_default_branch_is_the_recommended_one():
    assert resolve_wanted(supported_branches=["570", "535"], recommended_branch="570") == {
        "branch": "570", "version": None}


def test_k80_refuses_550_naming_what_works():
    with pytest.raises(DriverError, match=r"branch 550 cannot drive every GPU.*470"):
        resolve_wanted(branch="550", supported_branches=["470"], recommended_branch="470")


def test_full_version_sets_the_branch_and_is_checked():
    assert resolve_wanted(version="535.129.03", supported_branches=["570", "535", "470"]) == {
        "branch": "535", "version": "535.129.03"}
    with pytest.raises(DriverError):
        resolve_wanted(version="550.54.15", supported_branches=["470"])
    with pytest.raises(DriverError, match="not on nvidia_driver_branch"):
        resolve_wanted(version="535.129.03", branch="550", supported_branches=["550", "535"])
    with pytest.raises(DriverError, match="full version"):
        resolve_wanted(version="535", supported_branches=["535"])


def test_no_branch_for_all_gpus_asks_the_user():
    with pytest.raises(DriverError, match="no driver branch drives every GPU"):
        resolve_wanted(supported_branches=[], recommended_branch=None)


def test_branch_between_listed_branches_is_accepted():
    assert branch_supported("545", ["570", "550", "535"])
    assert not branch_supported("580", ["570", "550", "535"])
    assert not branch_supported("390", ["570", "550", "535"])
    assert resolve_wanted(branch="390", supported_branches=[], check_gpus=False)["branch"] == "390"


@pytest.mark.parametrize(
    ("requested", "branch", "gpus", "expected"),
    [
        ("auto", "570", [T4], "open"),
        ("auto", "570", [H100, H100], "open"),
        ("auto", "550", [T4], "proprietary"),  # open is the default only from 560
        ("auto", "570", [T4, V100], "proprietary"),  # one pre-Turing GPU decides
        ("auto", "470", [K80], "proprietary"),
        ("auto", "570", [B200], "open"),
        ("open", "535", [T4], "open"),
        ("proprietary", "570", [T4], "proprietary"),
    ],
)
def test_kernel_module_type(requested, branch, gpus, expected):
    assert kernel_module_type(requested, branch, gpus) == expected


def test_kernel_module_type_refusals():
    with pytest.raises(DriverError, match=r"Turing or newer.*102d"):
        kernel_module_type("open", "470", [K80])
    with pytest.raises(DriverError, match="no open kernel module"):
        kernel_module_type("open", "510", [T4])
    with pytest.raises(DriverError, match="Blackwell"):
        kernel_module_type("proprietary", "570", [B200])
    with pytest.raises(DriverError, match="Grace Hopper"):
        kernel_module_type("proprietary", "580", [GH200])


@pytest.mark.parametrize("gpus", [[B200], [GH200], [B200, H100], ["2b85"]])
def test_open_only_gpus_never_get_the_proprietary_module(gpus):
    """Grace Hopper and Blackwell: auto picks open on every branch that has it, even before 560."""
    for branch in ("535", "550", "570", "580", "595", "620"):
        assert kernel_module_type("auto", branch, gpus) == "open"


def test_runfile_flags_from_practice():
    flags = runfile_flags("570.133.20", "open")
    for flag in ("--silent", "--dkms", "--no-x-check", "--no-nouveau-check", "--no-opengl-files"):
        assert flag in flags
    assert "--kernel-module-type=open" in flags
    old_open = runfile_flags("535.129.03", "open")
    assert "--kernel-module-build-directory=kernel-open" in old_open
    assert not any(f.startswith("--kernel-module-type") for f in old_open)
    proprietary = runfile_flags("535.129.03", "proprietary")
    assert not any("kernel-open" in f or "module-type" in f for f in proprietary)
    assert "--dkms" not in runfile_flags("535.129.03", "proprietary", dkms=False)


def test_runfile_signing_needs_both_halves():
    flags = runfile_flags("570.133.20", "open", signing_key="/k.key", signing_cert="/k.der")
    assert "--module-signing-secret-key=/k.key" in flags
    assert "--module-signing-public-key=/k.der" in flags
    with pytest.raises(DriverError, match="both"):
        runfile_flags("570.133.20", "open", signing_key="/k.key")


# ------------------------------------------------------------------ small readers


def test_blacklist_must_say_both_lines():
    assert blacklist_complete("# managed\nblacklist nouveau\noptions  nouveau modeset=0\n")
    assert not blacklist_complete("blacklist nouveau\n")
    assert not blacklist_complete(None)


def test_systemctl_show_of_two_units_one_missing():
    text = ("Id=nvidia-persistenced.service\nLoadState=loaded\nActiveState=active\nUnitFileState=enabled\n\n"
            "Id=nvidia-fabricmanager.service\nLoadState=not-found\nActiveState=inactive\nUnitFileState=\n")
    units = by_service(parse_show(text))
    assert units["nvidia-persistenced"] == {"load": "loaded", "active": "active", "enabled": "enabled"}
    assert units["nvidia-fabricmanager"]["load"] == "not-found"


@pytest.mark.parametrize("text", ["sha256:" + "A" * 64, "a" * 64, " " + "0" * 64 + "\n"])
def test_runfile_checksum_forms(text):
    assert runfile_checksum(text) == text.strip().split(":")[-1].lower()


@pytest.mark.parametrize("text", ["", None, "md5:" + "a" * 32, "sha256:xyz", "a" * 63])
def test_runfile_checksum_is_required_and_must_be_sha256(text):
    with pytest.raises(DriverError, match="sha256"):
        runfile_checksum(text)


# ------------------------------------------------------------------ request

KERNEL = "6.1.0-18-amd64"
DEBIAN12 = {"distribution": "Debian", "distribution_version": "12.7", "architecture": "x86_64",
            "kernel": KERNEL}
UBUNTU2404 = {"distribution": "Ubuntu", "distribution_version": "24.04", "architecture": "x86_64",
              "kernel": "6.8.0-49-generic"}


def gpu(*ids, nvswitches=0, supported=("620", "610", "595", "590", "580", "570", "550", "535", "470")):
    return {"devices": [{"device_id": i, "kind": "gpu"} for i in ids], "nvswitch_count": nvswitches,
            "supported_branches": list(supported), "recommended_branch": supported[0] if supported else None}


def request(os_info=DEBIAN12, gpus=None, **params):
    params.setdefault("keyring", "/etc/apt/keyrings/gpunode-nvidia-driver.asc")
    gpus = gpus or gpu(T4)
    return with_fabric(build_request(params, gpus, dict(os_info)), params, gpus, dict(os_info))


@pytest.mark.parametrize(("os_info", "source", "version", "module_type", "install", "pin"), [
    (DEBIAN12, "distro", "535.129.03", "proprietary", ["nvidia-driver"], None),
    (DEBIAN12, "distro", "535.129.03", "open", ["nvidia-driver", "nvidia-open-kernel-dkms"], None),
    (DEBIAN12, "distro", "470.256.02", "proprietary", ["nvidia-tesla-470-driver"], None),
    ({**DEBIAN12, "distribution_version": "13.1"}, "distro", "550.163.01", "open",
     ["nvidia-driver", "nvidia-open-kernel-dkms"], None),
    ({**DEBIAN12, "distribution_version": "13.1"}, "distro", "535.261.03", "proprietary",
     ["nvidia-tesla-535-driver"], None),
    ({**DEBIAN12, "distribution_version": "11.11"}, "distro", "535.247.01", "proprietary",
     ["nvidia-driver"], None),
    (UBUNTU2404, "distro", "580.95.05", "open",
     ["nvidia-headless-580-server-open", "nvidia-utils-580-server"],
     None),
    ({**UBUNTU2404, "distribution_version": "26.04"}, "distro", "595.71.05", "proprietary",
     ["nvidia-headless-595-server", "nvidia-utils-595-server"], None),
    (UBUNTU2404, "cuda", "570.133.20", "proprietary", ["cuda-drivers-570"], None),
    (UBUNTU2404, "cuda", "580.95.05", "open", ["nvidia-open-580"], None),
    (UBUNTU2404, "cuda", "590.48.01", "open", ["nvidia-open"], "nvidia-driver-pinning-590.48.01"),
    (DEBIAN12, "cuda", "595.71.05", "proprietary", ["cuda-drivers"], "nvidia-driver-pinning-595.71.05"),
])
def test_packages_per_release_and_source(os_info, source, version, module_type, install, pin):  # noqa: PLR0917
    req = request(os_info, version=version, package_source=source, module_type=module_type)
    assert req["packages"]["install"] == install and req["packages"]["pin"] == pin
    assert req["packages"]["hold"] == ([pin] if pin else []) + install
    assert req["headers_package"] == f"linux-headers-{os_info['kernel']}"


def test_cuda_590_with_a_branch_pins_the_branch():
    req = request(UBUNTU2404, branch="595", package_source="cuda")
    assert req["packages"]["pin"] == "nvidia-driver-pinning-595"
    assert req["packages"]["install"] == ["nvidia-open"]


def test_repositories_per_source():
    cuda = request(UBUNTU2404, package_source="cuda", branch="580")["repository"]
    url = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"
    assert cuda == {"line": f"deb [signed-by=/etc/apt/keyrings/gpunode-nvidia-driver.asc] {url} /",
                    "key_url": url + "3bf863cc.pub",
                    "sources_text": SOURCES_HEADER + f"Types: deb\nURIs: {url}\nSuites: /\n"
                                    "Signed-By: /etc/apt/keyrings/gpunode-nvidia-driver.asc\n"}
    arm = request({**UBUNTU2404, "architecture": "aarch64"}, package_source="cuda", branch="580")
    arm = arm["repository"]
    assert "/ubuntu2404/sbsa/" in arm["line"]
    none = {"line": None, "key_url": None, "sources_text": None}
    assert request(UBUNTU2404, branch="580")["repository"] == none
    debian = request({**DEBIAN12, "distribution_version": "13.1"}, branch="550")["repository"]
    assert debian["line"].endswith("trixie main contrib non-free non-free-firmware")
    assert debian["sources_text"].endswith("URIs: http://deb.debian.org/debian\nSuites: trixie\n"
                                           "Components: main contrib non-free non-free-firmware\n"
                                           "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    mirror = request(DEBIAN12, branch="535", apt_repository="deb http://mirror/ /", apt_key_url="http://mirror/k")
    flat = SOURCES_HEADER + "Types: deb\nURIs: http://mirror/\nSuites: /\n"
    assert mirror["repository"] == {"line": "deb http://mirror/ /", "key_url": "http://mirror/k",
                                    "sources_text": flat}


@pytest.mark.parametrize("line", ["deb http://mirror/ /\nTrusted: yes", "deb [trusted=yes http://mirror/ /",
                                  "deb http://mirror/", "rpm http://mirror/ /"])
def test_a_repository_line_apt_would_not_read_as_one_source_is_refused(line):
    with pytest.raises(DriverError, match="nvidia_driver_apt_repository: apt source"):
        request(DEBIAN12, branch="535", apt_repository=line)


@pytest.mark.parametrize(("source", "branch", "package"), [
    ("distro", "535", "nvidia-fabricmanager-535"),
    ("cuda", "570", "nvidia-fabricmanager-570"),
    ("cuda", "580", "nvidia-fabricmanager"),
    ("cuda", "595", "nvidia-fabricmanager"),
])
def test_fabric_manager_package_names(source, branch, package):
    req = request(UBUNTU2404, gpu(H100, nvswitches=4), branch=branch, package_source=source)
    assert req["fabricmanager"] and req["fabricmanager_package"] == package
    assert not request(UBUNTU2404, gpu(H100), branch=branch, package_source=source)["fabricmanager"]


@pytest.mark.parametrize(("os_info", "params", "message"), [
    (DEBIAN12, {"branch": "580"}, "Debian 12 .bookworm. packages the driver branches 535, 470, not 580"),
    ({**DEBIAN12, "distribution_version": "11"}, {"branch": "535", "module_type": "open"},
     "does not package the open kernel modules"),
    (UBUNTU2404, {"branch": "550", "module_type": "open", "package_source": "cuda"},
     "nvidia-open-<branch> starts"),
    (DEBIAN12, {"branch": "535", "fabricmanager": "always"},
     "Debian does not package the NVIDIA fabric manager"),
    ({**DEBIAN12, "distribution": "Archlinux", "distribution_version": ""}, {"branch": "535"},
     "packages method supports Debian and Ubuntu"),
    ({**DEBIAN12, "distribution_version": "9"}, {"branch": "535"}, "older than the releases"),
    (DEBIAN12, {"branch": "570", "method": "runfile"}, "needs nvidia_driver_version"),
    (DEBIAN12, {"version": "570.133.20", "method": "runfile"}, "sha256"),
    (DEBIAN12, {"branch": "570", "signing_key": "/k.key"}, "both nvidia_driver_signing_key"),
])
def test_requests_that_cannot_be_met_are_refused_with_the_reason(os_info, params, message):
    with pytest.raises(DriverError, match=message):
        request(os_info, **params)


def test_a_release_newer_than_the_table_uses_the_newest_known_one_with_a_warning():
    req = request({**DEBIAN12, "distribution_version": "14"}, branch="550")
    assert req["packages"]["install"] == ["nvidia-driver"]
    assert req["warnings"] == ["Debian 14 is newer than gpunode's package table; using the data of Debian 13"]
    req = request({**UBUNTU2404, "distribution_version": "28.04"}, branch="620")
    assert req["packages"]["install"] == ["nvidia-headless-620-server-open", "nvidia-utils-620-server"]
    assert "Ubuntu 26.04" in req["warnings"][0]


def test_runfile_request():
    req = request(UBUNTU2404, version="580.95.05", method="runfile", runfile_checksum="A" * 64)
    assert req["runfile"]["url"] == ("https://us.download.nvidia.com/tesla/580.95.05/"
                                     "NVIDIA-Linux-x86_64-580.95.05.run")
    assert req["runfile"]["checksum"] == "sha256:" + "a" * 64
    assert "--kernel-module-type=open" in req["runfile"]["flags"]
    assert req["packages"] is None and not req["hold"]


def test_blackwell_host_gets_open_modules_from_the_distribution():
    req = request(UBUNTU2404, gpu(B200, supported=("620", "610", "595", "590", "580", "570")), branch="580")
    assert req["module_type"] == "open" and req["packages"]["install"][0] == "nvidia-headless-580-server-open"
    with pytest.raises(DriverError, match="branch 550 cannot drive every GPU"):
        request(UBUNTU2404, gpu(B200, supported=("620", "610", "595", "590", "580", "570")), branch="550")


# ------------------------------------------------------------------ plan


def dpkg(*lines):
    """dpkg packages from "name version [want] [status]" lines."""
    text = ""
    for line in lines:
        fields = line.split()
        name, version = fields[0], fields[1]
        want = fields[2] if len(fields) > 2 else "install"
        status = fields[3] if len(fields) > 3 else "installed"
        text += f"{name}\t{version}\t{want} ok {status}\n"
    return parse_dpkg_query(text)


BASE = ("dkms 3.0.10-8", "gcc 4:12.2.0-3", "make 4.3-4.1")
ENABLED = {"nvidia-persistenced": {"load": "loaded", "active": "active", "enabled": "enabled"}}


def state(userspace=None, on_disk=None, loaded=None, *, flavor="proprietary", packages=BASE, dkms=None,
          modules=None, services=None, **extra):
    loaded_modules = modules if modules is not None else (["nvidia_uvm", "nvidia"] if loaded else [])
    result = {
        "kernel": KERNEL,
        "headers_present": True,
        "userspace_version": userspace,
        "module_on_disk": {"version": on_disk, "flavor": flavor} if on_disk else None,
        "loaded": {"modules": loaded_modules, "version": loaded, "module_type": flavor if loaded else None},
        "dkms": [{"module": "nvidia", "version": v, "kernel": k, "arch": "x86_64", "status": s,
                  "warning": None}
                 for v, k, s in dkms or ()],
        "packages": dpkg(*packages) if packages is not None else None,
        "dpkg_interrupted": [],
        "services": ENABLED if services is None else services,
        "persistenced_unit": True,
        "blacklist_complete": True,
        "secure_boot": False,
        "signing_files_missing": [],
        "index": None,
    }
    result.update(extra)
    return result


CONVERGED_PACKAGES = (*BASE, "nvidia-driver 535.129.03-1 hold")


def debian_535(**params):
    params.setdefault("version", "535.129.03")
    params.setdefault("module_type", "proprietary")
    return request(DEBIAN12, **params)


def test_a_fresh_host_installs_holds_blacklists_loads_and_starts_persistence():
    steps = plan(state(services={}, blacklist_complete=False, headers_present=False), debian_535())
    assert steps["install"] and steps["install_packages"] == ["nvidia-driver=535.129.03-*"]
    assert steps["prerequisites"] == [f"linux-headers-{KERNEL}"]
    assert steps["hold"] == ["nvidia-driver"] and steps["unhold"] == []
    assert steps["blacklist_nouveau"] and steps["load"] and not steps["unload"]
    assert steps["persistence"] == ["enable", "start"]
    assert steps["disruptive"] and not steps["converged"]


def test_a_converged_host_does_nothing_and_is_not_disruptive():
    host = state("535.129.03", "535.129.03", "535.129.03", packages=CONVERGED_PACKAGES)
    for req in (debian_535(), debian_535(version="", branch="535")):
        steps = plan(host, req)
        assert steps["converged"] and not steps["disruptive"] and steps["reasons"] == []


def test_a_lost_hold_is_converged_without_reinstalling():
    """Killed between the install and the hold: the next run only holds."""
    host = state("535.129.03", "535.129.03", "535.129.03", packages=(*BASE, "nvidia-driver 535.129.03-1"))
    steps = plan(host, debian_535())
    assert steps["hold"] == ["nvidia-driver"] and not steps["install"] and not steps["disruptive"]
    assert [k for k in ("install", "unload", "load", "repair_dpkg") if steps[k]] == []


def test_hold_false_releases_the_holds():
    host = state("535.129.03", "535.129.03", "535.129.03", packages=CONVERGED_PACKAGES)
    steps = plan(host, debian_535(hold=False))
    assert steps["unhold"] == ["nvidia-driver"] and steps["hold"] == [] and not steps["converged"]


def test_an_interrupted_dpkg_is_repaired_first():
    host = state("535.129.03", "535.129.03", "535.129.03", packages=CONVERGED_PACKAGES,
                 dpkg_interrupted=["dpkg was interrupted (1 journal entry in /var/lib/dpkg/updates)"])
    steps = plan(host, debian_535())
    assert steps["repair_dpkg"] and "dpkg was interrupted" in steps["reasons"][0]
    assert not steps["disruptive"]


def test_an_upgrade_releases_every_held_driver_package_and_moves_the_branch():
    packages = (*BASE, "nvidia-headless-570-server 570.124.06-0ubuntu1 hold",
                "nvidia-utils-570-server 570.124.06-0ubuntu1 hold",
                "libnvidia-compute-570-server 570.124.06-0ubuntu1",
                "nvidia-container-toolkit 1.17.8-1 hold")
    host = state("570.124.06", "570.124.06", "570.124.06", packages=packages)
    steps = plan(host, request(UBUNTU2404, version="570.133.20", module_type="proprietary"))
    assert steps["install"] and steps["unload"] and steps["load"] and steps["disruptive"]
    assert steps["unhold"] == ["nvidia-headless-570-server", "nvidia-utils-570-server"]  # never the toolkit
    assert steps["install_packages"] == ["nvidia-headless-570-server=570.133.20-*",
                                         "nvidia-utils-570-server=570.133.20-*",
                                         "libnvidia-compute-570-server=570.133.20-*"]
    assert steps["hold"] == ["nvidia-headless-570-server", "nvidia-utils-570-server"]


def test_a_pinned_version_moves_only_the_packages_of_the_branch_at_another_version():
    # libnvidia-compute-535 came with the node at the wanted version, from a source its apt
    # no longer knows: requested again, apt would fail to locate it
    packages = (*BASE, "nvidia-headless-535-server 535.104.05-0ubuntu1 hold",
                "libnvidia-compute-535 535.129.03-0ubuntu1")
    host = state("535.104.05", "535.104.05", "535.104.05", packages=packages)
    steps = plan(host, request(UBUNTU2404, version="535.129.03", module_type="proprietary"))
    assert "nvidia-headless-535-server=535.129.03-*" in steps["install_packages"]
    assert not any(spec.startswith("libnvidia-compute-535") for spec in steps["install_packages"])


# What the repository says an install of 570.124.06 takes at that version (read_version_set over
# NVIDIA's layout, as tests/simnode/fakes/driver/make-packages.sh builds it)
SET_570_OPEN = ["nvidia-open-570", "nvidia-headless-570-server-open", "nvidia-utils-570-server",
                "nvidia-dkms-570-server-open", "nvidia-compute-utils-570-server",
                "libnvidia-compute-570-server"]


def test_a_first_install_of_an_older_point_release_asks_for_every_package_of_its_set():
    """570.124.06 while the repository also holds 570.133.20: apt takes each dependency's newest
    version unless asked, and refuses the exact older one ("held broken packages")."""
    steps = plan(state(version_set=SET_570_OPEN), request(UBUNTU2404, version="570.124.06",
                                                            package_source="cuda"))
    assert steps["install_packages"] == [f"{name}=570.124.06-*" for name in SET_570_OPEN]


def test_a_branch_change_to_an_older_point_release_asks_for_its_set_and_not_the_old_branch():
    packages = (*BASE, "nvidia-open-535 535.129.03-0ubuntu1 hold",
                "nvidia-headless-535-server-open 535.129.03-0ubuntu1",
                "libnvidia-compute-570-server 570.124.06-0ubuntu1")  # already at the version: not asked
    host = state("535.129.03", "535.129.03", "535.129.03", flavor="open", packages=packages,
                 version_set=SET_570_OPEN)
    steps = plan(host, request(UBUNTU2404, version="570.124.06", package_source="cuda"))
    assert steps["install_packages"] == [f"{name}=570.124.06-*" for name in SET_570_OPEN[:-1]]
    assert steps["unhold"] == ["nvidia-open-535"]


def test_a_downgrade_asks_for_the_set_and_moves_installed_packages_of_the_branch_back():
    packages = (*BASE, *(f"{name} 570.133.20-0ubuntu1" for name in SET_570_OPEN),
                "nvidia-fabricmanager-570 570.133.20-0ubuntu1")
    host = state("570.133.20", "570.133.20", "570.133.20", flavor="open", packages=packages,
                 version_set=SET_570_OPEN[:3])
    steps = plan(host, request(UBUNTU2404, version="570.124.06", package_source="cuda"))
    assert steps["install_packages"][:3] == [f"{name}=570.124.06-*" for name in SET_570_OPEN[:3]]
    assert sorted(steps["install_packages"]) == sorted(
        f"{name}=570.124.06-*" for name in [*SET_570_OPEN, "nvidia-fabricmanager-570"])


def test_cuda_590_install_requests_the_pinning_package_first():
    steps = plan(state(), request(UBUNTU2404, version="590.48.01", package_source="cuda"))
    assert steps["install_packages"] == ["nvidia-driver-pinning-590.48.01", "nvidia-open=590.48.01-*"]
    assert steps["hold"] == ["nvidia-driver-pinning-590.48.01", "nvidia-open"]


def test_a_package_not_installed_is_an_install_even_when_the_driver_runs():
    """The driver came from another source (say the runfile): the wanted packages are missing."""
    host = state("535.129.03", "535.129.03", "535.129.03")
    steps = plan(host, debian_535())
    assert steps["install"] and "nvidia-driver not installed" in " ".join(steps["reasons"])


def test_a_stale_loaded_module_is_reloaded_and_a_pending_reboot_is_seen_from_what_runs():
    host = state("535.129.03", "535.129.03", "535.183.01", packages=CONVERGED_PACKAGES)
    steps = plan(host, debian_535(version="", branch="535"))
    assert steps["unload"] and steps["load"] and not steps["install"] and steps["disruptive"]
    assert pending_reboot(host)  # until the module is reloaded, the host runs a driver not on disk
    assert not pending_reboot(state("535.129.03", "535.129.03", "535.129.03"))


def test_a_kernel_upgrade_only_builds_the_module():
    host = state("535.129.03", None, None, packages=CONVERGED_PACKAGES,
                 dkms=[("535.129.03", "6.1.0-17-amd64", "installed")])
    req = debian_535()
    assert needs_dkms_status(host, req)
    steps = plan(host, req)
    assert steps["dkms_build"] and steps["dkms_version"] == "535.129.03" and steps["load"]
    assert steps["dkms_module"] == "nvidia"  # Debian's and Ubuntu's name, both flavours
    assert not steps["install"] and not steps["disruptive"]
    assert not needs_dkms_status(state("535.129.03", "535.129.03"), req)


def test_nouveau_means_a_reboot_not_a_load():
    k80 = request(DEBIAN12, gpu(K80, supported=("470", "390")), branch="470")
    steps = plan(state(modules=["nouveau"]), k80)
    assert steps["install"] and steps["reboot_required"] and not steps["load"]
    assert "start" not in steps["persistence"]


def test_the_module_flavour_is_part_of_the_driver():
    host = state("580.95.05", "580.95.05", "580.95.05", flavor="proprietary",
                 packages=(*BASE, "nvidia-headless-580-server-open 580.95.05-0ubuntu1 hold",
                           "nvidia-utils-580-server 580.95.05-0ubuntu1 hold"))
    steps = plan(host, request(UBUNTU2404, version="580.95.05", module_type="open"))
    assert steps["install"] and steps["unload"] and "wanted open" in steps["reasons"][0]


def test_secure_boot_refuses_an_unsigned_build_and_missing_keys():
    with pytest.raises(DriverError, match=r"Secure Boot is on.*mokutil --import.*nvidia_driver_signing_key"):
        plan(state(secure_boot=True), debian_535())
    with pytest.raises(DriverError, match=r"/k.der .module signing. does not exist"):
        plan(state(secure_boot=True, signing_files_missing=["/k.der"]),
             debian_535(signing_key="/k.key", signing_cert="/k.der"))
    converged = state("535.129.03", "535.129.03", "535.129.03", packages=CONVERGED_PACKAGES, secure_boot=True)
    assert plan(converged, debian_535())["converged"]  # nothing to build: nothing to sign


def test_the_index_is_refreshed_when_it_lacks_a_needed_package_whatever_its_age():
    req = debian_535()
    steps = plan(state(), req)
    assert index_lookups(steps, req) == ["nvidia-driver"]
    stale = plan(state(index={"nvidia-driver": ["535.54.03-1"]}), req)
    assert stale["refresh_index"] and "does not know nvidia-driver" in stale["reasons"][-1]
    fresh = plan(state(index={"nvidia-driver": ["535.129.03-1~deb12u1", "535.54.03-1"]}), req)
    assert not fresh["refresh_index"]


def test_fabric_manager_follows_the_driver():
    hgx = gpu(H100, nvswitches=4)
    req = request(UBUNTU2404, hgx, version="535.129.03", module_type="proprietary")
    fresh = plan(state(), req)
    assert fresh["fabric"] == {
        "kind": "nvswitch", "version": "535.129.03", "install": ["nvidia-fabricmanager-535"], "packages": [],
        "boot_files": [], "disable": [], "remove": [], "modules": [], "files": [], "imex_config": [],
        "enable": ["nvidia-fabricmanager"], "start": ["nvidia-fabricmanager"], "restart": [], "stop": [],
        "mask": []}
    assert "nvidia-fabricmanager-535" in fresh["hold"]
    fm_unit = {"load": "loaded", "active": "active", "enabled": "enabled"}
    running = {**ENABLED, "nvidia-fabricmanager": fm_unit}
    packages = (*BASE, "nvidia-headless-535-server 535.129.03-0ubuntu1 hold",
                "nvidia-utils-535-server 535.129.03-0ubuntu1 hold",
                "nvidia-fabricmanager-535 535.129.03-0ubuntu1 hold")
    converged = state("535.129.03", "535.129.03", "535.129.03", packages=packages, services=running)
    assert plan(converged, req)["converged"]
    stopped = {**running, "nvidia-fabricmanager": {**fm_unit, "active": "failed"}}
    steps = plan({**converged, "services": stopped}, req)
    assert steps["fabric"]["start"] == ["nvidia-fabricmanager"] and not steps["fabric"]["install"]
    assert not steps["disruptive"]


def test_runfile_plans_the_unit_and_no_holds():
    req = request(UBUNTU2404, version="580.95.05", method="runfile", runfile_checksum="a" * 64)
    steps = plan(state(services={}, persistenced_unit=False), req)
    assert steps["install"] and steps["persistence"] == ["unit", "enable", "start"]
    assert steps["hold"] == [] and steps["install_packages"] == []


# ------------------------------------------------------------------ facts and changes

# what a run changed is told on the controller (filter_plugins/nvidia_driver.py, standard library only)
FILTERS = load_file(ROOT / "filter_plugins" / "nvidia_driver.py", "nvidia_driver_filters")
change_lines = FILTERS.FilterModule().filters()["nvidia_driver_changes"]


def test_facts_before_and_predicted_after_and_the_change_lines():
    host = state(packages=BASE, services={})
    req = debian_535()
    steps = plan(host, req)
    before = driver_facts(host, req)
    assert before == {"method": "packages", "branch": "535", "wanted": "535.129.03",
                      "installed_version": None, "loaded_version": None, "module_type": None, "held": False,
                      "reboot_required": False, "origin": None, "driver_root": None, "tools_prefix": None,
                      "skipped": []}
    after = driver_facts(host, req, steps)
    assert (after["installed_version"], after["loaded_version"], after["module_type"], after["held"]) == (
        "535.129.03", "535.129.03", "proprietary", True)
    lines = change_lines(steps, before, after)
    assert lines[0] == "driver none -> 535.129.03 (proprietary)"
    assert "driver packages held: nvidia-driver" in lines and "driver loaded: none -> 535.129.03" in lines


def test_a_reinstall_of_the_same_version_says_so():
    host = state("535.129.03", None, None, packages=CONVERGED_PACKAGES)
    req = debian_535()
    steps = plan(host, req)
    before = driver_facts(host, req)
    assert steps["install"] and change_lines(steps, before, driver_facts(host, req, steps))[0] == (
        "driver 535.129.03 reinstalled (proprietary)")


def test_facts_of_a_runfile_host_have_no_holds_and_a_busy_module_means_a_reboot():
    req = request(UBUNTU2404, version="580.95.05", method="runfile", runfile_checksum="a" * 64)
    busy = state("580.95.05", "580.95.05", "570.133.20", packages=None)
    facts = driver_facts(busy, req)
    assert facts["held"] is None and facts["reboot_required"] and facts["loaded_version"] == "570.133.20"
    assert "reboot pending to load the driver" in change_lines(plan(busy, req), facts, facts)


def test_the_change_lines_tell_what_the_check_after_read_not_what_the_plan_predicted():
    host = state("535.129.03", "535.129.03", "470.256.02", packages=BASE)
    req = debian_535()
    steps = plan(host, req)
    before = driver_facts(host, req)
    assert steps["unload"] or steps["load"]
    # the old module stayed busy: the check after the change reads it still loaded, a reboot pending
    after = dict(driver_facts(host, req, steps), loaded_version="470.256.02", reboot_required=True)
    lines = change_lines(steps, before, after)
    assert "reboot pending to load the driver" in lines
    assert not any(line.startswith("driver loaded:") for line in lines)
    assert change_lines(dict(steps, converged=True), before, after) == []


def test_the_change_lines_name_each_kernel_a_module_was_built_for():
    steps = {"converged": False, "dkms_build": True, "dkms_version": "535.129.03",
             "dkms_kernels": ["6.1.0-18-amd64", "6.1.0-30-amd64"]}
    lines = change_lines(steps, {}, {})
    built = lines.index("driver 535.129.03: module built for the running kernel")
    assert lines[built + 1] == "driver 535.129.03: module built for kernel 6.1.0-30-amd64, which boots next"
    only_next = dict(steps, dkms_build=False, dkms_kernels=["6.1.0-30-amd64"])
    only_lines = ["driver 535.129.03: module built for kernel 6.1.0-30-amd64, which boots next"]
    assert change_lines(only_next, {}, {}) == only_lines
    # an install (a bake's, for the image's kernel): no version registered before it, the installed one
    install = dict(only_next, dkms_version=None)
    assert change_lines(install, {}, {"installed_version": "535.129.03"}) == only_lines
