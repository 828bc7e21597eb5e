# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The NVLink fabric of a host and its RDMA functions, from PCI alone (the one place this is decided).

Read before any driver or IB module is loaded: PCI IDs and class of the NVIDIA functions
(:func:`gpu.read_pci_devices`, :func:`gpu.named_devices`), and the PCI VPD of the Mellanox
(vendor ``15b3``) network functions, ``SYS/bus/pci/devices/<address>/vpd`` (root only; the
kernel serves it whether or not ``mlx5_core``/``mlx5_ib`` is bound). Kinds (DESIGN.md,
"Fabrics, readiness and rollout"):

- ``mnnvl``: a Grace-Blackwell GPU (:data:`GRACE_BLACKWELL_IDS`), an NVL72 compute tray. The
  architecture only confirms: on a machine that is not aarch64 the kind stands and a warning
  says so (a DGX Spark's GB10 is aarch64 and not in the list: ``none``).
- ``nvlink5``: a Mellanox function whose VPD holds ``SW_MNG`` in a vendor keyword (HGX
  B200/B300: the NVSwitch trays are managed over InfiniBand through these ConnectX-7 bridge
  functions, NVIDIA Fabric Manager User Guide, "NVLink5"; the LPF's VPD carries
  ``SMDL=SW_MNG``, ``lspci -vv`` in the chutes host code, notes/fabric.md section 1).
- ``nvswitch``: NVSwitches as PCI bridges of class ``0680`` (HGX A100/H100/H200).
- ``none`` otherwise.

The inventory may decide instead (``nvidia_driver_fabric``, :data:`CHOICES`; ``auto`` detects): a
board that shares the GB200 IDs but stands alone is ``none``. What it says wins everywhere the
kind is asked (facts, the driver's detection, the validation); a function whose VPD cannot be read
is then an RDMA device unless the kind said is ``nvlink5``.

A VPD that cannot be read or parsed is warned about, naming the file, and never decides by
itself: on a host with an HGX NVLink5 GPU (:data:`HGX_NVLINK5_IDS`) and no ``SW_MNG`` found,
such a function could be the management port, so the kind is ``nvlink5`` (the safe side:
``none`` there leaves the fabric ``In Progress`` and CUDA failing with error 802,
gpu-operator issue 2781), and those functions are left out of ``rdma_devices``; elsewhere they
are RDMA devices. An absent ``vpd`` file (no VPD capability) is no ``SW_MNG``.
"""

import os

from ansible.module_utils.gpunode.host import files

MELLANOX_VENDOR = "15b3"
#: Grace-Blackwell superchip GPUs of NVL72 trays: GB200 10de:2941 (gpud lspci.gb200, leptonai/gpud
#: @77e8dabe; k8s-test-infra qx-gb200.xml), GB300 10de:31c2 (k8s-test-infra qx-gb300.xml).
GRACE_BLACKWELL_IDS = ("2941", "31c2")
#: HGX NVLink5 baseboard GPUs: B200 10de:2901 (k8s-test-infra qx-b200.xml), B300 10de:3182 (one
#: field log, notes/fabric.md section 4).
HGX_NVLINK5_IDS = ("2901", "3182")
GRACE_MACHINES = ("aarch64", "arm64")
#: The values of the inventory override (``fabric`` options); ``auto``: detected from PCI.
CHOICES = ("auto", "none", "nvswitch", "nvlink5", "mnnvl")
SW_MNG = b"SW_MNG"
# PCI Local Bus Specification 3.0, section 6.4 and appendix I (VPD): large resource tags
VPD_ID, VPD_R, VPD_W, VPD_END = 0x82, 0x90, 0x91, 0x78


class VpdError(ValueError):
    """A VPD that is not in the PCI VPD format (or cannot be read)."""


def _keywords(body, start):
    """``[(keyword, value)]`` of a VPD-R or VPD-W resource: 2 ASCII chars, 1 length byte, value."""
    found, offset = [], 0
    while offset + 3 <= len(body):
        length = body[offset + 2]
        if offset + 3 + length > len(body):
            raise VpdError(f"byte {start + offset}: keyword {body[offset:offset + 2]!r} of {length} "
                           "bytes runs past its resource")
        keyword, offset = body[offset:offset + 2].decode("ascii", "replace"), offset + 3 + length
        found.append((keyword, body[offset - length:offset]))
    return found


def parse_vpd(data):
    """``[(keyword, value bytes)]`` of a PCI VPD image, the identifier string as ``ID``.

    Large resources (bit 7 set: tag, 2-byte little-endian length) and small ones (length in
    bits 2-0) are walked up to the end tag; a resource that runs past the data, or data that
    stops before the end tag, raises :class:`VpdError`.
    """
    fields, offset = [], 0
    while offset < len(data):
        tag = data[offset]
        if tag == VPD_END:
            return fields
        if tag & 0x80:
            if offset + 3 > len(data):
                raise VpdError(f"byte {offset}: resource 0x{tag:02x} header cut short: truncated")
            length, start = data[offset + 1] | data[offset + 2] << 8, offset + 3
        else:
            length, start = tag & 0x07, offset + 1
        offset = start + length
        if offset > len(data):
            raise VpdError(f"byte {start}: resource 0x{tag:02x} of {length} bytes runs past the end "
                           f"({len(data)} bytes): truncated")
        if tag == VPD_ID:
            fields.append(("ID", data[start:offset]))
        elif tag in (VPD_R, VPD_W):
            fields.extend(_keywords(data[start:offset], start))
    raise VpdError(f"no end tag (0x78) in {len(data)} bytes: truncated or empty")


def manages_nvswitch(fields):
    """Whether a vendor-specific keyword (``V0``-``VZ``) holds ``SW_MNG``: an NVLink management port."""
    return any(key[0] == "V" and SW_MNG in value for key, value in fields)


def read_vpd(path):
    """The VPD at ``path`` parsed (:func:`parse_vpd`), None when there is none; errors name ``path``."""
    data = files.read_bytes(path, VpdError)
    if data is None:
        return None
    try:
        return parse_vpd(data)
    except VpdError as exc:
        raise VpdError(f"{path}: {exc}") from None


def _is_virtual_function(device_dir):
    return files.lexists(os.path.join(device_dir, "physfn"))


def network_functions(sysfs_root, mellanox):
    """``(management, nics, unknown, warnings)``: the addresses of the physical network functions
    (class ``02xx``) among the Mellanox functions ``mellanox`` by what their VPD says."""
    management, nics, unknown, warnings = [], [], [], []
    for dev in mellanox:
        device_dir = os.path.join(sysfs_root, "bus", "pci", "devices", dev["address"])
        if not (dev["class_id"] or "").startswith("02") or _is_virtual_function(device_dir):
            continue
        try:
            fields = read_vpd(os.path.join(device_dir, "vpd"))
        except VpdError as exc:
            unknown.append(dev["address"])
            warnings.append(f"{exc}; whether this 15b3 function is an NVLink management port is unknown")
            continue
        marked = fields is not None and manages_nvswitch(fields)
        (management if marked else nics).append(dev["address"])
    return management, nics, unknown, warnings


def decide(sysfs_root, devices, mellanox, machine, override="auto"):
    """``(fabric, rdma_devices, warnings)`` of a host: its named NVIDIA ``devices``
    (:func:`gpu.named_devices`) and its Mellanox functions ``mellanox`` (:func:`gpu.read_pci_devices`);
    an ``override`` other than ``auto`` is the kind."""
    management, nics, unknown, warnings = network_functions(sysfs_root, mellanox)
    kind = kind_of(devices, (management, unknown), machine, override, warnings)
    rdma = nics if kind == "nvlink5" else nics + unknown
    return kind, sorted(rdma), warnings


def kind_from_ids(gpu_ids, nvswitch_count, machine, override="auto"):
    """``(fabric, warnings)`` of a host known only by its GPUs' PCI device IDs and its number of
    NVSwitches (the offline bundle's nodes): its network functions unknown, as a VPD that cannot be
    read, so HGX B200/B300 GPUs take the nvlink5 side."""
    devices = [{"device_id": i, "kind": "gpu"} for i in gpu_ids]
    devices += [{"kind": "nvswitch"}] * int(nvswitch_count or 0)
    warnings = []
    kind = kind_of(devices, ([], ["unknown"]), machine, override, [])
    if kind == "nvlink5" and override in (None, "auto"):
        warnings.append("HGX B200/B300 GPUs: the fabric is taken as nvlink5 (its management port cannot be "
                        "read from here); give fabric: nvswitch or none for the node to say otherwise")
    return kind, warnings


def kind_of(devices, ports, machine, override, warnings):
    """The fabric kind from the NVIDIA ``devices`` and ``ports``: the Mellanox functions marked as
    management ports and those whose VPD is unknown; appends to ``warnings`` what it assumed."""
    management, unknown = ports
    gpu_ids = {d["device_id"] for d in devices if d["kind"] == "gpu"}
    grace = sorted(gpu_ids.intersection(GRACE_BLACKWELL_IDS))
    if override not in (None, "auto"):
        return override
    if grace:
        if machine not in GRACE_MACHINES:
            warnings.append(f"Grace-Blackwell GPU 10de:{grace[0]} on a {machine} host, not a Grace "
                            "(aarch64) one; taking the fabric as mnnvl from the GPU")
        return "mnnvl"
    if management or (unknown and gpu_ids.intersection(HGX_NVLINK5_IDS)):
        if not management:
            warnings.append(f"no NVLink management port found, but the VPD of {', '.join(unknown)} could "
                            "not be read: taking the fabric as nvlink5 (HGX B200/B300 GPUs)")
        return "nvlink5"
    return "nvswitch" if any(d["kind"] == "nvswitch" for d in devices) else "none"
