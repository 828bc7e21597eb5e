# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The plan: what to do to get the requested driver on a host in a given state.

Pure Python, never reads anything: :func:`plan` runs :data:`PLAN_STEPS` over the
state (read by ``gpunode.driver.host``) and the request (``gpunode.driver.driver``).
"""

import re

from ansible.module_utils.gpunode.driver import el_signed, ubuntu_signed
from ansible.module_utils.gpunode.driver import packages as nvidia_packages
from ansible.module_utils.gpunode.driver.driver import (
    DKMS_MODULES,
    FABRICMANAGER,
    PACKAGE_METHODS,
    PERSISTENCED,
    DriverError,
    version_matches,
)
from ansible.module_utils.gpunode.driver.fabric_plan import plan_fabric
from ansible.module_utils.gpunode.driver.parsers import service_enabled, service_running
from ansible.module_utils.gpunode.host.packages import installed, version_known

#: The DKMS side a signed method leaves out, per method: Ubuntu's DKMS packages and the metapackages that
#: depend on them (not -no-dkms); NVIDIA's EL DKMS packages and the metapackages that pull them.
_DKMS_SIDE_RE = {"ubuntu-signed": re.compile(r"^nvidia-(dkms|headless|driver)-\d"),
                 "el-signed": re.compile(r"^(kmod-nvidia-\w+-dkms|nvidia-open|cuda-drivers(-\d+)?)$")}
#: The methods that install a distribution's signed modules (no DKMS build), and whose signature.
SIGNED_METHODS = {"ubuntu-signed": "Canonical's", "el-signed": "the distribution's"}


def needs_dkms_status(state, request):
    """Whether the plan depends on ``dkms status``: the driver is there and its module is not, or
    kernels that boot next are installed (:func:`boot_kernel_builds`)."""
    wanted = request["wanted"]
    on_disk = (state.get("module_on_disk") or {}).get("version")
    return version_matches(state.get("userspace_version"), wanted) and (
        not version_matches(on_disk, wanted) or bool(state.get("boot_kernels")))


def index_lookups(plan_result, request):
    """Packages whose presence in the apt index the plan must know (``apt-cache madison``)."""
    names = list(plan_result["prerequisites"]) + list(plan_result.get("kernel_modules") or [])
    if plan_result["install"] and request["packages"]:
        pin = request["packages"]["pin"]
        names += request["packages"]["install"] + ([pin] if pin else [])
    fabric = plan_result["fabric"] or {}
    return names + (fabric.get("install") or []) + (fabric.get("packages") or [])


#: The keys of a plan's steps, in their order in the result (then ``converged``, ``disruptive``, ``reasons``).
PLAN_KEYS = ("repair_dpkg", "install", "install_packages", "refresh_index", "prerequisites", "dkms_build",
             "dkms_kernels", "dkms_module", "dkms_version", "unhold", "hold", "remove", "kernel_modules",
             "blacklist_nouveau", "unload", "load", "reboot_required", "persistence", "fabric",
             "module_stream", "version_lock", "allow_erasing", "kernel_hold", "kernel_unhold",
             "kernel_record")


#: A plan that changes nothing; ``preinstalled`` plans only :data:`PREINSTALLED_STEPS` over it.
_LIST_STEPS = ("install_packages", "prerequisites", "dkms_kernels", "unhold", "hold", "remove",
               "kernel_modules", "persistence", "kernel_hold", "kernel_unhold")
_NONE_STEPS = ("dkms_module", "dkms_version", "fabric", "module_stream", "version_lock",
               "kernel_record")
EMPTY_STEPS = {key: None if key in _NONE_STEPS else [] if key in _LIST_STEPS else False
               for key in PLAN_KEYS}
#: The methods whose driver packages the role holds (``preinstalled``: those dpkg says own the loaded driver).
HOLDING_METHODS = (*PACKAGE_METHODS, "preinstalled")


def skipped(state, request):
    """What the role leaves alone on this host, with the reason (no systemd to run the daemons)."""
    if state.get("systemd", True) or request.get("image_build"):
        return []
    reasons = []
    modes = (state.get("smi") or {}).get("persistence_mode") or []
    if request["persistence"] and not (modes and all(mode == "Enabled" for mode in modes)):
        reasons.append(f"{PERSISTENCED}: no systemd on this host to run it")
    if request["fabricmanager"]:
        reasons.append(f"{FABRICMANAGER}: no systemd on this host to run it")
    return reasons


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
    parts, reasons = dict(EMPTY_STEPS), []
    for step in PREINSTALLED_STEPS if request["method"] == "preinstalled" else PLAN_STEPS:
        part, why = step(state, request, parts)
        parts.update(part)
        reasons.extend(why)
    steps = {key: parts[key] for key in PLAN_KEYS}
    steps["converged"] = steps["kernel_record"] is None and not any(
        value for key, value in steps.items()
        if key not in ("dkms_module", "dkms_version", "reboot_required", "install_packages", "version_lock",
                       "allow_erasing", "kernel_record"))
    steps["disruptive"] = (steps["install"] or steps["unload"] or steps["reboot_required"]
                           or bool((steps["fabric"] or {}).get("restart"))) and not request.get("image_build")
    steps["reasons"] = reasons
    return steps


# The steps of :func:`plan`, in order. Each is ``step(state, request, steps)`` over the plan so
# far (the parts of the steps before it) and returns ``(its part of the plan, its reasons)``.


def _building(steps):
    """Whether the run installs the driver or builds its module."""
    return steps["install"] or steps["dkms_build"]


def _builds(request, steps):
    """Whether the run builds a module (Canonical's signed modules are built and signed already)."""
    return (_building(steps) or bool(steps["dkms_kernels"])) and request["method"] not in SIGNED_METHODS


def plan_install(state, request, _steps):
    """``install`` (and its apt requests), or ``dkms_build`` of a registered module and version."""
    install, dkms_build, registered, reasons = install_step(state, request)
    if install and request.get("signed_auto"):
        method = request["method"]
        reasons.append(f"Secure Boot is on and no signing key is set: {SIGNED_METHODS[method]} signed "
                       f"NVIDIA modules (nvidia_driver_method: {method})")
    specs = _install_specs(request, state.get("packages"), state.get("version_set")) \
        if install and request["packages"] else []
    boot_kernels, boot_registered = boot_kernel_builds(state, request) if not install else ([], None)
    registered = registered or boot_registered
    reasons += [f"module {registered['module']}/{registered['version']} is not built for kernel {kernel}, "
                "which boots next" for kernel in boot_kernels]
    return {"install": install, "install_packages": specs, "dkms_build": dkms_build,
            "dkms_kernels": [state["kernel"]] * dkms_build + boot_kernels,
            "dkms_module": registered and registered["module"],
            "dkms_version": registered and registered["version"]}, reasons


def boot_kernel_builds(state, request):
    """``(kernels, registered)``: the kernels that boot next (``boot_kernels``: installed after the
    running one, with headers) for which DKMS has not installed the wanted driver's module, and the
    ``dkms status`` entry to build. A kernel that unattended-upgrades or dnf-automatic installed while
    DKMS's own hook failed (a half-configured dpkg, a build error) would boot with no NVIDIA module.
    Canonical's signed modules are packages of their own (``switch_steps``)."""
    registered = registered_module(state.get("dkms"), request["wanted"], request["module_type"])
    if not registered or request["method"] in SIGNED_METHODS:
        return [], None
    built = {e["kernel"] for e in state["dkms"] if e["status"] == "installed"
             and (e["module"], e["version"]) == (registered["module"], registered["version"])}
    missing = [kernel for kernel in state.get("boot_kernels") or [] if kernel not in built]
    return missing, registered if missing else None


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
        tools = request.get("build_prerequisites") or nvidia_packages.BUILD_PREREQUISITES
        prerequisites += [p for p in tools if not installed(packages, p)]
    return {"prerequisites": prerequisites}, []


def plan_hold(state, request, steps):
    """``unhold`` and ``hold``: the driver's packages released for an install, held after it."""
    packages = state.get("packages")
    install = steps["install"]
    held = held_packages(packages)
    hold_targets = list((request["packages"] or {}).get("hold") or [])
    if request.get("fabric") and request["method"] in PACKAGE_METHODS:
        hold_targets += request["fabric"]["pinned"]
    unhold, hold = [], []
    if packages is not None and request["method"] in HOLDING_METHODS:
        if install:
            unhold = sorted(name for name in held if nvidia_packages.is_driver_package(name))
        if request["hold"]:
            hold = [p for p in hold_targets if install or p not in held]
        else:
            unhold = sorted(set(unhold) | {p for p in hold_targets if p in held})
    if install and request.get("package_manager") == "dnf" and packages is not None \
            and request["method"] in HOLDING_METHODS:  # every package of the branch, by version
        hold += [nvidia_packages.el_branch_lock(request["branch"])] if request["hold"] else []
        unhold += sorted({nvidia_packages.el_branch_lock(nvidia_packages.upstream_version(
            packages[name]["version"]).split(".")[0]) for name in unhold if packages[name].get("version")})
    reasons = [f"not held: {', '.join(hold)}"] if hold and not install else []
    return {"unhold": unhold, "hold": hold}, reasons


def plan_kernel_hold(state, request, _steps):
    """``kernel_hold`` and ``kernel_unhold``: the kernel packages held so that no new kernel comes
    (:func:`~ansible.module_utils.gpunode.driver.packages.kernel_hold_targets`), or released, only
    those gpunode's record lists (a hold it found made is the operator's); ``kernel_record``: the
    record to write, None when it stays."""
    packages = state.get("packages")
    if packages is None:
        return {}, []
    held, recorded = held_packages(packages), sorted(state.get("kernel_hold_record") or ())
    hold = unhold = []
    if request.get("kernel_hold"):
        targets = nvidia_packages.kernel_hold_targets(state.get("running_kernel") or state.get("kernel"),
                                                      packages, request.get("package_manager"))
        hold = [name for name in targets if name not in held]
    else:
        unhold = [name for name in recorded if name in held]
    record = sorted({name for name in recorded if name in held} - set(unhold) | set(hold))
    reasons = [f"kernel not held: {', '.join(hold)}"] if hold else []
    reasons += [f"kernel held by gpunode, released: {', '.join(unhold)}"] if unhold else []
    return {"kernel_hold": hold, "kernel_unhold": unhold,
            "kernel_record": None if record == recorded else record}, reasons


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
    if request["persistence"] and (state.get("systemd", True) or request.get("image_build")):
        if request["method"] == "runfile" and not state.get("persistenced_unit"):
            persistence.append("unit")
        if not service_enabled(services, PERSISTENCED):
            persistence.append("enable")
        if not service_running(services, PERSISTENCED) and not steps["reboot_required"]:
            persistence.append("start")
    reasons = [f"{PERSISTENCED}: {', '.join(persistence)}"] if persistence and not _building(steps) else []
    return {"persistence": persistence}, reasons


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
    fabric = steps["fabric"] or {"install": [], "packages": []}
    needed += [(p, fabric["version"]) for p in fabric["install"]] + [(p, None) for p in fabric["packages"]]
    unknown = [p for p, v in needed if not version_known(state["index"], p, v)]
    reasons = [f"the package index does not know {', '.join(unknown)}"] if unknown else []
    return {"refresh_index": refresh_index or bool(unknown)}, reasons


def plan_el_branch(state, request, steps):
    """``module_stream``, ``version_lock`` and ``allow_erasing``: how an install on EL chooses the branch
    (NVIDIA's guide, "Kernel Modules"). EL 9: the dnf module stream to enable (``dnf module enable``,
    none enabled yet) or switch to (``dnf module switch-to``, another one enabled), None when it is
    enabled. EL 10: the ``dnf versionlock add`` spec that pins the branch before the install.
    ``allow_erasing``: the install replaces another flavour or branch (:func:`el_switch`)."""
    packages = request["packages"] or {}
    if not steps["install"] or not (packages.get("stream") or packages.get("lock")):
        return {}, []
    stream, enabled = packages.get("stream"), state.get("module_stream")
    module_stream = None
    if stream and stream.partition(":")[2] != enabled:
        command = "switch-to" if enabled else "enable"
        module_stream = {"stream": stream, "command": command, "enabled": enabled}
    reasons = [f"dnf module stream {stream} ({'from ' + enabled if enabled else 'not enabled'})"] \
        if module_stream else []
    switch = el_switch(state, request, module_stream)
    if switch and not (module_stream and module_stream["command"] == "switch-to"):
        reasons.append(f"dnf installs with --allowerasing: {switch}")
    return {"module_stream": module_stream, "version_lock": packages.get("lock"),
            "allow_erasing": bool(switch)}, reasons


def el_switch(state, request, module_stream):
    """Why an install on EL replaces installed driver packages, or None: another module stream enabled,
    the other flavour's DKMS package installed (:data:`EL_DKMS_PACKAGES`, conflicting), or another
    branch's driver. NVIDIA's guide switches with ``--allowerasing`` ("Switching between Driver Module
    Flavors": ``dnf module switch-to nvidia-driver:<stream> --allowerasing`` on EL 8/9,
    ``dnf install --allowerasing nvidia-open`` or ``cuda-drivers`` on EL 10); a first install
    or a reinstall of the same flavour and branch erases nothing, so it goes without."""
    if module_stream and module_stream["command"] == "switch-to":
        return f"the stream {module_stream['stream']} replaces {module_stream['enabled']}"
    other = [name for flavour, name in nvidia_packages.EL_DKMS_PACKAGES.items()
             if flavour != request["module_type"] and installed(state.get("packages") or {}, name)]
    if other:
        return f"{other[0]} is installed, {request['module_type']} modules are wanted"
    userspace = state.get("userspace_version")
    if userspace and request.get("branch") and userspace.split(".")[0] != request["branch"]:
        return f"driver {userspace} is installed, branch {request['branch']} is wanted"
    return None


def plan_preinstalled_persistence(state, request, steps):
    """``persistence`` of an adopted driver: only where persistence mode is off and systemd has
    nvidia-persistenced's unit to enable and start (the image may run it its own way)."""
    modes = (state.get("smi") or {}).get("persistence_mode") or []
    if (modes and all(mode == "Enabled" for mode in modes)) or not state.get("persistenced_unit"):
        return {"persistence": []}, []
    return plan_persistence(state, request, steps)


def plan_image_build(state, request, steps):
    """An image build (docs/ROLES.md, "Image bake mode"): the module built for the image's kernel
    (``state["kernel"]``: DKMS ``-k``, also right after an install, whose package hook builds for the
    kernel running the build), units enabled; nothing loaded, unloaded, started or rebooted: the boot
    does it."""
    if not request.get("image_build"):
        return {}, []
    kernels = steps["dkms_kernels"]
    if steps["install"] and _builds(request, steps) and state["kernel"] not in kernels:
        kernels = [state["kernel"], *kernels]
    fabric = steps["fabric"] and dict(steps["fabric"], modules=[], start=[], restart=[], stop=[])
    return {"dkms_kernels": kernels, "unload": False, "load": False, "reboot_required": False,
            "fabric": fabric, "persistence": [p for p in steps["persistence"] if p != "start"]}, \
        [f"image build for kernel {state['kernel']}: the module loads, and its services start, at boot"]


PREINSTALLED_STEPS = (plan_hold, plan_kernel_hold, plan_preinstalled_persistence)
PLAN_STEPS = (plan_install, plan_signing, plan_dpkg, plan_prerequisites, plan_hold, plan_kernel_hold,
              plan_module, plan_blacklist, plan_persistence, plan_fabric, plan_switch, plan_index,
              plan_el_branch, plan_image_build)


def install_step(state, request):
    """Whether the driver is (re)installed or only built for the running kernel by DKMS:
    ``(install, dkms_build, registered, reasons)``; ``registered``: the ``dkms status`` entry
    (``module``, ``version``) to build, or None."""
    wanted = request["wanted"]
    packages = state.get("packages")
    on_disk = state.get("module_on_disk") or {}
    userspace = state.get("userspace_version")
    reasons = []
    install = dkms_build = False
    chosen = None
    if not version_matches(userspace, wanted):
        install = True
        reasons.append(f"userspace driver is {userspace or 'absent'}, wanted {wanted}")
    elif not version_matches(on_disk.get("version"), wanted):
        chosen = registered_module(state.get("dkms"), wanted, request["module_type"])
        if chosen and request["method"] not in SIGNED_METHODS:
            dkms_build = True
            reasons.append(f"module {chosen['module']}/{chosen['version']} is registered with DKMS but not "
                           f"built for kernel {state.get('kernel')}")
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
    return install, dkms_build, chosen if dkms_build else None, reasons


def registered_module(entries, wanted, module_type):
    """The ``dkms status`` entry of NVIDIA's module at ``wanted`` that a build for the running kernel
    uses, the names of :data:`DKMS_MODULES` for ``module_type`` in their order; None when DKMS has none."""
    names = DKMS_MODULES.get(module_type) or DKMS_MODULES["proprietary"]
    matching = [e for e in entries or [] if e["module"] in names and version_matches(e["version"], wanted)]
    return min(matching, key=lambda e: names.index(e["module"])) if matching else None


def switch_steps(state, request, install):
    """``(remove, kernel_modules)``: the packages of the other method an install removes
    (DKMS <-> Ubuntu's signed modules), and the signed modules of kernels that boot next
    (the flavour's metapackage, kernels installed but not running) that are missing."""
    packages = state.get("packages")
    if packages is None or request["method"] not in PACKAGE_METHODS:
        return [], []
    remove, el = [], request.get("package_manager") == "dnf"
    if install and request["method"] in SIGNED_METHODS and el:
        remove = sorted(n for n in nvidia_packages.EL_DKMS_PACKAGES.values() if installed(packages, n))
    elif install and request["method"] in SIGNED_METHODS:
        remove = ubuntu_signed.installed_dkms_packages(packages)
    elif install and request.get("signed_fallback"):
        remove = (el_signed.installed_kmods if el else ubuntu_signed.installed_signed_packages)(packages)
    follow = (request["packages"] or {}).get("follow") or []
    return remove, [p for p in follow if not installed(packages, p)]


def signed_fallback(state, request):
    """The request, switched to the distribution's signed modules where the packages method would build
    an unsigned module under Secure Boot (which :func:`plan` refuses otherwise): ``ubuntu-signed`` on
    Ubuntu, ``el-signed`` on the RHEL family with the open modules (its packages kept for their stream
    or lock; ``el_signed.offer`` refuses a distribution that signs none)."""
    if not request.get("signed_fallback") or not state.get("secure_boot") or request["signing"]:
        return request
    el = request.get("package_manager") == "dnf"
    install, dkms_build, _registered, _reasons = install_step(state, request)
    if not (install or dkms_build) or (el and request["module_type"] != "open"):
        return request
    # said among the plan's reasons when it changes something (quiet on a converged node)
    return dict(request, method="el-signed" if el else "ubuntu-signed",
                packages=request["packages"] if el else None, signed_fallback=False, signed_auto=True)


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


def held_packages(packages):
    """The installed packages dpkg holds."""
    return {name for name, entry in (packages or {}).items()
            if entry["want"] == "hold" and entry["status"] not in ("not-installed", "config-files")}


def _install_specs(request, packages, version_set=None):
    """apt or dnf requests for an install: the top-level packages at the version, and with a
    version, every package the repositories say that version's install takes (``version_set``,
    :func:`~ansible.module_utils.gpunode.driver.host.read_version_set`) and every installed
    package of that branch at another version (apt takes a dependency's newest version and
    refuses an older exact one it is not asked for; it does not downgrade one on its own either).
    One installed at the version needs no request, and may come from a source the node no
    longer has (an image's package, a repository since removed): apt could not locate it."""
    version = request["version"]
    specs = []
    pin = request["packages"]["pin"]
    if pin:
        specs.append(pin)
    names = list(request["packages"]["install"])
    if version:
        prefix = request["branch"] + "."
        names += [name for name in version_set or () if name not in names
                  and nvidia_packages.upstream_version(installed(packages or {}, name) or "") != version]
        names += sorted(name for name, entry in (packages or {}).items()
                        if nvidia_packages.is_driver_package(name) and installed(packages, name)
                        and nvidia_packages.upstream_version(entry["version"] or "").startswith(prefix)
                        and nvidia_packages.upstream_version(entry["version"] or "") != version)
        names = [name for name in names if name != pin and not name.startswith("nvidia-driver-pinning-")]
        if request["method"] in SIGNED_METHODS:  # the DKMS side goes (plan's remove)
            names = [name for name in names if not _DKMS_SIDE_RE[request["method"]].match(name)]
    unversioned = request["packages"].get("unversioned") or ()
    for name in names:
        spec = name if name in unversioned else \
            nvidia_packages.version_spec(name, version, request.get("package_manager") or "apt")
        if spec not in specs:
            specs.append(spec)
    return specs
