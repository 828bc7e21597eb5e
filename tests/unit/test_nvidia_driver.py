"""Pure logic of module_utils/nvidia_driver.py, over real and project fixtures."""

import pathlib
import re

import pytest
from ansible.module_utils.nvidia_driver import (
    DriverError,
    branch_of,
    branch_supported,
    compare_versions,
    kernel_module_type,
    module_from_modinfo,
    parse_dkms_status,
    parse_efi_secure_boot,
    parse_mokutil_sb_state,
    parse_proc_driver_version,
    parse_smi_query,
    plan,
    resolve_wanted,
    runfile_flags,
    userspace_version_from_names,
    version_matches,
)
from conftest import FIXTURES, shared_files

DRIVER_FIXTURES = FIXTURES / "driver"


def version_in_name(path):
    return re.search(r"(\d+\.\d+(?:\.\d+)?)", pathlib.Path(path).name).group(1)


# ------------------------------------------------------------------ versions


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        ("535.129.03", "535.129.3", 0),
        ("535.129.03", "535.54.03", 1),  # numeric, not string, comparison
        ("470.256.02", "535.54.03", -1),
        ("1000.1", "999.99.99", 1),
    ],
)
def test_compare_versions_is_numeric(left, right, expected):
    assert compare_versions(left, right) == expected


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


@pytest.mark.parametrize("path", shared_files("nvidia", "proc-driver-nvidia-version-*"), ids=lambda p: p.name)
def test_proc_driver_version_real_samples(path):
    parsed = parse_proc_driver_version(path.read_text(errors="replace"))
    assert parsed["version"] == version_in_name(path.name.split("-", 5)[-1])
    assert parsed["flavor"] == ("open" if "-open-" in path.name else "proprietary")


def test_proc_driver_version_garbage():
    with pytest.raises(DriverError):
        parse_proc_driver_version("nothing here\n")


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


# ------------------------------------------------------------------ plan

KERNEL = "6.1.0-18-amd64"


def host(userspace=None, on_disk=None, loaded=None, dkms=(), nouveau=False):
    return {
        "kernel": KERNEL,
        "userspace_version": userspace,
        "module_on_disk": {"version": on_disk} if on_disk else None,
        "loaded": {"version": loaded} if loaded else None,
        "dkms": [{"module": "nvidia", "version": v, "kernel": k, "arch": "x86_64", "status": s,
                  "warning": None} for v, k, s in dkms],
        "nouveau_loaded": nouveau,
    }


def test_plan_fresh_host_installs_and_loads():
    result = plan(host(), "535.129.03")
    assert result["install"] and result["load"]
    assert not result["unload"] and not result["reboot_required"] and not result["up_to_date"]


def test_plan_converged_host_does_nothing():
    state = host("535.129.03", "535.129.03", "535.129.03", [("535.129.03", KERNEL, "installed")])
    result = plan(state, "535.129.03")
    assert result["up_to_date"]
    assert not any(result[k] for k in ("install", "dkms_build", "unload", "load", "reboot_required"))
    assert plan(state, "535")["up_to_date"]


def test_plan_upgrade_unloads_the_old_module():
    state = host("535.129.03", "535.129.03", "535.129.03", [("535.129.03", KERNEL, "installed")])
    result = plan(state, "550.54.15")
    assert result["install"] and result["unload"] and result["load"]


def test_plan_after_kernel_upgrade_only_builds_the_module():
    # booted into a new kernel: the module is registered (built for the old one) but not on disk
    state = host("535.129.03", None, None, [("535.129.03", "6.1.0-17-amd64", "installed")])
    result = plan(state, "535.129.03")
    assert result["dkms_build"] and not result["install"] and result["load"]
    assert result["dkms_version"] == "535.129.03"


def test_plan_installed_but_not_loaded_loads():
    state = host("535.129.03", "535.129.03", None, [("535.129.03", KERNEL, "installed")])
    result = plan(state, "535.129.03")
    assert result["load"] and not result["install"] and not result["up_to_date"]


def test_plan_nouveau_loaded_needs_a_reboot_not_a_load():
    result = plan(host(nouveau=True), "470.256.02")
    assert result["install"] and result["reboot_required"] and not result["load"]
    assert any("nouveau" in r for r in result["reasons"])


def test_plan_rejects_a_bad_wanted_version():
    with pytest.raises(DriverError):
        plan(host(), "latest")


def test_plan_branch_wanted_but_loaded_module_is_another_version_of_it():
    # packages put 535.129.03 on disk while 535.183.01 is still loaded: a mismatch to resolve
    state = host("535.129.03", "535.129.03", "535.183.01", [("535.129.03", KERNEL, "installed")])
    result = plan(state, "535")
    assert result["unload"] and result["load"] and not result["install"]
    assert not result["up_to_date"]
