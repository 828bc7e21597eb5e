# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The dnf/rpm backend of the node's package manager (``host/packages.py`` lists it in ``BACKENDS``).

It answers what :class:`~ansible.module_utils.gpunode.host.packages.Apt` answers, in the same
shape, so the concerns read one interface: :meth:`Dnf.packages` (``{name: {"version", "want",
"status"}}``, ``want`` ``hold`` for a version-locked package), :meth:`Dnf.owner` and
:meth:`Dnf.held`. The parsers are pure functions, written from the formats' own documentation:

- :func:`parse_rpm_query` reads ``rpm -qa --queryformat RPM_QUERY_FORMAT``: rpm's query format
  tags ``%{NAME}``, ``%{EPOCH}``, ``%{VERSION}``, ``%{RELEASE}``, ``%{ARCH}``; a tag a package
  does not have prints ``(none)`` (rpm.org, "Query formats",
  https://rpm-software-management.github.io/rpm/manual/queryformat.html).
- :func:`parse_versionlock` reads the versionlock plugin's list
  (``/etc/dnf/plugins/versionlock.list``, the ``locklist`` of its ``versionlock.conf``): one
  package spec a line, ``#`` comments and blank lines skipped, a leading ``!`` makes the line an
  exclude instead of a lock (dnf-plugins-core, "DNF versionlock Plugin",
  https://dnf-plugins-core.readthedocs.io/en/latest/versionlock.html). ``dnf versionlock add``
  writes ``name-[epoch:]version-release.*``; a spec may hold shell wildcards
  (NVIDIA's guide locks a branch with ``dnf versionlock add '*nvidia*580*'``).
- :func:`lock_matches` tells whether a spec covers an installed package the way the plugin's
  own ``_match`` does: the spec, as an fnmatch pattern, against the package's NEVRA forms
  (``name``, ``name.arch``, ``name-version``, ... ``name-epoch:version-release.arch``).

- :func:`vercmp` and :func:`compare_evr` order versions as rpm does (rpm-version(7):
  alphanumeric segments, numbers compared as numbers, ``~`` before anything, ``^`` after
  the end; the test vectors of rpm's own ``tests/rpmvercmp.at``): the runtime's candidate
  versions and the offline bundle's RPM metadata both take this order.

Python 3.8+ (this runs on target hosts); standard library only.
"""

import fnmatch
import os
import re

#: rpm's query format that :func:`parse_rpm_query` reads (one package a line, tab-separated)
RPM_QUERY_FORMAT = "%{NAME}\t%{EPOCH}\t%{VERSION}\t%{RELEASE}\t%{ARCH}\n"
#: The versionlock plugin's list (dnf 4, EL 9 and 10): ``locklist`` in
#: /etc/dnf/plugins/versionlock.conf as dnf-plugins-core installs it.
VERSIONLOCK_LIST = "/etc/dnf/plugins/versionlock.list"
#: The versionlock plugin's configuration: dnf loads the plugin where it is
#: (python3-dnf-plugin-versionlock installs both files).
VERSIONLOCK_CONF = "/etc/dnf/plugins/versionlock.conf"
#: Where dnf 4 keeps the state of each module (``<name>.module``, an INI section with ``name``,
#: ``stream``, ``profiles`` and ``state``: dnf, "Modularity", "Module state",
#: https://dnf.readthedocs.io/en/latest/modularity.html).
MODULES_DIR = "/etc/dnf/modules.d"
#: os-release IDs (``ID`` and ``ID_LIKE``) of the distributions dnf and rpm serve
#: (os-release(5): ``ID_LIKE`` names the distributions this one derives from; Rocky and
#: AlmaLinux say ``rhel centos fedora``, RHEL ``fedora``).
RPM_FAMILY_IDS = ("rhel", "fedora", "centos", "rocky", "almalinux")
OS_RELEASE = "/etc/os-release"


class RpmError(Exception):
    """The rpm database or the lock list cannot be read; the message names the command or file."""


#: rpm's version segments: runs of digits, runs of letters, and the operators ``~`` and ``^``
_SEGMENT = re.compile(r"([0-9]+|[A-Za-z]+|~|\^)")


def vercmp(a, b):
    """-1, 0 or 1 as rpm orders the version (or release) strings ``a`` and ``b``."""
    if a == b:
        return 0
    one, two = _segments(a), _segments(b)
    for x, y in zip(one, two):
        if x != y:
            return _segment_order(x, y)
    if len(one) == len(two):
        return 0
    # the longer one is newer, unless what it has more starts with '~'
    rest, sign = (one[len(two)], 1) if len(one) > len(two) else (two[len(one)], -1)
    return -sign if rest == "~" else sign


def _segments(text):
    return _SEGMENT.findall(text)


def _segment_order(x, y):
    # '~' sorts before anything, then '^' before any other segment (but after the end: vercmp)
    for mark in ("~", "^"):
        if mark in (x, y):
            return -1 if x == mark else 1
    if x.isdigit() and y.isdigit():
        x, y = x.lstrip("0") or "0", y.lstrip("0") or "0"
        if len(x) != len(y):
            return 1 if len(x) > len(y) else -1
    elif x.isdigit() != y.isdigit():
        return 1 if x.isdigit() else -1  # a number is newer than letters
    return (x > y) - (x < y)


def compare_evr(a, b):
    """Order two ``(epoch, version, release)`` triples (epoch as a string or int, "" or None for 0)."""
    epochs = int(a[0] or 0), int(b[0] or 0)
    if epochs[0] != epochs[1]:
        return 1 if epochs[0] > epochs[1] else -1
    return vercmp(a[1], b[1]) or vercmp(a[2] or "", b[2] or "")


def parse_rpm_query(text):
    """``{name: {"version", "arch", "versions"}}`` from ``rpm -q --queryformat RPM_QUERY_FORMAT``.

    ``version`` is ``[epoch:]version-release`` (the epoch only where the package has one);
    ``versions`` lists every installed one (install-only packages such as ``kernel-devel``
    are installed in several versions at once), ``version`` is the last rpm listed.
    Lines that are not five fields (``package x is not installed``) are skipped.
    """
    packages = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) != 5 or not fields[0]:
            continue
        name, epoch, version, release, arch = fields
        evr = f"{version}-{release}" if epoch in ("(none)", "") else f"{epoch}:{version}-{release}"
        entry = packages.setdefault(name, {"version": None, "arch": arch, "versions": [], "nevras": []})
        entry["version"], entry["arch"] = evr, arch
        entry["versions"].append(evr)
        entry["nevras"].append((name, epoch if epoch not in ("(none)", "") else "0", version, release, arch))
    return packages


def parse_versionlock(text):
    """``[{"spec", "exclude"}]`` of the versionlock list's lines, in order."""
    entries = []
    for line in (text or "").splitlines():
        spec = line.strip()
        if not spec or spec.startswith("#"):
            continue
        exclude = spec.startswith("!")
        entries.append({"spec": spec.lstrip("!").strip(), "exclude": exclude})
    return entries


def nevra_forms(name, epoch, version, release, arch):
    """The forms of a package's NEVRA a versionlock spec is matched against (the plugin's ``_match``)."""
    return (
        name,
        f"{name}.{arch}",
        f"{name}-{version}",
        f"{name}-{version}-{release}",
        f"{name}-{epoch}:{version}",
        f"{name}-{version}-{release}.{arch}",
        f"{name}-{epoch}:{version}-{release}",
        f"{epoch}:{name}-{version}-{release}.{arch}",
        f"{name}-{epoch}:{version}-{release}.{arch}",
    )


def lock_matches(spec, nevra):
    """Whether the versionlock ``spec`` (wildcards allowed) covers the package ``nevra``
    (``(name, epoch, version, release, arch)``, epoch ``"0"`` when it has none)."""
    return any(fnmatch.fnmatchcase(form, spec) for form in nevra_forms(*nevra))


def locked(entries, nevra):
    """Whether the installed ``nevra`` is held at its version: a lock covers it and no exclude does."""
    covered = [entry for entry in entries if lock_matches(entry["spec"], nevra)]
    return any(not e["exclude"] for e in covered) and not any(e["exclude"] for e in covered)


def parse_module_state(text):
    """``{"name", "stream", "profiles", "state"}`` of a dnf module state file (empty values None)."""
    found = {"name": None, "stream": None, "profiles": None, "state": None}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() in found:
            found[key.strip()] = value.strip() or None
    return found


def enabled_stream(text):
    """The stream a module state file says is enabled, or None."""
    found = parse_module_state(text)
    return found["stream"] if found["state"] == "enabled" else None


def os_release_ids(text):
    """The ``ID`` and ``ID_LIKE`` words of an os-release file's text (os-release(5))."""
    ids = []
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() in ("ID", "ID_LIKE"):
            ids.extend(value.strip().strip("\"'").lower().split())
    return ids


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RpmError(f"{path}: cannot read: {exc.strerror}") from exc


class Dnf:
    """dnf and rpm (RHEL, Rocky, AlmaLinux): the package manager through a ``host/commands.py`` Host."""

    name = "dnf"

    def __init__(self, host, locklist=VERSIONLOCK_LIST):
        self.host = host
        self.locklist = locklist

    @classmethod
    def detect(cls, host, admindir=None, os_release=None, locklist=None):
        """The backend on a RHEL-family node with rpm and dnf, else None (a Debian host may carry
        rpm and dnf as tools: its os-release decides). ``admindir`` is dpkg's (``manager`` passes
        it to every backend); rpm has none. ``os_release`` and ``locklist`` default to
        :data:`OS_RELEASE` and :data:`VERSIONLOCK_LIST`."""
        if not (host.which("rpm") and host.which("dnf")):
            return None
        ids = os_release_ids(_read(os_release or OS_RELEASE))
        return cls(host, locklist or VERSIONLOCK_LIST) if any(i in RPM_FAMILY_IDS for i in ids) else None

    def _rpm(self, args):
        return self.host.run([self.host.which("rpm"), *args])

    def locks(self):
        """The versionlock list's entries (none without the list)."""
        return parse_versionlock(_read(self.locklist))

    def packages(self, names=()):
        """``{package: {"version", "want", "status", "arch", "versions"}}`` of ``names`` (every
        installed package when empty), in the shape ``Apt.packages`` gives: ``want`` is ``hold``
        where the versionlock list locks the installed version, ``install`` otherwise.

        Raises :class:`RpmError` when rpm fails on the whole database; named packages rpm does
        not know are absent (``rpm -q`` then exits 1).
        """
        args = ["-q", "--queryformat", RPM_QUERY_FORMAT, *names] if names else \
            ["-qa", "--queryformat", RPM_QUERY_FORMAT]
        rc, out, err = self._rpm(args)
        if rc != 0 and not names:
            raise RpmError(f"rpm -qa failed (rc {rc}): {err.strip()}")
        entries = self.locks()
        packages = parse_rpm_query(out)
        for entry in packages.values():
            held = bool(entries) and all(locked(entries, nevra) for nevra in entry.pop("nevras"))
            entry.update(want="hold" if held else "install", status="installed")
        return packages

    def installed_versions(self, names=()):
        """``{package: version}`` of the packages installed (held or not) among ``names``."""
        return {name: entry["version"] for name, entry in self.packages(names).items()}

    def held(self, names=()):
        """The installed packages the versionlock list holds at their version, sorted."""
        return sorted(name for name, entry in self.packages(names).items() if entry["want"] == "hold")

    def versionlock_plugin(self, conf=None):
        """Whether dnf's versionlock plugin is installed (its configuration is there)."""
        return os.path.exists(conf or VERSIONLOCK_CONF)

    def module_stream(self, module, modules_dir=None):
        """The enabled stream of dnf module ``module`` (``580-open`` of ``nvidia-driver``), or None."""
        return enabled_stream(_read(os.path.join(modules_dir or MODULES_DIR, f"{module}.module")))

    def interrupted(self, _packages):
        """Why the database needs a repair first: never for rpm (a transaction is atomic per package)."""
        return []

    def refresh_index(self):
        """Download the repositories' metadata again (``dnf makecache``). Raises :class:`RpmError`
        naming the command's error when it fails."""
        rc, _out, err = self.host.run([self.host.which("dnf"), "makecache", "-q"])
        if rc != 0:
            raise RpmError(f"dnf makecache failed (rc {rc}): {err.strip()}; nothing was changed")

    def owner(self, path):
        """The package that owns ``path`` (``rpm -qf``), or None when none does."""
        rc, out, _err = self._rpm(["-qf", "--queryformat", "%{NAME}\n", path])
        if rc != 0:
            return None  # "file PATH is not owned by any package"
        names = parse_rpm_owners(out)
        return names[0] if names else None

    def owners(self, paths):
        """The packages that own any of ``paths``, sorted (one ``rpm -qf``; its rc counts the
        paths no package owns)."""
        paths = [p for p in paths if p]
        if not paths:
            return []
        _rc, out, _err = self._rpm(["-qf", "--queryformat", "%{NAME}\n", *paths])
        return sorted(set(parse_rpm_owners(out)))


def parse_rpm_owners(text):
    """The package names of ``rpm -qf --queryformat '%{NAME}\\n' PATH...`` in order; a path no
    package owns prints ``file PATH is not owned by any package`` (a name has no space)."""
    return [line.strip() for line in (text or "").splitlines() if line.strip() and " " not in line.strip()]
