"""The driver concern on the RHEL family (module_utils/gpunode/driver/packages.py, driver.py), from
NVIDIA's Driver Installation Guide ("Kernel Modules": EL 9 enables ``nvidia-driver:<branch>-open``
or ``-dkms`` and installs ``nvidia-open`` or ``cuda-drivers``; EL 10 installs them after
``dnf versionlock add '*nvidia*<branch>*'``; "Red Hat Enterprise Linux": ``kernel-devel-$(uname -r)``
and ``kernel-headers``) and the CUDA repository's layout (``rhel9``/``rhel10``, ``sbsa`` for arm64,
signed by D42D0685)."""

import pytest
from ansible.module_utils.gpunode.driver import packages as nvidia_packages
from ansible.module_utils.gpunode.driver.driver import DriverError, build_request, kernel_module_type
from ansible.module_utils.gpunode.driver.fabric_plan import with_fabric
from ansible.module_utils.gpunode.driver.plan import plan

ROCKY9 = {"distribution": "Rocky", "distribution_version": "9.5", "architecture": "x86_64",
          "kernel": "5.14.0-503.14.1.el9_5.x86_64"}
RHEL10 = {"distribution": "RedHat", "distribution_version": "10.0", "architecture": "aarch64",
          "kernel": "6.12.0-55.9.1.el10_0.aarch64"}
T4, V100, H100 = "1eb8", "1db4", "2330"
CUDA = "https://developer.download.nvidia.com/compute/cuda/repos/"


def gpu(*ids, nvswitches=0):
    branches = ["620", "610", "595", "590", "580", "570", "550", "535"]
    return {"devices": [{"device_id": i, "kind": "gpu"} for i in ids], "nvswitch_count": nvswitches,
            "supported_branches": branches, "recommended_branch": "580"}


def request(os_info=ROCKY9, gpus=None, **params):
    params.setdefault("package_source", "cuda")
    gpus = gpus or gpu(T4)
    return with_fabric(build_request(params, gpus, dict(os_info)), params, gpus, dict(os_info))


@pytest.mark.parametrize(("os_info", "ids", "params", "install", "stream", "lock"), [
    (ROCKY9, [T4], {"branch": "580"}, ["nvidia-open"], "nvidia-driver:580-open", None),
    (ROCKY9, [V100], {"branch": "580"}, ["cuda-drivers"], "nvidia-driver:580-dkms", None),
    (ROCKY9, [T4], {"version": "570.172.08", "module_type": "proprietary"}, ["cuda-drivers"],
     "nvidia-driver:570-dkms", None),
    (RHEL10, [H100], {"branch": "595"}, ["nvidia-open"], None, "*nvidia*595*"),
    (RHEL10, [V100], {"version": "580.95.05"}, ["cuda-drivers"], None, "*nvidia*580.95.05*"),
])
def test_el_packages_follow_nvidias_guide_per_release(os_info, ids, params, install, stream, lock):  # noqa: PLR0917
    req = request(os_info, gpu(*ids), **params)
    assert req["packages"] == {"install": install, "pin": None, "hold": install, "stream": stream,
                               "lock": lock}
    assert req["package_manager"] == "dnf"


@pytest.mark.parametrize("ids", [[T4], [V100], [H100, V100]])
def test_open_or_proprietary_is_the_same_rule_as_on_debian(ids):
    rocky = request(ROCKY9, gpu(*ids), branch="580")
    bookworm = {**ROCKY9, "distribution": "Debian", "distribution_version": "12"}
    debian = request(bookworm, gpu(*ids), branch="580", keyring="/etc/apt/keyrings/k.asc")
    assert rocky["module_type"] == debian["module_type"] == kernel_module_type("auto", "580", ids)


def test_the_repository_is_nvidias_per_release_and_arch_with_its_key_checked():
    rocky = request(ROCKY9, branch="580")["repository"]
    assert rocky["baseurl"] == CUDA + "rhel9/x86_64/"
    assert rocky["key_url"] == CUDA + "rhel9/x86_64/D42D0685.pub"
    rhel = request(RHEL10, branch="580")["repository"]
    assert rhel["baseurl"] == CUDA + "rhel10/sbsa/" and rhel["name"] == "gpunode-nvidia-driver"
    assert rhel["line"] is None and rhel["sources_text"] is None  # no apt source on EL


def test_a_mirror_replaces_the_repository_and_brings_its_key():
    mirrored = request(ROCKY9, branch="580", rpm_repository="https://mirror.local/cuda/rhel9/x86_64")["repository"]
    assert mirrored["baseurl"] == "https://mirror.local/cuda/rhel9/x86_64"
    assert mirrored["key_url"] == "https://mirror.local/cuda/rhel9/x86_64/D42D0685.pub"
    keyed = request(ROCKY9, branch="580", rpm_repository="file:///srv/cuda", rpm_key_url="file:///srv/key.pub")
    assert keyed["repository"]["key_url"] == "file:///srv/key.pub"
    with pytest.raises(DriverError, match=r"^nvidia_driver_rpm_repository: 'mirror.local/cuda' is not a URL"):
        request(ROCKY9, branch="580", rpm_repository="mirror.local/cuda")


def test_the_build_needs_kernel_devel_of_the_running_kernel_and_kernel_headers():
    req = request(ROCKY9, branch="580")
    assert req["headers_package"] == "kernel-devel-5.14.0-503.14.1.el9_5.x86_64"
    assert req["build_prerequisites"] == ["kernel-headers", "dkms", "gcc", "make"]


def bare(os_info=ROCKY9):
    return {"kernel": os_info["kernel"], "headers_present": False, "module_on_disk": None, "dkms": None,
            "loaded": {"modules": [], "version": None, "module_type": None}, "userspace_version": None,
            "packages": {}, "dpkg_interrupted": [], "services": {}, "persistenced_unit": False,
            "blacklist_complete": False, "secure_boot": False, "signing_files_missing": [], "index": None}


def test_a_bare_el_node_installs_the_version_as_dnf_asks_it_and_holds_with_versionlock():
    req = request(ROCKY9, gpu(H100, nvswitches=4), version="580.95.05")
    steps = plan(bare(), req)
    assert steps["install_packages"] == ["nvidia-open-580.95.05"]  # dnf's name-version: any epoch, release
    assert steps["prerequisites"] == ["kernel-devel-5.14.0-503.14.1.el9_5.x86_64", "kernel-headers", "dkms",
                                      "gcc", "make"]
    assert steps["hold"] == ["nvidia-open", "nvidia-fabric-manager", "*nvidia*-580.*"]
    assert steps["fabric"]["install"] == ["nvidia-fabric-manager"]
    assert steps["blacklist_nouveau"]


def test_an_el_install_of_an_older_point_release_asks_for_its_whole_set_as_name_version():
    """dnf spells a version request name-version (any epoch, release); the set is what the
    repository says nvidia-open-580.95.05 requires at that version (``dnf repoquery``)."""
    req = request(ROCKY9, gpu(H100), version="580.95.05")
    steps = plan(dict(bare(), version_set=["nvidia-open", "nvidia-driver", "kmod-nvidia-open-dkms",
                                           "nvidia-driver-libs"]), req)
    assert steps["install_packages"] == ["nvidia-open-580.95.05", "nvidia-driver-580.95.05",
                                         "kmod-nvidia-open-dkms-580.95.05", "nvidia-driver-libs-580.95.05"]


def test_an_el_install_locks_every_package_of_the_branch_and_a_change_releases_the_old_ones():
    """dnf upgrade (best=True) fails when nvidia-open alone is locked and the repository has a newer
    point release: its dependencies' updates need a newer nvidia-open. The install locks what it
    installed of the branch (the plugin locks the installed packages a spec names); a change of
    version releases the old branch's locks by the same spec, names the role does not know too."""
    first = plan(bare(), request(ROCKY9, version="570.124.06"))
    assert first["hold"] == ["nvidia-open", "*nvidia*-570.*"] and first["unhold"] == []
    assert nvidia_packages.el_branch_lock("570") == "*nvidia*-570.*"
    older = dict(bare(), packages=kmod("open", "3:570.133.20-1.el9"))
    change = plan(older, request(ROCKY9, version="580.95.05"))
    assert change["unhold"] == ["kmod-nvidia-open-dkms", "nvidia-open", "*nvidia*-570.*"]
    assert change["hold"] == ["nvidia-open", "*nvidia*-580.*"]
    loose = dict(older, packages={n: dict(e, want="install") for n, e in older["packages"].items()})
    assert plan(loose, request(ROCKY9, version="580.95.05"))["unhold"] == []
    unheld = plan(older, request(ROCKY9, version="580.95.05", hold=False))
    assert unheld["hold"] == [] and "*nvidia*-570.*" in unheld["unhold"]


def test_a_held_el_driver_is_converged_on_holds():
    req = request(ROCKY9, branch="580")
    installed = dict(bare(), userspace_version="580.95.05", headers_present=True, blacklist_complete=True,
                     module_on_disk={"version": "580.95.05", "flavor": "open"},
                     loaded={"modules": ["nvidia"], "version": "580.95.05", "module_type": "open"},
                     services={"nvidia-persistenced": {"load": "loaded", "unit_file": "enabled",
                                                       "active": "active"}})
    held = dict(installed, packages={"nvidia-open": {"version": "3:580.95.05-1.el9", "want": "hold",
                                                     "status": "installed"}})
    assert plan(held, req)["hold"] == []
    loose = dict(held, packages={"nvidia-open": dict(held["packages"]["nvidia-open"], want="install")})
    assert plan(loose, req)["hold"] == ["nvidia-open"]


@pytest.mark.parametrize(("version", "message"), [
    ("8.10", r"^Rocky 8.10: EL 8 is not served: ansible-core 2.17 and later no longer run modules on "
             r"Python 3.6"),
    ("11.0", r"^Rocky 11.0: gpunode knows the NVIDIA packages of EL 9 and 10, not of EL 11"),
])
def test_el_releases_gpunode_does_not_serve_are_refused_by_name(version, message):
    with pytest.raises(DriverError, match=message):
        request({**ROCKY9, "distribution_version": version}, branch="580")


def test_the_distribution_source_is_refused_on_el_naming_the_setting():
    with pytest.raises(DriverError, match=r"^EL 9: the distribution packages no NVIDIA driver; set "
                                          r"nvidia_driver_package_source: cuda"):
        request(ROCKY9, branch="580", package_source="distro")


def test_the_family_is_the_rhel_family_by_distribution_fact():
    assert [nvidia_packages.family_of(d) for d in ("RedHat", "Rocky", "AlmaLinux", "CentOS", "Ubuntu")] == [
        "rhel", "rhel", "rhel", "rhel", None]
    assert nvidia_packages.version_spec("nvidia-open", "580.95.05", "dnf") == "nvidia-open-580.95.05"
    assert nvidia_packages.version_spec("nvidia-open", "580.95.05") == "nvidia-open=580.95.05-*"


@pytest.mark.parametrize(("enabled", "expected"), [
    (None, {"stream": "nvidia-driver:580-open", "command": "enable", "enabled": None}),
    ("570-open", {"stream": "nvidia-driver:580-open", "command": "switch-to", "enabled": "570-open"}),
    ("580-open", None),
])
def test_el9_enables_the_stream_or_switches_to_it_before_the_install(enabled, expected):
    steps = plan(dict(bare(), module_stream=enabled), request(ROCKY9, branch="580"))
    assert steps["module_stream"] == expected and steps["version_lock"] is None


def test_el10_pins_the_branch_with_versionlock_before_the_install_and_only_then():
    req = request(RHEL10, gpu(H100), branch="595")
    assert plan(bare(RHEL10), req)["version_lock"] == "*nvidia*595*"
    assert plan(bare(RHEL10), req)["module_stream"] is None
    installed = dict(bare(RHEL10), userspace_version="595.71.05", headers_present=True,
                     blacklist_complete=True, module_on_disk={"version": "595.71.05", "flavor": "open"},
                     packages={"nvidia-open": {"version": "3:595.71.05-1.el10", "want": "hold",
                                               "status": "installed"}})
    assert plan(installed, req)["version_lock"] is None  # nothing to install: no pin to add


def test_a_fabric_manager_with_an_epoch_at_the_drivers_version_is_converged():
    req = request(ROCKY9, gpu(H100, nvswitches=4), branch="580")
    running = {"load": "loaded", "enabled": "enabled", "active": "active"}
    node = dict(bare(), userspace_version="580.95.05", headers_present=True, blacklist_complete=True,
                module_on_disk={"version": "580.95.05", "flavor": "open"},
                loaded={"modules": ["nvidia"], "version": "580.95.05", "module_type": "open"},
                services={"nvidia-persistenced": running, "nvidia-fabricmanager": running},
                packages={name: {"version": "3:580.95.05-1.el9", "want": "hold", "status": "installed"}
                          for name in ("nvidia-open", "nvidia-fabric-manager")})
    steps = plan(node, req)
    assert steps["fabric"] is None and steps["converged"], steps["reasons"]


def test_secure_boot_on_el_signs_the_dkms_build_with_the_operators_key_or_refuses():
    """EL builds the module with DKMS (EPEL's), as Debian does: under Secure Boot the build is refused
    before any change without a key pair, and planned (DKMS signing it: role's framework.conf.d
    drop-in) with one; a key named but missing on the node is refused naming it."""
    secure = dict(bare(), secure_boot=True)
    unsigned = r"^Secure Boot is on and the NVIDIA kernel module would be unsigned"
    with pytest.raises(DriverError, match=unsigned):
        plan(secure, request(ROCKY9, branch="580"))
    keyed = request(ROCKY9, branch="580", signing_key="/root/mok.key", signing_cert="/root/mok.der")
    assert keyed["signing"] and keyed["package_manager"] == "dnf"
    steps = plan(secure, keyed)
    assert steps["install"] and steps["install_packages"] == ["nvidia-open"]
    assert "dkms" in steps["prerequisites"]
    with pytest.raises(DriverError, match=r"^/root/mok.key \(module signing\) does not exist on this host"):
        plan(dict(secure, signing_files_missing=["/root/mok.key"]), keyed)
    with pytest.raises(DriverError, match="module signing needs both"):
        request(ROCKY9, branch="580", signing_key="/root/mok.key")


def kmod(flavour, version="3:580.95.05-1.el9"):
    """rpm's entries of NVIDIA's driver with the DKMS package of ``flavour`` (open: nvidia-open,
    kmod-nvidia-open-dkms; proprietary: cuda-drivers, kmod-nvidia-latest-dkms)."""
    names = {"open": ("nvidia-open", "kmod-nvidia-open-dkms"),
             "proprietary": ("cuda-drivers", "kmod-nvidia-latest-dkms")}[flavour]
    return {name: {"version": version, "want": "hold", "status": "installed"} for name in names}


def running(os_info, flavour, version="580.95.05", **extra):
    """A node running ``version`` of ``flavour`` from NVIDIA's packages."""
    extra.setdefault("packages", kmod(flavour))
    return dict(bare(os_info), userspace_version=version, headers_present=True, blacklist_complete=True,
                module_on_disk={"version": version, "flavor": flavour}, **extra)


def test_el9_switches_flavour_with_the_stream_and_dnf_erasing_the_other_kmod_package():
    """NVIDIA's guide, "Switching between Driver Module Flavors": ``dnf module switch-to
    nvidia-driver:<stream> --allowerasing``; kmod-nvidia-open-dkms conflicts with kmod-nvidia-latest-dkms
    (dkms-open-nvidia.spec), so the install after the switch erases it too."""
    steps = plan(running(ROCKY9, "open", module_stream="580-open"),
                 request(ROCKY9, branch="580", module_type="proprietary"))
    assert steps["install"] and steps["install_packages"] == ["cuda-drivers"]
    assert steps["module_stream"] == {"stream": "nvidia-driver:580-dkms", "command": "switch-to",
                                      "enabled": "580-open"}
    assert steps["allow_erasing"]


@pytest.mark.parametrize(("flavour", "wanted", "install"), [
    ("open", "proprietary", "cuda-drivers"), ("proprietary", "open", "nvidia-open")])
def test_el10_switches_flavour_installing_with_allowerasing(flavour, wanted, install):
    """EL 10 has no streams: the guide installs the other flavour with ``dnf install --allowerasing``."""
    steps = plan(running(RHEL10, flavour, packages=kmod(flavour, "3:580.95.05-1.el10")),
                 request(RHEL10, gpu(T4), branch="580", module_type=wanted))
    assert steps["install"] and steps["install_packages"] == [install] and steps["allow_erasing"]
    assert f"dnf installs with --allowerasing: {kmod(flavour).popitem()[0]} is installed, {wanted} modules " \
           "are wanted" in steps["reasons"]


def test_el10_moves_the_branch_installing_with_allowerasing():
    steps = plan(running(RHEL10, "open", "570.172.08", packages=kmod("open", "3:570.172.08-1.el10")),
                 request(RHEL10, gpu(T4), branch="580", module_type="open"))
    assert steps["install"] and steps["version_lock"] == "*nvidia*580*" and steps["allow_erasing"]


def test_a_first_install_or_a_missing_package_of_the_same_flavour_erases_nothing():
    assert not plan(bare(RHEL10), request(RHEL10, gpu(T4), branch="580"))["allow_erasing"]
    assert not plan(dict(bare(), module_stream=None), request(ROCKY9, branch="580"))["allow_erasing"]
    lost = running(RHEL10, "open", packages={"kmod-nvidia-open-dkms": kmod("open")["kmod-nvidia-open-dkms"]})
    steps = plan(lost, request(RHEL10, gpu(T4), branch="580", module_type="open"))
    assert steps["install"] and not steps["allow_erasing"], steps["reasons"]
    converged = running(ROCKY9, "open", module_stream="580-open")
    assert not plan(converged, request(ROCKY9, branch="580"))["allow_erasing"]


def registered(*entries):
    return [{"module": m, "version": v, "kernel": "5.14.0-427.el9.x86_64", "arch": "x86_64",
             "status": "installed", "warning": None} for m, v in entries]


@pytest.mark.parametrize(("module_type", "dkms", "module"), [
    ("open", registered(("nvidia-open", "580.95.05")), "nvidia-open"),
    ("open", registered(("nvidia", "580.95.05"), ("nvidia-open", "580.95.05")), "nvidia-open"),
    ("open", registered(("nvidia", "580.95.05")), "nvidia"),
    ("proprietary", registered(("nvidia", "580.95.05")), "nvidia"),
])
def test_a_new_kernel_builds_the_module_under_the_name_its_package_registered(module_type, dkms, module):
    """kmod-nvidia-open-dkms registers its source with DKMS as nvidia-open (NVIDIA/yum-packaging-dkms-nvidia,
    dkms-open-nvidia.spec: ``%global dkms_name nvidia-open``, post ``dkms add -m nvidia-open``), the
    proprietary kmod-nvidia-latest-dkms as nvidia: after a kernel upgrade the build names that module."""
    stream = "580-open" if module_type == "open" else "580-dkms"
    node = dict(running(ROCKY9, module_type, module_stream=stream), module_on_disk=None, dkms=dkms)
    steps = plan(node, request(ROCKY9, branch="580", module_type=module_type))
    assert steps["dkms_build"] and not steps["install"], steps["reasons"]
    assert (steps["dkms_module"], steps["dkms_version"]) == (module, "580.95.05")


def test_the_proprietary_flavour_never_builds_the_open_modules_registered():
    node = dict(running(ROCKY9, "open", module_stream="580-open"), module_on_disk=None,
                dkms=registered(("nvidia-open", "580.95.05")))
    steps = plan(node, request(ROCKY9, branch="580", module_type="proprietary"))
    assert steps["install"] and not steps["dkms_build"] and steps["dkms_module"] is None
