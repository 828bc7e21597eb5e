# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whole-file edits that a read planned: checked, shown, compared with the node, written.

A plan's edits are ``{path: (old, new)}``: ``old`` is the text the read found (None: the
file did not exist), ``new`` the text to leave (None: remove the file). The module that
planned them writes them at once (``kubelet_feature_gates``); ``gpunode_planned_files``
writes edits that ``gpunode_node_state`` planned moments before, and first compares each
file with ``old`` (:func:`changed_since`): a file that changed since the read is not written
over (the planning module runs again instead).

Links are followed and a link is never removed (``host/files.py``); backups go where no
daemon loads them (``host/backups.py``). Errors are ``FileError`` naming the file.

Standard library only; Python 3.8+ (this runs on target hosts).
"""

import os

from ansible.module_utils.gpunode.host.backups import backup_beside, backup_copy
from ansible.module_utils.gpunode.host.files import (
    FileError,
    check_removable,
    read_text,
    remove,
    shown_path,
    write_text,
)


def headers(edits, error=FileError):
    """``{path: shown path}`` (``link -> target``) for diff headers; raises ``error`` for an edit
    that would remove an operator's link, or follow a link loop or a broken one, before anything
    is written."""
    for path in (path for path, (_old, new) in edits.items() if new is None):
        check_removable(path, error)
    return {path: shown_path(path, error) for path in edits}


def diff(edits, shown):
    """The ``diff`` of a result: one before/after dict, a list when several files change."""
    diffs = [
        {"before": old or "", "after": new or "", "before_header": shown[path], "after_header": shown[path]}
        for path, (old, new) in sorted(edits.items())
    ]
    return diffs[0] if len(diffs) == 1 else diffs


def changed_since(edits):
    """The paths whose text now differs from the ``old`` the read found (sorted)."""
    return sorted(path for path, (old, _new) in edits.items() if read_text(path, FileError) != old)


def apply(edits, backup, replace=os.replace, backup_dir=None, keep_mtime=()):
    """Write (or remove) each file, its backup first when ``backup`` (next to it, or under
    ``backup_dir`` where a daemon loads a folder by glob); the files of ``keep_mtime`` keep their
    modification time (``files.write_text``). The one edit transaction.

    Returns ``(restore, backups)``: what ``verified_restart`` puts back when the daemon does
    not come back (``[{path, backup}]``; a file that did not exist: backup None, removed), and
    ``{path: backup}``. Raises ``FileError`` naming the file; the files before it stay written
    (the restore list of those is on the error: ``exc.restore``, ``exc.backups``).
    """
    restore, backups = [], {}
    for path, (old, new) in sorted(edits.items()):
        try:
            saved = None
            if backup and old is not None:
                saved = backup_copy(path, backup_dir) if backup_dir else backup_beside(path)
            if saved:
                backups[path] = saved
            if old is None or saved:
                restore.append({"path": path, "backup": saved})
            if new is None:
                _remove(path)
            else:
                write_text(path, new, replace=replace, keep_mtime=path in keep_mtime)
        except OSError as exc:  # FileError, from host/files and host/backups, names the file
            exc.restore, exc.backups = restore, backups
            raise
    return restore, backups


def apply_into(result, edits, backup, replace=os.replace, keep_mtime=()):
    """:func:`apply`, with ``restore``, ``backup_file`` and ``backup_files`` put into ``result``, also
    when it raises ``FileError`` (then of the files written before the one that failed)."""
    try:
        result["restore"], backups = apply(edits, backup, replace, keep_mtime=keep_mtime)
    except FileError as exc:
        result["restore"] = exc.restore
        result.update(backup_results(exc.backups))
        raise
    result.update(backup_results(backups))


def backup_results(backups):
    """A result's ``backup_file`` (the first, by path) and ``backup_files``, when backups were made."""
    if not backups:
        return {}
    return {"backup_file": backups[min(backups)], "backup_files": backups}


def _remove(path):
    try:
        remove(path)
    except OSError as exc:
        cause = exc.strerror or str(exc)
        raise FileError(f"{path}: cannot remove: {cause}", cause, exc.errno) from exc
