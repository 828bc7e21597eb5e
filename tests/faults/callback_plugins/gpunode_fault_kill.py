# gpunode test fixture: kill the controller at a chosen point of a run.
# Enabled only by tests/faults/interrupt.py (ANSIBLE_CALLBACK_PLUGINS,
# ANSIBLE_CALLBACKS_ENABLED); never by ansible.cfg, never by a role.
"""Callback plugin that SIGKILLs ansible-playbook when a chosen task reports."""

import json
import os
import re
import signal
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: gpunode_fault_kill
type: notification
short_description: Kill ansible-playbook and its workers when a chosen task reports
description:
  - >-
    A test fixture of gpunode's fault-injection test (tests/faults). When a task whose
    name matches O(task) reports its result on O(host) (and that result is changed,
    when O(status=changed)), the plugin writes a record to O(record), then sends
    SIGKILL to the process group of ansible-playbook, which takes its workers and the
    connection processes they started with it, as a controller killed at that instant
    would be (OOM killer, a lost laptop, a cancelled CI job).
  - The kill follows the task's result, never a timer.
  - >-
    ansible-playbook must lead its own process group so that nothing else dies with
    it; tests/faults/interrupt.py starts it in a new session. When it is not a group
    leader, the plugin makes it one at the start of the run and says so.
options:
  task:
    description: >-
      Python regular expression searched in the task's full name
      (the role's name, a colon and the task's name, as ansible-playbook prints it).
    required: true
    env: [{name: GPUNODE_FAULT_TASK}]
  host:
    description: The inventory name of the host whose result counts.
    required: true
    env: [{name: GPUNODE_FAULT_HOST}]
  status:
    description: Which results count, changed ones only or ok and changed alike.
    choices: [changed, any]
    default: changed
    env: [{name: GPUNODE_FAULT_STATUS}]
  occurrence:
    description: Kill at this matching result (1 is the first), for a task that runs more than once in a run.
    type: int
    default: 1
    env: [{name: GPUNODE_FAULT_OCCURRENCE}]
  record:
    description: >-
      A JSON-lines file; one line per matching result (killed or not, and why),
      written and fsynced before the kill.
    required: true
    env: [{name: GPUNODE_FAULT_RECORD}]
"""


def append_record(path, entry):
    """Append one JSON line to path and flush it to disk (the process dies next)."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "gpunode_fault_kill"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None, options=None):
        super().__init__(display=display, options=options)
        self._pattern = None
        self._matches = 0

    def set_options(self, task_keys=None, var_options=None, direct=None):
        super().set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        self._pattern = re.compile(self.get_option("task"))

    def v2_playbook_on_start(self, playbook):
        if os.getpgrp() != os.getpid():
            # the kill must take ansible-playbook's process group and nothing else
            os.setpgid(0, 0)
            self._display.warning(
                "gpunode_fault_kill: ansible-playbook now leads its own process group "
                "(start it in a new session to avoid this)"
            )

    def _consider(self, result, status):
        task = result._task.get_name()
        host = result._host.get_name()
        if host != self.get_option("host") or not self._pattern.search(task):
            return
        entry = {
            "task": task,
            "host": host,
            "status": status,
            "time": time.time(),
            "pid": os.getpid(),
        }
        wanted = self.get_option("status")
        if status not in ("ok", "changed") or (wanted == "changed" and status != "changed"):
            entry["killed"] = False
            entry["why"] = f"the task reported {status}, the window needs {wanted}"
            append_record(self.get_option("record"), entry)
            return
        self._matches += 1
        if self._matches < self.get_option("occurrence"):
            entry["killed"] = False
            entry["why"] = f"occurrence {self._matches} of {self.get_option('occurrence')}"
            append_record(self.get_option("record"), entry)
            return
        entry["killed"] = True
        entry["pgid"] = os.getpgrp()
        append_record(self.get_option("record"), entry)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    def v2_runner_on_ok(self, result):
        self._consider(result, "changed" if result.is_changed() else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._consider(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._consider(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._consider(result, "unreachable")
