# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What ``nvidia_driver_state`` reads from a node: packages, services, the module on
disk, DKMS, Secure Boot, nvidia-smi, the apt index and the initramfs tool.

Commands go through a :class:`~ansible.module_utils.gpunode.host.commands.Host` (the
module's ``get_bin_path`` and ``run_command``, always with the C locale), so tests script
them; systemd through ``gpunode.host.systemd``; files are read
under the roots given. A reading that cannot be trusted raises
:class:`~ansible.module_utils.gpunode.driver.driver.DriverError`.
"""

import os

from ansible.module_utils.gpunode.driver import el_signed, fabric_plan, ubuntu_signed
from ansible.module_utils.gpunode.driver import packages as nvidia_packages
from ansible.module_utils.gpunode.driver.driver import (
    DKMS_MODULES,
    FABRICMANAGER,
    PERSISTENCED,
    SECURE_BOOT_EFIVAR,
    DriverError,
    kernel_key,
    kernels_after,
)
from ansible.module_utils.gpunode.driver.gpu import read_loaded
from ansible.module_utils.gpunode.driver.parsers import (
    blacklist_complete,
    module_from_modinfo,
    parse_dkms_status,
    parse_efi_secure_boot,
    parse_mokutil_sb_state,
    parse_smi_query,
    service_exists,
    userspace_version_from_names,
)
from ansible.module_utils.gpunode.driver.plan import (
    needs_dkms_status,
)
from ansible.module_utils.gpunode.driver.roots import (
    KERNEL_HOLD_RECORD,
    find_smi,
    lib_dirs,
    location,
    origin,
    runfile_traces,
)
from ansible.module_utils.gpunode.host import systemd
from ansible.module_utils.gpunode.host.files import (
    exists,
    glob,
    is_dir,
    listdir,
    read_file,
    read_text,
    realpath,
)
from ansible.module_utils.gpunode.host.packages import (
    ADMINDIR,
    DpkgError,
    exact_depends,
    installed,
    manager,
    parse_madison,
)
from ansible.module_utils.gpunode.host.packages_rpm import RpmError

LIB_DIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"]
#: where the kernels' modules and build trees (``<kernel>/build``, the headers) are
MODULES_DIR = "/lib/modules"
INITRAMFS_TOOLS = (("update-initramfs", ["-u"]), ("dracut", ["--force"]))
KERNEL_FLAG = {"update-initramfs": "-k", "dracut": "--kver"}


def _read_bytes(path):
    try:
        return read_file(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def read_module_on_disk(host, kernel):
    """What ``modinfo -k KERNEL nvidia`` says; None without the module, or without kmod (images
    without it: the loaded module is read from sysfs and procfs instead)."""
    modinfo = host.which("modinfo")
    if not modinfo:
        return None
    rc, out, _err = host.run([modinfo, "-k", kernel, "nvidia"])
    if rc != 0:
        return None
    try:
        return module_from_modinfo(out)
    except DriverError as exc:
        raise DriverError(f"modinfo -k {kernel} nvidia: {exc}") from exc


def installed_kernels(marker="build"):
    """The releases under /lib/modules that have ``<kernel>/<marker>``: ``build`` (their headers: DKMS can
    build for them), ``vmlinuz`` (installed: EL's kernel-core puts it there)."""
    try:
        releases = listdir(MODULES_DIR)
    except OSError:
        return []
    return [r for r in releases if exists(os.path.join(MODULES_DIR, r, marker))]


def later_kernels(running, marker="build"):
    """The kernels installed after the running one (newer: the boot loader starts the newest next), oldest
    first, that have ``<kernel>/<marker>`` (:func:`installed_kernels`)."""
    return kernels_after(running, installed_kernels(marker))


def image_kernel(requested):
    """The kernel an image build builds the module for: ``requested`` (gpunode_image_kernel), installed
    under /lib/modules, else the newest there with headers, whatever kernel runs the build."""
    if requested and not is_dir(os.path.join(MODULES_DIR, requested)):
        raise DriverError(f"image build: gpunode_image_kernel {requested} is not installed ({MODULES_DIR}/"
                          f"{requested} does not exist); nothing was changed")
    kernels = [requested] if requested else installed_kernels()
    if not kernels:
        raise DriverError(f"image build: no kernel under {MODULES_DIR} has its headers (a build link) to "
                          "build the NVIDIA module for; install the image's kernel headers or set "
                          "gpunode_image_kernel; nothing was changed")
    return max(kernels, key=kernel_key)


def read_dkms(host):
    dkms = host.which("dkms")
    if not dkms:
        return []
    # every module: NVIDIA's registers as nvidia or nvidia-open (driver.DKMS_MODULES)
    rc, out, err = host.run([dkms, "status"])
    if rc != 0:
        raise DriverError(f"dkms status failed: {err.strip() or out.strip()}")
    names = {name for names in DKMS_MODULES.values() for name in names}
    return [e for e in parse_dkms_status(out) if e["module"] in names]


def read_userspace(lib_dirs):
    """``(version, path)`` of the newest ``libnvidia-ml.so.<version>`` in ``lib_dirs``, or (None, None)."""
    paths = []
    for directory in lib_dirs:
        for pattern in ("libnvidia-ml.so.*", "*/libnvidia-ml.so.*"):
            paths.extend(glob(os.path.join(directory, pattern)))
    version = userspace_version_from_names(os.path.basename(p) for p in paths)
    found = [p for p in paths if version and os.path.basename(p) == f"libnvidia-ml.so.{version}"]
    return version, (sorted(found)[0] if found else None)


def read_owners(host, paths):
    """The packages the node's package manager (dpkg or rpm, ``gpunode.host.packages.manager``)
    says own ``paths``; none without one."""
    backend = manager(host, ADMINDIR)
    return backend.owners(paths) if backend is not None else []


def read_origin(host, place, files, packages, version):
    """The origin of the loaded driver (``gpunode.driver.roots.origin``): the installed driver
    packages of its version when dpkg lists them (no command), else who owns its ``files``."""
    owners = [name for name, entry in (packages or {}).items()
              if nvidia_packages.is_driver_package(name) and installed(packages, name)
              and (entry.get("version") or "").split(":")[-1].startswith(version)]
    if not owners and not place["operator"]:
        paths = {realpath(p) for p in files if p} | {p for p in files if p}
        owners = read_owners(host, sorted(paths))
    return origin(place, owners, runfile_traces(exists))


def read_packages(host, admindir):
    """The installed packages (dpkg's, or rpm's with dnf's version locks as holds; one shape,
    ``gpunode.host.packages``) and the reasons a ``dpkg --configure -a`` is needed; (None, [])
    without a package manager gpunode knows."""
    backend = manager(host, admindir)
    if backend is None:
        return None, []
    try:
        packages = backend.packages()
    except (DpkgError, RpmError) as exc:
        raise DriverError(str(exc)) from exc
    return packages, backend.interrupted(packages)


def read_services(host, request=None):
    """The persistence daemon's and the fabric manager's units, and those the fabric runs or masks ({}
    without systemd)."""
    fabric = (request or {}).get("fabric") or {"units": [], "mask": []}
    units = [PERSISTENCED, FABRICMANAGER,
             *(unit for unit in fabric["units"] + fabric["mask"] if unit != FABRICMANAGER)]
    return systemd.services_state(host, [f"{unit}.service" for unit in units])


def read_fabric(host, params, request, kernels):
    """What ``fabric_plan.plan_fabric`` compares: the IB modules loaded, the fabric's files, the loaded
    nvidia module's options (None unread), the kernels without ``mlx5_ib`` (``modinfo -k``, where
    Ubuntu's linux-modules-extra carries it); without a fabric only the boot files gpunode wrote for
    one (None: none)."""
    want = request.get("fabric")
    if not want:
        files = {path: read_text(path, DriverError) for path in fabric_plan.boot_files()}
        return {"files": files} if any(text is not None for text in files.values()) else None
    modinfo = host.which("modinfo") if want["modules_extra"] else None
    params_text = read_text(os.path.join(params["proc_root"], "driver", "nvidia", "params"), DriverError)
    imex = (fabric_plan.IMEX_NODES, fabric_plan.IMEX_CONFIG) if want["imex_nodes"] else ()
    return {"loaded": read_loaded(params["sysfs_root"], params["proc_root"], want["modules"])["modules"],
            "files": {path: read_text(path, DriverError)
                      for path in dict.fromkeys([*fabric_plan.boot_files(), *want["boot_files"], *imex])},
            "nvidia_params": None if params_text is None else fabric_plan.parse_settings(params_text, ":"),
            "kernels_without_ib": [kernel for kernel in kernels
                                   if modinfo and host.run([modinfo, "-k", kernel, "mlx5_ib"])[0]]}


def read_secure_boot(host, sysfs_root):
    """True or False, or None when neither the EFI variable nor ``mokutil`` tells."""
    efi = os.path.join(sysfs_root, "firmware", "efi")
    data = _read_bytes(os.path.join(efi, "efivars", SECURE_BOOT_EFIVAR))
    if data is not None:
        try:
            return parse_efi_secure_boot(data)
        except DriverError as exc:
            raise DriverError(f"{efi}/efivars/{SECURE_BOOT_EFIVAR}: {exc}") from exc
    if not is_dir(efi):
        return False  # booted by BIOS: no Secure Boot
    mokutil = host.which("mokutil")
    if mokutil:
        _rc, out, err = host.run([mokutil, "--sb-state"])
        return parse_mokutil_sb_state(out + err)
    return None


def read_smi(host, smi=None):
    """The driver version and persistence mode per GPU, with ``error`` when nvidia-smi does not answer."""
    smi = smi or host.which("nvidia-smi")
    if not smi:
        return {"error": "nvidia-smi not found", "driver_versions": [], "persistence_mode": []}
    rc, out, err = host.run([smi, "--query-gpu=driver_version,persistence_mode", "--format=csv,noheader"])
    if rc != 0:
        error = out.strip() or err.strip() or f"rc {rc}"
        return {"error": error, "driver_versions": [], "persistence_mode": []}
    try:
        result = parse_smi_query(out)
    except DriverError as exc:
        return {"error": str(exc), "driver_versions": [], "persistence_mode": []}
    result["error"] = None
    return result


def refresh_index(host):
    """Download the package index again (``nvidia_driver_state``'s ``update_cache``) through the
    node's package manager; True. Raises DriverError on a node with neither apt nor dnf."""
    backend = manager(host, ADMINDIR)
    if backend is None:
        raise DriverError("update_cache: the node has neither apt nor dnf; nothing was read or written")
    backend.refresh_index()
    return True


def read_index(host, names):
    """``apt-cache madison`` of ``names``: what the package index knows, or None without apt."""
    madison = host.which("apt-cache")
    if not madison or not names:
        return None
    _rc, out, _err = host.run([madison, "madison", *names])
    return parse_madison(out)


def read_version_set(host, names, version, package_manager="apt"):
    """The packages an install of ``names`` at driver ``version`` takes at that very version, as the
    repositories say, ``names`` first: apt, what they depend on with ``(= <version>-...)``
    (``apt-cache show``); dnf, what provides their requirements at the version (``dnf repoquery
    --requires --resolve``); and so on down. [] without the tool."""
    tool = host.which("dnf" if package_manager == "dnf" else "apt-cache")
    found, todo = [], list(names) if tool else []
    while todo:
        found += todo
        if package_manager == "dnf":
            _rc, out, _err = host.run([tool, "repoquery", "--quiet", "--requires", "--resolve", "--qf",
                                       "%{name} %{version}", *(f"{name}-{version}" for name in todo)])
            depends = [line.split()[0] for line in out.splitlines() if line.split()[1:] == [version]]
        else:
            depends = exact_depends(host.run([tool, "show", *todo])[1], version)
        todo = sorted(set(depends) - set(found))
    return found


def read_signed_archive(host, request, state):
    """The ``linux-modules-nvidia-*`` names apt knows, the driver of the candidates, and what the
    packages the choice names depend on (a retired branch's are transitional)."""
    cache = host.which("apt-cache")
    if not cache:
        return {"names": [], "drivers": {}}
    _rc, out, _err = host.run([cache, "pkgnames", ubuntu_signed.MODULES_PREFIX])
    names = sorted(set(out.split()))
    known = set(names)
    wanted = ubuntu_signed.shown(request["branch"], request["module_type"], state["kernel"],
                                 state["packages"])
    # the modules packages apt knows, and the userspace packages (apt-cache show skips unknown names)
    asked = [name for name in wanted if name in known or not name.startswith(ubuntu_signed.MODULES_PREFIX)]
    drivers, depends = {}, {}
    if asked:
        _rc, out, _err = host.run([cache, "show", "--no-all-versions", *asked])
        drivers, depends = ubuntu_signed.parse_show(out), ubuntu_signed.parse_depends(out)
    return {"names": names, "drivers": drivers, "depends": depends}


def read_el_signed(host, offer, kernel):
    """``offer`` (``el_signed.offer``) with ``kmods``: what its repository alone has of its kmod
    (``dnf repoquery --repo``; NVIDIA's own precompiled kmods, signed with NVIDIA's key, never count),
    None with the ``error`` when the repository cannot be read; ``boot_kernels``: the kernels installed
    after ``kernel``."""
    dnf = host.which("dnf")
    query = [dnf, "repoquery", "--quiet", "--repo", offer["repository"], "--qf", el_signed.QUERY_FORMAT]
    rc, out, err = host.run([*query, offer["kmod"] + "*"]) if dnf else (1, "", "dnf not found")
    return dict(offer, kmods=el_signed.parse_query(out) if rc == 0 else None,
                error=(err or out).strip() or f"rc {rc}", boot_kernels=later_kernels(kernel, "vmlinuz"))


def read_module_stream(host, request):
    """The enabled stream of the dnf module the request's stream belongs to (EL 9), or None."""
    stream = ((request.get("packages") or {}).get("stream") or "").partition(":")[0]
    backend = manager(host, ADMINDIR) if stream else None
    return backend.module_stream(stream) if backend is not None and backend.name == "dnf" else None


def read_versionlock_plugin(host, request):
    """On a dnf node: whether dnf's versionlock plugin (the holds) is installed; None elsewhere."""
    if request.get("package_manager") != "dnf":
        return None
    backend = manager(host, ADMINDIR)
    return backend.versionlock_plugin() if backend is not None and backend.name == "dnf" else None


def initramfs_command(host, package_manager="apt", kernel=None):
    """The command that rebuilds the initramfs: ``update-initramfs -u`` on Debian and Ubuntu,
    ``dracut --force`` on the RHEL family (RHEL 9, "Managing, monitoring and updating the kernel":
    ``dracut -f`` regenerates the running kernel's initramfs); for ``kernel`` (an image's) with
    ``-k`` / ``--kver``; None without either."""
    tools = INITRAMFS_TOOLS if package_manager != "dnf" else tuple(reversed(INITRAMFS_TOOLS))
    for tool, args in tools:
        path = host.which(tool)
        if path:
            return [path, *args, *([KERNEL_FLAG[tool], kernel] if kernel else [])]
    return None


def read_driver(host, params, packages=False, module_on_disk=None):
    """The loaded driver, where its tools are and who put it there:
    ``{"loaded", "location", "origin", "userspace_version"}`` (``packages``: dpkg's, read here
    when not given)."""
    place = location(find_smi(host.which))
    userspace, library = read_userspace([*lib_dirs(place), *LIB_DIRS])
    loaded = read_loaded(params["sysfs_root"], params["proc_root"])
    found = None
    if loaded["version"] and (userspace or place["smi"]):
        if packages is False:  # no command on a host without a loaded driver
            packages = read_packages(host, ADMINDIR)[0]
        files = [place["smi"], library, (module_on_disk or {}).get("path")]
        found = read_origin(host, place, files, packages, loaded["version"])
    return {"loaded": loaded, "location": place, "origin": found, "userspace_version": userspace}


def read_state(host, params, os_info, request):
    """Everything the plan needs, in as few commands as the host allows.

    ``params``: the module's (roots, paths, signing files); ``os_info``: ``kernel``,
    ``distribution``, ``distribution_version``, ``architecture``.
    """
    kernel = os_info["kernel"]
    packages, dpkg_interrupted = read_packages(host, ADMINDIR)
    services = read_services(host, request)
    module_on_disk = read_module_on_disk(host, kernel)
    kernels = [kernel, *later_kernels(kernel)]
    state = {
        "kernel": kernel,
        "headers_present": is_dir(os.path.join(MODULES_DIR, kernel, "build")),
        "boot_kernels": kernels[1:],
        "module_on_disk": module_on_disk,
        "dkms": None,
        **read_driver(host, params, packages, module_on_disk),
        "systemd": systemd.available(host),
        "packages": packages,
        "dpkg_interrupted": dpkg_interrupted,
        "services": services,
        "persistenced_unit": service_exists(services, PERSISTENCED),
        "blacklist_complete": blacklist_complete(read_text(params["blacklist_path"], DriverError)),
        "secure_boot": read_secure_boot(host, params["sysfs_root"]),
        "signing_files_missing": [p for p in (params["signing_key"], params["signing_cert"])
                                  if p and not exists(p)],
        "index": None,
        "smi": None,
        "initramfs_command": initramfs_command(host, request.get("package_manager"),
                                               kernel if request.get("image_build") else None),
        "module_stream": read_module_stream(host, request),
        "versionlock_plugin": read_versionlock_plugin(host, request),
        "running_kernel": (read_text(os.path.join(params["proc_root"], "sys/kernel/osrelease"), DriverError)
                           or kernel).strip(),
        "kernel_hold_record": (read_text(KERNEL_HOLD_RECORD, DriverError) or "").split(),
        "fabric": read_fabric(host, params, request, kernels),
    }
    if request.get("image_build"):  # the build host's own driver is not the image's: nothing loaded
        state["loaded"] = {"modules": [], "version": None, "module_type": None}
    if needs_dkms_status(state, request):
        state["dkms"] = read_dkms(host)
    state.update((key, os_info[key]) for key in ("distribution", "distribution_version", "architecture"))
    return state
