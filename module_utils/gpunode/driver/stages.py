# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The two calls of the driver concern: the plan (``nvidia_driver_state``) and the check after
the change (``nvidia_driver_verify``, stage ``final``).

:func:`evaluate` reads the node through a :class:`~ansible.module_utils.gpunode.host.commands.Host`,
builds the request, plans, and at ``final`` verifies; a run that did not leave what it was
asked for raises :class:`VerifyError`, which carries the state read. What a run changed is
told on the controller from the plan, the facts before and the facts after
(``filter_plugins/nvidia_driver.py``).
"""

from ansible.module_utils.gpunode.driver import el_signed
from ansible.module_utils.gpunode.driver.driver import (
    DriverError,
    build_request,
    version_matches,
)
from ansible.module_utils.gpunode.driver.fabric_plan import with_fabric
from ansible.module_utils.gpunode.driver.facts import driver_facts, pending_reboot
from ansible.module_utils.gpunode.driver.host import (
    read_driver,
    read_el_signed,
    read_index,
    read_signed_archive,
    read_smi,
    read_state,
    read_version_set,
)
from ansible.module_utils.gpunode.driver.plan import (
    index_lookups,
    plan,
    signed_fallback,
    signed_request,
)
from ansible.module_utils.gpunode.driver.preinstalled import (
    PREINSTALLED,
    adopt,
    check_fabricmanager,
    refuse_foreign,
)


class VerifyError(DriverError):
    """The driver on the node is not the one asked for; ``result`` goes into the failure."""

    def __init__(self, message, state):
        super().__init__(message)
        self.result = {"state": public(state)}


def public(state):
    """The state as returned: without dpkg's packages and the apt index."""
    return {k: v for k, v in state.items() if k not in ("packages", "index", "version_set")}


def verify(state, request, gpu):
    """Raise :class:`VerifyError` when the run did not leave what it was asked for: the wanted
    driver on disk (its module for the running kernel, its userspace) and, unless a reboot is
    pending, loaded and answering ``nvidia-smi`` on every GPU (an adopted driver: answering)."""
    if request.get("method") == PREINSTALLED:
        return _verify_smi(state, gpu, state["loaded"]["version"])
    on_disk = (state["module_on_disk"] or {}).get("version")
    if not version_matches(on_disk, request["wanted"]) or not version_matches(state["userspace_version"],
                                                                              request["wanted"]):
        raise VerifyError(f"after installing, the driver for kernel {state['kernel']} is "
                          f"{on_disk or 'absent'} (userspace {state['userspace_version'] or 'absent'}), "
                          f"wanted {request['wanted']}", state)
    if pending_reboot(state) or not state["loaded"]["version"]:
        return None
    return _verify_smi(state, gpu, state["userspace_version"])


def _verify_smi(state, gpu, version):
    """nvidia-smi answers for every GPU with ``version``."""
    smi = state["smi"] or {}
    gpus = sum(1 for d in gpu["devices"] if d.get("kind") == "gpu")
    if smi.get("error") or len(smi.get("driver_versions") or []) != gpus \
            or set(smi["driver_versions"]) != {version}:
        raise VerifyError(f"nvidia-smi: {smi.get('error') or smi.get('driver_versions')}; wanted "
                          f"{version} on {gpus} GPU(s)", state)


def read_request(host, params, gpu, os_info):
    """``(request, state)``: the request as the node allows it (the distribution's signed modules
    under Secure Boot, their packages from the archive or the repository) and the node's state."""
    try:
        request = with_fabric(build_request(params, gpu, os_info), params, gpu, os_info)
    except DriverError:
        # a driver the method would install over says so first (not the package data of a branch)
        if params["method"] != PREINSTALLED:
            refuse_foreign(read_driver(host, params), params)
        raise
    state = read_state(host, params, os_info, request)
    if request["method"] == PREINSTALLED:
        state["smi"] = read_smi(host, state["location"]["smi"])
        request = adopt(request, state, gpu)
        check_fabricmanager(request, state)
        return request, state
    refuse_foreign(state, request)
    request = signed_fallback(state, request)
    if request["method"] == "ubuntu-signed":
        archive = read_signed_archive(host, request, state)
        request = signed_request(request, state, archive, params.get("refreshed", False))
    elif request["method"] == "el-signed":  # refused before any read where the distribution signs none
        read = read_el_signed(host, el_signed.offer(state, request), state["kernel"])
        request = el_signed.signed_request(request, state, read)
    for warning in request["warnings"]:
        host.warn(warning)
    return request, state


def planned(host, state, request):
    """The plan; planned again with the apt index when it depends on packages it names (apt only:
    dnf refreshes its repositories' metadata itself when it installs), and with the packages an
    install of a version takes at that version (``version_set``: each is asked for at it)."""
    steps = plan(state, request)
    manager = request.get("package_manager") or "apt"
    lookups = index_lookups(steps, request) if manager == "apt" else []
    if lookups:
        state["index"] = read_index(host, lookups) or {}
    # every package at the version (el-signed: each kmod is one kernel's; the version is the module's)
    if steps["install"] and request["version"] and request["packages"] and request["method"] != "el-signed":
        state["version_set"] = read_version_set(host, request["packages"]["install"], request["version"],
                                                manager)
    return plan(state, request) if lookups or state.get("version_set") else steps


def read_smi_when_needed(host, params, state, steps):
    """nvidia-smi's answer on a loaded driver, in the final check or on a converged node."""
    loaded = state["loaded"]["version"]
    if loaded and (params["stage"] == "final" or steps["converged"]) \
            and (state["smi"] is None or params["stage"] == "final"):
        state["smi"] = read_smi(host, state["location"]["smi"])
        if params["stage"] == "plan" and state["smi"]["error"]:
            host.warn(f"nvidia-smi does not answer with the driver {loaded} loaded: {state['smi']['error']}")


def evaluate(host, params, gpu, os_info):
    """The module's result for ``params["stage"]`` on a node with NVIDIA GPUs ``gpu``:
    ``changed``, ``request``, ``plan``, ``before``, ``state`` and ``ansible_facts``
    (``nvidia_driver``: at ``plan`` what the plan will leave, at ``final`` what was read)."""
    request, state = read_request(host, params, gpu, os_info)
    steps = planned(host, state, request)
    read_smi_when_needed(host, params, state, steps)
    before = driver_facts(state, request)
    result = {"changed": False, "request": request, "plan": steps, "before": before, "state": public(state)}
    if params["stage"] == "plan":
        after = driver_facts(state, request, steps)
    else:
        verify(state, request, gpu)
        after = before
    result["ansible_facts"] = {"nvidia_driver": after}
    return result
