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
  and is then moved over the target in one rename. An existing file keeps its
  mode and owner; a new one gets ``new_file_mode``.
"""

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


def write_text(path, text, new_file_mode=0o644, tmp_dir=None, replace=os.replace):
    """Write ``text`` to ``path`` atomically; returns True when the file is new.

    ``replace(tmp, path)`` does the final rename: ``os.replace``, or a module's
    ``atomic_move`` (which also keeps the SELinux context). Folders missing
    on the way to ``path`` are created (0755). Raises OSError.
    """
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
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return current is None
