# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What an NVLink fabric needs beside the driver: the request's ``fabric`` and the plan's step ``fabric``.

The kind is the facts' ``fabric`` (``gpunode.driver.fabric``, the inventory's ``nvidia_driver_fabric``
included); notes/fabric.md sections 1, 2 and 4 give the sources.

- ``nvswitch`` (HGX A100/H100/H200): the fabric manager at exactly the driver's version.
- ``nvlink5`` (HGX B200/B300): also NSCQ and NVSDM (amd64, from 570) at the driver's version, and
  ``nvlsm`` and ``infiniband-diags`` at their own; ``mlx5_core``, ``mlx5_ib`` and ``ib_umad`` loaded
  before the fabric manager starts (its unit starts NVLSM on the management port first, and its
  precheck refuses without ``ib_umad``) and at every boot (modules-load.d); on Ubuntu
  ``linux-modules-extra-<kernel>`` for each kernel (running, or booting next) without ``mlx5_ib``
  (the cloud kernels: gpu-operator issue 2781).
- ``mnnvl`` (GB200/GB300 NVL72 trays): no fabric manager (NMX-Controller runs it on the switch trays):
  its unit and NVLSM's masked where an image brought them; ``nvidia-imex`` at the driver's version;
  ``NVreg_CreateImexChannel0=1`` and, from 580, ``NVreg_CoherentGPUMemoryMode=driver`` (CDMM) as
  module options in modprobe.d (a loaded module without them is reloaded); IMEX run by the host
  (``imex_mode`` ``host``: its ``config.cfg`` settings, the nodes file, the service enabled) or by
  the DRA driver's ComputeDomain daemons (``dra``: the service stopped, disabled and masked, or the
  daemons fail with NV_ERR_IN_USE).
- ``peermem`` (the node uses GPUDirect RDMA, whatever its fabric): ``nvidia_peermem`` loaded after the
  IB stack and the driver (not while a reboot is pending) and at every boot by a unit of its own
  ordered after ``systemd-modules-load`` and DOCA-OFED's ``openibd``: ``openibd`` replaces the inbox IB
  modules at boot and cannot while ``nvidia_peermem`` holds them (Mellanox/doca-driver-build PR 481),
  which a modules-load.d entry (gpunode before 2026-11-29, removed on the next run) did.

Every package at the driver's version is held with the driver's and moves with it.
"""

from ansible.module_utils.gpunode.driver import packages as nvidia_packages
from ansible.module_utils.gpunode.driver.driver import (
    FABRICMANAGER,
    DriverError,
    fabric_kind,
    version_matches,
)
from ansible.module_utils.gpunode.driver.parsers import service_enabled, service_exists, service_running
from ansible.module_utils.gpunode.host.packages import installed

IMEX, NVLSM = "nvidia-imex", "nvlsm"
IB_MODULES = ("mlx5_core", "mlx5_ib", "ib_umad")
NVLINK5_PACKAGES = ("nvlsm", "infiniband-diags")
#: Those the distribution's archive serves (not NVIDIA's repository: the offline bundle carries them so).
DISTRIBUTION_PACKAGES = ("infiniband-diags",)
#: The Ubuntu package that carries ``mlx5_ib`` for a kernel (Ubuntu's cloud kernels ship it only there).
MODULES_EXTRA = "linux-modules-extra-{kernel}"
NVSDM_FROM, CDMM_FROM = 570, 580
NVSDM_MACHINES = ("x86_64", "amd64")
MODULES_LOAD = "/etc/modules-load.d/gpunode-nvidia-fabric.conf"
PEERMEM, PEERMEM_LOAD = "nvidia_peermem", "/etc/modules-load.d/gpunode-nvidia-peermem.conf"
PEERMEM_SERVICE = "gpunode-nvidia-peermem"
PEERMEM_UNIT = f"/etc/systemd/system/{PEERMEM_SERVICE}.service"
MODPROBE = "/etc/modprobe.d/gpunode-nvidia-fabric.conf"
IMEX_CONFIG = "/etc/nvidia-imex/config.cfg"
IMEX_NODES = "/etc/nvidia-imex/nodes_config.cfg"
HEADER = "# Written by gpunode (nvidia_driver): what the NVLink fabric needs.\n"
PEERMEM_HEADER = "# Written by gpunode (nvidia_driver): GPUDirect RDMA (nvidia_driver_peermem).\n"
PEERMEM_UNIT_TEXT = PEERMEM_HEADER + """[Unit]
Description=Load nvidia_peermem once the InfiniBand stack is up (gpunode)
# DOCA-OFED's openibd replaces the inbox IB modules at boot: nvidia_peermem loaded before would stop it
After=systemd-modules-load.service openibd.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=modprobe nvidia_peermem

[Install]
WantedBy=multi-user.target
"""


def with_fabric(request, params, gpu, os_info):
    """``request`` (``driver.build_request``'s) with ``fabric``: what the host's fabric needs, or None
    (an adopted driver's image brings its own)."""
    if request["method"] == "preinstalled":
        return request
    source = params.get("package_source") or "distro"

    def name(base):
        family = nvidia_packages.release_of(os_info["distribution"], os_info["distribution_version"])[0]
        return nvidia_packages.fabric_package(base, family, source, request["branch"])

    try:
        want = fabric_request(params, gpu, request, name, os_info)
    except nvidia_packages.PackageError as exc:
        raise DriverError(str(exc)) from exc
    return dict(request, fabric=want)


def fabric_request(params, gpu, request, name, os_info):
    """What the host's fabric needs, None when nothing (``name(base)``: the package's name for the branch
    and source, ``packages.fabric_package``; ``os_info``: ``distribution``, ``architecture``)."""
    kind, major = fabric_kind(gpu), int(request["branch"])
    want = {"kind": kind, "pinned": [], "unpinned": [], "modules": [], "modules_extra": False,
            "boot_files": {}, "nvidia_params": {}, "units": [], "mask": [], "imex_nodes": None,
            "imex_config": {}}
    if request["fabricmanager"]:
        want["pinned"].append(request["fabricmanager_package"])
        want["units"].append(FABRICMANAGER)
        if kind == "nvlink5":
            nvsdm = os_info["architecture"] in NVSDM_MACHINES and major >= NVSDM_FROM
            want["pinned"] += [name("libnvidia-nscq"), *([name("libnvsdm")] if nvsdm else [])]
            want.update(unpinned=list(NVLINK5_PACKAGES), modules=list(IB_MODULES),
                        modules_extra=str(os_info["distribution"]).lower() == "ubuntu")
            want["boot_files"][MODULES_LOAD] = HEADER + "".join(f"{module}\n" for module in IB_MODULES)
    elif kind == "mnnvl":
        want["mask"] += [FABRICMANAGER, NVLSM]
    if kind == "mnnvl":
        _imex(want, params, name, major)
    if params.get("peermem"):  # after the IB modules: GPUDirect RDMA (notes/fabric.md section 3)
        want["modules"].append(PEERMEM)
        want["boot_files"][PEERMEM_UNIT] = PEERMEM_UNIT_TEXT
        want["units"].append(PEERMEM_SERVICE)
    return want if want["pinned"] or want["mask"] or want["modules"] else None


def _imex(want, params, name, major):
    """A tray's IMEX: the package, the module options, and who runs it (``imex_mode``)."""
    want["nvidia_params"] = {"CreateImexChannel0": "1", **({"CoherentGPUMemoryMode": "driver"}
                                                           if major >= CDMM_FROM else {})}
    options = " ".join(f"NVreg_{key}={value}" for key, value in want["nvidia_params"].items())
    want["boot_files"][MODPROBE] = f"{HEADER}options nvidia {options}\n"
    want["pinned"].append(name(IMEX))
    if params.get("imex_mode") != "host":
        want["mask"].append(IMEX)
        return
    if not params.get("imex_nodes"):
        raise DriverError("nvidia_driver_imex_mode host needs the NVLink domain's nodes: set "
                          "nvidia_driver_imex_nodes_group to the inventory group of this tray's NVL72 domain")
    want["imex_nodes"] = "".join(f"{address}\n" for address in params["imex_nodes"])
    want["imex_config"] = {"IMEX_CMD_ENABLED": "1", **{key: str(value) for key, value in
                                                       (params.get("imex_config") or {}).items()},
                           "IMEX_NODE_CONFIG_FILE": IMEX_NODES}
    want["units"].append(IMEX)


def parse_settings(text, separator="="):
    """``KEY=value`` lines (IMEX's config.cfg; ``Key: value`` with ``:``, /proc/driver/nvidia/params, its
    strings quoted) as a dict; comments and other lines skipped."""
    pairs = (line.partition(separator) for line in (text or "").splitlines()
             if not line.lstrip().startswith("#"))
    return {key.strip(): value.strip().strip('"') for key, sep, value in pairs if sep and key.strip()}


def from_distribution(name):
    """Whether the fabric's unpinned package ``name`` comes from the distribution's archive."""
    return name in DISTRIBUTION_PACKAGES or name.startswith(MODULES_EXTRA.format(kernel=""))


def boot_files():
    """The boot files gpunode writes for a fabric: read on every host, removed (``remove``) where gpunode
    wrote one that nothing wants now (peermem or the fabric turned off): no boot loads what was turned off."""
    return (MODULES_LOAD, PEERMEM_LOAD, PEERMEM_UNIT, MODPROBE)


def stale_boot_files(files, want):
    """The boot files gpunode wrote (its header first) that ``want`` (None: no fabric) no longer asks for."""
    wanted = (want or {}).get("boot_files") or {}
    return [path for path in boot_files() if path not in wanted
            and (files.get(path) or "").startswith((HEADER, PEERMEM_HEADER))]


def plan_fabric(state, request, steps):
    """``fabric``: the packages, files, modules and units the fabric needs (None: nothing); ``unload`` and
    ``load`` where the loaded nvidia module lacks the fabric's options."""
    want, have = request.get("fabric"), (state.get("fabric") or {})
    stale = stale_boot_files(have.get("files") or {}, want)
    disable = [PEERMEM_SERVICE] if PEERMEM_UNIT in stale else []  # its unit file goes: disabled first
    if not want:
        fabric = dict({key: [] for key in FABRIC_STEPS}, kind=None, version=None, remove=stale,
                      disable=disable)
        return {"fabric": fabric if stale else None}, [describe(fabric)] if stale else []
    packages = state.get("packages") or {}
    userspace, files = state.get("userspace_version"), have.get("files") or {}
    config = parse_settings(files.get(IMEX_CONFIG))
    extra = [MODULES_EXTRA.format(kernel=kernel) for kernel in have.get("kernels_without_ib") or []
             if want["modules_extra"]]
    fabric = {
        "kind": want["kind"], "version": request["version"] if steps["install"] else userspace,
        "install": [n for n in want["pinned"] if steps["install"] or not version_matches(
            nvidia_packages.upstream_version(installed(packages, n)), userspace or "0")],
        "packages": [n for n in want["unpinned"] + extra if not installed(packages, n)],
        "boot_files": [{"path": path, "content": text} for path, text in sorted(want["boot_files"].items())
                       if files.get(path) != text],
        # nvidia_peermem loads the nvidia module: not while nouveau holds the GPU (the reboot loads it)
        "modules": [m for m in want["modules"] if m not in (have.get("loaded") or [])
                    and not (m == PEERMEM and steps["reboot_required"])],
        "files": [{"path": IMEX_NODES, "content": want["imex_nodes"]}]
        if want["imex_nodes"] and want["imex_nodes"] != files.get(IMEX_NODES) else [],
        "imex_config": [{"key": k, "value": v} for k, v in want["imex_config"].items() if config.get(k) != v],
        "remove": stale, "disable": disable,
    }
    parts, reasons = _reload(state, want, steps)
    fabric.update(_units(state, want, dict(steps, **parts), fabric))
    if not any(fabric[key] for key in FABRIC_STEPS):
        return dict(parts, fabric=None), reasons
    if not (steps["install"] or steps["dkms_build"]):
        reasons.append(describe(fabric))
    return dict(parts, fabric=fabric), reasons


#: The keys of the plan's ``fabric`` that hold something to do.
FABRIC_STEPS = ("install", "packages", "boot_files", "disable", "remove", "modules", "files", "imex_config",
                "stop", "mask", "enable", "start", "restart")


def _reload(state, want, steps):
    """``unload`` and ``load`` when the loaded nvidia module runs without the options the fabric wants
    (``/proc/driver/nvidia/params``; unread: no change), unless the plan reloads or reboots anyway."""
    params = (state.get("fabric") or {}).get("nvidia_params")
    if params is None or not (state.get("loaded") or {}).get("version") or steps["unload"] \
            or steps["reboot_required"] or steps["install"]:
        return {}, []
    missing = [f"NVreg_{key}={value}" for key, value in want["nvidia_params"].items()
               if params.get(key) != value]
    if not missing:
        return {}, []
    return {"unload": True, "load": True}, [f"the loaded nvidia module runs without {', '.join(missing)}"]


def _units(state, want, steps, fabric):
    """``enable``, ``start``, ``restart`` (IMEX, its files changed), ``stop`` (and disable) and ``mask``."""
    services = state.get("services") or {}
    if not state.get("systemd", True):
        return {key: [] for key in ("enable", "start", "restart", "stop", "mask")}
    changed = {IMEX: bool(fabric["files"] or fabric["imex_config"])}
    moved = steps["install"] or steps["unload"]
    start = [u for u in want["units"] if not steps["reboot_required"]
             and (moved or u in fabric["install"] or not service_running(services, u))]
    mask = [u for u in want["mask"] if (services.get(u) or {}).get("enabled") != "masked"
            and (u == IMEX or service_exists(services, u))]  # masked before its package installs
    return {"enable": [u for u in want["units"] if not service_enabled(services, u)], "start": start,
            "restart": [u for u in want["units"] if u not in start and changed.get(u)
                        and service_running(services, u)],
            "stop": [u for u in mask if service_exists(services, u)
                     and (service_running(services, u) or service_enabled(services, u))],
            "mask": mask}


def describe(fabric):
    """What the plan's ``fabric`` does, one line (said so in the summary: filter_plugins/nvidia_driver.py)."""
    said = [f"{key} " + ", ".join(i if isinstance(i, str) else i.get("path", i.get("key"))
                                  for i in fabric[key]) for key in FABRIC_STEPS if fabric[key]]
    return f"fabric {fabric['kind'] or 'off'}: {'; '.join(said)}"
