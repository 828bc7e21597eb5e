# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A module of the boot archive run as its own process, as the play runs it (readiness/boot.py).

A file of the archive beside the packages (action gpunode_boot_archive), not module_utils: it runs in
the boot unit's plain Python process, where no AnsibleModule (and its run_command) exists.

``python3 ARCHIVE module NAME ARGS``: the archive's ``__main__`` hands NAME and its JSON arguments
to ansible-core's debugging entry (``python3 MODULE.py ARGS``: ``basic._load_params`` reads them
with ``_internal/_debugging.load_params`` when no AnsiballZ arguments are set), and the module
answers its JSON on stdout, as under Ansible.

Python 3.8+, standard library: runs on targets.
"""

import json
import subprocess
import sys


def run_module(archive, name, params, timeout):
    """The module's JSON answer; one with ``failed`` and ``msg`` when it gave none."""
    argv = [sys.executable, archive, "module", name, json.dumps({"ANSIBLE_MODULE_ARGS": params})]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return {"failed": True, "msg": f"{name}: cannot run {archive}: {exc}"}
    out = done.stdout.decode("utf-8", "replace")
    try:
        return json.loads(out[out.index("{"):])
    except ValueError:
        said = (out + done.stderr.decode("utf-8", "replace")).strip()[-2000:]
        return {"failed": True, "msg": f"{name}: no JSON answer (exit status {done.returncode}): {said}"}
