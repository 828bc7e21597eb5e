# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Backups kept where no daemon loads them.

``AnsibleModule.backup_local`` copies a file next to itself. That is harmless
for ``/etc/docker/daemon.json`` (dockerd reads that one file) but not for a
configuration directory a daemon imports by glob: containerd's
``imports = ["/etc/containerd/conf.d/*"]`` would load a copy left in
``conf.d``. ``backup_copy`` keeps the copy under a backup directory
(``/var/backups/gpunode`` by default), at the file's own path below it, with
the same suffix ``backup_local`` uses (``.PID.YYYY-mm-dd@HH:MM:SS~``), mode and
times kept. A symbolic link's backup is a regular file holding its target's
content (the file gpunode edits, see ``files.resolved_path``), filed
under the link's path.

Standard library only; Python 3.8+ (this runs on target hosts).
"""

import os
import shutil
import time

from ansible.module_utils.gpunode.host.files import resolved_path

DEFAULT_BACKUP_DIR = "/var/backups/gpunode"


def backup_copy(path, backup_dir=DEFAULT_BACKUP_DIR):
    """Copy ``path`` (a link: its target) under ``backup_dir``; the copy's path, or None when absent.

    Raises OSError when the copy cannot be made.
    """
    source = resolved_path(path)
    if not os.path.exists(source):
        return None
    relative = os.path.abspath(path).lstrip(os.sep)
    target = os.path.join(backup_dir, relative)
    os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d@%H:%M:%S~", time.localtime())
    copy = f"{target}.{os.getpid()}.{stamp}"
    shutil.copy2(source, copy)
    return copy
