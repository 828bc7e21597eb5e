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

Every backup, wherever it is kept, is made by ``copy_backup``: when the copy
fails (a full disk, a read-only folder) the partial copy is removed and a
``FileError`` names the file and the cause, so no empty or truncated backup is
ever left to be restored by hand. ``backup_beside`` replaces
``AnsibleModule.backup_local`` (same name, next to the file) for files whose
daemon reads only that one file.

Standard library only; Python 3.8+ (this runs on target hosts).
"""

import contextlib
import os
import shutil
import time

from ansible.module_utils.gpunode.host.files import FileError, check_regular, make_folders, resolved_path

DEFAULT_BACKUP_DIR = "/var/backups/gpunode"


def copy_backup(path, copy):
    """Copy ``path`` (a link: its target's content) to ``copy``, mode and times kept; returns ``copy``.

    The one backup routine: on any failure the partial copy is removed and
    ``FileError`` names ``path`` and the cause.
    """
    source = resolved_path(path, FileError)
    check_regular(source, FileError)
    try:
        shutil.copy2(source, copy)
        with open(copy, "rb") as handle:
            os.fsync(handle.fileno())
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(copy)
        cause = exc.strerror or str(exc)
        raise FileError(f"{path}: cannot back up to {copy}: {cause}; no backup kept", cause,
                        exc.errno) from exc
    return copy


def backup_stamp():
    """The suffix ``backup_local`` gives a backup: ``.PID.YYYY-mm-dd@HH:MM:SS~``."""
    return f".{os.getpid()}.{time.strftime('%Y-%m-%d@%H:%M:%S~', time.localtime())}"


def backup_beside(path):
    """Back up ``path`` next to itself as ``backup_local`` names it; None when it does not exist."""
    if not os.path.exists(path):
        return None
    return copy_backup(path, f"{path}{backup_stamp()}")


def backup_copy(path, backup_dir=DEFAULT_BACKUP_DIR):
    """Copy ``path`` (a link: its target) under ``backup_dir``; the copy's path, or None when absent.

    Raises FileError (an OSError) when the copy cannot be made; no copy is left then.
    """
    source = resolved_path(path)
    if not os.path.exists(source):
        return None
    relative = os.path.abspath(path).lstrip(os.sep)
    target = os.path.join(backup_dir, relative)
    try:
        make_folders(os.path.dirname(target), 0o700)
    except OSError as exc:
        raise FileError(f"{path}: cannot back up under {backup_dir}: {exc.strerror}", exc.strerror,
                        exc.errno) from exc
    return copy_backup(path, f"{target}{backup_stamp()}")
