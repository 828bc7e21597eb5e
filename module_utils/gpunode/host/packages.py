# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node's package manager: one interface over apt/dpkg and dnf/rpm.

:func:`manager` gives the backend the node has (:class:`Apt`, or
:class:`~ansible.module_utils.gpunode.host.packages_rpm.Dnf` on the RHEL family; None without one);
a backend answers :meth:`~Apt.packages` (installed and held packages, with their
states), :meth:`~Apt.owner` (which package owns a path) and :meth:`~Apt.held`
(the packages held at their version), :meth:`~Apt.interrupted` (why the database needs a
repair first) and :meth:`~Apt.refresh_index` (download the index again). A backend is a class
with these methods and a ``detect(host)`` class method, listed in :data:`BACKENDS`.

apt/dpkg, the parsers (standard library only):

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
- :func:`deb822_text`: a one-line apt source as the deb822 stanza apt reads.

apt sources: gpunode writes its apt sources as deb822 files (``/etc/apt/sources.list.d/NAME.sources``,
what ``ansible.builtin.deb822_repository`` writes and what ansible-core recommends since
``apt_repository`` was deprecated in 2.21), rendered here: the module that would write
them needs python3-debian on the node, which a node does not have. Users still give one
line (``deb [signed-by=KEYRING] URI SUITE COMPONENT...``): the inventory's format is
unchanged.

Python 3.8+ (this runs on target hosts).
"""

import errno
import fcntl
import os
import re
import time

from ansible.module_utils.gpunode.host.packages_rpm import Dnf

ADMINDIR = "/var/lib/dpkg"
#: dpkg states that a finished run never leaves (dpkg-query(1), "Package states").
UNFINISHED_STATES = ("half-installed", "unpacked", "half-configured", "triggers-awaited", "triggers-pending")
#: Set for a dpkg run by a frontend that holds the frontend lock (dpkg(1), ENVIRONMENT).
FRONTEND_LOCKED_ENV = {"DPKG_FRONTEND_LOCKED": "1"}


#: dpkg-query's format that :func:`parse_dpkg_query` reads
DPKG_QUERY_FORMAT = "${Package}\t${Version}\t${Status}\n"


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


#: One ``Depends`` alternative at an exact version: ``name (= 570.124.06-0ubuntu1)``.
_FIELD_RE = re.compile(r"^([^\s:]+):((?:.*)(?:\n[ \t].*)*)", re.MULTILINE)
_EXACT_DEPENDS_RE = re.compile(r"^([a-z0-9][a-z0-9+.-]*)(?::[a-z0-9]+)?\s*\(\s*=\s*([^)\s]+)\s*\)$")


def exact_depends(text, version):
    """What the packages at driver ``version`` in ``apt-cache show`` stanzas depend on at exactly that
    version (``(= <version>-<revision>)``): apt takes a dependency's candidate, the newest, and refuses
    an older exact one unless it is asked for too. Of alternatives all at the version, the first,
    unless another is named already."""
    singles, groups = set(), []
    for stanza in (text or "").split("\n\n"):
        fields = dict(_FIELD_RE.findall(stanza))  # a field's continuation lines are part of it
        if fields.get("Version", "").strip().split(":")[-1].split("-")[0] != version:
            continue
        for item in ",".join(fields.get(key, "") for key in ("Pre-Depends", "Depends")).split(","):
            matches = [_EXACT_DEPENDS_RE.match(alternative.strip()) for alternative in item.split("|")]
            names = [m.group(1) for m in matches if m and m.group(2).split(":")[-1].split("-")[0] == version]
            if len(names) == 1 == len(matches):
                singles.add(names[0])
            elif names and len(names) == len(matches):
                groups.append(names)
    return sorted(singles | {group[0] for group in groups if not singles & set(group)})


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


# ---------------------------------------------------------------- the interface


class Apt:
    """apt and dpkg (Debian, Ubuntu): the package manager through a ``host/commands.py`` Host."""

    name = "apt"

    def __init__(self, host, admindir=ADMINDIR):
        self.host = host
        self.admindir = admindir

    @classmethod
    def detect(cls, host, admindir=ADMINDIR):
        """The backend when the node has dpkg-query, else None."""
        return cls(host, admindir) if host.which("dpkg-query") else None

    def _query(self, args):
        return self.host.run([self.host.which("dpkg-query"), f"--admindir={self.admindir}", *args])

    def packages(self, names=()):
        """``{package: {"version", "want", "status"}}`` of ``names`` (all dpkg knows when empty).

        Raises :class:`DpkgError` when dpkg-query fails on the whole database; named
        packages dpkg does not know are absent (dpkg-query then exits 1).
        """
        rc, out, err = self._query(["-W", "-f", DPKG_QUERY_FORMAT, *names])
        if rc != 0 and not names:
            raise DpkgError(f"dpkg-query -W failed (rc {rc}): {err.strip()}")
        return parse_dpkg_query(out)

    def installed_versions(self, names=()):
        """``{package: version}`` of the packages installed (held or not) among ``names``."""
        return {name: entry["version"] for name, entry in self.packages(names).items()
                if entry["want"] in ("install", "hold") and entry["status"] == "installed"}

    def held(self, names=()):
        """The packages held at their version (``apt-mark hold``), sorted."""
        return sorted(name for name, entry in self.packages(names).items() if entry["want"] == "hold")

    def interrupted(self, packages):
        """Why ``dpkg --configure -a`` is needed first (:func:`interrupted`)."""
        return interrupted(packages, self.admindir)

    def refresh_index(self):
        """Download the package index again (``apt-get update``, as ``ansible.builtin.apt``'s
        ``update_cache``). Raises :class:`DpkgError` naming the command's error when it fails."""
        apt_get = self.host.which("apt-get")
        if not apt_get:
            raise DpkgError("apt-get is not on PATH: the package index cannot be refreshed")
        rc, _out, err = self.host.run([apt_get, "update", "-q"])
        if rc != 0:
            raise DpkgError(f"apt-get update failed (rc {rc}): {err.strip()}; nothing was changed")

    def owner(self, path):
        """The package that owns ``path`` (``dpkg-query -S``), or None when none does."""
        rc, out, _err = self._query(["-S", path])
        if rc != 0:
            return None
        for line in out.splitlines():
            owners, sep, owned = line.rpartition(": ")
            if sep and owned == path and not line.startswith("diversion "):
                return owners.split(",")[0].strip().split(":")[0]
        return None

    def owners(self, paths):
        """The packages that own any of ``paths``, sorted (one ``dpkg-query -S``; rc 1 when a path
        has no owner)."""
        paths = [p for p in paths if p]
        if not paths:
            return []
        _rc, out, _err = self._query(["-S", *paths])
        return parse_dpkg_search(out)


def parse_dpkg_search(text):
    """``dpkg-query -S PATH...``: the package names that own the paths (``pkg1, pkg2: /path``)."""
    owners = []
    for line in (text or "").splitlines():
        names, sep, _path = line.partition(": ")
        if not sep or names.startswith("diversion by") or " " in names.replace(", ", ","):
            continue
        owners.extend(name.split(":")[0].strip() for name in names.split(","))
    return sorted(set(n for n in owners if n))


#: the backends, first found wins: dnf/rpm (``host/packages_rpm.py``) on a node whose os-release
#: says RHEL family, else apt/dpkg where dpkg-query is
BACKENDS = (Dnf, Apt)


def manager(host, admindir=ADMINDIR):
    """The node's package manager backend, or None when it has none gpunode knows
    (``admindir``: dpkg's database, where apt serves the node)."""
    for backend in BACKENDS:
        found = backend.detect(host, admindir=admindir)
        if found is not None:
            return found
    return None


# ---------------------------------------------------------------- apt sources

# one-line options (sources.list(5), "THE ONE-LINE-STYLE FORMAT") -> deb822 field names
OPTION_FIELDS = {
    "arch": "Architectures",
    "lang": "Languages",
    "target": "Targets",
    "pdiffs": "PDiffs",
    "by-hash": "By-Hash",
    "allow-insecure": "Allow-Insecure",
    "allow-weak": "Allow-Weak",
    "allow-downgrade-to-insecure": "Allow-Downgrade-To-Insecure",
    "trusted": "Trusted",
    "signed-by": "Signed-By",
    "check-valid-until": "Check-Valid-Until",
    "valid-until-min": "Valid-Until-Min",
    "valid-until-max": "Valid-Until-Max",
    "check-date": "Check-Date",
    "date-max-future": "Date-Max-Future",
    "inrelease-path": "InRelease-Path",
}
TYPES = ("deb", "deb-src")
# what a URI, suite, component or option value may hold: no space, no control character,
# nothing that ends the options or starts a comment
TOKEN = re.compile(r"[^\s\[\]#]+\Z")


class AptSourceError(ValueError):
    """A one-line source that apt would not read as one source; the message says why."""


def _options(text, line):
    fields = {}
    for option in text.split():
        key, sep, value = option.partition("=")
        if not sep or not value or not TOKEN.match(value):
            raise AptSourceError(f"apt source {line!r}: option {option!r} is not KEY=VALUE")
        if key not in OPTION_FIELDS:
            raise AptSourceError(f"apt source {line!r}: unknown option {key!r} "
                                 f"(sources.list(5): {', '.join(sorted(OPTION_FIELDS))})")
        # one-line values are comma-separated lists; deb822 separates them with spaces
        fields[OPTION_FIELDS[key]] = " ".join(part for part in value.split(",") if part)
    return fields


def parse_one_line(line):
    """``{"Types", "URIs", "Suites", "Components"?, option fields...}`` of a one-line source.

    Raises AptSourceError for anything apt would not read as exactly one source
    (a newline, a missing suite, an unknown option, a flat suite with components).
    """
    if not isinstance(line, str) or not line.strip():
        raise AptSourceError("apt source: empty")
    if any(ord(char) < 32 or ord(char) == 127 for char in line):
        raise AptSourceError(f"apt source {line!r}: holds a newline or another control character")
    match = re.match(r"\s*(\S+)\s*(?:\[([^\]]*)\])?\s*(.*)\Z", line)
    kind, options, rest = match.groups()
    if kind not in TYPES:
        raise AptSourceError(f"apt source {line!r}: starts with {kind!r}, not deb or deb-src")
    words = rest.split()
    if len(words) < 2 or not all(TOKEN.match(word) for word in words):
        raise AptSourceError(f"apt source {line!r}: needs a URI and a suite "
                             "(deb [OPTIONS] URI SUITE [COMPONENT...])")
    uri, suite, components = words[0], words[1], words[2:]
    if suite.endswith("/") and components:
        raise AptSourceError(f"apt source {line!r}: the flat suite {suite!r} takes no components")
    if not suite.endswith("/") and not components:
        raise AptSourceError(f"apt source {line!r}: suite {suite!r} needs a component (or end it with / for "
                             "a flat repository)")
    fields = {"Types": kind, "URIs": uri, "Suites": suite}
    if components:
        fields["Components"] = " ".join(components)
    fields.update(_options(options or "", line))
    return fields


def deb822_text(line, header=""):
    """The .sources file of a one-line source: ``header`` (comment lines) and one stanza."""
    fields = parse_one_line(line)
    if header and not all(part.startswith("#") for part in header.splitlines()):
        raise AptSourceError(f"apt source header {header!r}: every line must be a comment")
    body = "".join(f"{key}: {value}\n" for key, value in fields.items())
    return (header.rstrip("\n") + "\n" if header else "") + body
