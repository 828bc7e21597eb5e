# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What ``nvidia-smi`` says about each GPU: ``-q -x`` (XML) and ``nvlink -s`` (text).

Pure Python, standard library only (``xml.etree.ElementTree``: the XML is
nvidia-smi's own output, read with no DTD and no entity expansion beyond the
five predefined ones). Field names are those of nvidia-smi's XML
(``nvsmi_device_v13.dtd`` on driver 580); a field an older driver lacks reads
as ``None``, and ``"N/A"`` stays ``"N/A"`` so that a check can say "does not
apply" rather than "failed".
"""

import re
from xml.etree import ElementTree


class SmiError(Exception):
    """nvidia-smi answered with something that is not what its format says."""


def _text(node, path):
    """The stripped text at ``path`` under ``node``; None when the element is absent."""
    if node is None:
        return None
    found = node.find(path)
    if found is None or found.text is None:
        return None if found is None else ""
    return found.text.strip()


def _int(text):
    try:
        return int(str(text).split()[0])
    except (TypeError, ValueError, IndexError):
        return None


def _leaf_counts(node, prefix=""):
    """{"a.b": int} for every integer leaf under ``node`` (ECC counters, old and new layouts)."""
    counts = {}
    if node is None:
        return counts
    for child in node:
        name = f"{prefix}{child.tag}"
        if len(child):
            counts.update(_leaf_counts(child, name + "."))
        else:
            value = _int(child.text)
            if value is not None:
                counts[name] = value
    return counts


def uncorrectable(counts):
    """The uncorrectable part of ECC counters: ``*uncorrectable*`` (Ampere and newer) or
    ``double_bit.*total`` (Volta and older layouts)."""
    return {name: value for name, value in counts.items()
            if "uncorrectable" in name or (name.startswith("double_bit") and name.endswith("total"))}


def normal_bus_id(bus_id):
    """A PCI address as sysfs writes it (``0000:00:06.0``, lower case) from nvidia-smi's
    ``00000000:00:06.0``; None when it is not one."""
    match = re.fullmatch(r"([0-9A-Fa-f]+):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])", (bus_id or "").strip())
    if not match:
        return None
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{device.lower()}.{function}"


def _processes(gpu):
    found = []
    for process in gpu.findall("processes/process_info"):
        found.append({"pid": _int(_text(process, "pid")),
                      "name": _text(process, "process_name") or "",
                      "type": _text(process, "type") or ""})
    return found


def _pcie(gpu):
    link = gpu.find("pci/pci_gpu_link_info")
    return {
        "max_gen": _int(_text(link, "pcie_gen/max_link_gen")),
        "current_gen": _int(_text(link, "pcie_gen/current_link_gen")),
        "max_width": _int((_text(link, "link_widths/max_link_width") or "").rstrip("x")),
        "current_width": _int((_text(link, "link_widths/current_link_width") or "").rstrip("x")),
    }


def _gpu(gpu, index):
    bus_id = gpu.get("id") or _text(gpu, "pci/pci_bus_id")
    return {
        "index": index,
        "bus_id": normal_bus_id(bus_id) or bus_id,
        "uuid": _text(gpu, "uuid"),
        "name": _text(gpu, "product_name"),
        "persistence_mode": _text(gpu, "persistence_mode"),
        "ecc_mode": _text(gpu, "ecc_mode/current_ecc"),
        "ecc_pending": _text(gpu, "ecc_mode/pending_ecc"),
        "ecc_volatile": _leaf_counts(gpu.find("ecc_errors/volatile")),
        "ecc_aggregate": _leaf_counts(gpu.find("ecc_errors/aggregate")),
        "unrepairable_memory": _text(gpu, "ecc_errors/unrepairable_memory"),
        "retired_pending": _text(gpu, "retired_pages/pending_retirement"),
        "remapped_rows": _text(gpu, "remapped_rows"),
        "remap_pending": _text(gpu, "remapped_rows/remapped_row_pending"),
        "remap_failure": _text(gpu, "remapped_rows/remapped_row_failure"),
        "pcie": _pcie(gpu),
        "performance_state": _text(gpu, "performance_state"),
        "mig_mode": _text(gpu, "mig_mode/current_mig"),
        "fabric_state": _text(gpu, "fabric/state"),
        "fabric_status": _text(gpu, "fabric/status"),
        "fabric_health": _text(gpu, "fabric/health/summary"),
        "fabric_clique": _text(gpu, "fabric/cliqueId"),
        "fabric_cluster": _text(gpu, "fabric/clusterUuid"),
        "processes": _processes(gpu),
    }


def parse_query_xml(text):
    """``nvidia-smi -q -x`` -> {"driver_version", "cuda_version", "gpus": [per GPU dict]}.

    GPUs keep nvidia-smi's order, which is its index order (``nvidia-smi -i N``).
    """
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        raise SmiError(f"nvidia-smi -q -x: not XML ({exc})") from None
    if root.tag != "nvidia_smi_log":
        raise SmiError(f"nvidia-smi -q -x: root element {root.tag!r}, not nvidia_smi_log")
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "gpus": [_gpu(gpu, index) for index, gpu in enumerate(root.findall("gpu"))],
    }


_NVLINK_GPU = re.compile(r"^GPU (\d+): .*$")
_NVLINK_LINK = re.compile(r"^\s*Link (\d+): (.*?)\s*$")


def parse_nvlink_status(text):
    """``nvidia-smi nvlink -s`` -> {gpu index: {link number: "26.562 GB/s" or "inactive"}}.

    A GPU without NVLink is listed with no link lines (or not at all).
    """
    links, current = {}, None
    for line in text.splitlines():
        gpu = _NVLINK_GPU.match(line)
        if gpu:
            current = int(gpu.group(1))
            links[current] = {}
            continue
        link = _NVLINK_LINK.match(line)
        if link and current is not None:
            state = link.group(2)
            links[current][int(link.group(1))] = "inactive" if "inactive" in state.lower() else state
    return links


def parse_list(text):
    """``nvidia-smi -L`` -> [UUID] in order (GPUs only; MIG device lines are indented)."""
    return re.findall(r"^GPU \d+: .*\(UUID: (GPU-[0-9A-Fa-f-]+)\)", text, re.MULTILINE)


def parse_migs(text):
    """``nvidia-smi -L`` -> {GPU index: [(MIG device index, MIG UUID)]}, GPUs with MIG devices only."""
    found, gpu = {}, None
    for line in text.splitlines():
        head = re.match(r"GPU (\d+): ", line)
        mig = re.match(r"\s+MIG .*Device\s+(\d+): \(UUID: (MIG-[^)\s]+)\)", line)
        if head:
            gpu = int(head.group(1))
        elif mig and gpu is not None:
            found.setdefault(gpu, []).append((int(mig.group(1)), mig.group(2)))
    return found


def describe(gpu):
    """How messages name a GPU: index, bus id and UUID."""
    return f"GPU {gpu['index']} ({gpu['bus_id']}, {gpu['uuid']})"
