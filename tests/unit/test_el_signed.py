"""el-signed: the RHEL family's NVIDIA open modules signed with the distribution's key
(module_utils/gpunode/driver/el_signed.py), chosen by itself under Secure Boot without a signing key
where the distribution signs them for the running kernel and the kernels that boot next (RHEL 10.1+ in
rhel-10-for-<arch>-extensions-rpms: NVIDIA/yum-packaging-precompiled-kmod issue 59; AlmaLinux 9 and 10
in almalinux-nvidia), refused before any change where it does not (RHEL 10.0, Rocky 9)."""

import pytest
from ansible.module_utils.gpunode.driver import el_signed
from ansible.module_utils.gpunode.driver import host as driver_host
from ansible.module_utils.gpunode.driver.driver import DriverError, build_request
from ansible.module_utils.gpunode.driver.install_packages import role_install
from ansible.module_utils.gpunode.driver.plan import plan, signed_fallback
from ansible.module_utils.gpunode.host.commands import Host

KERNEL = "6.12.0-124.8.1.el10_1.x86_64"
NEXT = "6.12.0-124.20.1.el10_1.x86_64"
RHEL = {"distribution": "Redhat", "distribution_version": "10.1", "architecture": "x86_64", "kernel": KERNEL}
EXTENSIONS = "rhel-10-for-x86_64-extensions-rpms"
T4, V100 = "1eb8", "1db4"


def gpu(*ids):
    return {"devices": [{"device_id": i, "kind": "gpu"} for i in ids or (T4,)], "nvswitch_count": 0,
            "supported_branches": ["595", "590", "580", "570", "535"], "recommended_branch": "580"}


def request(os_info=RHEL, ids=(T4,), **params):
    return build_request(dict({"package_source": "cuda"}, **params), gpu(*ids), dict(os_info))


def bare(os_info=RHEL, **extra):
    state = {"kernel": os_info["kernel"], "headers_present": False, "module_on_disk": None, "dkms": None,
             "loaded": {"modules": [], "version": None, "module_type": None}, "userspace_version": None,
             "packages": {}, "dpkg_interrupted": [], "services": {}, "persistenced_unit": False,
             "blacklist_complete": True, "secure_boot": True, "signing_files_missing": [], "index": None}
    state.update((key, os_info[key]) for key in ("distribution", "distribution_version", "architecture"))
    return dict(state, **extra)


def kmod(kernel, version="580.95.05", naming="kmodtool"):
    """A repository entry as ``dnf repoquery --qf QUERY_FORMAT`` prints it, in one of the ways RPM kmods
    say their kernel: kmodtool's name and ``kernel-uname-r`` require, or NVIDIA's precompiled package's
    ``kernel-modules`` provide (kmod-nvidia-<driver>-<kernel version>-<release>)."""
    if naming == "kmodtool":
        return (f"@kmod-nvidia-{kernel} 3:{version}-1.el10_1\nnvidia-kmod = 3:{version}\n"
                f"kernel-uname-r = {kernel}\n")
    name = f"kmod-nvidia-{version}-{kernel.rsplit('.el', 1)[0]}"
    return f"@{name} 3:{version}-2.el10_1\nkernel-modules = {kernel}\nnvidia-kmod = 3:{version}\n"


def read(*entries, boot_kernels=(), offer=None):
    found = el_signed.parse_query("".join(entries))
    return dict(offer or el_signed.offer(bare(), {}), kmods=found, error="", boot_kernels=list(boot_kernels))


@pytest.mark.parametrize(("distribution", "version", "repository", "kmod"), [
    ("Redhat", "10.1", EXTENSIONS, "kmod-nvidia"),
    ("RedHat", "10.2", EXTENSIONS, "kmod-nvidia"),
    ("AlmaLinux", "9.6", "almalinux-nvidia", "kmod-nvidia-open"),
    ("AlmaLinux", "10.0", "almalinux-nvidia", "kmod-nvidia-open"),
])
def test_the_distributions_that_sign_nvidias_modules_and_their_repository(distribution, version, repository,
                                                                           kmod):
    offer = el_signed.offer(bare(dict(RHEL, distribution=distribution, distribution_version=version)), {})
    assert (offer["repository"], offer["kmod"]) == (repository, kmod)


@pytest.mark.parametrize(("distribution", "version", "named"), [
    ("Redhat", "10.0", "RHEL 10.0"), ("Redhat", "9.6", "RHEL 9.6"), ("Rocky", "9.6", "Rocky 9.6"),
    ("Rocky", "10.1", "Rocky 10.1"),
])
def test_a_distribution_that_signs_none_is_refused_before_any_read_saying_what_to_do(distribution, version,
                                                                                      named):
    node = bare(dict(RHEL, distribution=distribution, distribution_version=version))
    with pytest.raises(DriverError) as refused:
        el_signed.offer(node, {"signed_auto": True})
    message = str(refused.value)
    assert message.startswith(f"Secure Boot is on and no module signing key is set, and {named} ships no ")
    for what in ("RHEL 10.1", "rhel-10-for-<arch>-extensions-rpms", "mokutil --import",
                 "nvidia_driver_signing_key and nvidia_driver_signing_cert", "Nothing was changed."):
        assert what in message
    with pytest.raises(DriverError, match=r"^nvidia_driver_method: el-signed, and "):
        el_signed.offer(node, {})


@pytest.mark.parametrize("naming", ["kmodtool", "precompiled"])
def test_a_kmod_is_for_the_kernel_its_metadata_names(naming):
    entry = el_signed.parse_query(kmod(KERNEL, naming=naming))[0]
    assert el_signed.built_for(entry, KERNEL, "kmod-nvidia")
    assert not el_signed.built_for(entry, NEXT, "kmod-nvidia")
    assert el_signed.driver_of(entry) == "580.95.05"


def test_secure_boot_without_a_key_on_rhel_10_1_switches_to_the_signed_module_of_the_running_kernel():
    req = signed_fallback(bare(), request(branch="580"))
    assert (req["method"], req["signed_auto"]) == ("el-signed", True)
    signed = el_signed.signed_request(req, bare(), read(kmod(KERNEL, "580.82.07"), kmod(KERNEL), kmod(NEXT),
                                                        kmod(KERNEL, "590.48.01")))
    assert (signed["version"], signed["wanted"]) == ("580.95.05", "580.95.05")
    assert signed["packages"]["install"] == [f"kmod-nvidia-{KERNEL}", "nvidia-driver-cuda"]
    assert signed["packages"]["lock"] == "*nvidia*580*"  # EL 10: the branch pinned first, as for DKMS
    steps = plan(bare(), signed)
    assert steps["install_packages"] == [f"kmod-nvidia-{KERNEL}-580.95.05", "nvidia-driver-cuda-580.95.05"]
    assert steps["prerequisites"] == [] and steps["dkms_kernels"] == []  # nothing is built
    assert "Secure Boot is on and no signing key is set: the distribution's signed NVIDIA modules " \
           "(nvidia_driver_method: el-signed)" in steps["reasons"]


@pytest.mark.parametrize(("secure_boot", "params"), [
    (False, {}),
    (True, {"signing_key": "/root/mok.key", "signing_cert": "/root/mok.der"}),
])
def test_secure_boot_off_or_a_signing_key_keeps_the_dkms_build(secure_boot, params):
    req = request(branch="580", **params)
    assert signed_fallback(bare(secure_boot=secure_boot), req) is req
    assert "dkms" in plan(bare(secure_boot=secure_boot), req)["prerequisites"]


def test_proprietary_modules_are_not_switched_and_the_build_is_refused_as_before():
    req = request(ids=(V100,), branch="580")
    assert signed_fallback(bare(), req) is req
    with pytest.raises(DriverError, match=r"^Secure Boot is on and the NVIDIA kernel module would be"):
        plan(bare(), req)
    with pytest.raises(DriverError, match="signs NVIDIA's open kernel modules only"):
        el_signed.signed_request(request(ids=(V100,), method="el-signed", branch="580"), bare(), read())


def test_no_module_for_the_running_kernel_or_a_kernel_that_boots_next_is_refused_naming_what_there_is():
    req = signed_fallback(bare(), request(branch="580"))
    with pytest.raises(DriverError) as refused:
        el_signed.signed_request(req, bare(), read(kmod(NEXT), kmod(KERNEL, "570.172.08")))
    assert str(refused.value).startswith(f"{EXTENSIONS} has no signed NVIDIA module of 580 for kernel "
                                         f"{KERNEL} (for this kernel: 570.172.08)")
    with pytest.raises(DriverError, match=f"^kernel {NEXT} is installed and boots next, but {EXTENSIONS}"):
        el_signed.signed_request(req, bare(), read(kmod(KERNEL), kmod(NEXT, "580.82.07"),
                                                   boot_kernels=[NEXT]))
    with pytest.raises(DriverError, match=f"^the repository {EXTENSIONS} cannot be read on this node"):
        el_signed.signed_request(req, bare(), dict(read(), kmods=None, error="Unknown repo"))


def test_the_kernels_that_boot_next_get_their_module_without_touching_the_running_driver():
    installed = {name: {"version": "3:580.95.05-1.el10_1", "want": "hold", "status": "installed"}
                 for name in (f"kmod-nvidia-{KERNEL}", "nvidia-driver-cuda")}
    node = bare(packages=installed, userspace_version="580.95.05",
                module_on_disk={"version": "580.95.05", "flavor": "open"},
                loaded={"modules": ["nvidia"], "version": "580.95.05", "module_type": "open"})
    req = signed_fallback(node, request(branch="580", persistence=False))  # nvidia-open is not installed
    signed = el_signed.signed_request(req, node, read(kmod(KERNEL), kmod(NEXT, naming="precompiled"),
                                                      boot_kernels=[NEXT]))
    steps = plan(node, signed)
    assert steps["kernel_modules"] == [f"kmod-nvidia-580.95.05-{NEXT.rsplit('.el', 1)[0]}"]
    assert not (steps["install"] or steps["unload"] or steps["disruptive"] or steps["remove"])
    next_module = {steps["kernel_modules"][0]: installed["nvidia-driver-cuda"]}
    assert plan(dict(node, packages=dict(installed, **next_module)), signed)["converged"]


def test_a_switch_removes_the_other_methods_kmod_packages():
    dkms = {name: {"version": "3:580.95.05-1.el10", "want": "hold", "status": "installed"}
            for name in ("nvidia-open", "kmod-nvidia-open-dkms", "nvidia-driver-cuda")}
    req = signed_fallback(bare(), request(branch="580"))
    signed = el_signed.signed_request(req, bare(packages=dkms), read(kmod(KERNEL)))
    steps = plan(bare(packages=dkms), signed)
    assert steps["remove"] == ["kmod-nvidia-open-dkms"]
    assert not any(spec.startswith(("kmod-nvidia-open-dkms", "nvidia-open"))
                   for spec in steps["install_packages"])
    back = dict(dkms, **{f"kmod-nvidia-{KERNEL}": dkms["nvidia-driver-cuda"]})
    del back["nvidia-open"], back["kmod-nvidia-open-dkms"]
    keyed = request(branch="580", signing_key="/root/mok.key", signing_cert="/root/mok.der")
    assert plan(bare(packages=back), keyed)["remove"] == [f"kmod-nvidia-{KERNEL}"]


def test_el_signed_is_the_rhel_familys_only():
    ubuntu = dict(RHEL, distribution="Ubuntu", distribution_version="24.04", kernel="6.8.0-60-generic")
    with pytest.raises(DriverError, match=r"^nvidia_driver_method: el-signed installs the signed modules"):
        request(ubuntu, method="el-signed", package_source="distro", branch="580")


def test_the_offline_bundle_cannot_carry_the_module_a_node_chooses_from_its_repository():
    values = {"package_source": "cuda", "branch": "580"}
    with pytest.raises(DriverError, match="the offline bundle does not carry it"):
        role_install(values, dict(gpu(), present=True), RHEL, secure_boot=True)
    assert role_install(values, dict(gpu(), present=True), RHEL)["method"] == "packages"


class Scripted:
    """The three methods of AnsibleModule a Host uses; commands answer from ``commands``."""

    def __init__(self, commands):
        self.commands, self.calls = commands, []

    def get_bin_path(self, name, opt_dirs=None):
        return f"/usr/bin/{name}"

    def run_command(self, argv, environ_update=None):
        self.calls.append(argv)
        return self.commands.get(argv[-1], (1, "", "Error: Unknown repo: 'x'"))

    def warn(self, message):
        raise AssertionError(message)


def test_the_repository_alone_is_read_and_the_installed_kernels_after_the_running_one(tmp_path, monkeypatch):
    monkeypatch.setattr(driver_host, "MODULES_DIR", str(tmp_path))
    removed, older = "6.12.0-200.el10_2.x86_64", "5.14.0-1.el9.x86_64"  # a kernel's leftovers, an older one
    for release, files in ((NEXT, ["vmlinuz"]), (removed, []), (older, ["vmlinuz"])):
        (tmp_path / release).mkdir()
        for name in files:
            (tmp_path / release / name).write_text("")
    module = Scripted({"kmod-nvidia*": (0, kmod(KERNEL), "")})
    found = driver_host.read_el_signed(Host(module), el_signed.offer(bare(), {}), KERNEL)
    assert module.calls == [["/usr/bin/dnf", "repoquery", "--quiet", "--repo", EXTENSIONS, "--qf",
                             el_signed.QUERY_FORMAT, "kmod-nvidia*"]]
    assert [k["name"] for k in found["kmods"]] == [f"kmod-nvidia-{KERNEL}"]
    assert found["boot_kernels"] == [NEXT]
    unread = driver_host.read_el_signed(Host(Scripted({})), el_signed.offer(bare(), {}), KERNEL)
    assert unread["kmods"] is None and unread["error"] == "Error: Unknown repo: 'x'"
