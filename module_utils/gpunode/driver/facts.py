# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the driver role publishes: ``ansible_facts.nvidia_driver`` and the run's change lines."""

from ansible.module_utils.gpunode.driver.driver import PERSISTENCED
from ansible.module_utils.gpunode.driver.plan import HOLDING_METHODS, held_packages, skipped


def pending_reboot(state):
    """Whether the host needs a reboot to run the driver on disk: nouveau holds the
    GPUs, or the loaded module is not the one on disk (it could not be unloaded)."""
    loaded = state.get("loaded") or {}
    if "nouveau" in (loaded.get("modules") or []):
        return True
    on_disk = (state.get("module_on_disk") or {}).get("version")
    return bool(loaded.get("version")) and bool(on_disk) and loaded["version"] != on_disk


def driver_facts(state, request, steps=None):
    """``ansible_facts.nvidia_driver``: the driver of this host after the run.

    With ``steps`` (a plan about to run, e.g. in check mode) the facts are the
    prediction of what the run leaves; without, they describe ``state``.
    """
    loaded = state.get("loaded") or {}
    on_disk = state.get("module_on_disk") or {}
    installed_version = state.get("userspace_version")
    loaded_version = loaded.get("version")
    module_type = loaded.get("module_type") or on_disk.get("flavor")
    reboot_required = pending_reboot(state)
    hold_targets = (request["packages"] or {}).get("hold") or []
    held = None
    if request["method"] in HOLDING_METHODS and state.get("packages") is not None:
        held = bool(hold_targets) and all(p in held_packages(state["packages"]) for p in hold_targets)
    if steps:
        if steps["install"]:
            installed_version = request["version"]
            module_type = request["module_type"]
        if steps["load"] and not steps["reboot_required"]:
            loaded_version = installed_version
            module_type = request["module_type"]
        reboot_required = steps["reboot_required"]
        if held is not None:
            held = request["hold"]
    return {
        "method": request["method"],
        "branch": request["branch"],
        "wanted": request["wanted"],
        "installed_version": installed_version,
        "loaded_version": loaded_version,
        "module_type": module_type,
        "held": held,
        "reboot_required": bool(reboot_required),
        "origin": (state.get("origin") or {}).get("kind"),
        "driver_root": (state.get("location") or {}).get("driver_root"),
        "tools_prefix": (state.get("location") or {}).get("tools_prefix"),
        "skipped": skipped(state, request),
    }


def change_lines(steps, before, after):
    """One short line per change a run made (``gpunode_changes``), from the plan it ran
    and the driver facts before and after it."""
    lines = []
    if steps["repair_dpkg"]:
        lines.append("dpkg: finished the interrupted run (dpkg --configure -a)")
    if steps["install"]:
        new = after["installed_version"] or after["wanted"]
        kind = after["module_type"] or "module type unknown"
        if new == before["installed_version"]:
            lines.append(f"driver {new} reinstalled ({kind})")
        else:
            lines.append(f"driver {before['installed_version'] or 'none'} -> {new} ({kind})")
    if steps.get("remove"):
        lines.append(f"packages of the other driver method removed: {', '.join(steps['remove'])}")
    if steps.get("kernel_modules"):
        lines.append(f"signed modules for the next kernel installed: {', '.join(steps['kernel_modules'])}")
    if steps["dkms_build"]:
        lines.append(f"driver {steps['dkms_version']}: module built for the running kernel")
    if steps["unhold"] and not steps["hold"]:
        lines.append(f"driver packages released: {', '.join(steps['unhold'])}")
    if steps["hold"]:
        lines.append(f"driver packages held: {', '.join(steps['hold'])}")
    if steps["blacklist_nouveau"]:
        lines.append("nouveau blacklisted")
    if (steps["unload"] or steps["load"]) and after["loaded_version"] != before["loaded_version"]:
        lines.append(f"driver loaded: {before['loaded_version'] or 'none'} -> "
                     f"{after['loaded_version'] or 'none'}")
    if steps["persistence"]:
        lines.append(f"{PERSISTENCED}: {', '.join(steps['persistence'])}")
    if steps["fabricmanager"]:
        fm = steps["fabricmanager"]
        lines.append(f"fabric manager {fm['package']}: "
                     + ", ".join(k for k in ("install", "enable", "start") if fm[k]))
    if after["reboot_required"]:
        lines.append("reboot pending to load the driver")
    return lines
