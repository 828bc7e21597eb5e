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

What ``read_text`` and ``write_text`` refuse, and what holds on a hardened node
(issue 28):

- Only regular files are read or written. A directory, a character or block
  device, a FIFO or a socket at the path (or at the end of its link, e.g. a
  drop-in linked to ``/dev/null``, systemd's way to mask it) is refused with the
  path and what it is, decided by ``stat`` before any ``open`` (a FIFO never
  blocks a run), and the read itself opens with ``O_NONBLOCK`` and checks again.
- Every write error is a ``FileError`` (an ``OSError``) whose message names the
  file and the cause (``/etc/x: cannot write: No space left on device``);
  ``strerror`` keeps the cause alone.
- Folders gpunode creates get 0755 and a new file its ``new_file_mode``,
  whatever the process's umask (077 on CIS-hardened hosts): each is set with
  ``chmod`` after it is made.

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

The node's other files (sysfs, ``/proc``, pci.ids, markers, logs, folders, programs) are
read through the queries below (``read_file``, ``exists``, ``listdir``, ``glob``, ...): this
layer is the only code that touches the node (``scripts/check_node_access.py``).
"""

import errno
import glob as globbing
import hashlib
import os
import stat
import tempfile

FOLDER_MODE = 0o755
FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)
MASKED = ("a symbolic link to /dev/null masks a systemd unit or drop-in: the operator's decision, "
          "not a file to edit")


class FileError(OSError):
    """An OSError whose message names the file and the cause; ``strerror`` is the cause alone."""

    def __init__(self, message, cause=None, code=None):
        super().__init__(code, cause or message)
        self.message = message

    def __str__(self):
        return self.message


def file_kind(mode):
    """What a ``st_mode`` that is not a regular file is, in words (``a FIFO (named pipe)``)."""
    for test, kind in FILE_KINDS:
        if test(mode):
            return kind
    return f"a file of type {stat.S_IFMT(mode):o}"


def not_regular(path):
    """Why ``path`` (a link: the file it leads to) is no file to edit, or None.

    None when it is a regular file or does not exist; decided with ``stat``
    alone, so a FIFO is never opened.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path}: cannot read: {exc.strerror}"
    if stat.S_ISREG(mode):
        return None
    kind = file_kind(mode)
    if not os.path.islink(path):
        return f"{path}: is {kind}, not a regular file"
    target = os.path.realpath(path)
    why = f"{path}: a symbolic link to {target}, which is {kind}, not a regular file"
    return f"{why} ({MASKED})" if target == "/dev/null" else why


def check_regular(path, error=OSError):
    """Raise ``error`` naming ``path`` and what it is when it exists and is not a regular file."""
    problem = not_regular(path)
    if problem:
        raise error(problem)


def read_text(path, error=OSError):
    """The text of ``path``, or None when it does not exist. Raises ``error``.

    Anything but a regular file (or a link to one) is refused before it is opened.
    """
    data = read_bytes(path, error)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: byte {exc.start}: not UTF-8 text") from exc


def read_bytes(path, error=OSError):
    """The bytes of ``path``, or None when it does not exist, as :func:`read_text` reads it."""
    check_regular(path, error)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # replaced between the stat and the open
            raise error(f"{path}: is {file_kind(mode)}, not a regular file")
        try:
            return handle.read()
        except OSError as exc:
            raise error(f"{path}: cannot read: {exc.strerror}") from exc


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


def remove(path):
    """Remove the file ``path`` and flush its folder; raises ``OSError`` as ``os.unlink`` does.

    Only for files gpunode created: the caller refused a link with :func:`check_removable`
    before anything was written.
    """
    os.unlink(path)
    fsync_directory(path)


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


def make_folders(directory, mode=FOLDER_MODE):
    """Create ``directory`` and any missing parents, each with ``mode`` whatever the umask."""
    directory = os.path.abspath(directory)
    if os.path.isdir(directory):
        return
    make_folders(os.path.dirname(directory), mode)
    try:
        os.mkdir(directory, mode)
    except FileExistsError:
        if os.path.isdir(directory):
            return
        raise
    os.chmod(directory, mode)


def write_text(path, text, new_file_mode=0o644, tmp_dir=None, replace=os.replace, *, keep_mtime=False):
    """Write ``text`` to ``path`` atomically; returns True when the file is new.

    ``keep_mtime``: an existing file keeps its access and modification times (an edit that a
    daemon comparing its start with the file's time need not load).

    A symbolic link is followed (``resolved_path``): its target is written, the
    link kept. ``replace(tmp, target)`` does the final rename: ``os.replace``,
    or a module's ``atomic_move`` (which also keeps the SELinux context), and
    the folder is fsynced after it. Folders missing on the way to a path that
    is not a link are created (0755 whatever the umask). Anything there that is
    not a regular file is refused. Raises ``FileError`` naming ``path`` and the
    cause.
    """
    return write_chunks(path, (text.encode("utf-8"),), new_file_mode, tmp_dir, replace, keep_mtime=keep_mtime)


def write_chunks(path, chunks, new_file_mode=0o644, tmp_dir=None, replace=os.replace, *, keep_mtime=False):
    """:func:`write_text` of the bytes that ``chunks`` yields, written as they come (a download's
    blocks). What ``chunks`` raises (a download's checksum checked after its last block) leaves
    ``path`` as it was and removes the temp file."""
    target = resolved_path(path, FileError)
    check_regular(target, FileError)
    try:
        times = os.stat(target) if keep_mtime and os.path.lexists(target) else None
        created = _write_regular(target, chunks, new_file_mode, tmp_dir, replace)
        if times is not None:
            os.utime(target, ns=(times.st_atime_ns, times.st_mtime_ns))
        return created
    except FileError:
        raise
    except OSError as exc:
        cause = exc.strerror or str(exc)
        raise FileError(f"{path}: cannot write: {cause}", cause, exc.errno) from exc


def _write_regular(path, chunks, new_file_mode, tmp_dir, replace):
    directory = os.path.dirname(os.path.abspath(path))
    make_folders(directory)
    fd, tmp = tempfile.mkstemp(dir=tmp_dir or directory, prefix=".gpunode-")
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
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


def file_digest(path, algorithm, error=OSError):
    """The ``hashlib`` ``algorithm``'s hex digest of the file ``path`` (read in blocks), or None when
    it does not exist; anything but a regular file raises ``error``, as :func:`read_bytes`."""
    check_regular(path, error)
    digest = hashlib.new(algorithm)
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror}") from exc
    return digest.hexdigest()


# ---------------------------------------------------------------- queries of the node's files


def read_file(path, encoding=None, errors=None):
    """The whole content of ``path`` as ``open`` reads it: bytes, or text with ``encoding``
    (and ``errors``); raises ``OSError`` as ``open`` does. For the node's small state files
    (sysfs, ``/proc``, pci.ids, markers, logs), not for files gpunode edits (:func:`read_text`)."""
    with open(path, "r" if encoding else "rb", encoding=encoding, errors=errors) as handle:
        return handle.read()


def exists(path):
    return os.path.exists(path)


def lexists(path):
    return os.path.lexists(path)


def is_dir(path):
    return os.path.isdir(path)


def is_file(path):
    return os.path.isfile(path)


def is_executable(path):
    return os.access(path, os.X_OK)


def listdir(path):
    """The names in folder ``path``; raises ``OSError`` as ``os.listdir`` does."""
    return os.listdir(path)


def rke2_files(config_path, list_folder=listdir):
    """config.yaml, then config.yaml.d/*.yaml and *.yml in name order: the order RKE2 reads them
    (rancher/rke2-docs docs/install/configuration.md, "Multiple Config Files"); a missing or
    unreadable config.yaml.d adds none. The one list of RKE2's configuration files."""
    try:
        names = list_folder(config_path + ".d")
    except OSError:
        names = []
    dropins = [name for name in sorted(names) if name.endswith((".yaml", ".yml"))]
    return [config_path] + [f"{config_path}.d/{name}" for name in dropins]


def glob(pattern):
    return globbing.glob(pattern)


def readlink(path):
    return os.readlink(path)


def realpath(path):
    return os.path.realpath(path)


def file_stat(path):
    """``os.stat(path)``; raises ``OSError``."""
    return os.stat(path)


def mtime(path):
    """The modification time of ``path``, or None when it cannot be read."""
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None
