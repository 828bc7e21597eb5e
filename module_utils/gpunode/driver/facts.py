# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the driver role publishes: ``ansible_facts.nvidia_driver`` (the run's change lines are told on
the controller from these facts before and after, ``filter_plugins/nvidia_driver.py``)."""

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
