# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NVIDIA driver packages per distribution release and package source.

Pure data and naming rules (standard library only), used on the target by
``nvidia_driver_state`` to say which packages install a branch, which are held,
which repository and key they come from. Each table cites its source beside
it; a release newer than a table is served by the rules of its distribution
(the newest known release's data) with a warning that names it.

Domain errors are raised as :class:`PackageError`.
"""

import re

# ----------------------------------------------------------------------------- sources

#: NVIDIA's CUDA network repository (NVIDIA Driver Installation Guide, "Network
#: repository"): https://developer.download.nvidia.com/compute/cuda/repos/<distro>/<arch>/,
#: signed by the key 3bf863cc (cuda-keyring 1.1 enrolls it for every distribution).
CUDA_REPO_URL = "https://developer.download.nvidia.com/compute/cuda/repos/{distro}/{arch}/"
CUDA_KEY_NAME = "3bf863cc.pub"
#: The CUDA repository's path for an architecture (arm64 servers are "sbsa").
CUDA_REPO_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "sbsa", "arm64": "sbsa"}

#: From branch 590 on, the CUDA repository's driver packages carry no branch in
#: their names (cuda-drivers, nvidia-open, libnvidia-compute, nvidia-dkms-open, ...);
#: a branch or a version is chosen by installing nvidia-driver-pinning-<branch> or
#: nvidia-driver-pinning-<version> first. NVIDIA Driver Installation Guide,
#: "Recent updates: version locking packages for Ubuntu / Debian" and "Ubuntu 590
#: and later packages" (table 4: cuda-drivers-580 -> cuda-drivers, nvidia-dkms-580-open
#: -> nvidia-dkms-open, ...), https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/
CUDA_UNVERSIONED_FROM = 590
#: The CUDA repository's open-module metapackage per branch, nvidia-open-<branch>,
#: exists from 560 (the branch that made the open modules the default; NVIDIA,
#: "Transitions fully towards open-source GPU kernel modules", 2024-07).
CUDA_OPEN_METAPACKAGE_FROM = 560
#: The CUDA repository's fabric manager is nvidia-fabricmanager (one name, version
#: chosen) from 580 on, nvidia-fabricmanager-<branch> before: NVIDIA
#: gpu-driver-container, ubuntu22.04/precompiled/nvidia-driver fabricmanager_install()
#: and ubuntu24.04/install.sh (github.com/NVIDIA/gpu-driver-container @06a208c).
CUDA_FABRICMANAGER_UNVERSIONED_FROM = 580

#: Debian's non-free driver packages per release: the branch packaged as
#: "nvidia-driver" (src:nvidia-graphics-drivers), the Tesla branches packaged as
#: nvidia-tesla-<branch>-driver (src:nvidia-graphics-drivers-tesla-<branch>), and
#: whether the release has the open modules (nvidia-open-kernel-dkms, contrib).
#: packages.debian.org, 2026-11: nvidia-kernel-dkms bullseye 535.309.01-0+deb11u1
#: (security), bookworm 535.309.01-0+deb12u1, trixie 550.163.01-2;
#: nvidia-open-kernel-dkms bookworm 535.261.03-1, trixie 550.163.01-2 (none in
#: bullseye); nvidia-tesla-470-driver bullseye and bookworm; nvidia-tesla-535-*
#: bookworm (535.216.03-3~deb12u1) and trixie.
DEBIAN_RELEASES = {
    "11": {"codename": "bullseye", "driver_branch": "535", "tesla_branches": ("470",), "open": False},
    "12": {"codename": "bookworm", "driver_branch": "535", "tesla_branches": ("470", "535"), "open": True},
    "13": {"codename": "trixie", "driver_branch": "550", "tesla_branches": ("535",), "open": True},
}
#: Debian archive components the driver needs (non-free; contrib for the open modules).
DEBIAN_COMPONENTS = "main contrib non-free non-free-firmware"

#: Ubuntu releases gpunode knows. Every one packages the server (LTSB/production)
#: driver series in restricted the same way: nvidia-headless-<branch>-server (and
#: -open), nvidia-utils-<branch>-server, nvidia-dkms-<branch>-server(-open), and
#: nvidia-fabricmanager-<branch> from src:fabric-manager-<branch>; headers for the
#: running kernel are linux-headers-<release>. packages.ubuntu.com, 2026-11: noble
#: and resolute carry nvidia-dkms-580-server(-open) and nvidia-dkms-595-server(-open),
#: resolute also 610; jammy, noble and resolute carry fabric-manager-580.
UBUNTU_RELEASES = {
    "22.04": "jammy",
    "24.04": "noble",
    "26.04": "resolute",
}

#: What DKMS needs to build the module, on every Debian and Ubuntu release.
BUILD_PREREQUISITES = ("dkms", "gcc", "make")

#: The RHEL family (Ansible's ``distribution`` fact, lower case): served by NVIDIA's CUDA
#: repository through dnf (``gpunode.host.packages_rpm``).
EL_DISTRIBUTIONS = ("redhat", "rhel", "rocky", "almalinux", "centos")
#: The EL releases gpunode serves, and how NVIDIA's CUDA repository packages the driver there
#: (NVIDIA Driver Installation Guide, "Kernel Modules", tables "Open GPU kernel module
#: installation" and "Proprietary GPU kernel module installation", and "Advanced Options",
#: "Switching between Driver Module Flavors",
#: https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/kernel-modules.html):
#: EL 8/9 choose a branch and the module flavour with a dnf module stream
#: (``dnf module enable nvidia-driver:<branch>-open``, ``nvidia-driver:<branch>-dkms`` for the
#: proprietary modules; ``open-dkms`` and ``latest-dkms`` follow the newest branch) and install
#: ``nvidia-open`` or ``cuda-drivers``; EL 10 has no module streams: ``nvidia-open`` or
#: ``cuda-drivers``, a branch pinned by ``dnf versionlock add '*nvidia*<branch>*'`` first.
EL_RELEASES = {
    "9": {"streams": True},
    "10": {"streams": False},
}
#: EL releases refused, with why.
EL_REFUSED = {
    "8": "ansible-core 2.17 and later no longer run modules on Python 3.6 (ansible-core 2.17 porting "
         "guide), and EL 8's dnf bindings exist only for its platform Python 3.6",
}
#: The key NVIDIA signs its RPM repositories with (the .repo file's ``gpgkey``): the CUDA
#: repository's RPM distributions (rhel8/9, amzn2023, azl3, fedora42, kylin10) use D42D0685
#: (NVIDIA/cuda-repo-management, README "GPG keys"; NVIDIA Technical Blog, "Updating the CUDA
#: Linux GPG Repository Key", 2022-04).
CUDA_RPM_KEY_NAME = "D42D0685.pub"
#: The dnf module of NVIDIA's driver streams (EL 9).
EL_DRIVER_MODULE = "nvidia-driver"
#: NVIDIA's DKMS packages per module flavour on EL, each conflicting with the other
#: (github.com/NVIDIA/yum-packaging-dkms-nvidia, dkms-open-nvidia.spec: ``Name: kmod-nvidia-open-dkms``,
#: ``Conflicts: kmod-nvidia-latest-dkms``): a switch of flavour erases the installed one, which dnf
#: does only with ``--allowerasing`` (the guide's "Switching between Driver Module Flavors",
#: https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/advanced-options.html).
EL_DKMS_PACKAGES = {"open": "kmod-nvidia-open-dkms", "proprietary": "kmod-nvidia-latest-dkms"}
#: What a DKMS build needs on EL (kernel-devel of the running kernel comes as the headers
#: package; kernel-headers and DKMS, from EPEL, as NVIDIA's guide installs them, "Red Hat
#: Enterprise Linux", "Preparation").
EL_BUILD_PREREQUISITES = ("kernel-headers", "dkms", "gcc", "make")

#: Installed packages that belong to the driver (released from their hold for a
#: change, moved with a pinned version; Ubuntu's signed modules included). Never the
#: container toolkit's libnvidia-container*.
DRIVER_PACKAGE_RE = re.compile(
    r"^(nvidia-(driver|headless|utils|dkms|kernel|compute-utils|tesla|fabricmanager|open|smi|persistenced"
    r"|fabric-manager|kmod-common|modprobe)"
    r"|libnvidia-(compute|ml|tesla|cfg|nscq)|libnvsdm|nvidia-imex|libcuda1|cuda-drivers|linux-modules-nvidia-"
    r"|kmod-nvidia-)"
)


class PackageError(Exception):
    """No package of this source installs what is asked; the message says what to do."""


# ----------------------------------------------------------------------------- releases


def release_of(distribution, version):
    """``(family, key, warning)`` for a distribution from Ansible's facts.

    ``family`` is ``debian`` or ``ubuntu``; ``key`` the release in the tables
    (Debian's major, Ubuntu's ``YY.MM``). A release newer than the table is
    served by the newest known one's data, with a warning naming both.
    """
    name = str(distribution or "").lower()
    version = str(version or "")
    if name in EL_DISTRIBUTIONS:
        return "rhel", el_release(distribution, version), None
    if name == "debian":
        key = version.split(".", maxsplit=1)[0]
        table = DEBIAN_RELEASES
    elif name == "ubuntu":
        key = ".".join(version.split(".")[:2])
        table = UBUNTU_RELEASES
    else:
        raise PackageError(
            f"{distribution} {version}: the packages method supports Debian and Ubuntu (apt) and RHEL, "
            "Rocky and AlmaLinux 9 and 10 (dnf); use nvidia_driver_method: runfile on this distribution")
    if key in table:
        return name, key, None
    newest = max(table, key=_release_number)
    if _release_number(key) < _release_number(min(table, key=_release_number)):
        raise PackageError(f"{distribution} {version} is older than the releases gpunode knows "
                           f"({', '.join(sorted(table, key=_release_number))})")
    return name, newest, (f"{distribution} {version} is newer than gpunode's package table; "
                          f"using the data of {distribution} {newest}")


def family_of(distribution):
    """``rhel`` for a RHEL-family distribution, else None (the apt families need a release too:
    :func:`release_of`)."""
    return "rhel" if str(distribution or "").lower() in EL_DISTRIBUTIONS else None


def el_release(distribution, version):
    """The EL major release (``"9"``, ``"10"``) of a RHEL-family node; refuses EL 8 and releases
    gpunode does not know, naming them."""
    major = str(version or "").split(".", maxsplit=1)[0]
    if major in EL_REFUSED:
        raise PackageError(f"{distribution} {version}: EL {major} is not served: {EL_REFUSED[major]}. "
                           f"gpunode serves EL {' and '.join(EL_RELEASES)}")
    if major not in EL_RELEASES:
        raise PackageError(f"{distribution} {version}: gpunode knows the NVIDIA packages of EL "
                           f"{' and '.join(EL_RELEASES)}, not of EL {major or '(no version)'}; use "
                           "nvidia_driver_method: runfile, or a release gpunode knows")
    return major


def _release_number(key):
    try:
        return tuple(int(part) for part in key.split("."))
    except ValueError:
        return (0,)


def cuda_repo_distro(family, key):
    """The CUDA repository's name for a release: ``ubuntu2404``, ``debian13``."""
    return f"{family}{key.replace('.', '')}"


def cuda_repository(family, key, arch):
    """``(url, key_url)`` of NVIDIA's CUDA repository for a release and architecture
    (``rhel9``/``rhel10`` for the RHEL family, signed by :data:`CUDA_RPM_KEY_NAME`)."""
    url = CUDA_REPO_URL.format(distro=cuda_repo_distro(family, key), arch=CUDA_REPO_ARCH.get(arch, arch))
    return url, url + (CUDA_RPM_KEY_NAME if family == "rhel" else CUDA_KEY_NAME)


def debian_archive_source(codename):
    """The Debian archive line with the components the driver needs."""
    return (f"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian "
            f"{codename} {DEBIAN_COMPONENTS}")


# ----------------------------------------------------------------------------- names

#: apt's kernel metapackages and the flavour each follows: Ubuntu's ``linux-<flavour>``,
#: ``linux-image-<flavour>`` and ``linux-headers-<flavour>`` with their HWE, LTS, series and edge
#: variants (wiki.ubuntu.com/Kernel/Dev/Meta-Pkgs); Debian's ``linux-image-<flavour>`` and
#: ``linux-headers-<flavour>`` (``amd64``, ``cloud-amd64``; the Debian Kernel Handbook, ch. 3).
_KERNEL_META_RE = re.compile(r"^linux(?:-image|-headers)?-(?P<flavour>[a-z][a-z0-9+-]*?)"
                             r"(?:-(?:hwe|lts)-\d+\.\d+|-\d+\.\d+)?(?:-edge)?$")


def kernel_hold_targets(release, packages, package_manager="apt"):
    """The installed packages that hold the kernel where it is (nvidia_driver_kernel_hold): dnf,
    ``kernel*``; apt, the metapackages of the running kernel's flavour, the longest ending of
    ``release`` (``6.8.0-60-generic``, ``6.12.38+deb13-cloud-amd64``) that one names."""
    names = [name for name, entry in (packages or {}).items()
             if entry["status"] not in ("not-installed", "config-files")]
    if package_manager == "dnf":
        return sorted(name for name in names if name.startswith("kernel"))
    metas = {}
    for name in names:
        match = _KERNEL_META_RE.match(name)
        if match:
            metas.setdefault(match.group("flavour"), []).append(name)
    parts = (release or "").split("-")
    flavours = ["-".join(parts[i:]) for i in range(1, len(parts)) if parts[i][:1].isalpha()]
    return sorted(next((metas[f] for f in flavours if f in metas), []))


def driver_packages(family, key, source, branch, *, module_type, version=None):
    """The packages that install a driver branch: ``{"install", "pin", "hold"}``.

    ``install``: top-level packages, in order; ``pin``: the CUDA repository's
    pinning package (590 and later) or None; ``hold``: what the role holds.
    """
    major = int(branch)
    if family == "rhel":
        return el_driver_packages(key, source, branch, module_type=module_type, version=version)
    if source == "cuda":
        if major >= CUDA_UNVERSIONED_FROM:
            pin = f"nvidia-driver-pinning-{version or branch}"
            install = ["nvidia-open" if module_type == "open" else "cuda-drivers"]
            return {"install": install, "pin": pin, "hold": [pin, *install]}
        if module_type == "open":
            if major < CUDA_OPEN_METAPACKAGE_FROM:
                raise PackageError(
                    f"NVIDIA's CUDA repository has no open-module metapackage for branch {branch} "
                    f"(nvidia-open-<branch> starts at {CUDA_OPEN_METAPACKAGE_FROM}); use branch "
                    f"{CUDA_OPEN_METAPACKAGE_FROM} or newer, the distribution's packages or the runfile")
            install = [f"nvidia-open-{branch}"]
        else:
            install = [f"cuda-drivers-{branch}"]
        return {"install": install, "pin": None, "hold": list(install)}
    if family == "ubuntu":
        headless = f"nvidia-headless-{branch}-server" + ("-open" if module_type == "open" else "")
        install = [headless, f"nvidia-utils-{branch}-server"]
        return {"install": install, "pin": None, "hold": list(install)}
    release = DEBIAN_RELEASES[key]
    if branch == release["driver_branch"]:
        install = ["nvidia-driver"] + (["nvidia-open-kernel-dkms"] if module_type == "open" else [])
    elif branch in release["tesla_branches"]:
        install = [f"nvidia-tesla-{branch}-driver"]
        if module_type == "open":
            install.append(f"nvidia-tesla-{branch}-open-kernel-dkms")
    else:
        others = [b for b in release["tesla_branches"] if b != release["driver_branch"]]
        packaged = ", ".join([release["driver_branch"], *others])
        raise PackageError(
            f"Debian {key} ({release['codename']}) packages the driver branches {packaged}, not {branch}; "
            "set nvidia_driver_package_source: cuda (NVIDIA's repository) or a packaged branch")
    if module_type == "open" and not release["open"]:
        raise PackageError(f"Debian {key} ({release['codename']}) does not package the open kernel modules; "
                           "set nvidia_driver_package_source: cuda or use the runfile")
    return {"install": install, "pin": None, "hold": list(install)}


def el_driver_packages(key, source, branch, *, module_type, version=None):
    """The packages that install a driver branch on EL (NVIDIA's CUDA repository): ``install``
    (``nvidia-open`` for the open modules, ``cuda-drivers`` for the proprietary ones, the same
    names on EL 9 and 10), ``stream`` (EL 9: the dnf module stream that chooses the branch and
    flavour, ``nvidia-driver:<branch>-open`` or ``nvidia-driver:<branch>-dkms``), ``lock``
    (EL 10: the ``dnf versionlock add`` spec that pins the branch, or the version, before the
    install), ``pin`` (None: no pinning package on EL) and ``hold``."""
    if source != "cuda":
        raise PackageError(
            f"EL {key}: the distribution packages no NVIDIA driver; set nvidia_driver_package_source: cuda "
            "(NVIDIA's CUDA repository, or a mirror of it in nvidia_driver_rpm_repository)")
    install = ["nvidia-open" if module_type == "open" else "cuda-drivers"]
    packages = {"install": install, "pin": None, "hold": list(install), "stream": None, "lock": None}
    if EL_RELEASES[key]["streams"]:
        flavour = "open" if module_type == "open" else "dkms"
        packages["stream"] = f"{EL_DRIVER_MODULE}:{branch}-{flavour}"
    else:
        packages["lock"] = f"*nvidia*{version or branch}*"
    return packages


def el_branch_lock(branch):
    """The ``dnf versionlock add`` spec that locks every installed package of a branch at its version
    (the plugin locks the installed packages a spec names, :func:`packages_rpm.lock_matches`): the
    metapackage's whole set, ``nvidia-settings`` and the like too. One left unlocked has updates that
    need newer locked ones, and ``dnf upgrade`` (``best=True``, as EL sets it) then fails outright."""
    return f"*nvidia*-{branch}.*"


#: The fabric manager's RPM in NVIDIA's CUDA repository for EL: nvidia-fabric-manager (NVIDIA's
#: spec names it so and provides nvidia-fabricmanager and nvidia-fabricmanager-<branch>:
#: github.com/NVIDIA/yum-packaging-fabric-manager; installed on EL 8/9 by the streams' ``fm``
#: profile, ``dnf module install nvidia-driver:<stream>/fm``).
EL_FABRICMANAGER = "nvidia-fabric-manager"


def fabricmanager_package(family, source, branch):
    """The fabric manager's package for a branch and source."""
    if family == "rhel":
        return EL_FABRICMANAGER
    if source == "cuda":
        return "nvidia-fabricmanager" if int(branch) >= CUDA_FABRICMANAGER_UNVERSIONED_FROM \
            else f"nvidia-fabricmanager-{branch}"
    if family == "debian":
        raise PackageError("Debian does not package the NVIDIA fabric manager (NVSwitch systems); set "
                           "nvidia_driver_package_source: cuda, or nvidia_driver_fabricmanager: never")
    return f"nvidia-fabricmanager-{branch}"


#: The fabric's packages at exactly the driver's version besides the fabric manager: NSCQ, NVSDM and
#: IMEX have one name from 580 in NVIDIA's CUDA repository (apt and dnf: ``libnvidia-nscq``,
#: ``libnvsdm``, ``nvidia-imex``) and ``<name>-<branch>`` before it and in Ubuntu's archive
#: (NVIDIA gpu-driver-container @06a208c, ubuntu24.04/install.sh and rhel9/install.sh ``nscq_install``,
#: ``nvsdm_install``, ``imex_install``; Ubuntu's ``nvidia-imex-580``, ``libnvidia-nscq-<branch>``).
def fabric_package(base, family, source, branch):
    """The name of the fabric's package ``base`` for a branch and source (:func:`fabricmanager_package`
    for the fabric manager); Debian's own archive has none of them."""
    if base == "nvidia-fabricmanager":
        return fabricmanager_package(family, source, branch)
    if family == "debian" and source != "cuda":
        raise PackageError(f"Debian does not package {base} (NVLink fabrics); set "
                           "nvidia_driver_package_source: cuda")
    if (source == "cuda" or family == "rhel") and int(branch) >= CUDA_FABRICMANAGER_UNVERSIONED_FROM:
        return base
    return f"{base}-{branch}"


def headers_package(kernel, family=None):
    """The kernel headers package for a running kernel: ``linux-headers-<kernel>`` (Debian and
    Ubuntu name them alike), ``kernel-devel-<kernel>`` on EL (``uname -r`` is the kernel's
    version-release.arch, so this is the package's NEVRA: NVIDIA's guide installs
    ``kernel-devel-$(uname -r)``)."""
    return f"kernel-devel-{kernel}" if family == "rhel" else f"linux-headers-{kernel}"


def build_prerequisites(family=None):
    """What a DKMS build needs besides the headers package, per family."""
    return EL_BUILD_PREREQUISITES if family == "rhel" else BUILD_PREREQUISITES


def version_spec(name, version, manager="apt"):
    """A request for ``name`` at a driver version: apt's ``name=<version>-*`` (any packaging
    revision), dnf's ``name-<version>`` (any epoch and release)."""
    if not version:
        return name
    return f"{name}-{version}" if manager == "dnf" else f"{name}={version}-*"


def upstream_version(package_version):
    """The upstream part of a package version: ``580.95.05`` of dpkg's ``1:580.95.05-0ubuntu1`` and of
    rpm's ``3:580.95.05-1.el9`` (no epoch, no packaging release)."""
    return package_version.split(":")[-1].split("-")[0] if package_version else package_version


def is_driver_package(name):
    return bool(DRIVER_PACKAGE_RE.match(name))
