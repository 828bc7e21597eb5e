# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What runs on the node: the kubelet process and the systemd units that start it.

Read from /proc and from ``systemctl show`` (the caller runs the command):

- a kubelet process is one whose ``comm`` is ``kubelet``; its command line
  (``cmdline``, NUL-separated), its systemd unit (the last ``*.service``
  component of its cgroup path, cgroup v1 or v2) and its start time
  (``stat`` field 22, clock ticks after boot) say what it runs with now;
- ``systemctl show`` gives, per unit, whether it is loaded and active, its
  main PID, its unit file and drop-ins in the order systemd applies them
  (``FragmentPath``, ``DropInPaths``) and ``NeedDaemonReload`` (a unit file
  changed since systemd read it).

Standard library only; Python 3.8+ (this runs on target hosts).
"""

import os
from collections import namedtuple

Process = namedtuple("Process", "pid argv unit started_after_boot")

SHOW_PROPERTIES = (
    "Id",
    "LoadState",
    "ActiveState",
    "UnitFileState",
    "MainPID",
    "FragmentPath",
    "DropInPaths",
    "NeedDaemonReload",
)


def parse_systemctl_show(text):
    """Blocks of ``systemctl show`` output (one per unit, blank-line separated) as dicts."""
    units = []
    current = {}
    for line in (text or "").splitlines():
        if not line.strip():
            if current:
                units.append(current)
                current = {}
            continue
        key, value = line.split("=", 1) if "=" in line else (line, "")
        current[key] = value
    if current:
        units.append(current)
    return units


def unit_files(show):
    """The unit's files in the order systemd applies them: fragment, then drop-ins."""
    files = [show["FragmentPath"]] if show.get("FragmentPath") else []
    return files + [path for path in (show.get("DropInPaths") or "").split() if path]


def loaded(show):
    return bool(show) and show.get("LoadState") == "loaded"


def unit_of_cgroup(text):
    """The systemd service a process belongs to, from /proc/PID/cgroup; None when none."""
    unit = None
    for line in (text or "").splitlines():
        path = line.split(":", 2)[-1]
        for part in reversed(path.split("/")):
            if part.endswith(".service"):
                if unit is None or line.startswith("0::") or ":name=systemd:" in line:
                    unit = part
                break
    return unit


def start_ticks(stat_text):
    """Field 22 of /proc/PID/stat (start time, clock ticks after boot); the name may hold spaces."""
    rest = stat_text[stat_text.rindex(")") + 2 :].split()
    return int(rest[19])


def kubelet_processes(proc_root="/proc", listdir=os.listdir, read=None, ticks_per_second=None):
    """The kubelet processes running now, as Process tuples (oldest first)."""
    read = read or _read
    hertz = ticks_per_second or os.sysconf("SC_CLK_TCK")
    found = []
    try:
        pids = [name for name in listdir(proc_root) if name.isdigit()]
    except OSError:
        return found
    for pid in pids:
        base = os.path.join(proc_root, pid)
        try:
            if read(os.path.join(base, "comm")).strip() != "kubelet":
                continue
            argv = [arg for arg in read(os.path.join(base, "cmdline")).split("\0") if arg]
            unit = unit_of_cgroup(read(os.path.join(base, "cgroup")))
            started = start_ticks(read(os.path.join(base, "stat"))) / float(hertz)
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not readable
        found.append(Process(int(pid), argv, unit, started))
    return sorted(found, key=lambda p: p.started_after_boot)


def _read(path):
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def wall_time(started_after_boot, boot_now, wall_now):
    """The wall-clock time a process started, from its start after boot and the two clocks now."""
    return wall_now - (boot_now - started_after_boot)
