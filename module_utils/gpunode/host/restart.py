# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node side of verified_restart: restart a unit, wait for its checks, read its journal, put
files back from their backups. ``module`` gives ``params``, ``run_command``, ``get_bin_path`` and
``atomic_move`` (an AnsibleModule).

Standard library only; Python 3.8+ (runs on target hosts).
"""

import os
import shutil
import tempfile

from ansible.module_utils.gpunode.common.service_health import command_problem, probe_url, wait_until
from ansible.module_utils.gpunode.host.commands import Host
from ansible.module_utils.gpunode.host.files import fsync_directory, resolved_path, shown_path


class Service:
    """The node side: systemctl, the checks, the journal, the files."""

    def __init__(self, module):
        self.module = module
        self.host = Host(module)
        self.params = module.params
        self.systemctl = module.get_bin_path("systemctl", required=bool(self.params["name"]))

    def run(self, argv):
        return self.host.run(argv)

    def restart(self):
        """None when systemctl restarted the unit, else its complaint."""
        name = self.params["name"]
        if not name:
            return None
        if self.params["daemon_reload"]:
            self.run([self.systemctl, "daemon-reload"])
        if self.params.get("reset_failed"):
            self.run([self.systemctl, "reset-failed", *self.params["reset_failed"]])
        rc, out, err = self.run([self.systemctl, "restart", name])
        if rc != 0:
            return f"systemctl restart {name} failed: {(err or out).strip()}"
        return None

    def reset_failed(self):
        if self.params["name"]:
            self.run([self.systemctl, "reset-failed", self.params["name"]])

    def probe(self, checks):
        for check in checks:
            if check["url"]:
                problem = probe_url(check["url"], check["validate_certs"])
            else:
                rc, out, err = self.run(check["command"])
                problem = command_problem(check["command"], rc, out, err, check["compiled"])
            if problem is not None:
                return problem
        return None

    def wait_healthy(self, checks, pids, started_problem):
        # a unit that failed to start still gets the timeout: Restart= may bring it up
        params = self.params

        def probe():
            alive = [pid for pid in pids if os.path.exists(f"/proc/{pid}")]
            if alive:
                return f"the old process (PID {', '.join(map(str, alive))}) has not been replaced"
            return self.probe(checks)

        healthy, problem, attempts = wait_until(probe, params["timeout"], params["interval"])
        if not healthy and started_problem:
            problem = f"{started_problem}; {problem}"
        return healthy, problem, attempts

    def journal(self):
        name = self.params["name"]
        journalctl = self.host.which("journalctl")
        if not name or not journalctl:
            return ""
        _rc, out, _err = self.run(
            [journalctl, "--no-pager", "-o", "cat", "-u", name, "-n", str(self.params["journal_lines"])]
        )
        return out

    def restore(self):
        restored = []
        for item in self.params["restore"]:
            # a link is followed, as the module that wrote it did: its target is put back, the link kept
            path, backup = item["path"], item["backup"]
            target, shown = resolved_path(path), shown_path(path)
            if backup:
                fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(backup)), prefix=".gpunode-")
                os.close(fd)
                shutil.copy2(backup, tmp)
                self.module.atomic_move(tmp, target)
                fsync_directory(target)
                restored.append(shown)
            elif os.path.exists(target):
                os.unlink(target)
                fsync_directory(target)
                restored.append(f"{shown} (removed: it did not exist before)")
        return restored
