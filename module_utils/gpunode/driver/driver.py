# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NVIDIA driver logic: versions, what a host has, what to do about it.

Pure Python (standard library only) so it runs on target hosts and is tested
without Ansible. The modules ``nvidia_driver_state`` and
``nvidia_kernel_modules`` read the host and call into this file; every
decision the role takes (repair dpkg, install, rebuild for a new kernel, hold,
blacklist nouveau, unload, load, start the daemons, reboot) is computed here
from plain data by :func:`plan` (``driver/plan.py``), and what the role publishes by
:func:`driver_facts` (``driver/facts.py``; the change lines of site.yml's summary are
told on the controller, ``filter_plugins/nvidia_driver.py``).

Domain errors are raised as :class:`DriverError` and turned into
``fail_json`` by the modules.
"""

import re

from ansible.module_utils.gpunode.driver import packages as nvidia_packages
from ansible.module_utils.gpunode.driver.gpu import ended_branch, is_turing_or_newer, needs_open_module
from ansible.module_utils.gpunode.host.packages import AptSourceError, deb822_text

#: Kernel modules of the driver, in the order they must be unloaded.
NVIDIA_MODULES = ("nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia_peermem", "nvidia")
#: The modules a compute node loads (nvidia_uvm pulls nvidia in).
LOAD_MODULES = ("nvidia_uvm", "nvidia")
#: What a module needs loaded before it, said when it will not load (notes/fabric.md, section 3).
MODULE_NEEDS = {"nvidia_peermem": "it needs ib_core (the InfiniBand stack, inbox or DOCA-OFED) loaded "
                                  "first; GPUDirect RDMA is off until it loads"}

#: The names NVIDIA's packages register their kernel module source under with DKMS: ``nvidia``
#: (Debian and Ubuntu, both flavours; EL's proprietary kmod-nvidia-latest-dkms) and ``nvidia-open``
#: (EL's open kmod-nvidia-open-dkms: github.com/NVIDIA/yum-packaging-dkms-nvidia, dkms-open-nvidia.spec,
#: ``%global dkms_name nvidia-open``, post ``dkms add -m nvidia-open``). The open flavour may be
#: either, the proprietary one only ``nvidia``; a request takes the first that DKMS has.
DKMS_MODULES = {"open": ("nvidia-open", "nvidia"), "proprietary": ("nvidia",)}
#: First branch whose open kernel modules are the installer's default.
OPEN_DEFAULT_FROM = 560
#: First branch that ships the open kernel modules at all.
OPEN_AVAILABLE_FROM = 515
#: First branch whose installer takes ``--kernel-module-type``; older
#: installers build the open modules with ``--kernel-module-build-directory``.
MODULE_TYPE_FLAG_FROM = 560

#: EFI global variable GUID of the ``SecureBoot`` variable.
SECURE_BOOT_EFIVAR = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
#: What a nouveau blacklist must say (the role's template writes both lines).
NOUVEAU_BLACKLIST_LINES = ("blacklist nouveau", "options nouveau modeset=0")
#: The daemons the role runs, per what it wants.
PERSISTENCED = "nvidia-persistenced"
FABRICMANAGER = "nvidia-fabricmanager"
#: Methods that install the driver from packages (held, switched between).
PACKAGE_METHODS = ("packages", "ubuntu-signed", "el-signed")
#: Where NVIDIA serves the data center driver's installers.
# the first lines of the deb822 source the role writes (/etc/apt/sources.list.d/gpunode-nvidia-driver.sources)
SOURCES_HEADER = "# Written by gpunode (nvidia_driver): the source of the NVIDIA driver packages.\n"
RUNFILE_URL = "https://us.download.nvidia.com/tesla/{version}/NVIDIA-Linux-{arch}-{version}.run"
#: The dnf repository the role adds on EL (/etc/yum.repos.d/gpunode-nvidia-driver.repo).
RPM_REPOSITORY_NAME = "gpunode-nvidia-driver"

VERSION_RE = re.compile(r"^\d+(?:\.\d+){0,2}$")
_SHA256_RE = re.compile(r"^(?:sha256:)?([0-9a-fA-F]{64})$")


class DriverError(Exception):
    """A request that cannot be satisfied; the message says why and what to do."""


# --------------------------------------------------------------------------- versions


def parse_version(text):
    """``"535.129.03"`` -> ``(535, 129, 3)``; a branch ``"535"`` -> ``(535,)``."""
    value = str(text).strip()
    if not VERSION_RE.match(value):
        raise DriverError(f"{text!r} is not an NVIDIA driver version (expected e.g. 535 or 535.129.03)")
    return tuple(int(part) for part in value.split("."))


def branch_of(version):
    """The branch (major) of a version, as a string: ``"535.129.03"`` -> ``"535"``."""
    return str(parse_version(version)[0])


def version_matches(installed, wanted):
    """Whether ``installed`` satisfies ``wanted`` (a branch or a full version).

    A branch matches every version of that branch; a full version only itself.
    ``None`` (nothing installed, or nothing wanted yet) never matches.
    """
    if not installed or not wanted:
        return False
    try:
        have = parse_version(installed)
    except DriverError:
        return False
    want = parse_version(wanted)
    return have[: len(want)] == want


# --------------------------------------------------------------------------- choices


def resolve_wanted(version=None, branch=None, supported_branches=None, recommended_branch=None,
                   check_gpus=True):
    """Decide the wanted branch and version (the version may stay None).

    ``version`` or ``branch`` set by the user are checked against
    ``supported_branches`` (the branches that drive every GPU on the host, from
    the ``nvidia_gpu`` facts); otherwise the facts' recommended branch is used.
    """
    supported = [str(b) for b in (supported_branches or [])]
    if version:
        parse_version(version)
        if len(parse_version(version)) < 2:
            raise DriverError(f"nvidia_driver_version {version!r} must be a full version such as 535.129.03")
        if branch and str(branch) != branch_of(version):
            raise DriverError(
                f"nvidia_driver_version {version} is not on nvidia_driver_branch {branch}; set one of them"
            )
        branch = branch_of(version)
    elif branch:
        if len(parse_version(branch)) != 1:
            raise DriverError(f"nvidia_driver_branch {branch!r} must be a major version such as 535")
        branch = str(branch)
    elif recommended_branch:
        branch = str(recommended_branch)
    else:
        raise DriverError(
            "no driver branch drives every GPU on this host; set nvidia_driver_branch "
            "or nvidia_driver_version, or split the GPUs across hosts"
        )
    if check_gpus and not branch_supported(branch, supported):
        listed = ", ".join(supported) if supported else "none"
        raise DriverError(
            f"driver branch {branch} cannot drive every GPU on this host; branches that can: {listed} "
            "(nvidia_driver_check_branch: false skips this check)"
        )
    return {"branch": branch, "version": version or None}


def branch_supported(branch, supported_branches):
    """A branch drives the host when it is listed, or lies between listed ones.

    Support for a GPU is a contiguous range of branches, so a branch missing
    from the table (a short-lived feature branch) but between two branches
    that drive the host drives it too. A branch newer than every listed one
    is refused: the table says the GPUs' support ended before it.
    """
    listed = sorted(int(b) for b in supported_branches)
    if not listed:
        return False
    return listed[0] <= int(branch) <= listed[-1]


def kernel_module_type(requested, branch, gpu_device_ids):
    """``open`` or ``proprietary`` for these GPUs on this branch.

    ``auto`` follows the installer: open from 560 when every GPU is Turing or
    newer, proprietary otherwise. An explicit choice the GPUs cannot take is
    refused with the reason.
    """
    major = int(parse_version(branch)[0])
    ids = [str(i).lower() for i in gpu_device_ids]
    pre_turing = [i for i in ids if not is_turing_or_newer(i)]
    open_only = [i for i in ids if needs_open_module(i)]
    if requested == "auto":
        if open_only:
            requested = "open"
        elif major >= OPEN_DEFAULT_FROM and not pre_turing:
            return "open"
        else:
            return "proprietary"
    if requested == "open":
        if pre_turing:
            raise DriverError(
                "the open kernel module needs Turing or newer GPUs; device(s) "
                f"{', '.join(pre_turing)} need nvidia_driver_module_type: proprietary"
            )
        if major < OPEN_AVAILABLE_FROM:
            raise DriverError(f"branch {major} has no open kernel module (first in {OPEN_AVAILABLE_FROM})")
        return "open"
    if requested == "proprietary":
        if open_only:
            raise DriverError(
                f"device(s) {', '.join(open_only)} (Grace Hopper, Blackwell) are driven only by the open "
                "kernel modules (NVIDIA supports no proprietary module on them); set "
                "nvidia_driver_module_type: open or auto"
            )
        return "proprietary"
    raise DriverError(f"unknown kernel module type {requested!r} (auto, open, proprietary)")


def runfile_flags(version, module_type, *, dkms=True, signing_key=None, signing_cert=None, extra=()):
    """Options for a silent, headless ``NVIDIA-Linux-*.run`` install."""
    flags = ["--silent", "--no-x-check", "--no-nouveau-check", "--no-opengl-files"]
    if dkms:
        flags.append("--dkms")
    major = parse_version(version)[0]
    if major >= MODULE_TYPE_FLAG_FROM:
        flags.append(f"--kernel-module-type={module_type}")
    elif module_type == "open":
        flags.append("--kernel-module-build-directory=kernel-open")
    if bool(signing_key) != bool(signing_cert):
        raise DriverError("module signing needs both a secret key and a public key (certificate)")
    if signing_key:
        flags += [f"--module-signing-secret-key={signing_key}", f"--module-signing-public-key={signing_cert}"]
    flags.extend(extra)
    return flags


def runfile_checksum(text):
    """The sha256 of ``"sha256:<hex>"`` or ``"<hex>"``, lower case; refuses anything else."""
    match = _SHA256_RE.match(str(text or "").strip())
    if not match:
        raise DriverError("nvidia_driver_runfile_checksum must be the installer's sha256 "
                          "(\"sha256:<64 hex digits>\" or the 64 hex digits); the runfile method needs it")
    return match.group(1).lower()


# --------------------------------------------------------------------------- request


def fabric_kind(gpu):
    """The facts' NVLink fabric (``gpunode.driver.fabric``); older facts: ``nvswitch`` with PCI NVSwitches."""
    return gpu.get("fabric") or ("nvswitch" if gpu.get("nvswitch_count", 0) > 0 else "none")


def kernel_key(release):
    """A kernel release as numbers, for ordering: those before its first letter, where the flavour or
    the distribution's tag starts (``6.1.0-18-amd64`` < ``6.1.0-30-amd64`` < ``6.11.0-26-generic``;
    ``5.14.0-503.11.1.el9_5.x86_64``: 5, 14, 0, 503, 11, 1)."""
    return [int(part) for part in re.findall(r"\d+", re.match(r"[^A-Za-z]*", release).group())]


def kernels_after(running, releases):
    """The ``releases`` newer than the ``running`` kernel, oldest first: the boot loader starts the
    newest next (one of the same version and another flavour is not newer)."""
    return sorted((r for r in releases if kernel_key(r) > kernel_key(running)), key=kernel_key)


def image_build_params(params):
    """The parameters of an image build (docs/ROLES.md, "Image bake mode"): no GPU chooses or checks the
    branch, so one is asked for; a user's signing key never goes into an image. Raises DriverError."""
    if not (params.get("branch") or params.get("version")):
        raise DriverError("image build: set nvidia_driver_branch or nvidia_driver_version (no GPU to choose "
                          "a branch from while the image is built); nothing was changed")
    if params.get("signing_key"):
        raise DriverError("image build: a user's module signing key (nvidia_driver_signing_key) never goes "
                          "into an image; under Secure Boot bake the distribution's signed modules "
                          "(nvidia_driver_method: ubuntu-signed or el-signed); nothing was changed")
    return dict(params, check_branch=False)


def wants_fabricmanager(choice, gpu):
    """``nvidia_driver_fabricmanager``: ``always``, ``never``, or ``auto`` (NVSwitch and NVLink5 systems)."""
    return choice == "always" or (choice == "auto" and fabric_kind(gpu) in ("nvswitch", "nvlink5"))


def build_request(params, gpu, os_info):
    """What is wanted on this host, decided and checked before anything is read.

    ``params``: the role's settings (the module's arguments); ``gpu``: the
    ``nvidia_gpu`` facts; ``os_info``: ``distribution``, ``distribution_version``,
    ``architecture``, ``kernel``. Raises DriverError on a request that cannot be met.
    """
    gpu_ids = [d["device_id"] for d in gpu.get("devices") or [] if d.get("kind") == "gpu"]
    method = params.get("method") or "packages"
    if method == "preinstalled":
        return _preinstalled_request(params, gpu, os_info)
    chosen = resolve_wanted(
        version=params.get("version"),
        branch=params.get("branch"),
        supported_branches=gpu.get("supported_branches"),
        recommended_branch=gpu.get("recommended_branch"),
        check_gpus=params.get("check_branch", True),
    )
    branch, version = chosen["branch"], chosen["version"]
    module_type = kernel_module_type(params.get("module_type") or "auto", branch, gpu_ids)
    family = nvidia_packages.family_of(os_info["distribution"])
    request = {
        "method": method,
        "branch": branch,
        "version": version,
        "wanted": version or branch,
        "module_type": module_type,
        "hold": bool(params.get("hold", True)) and method in PACKAGE_METHODS,
        "kernel_hold": bool(params.get("kernel_hold")),
        "persistence": bool(params.get("persistence", True)),
        "fabricmanager": wants_fabricmanager(params.get("fabricmanager") or "auto", gpu),
        "blacklist_nouveau": bool(params.get("blacklist_nouveau", True)),
        "install_prerequisites": bool(params.get("install_prerequisites", True)),
        "signing": bool(params.get("signing_key")),
        "headers_package": nvidia_packages.headers_package(os_info["kernel"], family),
        "build_prerequisites": list(nvidia_packages.build_prerequisites(family)),
        "package_manager": "dnf" if family == "rhel" else "apt",
        "warnings": [w for w in [ended_branch(branch)] if w],  # chosen or pinned, past NVIDIA's support
        "packages": None,
        "fabricmanager_package": None,
        "fabric": None,
        "repository": None,
        "runfile": None,
        "signed_fallback": False,
        "skipped": [],
        "image_build": bool(params.get("image_build")),
    }
    if bool(params.get("signing_key")) != bool(params.get("signing_cert")):
        raise DriverError("module signing needs both nvidia_driver_signing_key and "
                          "nvidia_driver_signing_cert")
    if method in PACKAGE_METHODS or request["fabricmanager"]:
        _package_request(request, params, os_info)
    if method == "runfile":
        request["runfile"] = _runfile_request(params, version, module_type, os_info["architecture"])
    return request


def _runfile_request(params, version, module_type, arch):
    """The installer of the runfile method: ``url``, ``checksum``, ``name``, ``flags``."""
    if not version:
        raise DriverError("nvidia_driver_method: runfile needs nvidia_driver_version (a full version "
                          "such as 580.95.05): an installer is one version")
    return {
        "url": params.get("runfile_url") or RUNFILE_URL.format(version=version, arch=arch),
        "checksum": "sha256:" + runfile_checksum(params.get("runfile_checksum")),
        "name": f"NVIDIA-Linux-{arch}-{version}.run",
        "flags": runfile_flags(version, module_type, signing_key=params.get("signing_key"),
                               signing_cert=params.get("signing_cert"),
                               extra=params.get("runfile_extra_flags") or ()),
    }


def _preinstalled_request(params, gpu, os_info):
    """The request of ``preinstalled`` before the host is read: what the inventory asks of the
    loaded driver (``asked_*``); ``gpunode.driver.preinstalled.adopt`` completes it."""
    version, branch = params.get("version") or None, params.get("branch") or None
    if version and len(parse_version(version)) < 2:
        raise DriverError(f"nvidia_driver_version {version!r} must be a full version such as 580.159.04")
    if branch and len(parse_version(branch)) != 1:
        raise DriverError(f"nvidia_driver_branch {branch!r} must be a major version such as 580")
    return {
        "method": "preinstalled", "branch": branch or (branch_of(version) if version else None),
        "version": version, "wanted": version or branch, "module_type": None,
        "asked_version": version, "asked_branch": branch, "asked_module_type": params.get("module_type"),
        "check_branch": params.get("check_branch", True),
        "hold": bool(params.get("hold", True)), "persistence": bool(params.get("persistence", True)),
        "kernel_hold": bool(params.get("kernel_hold")),
        "fabricmanager": wants_fabricmanager(params.get("fabricmanager") or "auto", gpu),
        "blacklist_nouveau": False, "install_prerequisites": False, "signing": False, "headers_package": None,
        "package_manager": "dnf" if nvidia_packages.family_of(os_info["distribution"]) == "rhel" else "apt",
        "warnings": [], "packages": None, "fabricmanager_package": None, "repository": None, "runfile": None,
        "signed_fallback": False, "skipped": [],
    }


def _package_request(request, params, os_info):
    """Fill the request's package names, fabric manager package and repository."""
    method, branch = request["method"], request["branch"]
    if method == "ubuntu-signed" and str(os_info["distribution"]).lower() != "ubuntu":
        raise DriverError(f"nvidia_driver_method: ubuntu-signed installs Canonical's signed modules, "
                          f"which only Ubuntu ships; {os_info['distribution']} needs the packages or "
                          "runfile method")
    if method == "el-signed" and request["package_manager"] != "dnf":
        raise DriverError(f"nvidia_driver_method: el-signed installs the signed modules of the RHEL family "
                          f"(RHEL 10.1 and later, AlmaLinux 9 and 10); {os_info['distribution']} needs the "
                          "packages, ubuntu-signed or runfile method")
    try:
        family, key, warning = nvidia_packages.release_of(os_info["distribution"],
                                                          os_info["distribution_version"])
        if warning:
            request["warnings"].append(warning)
        source = params.get("package_source") or "distro"
        if request["fabricmanager"]:
            request["fabricmanager_package"] = nvidia_packages.fabricmanager_package(family, source, branch)
        if method in ("packages", "el-signed"):  # el-signed: its userspace from NVIDIA's repository
            request["packages"] = nvidia_packages.driver_packages(
                family, key, source, branch, module_type=request["module_type"], version=request["version"])
            request["repository"] = _repository(params, family, key, source, os_info["architecture"])
            # under Secure Boot without a key, the distribution's signed modules (plan.signed_fallback)
            request["signed_fallback"] = method == "packages" and (
                family == "rhel" or (family, source) == ("ubuntu", "distro"))
        elif method == "ubuntu-signed":
            request["repository"] = _repository(params, family, key, "distro", os_info["architecture"])
    except nvidia_packages.PackageError as exc:
        raise DriverError(str(exc)) from exc


def _repository(params, family, key, source, arch):
    """``{"line", "key_url", "sources_text"}`` of the apt source the role adds (line None: none to add).

    ``sources_text``: the line as the deb822 .sources file the role writes. On EL:
    :func:`_rpm_repository`.
    """
    if family == "rhel":
        return _rpm_repository(params, key, arch)
    line, key_url = params.get("apt_repository") or None, params.get("apt_key_url") or None
    if source == "cuda":
        url, cuda_key = nvidia_packages.cuda_repository(family, key, arch)
        key_url = key_url or cuda_key
        line = line or f"deb [signed-by={params['keyring']}] {url} /"
    elif family == "debian" and not line:
        line = nvidia_packages.debian_archive_source(nvidia_packages.DEBIAN_RELEASES[key]["codename"])
    try:
        sources_text = deb822_text(line, SOURCES_HEADER) if line else None
    except AptSourceError as exc:
        raise DriverError(f"nvidia_driver_apt_repository: {exc}") from exc
    return {"line": line, "key_url": key_url, "sources_text": sources_text}


def _rpm_repository(params, key, arch):
    """``{"name", "baseurl", "key_url", "line", "sources_text"}`` of the dnf repository the role adds on
    EL (``ansible.builtin.yum_repository``, always ``gpgcheck``: NVIDIA's ``cuda-rhel<N>.repo`` sets
    ``gpgcheck=1`` and ``gpgkey`` to the repository's key); ``nvidia_driver_rpm_repository`` and
    ``nvidia_driver_rpm_key_url`` replace them with a mirror's (its key: the key file under the mirror
    unless given). ``line`` and ``sources_text`` are apt's: None."""
    url, cuda_key = nvidia_packages.cuda_repository("rhel", key, arch)
    mirror = params.get("rpm_repository") or None
    baseurl = mirror or url
    mirror_key = baseurl.rstrip("/") + "/" + nvidia_packages.CUDA_RPM_KEY_NAME
    key_url = params.get("rpm_key_url") or (mirror_key if mirror else cuda_key)
    if not baseurl.startswith(("https://", "http://", "file://")):
        raise DriverError(f"nvidia_driver_rpm_repository: {baseurl!r} is not a URL (https://, http:// or "
                          "file://): dnf's baseurl")
    return {"name": RPM_REPOSITORY_NAME, "baseurl": baseurl, "key_url": key_url, "line": None,
            "sources_text": None}
