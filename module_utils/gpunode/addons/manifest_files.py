# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Write a directory of rendered manifests: which files to create, rewrite, remove.

Used by the module ``manifest_files`` (the gpu_cluster_addons role's render
mode, for GitOps). Standard library and module_utils only: it runs
wherever the play runs. Nothing here writes; ``plan`` reads the directory
and says what would change, the module carries it out.
"""

import os
import re

from ansible.module_utils.gpunode.host.files import check_regular, check_removable, exists, is_dir, shown_path
from ansible.module_utils.gpunode.host.files import read_text as read_file_text

# One object per file, names like 10-serviceaccount-gpushare-device-plugin.yaml:
# no directories, no hidden files, nothing outside the output directory.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.ya?ml$")


class ManifestFilesError(ValueError):
    """Bad arguments or an unusable directory; the message names the path."""


def check_name(name):
    """A plain file name ending in .yaml/.yml, or ManifestFilesError."""
    if not isinstance(name, str) or not _NAME_RE.match(name) or ".." in name:
        raise ManifestFilesError(
            f"{name!r}: not a plain manifest file name (letters, digits, '.', '_', '-', ending in .yaml)"
        )
    return name


def read_text(path):
    """The file's text, or None when it does not exist."""
    try:
        return read_file_text(path, ManifestFilesError)
    except ManifestFilesError as exc:
        raise ManifestFilesError(f"{exc}; left unchanged") from exc


def plan(directory, files, remove=()):
    """What writing ``files`` (name -> text) and removing ``remove`` changes.

    Returns a list of ``{"name", "path", "shown", "action", "before", "after"}``
    (``shown``: the path, or ``link -> target`` for a symbolic link, which is
    followed) with action ``create``, ``update`` or ``remove``, sorted by name
    (a link in ``remove`` is refused: it is the operator's); files already
    holding the text, and removals of files that are not there, are left out.
    """
    if not isinstance(files, dict):
        raise ManifestFilesError("files must be a mapping of file name to content")
    if exists(directory) and not is_dir(directory):
        raise ManifestFilesError(f"{directory}: exists and is not a directory")
    overlap = set(files) & set(remove or ())
    if overlap:
        raise ManifestFilesError(f"{', '.join(sorted(overlap))}: asked both to write and to remove")
    changes = []
    for name in sorted(files):
        check_name(name)
        content = files[name]
        if not isinstance(content, str):
            raise ManifestFilesError(f"{name}: content must be text")
        if not content.endswith("\n"):
            content += "\n"
        path = os.path.join(directory, name)
        shown = shown_path(path, ManifestFilesError)  # a link is followed: its target is written
        before = read_text(path)
        if before == content:
            continue
        changes.append(
            {
                "name": name,
                "path": path,
                "shown": shown,
                "action": "create" if before is None else "update",
                "before": before,
                "after": content,
            }
        )
    for name in sorted(set(remove or ())):
        check_name(name)
        path = os.path.join(directory, name)
        check_removable(path, ManifestFilesError)  # an operator's link: neither it nor its target
        check_regular(path, ManifestFilesError)  # a FIFO, a device, a folder: named, never removed
        before = read_text(path)
        if before is None:
            continue
        changes.append({"name": name, "path": path, "shown": path, "action": "remove", "before": before,
                        "after": None})
    return changes


def diffs(changes):
    """Ansible's list-of-diffs form for ``--diff``."""
    return [
        {
            "before_header": change["shown"] if change["before"] is not None else "/dev/null",
            "after_header": change["shown"] if change["after"] is not None else "/dev/null",
            "before": change["before"] or "",
            "after": change["after"] or "",
        }
        for change in changes
    ]
