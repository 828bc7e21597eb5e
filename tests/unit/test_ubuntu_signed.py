"""Ubuntu's signed NVIDIA modules (module_utils/gpunode/driver/ubuntu_signed.py) and the
planner's ubuntu-signed method (module_utils/gpunode/driver/plan.py): names, refusals, switches."""

import pytest
from ansible.module_utils.gpunode.driver import ubuntu_signed as us
from ansible.module_utils.gpunode.driver.driver import (
    DriverError,
    build_request,
    kernels_after,
)
from ansible.module_utils.gpunode.driver.plan import (
    plan,
    signed_fallback,
    signed_request,
)
from ansible.module_utils.gpunode.host.packages import parse_dpkg_query

T4 = "1eb8"
K80 = "102d"


def dpkg(*lines):
    """dpkg packages from "name version [want]" lines."""
    text = "".join(f"{f[0]}\t{f[1]}\t{f[2] if len(f) > 2 else 'install'} ok installed\n"
                   for f in (line.split() for line in lines))
    return parse_dpkg_query(text)


# ------------------------------------------------------------------ kernel releases


@pytest.mark.parametrize(("kernel", "abi", "flavour"), [
    ("6.8.0-60-generic", "6.8.0-60", "generic"),
    ("6.8.0-1024-aws", "6.8.0-1024", "aws"),
    ("6.11.0-26-generic", "6.11.0-26", "generic"),
    ("5.15.0-140-generic", "5.15.0-140", "generic"),
    ("6.17.0-1019-nvidia-64k", "6.17.0-1019", "nvidia-64k"),
    ("6.18.44-fc-v669", None, "fc-v669"),  # not Ubuntu's: no ABI number
])
def test_kernel_release(kernel, abi, flavour):
    release = us.kernel_release(kernel)
    assert (release["abi"], release["flavour"]) == (abi, flavour)


def test_kernel_release_refuses_what_no_package_can_be_named_for():
    with pytest.raises(us.SignedError, match="not <version>-<flavour>"):
        us.kernel_release("vmlinuz")


def test_kernel_order_is_numeric():
    releases = ("6.8.0-60-generic", "6.8.0-100-generic", "6.11.0-26-generic")
    keys = [us.kernel_release(k)["key"] for k in releases]
    assert keys == sorted(keys)


# ------------------------------------------------------------------ names


@pytest.mark.parametrize(("branch", "module_type", "server", "kernel", "exact", "userspace"), [
    ("570", "open", True, "6.8.0-60-generic", "linux-modules-nvidia-570-server-open-6.8.0-60-generic",
     ["nvidia-headless-no-dkms-570-server-open", "nvidia-utils-570-server"]),
    ("570", "proprietary", True, "6.8.0-1024-aws", "linux-modules-nvidia-570-server-6.8.0-1024-aws",
     ["nvidia-headless-no-dkms-570-server", "nvidia-utils-570-server"]),
    ("535", "proprietary", True, "5.15.0-140-generic", "linux-modules-nvidia-535-server-5.15.0-140-generic",
     ["nvidia-headless-no-dkms-535-server", "nvidia-utils-535-server"]),
    ("535", "open", False, "5.15.0-140-generic", "linux-modules-nvidia-535-open-5.15.0-140-generic",
     ["nvidia-headless-no-dkms-535-open", "nvidia-utils-535"]),
    ("550", "open", False, "6.8.0-1024-aws", "linux-modules-nvidia-550-open-6.8.0-1024-aws",
     ["nvidia-headless-no-dkms-550-open", "nvidia-utils-550"]),
    ("580", "open", True, "6.11.0-26-generic", "linux-modules-nvidia-580-server-open-6.11.0-26-generic",
     ["nvidia-headless-no-dkms-580-server-open", "nvidia-utils-580-server"]),
    ("580", "proprietary", False, "6.11.0-26-generic", "linux-modules-nvidia-580-6.11.0-26-generic",
     ["nvidia-headless-no-dkms-580", "nvidia-utils-580"]),
])
def test_package_names(branch, module_type, server, kernel, exact, userspace):  # noqa: PLR0917
    series = us.series(branch, module_type, server)
    assert us.modules_package(series, kernel) == exact
    assert us.userspace_packages(branch, module_type, server) == userspace


@pytest.mark.parametrize(("installed", "flavour", "meta"), [
    ((), "generic", "generic"),
    (("linux-image-generic 6.8.0-60.63",), "generic", "generic"),
    (("linux-image-generic 6.8.0-60.63", "linux-image-generic-hwe-24.04 6.11.0-26.26~24.04.1"), "generic",
     "generic-hwe-24.04"),
    (("linux-image-aws 6.8.0-1024.26",), "aws", "aws"),
    (("linux-image-generic 6.8.0-60.63",), "aws", "aws"),  # another flavour's metapackage does not count
])
def test_the_flavour_follows_the_installed_kernel_metapackage(installed, flavour, meta):
    assert us.kernel_meta_flavour(dpkg(*installed), flavour) == meta
    assert us.flavour_package("570-server-open", meta) == f"linux-modules-nvidia-570-server-open-{meta}"


@pytest.mark.parametrize(("boot", "meta"), [
    ("6.8.0-1015-nvidia", "nvidia-6.8"),  # the 6.8 series' metapackage follows the kernel that boots
    ("5.15.0-1060-nvidia", "nvidia"),  # the plain one follows the 5.15 kernels
])
def test_a_kernel_series_metapackage_decides_when_its_series_boots(boot, meta):
    # jammy: linux-image-nvidia (5.15) left from the install beside linux-image-nvidia-6.8
    # (docs/SECURE_BOOT.md; packages.ubuntu.com/jammy-updates/linux-nvidia-6.8); ubuntu-drivers
    # takes the metapackage of the newest installed kernel (kerneldetection.py)
    installed = dpkg("linux-image-nvidia 5.15.0.1060.60", "linux-image-nvidia-6.8 6.8.0-1015.16~22.04.1")
    assert us.kernel_meta_flavour(installed, "nvidia", boot) == meta
    assert us.kernel_meta_flavour(installed, "nvidia") == "nvidia"  # no kernel said: as before


def test_newer_installed_kernels_boot_next():
    packages = dpkg("linux-image-6.8.0-58-generic 6.8.0-58.60", "linux-image-6.8.0-60-generic 6.8.0-60.63",
                    "linux-image-unsigned-6.11.0-26-generic 6.11.0-26.26", "linux-image-generic 6.8.0-60.63")
    assert us.newer_kernels(packages, "6.8.0-60-generic") == ["6.11.0-26-generic"]


@pytest.mark.parametrize(("running", "installed", "after"), [
    # Ubuntu: the ABI number orders, 6.11 after 6.8 (not as text); another flavour of one ABI is not newer
    ("6.8.0-60-generic",
     ["6.8.0-58-generic", "6.11.0-26-generic", "6.8.0-60-lowlatency", "6.8.0-100-generic"],
     ["6.8.0-100-generic", "6.11.0-26-generic"]),
    ("6.17.0-1019-nvidia", ["6.17.0-1019-nvidia-64k", "6.17.0-1020-nvidia-64k"], ["6.17.0-1020-nvidia-64k"]),
    # Debian
    ("6.1.0-18-amd64", ["6.1.0-30-amd64", "6.1.0-9-amd64", "6.12.0-0-amd64"],
     ["6.1.0-30-amd64", "6.12.0-0-amd64"]),
    # EL: the numbers before the distribution's tag (el9_5's 9 and 5 and x86_64's are not the release's)
    ("5.14.0-503.11.1.el9_5.x86_64", ["5.14.0-503.40.1.el9_5.x86_64", "5.14.0-427.13.1.el9_4.x86_64",
                                      "5.14.0-570.12.1.el9_6.x86_64"],
     ["5.14.0-503.40.1.el9_5.x86_64", "5.14.0-570.12.1.el9_6.x86_64"]),
])
def test_the_kernels_that_boot_after_the_running_one_are_one_rule_everywhere(running, installed, after):
    assert kernels_after(running, installed) == after
    # the signed modules' Ubuntu rule is this one: the kernels dpkg installed, newer than the running one
    packages = dpkg(*(f"linux-image-{release} 1" for release in installed))
    assert us.newer_kernels(packages, running) == after


SHOW = """Package: linux-modules-nvidia-570-server-open-6.8.0-60-generic
Version: 6.8.0-60.63+1
Depends: debconf (>= 0.5) | debconf-2.0, \
linux-image-6.8.0-60-generic | linux-image-unsigned-6.8.0-60-generic, \
linux-signatures-nvidia-6.8.0-60-generic (= 6.8.0-60.63+1), \
linux-objects-nvidia-570-server-open-6.8.0-60-generic (= 6.8.0-60.63+1), \
nvidia-kernel-common-570-server (<= 570.133.20-1), nvidia-kernel-common-570-server (>= 570.133.20)
Description: Linux kernel nvidia modules for version 6.8.0-60

Package: linux-modules-nvidia-570-server-open-6.8.0-62-generic
Version: 6.8.0-62.65+1
Depends: nvidia-kernel-common-570-server (<= 570.158.01-1), nvidia-kernel-common-570-server (>= 570.158.01)
"""


EXACT_60 = "linux-modules-nvidia-570-server-open-6.8.0-60-generic"
EXACT_62 = "linux-modules-nvidia-570-server-open-6.8.0-62-generic"


def test_the_driver_a_modules_package_carries_is_its_kernel_common_dependency():
    assert us.parse_show(SHOW) == {"linux-modules-nvidia-570-server-open-6.8.0-60-generic": "570.133.20",
                                   "linux-modules-nvidia-570-server-open-6.8.0-62-generic": "570.158.01"}


# ------------------------------------------------------------------ the choice

KERNEL = "6.8.0-60-generic"
EXACT = f"linux-modules-nvidia-570-server-open-{KERNEL}"
NAMES = [EXACT, "linux-modules-nvidia-570-server-open-generic",
         "linux-modules-nvidia-570-server-open-6.8.0-58-generic",
         "linux-modules-nvidia-535-server-6.8.0-60-generic", "linux-modules-nvidia-550-open-6.8.0-60-generic",
         "linux-modules-nvidia-550-open-6.8.0-1024-aws"]
ARCHIVE = {"names": NAMES, "drivers": {EXACT: "570.133.20"}}
WANT = {"branch": "570", "version": None, "module_type": "open"}


def test_select_installs_the_running_kernels_modules_at_their_driver_version():
    chosen = us.select(WANT, KERNEL, dpkg("linux-image-generic 6.8.0-60.63"), ARCHIVE)
    assert chosen["install"] == ["nvidia-headless-no-dkms-570-server-open", "nvidia-utils-570-server", EXACT]
    assert chosen["hold"] == chosen["install"]
    # never held: it follows the kernel metapackage
    assert chosen["follow"] == ["linux-modules-nvidia-570-server-open-generic"]
    assert chosen["version"] == "570.133.20" and not chosen["provisional"] and chosen["warnings"] == []


def test_select_takes_the_desktop_series_when_the_archive_has_only_that():
    wanted = {"branch": "550", "version": None, "module_type": "open"}
    chosen = us.select(wanted, "6.8.0-1024-aws", {}, ARCHIVE)
    assert chosen["install"] == ["nvidia-headless-no-dkms-550-open", "nvidia-utils-550",
                                 "linux-modules-nvidia-550-open-6.8.0-1024-aws"]
    assert chosen["follow"] == [] and "linux-modules-nvidia-550-open-aws" in chosen["warnings"][0]


# Retired branches' names, as packages.ubuntu.com shows them (docs/SECURE_BOOT.md, "Transitional
# packages"): each depends on the same name of a newer series.
TRANSITIONAL_META = """Package: linux-modules-nvidia-570-server-open-generic
Version: 6.8.0-90.91+1
Depends: linux-modules-nvidia-580-server-open-generic (= 6.8.0-90.91+1)
Description: Transitional package for linux-modules-nvidia-580-server-open-generic
"""
TRANSITIONAL_USERSPACE = """Package: nvidia-headless-no-dkms-570-server-open
Version: 580.105.08-0ubuntu0.24.04.1
Depends: nvidia-headless-no-dkms-580-server-open
Description: Transitional package for nvidia-headless-no-dkms-580-server-open
"""


def test_what_a_package_depends_on_and_which_series_a_transitional_one_brings():
    depends = us.parse_depends(SHOW + "\n" + TRANSITIONAL_META)
    assert "nvidia-kernel-common-570-server" in depends[EXACT_62] and "debconf" in depends[EXACT_60]
    assert "debconf-2.0" in depends[EXACT_60]  # alternatives count
    meta = "linux-modules-nvidia-570-server-open-generic"
    assert us.moved_to(meta, "570-server-open", depends) == "580-server-open"
    assert us.moved_to(EXACT_60, "570-server-open", depends) is None  # a real build
    # a package's own series is not a move, nor another name's
    other_name = "linux-modules-nvidia-580-open-6.8.0-90-generic"
    assert us.moved_to(meta, "570-server-open", {meta: [meta, other_name]}) is None


def test_a_transitional_flavour_metapackage_is_not_followed():
    archive = dict(ARCHIVE, depends=us.parse_depends(TRANSITIONAL_META))
    chosen = us.select(WANT, KERNEL, dpkg("linux-image-generic 6.8.0-60.63"), archive)
    assert chosen["follow"] == []  # it would bring 580's modules with the next kernel
    assert "transitional package that brings the 580-server-open modules" in chosen["warnings"][0]
    assert EXACT in chosen["install"]


def test_a_retired_branch_whose_userspace_brings_another_is_refused():
    archive = dict(ARCHIVE, depends=us.parse_depends(TRANSITIONAL_USERSPACE))
    with pytest.raises(us.SignedError) as refused:
        us.select(WANT, KERNEL, dpkg("linux-image-generic 6.8.0-60.63"), archive)
    message = str(refused.value)
    assert "branch 570 is retired" in message
    assert "nvidia-headless-no-dkms-570-server-open brings 580-server-open" in message
    assert "Nothing was changed" in message


def test_an_index_that_knows_nothing_yet_gives_a_provisional_choice():
    chosen = us.select(WANT, KERNEL, {}, {"names": [], "drivers": {}})
    assert chosen["provisional"] and chosen["version"] is None and EXACT in chosen["install"]


def test_no_signed_module_for_this_kernel_is_refused_saying_what_the_archive_has():
    with pytest.raises(us.SignedError) as refused:
        us.select(WANT, "6.8.0-59-generic", {}, ARCHIVE, refreshed=True)
    message = str(refused.value)
    assert "no NVIDIA open kernel module of branch 570 signed for kernel 6.8.0-59-generic" in message
    assert "for this kernel it has: no branch" in message
    assert "built for kernels: 6.8.0-60-generic, 6.8.0-58-generic" in message
    assert "Nothing was changed" in message
    expected = (r"for this kernel it has: 535-server, 550-open, 570-server-open; "
                r"branch 580 \(open\) is built for kernels: none")
    with pytest.raises(us.SignedError, match=expected):
        us.select(dict(WANT, branch="580"), KERNEL, {}, ARCHIVE, refreshed=True)


def test_a_version_the_signed_module_does_not_carry_is_refused():
    with pytest.raises(us.SignedError, match=r"carries the NVIDIA driver 570\.133\.20, not nvidia_driver"):
        us.select(dict(WANT, version="570.124.06"), KERNEL, {}, ARCHIVE)


def test_a_newer_kernel_without_signed_modules_in_the_archive_is_refused_before_any_reboot():
    packages = dpkg("linux-image-6.8.0-62-generic 6.8.0-62.65")
    with pytest.raises(us.SignedError, match=r"6\.8\.0-62-generic is installed and boots next"):
        us.select(WANT, KERNEL, packages, ARCHIVE, refreshed=True)
    assert us.select(WANT, KERNEL, packages, ARCHIVE)["provisional"]  # the index may be old: refresh first


def test_a_newer_kernel_with_another_driver_build_is_refused():
    nxt = "linux-modules-nvidia-570-server-open-6.8.0-62-generic"
    archive = {"names": [*NAMES, nxt], "drivers": {EXACT: "570.133.20", nxt: "570.158.01"}}
    with pytest.raises(us.SignedError, match="one userspace cannot serve both"):
        us.select(WANT, KERNEL, dpkg("linux-image-6.8.0-62-generic 6.8.0-62.65"), archive)


# ------------------------------------------------------------------ the planner

UBUNTU = {"distribution": "Ubuntu", "distribution_version": "24.04", "architecture": "x86_64",
          "kernel": KERNEL}
DEBIAN = {"distribution": "Debian", "distribution_version": "12.7", "architecture": "x86_64",
          "kernel": "6.1.0-18-amd64"}
GPU = {"devices": [{"device_id": T4, "kind": "gpu"}], "nvswitch_count": 0,
       "supported_branches": ["580", "570", "550", "535"], "recommended_branch": "580"}
ENABLED = {"nvidia-persistenced": {"load": "loaded", "active": "active", "enabled": "enabled"}}
SIGNED_PACKAGES = ("nvidia-headless-no-dkms-570-server-open 570.133.20-0ubuntu1 hold",
                   "nvidia-utils-570-server 570.133.20-0ubuntu1 hold", f"{EXACT} 6.8.0-60.63+1 hold",
                   "linux-modules-nvidia-570-server-open-generic 6.8.0-60.63+1")
DKMS_PACKAGES = ("nvidia-headless-570-server-open 570.133.20-0ubuntu1 hold",
                 "nvidia-utils-570-server 570.133.20-0ubuntu1 hold",
                 "nvidia-dkms-570-server-open 570.133.20-0ubuntu1", "dkms 3.0.11", "gcc 4:13.2.0", "make 4.3")


def request(os_info=UBUNTU, **params):
    params.setdefault("keyring", "/etc/apt/keyrings/gpunode-nvidia-driver.asc")
    params.setdefault("branch", "570")
    return build_request(params, GPU, dict(os_info))


def state(packages=(), version=None, *, secure_boot=True, kernel=KERNEL):
    return {
        "kernel": kernel, "headers_present": False, "userspace_version": version,
        "module_on_disk": {"version": version, "flavor": "open"} if version else None,
        "loaded": {"modules": ["nvidia_uvm", "nvidia"] if version else [], "version": version,
                   "module_type": "open" if version else None},
        "dkms": [], "packages": dpkg(*packages), "dpkg_interrupted": [], "services": ENABLED,
        "persistenced_unit": True, "blacklist_complete": True, "secure_boot": secure_boot,
        "signing_files_missing": [], "index": None,
    }


def signed(host, req=None, refreshed=False):
    req = signed_fallback(host, req or request())
    assert req["method"] == "ubuntu-signed"
    return signed_request(req, host, ARCHIVE, refreshed)


def test_secure_boot_on_ubuntu_without_a_key_installs_the_signed_modules():
    host = state()
    req = signed(host)
    steps = plan(host, req)
    assert any(r.startswith("Secure Boot is on and no signing key is set") for r in steps["reasons"])
    assert steps["install"] and steps["prerequisites"] == [] and steps["remove"] == []
    assert steps["install_packages"] == ["nvidia-headless-no-dkms-570-server-open=570.133.20-*",
                                         "nvidia-utils-570-server=570.133.20-*", EXACT]
    assert steps["kernel_modules"] == ["linux-modules-nvidia-570-server-open-generic"]
    assert steps["hold"] == ["nvidia-headless-no-dkms-570-server-open", "nvidia-utils-570-server", EXACT]


@pytest.mark.parametrize(("os_info", "params"), [
    (DEBIAN, {"branch": "535"}),
    (UBUNTU, {"package_source": "cuda"}),
])
def test_secure_boot_elsewhere_is_refused_as_before(os_info, params):
    host = state(kernel=os_info["kernel"])
    req = request(os_info, **params)
    assert signed_fallback(host, req) is req
    with pytest.raises(DriverError, match="Secure Boot is on and the NVIDIA kernel module would be unsigned"):
        plan(host, req)


def test_ubuntu_signed_is_refused_off_ubuntu():
    with pytest.raises(DriverError, match="only Ubuntu ships; Debian needs the packages or runfile method"):
        request(DEBIAN, method="ubuntu-signed", branch="535")


def test_a_converged_signed_node_stays_converged_under_the_default_method():
    host = state(SIGNED_PACKAGES, "570.133.20")
    steps = plan(host, signed(host))
    assert steps["converged"] and not steps["disruptive"] and steps["reasons"] == []


def test_switch_dkms_to_signed_is_planned_removing_the_dkms_package_and_reloading():
    host = state(DKMS_PACKAGES, "570.133.20")
    req = signed_request(request(method="ubuntu-signed"), host, ARCHIVE)
    steps = plan(host, req)
    assert steps["install"] and steps["unload"] and steps["disruptive"]
    assert steps["remove"] == ["nvidia-dkms-570-server-open"]
    dkms_side = ("nvidia-dkms", "nvidia-headless-570")
    assert not any(spec.startswith(dkms_side) for spec in steps["install_packages"])
    assert steps["unhold"] == ["nvidia-headless-570-server-open", "nvidia-utils-570-server"]


def test_switch_signed_to_dkms_is_planned_removing_the_signed_modules():
    host = state(SIGNED_PACKAGES, "570.133.20", secure_boot=False)
    req = request()
    assert signed_fallback(host, req) is req
    steps = plan(host, req)
    assert steps["install"] and steps["disruptive"]
    assert steps["install_packages"] == ["nvidia-headless-570-server-open", "nvidia-utils-570-server"]
    assert steps["remove"] == [EXACT, "linux-modules-nvidia-570-server-open-generic"]
    assert f"linux-headers-{KERNEL}" in steps["prerequisites"]


def test_a_kernel_upgrade_installs_the_next_kernels_modules_without_touching_the_driver():
    nxt = "linux-modules-nvidia-570-server-open-6.8.0-62-generic"
    host = state((*SIGNED_PACKAGES, "linux-image-6.8.0-62-generic 6.8.0-62.65"), "570.133.20")
    archive = {"names": [*NAMES, nxt], "drivers": {EXACT: "570.133.20", nxt: "570.133.20"}}
    req = signed_request(signed_fallback(host, request()), host, archive)
    steps = plan(host, req)
    assert steps["kernel_modules"] == [nxt]
    assert not steps["install"] and not steps["unload"] and not steps["disruptive"] and not steps["converged"]
    assert steps["hold"] == []  # per-kernel packages of later kernels are not held


def test_a_provisional_choice_asks_for_an_index_refresh():
    host = state()
    req = signed_request(signed_fallback(host, request()), host, {"names": [], "drivers": {}})
    assert plan(host, req)["refresh_index"]
