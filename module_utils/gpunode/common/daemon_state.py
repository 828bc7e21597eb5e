# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether a running daemon has read its configuration files.

A daemon reads its files when it starts. A run killed after writing a file
but before the restart leaves the daemon on its old configuration while the
file already says the right thing; comparing files with each other cannot see
it. So modules compare the start time of the service's main process with the
files' modification times: a file changed after the process started has not
been read (``stale_files``).

Times: the process start is ``starttime`` of ``/proc/PID/stat`` (clock ticks
since boot, proc(5)), turned into wall-clock time through ``CLOCK_BOOTTIME``
(the same clock, at nanosecond resolution) rather than ``btime`` of
``/proc/stat``, which is whole seconds and would make a file written half a
second before a restart look newer than the daemon. The main PID and the
state come from ``systemctl show`` (one call for all units).

Standard library only; Python 3.8+ (this runs on target hosts).
"""

import os
import time

from ansible.module_utils.gpunode.common.commands import C_LOCALE


def parse_show(output):
    """``systemctl show`` output (blank-line separated units) -> list of dicts."""
    units, current = [], {}
    for line in (output or "").splitlines():
        if not line.strip():
            if current:
                units.append(current)
                current = {}
            continue
        key, _sep, value = line.partition("=")
        current[key] = value
    if current:
        units.append(current)
    return units


def units_state(module, units):
    """``{unit: {"active": bool, "pid": int|None, "loaded": bool}}`` for systemd ``units``.

    Units systemd does not know are ``loaded: False``. Without systemctl,
    every unit is reported inactive and unloaded.
    """
    states = {unit: {"active": False, "pid": None, "loaded": False} for unit in units}
    systemctl = module.get_bin_path("systemctl")
    if not systemctl or not units:
        return states
    rc, out, _err = module.run_command(
        [systemctl, "show", "--property=Id,LoadState,ActiveState,MainPID", "--", *units],
        environ_update=C_LOCALE,
    )
    if rc != 0:
        return states
    shown_units = parse_show(out)  # one block per unit, in the order asked
    for index, unit in enumerate(units[: len(shown_units)]):
        shown = shown_units[index]
        pid = int(shown.get("MainPID", "0") or 0)
        states[unit] = {
            "active": shown.get("ActiveState") == "active",
            "pid": pid or None,
            "loaded": shown.get("LoadState") == "loaded",
        }
    return states


def process_start(pid, proc_root="/proc", now=None, boottime=None):
    """Wall-clock start time (epoch seconds) of process ``pid``; None when it is gone."""
    try:
        with open(os.path.join(proc_root, str(pid), "stat"), encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after the last ')'
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        ticks = int(fields[19])  # field 22 of proc(5), the 20th after the name
    except (IndexError, ValueError):
        return None
    now = time.time() if now is None else now
    boottime = time.clock_gettime(time.CLOCK_BOOTTIME) if boottime is None else boottime
    return now - boottime + ticks / os.sysconf("SC_CLK_TCK")


def stale_files(started, paths):
    """The files of ``paths`` modified after ``started`` (epoch seconds); [] when ``started`` is None."""
    if started is None:
        return []
    stale = []
    for path in paths:
        try:
            if os.stat(path).st_mtime > started:
                stale.append(path)
        except OSError:
            continue
    return stale


def running_state(module, service, paths):
    """``(unit state or None, stale files)`` for the daemon of ``service`` and its ``paths``.

    None when ``service`` is empty or systemd does not know it; the stale files
    are those changed after the running main process started.
    """
    if not service:
        return None, []
    state = units_state(module, [service])[service]
    if not state["loaded"]:
        return None, []
    started = process_start(state["pid"]) if state["active"] and state["pid"] else None
    return state, stale_files(started, paths)
