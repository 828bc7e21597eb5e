# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ubuntu's prebuilt NVIDIA kernel modules, signed with Canonical's key (``ubuntu-signed``).

Pure Python (standard library only), run on the target by ``nvidia_driver_state``.
Ubuntu builds the NVIDIA modules for each of its kernels in src:linux-restricted-modules
and signs them with the key its kernels trust, so they load under Secure Boot with no
MOK enrollment and no DKMS build. Sources of the names below:

- Ubuntu Server documentation, "Install NVIDIA drivers"
  (https://documentation.ubuntu.com/server/how-to/graphics/install-nvidia-drivers/):
  ``linux-modules-nvidia-${DRIVER_BRANCH}${SERVER}-${LINUX_FLAVOUR}`` for the flavour,
  ``linux-modules-nvidia-${DRIVER_BRANCH}${SERVER}-$(uname -r)`` for the running kernel,
  with ``nvidia-headless-no-dkms-${DRIVER_BRANCH}${SERVER}`` and
  ``nvidia-utils-${DRIVER_BRANCH}${SERVER}`` (-open variants of the modules from 515).
- ubuntu-drivers-common, ``UbuntuDrivers/detect.py`` ``get_linux_modules_metapackage()``
  (github.com/canonical/ubuntu-drivers-common): it checks that the ABI-specific
  ``linux-modules-nvidia-<series>-<linux version>`` (``570-server-open-6.8.0-60-generic``)
  exists, then picks ``linux-modules-nvidia-<series>-<flavour>`` where the flavour is the
  installed kernel image metapackage's name without ``linux-image-`` (``generic``,
  ``generic-hwe-24.04``, ``aws``, ``nvidia``, ...); without the ABI-specific package it falls
  back to ``nvidia-dkms-<series>`` (here: refused, since an unsigned DKMS build cannot load
  under Secure Boot). ``ubuntu-drivers install --gpgpu`` installs that metapackage with the
  driver's no-DKMS metapackage (``nvidia-headless-no-dkms-535-server`` for
  ``nvidia-driver-535-server``).
- NVIDIA GPU Operator, "Precompiled and Canonical signed drivers"
  (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/precompiled-drivers.html):
  ``linux-modules-nvidia-<branch>-server-<kernel>`` (the meta package of
  ``linux-objects-nvidia-<branch>-server-<kernel>`` and ``linux-signatures-nvidia-<kernel>``),
  ``nvidia-utils-<branch>-server``, ``nvidia-compute-utils-<branch>-server``; "before
  upgrading the kernel, ensure these packages are available for that kernel".
- The exact-kernel package's version is the kernel's (``6.8.0-60.63+1``); the driver it
  carries is pinned by its dependency on ``nvidia-kernel-common-<branch>[-server]``
  (``(>= 570.133.20)``, ``(<= 570.133.20-1)``): the userspace is installed at that version.

Domain errors are raised as :class:`SignedError` (``nvidia_driver.signed_request`` turns
them into ``DriverError``).
"""

import re

from ansible.module_utils.gpunode.driver.driver import kernel_key, kernels_after

#: Every exact-kernel and flavour package name starts with this (``apt-cache pkgnames``).
MODULES_PREFIX = "linux-modules-nvidia-"
#: Ubuntu's kernel release: ``<upstream>-<ABI number>-<flavour>`` (``6.8.0-60-generic``,
#: ``6.8.0-1024-aws``, ``6.11.0-26-generic``, ``6.17.0-1019-nvidia-64k``).
_UBUNTU_KERNEL_RE = re.compile(
    r"^(?P<upstream>\d+\.\d+\.\d+)-(?P<abinum>\d+)-(?P<flavour>[a-z][a-z0-9.+-]*)$")
#: Any other ``<version>-<flavour>`` release (a custom kernel): no ABI number.
_OTHER_KERNEL_RE = re.compile(r"^(?P<upstream>\d+(?:\.\d+)+)-(?P<flavour>[a-z][a-z0-9.+-]*)$")
#: Installed kernel images: ``linux-image-<release>`` or ``linux-image-unsigned-<release>``.
_IMAGE_RE = re.compile(r"^linux-image-(?:unsigned-)?(?P<release>\d[^\s]*)$")
#: Kernel metapackages of a flavour: ``linux-image-generic``, ``linux-image-generic-hwe-24.04``.
_IMAGE_META_RE = re.compile(r"^linux-image-(?P<flavour>[a-z][a-z0-9.+-]*)$")
#: The driver a modules package carries, from its Depends.
_KERNEL_COMMON_RE = re.compile(r"nvidia-kernel-common-(?P<series>\d+(?:-server)?)\s*\((?P<op>>=|=)\s*"
                               r"(?P<version>\d+\.\d+(?:\.\d+)?)")
#: Branch series in package names: ``570``, ``570-open``, ``570-server``, ``570-server-open``.
_SERIES_RE = r"\d+(?:-server)?(?:-open)?"


class SignedError(Exception):
    """No signed module fits this host; the message says why and what the archive has."""


# ----------------------------------------------------------------------------- names


def kernel_release(kernel):
    """``{"release", "flavour", "abi", "key"}`` of a kernel release.

    ``abi`` is ``6.8.0-60`` on Ubuntu's kernels (None on others), ``flavour``
    ``generic``, ``aws``...; ``key`` orders releases (newer is greater).
    """
    release = str(kernel or "").strip()
    match = _UBUNTU_KERNEL_RE.match(release)
    if match:
        abi = f"{match.group('upstream')}-{match.group('abinum')}"
    else:
        match = _OTHER_KERNEL_RE.match(release)
        if not match:
            raise SignedError(f"kernel release {release!r} is not <version>-<flavour>: no signed NVIDIA "
                              "module package can be named for it")
        abi = None
    numbers = re.findall(r"\d+", abi or match.group("upstream"))
    return {"release": release, "flavour": match.group("flavour"), "abi": abi,
            "key": tuple(int(n) for n in numbers)}


def series(branch, module_type, server=True):
    """The series in package names: ``570-server-open``, ``535-server``, ``550-open``, ``550``."""
    return f"{branch}{'-server' if server else ''}{'-open' if module_type == 'open' else ''}"


def modules_package(series_name, kernel):
    """The exact-kernel package: ``linux-modules-nvidia-570-server-open-6.8.0-60-generic``."""
    return f"{MODULES_PREFIX}{series_name}-{kernel}"


def flavour_package(series_name, flavour):
    """The flavour's metapackage: ``linux-modules-nvidia-570-server-open-generic-hwe-24.04``."""
    return f"{MODULES_PREFIX}{series_name}-{flavour}"


def userspace_series(branch, module_type, server=True):
    """The driver without DKMS, each package with its series: ``nvidia-headless-no-dkms-<series>``
    and ``nvidia-utils-<b>[-server]``.

    ``nvidia-utils`` (nvidia-smi) has no -open variant and is not pulled in by the
    headless metapackage (Ubuntu Server docs, "Install NVIDIA drivers").
    """
    headless, utils = series(branch, module_type, server), series(branch, "proprietary", server)
    return [(f"nvidia-headless-no-dkms-{headless}", headless), (f"nvidia-utils-{utils}", utils)]


def userspace_packages(branch, module_type, server=True):
    """The names of :func:`userspace_series`."""
    return [name for name, _series in userspace_series(branch, module_type, server)]


def kernel_meta_flavour(packages, flavour, boot_kernel=None):
    """The flavour the installed kernel metapackage follows (``generic-hwe-24.04``), or ``flavour``.

    ``linux-image-generic-hwe-24.04`` follows the HWE kernels; when it is installed beside
    ``linux-image-generic`` (left from the install), the HWE one decides what boots next.
    A series metapackage (``linux-image-nvidia-6.8`` on jammy, ``-generic-6.11``) follows one
    upstream series: it decides when that series is the one of ``boot_kernel`` (the kernel
    that boots next), as ubuntu-drivers takes the metapackage of the newest installed kernel
    (ubuntu-drivers-common, UbuntuDrivers/kerneldetection.py, ``_get_linux_metapackage``).
    """
    found, series_metas = [], {}
    series_re = re.compile(rf"^{re.escape(flavour)}-(?P<series>\d+\.\d+)$")
    for name, entry in (packages or {}).items():
        match = _IMAGE_META_RE.match(name)
        if not match or entry["status"] in ("not-installed", "config-files"):
            continue
        meta = match.group("flavour")
        versioned = series_re.match(meta)
        if versioned:
            series_metas[versioned.group("series")] = meta
        elif meta == flavour or meta.startswith(flavour + "-hwe-") or meta.startswith(flavour + "-edge"):
            found.append(meta)
    if boot_kernel and series_metas:
        upstream = ".".join(str(n) for n in kernel_release(boot_kernel)["key"][:2])
        if upstream in series_metas:
            return series_metas[upstream]
    if not found:
        return flavour
    return sorted(found, key=lambda meta: (meta != flavour, meta))[-1]


def boot_flavour(kernel, packages):
    """The flavour whose metapackage brings the modules of the kernel that boots next
    (the newest installed, else the running ``kernel``)."""
    return kernel_meta_flavour(packages, kernel_release(kernel)["flavour"],
                               [kernel, *newer_kernels(packages, kernel)][-1])


def installed_kernels(packages):
    """Kernel releases whose image dpkg has installed."""
    kernels = set()
    for name, entry in (packages or {}).items():
        match = _IMAGE_RE.match(name)
        if match and entry["status"] not in ("not-installed", "config-files"):
            kernels.add(match.group("release"))
    return sorted(kernels)


def newer_kernels(packages, running):
    """Installed kernels newer than the running one: the boot loader starts the newest next."""
    return kernels_after(running, installed_kernels(packages))


def installed_dkms_packages(packages):
    """The DKMS driver packages a switch to the signed modules removes (their metapackages follow)."""
    return _installed_with_prefix(packages, "nvidia-dkms-")


def installed_signed_packages(packages):
    """The signed-module packages a switch to DKMS removes."""
    return _installed_with_prefix(packages, MODULES_PREFIX)


def _installed_with_prefix(packages, prefix):
    return sorted(name for name, entry in (packages or {}).items()
                  if name.startswith(prefix) and entry["status"] not in ("not-installed", "config-files"))


# ----------------------------------------------------------------------------- the archive


def parse_show(text):
    """``{package: driver version}`` from ``apt-cache show --no-all-versions PKG...``.

    The driver is the one the package's ``nvidia-kernel-common-*`` dependency names.
    """
    drivers, name = {}, None
    for line in (text or "").splitlines():
        if line.startswith("Package:"):
            name = line.split(":", 1)[1].strip()
        elif line.startswith(("Depends:", "Pre-Depends:")) and name:
            match = _KERNEL_COMMON_RE.search(line)
            if match and name not in drivers:
                drivers[name] = match.group("version")
    return drivers


def parse_depends(text):
    """``{package: [names it depends on]}`` from ``apt-cache show --no-all-versions PKG...``
    (alternatives and versions dropped)."""
    depends, name = {}, None
    for line in (text or "").splitlines():
        if line.startswith("Package:"):
            name = line.split(":", 1)[1].strip()
            depends.setdefault(name, [])
        elif line.startswith(("Depends:", "Pre-Depends:")) and name:
            for item in line.split(":", 1)[1].split(","):
                for alternative in item.split("|"):
                    word = alternative.strip().split(" ", 1)[0].split(":", 1)[0]
                    if word:
                        depends[name].append(word)
    return depends


def moved_to(name, series_name, depends):
    """The series a retired branch's package brings instead of its own, or None.

    Ubuntu keeps a retired branch's names as transitional packages that depend on the
    same name of a newer series (``linux-modules-nvidia-570-server-generic-hwe-24.04`` on
    ``...-580-server-generic-hwe-24.04``, ``nvidia-headless-565-server`` on
    ``nvidia-headless-580-server``): a name that exists is no proof the branch is built.
    """
    marker = f"-{series_name}"
    if marker not in name:
        return None
    prefix, suffix = name.split(marker, 1)
    other = re.compile(rf"^{re.escape(prefix)}-({_SERIES_RE}){re.escape(suffix)}$")
    for dependency in depends.get(name, ()):
        match = other.match(dependency)
        if match and match.group(1) != series_name:
            return match.group(1)
    return None


def shown(branch, module_type, kernel, packages):
    """The names whose records the choice reads (``apt-cache show``): the exact-kernel
    candidates, the flavour metapackages and the userspace packages, of both series."""
    flavour = boot_flavour(kernel, packages)
    names = list(candidates(branch, module_type, kernel, packages))
    for server in (True, False):
        names.append(flavour_package(series(branch, module_type, server), flavour))
        names.extend(userspace_packages(branch, module_type, server))
    return names


def archive_listing(names, kernel, branch, module_type):
    """What the archive has: ``(series for this kernel, kernels for this branch)``."""
    here = re.compile(rf"^{re.escape(MODULES_PREFIX)}({_SERIES_RE})-{re.escape(kernel)}$")
    for_kernel = sorted({m.group(1) for m in map(here.match, names) if m}, key=_series_key)
    wanted = {series(branch, module_type, True), series(branch, module_type, False)}
    kernels = set()
    for name in names:
        match = re.match(rf"^{re.escape(MODULES_PREFIX)}({_SERIES_RE})-(\d.*)$", name)
        if match and match.group(1) in wanted:
            kernels.add(match.group(2))
    ordered = sorted(kernels, key=kernel_key, reverse=True)
    return for_kernel, ordered


def _series_key(name):
    return (int(name.split("-")[0]), name)


def refusal(names, kernel, branch, module_type):
    """The message when the archive has no signed module for this kernel and branch."""
    for_kernel, kernels = archive_listing(names, kernel, branch, module_type)
    tried = ", ".join(modules_package(series(branch, module_type, s), kernel) for s in (True, False))
    shown = ", ".join(kernels[:8]) + (f" and {len(kernels) - 8} more" if len(kernels) > 8 else "")
    return (f"the package archive has no NVIDIA {module_type} kernel module of branch {branch} signed for "
            f"kernel {kernel} (none of {tried}); for this kernel it has: "
            f"{', '.join(for_kernel) or 'no branch'}; branch {branch} ({module_type}) is built for kernels: "
            f"{shown or 'none'}. Boot a kernel the archive has modules for, choose a branch it has "
            "(nvidia_driver_branch, nvidia_driver_module_type), or build with DKMS under your own key "
            "(nvidia_driver_signing_key and nvidia_driver_signing_cert). Nothing was changed.")


# ----------------------------------------------------------------------------- the choice


def candidates(branch, module_type, kernel, packages):
    """Exact-kernel packages whose driver version the module asks apt about (server first)."""
    kernels = [kernel, *newer_kernels(packages, kernel)]
    return [modules_package(series(branch, module_type, server), k)
            for server in (True, False) for k in kernels]


def select(wanted, kernel, packages, archive, refreshed=False):
    """The packages that install ``wanted`` as signed modules for ``kernel``.

    ``wanted``: ``branch``, ``version`` (None: the one the archive built) and
    ``module_type``; ``packages``: dpkg's; ``archive``: ``names`` (the
    ``linux-modules-nvidia-*`` names apt knows) and ``drivers`` (:func:`parse_show`).
    Returns ``install`` (userspace and the running kernel's modules), ``pin`` (None),
    ``hold``, ``follow`` (the flavour's metapackage, which brings the next kernel's
    modules with the kernel, and the modules of installed kernels newer than the running
    one: installed without touching the running driver), ``unversioned`` (names versioned
    as the kernel, not the driver), ``version`` (the driver the module carries),
    ``series``, ``provisional`` (the index does not know the names yet: refresh it and
    ask again) and ``warnings``. Raises SignedError when the
    archive, with a ``refreshed`` index, has no signed module for this kernel and branch.
    """
    branch, module_type = wanted["branch"], wanted["module_type"]
    kernel_release(kernel)  # refuses a release no package can be named for
    names = set(archive.get("names") or ())
    server = _variant(names, branch, module_type, kernel)
    provisional = server is None
    if provisional:
        if refreshed:
            raise SignedError(refusal(names, kernel, branch, module_type))
        server = True
    chosen = series(branch, module_type, server)
    exact = modules_package(chosen, kernel)
    version = _driver_version(wanted, exact, archive.get("drivers") or {}, provisional)
    next_kernels, late = _next_kernels(chosen, kernel, packages, archive, version=version,
                                       refreshed=refreshed)
    provisional = provisional or late
    warnings = []
    depends = archive.get("depends") or {}
    named = [(exact, chosen), *userspace_series(branch, module_type, server)]
    userspace = [name for name, _own in named[1:]]
    moves = {name: moved_to(name, own, depends) for name, own in named}
    retired = [f"{name} brings {newer}" for name, newer in moves.items() if newer]
    if retired:
        raise SignedError(f"branch {branch} is retired in the package archive: its names are transitional "
                          f"packages ({'; '.join(retired)}), and a driver of another branch would come with "
                          "them; set nvidia_driver_branch to the branch they bring. Nothing was changed.")
    flavour = boot_flavour(kernel, packages)
    meta = flavour_package(chosen, flavour)
    newer = moved_to(meta, chosen, depends)
    metas = [meta] if (meta in names or provisional) and not newer else []
    if newer:
        warnings.append(f"{meta} is a transitional package that brings the {newer} modules: not followed; "
                        "the next kernel's signed modules of this branch are installed by the role's next "
                        "run, before any reboot (or move to the branch the archive builds now)")
    elif not metas:
        warnings.append(f"the archive has no {meta}: the next kernel's signed modules will not come with "
                        "the kernel upgrade; the role installs them on its next run, before any reboot")
    return {"install": [*userspace, exact], "pin": None, "hold": [*userspace, exact],
            "follow": [*metas, *next_kernels], "unversioned": [exact, *metas, *next_kernels],
            "version": version, "series": chosen, "provisional": provisional, "warnings": warnings}


def _variant(names, branch, module_type, kernel):
    """True (server series), False (desktop series) or None: which the archive has for the kernel."""
    for server in (True, False):
        if modules_package(series(branch, module_type, server), kernel) in names:
            return server
    return None


def _driver_version(wanted, exact, drivers, provisional):
    built = drivers.get(exact)
    if provisional or not built:
        return wanted.get("version") or None
    if wanted.get("version") and wanted["version"] != built:
        raise SignedError(f"{exact} carries the NVIDIA driver {built}, not nvidia_driver_version "
                          f"{wanted['version']}: the signed module and the userspace must be one version; "
                          f"set nvidia_driver_version to {built} or only the branch. Nothing was changed.")
    return built


def _next_kernels(chosen, kernel, packages, archive, *, version, refreshed):
    """Modules of the installed kernels newer than the running one, and whether the index lacked one."""
    names = set(archive.get("names") or ())
    found, late = [], False
    for release in newer_kernels(packages, kernel):
        name = modules_package(chosen, release)
        if name not in names:
            if refreshed:
                raise SignedError(
                    f"kernel {release} is installed and boots next, but the package archive has no {name}: "
                    f"the node would boot without its NVIDIA driver. Remove that kernel or wait for its "
                    "signed modules before rebooting. Nothing was changed.")
            late = True
        built = (archive.get("drivers") or {}).get(name)
        if built and version and built != version:
            raise SignedError(f"{name} carries the NVIDIA driver {built}, the running kernel's modules "
                              f"{version}: one userspace cannot serve both; upgrade the running kernel's "
                              "modules first. Nothing was changed.")
        found.append(name)
    return found, late
