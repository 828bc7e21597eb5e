# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action gpunode_summary: the table site.yml ends with, a row per host, what it has and what the run changed.

Built from the facts each role publishes (``nvidia_gpu``, ``nvidia_driver``,
``nvidia_container_runtime``, ``kubelet_gpu``, ``gpushare_scheduler``) and the
host's ``gpunode_changes`` list, so an operator reads the state of the fleet at
a glance instead of scrolling through task output. A role that did not run on
a host leaves its column at ``-``.

Controller-side work, so an action plugin: it runs in the task's worker
process, where a module would start a Python interpreter on the controller for
every run (about 0.4 s of CPU on a no-op run, measured by
benchmarks/bench_noop.py). The documentation is library/gpunode_summary.py.
"""

import textwrap

from ansible.plugins.action import ActionBase

COLUMNS = (
    "host",
    "GPUs",
    "driver",
    "default runtime",
    "kubelet gates",
    "scheduler extender",
    "GPUs offered by",
    "reboot",
    "validated",
    "rollout",
    "this run",
)
# the GPUs cell names a fabric its NVSwitch count does not show (nvidia_gpu_facts' ``fabric``); its state
# is the validation's (gpu_validate's ``fabric``: this run's, or the record of the last one)
FABRICS = {"nvlink5": "NVLink5 fabric", "mnnvl": "NVL72 (MNNVL) fabric"}


def _gpus(facts):
    gpu = facts.get("nvidia_gpu")
    if not isinstance(gpu, dict):
        return "-"
    if not gpu.get("present") or not gpu.get("gpu_count"):
        return "none"
    counts = gpu.get("model_counts") or {}
    parts = [f"{count}x {model}" for model, count in counts.items()] or [f"{gpu['gpu_count']} GPU(s)"]
    if gpu.get("nvswitch_count"):
        parts.append(f"{gpu['nvswitch_count']} NVSwitch")
    state = (facts.get("gpu_validate") or {}).get("fabric")
    if gpu.get("fabric") in FABRICS or state:
        parts.append(" ".join(text for text in (FABRICS.get(gpu.get("fabric"), "fabric"), state) if text))
    return ", ".join(parts)


def _driver(facts):
    driver = facts.get("nvidia_driver")
    if not isinstance(driver, dict):
        return "-"
    version = driver.get("loaded_version") or driver.get("installed_version")
    if not version:
        return "not installed"
    if driver.get("method") == "preinstalled":  # adopted, as the image brought it
        return f"preinstalled {version} ({driver.get('module_type') or 'module type unknown'})"
    text = str(version)
    if driver.get("module_type"):
        text += f" {driver['module_type']}"
    if driver.get("held"):
        text += ", held"
    return text


def _runtime(facts):
    runtime = facts.get("nvidia_container_runtime")
    if not isinstance(runtime, dict):
        return "-"
    engines = runtime.get("engines") or {}
    if not engines:
        return "no engine"
    kubelet = runtime.get("kubelet_engine")
    parts = []
    for name in sorted(engines):
        default = (engines[name] or {}).get("default_runtime") or "?"
        parts.append(f"{name} {default}{' (kubelet)' if name == kubelet else ''}")
    return ", ".join(parts)


def _gates(facts):
    kubelet = facts.get("kubelet_gpu")
    if not isinstance(kubelet, dict):
        return "-"
    gates = kubelet.get("gates") or {}
    version = kubelet.get("kubernetes_version")
    text = ", ".join(f"{name}={'true' if value else 'false'}" for name, value in gates.items()) or "none"
    if version:
        text = f"{text} (kubelet {version})"
    if kubelet.get("restart_pending"):
        text += ", restart pending"
    return text


def _scheduler(facts):
    scheduler = facts.get("gpushare_scheduler")
    if not isinstance(scheduler, dict):
        return "-"
    if scheduler.get("state") == "absent":
        return "absent"
    parts = [str(scheduler[key]) for key in ("flavor", "api_version") if scheduler.get(key)]
    text = " ".join(parts) or "present"
    version = str(scheduler.get("kubernetes_version") or "")
    if version:
        # as the kubelet column shows it ("v1.30.4" and "1.30.4" are the same release)
        text += f" (kube-scheduler {version[1:] if version[:1] in 'vV' else version})"
    if scheduler.get("state") == "pending":
        # written, but kube-scheduler does not run it yet
        waiting = scheduler.get("waiting_for")
        text += f", pending: waiting for {waiting}" if waiting else ", pending"
    return text


def _reboot(facts):
    driver = facts.get("nvidia_driver")
    if not isinstance(driver, dict):
        return "-"
    return "REBOOT NEEDED" if driver.get("reboot_required") else "no"


def _validated(facts, untainted=None):
    """passed / failed (the checks) / not run, from nvidia_gpu_validate's facts (this run's, or the
    record of an earlier passed validation that site.yml's one read found: "passed YYYY-MM-DD"); a
    node that did not pass and that no taint keeps from work (``untainted``: why, from the add-ons
    plan) is said to serve untainted."""
    if untainted:
        return f"{_validated(facts)}; SERVING UNTAINTED ({untainted})"
    verdict = facts.get("gpu_validate")
    if not isinstance(verdict, dict):
        gpu = facts.get("nvidia_gpu")
        return "not run" if isinstance(gpu, dict) and gpu.get("gpu_count") else "-"
    if not verdict.get("passed"):
        return f"failed ({', '.join(verdict.get('failed_checks') or []) or '?'})"
    if verdict.get("ran"):
        return "passed"
    return f"passed {str(verdict.get('validated_at') or '')[:10]}".rstrip()


#: how kubernetes.core's k8s_drain fails an eviction the API server refused
EVICTION_REFUSED = "Failed to delete pod "


def _done(result):
    """Whether a task of the rolling path, as registered, ran and succeeded."""
    return isinstance(result, dict) and not result.get("skipped") and not result.get("failed")


def rollout(record, facts):
    """(the rollout cell, the message that fails the host after the table, or None) from the host's
    ``gpunode_rollout_record`` (playbooks/tasks/rollout_node.yml); ("-", None) off the rolling path."""
    if not isinstance(record, dict):
        return "-", None
    if record.get("not_started"):
        return "not started", (f"rollout not started: {record['not_started']} failed in an earlier batch, "
                               "and no later batch starts")
    drained, uncordoned = _done(record.get("drained")), _done(record.get("uncordoned"))
    failure = record.get("failed")
    if isinstance(failure, dict):
        # k8s_drain cordons, then evicts: an eviction refused (a PodDisruptionBudget to the end) leaves the
        # node cordoned; it takes the cordon back only when it cannot list the pods
        refused = str(failure.get("msg") or "").startswith(EVICTION_REFUSED)
        left = ", left cordoned" if (drained or refused) and not uncordoned else ""
        return (f"failed at {failure.get('task')}{left}",
                f"rollout failed at {failure.get('task')}: {failure.get('msg')}")
    if record.get("check_mode"):
        return ("would drain" if record.get("drain") else "would change, not drained"), None
    verdict = facts.get("gpu_validate") or {}
    parts = ["drained" if drained else "not drained", "changed" if record.get("changed") else "unchanged"]
    parts += ["validated"] if verdict.get("ran") and verdict.get("passed") else []
    parts += ["uncordoned"] if uncordoned else (["left cordoned: reboot pending"] if drained else [])
    return ", ".join(parts), None


# between a host's changes in its "this run" cell; table() puts each on a line of its own
CHANGE_SEPARATOR = "; "
# table() wraps a longer change at its spaces, the lines after the first indented
CHANGE_WIDTH = 60


def rows(hosts, host_facts, changes, offers=None, *, rollouts=None, untainted=None):
    """One row (a tuple in COLUMNS order) per host, in the order given (``offers`` and ``untainted``:
    per host, from the add-ons plan).

    The last cell is what this run changed on the host, its changes joined by
    CHANGE_SEPARATOR, or "nothing".
    """
    result = []
    for host in hosts:
        facts = host_facts.get(host) or {}
        changed = [" ".join(str(c).split()) for c in changes.get(host) or []]
        rolled = rollout((rollouts or {}).get(host), facts)[0]
        result.append(
            (
                host,
                _gpus(facts),
                _driver(facts),
                _runtime(facts),
                _gates(facts),
                _scheduler(facts),
                (offers or {}).get(host) or "-",
                _reboot(facts),
                _validated(facts, (untainted or {}).get(host)),
                rolled,
                CHANGE_SEPARATOR.join(changed) or "nothing",
            )
        )
    return result


def table(table_rows, columns=COLUMNS):
    """Aligned plain-text table; the last column is not padded.

    The last column (a run's changes on the host) holds one change per line: a
    host's first change on its row, the others on lines of their own below it,
    blank in the other columns, so that a host with many changes does not push
    a row beyond the screen's width; a change longer than CHANGE_WIDTH goes on
    over more lines, indented.
    """
    def change_lines(cell):
        wrap = textwrap.TextWrapper(CHANGE_WIDTH, subsequent_indent="  ", break_long_words=False,
                                    break_on_hyphens=False)
        return [text for change in str(cell).split(CHANGE_SEPARATOR) for text in wrap.wrap(change) or [""]]

    table_rows = [(*row[:-1], change_lines(row[-1])) for row in table_rows]
    widths = [max(len(str(row[i])) for row in [columns, *table_rows]) for i in range(len(columns) - 1)]
    widths.append(max([len(columns[-1])] + [len(text) for row in table_rows for text in row[-1]]))

    def line(cells, last):
        return "  ".join([*(str(cell).ljust(widths[i]) for i, cell in enumerate(cells)), last]).rstrip()

    lines = [line(columns[:-1], columns[-1]), "  ".join("-" * width for width in widths)]
    for row in table_rows:
        first, *more = row[-1]
        lines.append(line(row[:-1], first))
        lines.extend(line([""] * (len(columns) - 1), text) for text in more)
    return "\n".join(lines)


# library/gpunode_summary.py documents these options
ARGUMENT_SPEC = {
    "hosts": {"type": "list", "elements": "str", "required": True},
    "host_facts": {"type": "dict"},
    "changes": {"type": "dict"},
    "offers": {"type": "dict"},
    "untainted": {"type": "dict"},
    "rollouts": {"type": "dict"},
}
# the facts the roles publish that the table reads
FACTS = ("nvidia_gpu", "nvidia_driver", "nvidia_container_runtime", "kubelet_gpu", "gpushare_scheduler",
         "gpu_validate")


def from_hostvars(hostvars, hosts):
    """(host_facts, changes) of ``hosts``, read from the play's ``hostvars``: the changes are the
    host's ``gpunode_changes`` and, after them, what a role skipped there and why (``skipped: ...``,
    from ``nvidia_driver.skipped``, ``kubelet_gpu.skipped`` and the host's ``gpunode_skipped``). A host
    that site.yml's first play refused (``gpunode_node_state.refusal``) says so first, and its driver is
    the one the read found (the read publishes a driver plan's facts as that plan would leave them)."""
    host_facts, changes = {}, {}
    for host in hosts:
        variables = hostvars.get(host) or {}
        facts = variables.get("ansible_facts") or {}
        host_facts[host] = {name: facts[name] for name in FACTS if name in facts}
        # what the roles left alone on the host, with the reason (no systemd, no container engine)
        skipped = list((facts.get("nvidia_driver") or {}).get("skipped") or [])
        skipped += list((facts.get("kubelet_gpu") or {}).get("skipped") or [])
        skipped += list(variables.get("gpunode_skipped") or [])
        refused, driver = _refused(variables)
        if driver:
            host_facts[host]["nvidia_driver"] = driver
        changes[host] = refused + list(variables.get("gpunode_changes") or []) \
            + [f"skipped: {s}" for s in skipped]
    return host_facts, changes


def _refused(variables):
    """(["refused: GPU in use by ..."], the driver the read found) for a host that
    playbooks/node_state.yml refused, else ([], None)."""
    read = variables.get("gpunode_node_state")
    if not isinstance(read, dict) or not read.get("refusal"):
        return [], None
    work = (read.get("disruption") or {}).get("gpu_work") or []
    text = ", ".join(f"pid {p.get('pid')} ({p.get('unit') or p.get('command')})" for p in work)
    return [f"refused: GPU in use by {text}"], ((read.get("plans") or {}).get("driver") or {}).get("before")


class ActionModule(ActionBase):
    """Validates the options and returns ``table`` and ``rows``; changes nothing."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp  # no remote files
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        host_facts, changes, rollouts = args["host_facts"], args["changes"], args["rollouts"]
        if host_facts is None or changes is None:
            hostvars = (task_vars or {}).get("hostvars") or {}
            read_facts, read_changes = from_hostvars(hostvars, args["hosts"])
            host_facts = read_facts if host_facts is None else host_facts
            changes = read_changes if changes is None else changes
            if rollouts is None:
                rollouts = {host: (hostvars.get(host) or {}).get("gpunode_rollout_record")
                            for host in args["hosts"]}
        rollouts = rollouts or {}
        # what the add-ons play published on this host (localhost), where not given
        addons = ((task_vars or {}).get("ansible_facts") or {}).get("gpu_cluster_addons") or {}
        offers, untainted = (addons.get(name) if args[name] is None else args[name]
                             for name in ("offers", "untainted"))
        table_rows = rows(args["hosts"], host_facts, changes, offers, rollouts=rollouts, untainted=untainted)
        failures = {host: rollout(rollouts.get(host), host_facts.get(host) or {})[1]
                    for host in args["hosts"]}
        result.update(
            changed=False,
            table=table(table_rows),
            rows=[{column: row[i] for i, column in enumerate(COLUMNS)} for row in table_rows],
            rollout_failures={host: message for host, message in failures.items() if message},
        )
        return result
