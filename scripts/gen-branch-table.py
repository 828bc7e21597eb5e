#!/usr/bin/env python3
"""Generate module_utils/nvidia_branches.py from Debian's nvidia-detect ID lists.

Usage:
    scripts/gen-branch-table.py [--data DIR] [--output FILE] [--check]

DIR (default ../shared/data/nvidia-detect-ids) holds one ``10DEdddd`` PCI ID a
line per driver branch (see its README). The generated module is plain data,
committed, so nothing reads DIR at run time. ``--check`` exits 1 when FILE
differs from what DIR would generate (for CI and the unit tests).

How the table is derived:
- 535 = nvidia.ids (the package's current branch; equal to nvidia-tesla-535.ids);
  470 = nvidia-tesla-470.ids (Kepler's last); 390 = nvidia-legacy-390xx.ids
  (Fermi's last; plus -amd64.ids on x86_64 only); 340 = nvidia-legacy-340xx.ids
  (the Tesla architecture's last). The 418/440/450/460 datacenter lists are
  subsets of 470 (checked) and add no branch worth installing today.
- Branches newer than the data drive every GPU in the 535 list up to 580, the
  last branch for Maxwell, Pascal and Volta; 590 and later drive Turing and
  newer only (device ID 0x1e00 and up; checked against nvidia-open.ids, the
  open kernel modules' list, which covers Turing and newer).
- The 304/173/96/71 lists give the last legacy branch of GPUs that no branch
  above drives, so the facts module can say why it recommends nothing.
- A GPU in none of the lists is newer than the data: the module serves it with
  the newest branch.
"""

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "nvidia-detect-ids")
DEFAULT_OUTPUT = os.path.join(ROOT, "module_utils", "nvidia_branches.py")

# Branches gpunode can install, newest first. The data ends at 535.
POST_DATA_TURING_ONLY = ("595", "590")
POST_DATA_ALL = ("580", "570", "550")
FIRST_TURING_ID = 0x1E00
DATA_BRANCHES = {
    "535": "nvidia.ids",
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
    "26b5": "L40",
    "26b9": "L40S",
    "27b8": "L4",
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
    if lists["535"] != read_ids(data_dir, "nvidia-tesla-535.ids"):
        raise DataError("nvidia.ids and nvidia-tesla-535.ids differ; the table assumes they are equal")
    for name in SUBSET_OF_470:
        extra = read_ids(data_dir, name) - lists["470"] - lists["535"]
        if extra:
            raise DataError(f"{name} has IDs outside 470 and 535: {sorted(extra)[:5]}")
    open_ids = read_ids(data_dir, "nvidia-open.ids")
    early = sorted(i for i in open_ids if int(i, 16) < FIRST_TURING_ID)
    if early:
        raise DataError(f"nvidia-open.ids has IDs below 0x{FIRST_TURING_ID:x}: {early}")
    branches = (*POST_DATA_TURING_ONLY, *POST_DATA_ALL, "535", "470", "390", "340")
    groups = {}
    for device in sorted(set().union(*lists.values())):
        supported = []
        for branch in branches:
            if branch in POST_DATA_TURING_ONLY:
                ok = device in lists["535"] and int(device, 16) >= FIRST_TURING_ID
            elif branch in POST_DATA_ALL:
                ok = device in lists["535"]
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
    all_ids = set(known)
    for files in arch.values():
        for ids in files.values():
            all_ids |= set(ids)
    return {
        "source": f"Debian nvidia-detect {data_version(data_dir)}",
        "branches": branches,
        "groups": groups,
        "arch": arch,
        "legacy": legacy,
        "highest": max(lists["535"] | lists["470"]),
        "names": dict(sorted(KNOWN_NAMES.items())),
    }


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


def render(table):
    out = [
        '"""NVIDIA driver branches per PCI device ID (vendor 10de). Generated data: do not edit.',
        "",
        f"Made by scripts/gen-branch-table.py from {table['source']}'s per-branch",
        "ID lists (../shared/data/nvidia-detect-ids); regenerate with that script.",
        "BRANCHES lists the branches gpunode installs, newest first. SUPPORT maps the",
        "branches (space-separated, newest first) to the device IDs they all drive.",
        "ARCH_SUPPORT adds branches that drive some IDs on one machine type only.",
        "LEGACY_ONLY names the last (uninstallable) legacy branch of GPUs no branch",
        "in BRANCHES drives. An ID in none of these is newer than the data and is",
        "served by NEWEST_BRANCH. NAMES are fallback names when pci.ids has none.",
        '"""',
        "",
        f'DATA_SOURCE = "{table["source"]}"',
        f"BRANCHES = ({', '.join(repr(b).replace(chr(39), chr(34)) for b in table['branches'])})",
        f'NEWEST_BRANCH = "{table["branches"][0]}"',
        f'HIGHEST_KNOWN_ID = "{table["highest"]}"',
        "",
        "SUPPORT = {",
    ]
    for key in sorted(table["groups"], key=lambda k: (-len(k.split()), k)):
        out.append(f'    "{key}": {_ids_literal(table["groups"][key], 4)},')
    out += ["}", "", "ARCH_SUPPORT = {"]
    for machine, branches in table["arch"].items():
        out.append(f'    "{machine}": {{')
        for branch, ids in branches.items():
            out.append(f'        "{branch}": {_ids_literal(ids, 8)},')
        out.append("    },")
    out += ["}", "", "LEGACY_ONLY = {"]
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
