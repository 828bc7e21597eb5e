#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module verified_restart: restart a service, check it, roll back its files if it fails."""

DOCUMENTATION = r"""
---
module: verified_restart
short_description: Restart a service, wait until it is healthy, roll back its files when it is not
description:
  - The one restart sequence of gpunode's roles. Restarts the systemd unit O(name) (after
    C(systemctl daemon-reload) with O(daemon_reload)), waits for the processes of O(wait_for_exit)
    to end (a static pod the kubelet replaces), then until every check of O(checks) passes.
  - A check is a URL that must answer 200, or a command that must exit 0 with output matching
    every regular expression of its C(expect) list (for example C(docker info) listing the nvidia
    runtime).
  - When the checks do not pass within O(timeout) seconds, each file of O(restore) is put back from
    its backup (or removed when it had none, because it did not exist before), the unit is restarted again
    and checked again, and the task fails with what went wrong, what was restored, whether the
    service is healthy again and the unit's last journal lines.
  - Without O(name) nothing is restarted; the module only waits and checks (and restores), for
    services that something else restarts.
options:
  name:
    description: The systemd unit to restart.
    type: str
  daemon_reload:
    description: Run C(systemctl daemon-reload) first (a unit file or drop-in changed).
    type: bool
    default: false
  reset_failed:
    description: Units whose failed state and start-rate counter C(systemctl reset-failed) clears before
      O(name) is restarted (a unit that hit its C(StartLimitBurst) refuses to start until then).
    type: list
    elements: str
    default: []
  wait_for_exit:
    description: PIDs that must have exited before the checks count (the old process answers until then).
    type: list
    elements: int
    default: []
  checks:
    description: What "healthy" means; all must pass.
    type: list
    elements: dict
    default: []
    suboptions:
      url:
        description: A URL that must answer 200.
        type: str
      validate_certs:
        description: Check the URL's TLS certificate.
        type: bool
        default: true
      command:
        description: A command (argv) that must exit 0.
        type: list
        elements: str
      expect:
        description: Regular expressions the command's standard output must each match.
        type: list
        elements: str
        default: []
  timeout:
    description: Seconds to wait for the checks (and again after a rollback).
    type: int
    default: 60
  interval:
    description: Seconds between two rounds of checks.
    type: float
    default: 2
  restore:
    description: Files to put back when the service is not healthy.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The file the change wrote.
        type: path
        required: true
      backup:
        description: Its copy from before the change; empty when the file did not exist (it is removed).
        type: path
  reason:
    description: What changed, for the messages.
    type: str
    default: its configuration changed
  journal_lines:
    description: Journal lines of O(name) shown when it fails.
    type: int
    default: 30
extends_documentation_fragment:
  - module_attributes.no_diff
notes:
  - Restoring a backup over a path that is a symbolic link writes the link's target and keeps
    the link; a file that did not exist before is removed at the link's target, the link kept.
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Restart Docker, check it reports the nvidia runtime, roll back daemon.json otherwise
  verified_restart:
    name: docker.service
    checks:
      - command: [docker, info, --format, "{{ '{{json .Runtimes}}|{{.DefaultRuntime}}' }}"]
        expect: ['"nvidia":', '\|nvidia$']
    restore:
      - path: /etc/docker/daemon.json
        backup: "{{ daemon_json.backup_file }}"
    reason: /etc/docker/daemon.json changed

- name: Wait for kube-scheduler after its manifest changed (the kubelet restarts it)
  verified_restart:
    wait_for_exit: "{{ result.scheduler_pids }}"
    checks:
      - url: https://127.0.0.1:10259/healthz
        validate_certs: false
    timeout: 180
"""

RETURN = r"""
changed:
  description: Whether the service was (or in check mode would be) restarted.
  returned: always
  type: bool
healthy:
  description: Whether every check passed (null in check mode).
  returned: always
  type: bool
attempts:
  description: Rounds of checks made before the service was healthy (or the timeout).
  returned: always
  type: int
restored:
  description: Files put back (or removed) after a failed restart; a symbolic link reads C(link -> target).
  returned: always
  type: list
  elements: str
healthy_after_restore:
  description: After a rollback, whether the service passed its checks again.
  returned: failure, after a rollback
  type: bool
elapsed:
  description: Seconds the restart and the checks took.
  returned: success
  type: float
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible.module_utils.gpunode.common.service_health import (
    HealthCheckError,
    compile_expectations,
    failure_message,
)
from ansible.module_utils.gpunode.host.restart import Service


def build_module():
    check_options = {
        "url": {"type": "str"},
        "validate_certs": {"type": "bool", "default": True},
        "command": {"type": "list", "elements": "str"},
        "expect": {"type": "list", "elements": "str", "default": []},
    }
    return AnsibleModule(
        argument_spec={
            "name": {"type": "str"},
            "daemon_reload": {"type": "bool", "default": False},
            "reset_failed": {"type": "list", "elements": "str", "default": []},
            "wait_for_exit": {"type": "list", "elements": "int", "default": []},
            "checks": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": check_options,
                "mutually_exclusive": [["url", "command"]],
                "required_one_of": [["url", "command"]],
            },
            "timeout": {"type": "int", "default": 60},
            "interval": {"type": "float", "default": 2.0},
            "restore": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {"path": {"type": "path", "required": True}, "backup": {"type": "path"}},
            },
            "reason": {"type": "str", "default": "its configuration changed"},
            "journal_lines": {"type": "int", "default": 30},
        },
        supports_check_mode=True,
    )


def run(module):
    params = module.params
    result = {"changed": bool(params["name"]), "healthy": None, "attempts": 0, "restored": []}
    try:
        checks = [dict(check, compiled=compile_expectations(check["expect"])) for check in params["checks"]]
    except HealthCheckError as exc:
        module.fail_json(msg=str(exc), **result)
    if module.check_mode:
        return result
    service = Service(module)
    started = service.restart()
    healthy, problem, attempts = service.wait_healthy(checks, params["wait_for_exit"], started)
    result.update(healthy=healthy, attempts=attempts)
    if healthy:
        return result
    journal = service.journal()
    try:
        result["restored"] = service.restore()
    except OSError as exc:
        module.fail_json(
            msg=f"{params['name'] or 'the service'} was not healthy ({problem}) and restoring "
            f"the backups failed: {to_native(exc)}",
            **result,
        )
    healthy_after = False
    if result["restored"]:
        service.reset_failed()
        restarted = service.restart()
        healthy_after = service.wait_healthy(checks, [], restarted)[0]
    module.fail_json(
        msg=failure_message(
            service=params["name"],
            reason=params["reason"],
            timeout=params["timeout"],
            problem=problem,
            restored=result["restored"],
            healthy_after=healthy_after,
            journal=journal,
        ),
        healthy_after_restore=healthy_after,
        **result,
    )
    return result


def main():
    module = build_module()
    started = time.monotonic()
    result = run(module)
    result["elapsed"] = round(time.monotonic() - started, 1)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
