# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One lock per node for every module that edits the node's files.

Two runs on one node at once (an AWX schedule and an operator's run) that both
read a file before either writes it would keep only the last writer's change.
Every editing module therefore runs, when it may write (never in check mode,
which must keep working on a read-only filesystem), under ``node_lock``: an
exclusive ``flock(2)`` on ``/run/gpunode/lock`` taken before the module reads
what it will change, so the second run reads what the first wrote.

- ``/run`` is a tmpfs on systemd hosts: the lock file never outlives a boot,
  and the kernel drops a flock when its holder dies (a killed run leaves no
  stale lock). Where ``/run/gpunode`` cannot be made (not root, ``/run`` read
  only), the lock lives in the folder of the module's temporary directory
  (Ansible's remote tmp, shared by the runs of one user).
- The holder writes its PID into the file; a run that waits longer than its
  ``lock_timeout`` (seconds, default 300) fails with ``NodeLockError`` naming
  the lock file and that PID, and changes nothing.

Standard library only; Python 3.8+ (this runs on target hosts).
"""

import contextlib
import errno
import fcntl
import os
import time

from ansible.module_utils.gpunode.host.files import FileError, make_folders

LOCK_DIR = "/run/gpunode"
LOCK_NAME = "lock"
DEFAULT_TIMEOUT = 300
POLL_SECONDS = 0.2
LOCK_OPTION = {"lock_timeout": {"type": "int", "default": DEFAULT_TIMEOUT}}


class NodeLockError(Exception):
    """The node's lock could not be taken (in time); the message names the lock and its holder."""


def _open_in(directory):
    make_folders(directory)
    path = os.path.join(directory, LOCK_NAME)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    return path, fd


def open_lock_file(fallback_dir):
    """(path, fd) of the node's lock file: under LOCK_DIR, else under ``fallback_dir()``."""
    try:
        return _open_in(LOCK_DIR)
    except OSError as exc:  # not root, /run read-only, something else in the way
        first = f"{LOCK_DIR}/{LOCK_NAME}: {exc.strerror}"
    directory = fallback_dir()
    try:
        return _open_in(directory)
    except OSError as exc:
        raise NodeLockError(f"{directory}/{LOCK_NAME}: cannot open the node's lock: {exc.strerror} "
                            f"(nor {first})") from exc


def holder(fd):
    """The PID the lock's holder wrote, as text ('unknown' when it wrote none)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return text if text.isdigit() else "unknown"


def wait_for(fd, path, timeout, clock=time.monotonic, sleep=time.sleep):
    """Take the exclusive flock on ``fd``, polling for up to ``timeout`` seconds."""
    deadline = clock() + max(timeout, 0)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise NodeLockError(f"{path}: cannot lock: {exc.strerror}") from exc
        if clock() >= deadline:
            raise NodeLockError(
                f"{path}: held by PID {holder(fd)} (another gpunode run on this node) for more than "
                f"lock_timeout={timeout} s; nothing was changed")
        sleep(POLL_SECONDS)


@contextlib.contextmanager
def node_lock(timeout=DEFAULT_TIMEOUT, fallback_dir=None):
    """Hold the node's lock for the ``with`` block; raises NodeLockError."""
    path, fd = open_lock_file(fallback_dir or (lambda: os.path.expanduser("~/.ansible/tmp")))
    try:
        wait_for(fd, path, timeout)
        with contextlib.suppress(OSError):  # readable by all, whatever the umask (ours to set)
            os.fchmod(fd, 0o644)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        yield path
    finally:
        os.close(fd)  # closing the last descriptor releases the flock


def module_lock(module):
    """The node's lock for an editing module: none in check mode, else ``node_lock`` with its options."""
    if module.check_mode:
        return contextlib.nullcontext()
    return node_lock(module.params["lock_timeout"],
                     lambda: os.path.dirname(os.path.abspath(module.tmpdir)))


def exit_run(module, run, errors=(), failed=None, lock=True):
    """The tail of a module's main(): exit with ``run(module)``'s result, run under ``module_lock``
    (``lock``: for a module that edits the node). A NodeLockError, a FileError or one of ``errors``
    (each names what is wrong) fails the module with its message and the keys of ``failed(exc)``."""
    try:
        with module_lock(module) if lock else contextlib.nullcontext():
            result = run(module)
    except (NodeLockError, FileError, *errors) as exc:
        module.fail_json(msg=str(exc), **(failed(exc) if failed else {}))
    module.exit_json(**result)
