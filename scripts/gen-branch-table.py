#!/usr/bin/env python3
"""Generate module_utils/gpunode/driver/branches.py from its sources.

Usage:
    scripts/gen-branch-table.py [--data DIR] [--output FILE] [--check]

DIR (default data/nvidia-detect-ids) holds Debian's nvidia-detect
lists: one ``10DEdddd`` PCI ID a line per driver branch (see its README). The
generated module is plain data, committed, so nothing reads DIR at run time.
``--check`` exits 1 when FILE differs from what the sources would generate
(CI and the unit tests run it).

The sources, each cited beside its data below:
- Debian nvidia-detect 550.163.01-5.1 (sid; DIR, see its README): which GPUs each
  branch up to 550 drives, and the legacy branches of older GPUs.
- NVIDIA's "Supported Drivers and CUDA Toolkit Versions" pages of the 620 and
  615 branches (read 2026-11-28): what R535, R580, R595, R610 and R620 are
  (long-term support, production, new feature branch) and until when.
- NVIDIA's announcements of the 580 branch: the last one for Maxwell, Pascal
  and Volta; 590 and later drive Turing and newer only.
- NVIDIA's "Transitions fully towards open-source GPU kernel modules"
  (2024-07): Grace Hopper and Blackwell need the open kernel modules.
- NVIDIA gpu-admin-tools (the device ID ranges of the Blackwell chips and the
  GH200 device IDs).
- The Gentoo Wiki's "DGX Spark" page (published lspci -nn output): the GB10's
  device ID, outside gpu-admin-tools' ranges.

How the table is derived:
- 550 = nvidia.ids (the package's current branch); 535 = nvidia-tesla-535.ids (a
  subset of 550: checked); 470 = nvidia-tesla-470.ids (Kepler's last); 390 = nvidia-legacy-390xx.ids
  (Fermi's last; plus -amd64.ids on x86_64 only); 340 = nvidia-legacy-340xx.ids
  (the Tesla architecture's last). The 418/440/450/460 datacenter lists are
  subsets of 470 (checked) and add no branch worth installing today.
- Branches newer than the data drive every GPU in the 550 list up to 580;
  590 and later drive Turing and newer only (device ID 0x1e00 and up; checked
  against nvidia-open.ids, the open kernel modules' list, Turing and newer).
- Blackwell (NVIDIA's chip ID ranges) is driven from 570 on, open modules only.
- The 304/173/96/71 lists give the last legacy branch of GPUs that no branch
  above drives, so the facts module can say why it recommends nothing.
- GB10 (DGX Spark) is driven from 580 on (the branch DGX OS ships), open modules only.
- A GPU in none of the lists and ranges is newer than the data: the module
  serves it with the newest branch, and says so.
- BRANCH_ENDS: the month each branch's support ends; the modules warn when a
  branch chosen or pinned has ended.
"""

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(ROOT, "data", "nvidia-detect-ids")
DEFAULT_OUTPUT = os.path.join(ROOT, "module_utils", "gpunode", "driver", "branches.py")

OPEN_MODULES_BLOG = ("https://developer.nvidia.com/blog/"
                     "nvidia-transitions-fully-towards-open-source-gpu-kernel-modules/")
ADMIN_TOOLS = "https://github.com/NVIDIA/gpu-admin-tools (gpu/devid_chips.py, gpu/devid_names.py @82422cc)"

# NVIDIA's "Supported Drivers and CUDA Toolkit Versions" pages of the 620 and 615 branches, read
# 2026-11-28: each branch's designation and end of life (the 615 page lists R535, R580, R595 and
# R610; the 620 page R580, R595 and R620).
SUPPORT_PAGES = tuple(f"https://docs.nvidia.com/datacenter/tesla/drivers/{b}/supported-drivers-and-cuda-toolkit-"
                      "versions.html" for b in ("620", "615"))
SUPPORT_READ = "2026-11-28"
BRANCH_LIFE = {  # branch: (designation, last month supported)
    "620": ("long-term support branch", "2029-09"),
    "610": ("new feature branch", "2026-08"),
    "595": ("production branch", "2027-03"),
    "580": ("long-term support branch", "2028-06"),
    "535": ("long-term support branch", "2026-06"),
}

# Branches gpunode can install that are newer than the Debian data (550), newest first,
# and what each one is (besides BRANCH_LIFE). Turing-only: they drive device IDs 0x1e00 and up only.
POST_DATA = (
    # (branch, Turing and newer only, what it is, source)
    ("620", True, "", ""),
    ("610", True, "", ""),
    ("595", True, "", ""),
    ("590", True, "the first branch without Maxwell, Pascal and Volta",
     "NVIDIA CUDA 13.0 / driver 580 release notes"),
    ("580", False, "the last for Maxwell, Pascal and Volta", "NVIDIA CUDA 13.0 / driver 580 release notes"),
    ("570", False, "the first branch for Blackwell",
     "NVIDIA data center driver 570 release notes (B200, GB200)"),
)
DATA_BRANCH_NOTES = {
    "470": ("the last for Kepler", "Debian nvidia-detect (nvidia-tesla-470.ids)"),
    "390": ("the last for Fermi", "Debian nvidia-detect (nvidia-legacy-390xx.ids)"),
    "340": ("the last for the Tesla architecture", "Debian nvidia-detect (nvidia-legacy-340xx.ids)"),
}
FIRST_TURING_ID = 0x1E00
DATA_BRANCHES = {
    "550": "nvidia.ids",
    "535": "nvidia-tesla-535.ids",
    "470": "nvidia-tesla-470.ids",
    "390": "nvidia-legacy-390xx.ids",
    "340": "nvidia-legacy-340xx.ids",
}
ARCH_FILES = {"x86_64": {"390": "nvidia-legacy-390xx-amd64.ids"}}
LEGACY_UNSUPPORTED = {
    "304": "nvidia-legacy-304xx.ids",
    "173": "nvidia-legacy-173xx.ids",
    "96": "nvidia-legacy-96xx.ids",
    "71": "nvidia-legacy-71xx.ids",
}
SUBSET_OF_470 = ("nvidia-tesla-418.ids", "nvidia-tesla-440.ids", "nvidia-tesla-450.ids",
                 "nvidia-tesla-460.ids")

# Blackwell: device ID ranges of its chips (NVIDIA gpu-admin-tools, gpu/devid_chips.py),
# driven from 570 on, by the open kernel modules only (NVIDIA, 2024-07).
BLACKWELL_FIRST_BRANCH = "570"
BLACKWELL_RANGES = (
    ("2900", "297f", "Blackwell GB100"),
    ("2980", "29ff", "Blackwell GB102"),
    ("2b80", "2bff", "Blackwell GB202"),
    ("2c00", "2c7f", "Blackwell GB203"),
    ("2d00", "2d7f", "Blackwell GB206"),
    ("2d80", "2dff", "Blackwell GB207"),
    ("2f00", "2f7f", "Blackwell GB205"),
    ("3180", "31ff", "Blackwell GB110"),
    ("3200", "327f", "Blackwell GB112"),
)
# Grace Hopper (GH200) device IDs (NVIDIA gpu-admin-tools, gpu/devid_names.py): the
# GPU is a Hopper in the branch lists, but the open kernel modules are required.
GRACE_HOPPER_IDS = ("2342", "2343", "2345", "2348")
# DGX Spark's GB10: "NVIDIA Corporation GB20B [GB10] [10de:2e12] (rev a1)" in the lspci -nn output
# of the Gentoo Wiki's "DGX Spark" page (https://wiki.gentoo.org/wiki/DGX_Spark, 2026-09-11); not in
# gpu-admin-tools' ranges. A Blackwell: open modules only; driven from 580, the branch DGX OS ships.
GB10 = ("2e12", "580", "Blackwell GB10 (DGX Spark)")
GB10_SOURCE = "https://wiki.gentoo.org/wiki/DGX_Spark (lspci -nn: GB20B [GB10] [10de:2e12])"

# Names for datacenter parts that older pci.ids files (Debian 12's among them)
# lack or name only by chip; used when the system's pci.ids has no name.
KNOWN_NAMES = {
    "102d": "Tesla K80",
    "1af1": "A100 NVSwitch",
    "1db1": "Tesla V100 SXM2 16GB",
    "1eb8": "Tesla T4",
    "20b0": "A100 SXM4 40GB",
    "20b2": "A100 SXM4 80GB",
    "2236": "A10",
    "22a3": "H100 NVSwitch",
    "2330": "H100 SXM5 80GB",
    "2331": "H100 PCIe",
    "2335": "H200 SXM 141GB",
    "2342": "GH200",
    "26b5": "L40",
    "26b9": "L40S",
    "27b8": "L4",
    "2901": "B200",
    "2941": "GB200",
    "2e12": "GB10",
}

ID_RE = re.compile(r"^10[dD][eE]([0-9a-fA-F]{4})$")


class DataError(Exception):
    pass


def read_ids(data_dir, name):
    path = os.path.join(data_dir, name)
    ids = set()
    with open(path, encoding="ascii") as handle:
        for number, raw in enumerate(handle, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            match = ID_RE.match(line)
            if not match:
                raise DataError(f"{path}: line {number}: {line!r} is not a 10DEdddd PCI ID")
            ids.add(match.group(1).lower())
    return ids


def data_version(data_dir):
    try:
        with open(os.path.join(data_dir, "README.md"), encoding="utf-8") as handle:
            match = re.search(r"version\s+([0-9][0-9A-Za-z.~+-]*[0-9A-Za-z])", handle.read())
    except OSError:
        match = None
    return match.group(1) if match else "unknown"


def build_table(data_dir):
    lists = {branch: read_ids(data_dir, name) for branch, name in DATA_BRANCHES.items()}
    if lists["535"] - lists["550"]:
        outside = sorted(lists["535"] - lists["550"])[:5]
        raise DataError(f"nvidia-tesla-535.ids has IDs outside nvidia.ids: {outside}")
    for name in SUBSET_OF_470:
        extra = read_ids(data_dir, name) - lists["470"] - lists["550"]
        if extra:
            raise DataError(f"{name} has IDs outside 470 and 550: {sorted(extra)[:5]}")
    open_ids = read_ids(data_dir, "nvidia-open.ids")
    early = sorted(i for i in open_ids if int(i, 16) < FIRST_TURING_ID)
    if early:
        raise DataError(f"nvidia-open.ids has IDs below 0x{FIRST_TURING_ID:x}: {early}")
    in_ranges = sorted(i for i in set().union(*lists.values()) if _blackwell_range(i))
    if in_ranges:
        raise DataError(f"the Blackwell ranges overlap IDs of the Debian lists: {in_ranges[:5]}")
    turing_only = [b for b, only, _note, _src in POST_DATA if only]
    post_all = [b for b, only, _note, _src in POST_DATA if not only]
    branches = (*turing_only, *post_all, "550", "535", "470", "390", "340")
    groups = {}
    for device in sorted(set().union(*lists.values())):
        supported = []
        for branch in branches:
            if branch in turing_only:
                ok = device in lists["550"] and int(device, 16) >= FIRST_TURING_ID
            elif branch in post_all:
                ok = device in lists["550"]
            else:
                ok = device in lists[branch]
            if ok:
                supported.append(branch)
        groups.setdefault(" ".join(supported), []).append(device)
    arch = {
        machine: {branch: sorted(read_ids(data_dir, name)) for branch, name in files.items()}
        for machine, files in ARCH_FILES.items()
    }
    known = set().union(*lists.values())
    legacy = {}
    for branch, name in LEGACY_UNSUPPORTED.items():
        only = read_ids(data_dir, name) - known
        known |= only
        legacy[branch] = sorted(only)
    groups.setdefault(" ".join(b for b in branches if int(b) >= int(GB10[1])), []).append(GB10[0])
    notes = {b: f"{kind} until {end}" for b, (kind, end) in BRANCH_LIFE.items()}
    for branch, note in [(b, note) for b, _only, note, _src in POST_DATA] + [
            (b, note) for b, (note, _src) in DATA_BRANCH_NOTES.items()]:
        if note:
            notes[branch] = f"{notes[branch]}; {note}" if branch in notes else note
    return {
        "source": f"Debian nvidia-detect {data_version(data_dir)}",
        "branches": branches,
        "notes": {b: notes[b] for b in branches if b in notes},
        "groups": groups,
        "arch": arch,
        "legacy": legacy,
        "highest": max(lists["550"] | lists["470"]),
        "data_branch": "550",  # the newest branch the data's per-branch lists describe
        "blackwell": [b for b in branches if int(b) >= int(BLACKWELL_FIRST_BRANCH)],
        "names": dict(sorted(KNOWN_NAMES.items())),
        "ends": {b: BRANCH_LIFE[b][1] for b in branches if b in BRANCH_LIFE},
        "sources": [f"Debian nvidia-detect {data_version(data_dir)} (data/nvidia-detect-ids)",
                    *SUPPORT_PAGES,
                    OPEN_MODULES_BLOG, ADMIN_TOOLS, GB10_SOURCE],
    }


def _blackwell_range(device):
    return any(int(low, 16) <= int(device, 16) <= int(high, 16) for low, high, _chip in BLACKWELL_RANGES)


def _ids_literal(ids, indent):
    """A parenthesised string of space-separated IDs wrapped to the line length."""
    pad = " " * indent
    per_line = 18
    chunks = [" ".join(ids[i:i + per_line]) for i in range(0, len(ids), per_line)]
    if len(chunks) == 1:
        return f'"{chunks[0]}"'
    body = "\n".join(f'{pad}    "{chunk}{" " if n < len(chunks) - 1 else ""}"'
                     for n, chunk in enumerate(chunks))
    return f"(\n{body}\n{pad})"


def _quoted(items):
    return ", ".join(f'"{item}"' for item in items)


def render(table):
    out = [
        "# Copyright: (c) 2026, gpunode maintainers",
        "# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)",
        "# SPDX-License-Identifier: GPL-3.0-or-later",
        '"""NVIDIA driver branches per PCI device ID (vendor 10de). Generated data: do not edit.',
        "",
        "Made by scripts/gen-branch-table.py, which cites each source beside its data:",
        f"{table['source']}'s per-branch ID lists (data/nvidia-detect-ids),",
        f"NVIDIA's support pages of the 620 and 615 branches (read {SUPPORT_READ}) and release",
        "notes, NVIDIA's statement that Grace Hopper and Blackwell need the open kernel",
        "modules, NVIDIA gpu-admin-tools' Blackwell device ID ranges, and the GB10's ID from",
        "published lspci output. Regenerate with that script.",
        "",
        "BRANCHES lists the branches gpunode installs, newest first, BRANCH_NOTES what",
        "some of them are, BRANCH_ENDS the last month NVIDIA supports some. SUPPORT maps",
        "the branches (space-separated, newest first) to the device IDs they all drive;",
        "ARCH_SUPPORT adds branches that drive some IDs on one machine type only.",
        "BLACKWELL_RANGES are the Blackwell chips' device ID ranges, driven by",
        "BLACKWELL_BRANCHES (the GB10's one ID by its SUPPORT entry); they and",
        "GRACE_HOPPER_IDS need the open kernel modules. LEGACY_ONLY names the last",
        "(uninstallable) legacy branch of GPUs no branch in BRANCHES drives. An ID in none",
        "of these above HIGHEST_KNOWN_ID is newer than the data and is served by",
        "NEWEST_BRANCH; one below it, unknown to DATA_BRANCH, by the branches after",
        "DATA_BRANCH that drive its known neighbours. TURING_FIRST_ID: the open kernel",
        "modules drive this ID and up, and branches from 590 on only these.",
        "NAMES are fallback names when pci.ids has none.",
        '"""',
        "",
        f'DATA_SOURCE = "{table["source"]}"',
        "SOURCES = (",
        *(f'    "{source}",' for source in table["sources"]),
        ")",
        f"BRANCHES = ({_quoted(table['branches'])})",
        f'NEWEST_BRANCH = "{table["branches"][0]}"',
        f'HIGHEST_KNOWN_ID = "{table["highest"]}"',
        f'DATA_BRANCH = "{table["data_branch"]}"',
        f'TURING_FIRST_ID = "{FIRST_TURING_ID:04x}"',
        "",
        "BRANCH_NOTES = {",
    ]
    for branch, note in table["notes"].items():
        out.append(f'    "{branch}": "{note}",')
    out += ["}", "", "BRANCH_ENDS = {"]
    out += [f'    "{branch}": "{end}",' for branch, end in table["ends"].items()]
    out += ["}", "", "SUPPORT = {"]
    for key in sorted(table["groups"], key=lambda k: (-len(k.split()), k)):
        out.append(f'    "{key}": {_ids_literal(table["groups"][key], 4)},')
    out += ["}", "", "ARCH_SUPPORT = {"]
    for machine, branches in table["arch"].items():
        out.append(f'    "{machine}": {{')
        for branch, ids in branches.items():
            out.append(f'        "{branch}": {_ids_literal(ids, 8)},')
        out.append("    },")
    out += ["}", "", f'BLACKWELL_BRANCHES = "{" ".join(table["blackwell"])}"', "BLACKWELL_RANGES = ("]
    for low, high, chip in (*BLACKWELL_RANGES, (GB10[0], GB10[0], GB10[2])):
        out.append(f'    ("{low}", "{high}", "{chip}"),')
    out += [")", f"GRACE_HOPPER_IDS = ({_quoted(GRACE_HOPPER_IDS)})", "", "LEGACY_ONLY = {"]
    for branch, ids in table["legacy"].items():
        out.append(f'    "{branch}": {_ids_literal(ids, 4)},')
    out += ["}", "", "NAMES = {"]
    for device, name in table["names"].items():
        out.append(f'    "{device}": "{name}",')
    out += ["}", ""]
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_DATA, help="directory of nvidia-detect .ids files")
    parser.add_argument("--output", default=DEFAULT_OUTPUT, help="the module to write")
    parser.add_argument("--check", action="store_true", help="exit 1 if --output is not up to date")
    args = parser.parse_args(argv)
    try:
        text = render(build_table(args.data))
    except (OSError, DataError) as exc:
        print(f"gen-branch-table: {exc}", file=sys.stderr)
        return 2
    try:
        with open(args.output, encoding="utf-8") as handle:
            current = handle.read()
    except FileNotFoundError:
        current = None
    if args.check:
        if current != text:
            print(f"gen-branch-table: {args.output} is out of date; run scripts/gen-branch-table.py",
                  file=sys.stderr)
            return 1
        print(f"gen-branch-table: {args.output} is up to date")
        return 0
    if current == text:
        print(f"gen-branch-table: {args.output} unchanged")
        return 0
    tmp = args.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, args.output)
    print(f"gen-branch-table: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
