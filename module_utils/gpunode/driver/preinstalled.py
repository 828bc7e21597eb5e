# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A driver the host already runs: adopted (``nvidia_driver_method: preinstalled``), or refused
by the methods that would install another over it.

``preinstalled`` never installs, removes, replaces or reloads a driver. It verifies the
loaded one against the GPUs and the inventory (:func:`adopt`) and plans at most the holds
of the packages that own it and the persistence daemon. The ``packages`` and ``runfile``
methods refuse, before any change, a loaded driver that no package and no ``.run``
install owns, or one the GPU Operator manages (:func:`refuse_foreign`). Pure Python.
"""

from ansible.module_utils.gpunode.driver.driver import (
    DriverError,
    branch_of,
    branch_supported,
    version_matches,
)
from ansible.module_utils.gpunode.driver.gpu import needs_open_module

PREINSTALLED = "preinstalled"
#: What an origin kind is called in messages.
ORIGIN_WORDS = {
    "package": "installed by the package(s) {packages}",
    "runfile": "installed by NVIDIA's .run installer ({traces})",
    "image": "brought by the image, owned by no package and no .run install",
    "operator": "managed by the NVIDIA GPU Operator",
    None: "with no driver files found",
}


def describe(loaded, state):
    """``"580.159.04 (open), brought by the image ... under /usr/local/nvidia"``."""
    found = state.get("origin") or {}
    words = ORIGIN_WORDS[found.get("kind")].format(packages=", ".join(found.get("packages") or []),
                                                   traces=", ".join(found.get("traces") or []))
    text = f"{loaded['version']} ({loaded.get('module_type') or 'module type unknown'}), {words}"
    if found.get("where"):
        text += f", under {found['where']}"
    return text


def refuse_operator(state):
    """Refuse a loaded driver the GPU Operator manages (it upgrades it itself)."""
    loaded = state.get("loaded") or {}
    if loaded.get("version") and (state.get("origin") or {}).get("kind") == "operator":
        raise DriverError(f"the loaded NVIDIA driver {describe(loaded, state)} "
                          f"({state['location']['driver_root']}): the Operator upgrades it; leave these "
                          "hosts out of gpunode's driver play (or remove the Operator's driver first). "
                          "Nothing was changed.")


def refuse_foreign(state, request):
    """With ``packages``/``runfile``/``ubuntu-signed``: refuse a loaded driver brought by the image."""
    refuse_operator(state)
    loaded = state.get("loaded") or {}
    if loaded.get("version") and (state.get("origin") or {}).get("kind") == "image":
        raise DriverError(
            f"nvidia_driver_method: {request['method']} would install a second driver over the loaded "
            f"NVIDIA driver {describe(loaded, state)}. Set nvidia_driver_method: preinstalled to adopt it "
            "(gpunode then verifies it and never replaces it), or remove it first. Nothing was changed.")


def adopt(request, state, gpu):
    """The request of ``preinstalled``: the loaded driver, verified; raises DriverError naming the
    loaded version, its origin and what was asked when it does not do."""
    loaded = state.get("loaded") or {}
    version = loaded.get("version")
    if not version:
        raise DriverError("nvidia_driver_method: preinstalled adopts the driver the host runs, and no "
                          "NVIDIA kernel module is loaded (sysfs module/nvidia/version, "
                          "/proc/driver/nvidia/version); load it, or choose the packages or runfile method")
    refuse_operator(state)
    what = describe(loaded, state)
    branch = branch_of(version)
    supported = [str(b) for b in gpu.get("supported_branches") or []]
    if request["check_branch"] and not branch_supported(branch, supported):
        raise DriverError(f"the preinstalled driver {what} cannot drive every GPU on this host; branches "
                          f"that can: {', '.join(supported) or 'none'} (nvidia_driver_check_branch: false "
                          "skips this check)")
    for asked, name in ((request["asked_version"], "nvidia_driver_version"),
                        (request["asked_branch"], "nvidia_driver_branch")):
        if asked and not version_matches(version, asked):
            raise DriverError(f"the preinstalled driver is {what}; {name} asks for {asked}. "
                              "preinstalled never replaces a driver: change the image, or the setting")
    _check_module_type(request, loaded, gpu, what)
    owners = (state.get("origin") or {}).get("packages") or []
    return dict(request, branch=branch, version=version, wanted=version,
                module_type=loaded.get("module_type") or request["module_type"],
                packages={"install": [], "pin": None, "hold": owners} if owners else None,
                hold=request["hold"] and bool(owners))


def _check_module_type(request, loaded, gpu, what):
    module_type = loaded.get("module_type")
    open_only = [d["device_id"] for d in gpu.get("devices") or []
                 if d.get("kind") == "gpu" and needs_open_module(d["device_id"])]
    if module_type == "proprietary" and open_only:
        raise DriverError(f"the preinstalled driver {what}: device(s) {', '.join(open_only)} are driven only "
                          "by the open kernel modules")
    asked = request["asked_module_type"]
    if asked in ("open", "proprietary") and module_type and module_type != asked:
        raise DriverError(f"the preinstalled driver is {what}; nvidia_driver_module_type asks for {asked}")


def check_fabricmanager(request, state):
    """On NVSwitch systems the fabric manager must be of the loaded driver's branch (dpkg's packages)."""
    if not request["fabricmanager"]:
        return
    packages = state.get("packages") or {}
    found = {name: entry.get("version") for name, entry in packages.items()
             if name.startswith("nvidia-fabricmanager") and entry.get("status") == "installed"}
    same = [name for name, version in found.items()
            if version and version_matches(version.split("-")[0].split(":")[-1], request["branch"])]
    if not same:
        listed = ", ".join(f"{n} {v}" for n, v in sorted(found.items())) or "none installed"
        raise DriverError(f"this host has NVSwitches and the preinstalled driver is {request['version']}; "
                          f"its fabric manager must be of branch {request['branch']} ({listed}). "
                          "nvidia_driver_fabricmanager: never skips this check")
