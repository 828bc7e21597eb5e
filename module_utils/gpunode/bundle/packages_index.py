# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Packages index of a flat apt repository: the exact ``.deb`` files the bundle fetches.

:func:`resolve` picks, from one index, the stanzas that install what is wanted (an apt
request as the roles give it, ``name`` or ``name=VERSION-*``, or a Debian relation
``name (= version)``) and the dependencies the same index has, newest first, ordered as
``dpkg --compare-versions`` orders versions. Errors are raised as :class:`BundleError`,
naming the index. Standard library only; Python 3.8+.
"""

import fnmatch
import re


class BundleError(Exception):
    """What the bundle cannot gather; the message names the host, the node's value or the index."""


_DEPENDENCY = re.compile(r"^\s*(?P<name>[a-z0-9][a-z0-9+.-]+)(?::[a-z0-9]+)?\s*"
                         r"(?:\((?P<op>[<>=]+)\s*(?P<version>[^)\s]+)\s*\))?")
#: An apt request as the roles give ansible.builtin.apt: ``name=VERSION`` where VERSION may
#: end in a glob (``nvidia-open-570=570.133.20-*``: any packaging revision).
_APT_REQUEST = re.compile(r"^(?P<name>[a-z0-9][a-z0-9+.-]+)=(?P<pattern>[^\s=]+)$")


def parse_packages(text, source="Packages"):
    """The stanzas of a Packages index: ``[{"Package", "Version", "Filename", "SHA256", ...}]``."""
    stanzas, current, field = [], {}, None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            if current:
                stanzas.append(current)
            current, field = {}, None
        elif line[0] in " \t":
            if field is None:
                raise BundleError(f"{source}: line {number}: a continuation line outside a field")
            current[field] += "\n" + line.strip()
        else:
            field, sep, value = line.partition(":")
            if not sep:
                raise BundleError(f"{source}: line {number}: {line!r} is not 'Field: value'")
            current[field] = value.strip()
    if current:
        stanzas.append(current)
    for stanza in stanzas:
        missing = [f for f in ("Package", "Version", "Filename", "SHA256") if not stanza.get(f)]
        if missing:
            raise BundleError(f"{source}: package {stanza.get('Package', '?')} has no {', '.join(missing)}")
    return stanzas


def _order(char):
    if char == "~":
        return -1
    if char.isalpha():
        return ord(char)
    return ord(char) + 256 if char else 0


def _compare_part(a, b):
    """dpkg's comparison of an upstream version or revision: non-digits (~ first), then numbers."""
    while a or b:
        a_text = re.match(r"[^0-9]*", a).group()
        b_text = re.match(r"[^0-9]*", b).group()
        for index in range(max(len(a_text), len(b_text))):
            left = _order(a_text[index] if index < len(a_text) else "")
            right = _order(b_text[index] if index < len(b_text) else "")
            if left != right:
                return -1 if left < right else 1
        a, b = a[len(a_text):], b[len(b_text):]
        a_num = re.match(r"[0-9]*", a).group()
        b_num = re.match(r"[0-9]*", b).group()
        if int(a_num or 0) != int(b_num or 0):
            return -1 if int(a_num or 0) < int(b_num or 0) else 1
        a, b = a[len(a_num):], b[len(b_num):]
    return 0


def compare_versions(a, b):
    """-1, 0 or 1, as ``dpkg --compare-versions`` orders Debian versions (epoch:upstream-revision)."""
    def split(version):
        epoch, _colon, rest = version.rpartition(":") if ":" in version else ("0", "", version)
        upstream, _dash, revision = rest.rpartition("-") if "-" in rest else (rest, "", "0")
        return int(epoch or 0), upstream, revision
    a_epoch, a_up, a_rev = split(a)
    b_epoch, b_up, b_rev = split(b)
    if a_epoch != b_epoch:
        return -1 if a_epoch < b_epoch else 1
    return _compare_part(a_up, b_up) or _compare_part(a_rev, b_rev)


def _satisfies(version, op, wanted):
    if not op:
        return True
    result = compare_versions(version, wanted)
    return {"=": result == 0, ">=": result >= 0, "<=": result <= 0, ">>": result > 0,
            "<<": result < 0, ">": result > 0, "<": result < 0}.get(op, False)


def _candidates(by_name, provides, dependency):
    """The stanzas that satisfy one alternative, newest first (a virtual package by what provides it)."""
    request = _APT_REQUEST.match(dependency)
    if request:
        found = [s for s in by_name.get(request.group("name"), ())
                 if fnmatch.fnmatchcase(s["Version"], request.group("pattern"))]
        return sorted(found, key=_VersionKey, reverse=True)
    match = _DEPENDENCY.match(dependency)
    if not match:
        return []
    name, op, version = match.group("name"), match.group("op"), match.group("version")
    found = [s for s in by_name.get(name, ()) if _satisfies(s["Version"], op, version)]
    if not found and not op:
        found = list(provides.get(name, ()))
    return sorted(found, key=_VersionKey, reverse=True)


class _VersionKey:
    def __init__(self, stanza):
        self.version = stanza["Version"]

    def __lt__(self, other):
        return compare_versions(self.version, other.version) < 0


def resolve(stanzas, wanted, arch):
    """``(debs, external)``: the stanzas for ``wanted`` (``name``, ``name=VERSION-*`` or
    ``name (= version)``) and their dependencies found in the index; ``external`` the
    dependencies it lacks (the distribution's).

    A wanted package the index lacks is an error naming it and the versions there are.
    """
    stanzas = [s for s in stanzas if s.get("Architecture", arch) in (arch, "all")]
    by_name, provides = {}, {}
    for stanza in stanzas:
        by_name.setdefault(stanza["Package"], []).append(stanza)
        for virtual in (stanza.get("Provides") or "").split(","):
            if virtual.strip():
                provides.setdefault(_DEPENDENCY.match(virtual).group("name"), []).append(stanza)
    chosen, external, queue = {}, set(), [(w, True) for w in wanted]
    while queue:
        dependency, required = queue.pop(0)
        alternatives = [a.strip() for a in dependency.split("|")]
        found = next((c for a in alternatives for c in _candidates(by_name, provides, a)[:1]), None)
        if found is None:
            if required:
                match = _DEPENDENCY.match(dependency)
                name = match.group("name") if match else dependency
                versions = ", ".join(sorted(s["Version"] for s in by_name.get(name, ()))) or "none"
                raise BundleError(f"the index has no {dependency} for {arch} (versions there: {versions})")
            external.add(alternatives[0].split(" ")[0].split("(")[0])
            continue
        if found["Package"] in chosen:
            continue
        chosen[found["Package"]] = found
        for field in ("Pre-Depends", "Depends"):
            queue.extend((d, False) for d in (found.get(field) or "").split(",") if d.strip())
    return [chosen[name] for name in sorted(chosen)], sorted(external)


def downloads(repository, index_text, dest):
    """``[{"repository", "package", "version", "url", "dest", "checksum"}]`` of the .deb files of one
    repository, and the names it lacks."""
    debs, external = resolve(parse_packages(index_text, repository["index"]), repository["packages"],
                             repository["arch"])
    result = []
    for stanza in debs:
        filename = stanza["Filename"]
        name = filename.rsplit("/", 1)[-1]
        if "/" in name or name in ("", ".", "..") or not name.endswith(".deb"):
            raise BundleError(f"{repository['index']}: {stanza['Package']}: Filename {filename!r} "
                              "is not a .deb")
        relative = filename[2:] if filename.startswith("./") else filename
        result.append({"repository": repository["name"], "package": stanza["Package"],
                       "version": stanza["Version"], "url": repository["url"] + relative,
                       "dest": f"{dest}/debs/{repository['name']}/{name}",
                       "checksum": "sha256:" + stanza["SHA256"]})
    return result, external


__all__ = ["BundleError", "compare_versions", "downloads", "parse_packages", "resolve"]
