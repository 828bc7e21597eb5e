# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter nvidia_driver_changes: what a driver run changed, one short line each (site.yml's summary).

Told on the controller from three results the driver role already holds: the plan the run
carried out (``nvidia_driver_state``'s ``plan``), the driver facts before it (its ``before``)
and the facts after it (``ansible_facts.nvidia_driver`` as ``nvidia_driver_verify`` read them
after the change; in check mode as ``nvidia_driver_state`` predicted them). No module is handed
the plan or the facts back, and nothing is read on the node again.

Standard library only, no Ansible import: the unit tests load this file on every Python.
"""

PERSISTENCED = "nvidia-persistenced"
#: module_utils/gpunode/driver/fabric_plan.py FABRIC_STEPS
FABRIC_STEPS = ("install", "packages", "boot_files", "modules", "files", "imex_config", "stop", "mask",
                "enable", "start", "restart")


def _install_lines(steps, before, after):
    if not steps.get("install"):
        return []
    new = after.get("installed_version") or after.get("wanted")
    kind = after.get("module_type") or "module type unknown"
    if new == before.get("installed_version"):
        return [f"driver {new} reinstalled ({kind})"]
    return [f"driver {before.get('installed_version') or 'none'} -> {new} ({kind})"]


def _package_lines(steps, after):
    lines = []
    if steps.get("remove"):
        lines.append(f"packages of the other driver method removed: {', '.join(steps['remove'])}")
    if steps.get("kernel_modules"):
        lines.append(f"signed modules for the next kernel installed: {', '.join(steps['kernel_modules'])}")
    built = [] if not steps.get("dkms_build") else ["the running kernel"]
    kernels = steps.get("dkms_kernels") or []
    built += [f"kernel {kernel}, which boots next" for kernel in kernels[len(built):]]
    # an install's build (a bake's, for the image's kernel) had no version registered: the installed one
    version = steps.get("dkms_version") or after.get("installed_version")
    lines += [f"driver {version}: module built for {which}" for which in built]
    if steps.get("unhold") and not steps.get("hold"):
        lines.append(f"driver packages released: {', '.join(steps['unhold'])}")
    if steps.get("hold"):
        lines.append(f"driver packages held: {', '.join(steps['hold'])}")
    return lines


def _service_lines(steps):
    lines = []
    if steps.get("persistence"):
        lines.append(f"{PERSISTENCED}: {', '.join(steps['persistence'])}")
    fabric = steps.get("fabric")
    if fabric:  # as module_utils/gpunode/driver/fabric_plan.py describe() says it
        lines.append(f"fabric {fabric['kind']}: " + "; ".join(
            f"{key} " + ", ".join(i if isinstance(i, str) else i.get("path", i.get("key"))
                                  for i in fabric[key]) for key in FABRIC_STEPS if fabric.get(key)))
    return lines


def nvidia_driver_changes(steps, before, after):
    """One line per change of the plan ``steps`` that ran, told from the driver facts ``before``
    and ``after`` it (``ansible_facts.nvidia_driver``'s keys). A converged plan changed nothing."""
    if not steps or steps.get("converged"):
        return []
    before, after = before or {}, after or {}
    lines = ["dpkg: finished the interrupted run (dpkg --configure -a)"] if steps.get("repair_dpkg") else []
    lines += _install_lines(steps, before, after) + _package_lines(steps, after)
    if steps.get("blacklist_nouveau"):
        lines.append("nouveau blacklisted")
    loaded = (before.get("loaded_version"), after.get("loaded_version"))
    if (steps.get("unload") or steps.get("load")) and loaded[0] != loaded[1]:
        lines.append(f"driver loaded: {loaded[0] or 'none'} -> {loaded[1] or 'none'}")
    lines += _service_lines(steps)
    if after.get("reboot_required"):
        lines.append("reboot pending to load the driver")
    return lines


class FilterModule:
    """The driver role's filters."""

    def filters(self):
        return {"nvidia_driver_changes": nvidia_driver_changes}
