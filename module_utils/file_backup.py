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
times kept.

Standard library only; Python 3.8+ (this runs on target hosts).
"""

import os
import shutil
import time

DEFAULT_BACKUP_DIR = "/var/backups/gpunode"


def backup_copy(path, backup_dir=DEFAULT_BACKUP_DIR):
    """Copy ``path`` under ``backup_dir``; returns the copy's path, None when ``path`` is absent.

    Raises OSError when the copy cannot be made.
    """
    if not os.path.lexists(path):
        return None
    relative = os.path.abspath(path).lstrip(os.sep)
    target = os.path.join(backup_dir, relative)
    os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d@%H:%M:%S~", time.localtime())
    copy = f"{target}.{os.getpid()}.{stamp}"
    shutil.copy2(path, copy)
    return copy
