"""NVIDIA driver logic: versions, what is installed, what to do about it.

Pure Python (standard library only) so it runs on target hosts and is tested
without Ansible. The modules ``nvidia_driver_state`` and
``nvidia_kernel_modules`` read the host and call into this file; every
decision the role takes (install, rebuild for a new kernel, unload, reboot)
is computed here from plain data.

Domain errors are raised as :class:`DriverError` and turned into
``fail_json`` by the modules.
"""

import re

#: Kernel modules of the driver, in the order they must be unloaded.
NVIDIA_MODULES = ("nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia_peermem", "nvidia")

#: First branch whose open kernel modules are the installer's default.
OPEN_DEFAULT_FROM = 560
#: First branch that ships the open kernel modules at all.
OPEN_AVAILABLE_FROM = 515
#: First branch whose installer takes ``--kernel-module-type``; older
#: installers build the open modules with ``--kernel-module-build-directory``.
MODULE_TYPE_FLAG_FROM = 560

#: PCI device IDs of NVIDIA GPUs are allocated in chip order. The first
#: Turing chip (TU102) is 0x1e02: every earlier ID (Kepler, Maxwell, Pascal,
#: Volta) needs the proprietary module; Blackwell (GB100, 0x2900 on) supports
#: only the open one.
TURING_FIRST_DEVICE_ID = 0x1E00
BLACKWELL_FIRST_DEVICE_ID = 0x2900

#: EFI global variable GUID of the ``SecureBoot`` variable.
SECURE_BOOT_EFIVAR = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"

_VERSION_RE = re.compile(r"^\d+(?:\.\d+){0,2}$")
_PROC_VERSION_RE = re.compile(
    r"NVRM version:\s+NVIDIA UNIX\s+(?P<open>Open\s+)?(?:x86_64\s+|aarch64\s+|ppc64le\s+)?"
    r"Kernel Module(?:\s+for\s+\S+)?\s+(?P<version>\d+\.\d+(?:\.\d+)?)"
)
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


def compare_versions(left, right):
    """-1, 0 or 1, comparing component by component as integers."""
    a, b = parse_version(left), parse_version(right)
    return (a > b) - (a < b)


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


def parse_proc_driver_version(text):
    """Parse ``/proc/driver/nvidia/version``: ``{"version", "flavor"}``."""
    match = _PROC_VERSION_RE.search(text)
    if not match:
        raise DriverError("no 'NVRM version' line with a driver version")
    return {
        "version": match.group("version"),
        "flavor": "open" if match.group("open") else "proprietary",
    }


def parse_proc_modules(text):
    """Names of the loaded modules from ``/proc/modules``."""
    return [line.split()[0] for line in text.splitlines() if line.strip()]


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


# --------------------------------------------------------------------------- choices


def resolve_wanted(
    version=None, branch=None, supported_branches=None, recommended_branch=None, check_gpus=True
):
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
            f"driver branch {branch} cannot drive every GPU on this host; branches that can: {listed}"
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


def is_turing_or_newer(device_id):
    return int(str(device_id), 16) >= TURING_FIRST_DEVICE_ID


def needs_open_module(device_id):
    return int(str(device_id), 16) >= BLACKWELL_FIRST_DEVICE_ID


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
                f"device(s) {', '.join(open_only)} (Blackwell or newer) are driven only by the open "
                "kernel module; set nvidia_driver_module_type: open"
            )
        return "proprietary"
    raise DriverError(f"unknown kernel module type {requested!r} (auto, open, proprietary)")


def runfile_name(version, arch="x86_64"):
    parse_version(version)
    return f"NVIDIA-Linux-{arch}-{version}.run"


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


# --------------------------------------------------------------------------- plan


def dkms_entries_for(entries, module="nvidia"):
    return [e for e in entries if e["module"] == module]


def plan(state, wanted):
    """What to do to get ``wanted`` (branch or version) on a host in ``state``.

    ``state`` holds ``kernel``, ``userspace_version``, ``module_on_disk``
    (dict with ``version`` or None), ``loaded`` (dict with ``version`` or
    None), ``dkms`` (entries) and ``nouveau_loaded``. Returns::

        install       the driver itself must be (re)installed
        dkms_build    only the kernel module must be built for this kernel
        dkms_version  the registered version to build (with dkms_build)
        unload        the loaded modules must go before the change
        load          the module must be loaded afterwards (no reboot needed)
        reboot_required, up_to_date, reasons
    """
    parse_version(wanted)
    reasons = []
    userspace = state.get("userspace_version")
    on_disk = (state.get("module_on_disk") or {}).get("version")
    loaded = (state.get("loaded") or {}).get("version")
    kernel = state.get("kernel")

    install = dkms_build = False
    dkms_version = None
    if not version_matches(userspace, wanted):
        install = True
        reasons.append(f"userspace driver is {userspace or 'absent'}, wanted {wanted}")
    elif not version_matches(on_disk, wanted):
        registered = [
            e for e in dkms_entries_for(state.get("dkms") or []) if version_matches(e["version"], wanted)
        ]
        if registered:
            dkms_build = True
            dkms_version = registered[0]["version"]
            reasons.append(
                f"module {registered[0]['version']} is registered with DKMS but not built for kernel {kernel}"
            )
        else:
            install = True
            reasons.append(f"kernel module for {kernel} is {on_disk or 'absent'}, wanted {wanted}")

    changing = install or dkms_build
    # with a branch wanted, the loaded module must still be the very version installed
    installed_exact = userspace if not install and version_matches(userspace, wanted) else None
    stale = bool(installed_exact) and not version_matches(loaded, installed_exact)
    unload = bool(loaded) and (install or not version_matches(loaded, wanted) or stale)
    if unload:
        reasons.append(f"loaded module {loaded} must be unloaded")
    reboot_required = bool(state.get("nouveau_loaded"))
    if reboot_required:
        reasons.append("nouveau is loaded: a reboot is needed to load nvidia")
    load = not reboot_required and (unload or not loaded)
    return {
        "install": install,
        "dkms_build": dkms_build,
        "dkms_version": dkms_version,
        "unload": unload,
        "load": load,
        "reboot_required": reboot_required,
        "up_to_date": not changing and not unload and not reboot_required and bool(loaded),
        "reasons": reasons,
    }
