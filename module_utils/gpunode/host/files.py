# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reading and writing the configuration files gpunode modules edit.

Every module that edits a file (daemon.json, containerd's TOML, the kubelet's
files, the kube-scheduler manifest, add-on manifests) reads it with
``read_text`` and writes it with ``write_text``:

- ``read_text`` returns the file's text exactly (line endings kept), or None
  when the file does not exist; anything else that stops the read (a
  directory, no permission, bytes that are not UTF-8) raises the caller's own
  error class with the path and the problem, so the module can fail without
  having touched the file.
- ``write_text`` never leaves a half-written file: the text goes to a temp file
  (in the target's folder, or in ``tmp_dir`` where that folder must never hold
  a stray file, e.g. the kubelet's static pod directory), is flushed to disk,
  and is then moved over the target in one rename; the folder that holds the
  file is then fsynced too, so a power cut after a "changed" result cannot
  bring the old file back. An existing file keeps its mode and owner; a new
  one gets ``new_file_mode``.

Symbolic links are followed, like ``template``/``lineinfile`` with
``follow=yes``: image builders and configuration-management tools link /etc
files into a tree they manage, and the daemon reads the link's target.
``resolved_path`` gives the file at the end of the link chain (relative links
and chains resolved); ``write_text`` edits that file and keeps the link.

- A link whose target does not exist yet (dangling): the target is created,
  as ``template follow=yes`` does, when the folder it points into exists. When
  that folder does not exist either (an unmounted volume, a typo), it is
  refused, naming the link and the target: gpunode creates no folders on the
  far side of someone else's link.
- A link loop is refused, naming the path.
- Removing: gpunode removes only files it created itself, and never creates a
  link, so ``check_removable`` refuses a path that is a link (the operator's):
  neither the link nor its target is removed.
- Backups of a link hold the target's content (a regular file, never a link);
  ``shown_path`` names both (``link -> target``) for --diff headers.
"""

import errno
import os
import tempfile


def read_text(path, error=OSError):
    """The text of ``path``, or None when it does not exist. Raises ``error``."""
    if os.path.isdir(path):
        raise error(f"{path}: is a directory")
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: byte {exc.start}: not UTF-8 text") from exc


def resolved_path(path, error=OSError):
    """The file that reading or writing ``path`` touches; raises ``error``.

    ``path`` itself when it is not a symbolic link; else the end of its link
    chain (``os.path.realpath``: relative links resolved against their own
    folder). A loop, or a dangling link into a folder that does not exist, is
    refused with the link and the target named.
    """
    if not os.path.islink(path):
        return path
    target = os.path.realpath(path)
    if os.path.islink(target):
        raise error(f"{path}: a symbolic link loop (at {target})")
    if not os.path.lexists(target) and not os.path.isdir(os.path.dirname(target)):
        raise error(f"{path}: a symbolic link to {target}, whose folder {os.path.dirname(target)} "
                    "does not exist")
    return target


def shown_path(path, error=OSError):
    """``path``, or ``path -> target`` when it is a link (for diff headers and messages)."""
    target = resolved_path(path, error)
    return path if target == path else f"{path} -> {target}"


def check_removable(path, error=OSError):
    """Raise ``error`` when ``path`` is a symbolic link: gpunode removes only its own files."""
    if os.path.islink(path):
        raise error(f"{path}: a symbolic link to {os.path.realpath(path)}, not a file gpunode "
                    "created; neither the link nor its target is removed (remove it yourself); "
                    "left unchanged")


def fsync_directory(path):
    """Flush the folder that holds ``path`` (its entry after a rename) to disk."""
    fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:
        # some filesystems cannot fsync a folder; the rename is all they offer
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def write_text(path, text, new_file_mode=0o644, tmp_dir=None, replace=os.replace):
    """Write ``text`` to ``path`` atomically; returns True when the file is new.

    A symbolic link is followed (``resolved_path``): its target is written, the
    link kept. ``replace(tmp, target)`` does the final rename: ``os.replace``,
    or a module's ``atomic_move`` (which also keeps the SELinux context), and
    the folder is fsynced after it. Folders missing on the way to a path that
    is not a link are created (0755). Raises OSError.
    """
    path = resolved_path(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=tmp_dir or directory, prefix=".gpunode-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        try:
            current = os.stat(path)
        except FileNotFoundError:
            current = None
        if current is None:
            os.chmod(tmp, new_file_mode)
        else:
            os.chmod(tmp, current.st_mode & 0o7777)
            if os.geteuid() == 0:
                os.chown(tmp, current.st_uid, current.st_gid)
        replace(tmp, path)
        if current is None:
            # atomic_move gives a new file the umask's mode: set ours again
            os.chmod(path, new_file_mode)
        fsync_directory(path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return current is None
