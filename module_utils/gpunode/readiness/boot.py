# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The boot unit's entry (gpunode-boot-validate.service): re-gate a GPU node at every boot.

The node has no Ansible: the role installs one archive (action gpunode_boot_archive) holding
ansible-core's module_utils, gpunode's, and the two modules the play runs, nvidia_gpu_validate and
gpu_node_condition; its ``__main__`` calls :func:`main`. At boot it marks the boot under
``/run/gpunode`` (a tmpfs, cleared at every boot), publishes the Node condition ``False``,
``NotValidatedSinceBoot`` (unless this boot's validation already passed: the play's own writes the
same record), runs the validation with the arguments the role used (``/etc/gpunode/boot-validate.json``),
records the verdict and publishes it (``True``/``Passed`` or ``False``/``ValidationFailed``, as the
role does). A publication is retried with a doubling wait while the API server cannot be reached,
the Node does not exist yet or the kubelet has no kubeconfig yet, ``retry_seconds`` in all.
Exit status 1 when the validation failed or a verdict could not be published.

Python 3.8+, standard library: runs on targets.
"""

import itertools
import json
import os
import runpy
import sys
import time

from ansible.module_utils.gpunode.host import files
from ansible.module_utils.gpunode.readiness import condition

SETTINGS = "/etc/gpunode/boot-validate.json"
CLIQUE_LABEL = "nvidia.com/gpu.clique"
RUN_DIR = "/run/gpunode"
NOT_VALIDATED = ("False", "NotValidatedSinceBoot",
                 "not validated since the node booted; its boot validation runs")
#: gpu_node_condition's messages (readiness/condition.py, kubelet/identity.py) worth another try
RETRIED = ("cannot reach the API server", "not found (404)", "no kubelet kubeconfig")
NO_MARKER = {"passed": False, "failed_checks": [], "driver_version": ""}


def first_condition(verdict):
    """The condition to publish before validating; None when this boot's validation passed already."""
    return None if (verdict or {}).get("passed") else NOT_VALIDATED


def retried(result):
    """Whether a failed publication is tried again (the API server or the Node is not there yet)."""
    return any(text in (result.get("msg") or "") for text in RETRIED)


def delays(total, first=1.0, longest=30.0):
    """The waits between attempts: doubling from ``first`` up to ``longest``, at most ``total`` in all."""
    waited, delay = 0.0, first
    while waited + delay <= total:
        yield delay
        waited += delay
        delay = min(delay * 2, longest)


def publish(call, condition, settings, sleep, log, *, labels=None):
    """Set the condition (and ``labels``) through gpu_node_condition; whether it holds it."""
    args = {"type": settings["condition_type"], "status": condition[0], "reason": condition[1],
            "message": condition[2], "labels": labels or {}}
    for delay in itertools.chain(delays(settings.get("retry_seconds", 600)), [None]):
        result = call("gpu_node_condition", args)
        if not result.get("failed"):
            log(f"{args['type']}={args['status']} ({args['reason']}) on node {result.get('node_name')}: "
                + ("published" if result.get("changed") else "already held"))
            return True
        if delay is None or not retried(result):
            log(f"{args['type']}={args['status']} ({args['reason']}) not published: {result.get('msg')}")
            return False
        log(f"{result.get('msg')}; trying again in {delay:g} s")
        sleep(delay)
    return False  # not reached: the last attempt returns


def journal(line):
    """A line on stdout, at once: the unit's journal."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def boot(settings, call, run_dir=RUN_DIR, sleep=time.sleep, log=journal):
    """The boot's validation and publications; the exit status."""
    if not files.exists(os.path.join(run_dir, "boot")):
        files.write_text(os.path.join(run_dir, "boot"), "")
    record = os.path.join(run_dir, "validated.json")
    verdict = json.loads(files.read_text(record)) if files.exists(record) else None
    publishing = bool(settings.get("condition_type"))
    first = first_condition(verdict)
    if publishing and first:
        publish(call, first, settings, sleep, log)
    # a null is an argument the role omitted: the module's default, as ``omit`` gives it under Ansible
    args = settings.get("validate") or {}
    result = call("nvidia_gpu_validate", {key: value for key, value in args.items() if value is not None})
    marker = result.get("marker") or NO_MARKER
    for path in (record, settings.get("marker")):
        if path:
            files.write_text(path, json.dumps(marker, indent=4, sort_keys=True) + "\n")
    log(("passed: " if marker["passed"] else "failed: ") + (result.get("msg") or "the GPU validation passed"))
    # the NVLink clique as the role labels it (gpu_validate_clique_label): where no one else owns the label
    labels = {CLIQUE_LABEL: result["clique"]} if settings.get("clique_label") and "clique" in result else {}
    verdict = condition.verdict(result.get("passed"), result.get("msg") or "")  # no pod follows a boot
    published = not publishing or publish(call, verdict, settings, sleep, log, labels=labels)
    return 0 if marker["passed"] and published else 1


def main(argv=None, run_module=None, run_dir=RUN_DIR):
    """``ARCHIVE [SETTINGS]``: the boot, each module run by ``run_module(archive, name, params, timeout)``
    (the archive's gpunode_boot_runner.py); ``ARCHIVE module NAME ARGS``: one module, in this process."""
    argv = sys.argv[1:] if argv is None else argv
    archive = sys.argv[0]
    if argv[:1] == ["module"]:
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return 0
    settings = json.loads(files.read_text(argv[0] if argv else SETTINGS))

    def call(name, params):
        return run_module(archive, name, params, settings.get("module_timeout", 3600))

    started, before = time.monotonic(), os.times()
    status = boot(settings, call, run_dir)
    after = os.times()  # user and system time of this process and of the module runs it waited for
    journal(f"boot validation ended in {time.monotonic() - started:.1f} s, "
            f"{sum(after[:4]) - sum(before[:4]):.2f} s of CPU (this unit and the modules it ran)")
    return status
