# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NVIDIA GPU detection: read PCI devices from sysfs, name them, pick a driver branch.

Pure Python (standard library only) so it runs on target hosts and is tested
without Ansible. The module ``nvidia_gpu_facts`` calls :func:`gather`; every
reading takes a root path, so tests and simulated nodes point it at a fake
``sys``/``proc`` tree. Domain errors are raised as :class:`GpuDetectError`.

What is read (``SYS`` = sysfs_root, ``PROC`` = proc_root):

- ``SYS/bus/pci/devices/*/{vendor,device,subsystem_vendor,subsystem_device,
  class,numa_node}`` and the ``driver`` link, for vendor 10de only;
- ``SYS/module/nvidia/version``, else ``PROC/driver/nvidia/version``, for the
  loaded driver's version (proprietary and open kernel module formats);
- ``PROC/modules`` (else ``SYS/module/<name>/initstate``) for whether nvidia
  or nouveau is loaded;
- the NVIDIA section of ``pci.ids`` for names (plain or gzip-compressed).
"""

import gzip
import os
import re
import time

from ansible.module_utils.gpunode.driver import branches as nvidia_branches
from ansible.module_utils.gpunode.driver import fabric
from ansible.module_utils.gpunode.host import files

NVIDIA_VENDOR = "10de"
#: What the warning on a GPU newer than the branch table says (the driver role drops it on a pinned branch).
NEWER_THAN_TABLE = "is newer than the branch table"

#: The system's pci.ids, in the order the module looks for one.
PCI_IDS_CANDIDATES = (
    "/usr/share/misc/pci.ids",
    "/usr/share/hwdata/pci.ids",
    "/usr/share/pci.ids",
    "/var/lib/pciutils/pci.ids",
    "/usr/share/misc/pci.ids.gz",
    "/usr/share/hwdata/pci.ids.gz",
    "/usr/share/pci.ids.gz",
)

#: PCI class (base class + subclass, 4 hex digits) -> kind of NVIDIA device.
KIND_BY_CLASS = {
    "0300": "gpu",  # VGA compatible controller
    "0302": "gpu",  # 3D controller
    "0680": "nvswitch",  # Bridge: other (the NVSwitch)
    "0403": "audio",  # HD audio function of a GeForce/Quadro
    "0c03": "usb",  # USB host controller of a Turing card
    "0c80": "serial",  # serial bus controller (the USB Type-C UCSI controller)
}

FALLBACK_LABEL = {
    "gpu": "GPU",
    "nvswitch": "NVSwitch",
    "audio": "audio controller",
    "usb": "USB controller",
    "serial": "serial bus controller",
    "other": "PCI device",
}

# The first line of /proc/driver/nvidia/version, in the formats drivers print:
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct ..." (proprietary)
# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build ..." (open)
# "NVRM version: NVIDIA UNIX Kernel Module for aarch64  35.3.1  ..." (Jetson)
NVRM_RE = re.compile(
    r"NVRM version:\s+NVIDIA UNIX\s+(?P<open>Open\s+)?(?:[A-Za-z0-9_]+\s+)?Kernel Module"
    r"(?:\s+for\s+\S+)?\s+(?P<version>\d+(?:\.\d+)+)"
)
VERSION_RE = re.compile(r"^\d+(?:\.\d+)+$")
HEX_ID_RE = re.compile(r"^(?:0x)?([0-9a-fA-F]{4})$")
CLASS_RE = re.compile(r"^(?:0x)?([0-9a-fA-F]{6})$")
BRACKETED_RE = re.compile(r"\[([^\[\]]+)\]\s*$")
VENDOR_LINE_RE = re.compile(rb"\n[^\t#\n]")


class GpuDetectError(Exception):
    """A reading failed in a way the user must fix; the message names the path."""


# --------------------------------------------------------------------------
# Small readers
# --------------------------------------------------------------------------


def _read_text(path):
    """The stripped content of a small file, or None when it cannot be read."""
    try:
        return files.read_file(path, "utf-8", "replace").strip()
    except OSError:
        return None


def _hex_id(text):
    match = HEX_ID_RE.match(text or "")
    return match.group(1).lower() if match else None


def parse_driver_version(text):
    """The version in a /proc/driver/nvidia/version text: ``(version, "open"|"proprietary")``.

    Returns ``(None, None)`` when the text has no NVRM line.
    """
    match = NVRM_RE.search(text or "")
    if not match:
        return None, None
    return match.group("version"), "open" if match.group("open") else "proprietary"


def parse_proc_modules(text):
    """The names of the modules listed in a /proc/modules text, in its order."""
    names = []
    for line in (text or "").splitlines():
        fields = line.split()
        if fields:
            names.append(fields[0])
    return names


def read_loaded(sysfs_root, proc_root, names=("nvidia", "nouveau")):
    """What the kernel has loaded: ``{"modules", "version", "module_type"}``.

    ``modules``: the names in ``PROC/modules`` (when that cannot be read, those
    of ``names`` whose ``SYS/module/<name>/initstate`` is ``live``). ``version``:
    the nvidia module's, from ``SYS/module/nvidia/version``, else
    ``PROC/driver/nvidia/version``; None when nvidia is not loaded.
    ``module_type`` (open or proprietary) only the proc file tells.
    """
    text = _read_text(os.path.join(proc_root, "modules"))
    if text is not None:
        modules = parse_proc_modules(text)
    else:
        modules = [name for name in names
                   if _read_text(os.path.join(sysfs_root, "module", name, "initstate")) == "live"]
    version, module_type = parse_driver_version(
        _read_text(os.path.join(proc_root, "driver", "nvidia", "version")))
    sys_version = _read_text(os.path.join(sysfs_root, "module", "nvidia", "version"))
    if sys_version and VERSION_RE.match(sys_version):
        version = sys_version
    if "nvidia" not in modules and text is not None:
        version = module_type = None
    return {"modules": modules, "version": version, "module_type": module_type if version else None}


# --------------------------------------------------------------------------
# pci.ids
# --------------------------------------------------------------------------


def find_pci_ids(candidates=PCI_IDS_CANDIDATES):
    """The first existing pci.ids of ``candidates``, or None."""
    for path in candidates:
        if files.is_file(path):
            return path
    return None


def _vendor_section(data, vendor):
    """One vendor's section of a pci.ids file (bytes), or None.

    A plain search rather than a parse of the whole file: the full pci.ids
    is over 1 MB and only one vendor is wanted.
    """
    head = vendor.lower().encode("ascii") + b"  "
    start = 0 if data.startswith(head) else data.find(b"\n" + head) + 1
    if start == 0 and not data.startswith(head):
        return None
    end = VENDOR_LINE_RE.search(data, start + 1)
    return data[start:end.start() if end else len(data)]


def parse_pci_ids_vendor(text, vendor=NVIDIA_VENDOR):
    """Names of one vendor's devices in a pci.ids text (str or bytes).

    Returns ``{device_id: (name, {(subvendor, subdevice): name})}``, IDs in
    lower case. Only the vendor's section is parsed; malformed lines are skipped.
    """
    data = text.encode("utf-8") if isinstance(text, str) else text
    section = _vendor_section(data, vendor)
    if section is None:
        return {}
    devices = {}
    current = None
    for line in section.decode("utf-8", errors="replace").splitlines()[1:]:
        if line.startswith("\t\t"):
            if current is None:
                continue
            fields = line[2:].split(None, 2)
            if len(fields) == 3 and all(HEX_ID_RE.match(f) for f in fields[:2]):
                current[1][(fields[0].lower(), fields[1].lower())] = fields[2].strip()
        elif line.startswith("\t"):
            fields = line[1:].split(None, 1)
            if len(fields) == 2 and HEX_ID_RE.match(fields[0]):
                current = (fields[1].strip(), {})
                devices[fields[0].lower()] = current
            else:
                current = None
    return devices


def load_pci_ids(path, vendor=NVIDIA_VENDOR):
    """Parse one vendor's names from the pci.ids file at ``path`` (``.gz`` too)."""
    try:
        data = files.read_file(path)
        if path.endswith(".gz"):
            data = gzip.decompress(data)
    except (OSError, EOFError) as exc:
        raise GpuDetectError(f"{path}: cannot read pci.ids: {exc}") from exc
    return parse_pci_ids_vendor(data, vendor)


def product_name(pci_name):
    """The marketing name in a pci.ids name: ``"TU104GL [Tesla T4]"`` -> ``"Tesla T4"``.

    A name without brackets is kept. Where pci.ids names several boards
    (``"GP102 [TITAN X / TITAN Xp]"``) all are kept: the device ID alone does not
    tell which one this is.
    """
    text = str(pci_name or "").strip()
    match = BRACKETED_RE.search(text)
    return match.group(1).strip() if match else text


def device_name(device_id, kind, subsystem_vendor=None, subsystem_device=None, pci_ids=None):
    """A name for an NVIDIA device, never empty.

    The pci.ids subsystem name when the board is NVIDIA's own (subsystem
    vendor 10de: those are product names like "Tesla M1060"), else the
    pci.ids device name, reduced to the bracketed product name; else a name
    from the branch table; else "NVIDIA <kind> 10de:<id>".
    """
    entry = (pci_ids or {}).get(device_id)
    if entry:
        name, subsystems = entry
        sub_name = subsystems.get((subsystem_vendor, subsystem_device))
        if sub_name and subsystem_vendor == NVIDIA_VENDOR:
            return product_name(sub_name)
        if name:
            return product_name(name)
    if kind in ("gpu", "nvswitch") and device_id in nvidia_branches.NAMES:
        return nvidia_branches.NAMES[device_id]
    return f"NVIDIA {FALLBACK_LABEL.get(kind, FALLBACK_LABEL['other'])} {NVIDIA_VENDOR}:{device_id}"


# --------------------------------------------------------------------------
# sysfs
# --------------------------------------------------------------------------


def classify(class_id):
    """The kind of an NVIDIA device from its 4-digit class code."""
    return KIND_BY_CLASS.get((class_id or "")[:4], "other")


def _numa_node(text):
    try:
        value = int(text)
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def _bound_driver(device_dir):
    try:
        target = files.readlink(os.path.join(device_dir, "driver"))
    except OSError:
        return None
    return os.path.basename(target.rstrip("/")) or None


def read_pci_devices(sysfs_root, vendor=NVIDIA_VENDOR):
    """Raw facts of the PCI devices of one vendor under ``SYS/bus/pci/devices``.

    Returns ``(devices, warnings)``; devices sorted by address. A device whose
    vendor or device file cannot be read is skipped with a warning.
    """
    bus_dir = os.path.join(sysfs_root, "bus", "pci", "devices")
    try:
        addresses = sorted(files.listdir(bus_dir))
    except FileNotFoundError:
        return [], [f"{bus_dir}: not found; this host has no PCI bus that sysfs shows"]
    except OSError as exc:
        raise GpuDetectError(f"{bus_dir}: cannot list PCI devices: {exc.strerror}") from exc
    devices, warnings = [], []
    for address in addresses:
        device_dir = os.path.join(bus_dir, address)
        vendor_text = _read_text(os.path.join(device_dir, "vendor"))
        vendor_id = _hex_id(vendor_text)
        if vendor_id is None:
            warnings.append(f"{device_dir}/vendor: unreadable or not a PCI ID ({vendor_text!r}); skipped")
            continue
        if vendor_id != vendor:
            continue
        device_text = _read_text(os.path.join(device_dir, "device"))
        device_id = _hex_id(device_text)
        if device_id is None:
            warnings.append(f"{device_dir}/device: unreadable or not a PCI ID ({device_text!r}); skipped")
            continue
        class_match = CLASS_RE.match(_read_text(os.path.join(device_dir, "class")) or "")
        devices.append({
            "address": address,
            "vendor_id": vendor_id,
            "device_id": device_id,
            "subsystem_vendor_id": _hex_id(_read_text(os.path.join(device_dir, "subsystem_vendor"))),
            "subsystem_device_id": _hex_id(_read_text(os.path.join(device_dir, "subsystem_device"))),
            "class_id": class_match.group(1)[:4].lower() if class_match else None,
            "bound_driver": _bound_driver(device_dir),
            "numa_node": _numa_node(_read_text(os.path.join(device_dir, "numa_node"))),
        })
    return devices, warnings


# --------------------------------------------------------------------------
# Driver branches
# --------------------------------------------------------------------------

_SUPPORT_INDEX = {}


def _support_index(machine):
    """``{device_id: set(branches)}`` for a machine type, built once."""
    if machine not in _SUPPORT_INDEX:
        index = {}
        for branches, ids in nvidia_branches.SUPPORT.items():
            for device_id in ids.split():
                index[device_id] = set(branches.split())
        for branch, ids in nvidia_branches.ARCH_SUPPORT.get(machine, {}).items():
            for device_id in ids.split():
                index.setdefault(device_id, set()).add(branch)
        _SUPPORT_INDEX[machine] = index
    return _SUPPORT_INDEX[machine]


def _legacy_only(device_id):
    for branch, ids in nvidia_branches.LEGACY_ONLY.items():
        if device_id in ids.split():
            return branch
    return None


def blackwell_chip(device_id):
    """The Blackwell chip a device ID belongs to (``"Blackwell GB100"``), or None."""
    value = int(str(device_id), 16)
    for low, high, chip in nvidia_branches.BLACKWELL_RANGES:
        if int(low, 16) <= value <= int(high, 16):
            return chip
    return None


def is_turing_or_newer(device_id):
    """Whether a GPU is Turing or newer, the GPUs the open kernel modules drive.

    PCI device IDs of NVIDIA GPUs are allocated in chip order; the first
    Turing chip (TU102) is 0x1e02, every earlier ID (Kepler, Maxwell, Pascal,
    Volta) needs the proprietary module.
    """
    return int(str(device_id), 16) >= int(nvidia_branches.TURING_FIRST_ID, 16)


def needs_open_module(device_id):
    """Whether only the open kernel modules drive a GPU (Grace Hopper, Blackwell)."""
    device_id = str(device_id).lower()
    return device_id in nvidia_branches.GRACE_HOPPER_IDS or blackwell_chip(device_id) is not None


def branches_for(device_id, machine="x86_64"):
    """``(branches newest first, note)`` for one GPU device ID.

    ``note`` is None, or says why the answer is an assumption or empty.
    """
    index = _support_index(machine)
    order = nvidia_branches.BRANCHES
    if device_id in index:
        return [b for b in order if b in index[device_id]], None
    if blackwell_chip(device_id):
        return nvidia_branches.BLACKWELL_BRANCHES.split(), None
    legacy = _legacy_only(device_id)
    if legacy:
        return [], (f"{NVIDIA_VENDOR}:{device_id} is driven only by the legacy {legacy} branch "
                    f"(gpunode installs {', '.join(order)})")
    if int(device_id, 16) > int(nvidia_branches.HIGHEST_KNOWN_ID, 16):
        newest = nvidia_branches.NEWEST_BRANCH
        return [newest], (f"{NVIDIA_VENDOR}:{device_id} {NEWER_THAN_TABLE} ({nvidia_branches.DATA_SOURCE} "
                          f"and NVIDIA's chip ranges): assuming the newest branch, {newest}, drives it")
    # Within the data's range but unknown to its driver (e.g. 2335, H200, released after
    # 535.261.03's list was cut): IDs are allocated in chip order, so the GPU is of its known
    # neighbours' generation and driven by the branches after DATA_BRANCH that drive both
    # (the legacy branches' lists are final: an ID they do not list, they do not drive).
    branches = _neighbour_branches(index, device_id)
    unknown = f"{NVIDIA_VENDOR}:{device_id} is not in the branch table ({nvidia_branches.DATA_SOURCE})"
    if branches:
        return branches, (f"{unknown}; assuming the branches after {nvidia_branches.DATA_BRANCH} that "
                          f"drive its neighbouring IDs drive it: {', '.join(branches)}")
    return [], (f"{unknown}, and no branch after {nvidia_branches.DATA_BRANCH} drives its neighbouring "
                f"IDs (an older GPU no branch gpunode installs is known to drive)")


def ended_branch(branch, today=None):
    """A warning when NVIDIA's support of ``branch`` ended before ``today`` (``YYYY-MM...``, default
    now; :data:`BRANCH_ENDS`), else None."""
    end = nvidia_branches.BRANCH_ENDS.get(str(branch))
    if not end or (today or time.strftime("%Y-%m"))[:7] <= end:
        return None
    note = nvidia_branches.BRANCH_NOTES[str(branch)]
    return (f"driver branch {branch} has reached its end of life ({note}, NVIDIA's support matrix): "
            "it gets no more fixes; choose a supported branch")


def _neighbour_branches(index, device_id):
    """Branches newer than the data's that drive the nearest known IDs below and above ``device_id``."""
    value = int(device_id, 16)
    known = sorted(int(known_id, 16) for known_id in index)
    below = [k for k in known if k < value]
    above = [k for k in known if k > value]
    if not below or not above:
        return []
    common = index[f"{below[-1]:04x}"] & index[f"{above[0]:04x}"]
    newer = int(nvidia_branches.DATA_BRANCH)
    return [b for b in nvidia_branches.BRANCHES if b in common and int(b) > newer]


def choose_branches(gpu_ids, machine="x86_64"):
    """``(supported, recommended, warnings)`` for the GPUs of one host.

    ``supported``: the branches (newest first) that drive every GPU in
    ``gpu_ids``; ``recommended``: the first of them, None with no GPU or when
    no single branch drives them all (``warnings`` then say why).
    """
    if not gpu_ids:
        return [], None, []
    warnings = []
    common = None
    per_device = {}
    for device_id in sorted(set(gpu_ids)):
        branches, note = branches_for(device_id, machine)
        if note:
            warnings.append(note)
        per_device[device_id] = branches
        common = set(branches) if common is None else common & set(branches)
    supported = [b for b in nvidia_branches.BRANCHES if b in common]
    if not supported:
        detail = "; ".join(
            f"{NVIDIA_VENDOR}:{d}: {', '.join(b) if b else 'none'}" for d, b in sorted(per_device.items()))
        warnings.append(f"no single driver branch drives every GPU on this host ({detail})")
        return [], None, warnings
    return supported, supported[0], warnings + [w for w in [ended_branch(supported[0])] if w]


def summary_line(facts):
    """One line saying what a host has: GPUs, NVSwitches, the loaded driver, the branch.

    ``"H100 SXM5 80GB x 8 | NVSwitch: 4 | driver: nvidia 535.183.01 (proprietary) | recommended branch: 620"``
    """
    counts = facts["model_counts"].items()
    gpus = ", ".join(f"{model} x {count}" for model, count in counts) or "no NVIDIA GPU"
    if facts["loaded_driver_version"]:
        driver = f"nvidia {facts['loaded_driver_version']}"
        if facts["loaded_module_type"]:
            driver += f" ({facts['loaded_module_type']})"
    else:
        driver = "nouveau" if facts["nouveau_loaded"] else "none loaded"
    if facts["recommended_branch"]:
        branch = facts["recommended_branch"]
    elif facts["present"]:
        branch = "none: " + (facts["warnings"][-1] if facts["warnings"] else "no branch drives these GPUs")
    else:
        branch = "n/a"
    return (f"{gpus} | NVSwitch: {facts['nvswitch_count']} | driver: {driver} | "
            f"recommended branch: {branch}")


# --------------------------------------------------------------------------
# Everything together
# --------------------------------------------------------------------------


def _check_roots(sysfs_root, proc_root):
    for label, path in (("sysfs_root", sysfs_root), ("proc_root", proc_root)):
        if not os.path.isabs(path):
            raise GpuDetectError(f"{label} {path}: not an absolute path")
        if not files.is_dir(path):
            raise GpuDetectError(f"{label} {path}: no such directory")


def named_devices(raw, pci_ids):
    """The ``devices`` facts of the PCI devices ``raw`` (:func:`read_pci_devices`): classified and named."""
    devices = []
    for dev in raw:
        kind = classify(dev["class_id"])
        name = device_name(dev["device_id"], kind, dev["subsystem_vendor_id"], dev["subsystem_device_id"],
                           pci_ids)
        devices.append({
            "address": dev["address"],
            "vendor_id": dev["vendor_id"],
            "device_id": dev["device_id"],
            "subsystem_vendor_id": dev["subsystem_vendor_id"],
            "subsystem_device_id": dev["subsystem_device_id"],
            "class_id": dev["class_id"],
            "kind": kind,
            "name": name,
            "bound_driver": dev["bound_driver"],
            "numa_node": dev["numa_node"],
        })
    return devices


def read_fabric(sysfs_root, devices, machine, override="auto"):
    """``(fabric, rdma_devices, warnings)``: :func:`fabric.decide` over the NVIDIA ``devices``
    (:func:`named_devices`) and the Mellanox functions under ``sysfs_root``; ``override`` wins."""
    mellanox, _warned = read_pci_devices(sysfs_root, fabric.MELLANOX_VENDOR)  # warned by the first read
    return fabric.decide(sysfs_root, devices, mellanox, machine, override)


def gather(sysfs_root="/sys", proc_root="/proc", pci_ids_path=None, machine="x86_64", fabric_kind="auto"):
    """The ``nvidia_gpu`` facts of a host. Returns ``(facts, warnings)``.

    ``pci_ids_path`` None means "no names from pci.ids" (the caller looks for
    the system's one). A missing sysfs_root or proc_root is an error: it is
    almost always a wrong inventory variable, and answering "no GPU" would
    hide it. ``fabric_kind``: the inventory's fabric (:data:`fabric.CHOICES`), ``auto`` detects.
    """
    _check_roots(sysfs_root, proc_root)
    raw, warnings = read_pci_devices(sysfs_root)
    devices = named_devices(raw, load_pci_ids(pci_ids_path) if pci_ids_path else {})
    gpus = [d for d in devices if d["kind"] == "gpu"]
    models = []
    for gpu in gpus:
        if gpu["name"] not in models:
            models.append(gpu["name"])
    supported, recommended, branch_warnings = choose_branches([g["device_id"] for g in gpus], machine)
    warnings.extend(branch_warnings)
    loaded = read_loaded(sysfs_root, proc_root)
    kind, rdma_devices, fabric_warnings = read_fabric(sysfs_root, devices, machine, fabric_kind)
    warnings.extend(fabric_warnings)
    facts = {
        "present": bool(gpus),
        "gpu_count": len(gpus),
        "nvswitch_count": sum(1 for d in devices if d["kind"] == "nvswitch"),
        "devices": devices,
        "models": models,
        "model_counts": {m: sum(1 for g in gpus if g["name"] == m) for m in models},
        "loaded_driver_version": loaded["version"],
        "loaded_module_type": loaded["module_type"],
        "nvidia_loaded": "nvidia" in loaded["modules"],
        "nouveau_loaded": "nouveau" in loaded["modules"],
        "supported_branches": supported,
        "recommended_branch": recommended,
        "open_kernel_module_capable": bool(gpus) and all(is_turing_or_newer(g["device_id"]) for g in gpus),
        "open_kernel_module_required": any(needs_open_module(g["device_id"]) for g in gpus),
        "fabric": kind,
        "rdma_devices": rdma_devices,
        "branch_data": nvidia_branches.DATA_SOURCE,
        "pci_ids_path": pci_ids_path,
        "warnings": list(warnings),
    }
    facts["summary"] = summary_line(facts)
    return facts, warnings


def detect(sysfs_root="/sys", proc_root="/proc", pci_ids_path=None, *,
           require_gpu=False, require_branch=False, machine="x86_64", fabric_kind="auto"):
    """:func:`gather` with the checks of a detection run. Returns ``(facts, warnings)``.

    ``pci_ids_path`` None: the system's pci.ids, if any; a path given must be
    an absolute path to a file. ``require_gpu`` refuses a host without an
    NVIDIA GPU, ``require_branch`` one whose GPUs no single branch drives. The
    one implementation behind the modules nvidia_gpu_facts and
    nvidia_driver_state (which detects when no earlier task did).
    """
    if pci_ids_path is None:
        pci_ids_path = find_pci_ids(PCI_IDS_CANDIDATES)
    elif not os.path.isabs(pci_ids_path):
        raise GpuDetectError(f"pci_ids_path {pci_ids_path}: not an absolute path")
    elif not files.is_file(pci_ids_path):
        raise GpuDetectError(f"pci_ids_path {pci_ids_path}: no such file")
    facts, warnings = gather(sysfs_root, proc_root, pci_ids_path, machine, fabric_kind)
    if require_gpu and not facts["present"]:
        raise GpuDetectError(f"no NVIDIA GPU under {sysfs_root}/bus/pci/devices")
    if require_branch and facts["present"] and facts["recommended_branch"] is None:
        raise GpuDetectError("no driver branch drives every GPU on this host: "
                             + "; ".join(facts["warnings"]))
    return facts, warnings
