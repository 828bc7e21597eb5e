# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One read of every concern on a GPU node (``gpunode_node_state``).

Each concern is read by the same :func:`read` its own state module calls, with the
arguments that module takes, checked against that module's argument spec. Nothing
is changed. A concern counts as converged only when every concern before it is too
(the driver decides what the runtime's CDI spec holds): a concern after one that
changes, or whose read fails, is not read here at all, its role reads it once, after
that change. A concern whose read fails is simply not converged: its
role reads it again and fails there, with the message of its own module.

Each read is what the concern's state module returns for the same arguments (the
check-mode plan: neither changes anything). When the driver, the container runtime or the
kubelet plans a change (every concern before it converged), the result is handed over whole
(``plans.<concern>``, its facts and warnings published as that module would publish
them): the role, in the same run, carries out that plan instead of reading the node a
second time (roles/nvidia_driver/tasks/plan.yml, roles/nvidia_container_runtime/tasks/state.yml,
roles/kubelet_gpu/tasks/main.yml). The kubelet's plan carries the files to write (``edits``,
kubelet/state_call.handed_plan), which ``gpunode_planned_files`` writes when each file
still holds what this read found.
"""

from ansible.module_utils.gpunode.common.arguments import ArgumentsError, validated
from ansible.module_utils.gpunode.driver import state_call as driver
from ansible.module_utils.gpunode.kubelet import state_call as kubelet
from ansible.module_utils.gpunode.kubelet.discovery import MissingRequirement
from ansible.module_utils.gpunode.runtime import state_call as container_runtime
from ansible.module_utils.gpunode.validate import marker

# in the order site.yml converges them
CONCERNS = ("driver", "container_runtime", "kubelet", "validated")
# the concerns whose role carries out a plan handed over (the result of its own state module)
HANDED = ("driver", "container_runtime", "kubelet")


class ConcernFailed(Exception):
    """A concern's read called ``fail_json``."""


class ConcernModule:
    """The module as one concern's reader sees it: that concern's arguments, check mode,
    warnings kept (shown only for a converged concern, whose play leaves the host out)."""

    def __init__(self, module, params):
        self._module = module
        self.params = params
        self.check_mode = True
        self.warnings = []

    def warn(self, warning):
        self.warnings.append(warning)

    def fail_json(self, msg, **_result):
        raise ConcernFailed(msg)

    def __getattr__(self, name):
        return getattr(self._module, name)


def read_driver(module, params):
    reader = ConcernModule(module, validated(driver.ARGUMENT_SPEC, params, "driver"))
    result = driver.read(reader)
    return driver.converged(result), result, reader.warnings


def read_container_runtime(module, params, facts):
    params = dict(params)
    if not params.get("driver_version"):  # the role's argument, from the facts the driver read publishes
        params["driver_version"] = (facts.get("nvidia_driver", {}).get("loaded_version")
                                    or facts.get("nvidia_gpu", {}).get("loaded_driver_version") or "")
    reader = ConcernModule(module, validated(container_runtime.ARGUMENT_SPEC, params, "container_runtime"))
    result = container_runtime.read(reader)
    return container_runtime.converged(result), result, reader.warnings


def read_kubelet(module, params):
    reader = ConcernModule(module, validated(kubelet.ARGUMENT_SPEC, params, "kubelet",
                                             kubelet.MUTUALLY_EXCLUSIVE))
    outcome = kubelet.read(reader)
    done = kubelet.converged(outcome)
    return done, outcome.result if done else kubelet.handed_plan(outcome), reader.warnings + outcome.warnings


def read_validated(params, facts):
    """The last validation (gpu_validate's marker), passed with the driver loaded now."""
    params = validated(marker.ARGUMENT_SPEC, params, "validated")
    loaded = params["driver_version"] or (facts.get("nvidia_driver", {}).get("loaded_version")
                                          or facts.get("nvidia_gpu", {}).get("loaded_driver_version") or "")
    done, concern_facts, why = marker.read(params["marker"], loaded, params["boot_unit"])
    if not done:  # the validation play runs on this host: "read again by its role: <why>"
        raise ConcernFailed(why)
    return done, {"ansible_facts": concern_facts}, []


ERRORS = (ConcernFailed, ArgumentsError, MissingRequirement,
          *driver.ERRORS, *container_runtime.ERRORS, *kubelet.ERRORS)


def read(module, concerns):
    """``{"converged": {concern: bool}, "reasons": {concern: why not}, "plans": {concern: result},
    "ansible_facts": {...}, "warnings": [...]}`` for the concerns given (name -> that state
    module's arguments). The facts and warnings are those of the converged concerns and of the
    plans handed over (``plans``, see :data:`HANDED`); a role that still runs reads and publishes
    its own."""
    converged, reasons, facts, published, warnings, plans = {}, {}, {}, {}, [], {}
    readers = {
        "driver": lambda params: read_driver(module, params),
        "container_runtime": lambda params: read_container_runtime(module, params, facts),
        "kubelet": lambda params: read_kubelet(module, params),
        "validated": lambda params: read_validated(params, facts),
    }
    chain = True
    for name in CONCERNS:
        if concerns.get(name) is None:
            continue
        if not chain:  # not read: its role reads it after the change before it (one read, not two)
            converged[name], reasons[name] = False, "a concern before it changes"
            continue
        try:
            done, result, concern_warnings = readers[name](concerns[name])
        except ERRORS as exc:
            converged[name], reasons[name] = False, f"read again by its role: {exc}"
            chain = False
            continue
        facts.update(result["ansible_facts"])
        if not done and name in HANDED:  # its role carries this plan out, reading nothing
            plans[name] = result
        chain = converged[name] = done
        # its play leaves the host out, or its role carries out the plan handed over: its facts
        # and warnings are published here
        if done or name in plans:
            published.update(result["ansible_facts"])
            warnings.extend(concern_warnings)
        if not done:
            reasons[name] = "changes planned"
    return {"converged": converged, "reasons": reasons, "plans": plans, "ansible_facts": published,
            "warnings": warnings}
