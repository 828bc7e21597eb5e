# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NVIDIA driver logic: versions, what a host has, what to do about it.

Pure Python (standard library only) so it runs on target hosts and is tested
without Ansible. The modules ``nvidia_driver_state`` and
``nvidia_kernel_modules`` read the host and call into this file; every
decision the role takes (repair dpkg, install, rebuild for a new kernel, hold,
blacklist nouveau, unload, load, start the daemons, reboot) is computed here
from plain data by :func:`plan`, and what the role publishes by
:func:`driver_facts` and :func:`change_lines`.

Domain errors are raised as :class:`DriverError` and turned into
``fail_json`` by the modules.
"""

import re

from ansible.module_utils.gpunode.driver import packages as nvidia_packages
from ansible.module_utils.gpunode.driver import ubuntu_signed
from ansible.module_utils.gpunode.driver.gpu import is_turing_or_newer, needs_open_module
from ansible.module_utils.gpunode.host.packages import AptSourceError, deb822_text, installed, version_known

#: Kernel modules of the driver, in the order they must be unloaded.
NVIDIA_MODULES = ("nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia_peermem", "nvidia")
#: The modules a compute node loads (nvidia_uvm pulls nvidia in).
LOAD_MODULES = ("nvidia_uvm", "nvidia")

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
#: Methods that install the driver from apt packages (held, switched between).
PACKAGE_METHODS = ("packages", "ubuntu-signed")
#: Where NVIDIA serves the data center driver's installers.
# the first lines of the deb822 source the role writes (/etc/apt/sources.list.d/gpunode-nvidia-driver.sources)
SOURCES_HEADER = "# Written by gpunode (nvidia_driver): the source of the NVIDIA driver packages.\n"
RUNFILE_URL = "https://us.download.nvidia.com/tesla/{version}/NVIDIA-Linux-{arch}-{version}.run"

_VERSION_RE = re.compile(r"^\d+(?:\.\d+){0,2}$")
#: Ubuntu's DKMS packages and the metapackages that depend on them (not -no-dkms).
_DKMS_SIDE_RE = re.compile(r"^nvidia-(dkms|headless|driver)-\d")
_SHA256_RE = re.compile(r"^(?:sha256:)?([0-9a-fA-F]{64})$")
_DKMS_RE = re.compile(
    r"^(?P<module>[^,/\s]+)(?:/|,\s*)(?P<version>[^,:\s]+)"
    r"(?:,\s*(?P<kernel>[^,\s]+),\s*(?P<arch>[^:\s]+))?:\s*(?P<status>[a-z-]+)(?P<rest>.*)$"
)


class DriverError(Exception):
    """A request that cannot be satisfied; the message says why and what to do."""


# --------------------------------------------------------------------------- versions


def parse_version(text):
    """``"535.129.03"`` -> ``(535, 129, 3)``; a branch ``"535"`` -> ``(535,)``."""
    value = str(text).strip()
    if not _VERSION_RE.match(value):
        raise DriverError(f"{text!r} is not an NVIDIA driver version (expected e.g. 535 or 535.129.03)")
    return tuple(int(part) for part in value.split("."))


def branch_of(version):
    """The branch (major) of a version, as a string: ``"535.129.03"`` -> ``"535"``."""
    return str(parse_version(version)[0])


def version_matches(installed, wanted):
    """Whether ``installed`` satisfies ``wanted`` (a branch or a full version).

    A branch matches every version of that branch; a full version only itself.
    ``None`` (nothing installed) never matches.
    """
    if not installed:
        return False
    try:
        have = parse_version(installed)
    except DriverError:
        return False
    want = parse_version(wanted)
    return have[: len(want)] == want


# --------------------------------------------------------------------------- parsing


def parse_dkms_status(text):
    """Parse ``dkms status`` (dkms 2 and 3 formats) into a list of dicts.

    Each entry: ``module``, ``version``, ``kernel`` and ``arch`` (None for
    ``added`` entries), ``status`` (``added``, ``built``, ``installed``) and
    ``warning`` (the text after the status, or None). Lines that are not
    status lines (warnings dkms prints on its own) are skipped.
    """
    entries = []
    for line in text.splitlines():
        match = _DKMS_RE.match(line.strip())
        if not match:
            continue
        rest = match.group("rest").strip()
        entries.append(
            {
                "module": match.group("module"),
                "version": match.group("version"),
                "kernel": match.group("kernel"),
                "arch": match.group("arch"),
                "status": match.group("status"),
                "warning": rest.strip("() ") or None,
            }
        )
    return entries


def parse_modinfo(text):
    """Parse ``modinfo`` output into a dict; repeated fields become lists."""
    info = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep or not key or " " in key.strip():
            continue
        key, value = key.strip(), value.strip()
        if key in info:
            if not isinstance(info[key], list):
                info[key] = [info[key]]
            info[key].append(value)
        else:
            info[key] = value
    return info


def module_flavor(license_text):
    """``open`` for the GPL/MIT open kernel modules, ``proprietary`` for ``NVIDIA``."""
    if not license_text:
        return None
    return "open" if "GPL" in license_text or "MIT" in license_text else "proprietary"


def module_from_modinfo(text):
    """What ``modinfo nvidia`` says about the module on disk: path, version, flavor."""
    info = parse_modinfo(text)
    version = info.get("version")
    if not version or not _VERSION_RE.match(version):
        raise DriverError("modinfo output has no driver version")
    vermagic = info.get("vermagic")
    return {
        "path": info.get("filename"),
        "version": version,
        "flavor": module_flavor(info.get("license")),
        "kernel": vermagic.split()[0] if vermagic else None,
    }


def parse_smi_query(text):
    """Parse ``nvidia-smi --query-gpu=driver_version,persistence_mode --format=csv,noheader``.

    Returns ``{"driver_versions": [...], "persistence_mode": [...]}``, one entry
    per GPU. Raises DriverError on anything else (nvidia-smi prints its
    failures, e.g. a driver/library mismatch, on stdout).
    """
    versions, modes = [], []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split(",")]
        if not _VERSION_RE.match(fields[0]):
            raise DriverError(f"nvidia-smi: {line.strip()}")
        versions.append(fields[0])
        modes.append(fields[1] if len(fields) > 1 else None)
    if not versions:
        raise DriverError("nvidia-smi listed no GPU")
    return {"driver_versions": versions, "persistence_mode": modes}


def parse_efi_secure_boot(data):
    """The SecureBoot EFI variable: 4 attribute bytes, then 1 (on) or 0 (off)."""
    if len(data) < 5:
        raise DriverError("SecureBoot EFI variable is shorter than 5 bytes")
    return data[4] == 1


def parse_mokutil_sb_state(text):
    """``mokutil --sb-state``: True / False, None when it cannot tell."""
    lowered = text.lower()
    if "secureboot enabled" in lowered:
        return True
    if "secureboot disabled" in lowered:
        return False
    return None


def userspace_version_from_names(names):
    """The version in ``libnvidia-ml.so.<version>`` file names (newest if several)."""
    found = []
    for name in names:
        match = re.match(r"^libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$", name)
        if match:
            found.append(match.group(1))
    if not found:
        return None
    return max(found, key=parse_version)


def blacklist_complete(text):
    """Whether a modprobe.d file blacklists nouveau the way the role's template does."""
    lines = {" ".join(line.split()) for line in (text or "").splitlines()}
    return all(line in lines for line in NOUVEAU_BLACKLIST_LINES)


def parse_systemctl_show(text):
    """``systemctl show -p Id,LoadState,ActiveState,UnitFileState UNIT...``: ``{unit: {...}}``.

    Units are separated by blank lines; the unit name (``Id``, without
    ``.service``) keys the result, with ``load``, ``active`` and ``enabled``.
    """
    units, current = {}, {}
    for line in [*(text or "").splitlines(), ""]:
        if not line.strip():
            if current.get("Id"):
                units[current["Id"].rsplit(".service", 1)[0]] = {
                    "load": current.get("LoadState"),
                    "active": current.get("ActiveState"),
                    "enabled": current.get("UnitFileState"),
                }
            current = {}
            continue
        key, _sep, value = line.partition("=")
        current[key.strip()] = value.strip()
    return units


def service_running(services, name):
    unit = (services or {}).get(name) or {}
    return unit.get("active") == "active"


def service_enabled(services, name):
    unit = (services or {}).get(name) or {}
    return unit.get("enabled") in ("enabled", "enabled-runtime", "static", "alias")


def service_exists(services, name):
    unit = (services or {}).get(name) or {}
    return unit.get("load") not in (None, "not-found")


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


def build_request(params, gpu, os_info):
    """What is wanted on this host, decided and checked before anything is read.

    ``params``: the role's settings (the module's arguments); ``gpu``: the
    ``nvidia_gpu`` facts; ``os_info``: ``distribution``, ``distribution_version``,
    ``architecture``, ``kernel``. Raises DriverError on a request that cannot be met.
    """
    gpu_ids = [d["device_id"] for d in gpu.get("devices") or [] if d.get("kind") == "gpu"]
    chosen = resolve_wanted(
        version=params.get("version"),
        branch=params.get("branch"),
        supported_branches=gpu.get("supported_branches"),
        recommended_branch=gpu.get("recommended_branch"),
        check_gpus=params.get("check_branch", True),
    )
    branch, version = chosen["branch"], chosen["version"]
    module_type = kernel_module_type(params.get("module_type") or "auto", branch, gpu_ids)
    method = params.get("method") or "packages"
    fabricmanager = params.get("fabricmanager") or "auto"
    request = {
        "method": method,
        "branch": branch,
        "version": version,
        "wanted": version or branch,
        "module_type": module_type,
        "hold": bool(params.get("hold", True)) and method in PACKAGE_METHODS,
        "persistence": bool(params.get("persistence", True)),
        "fabricmanager": fabricmanager == "always"
        or (fabricmanager == "auto" and gpu.get("nvswitch_count", 0) > 0),
        "blacklist_nouveau": bool(params.get("blacklist_nouveau", True)),
        "install_prerequisites": bool(params.get("install_prerequisites", True)),
        "signing": bool(params.get("signing_key")),
        "headers_package": nvidia_packages.headers_package(os_info["kernel"]),
        "warnings": [],
        "packages": None,
        "fabricmanager_package": None,
        "repository": None,
        "runfile": None,
        "signed_fallback": False,
    }
    if bool(params.get("signing_key")) != bool(params.get("signing_cert")):
        raise DriverError("module signing needs both nvidia_driver_signing_key and "
                          "nvidia_driver_signing_cert")
    if method in PACKAGE_METHODS or request["fabricmanager"]:
        _package_request(request, params, os_info)
    if method == "runfile":
        if not version:
            raise DriverError("nvidia_driver_method: runfile needs nvidia_driver_version (a full version "
                              "such as 580.95.05): an installer is one version")
        arch = os_info["architecture"]
        request["runfile"] = {
            "url": params.get("runfile_url") or RUNFILE_URL.format(version=version, arch=arch),
            "checksum": "sha256:" + runfile_checksum(params.get("runfile_checksum")),
            "name": f"NVIDIA-Linux-{arch}-{version}.run",
            "flags": runfile_flags(version, module_type, signing_key=params.get("signing_key"),
                                   signing_cert=params.get("signing_cert"),
                                   extra=params.get("runfile_extra_flags") or ()),
        }
    return request


def _package_request(request, params, os_info):
    """Fill the request's package names, fabric manager package and repository."""
    method, branch = request["method"], request["branch"]
    if method == "ubuntu-signed" and str(os_info["distribution"]).lower() != "ubuntu":
        raise DriverError(f"nvidia_driver_method: ubuntu-signed installs Canonical's signed modules, "
                          f"which only Ubuntu ships; {os_info['distribution']} needs the packages or "
                          "runfile method")
    try:
        family, key, warning = nvidia_packages.release_of(os_info["distribution"],
                                                          os_info["distribution_version"])
        if warning:
            request["warnings"].append(warning)
        source = params.get("package_source") or "distro"
        if request["fabricmanager"]:
            request["fabricmanager_package"] = nvidia_packages.fabricmanager_package(family, source, branch)
        if method == "packages":
            request["packages"] = nvidia_packages.driver_packages(
                family, key, source, branch, module_type=request["module_type"], version=request["version"])
            request["repository"] = _repository(params, family, key, source, os_info["architecture"])
            # under Secure Boot without a key, Ubuntu's own signed modules instead (signed_fallback)
            request["signed_fallback"] = family == "ubuntu" and source == "distro"
        elif method == "ubuntu-signed":
            request["repository"] = _repository(params, family, key, "distro", os_info["architecture"])
    except nvidia_packages.PackageError as exc:
        raise DriverError(str(exc)) from exc


def _repository(params, family, key, source, arch):
    """``{"line", "key_url", "sources_text"}`` of the apt source the role adds (line None: none to add).

    ``sources_text``: the line as the deb822 .sources file the role writes.
    """
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


# --------------------------------------------------------------------------- plan


def needs_dkms_status(state, request):
    """Whether the plan depends on ``dkms status`` (the driver is there, its module is not)."""
    wanted = request["wanted"]
    on_disk = (state.get("module_on_disk") or {}).get("version")
    return version_matches(state.get("userspace_version"), wanted) and not version_matches(on_disk, wanted)


def index_lookups(plan_result, request):
    """Packages whose presence in the apt index the plan must know (``apt-cache madison``)."""
    names = list(plan_result["prerequisites"]) + list(plan_result.get("kernel_modules") or [])
    if plan_result["install"] and request["packages"]:
        pin = request["packages"]["pin"]
        names += request["packages"]["install"] + ([pin] if pin else [])
    if plan_result["fabricmanager"] and plan_result["fabricmanager"]["install"]:
        names.append(request["fabricmanager_package"])
    return names


#: The keys of a plan's steps, in their order in the result (then ``converged``, ``disruptive``, ``reasons``).
PLAN_KEYS = ("repair_dpkg", "install", "install_packages", "refresh_index", "prerequisites", "dkms_build",
             "dkms_version", "unhold", "hold", "remove", "kernel_modules", "blacklist_nouveau", "unload",
             "load", "reboot_required", "persistence", "fabricmanager")


def plan(state, request):
    """What to do to get ``request`` on a host in ``state``; never reads anything.

    ``state`` (see the module ``nvidia_driver_state``): ``kernel``,
    ``headers_present``, ``module_on_disk``, ``dkms`` (None when not read),
    ``loaded`` (``modules``, ``version``, ``module_type``), ``userspace_version``,
    ``packages`` (dpkg's, None without dpkg), ``dpkg_interrupted`` (reasons),
    ``services``, ``blacklist_complete``, ``persistenced_unit``, ``secure_boot``,
    ``index`` (``apt-cache madison``, None when not read). Returns the steps,
    each a boolean or a list (``remove`` and ``kernel_modules``: the switch between DKMS
    and Ubuntu's signed modules, and the signed modules of kernels that boot next), with
    ``converged`` (nothing to do),
    ``disruptive`` (the GPUs stop: install, unload or reboot) and ``reasons``.

    The steps are :data:`PLAN_STEPS`, in order; their reasons are the plan's, in that order.
    """
    parts, reasons = {}, []
    for step in PLAN_STEPS:
        part, why = step(state, request, parts)
        parts.update(part)
        reasons.extend(why)
    steps = {key: parts[key] for key in PLAN_KEYS}
    steps["converged"] = not any(value for key, value in steps.items()
                                 if key not in ("dkms_version", "reboot_required", "install_packages"))
    steps["disruptive"] = steps["install"] or steps["unload"] or steps["reboot_required"]
    steps["reasons"] = reasons
    return steps


# The steps of :func:`plan`, in order. Each is ``step(state, request, steps)`` over the plan so
# far (the parts of the steps before it) and returns ``(its part of the plan, its reasons)``.


def _building(steps):
    """Whether the run installs the driver or builds its module."""
    return steps["install"] or steps["dkms_build"]


def _builds(request, steps):
    """Whether the run builds a module (Canonical's signed modules are built and signed already)."""
    return _building(steps) and request["method"] != "ubuntu-signed"


def plan_install(state, request, _steps):
    """``install`` (and its apt requests), or ``dkms_build`` of a registered version."""
    install, dkms_build, dkms_version, reasons = install_step(state, request)
    if install and request.get("signed_auto"):
        reasons.append("Secure Boot is on and no signing key is set: Canonical's signed NVIDIA modules "
                       "(nvidia_driver_method: ubuntu-signed)")
    specs = _install_specs(request, state.get("packages")) if install and request["packages"] else []
    return {"install": install, "install_packages": specs, "dkms_build": dkms_build,
            "dkms_version": dkms_version}, reasons


def plan_signing(state, request, steps):
    """Nothing; refuses a build that Secure Boot would not load, or signing files that are missing."""
    builds = _builds(request, steps)
    if builds and state.get("secure_boot") and not request["signing"]:
        raise DriverError(
            "Secure Boot is on and the NVIDIA kernel module would be unsigned, so the kernel would refuse "
            "to load it. Create a key pair, enroll its public key with `mokutil --import <cert.der>` "
            "(confirm at the next boot), then set nvidia_driver_signing_key and nvidia_driver_signing_cert "
            "to the key and DER certificate on the host; or turn Secure Boot off. Nothing was changed.")
    missing_keys = state.get("signing_files_missing") or []
    if builds and missing_keys:
        raise DriverError(f"{', '.join(missing_keys)} (module signing) does not exist on this host; "
                          "nothing was changed")
    return {}, []


def plan_dpkg(state, _request, _steps):
    """``repair_dpkg``: an interrupted dpkg run to finish first."""
    interrupted_by = state.get("dpkg_interrupted")
    return {"repair_dpkg": bool(interrupted_by)}, list(interrupted_by or [])


def plan_prerequisites(state, request, steps):
    """``prerequisites``: the kernel headers and build tools a module build needs."""
    packages = state.get("packages")
    prerequisites = []
    if _builds(request, steps) and request["install_prerequisites"] and packages is not None:
        if not state.get("headers_present"):
            prerequisites.append(request["headers_package"])
        prerequisites += [p for p in nvidia_packages.BUILD_PREREQUISITES if not installed(packages, p)]
    return {"prerequisites": prerequisites}, []


def plan_hold(state, request, steps):
    """``unhold`` and ``hold``: the driver's packages released for an install, held after it."""
    packages = state.get("packages")
    install = steps["install"]
    held = _held(packages)
    hold_targets = list((request["packages"] or {}).get("hold") or [])
    if request["fabricmanager"] and request["fabricmanager_package"] and request["method"] in PACKAGE_METHODS:
        hold_targets.append(request["fabricmanager_package"])
    unhold, hold = [], []
    if packages is not None and request["method"] in PACKAGE_METHODS:
        if install:
            unhold = sorted(name for name in held if nvidia_packages.is_driver_package(name))
        if request["hold"]:
            hold = [p for p in hold_targets if install or p not in held]
        else:
            unhold = sorted(set(unhold) | {p for p in hold_targets if p in held})
    reasons = [f"not held: {', '.join(hold)}"] if hold and not install else []
    return {"unhold": unhold, "hold": hold}, reasons


def plan_module(state, request, steps):
    """``unload``, ``load`` and ``reboot_required``: the kernel module to run the wanted driver."""
    wanted = request["wanted"]
    loaded = state.get("loaded") or {}
    loaded_version = loaded.get("version")
    userspace = state.get("userspace_version")
    install = steps["install"]
    reasons = []
    nouveau = "nouveau" in (loaded.get("modules") or [])
    installed_exact = userspace if not install and version_matches(userspace, wanted) else None
    stale = bool(installed_exact) and not version_matches(loaded_version, installed_exact)
    flavor_change = bool(loaded_version) and bool(loaded.get("module_type")) \
        and loaded["module_type"] != request["module_type"]
    unload = bool(loaded_version) and (install or not version_matches(loaded_version, wanted) or stale
                                       or flavor_change)
    if unload:
        reasons.append(f"loaded module {loaded_version} must be unloaded")
    if nouveau:
        reasons.append("nouveau is loaded: a reboot is needed to load nvidia")
    load = not nouveau and (unload or not loaded_version)
    if load and not unload and not _building(steps):
        reasons.append("the nvidia module is not loaded")
    return {"unload": unload, "load": load, "reboot_required": nouveau}, reasons


def plan_blacklist(state, request, _steps):
    """``blacklist_nouveau``: the modprobe.d file that keeps nouveau off the GPUs."""
    blacklist = request["blacklist_nouveau"] and not state.get("blacklist_complete")
    return {"blacklist_nouveau": blacklist}, ["nouveau is not blacklisted"] if blacklist else []


def plan_persistence(state, request, steps):
    """``persistence``: nvidia-persistenced's unit (runfile), enable, start."""
    services = state.get("services") or {}
    persistence = []
    if request["persistence"]:
        if request["method"] == "runfile" and not state.get("persistenced_unit"):
            persistence.append("unit")
        if not service_enabled(services, PERSISTENCED):
            persistence.append("enable")
        if not service_running(services, PERSISTENCED) and not steps["reboot_required"]:
            persistence.append("start")
    reasons = [f"{PERSISTENCED}: {', '.join(persistence)}"] if persistence and not _building(steps) else []
    return {"persistence": persistence}, reasons


def plan_fabricmanager(state, request, steps):
    """``fabricmanager``: its package at the driver's version, enabled and started (None: nothing)."""
    if not request["fabricmanager"]:
        return {"fabricmanager": None}, []
    services = state.get("services") or {}
    userspace = state.get("userspace_version")
    install = steps["install"]
    fm_package = request["fabricmanager_package"]
    fm_version = installed(state.get("packages") or {}, fm_package)
    fm_install = install or not fm_version \
        or not version_matches(fm_version.split("-")[0], userspace or "0")
    fabricmanager = {
        "package": fm_package,
        "version": request["version"] if install else userspace,
        "install": fm_install,
        "enable": not service_enabled(services, FABRICMANAGER),
        "start": not steps["reboot_required"]
        and (fm_install or steps["unload"] or not service_running(services, FABRICMANAGER)),
    }
    if not any((fm_install, fabricmanager["enable"], fabricmanager["start"])):
        return {"fabricmanager": None}, []
    if _building(steps):
        return {"fabricmanager": fabricmanager}, []
    todo = ", ".join(k for k in ("install", "enable", "start") if fabricmanager[k])
    return {"fabricmanager": fabricmanager}, [f"fabric manager {fm_package}: {todo}"]


def plan_switch(state, request, steps):
    """``remove`` and ``kernel_modules`` (see :func:`switch_steps`)."""
    remove, kernel_modules = switch_steps(state, request, steps["install"])
    reasons = []
    if kernel_modules:
        reasons.append(f"signed modules for the kernel(s) that boot next: {', '.join(kernel_modules)}")
    return {"remove": remove, "kernel_modules": kernel_modules}, reasons


def plan_index(state, request, steps):
    """``refresh_index``: ``apt update`` first, when the index does not know a package the plan installs."""
    refresh_index = bool((request["packages"] or {}).get("provisional"))
    if state.get("index") is None:
        return {"refresh_index": refresh_index}, []
    unversioned = (request["packages"] or {}).get("unversioned") or ()
    needed = [(p, None) for p in steps["prerequisites"] + steps["kernel_modules"]]
    if steps["install"] and request["packages"]:
        needed += [(p, None if p in unversioned else request["version"])
                   for p in request["packages"]["install"]]
        if request["packages"]["pin"]:
            needed.append((request["packages"]["pin"], None))
    fabricmanager = steps["fabricmanager"]
    if fabricmanager and fabricmanager["install"]:
        needed.append((fabricmanager["package"], fabricmanager["version"]))
    unknown = [p for p, v in needed if not version_known(state["index"], p, v)]
    reasons = [f"the package index does not know {', '.join(unknown)}"] if unknown else []
    return {"refresh_index": refresh_index or bool(unknown)}, reasons


PLAN_STEPS = (plan_install, plan_signing, plan_dpkg, plan_prerequisites, plan_hold, plan_module,
              plan_blacklist, plan_persistence, plan_fabricmanager, plan_switch, plan_index)


def install_step(state, request):
    """Whether the driver is (re)installed or only built for the running kernel by DKMS:
    ``(install, dkms_build, dkms_version, reasons)``."""
    wanted = request["wanted"]
    packages = state.get("packages")
    on_disk = state.get("module_on_disk") or {}
    userspace = state.get("userspace_version")
    reasons = []
    install = dkms_build = False
    dkms_version = None
    if not version_matches(userspace, wanted):
        install = True
        reasons.append(f"userspace driver is {userspace or 'absent'}, wanted {wanted}")
    elif not version_matches(on_disk.get("version"), wanted):
        registered = [e for e in state.get("dkms") or []
                      if e["module"] == "nvidia" and version_matches(e["version"], wanted)]
        if registered and request["method"] != "ubuntu-signed":
            dkms_build, dkms_version = True, registered[0]["version"]
            reasons.append(f"module {dkms_version} is registered with DKMS but not built for kernel "
                           f"{state.get('kernel')}")
        else:
            install = True
            reasons.append(f"kernel module for {state.get('kernel')} is "
                           f"{on_disk.get('version') or 'absent'}, wanted {wanted}")
    elif on_disk.get("flavor") and on_disk["flavor"] != request["module_type"]:
        install = True
        reasons.append(f"the module on disk is {on_disk['flavor']}, wanted {request['module_type']}")
    if request["packages"] and packages is not None and not install:
        missing = [p for p in request["packages"]["install"] if not installed(packages, p)]
        if missing:
            install = True
            reasons.append(f"package(s) {', '.join(missing)} not installed")
    return install, dkms_build, dkms_version, reasons


def switch_steps(state, request, install):
    """``(remove, kernel_modules)``: the packages of the other method an install removes
    (DKMS <-> Ubuntu's signed modules), and the signed modules of kernels that boot next
    (the flavour's metapackage, kernels installed but not running) that are missing."""
    packages = state.get("packages")
    if packages is None or request["method"] not in PACKAGE_METHODS:
        return [], []
    remove = []
    if install and request["method"] == "ubuntu-signed":
        remove = ubuntu_signed.installed_dkms_packages(packages)
    elif install and request.get("signed_fallback"):
        remove = ubuntu_signed.installed_signed_packages(packages)
    follow = (request["packages"] or {}).get("follow") or []
    return remove, [p for p in follow if not installed(packages, p)]


def signed_fallback(state, request):
    """The request, switched to ``ubuntu-signed`` where the packages method would build an
    unsigned module under Secure Boot on Ubuntu (which :func:`plan` refuses otherwise)."""
    if not request.get("signed_fallback") or not state.get("secure_boot") or request["signing"]:
        return request
    install, dkms_build, _version, _reasons = install_step(state, request)
    if not (install or dkms_build):
        return request
    # said among the plan's reasons when it changes something (quiet on a converged node)
    return dict(request, method="ubuntu-signed", packages=None, signed_fallback=False, signed_auto=True)


def signed_request(request, state, archive, refreshed=False):
    """The ``ubuntu-signed`` request with its packages, from what the package archive has
    (``archive``: ``names``, ``drivers``; see ``gpunode.driver.ubuntu_signed.select``)."""
    wanted = {key: request[key] for key in ("branch", "version", "module_type")}
    try:
        chosen = ubuntu_signed.select(wanted, state["kernel"], state.get("packages"), archive, refreshed)
    except ubuntu_signed.SignedError as exc:
        raise DriverError(str(exc)) from exc
    result = dict(request, packages=chosen, version=chosen["version"],
                  wanted=chosen["version"] or request["branch"])
    result["warnings"] = [*request["warnings"], *chosen["warnings"]]
    return result


def _held(packages):
    return {name for name, entry in (packages or {}).items()
            if entry["want"] == "hold" and entry["status"] not in ("not-installed", "config-files")}


def _install_specs(request, packages):
    """apt requests for an install: the top-level packages at the version, and with a
    version, every installed package of that branch too (apt does not downgrade an
    exact dependency on its own)."""
    version = request["version"]
    specs = []
    pin = request["packages"]["pin"]
    if pin:
        specs.append(pin)
    names = list(request["packages"]["install"])
    if version:
        prefix = request["branch"] + "."
        names += sorted(name for name, entry in (packages or {}).items()
                        if nvidia_packages.is_driver_package(name) and installed(packages, name)
                        and (entry["version"] or "").startswith(prefix) and name != pin
                        and not name.startswith("nvidia-driver-pinning-"))
        if request["method"] == "ubuntu-signed":  # the DKMS side goes (plan's remove)
            names = [name for name in names if not _DKMS_SIDE_RE.match(name)]
    unversioned = request["packages"].get("unversioned") or ()
    for name in names:
        spec = name if name in unversioned else nvidia_packages.version_spec(name, version)
        if spec not in specs:
            specs.append(spec)
    return specs


# --------------------------------------------------------------------------- what the role publishes


def pending_reboot(state):
    """Whether the host needs a reboot to run the driver on disk: nouveau holds the
    GPUs, or the loaded module is not the one on disk (it could not be unloaded)."""
    loaded = state.get("loaded") or {}
    if "nouveau" in (loaded.get("modules") or []):
        return True
    on_disk = (state.get("module_on_disk") or {}).get("version")
    return bool(loaded.get("version")) and bool(on_disk) and loaded["version"] != on_disk


def driver_facts(state, request, steps=None):
    """``ansible_facts.nvidia_driver``: the driver of this host after the run.

    With ``steps`` (a plan about to run, e.g. in check mode) the facts are the
    prediction of what the run leaves; without, they describe ``state``.
    """
    loaded = state.get("loaded") or {}
    on_disk = state.get("module_on_disk") or {}
    installed_version = state.get("userspace_version")
    loaded_version = loaded.get("version")
    module_type = loaded.get("module_type") or on_disk.get("flavor")
    reboot_required = pending_reboot(state)
    hold_targets = (request["packages"] or {}).get("hold") or []
    held = None
    if request["method"] in PACKAGE_METHODS and state.get("packages") is not None:
        held = bool(hold_targets) and all(p in _held(state["packages"]) for p in hold_targets)
    if steps:
        if steps["install"]:
            installed_version = request["version"]
            module_type = request["module_type"]
        if steps["load"] and not steps["reboot_required"]:
            loaded_version = installed_version
            module_type = request["module_type"]
        reboot_required = steps["reboot_required"]
        if held is not None:
            held = request["hold"]
    return {
        "method": request["method"],
        "branch": request["branch"],
        "wanted": request["wanted"],
        "installed_version": installed_version,
        "loaded_version": loaded_version,
        "module_type": module_type,
        "held": held,
        "reboot_required": bool(reboot_required),
    }


def change_lines(steps, before, after):
    """One short line per change a run made (``gpunode_changes``), from the plan it ran
    and the driver facts before and after it."""
    lines = []
    if steps["repair_dpkg"]:
        lines.append("dpkg: finished the interrupted run (dpkg --configure -a)")
    if steps["install"]:
        new = after["installed_version"] or after["wanted"]
        kind = after["module_type"] or "module type unknown"
        if new == before["installed_version"]:
            lines.append(f"driver {new} reinstalled ({kind})")
        else:
            lines.append(f"driver {before['installed_version'] or 'none'} -> {new} ({kind})")
    if steps.get("remove"):
        lines.append(f"packages of the other driver method removed: {', '.join(steps['remove'])}")
    if steps.get("kernel_modules"):
        lines.append(f"signed modules for the next kernel installed: {', '.join(steps['kernel_modules'])}")
    if steps["dkms_build"]:
        lines.append(f"driver {steps['dkms_version']}: module built for the running kernel")
    if steps["unhold"] and not steps["hold"]:
        lines.append(f"driver packages released: {', '.join(steps['unhold'])}")
    if steps["hold"]:
        lines.append(f"driver packages held: {', '.join(steps['hold'])}")
    if steps["blacklist_nouveau"]:
        lines.append("nouveau blacklisted")
    if (steps["unload"] or steps["load"]) and after["loaded_version"] != before["loaded_version"]:
        lines.append(f"driver loaded: {before['loaded_version'] or 'none'} -> "
                     f"{after['loaded_version'] or 'none'}")
    if steps["persistence"]:
        lines.append(f"{PERSISTENCED}: {', '.join(steps['persistence'])}")
    if steps["fabricmanager"]:
        fm = steps["fabricmanager"]
        lines.append(f"fabric manager {fm['package']}: "
                     + ", ".join(k for k in ("install", "enable", "start") if fm[k]))
    if after["reboot_required"]:
        lines.append("reboot pending to load the driver")
    return lines
