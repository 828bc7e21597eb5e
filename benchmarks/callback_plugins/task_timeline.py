"""Callback for benchmarks/bench_noop.py --profile: one JSON record per task run.

Enabled only by the benchmark (ANSIBLE_CALLBACK_PLUGINS=benchmarks/callback_plugins,
ANSIBLE_CALLBACKS_ENABLED=task_timeline, GPUNODE_TASK_TIMELINE=<output.json>).
Each record: play, role, task name, action, whether it was delegated to the
controller, per-host status (ok, changed, skipped, failed, unreachable), loop
items, the wall time from the task's start to the next task's start (as
ansible.posix.profile_tasks measures it) and the CPU time of ansible-playbook's
main process in that span (main_cpu: templating, conditionals, includes,
callbacks; the forks' CPU, which runs the modules, is not in it). Plays are recorded with their host
pattern and whether it matched a host, so plays that start for nothing show up.
"""

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: task_timeline
type: aggregate
short_description: write a JSON timeline of every task (gpunode benchmark)
description:
  - Writes one record per task and play to the file named by GPUNODE_TASK_TIMELINE.
requirements:
  - enabled through ANSIBLE_CALLBACKS_ENABLED
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_timeline"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._path = os.environ.get("GPUNODE_TASK_TIMELINE")
        self._plays = []
        self._tasks = []
        self._current = None
        self._play = None
        self._started = time.monotonic()
        self._cpu_started = time.process_time()

    def _close_current(self):
        if self._current is not None:
            self._current["seconds"] = round(time.monotonic() - self._current.pop("_start"), 4)
            self._current["main_cpu"] = round(time.process_time() - self._current.pop("_cpu"), 4)
            self._tasks.append(self._current)
            self._current = None

    def v2_playbook_on_play_start(self, play):
        self._close_current()
        self._play = play.get_name()
        self._plays.append({"play": self._play, "pattern": play.hosts, "matched": True})

    def v2_playbook_on_no_hosts_matched(self):
        if self._plays:
            self._plays[-1]["matched"] = False

    def _start_task(self, task, handler=False):
        self._close_current()
        role = task._role.get_name() if task._role else None
        self._current = {
            "play": self._play,
            "role": role,
            "task": task.get_name(),
            "action": getattr(task, "resolved_action", None) or task.action,
            "delegate_to": task.delegate_to,
            "handler": handler,
            "hosts": {},
            "items": 0,
            "_start": time.monotonic(),
            "_cpu": time.process_time(),
        }

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start_task(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._start_task(task, handler=True)

    def _host_status(self, result, status):
        if self._current is None:
            return
        if status == "ok" and result._result.get("changed"):
            status = "changed"
        self._current["hosts"][result._host.get_name()] = status

    def v2_runner_on_ok(self, result):
        self._host_status(result, "ok")

    def v2_runner_on_skipped(self, result):
        self._host_status(result, "skipped")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._host_status(result, "ignored" if ignore_errors else "failed")

    def v2_runner_on_unreachable(self, result):
        self._host_status(result, "unreachable")

    def _item(self, result):
        if self._current is not None:
            self._current["items"] += 1

    v2_runner_item_on_ok = _item
    v2_runner_item_on_skipped = _item
    v2_runner_item_on_failed = _item

    def v2_playbook_on_stats(self, stats):
        self._close_current()
        if not self._path:
            return
        document = {
            "seconds": round(time.monotonic() - self._started, 3),
            "main_cpu": round(time.process_time() - self._cpu_started, 3),
            "plays": self._plays,
            "tasks": self._tasks,
        }
        with open(self._path, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=1)
