# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""XID events in the kernel log, and which of them are faults of the node.

The driver logs an XID as ``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has
fallen off the bus.``. Which codes are hardware faults comes from NVIDIA's XID
catalog (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html,
"Resolution Bucket (Immediate Action)": RESET_GPU, RESTART_BM, WORKFLOW_NVLINK_ERR,
... for the codes below) and its page-retirement notes
(https://docs.nvidia.com/deploy/dynamic-page-retirement/visibility.html: 48, 63, 64).
Any other code (13, 31, 43, 45, 68, ... whose bucket is RESTART_APP or IGNORE:
application faults) and 94 (a contained ECC error: the application that hit it
was stopped, the GPU keeps running) is reported, not failed.

Standard library only; Python 3.8+ (runs on managed nodes).
"""

import re

#: XID -> why it is a node fault (the catalog's description, shortened).
HARDWARE_XIDS = {
    48: "double bit ECC error (DBE)",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link corrected error",
    140: "unrecovered ECC error",
}

#: Reported, never failed: a contained error the driver recovered from.
CONTAINED_XIDS = {94: "contained ECC error"}

_XID_LINE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})[^)]*\): (\d+)")


def parse_xids(text):
    """[{"pci": "0000:3b:00", "xid": 79, "line": ...}] for each XID line, in order."""
    events = []
    for line in text.splitlines():
        match = _XID_LINE.search(line)
        if match:
            domain, bus, device = match.group(1).split(":")
            events.append({"pci": f"{int(domain, 16):04x}:{bus.lower()}:{device.lower()}",
                           "xid": int(match.group(2)), "line": line.strip()})
    return events


def events_of(events, bus_id):
    """The events whose PCI address (domain:bus:device) is the GPU's bus id (``0000:3b:00.0``)."""
    return [event for event in events if bus_id and bus_id.startswith(event["pci"] + ".")]


def classify(events):
    """(hardware, other) lists of ``"Xid N (what)"`` strings, each code once, in order of first sight."""
    hardware, other, seen = [], [], set()
    for event in events:
        code = event["xid"]
        if code in seen:
            continue
        seen.add(code)
        if code in HARDWARE_XIDS:
            hardware.append(f"Xid {code} ({HARDWARE_XIDS[code]})")
        else:
            other.append(f"Xid {code} ({CONTAINED_XIDS.get(code, 'application or driver event')})")
    return hardware, other
