# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The dpkg database: what is installed and held, whether a run was interrupted, the lock.

Pure Python (standard library only), used on Debian and Ubuntu targets.

- :func:`parse_dpkg_query` reads ``dpkg-query -W -f '${Package}\\t${Version}\\t${Status}\\n'``.
- :func:`interrupted` tells what apt's "dpkg was interrupted, you must manually run
  'dpkg --configure -a'" tells: apt refuses to run while dpkg's journal
  (``<admindir>/updates/``, files named by number) holds entries, and packages
  left half-installed or half-configured need ``dpkg --configure -a`` too.
- :class:`FrontendLock` waits for ``<admindir>/lock-frontend`` the way apt does
  (``DPkg::Lock::Timeout``), so a command run under it with
  ``DPKG_FRONTEND_LOCKED=1`` neither fails nor races a concurrent apt or dpkg.
- :func:`parse_madison` reads ``apt-cache madison``: which versions of a package
  the package index knows.
"""

import errno
import fcntl
import os
import time

ADMINDIR = "/var/lib/dpkg"
#: dpkg states that a finished run never leaves (dpkg-query(1), "Package states").
UNFINISHED_STATES = ("half-installed", "unpacked", "half-configured", "triggers-awaited", "triggers-pending")
#: Set for a dpkg run by a frontend that holds the frontend lock (dpkg(1), ENVIRONMENT).
FRONTEND_LOCKED_ENV = {"DPKG_FRONTEND_LOCKED": "1"}


class DpkgError(Exception):
    """The database cannot be read or locked; the message names the file."""


def parse_dpkg_query(text):
    """``{package: {"version", "want", "status"}}`` from dpkg-query's lines.

    ``want`` is the selection (``install``, ``hold``, ``deinstall``, ``purge``),
    ``status`` the package state (``installed``, ``half-configured``, ...). Packages
    known only as removed (``config-files``, ``not-installed``) are kept: their
    selection still matters.
    """
    packages = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) != 3:
            continue
        name, version, status = fields
        words = status.split()
        if len(words) != 3:
            continue
        packages[name.split(":")[0]] = {"version": version or None, "want": words[0], "status": words[2]}
    return packages


def installed(packages, name):
    """The installed version of ``name``, or None."""
    entry = packages.get(name)
    if entry and entry["status"] not in ("not-installed", "config-files"):
        return entry["version"]
    return None


def journal_entries(admindir=ADMINDIR):
    """dpkg's pending journal files (``updates/0001``...): a run stopped half way."""
    try:
        names = os.listdir(os.path.join(admindir, "updates"))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise DpkgError(f"{admindir}/updates: cannot list: {exc.strerror}") from exc
    return sorted(name for name in names if name.isdigit())


def interrupted(packages, admindir=ADMINDIR):
    """Why ``dpkg --configure -a`` is needed (a list of reasons; empty: it is not)."""
    reasons = []
    journal = journal_entries(admindir)
    if journal:
        entries = "1 journal entry" if len(journal) == 1 else f"{len(journal)} journal entries"
        reasons.append(f"dpkg was interrupted ({entries} in {admindir}/updates)")
    unfinished = sorted(f"{name} ({entry['status']})" for name, entry in packages.items()
                        if entry["status"] in UNFINISHED_STATES)
    if unfinished:
        reasons.append("packages left unfinished: " + ", ".join(unfinished))
    return reasons


def parse_madison(text):
    """``{package: [versions]}`` from ``apt-cache madison`` (packages the index knows)."""
    known = {}
    for line in text.splitlines():
        fields = [field.strip() for field in line.split("|")]
        if len(fields) >= 3 and fields[0] and fields[1]:
            known.setdefault(fields[0], [])
            if fields[1] not in known[fields[0]]:
                known[fields[0]].append(fields[1])
    return known


def version_known(known, name, version=None):
    """Whether the index knows ``name`` (at ``version``, any packaging revision, when given)."""
    versions = known.get(name) or []
    if not version:
        return bool(versions)
    return any(v.split(":")[-1].startswith(f"{version}-") or v.split(":")[-1] == version for v in versions)


class FrontendLock:
    """Hold dpkg's frontend lock, waiting up to ``timeout`` seconds for it.

    The lock apt, apt-get, aptitude and dpkg itself take (an fcntl write lock on
    ``<admindir>/lock-frontend``). Run dpkg inside with ``FRONTEND_LOCKED_ENV``.
    """

    def __init__(self, admindir=ADMINDIR, timeout=300, poll=0.5, clock=time.monotonic, sleep=time.sleep):
        self.path = os.path.join(admindir, "lock-frontend")
        self.timeout = timeout
        self.poll = poll
        self._clock = clock
        self._sleep = sleep
        self._fd = None

    def __enter__(self):
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o640)
        except OSError as exc:
            raise DpkgError(f"{self.path}: cannot open: {exc.strerror}") from exc
        deadline = self._clock() + self.timeout
        while True:
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except OSError as exc:
                if exc.errno not in (errno.EACCES, errno.EAGAIN):
                    self._close()
                    raise DpkgError(f"{self.path}: cannot lock: {exc.strerror}") from exc
            if self._clock() >= deadline:
                self._close()
                raise DpkgError(f"{self.path}: still locked by another apt or dpkg after {self.timeout} s; "
                                "nothing was changed")
            self._sleep(self.poll)

    def __exit__(self, *exc_info):
        self._close()
        return False

    def _close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
