# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The metadata of an RPM repository: the exact ``.rpm`` files the bundle fetches for EL nodes.

What :mod:`.packages_index` is for a flat apt repository, for the repositories dnf reads
(NVIDIA's CUDA repository per release, ``rhel9/x86_64``, ``rhel10/x86_64``):

- :func:`parse_repomd` reads ``repodata/repomd.xml``: where each metadata file is and its
  checksum (the ``<data type="primary">`` and, where the repository has module streams,
  ``<data type="modules">``).
- :func:`parse_primary` reads ``primary.xml`` (gzip-compressed or not): each package's
  name, architecture, epoch-version-release, location and checksum, what it provides and
  requires (the ``rpm:`` entries of the ``http://linux.duke.edu/metadata/rpm`` namespace,
  as createrepo_c writes them).
- :func:`parse_modules` reads ``modules.yaml`` (modulemd v2 documents): each stream's
  profiles and the NEVRAs of its artifacts, so a request such as
  ``@nvidia-driver:580-open`` resolves to the packages of that stream only.
- versions are ordered as rpm orders them (``host.packages_rpm.vercmp`` and ``compare_evr``).
- :func:`resolve` picks the packages that install what is wanted and the dependencies the
  same repository has (versioned requires met), newest first, among the packages dnf would
  consider with the node's module streams enabled; :func:`downloads` lists them with their
  checksums.

Standard library only, except :func:`parse_modules` (PyYAML, which the controller has).
Errors are :class:`~.packages_index.BundleError`, naming the metadata file.
"""

import fnmatch
import functools
import gzip
import xml.etree.ElementTree as ET

try:
    import yaml
except ImportError:  # the bundle is planned on the controller, which has PyYAML (requirements.txt)
    yaml = None

from ansible.module_utils.gpunode.bundle.packages_index import BundleError
from ansible.module_utils.gpunode.formats.yaml_load import safe_load_all
from ansible.module_utils.gpunode.host.packages_rpm import compare_evr

_REPO = "{http://linux.duke.edu/metadata/repo}"
_COMMON = "{http://linux.duke.edu/metadata/common}"
_RPM = "{http://linux.duke.edu/metadata/rpm}"
#: arches a node of ``arch`` installs (noarch packages fit every node)
_ARCHES = {"x86_64": ("x86_64", "noarch"), "aarch64": ("aarch64", "noarch")}


def _xml(data, source):
    try:
        return ET.fromstring(data)
    except ET.ParseError as exc:
        raise BundleError(f"{source}: not XML: {exc}") from None


def parse_repomd(text, source="repomd.xml"):
    """``{type: {"href", "checksum_type", "checksum"}}`` from repomd.xml."""
    root = _xml(text, source)
    found = {}
    for data in root.iter(_REPO + "data"):
        location, checksum = data.find(_REPO + "location"), data.find(_REPO + "checksum")
        if location is None or checksum is None or not location.get("href"):
            raise BundleError(f"{source}: <data type={data.get('type')!r}> has no location or checksum")
        found[data.get("type")] = {"href": location.get("href"), "checksum_type": checksum.get("type"),
                                   "checksum": (checksum.text or "").strip()}
    if "primary" not in found:
        raise BundleError(f"{source}: no <data type=\"primary\">")
    return found


def _entries(format_, tag):
    block = format_.find(_RPM + tag)
    if block is None:
        return []
    return [{"name": e.get("name"), "flags": e.get("flags"),
             "evr": (e.get("epoch"), e.get("ver"), e.get("rel"))} for e in block.iter(_RPM + "entry")]


def parse_primary(data, source="primary.xml"):
    """The packages of primary.xml (bytes, gzip or plain), one dict each."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except OSError as exc:
            raise BundleError(f"{source}: a broken gzip file: {exc}") from None
    packages = []
    for element in _xml(data, source).iter(_COMMON + "package"):
        if element.get("type") != "rpm":
            continue
        version, location = element.find(_COMMON + "version"), element.find(_COMMON + "location")
        checksum, format_ = element.find(_COMMON + "checksum"), element.find(_COMMON + "format")
        name = element.findtext(_COMMON + "name")
        if version is None or location is None or checksum is None or not name:
            raise BundleError(f"{source}: package {name or '?'} has no version, location or checksum")
        packages.append({
            "name": name, "arch": element.findtext(_COMMON + "arch"),
            "evr": (version.get("epoch") or "0", version.get("ver"), version.get("rel")),
            "href": location.get("href"), "checksum_type": checksum.get("type"),
            "checksum": (checksum.text or "").strip(),
            "provides": _entries(format_, "provides") if format_ is not None else [],
            "requires": _entries(format_, "requires") if format_ is not None else [],
        })
    return packages


def parse_modules(text, source="modules.yaml"):
    """``{"name:stream": [{"version", "arch", "profiles": {name: [rpm]}, "artifacts": [NEVRA]}]}``."""
    if yaml is None:
        raise BundleError(f"{source}: reading module streams needs PyYAML on the controller")
    try:
        documents = list(safe_load_all(text))
    except yaml.YAMLError as exc:
        raise BundleError(f"{source}: not YAML: {exc}") from None
    streams = {}
    for document in documents:
        if not isinstance(document, dict) or document.get("document") != "modulemd":
            continue  # modulemd-defaults, obsoletes, translations
        data = document.get("data") or {}
        if not data.get("name") or data.get("stream") in (None, ""):
            raise BundleError(f"{source}: a modulemd document without name or stream")
        key = f"{data['name']}:{data['stream']}"
        profiles = {name: list((profile or {}).get("rpms") or [])
                    for name, profile in (data.get("profiles") or {}).items()}
        streams.setdefault(key, []).append({
            "version": int(data.get("version") or 0), "arch": data.get("arch"), "profiles": profiles,
            "artifacts": list(((data.get("artifacts") or {}).get("rpms")) or []),
        })
    return streams


def nevra(package):
    """``name-epoch:version-release.arch`` as modulemd's artifacts name a package."""
    epoch, version, release = package["evr"]
    return f"{package['name']}-{epoch or 0}:{version}-{release}.{package['arch']}"


def _newest_first(packages):
    return sorted(packages, key=functools.cmp_to_key(lambda a, b: compare_evr(b["evr"], a["evr"])))


def _stream(spec, streams, arch, source):
    """The newest version of the module stream ``name:stream`` for ``arch``."""
    candidates = [s for s in streams.get(spec, []) if s["arch"] in (arch, "noarch", None)]
    if not candidates:
        known = ", ".join(sorted(streams)) or "none"
        raise BundleError(f"{source}: no module stream {spec} for {arch} (streams there: {known})")
    return max(candidates, key=lambda s: s["version"])


def _profile_packages(request, streams, arch, source):
    """The package names of ``@name:stream[/profile]`` (profile ``default`` when not named)."""
    spec, _slash, profile = request[1:].partition("/")
    stream = _stream(spec, streams, arch, source)
    profile = profile or "default"
    if profile not in stream["profiles"]:
        raise BundleError(f"{source}: module stream {spec} has no profile {profile} "
                          f"(profiles: {', '.join(sorted(stream['profiles'])) or 'none'})")
    return stream["profiles"][profile]


def _visible(packages, arch, streams, enabled, source):
    """The packages dnf considers on an ``arch`` node: modular filtering hides the packages of
    every module stream that is not enabled (dnf's modularity: a stream's artifacts are
    installable only while it is enabled; packages of no stream are not filtered). A
    repository's default streams (modulemd-defaults) are not taken as enabled: the driver role
    enables its stream by name before it installs."""
    arches = _ARCHES.get(arch, (arch, "noarch"))
    modular = {nevra_ for versions in streams.values() for s in versions for nevra_ in s["artifacts"]}
    shown = {nevra_ for spec in enabled for nevra_ in _stream(spec, streams, arch, source)["artifacts"]}
    return [p for p in packages if p["arch"] in arches and (nevra(p) not in modular or nevra(p) in shown)]


def _lock_matches(package, lock):
    """Whether a ``dnf versionlock add`` spec (globs allowed, ``*nvidia*580*``) names ``package``: the
    forms dnf matches a spec against (dnf's ``Subject``: name, name-version, name-version-release,
    name-epoch:version-release, each with or without .arch)."""
    name, (epoch, version, release), arch = package["name"], package["evr"], package["arch"]
    forms = (name, f"{name}-{version}", f"{name}-{version}-{release}",
             f"{name}-{epoch or 0}:{version}-{release}")
    return any(fnmatch.fnmatchcase(form, lock) or fnmatch.fnmatchcase(f"{form}.{arch}", lock)
               for form in forms)


def _locked(packages, locks, arch, source):
    """The packages dnf considers under version locks: the versionlock plugin (dnf-plugins-core,
    ``dnf versionlock add SPEC``) locks every package the spec names to those versions, excluding
    every other version of the same names; names no lock names are not filtered. A spec that
    names no package is refused, as ``dnf versionlock add`` finds nothing to lock."""
    for lock in locks:
        if not any(_lock_matches(p, lock) for p in packages):
            raise BundleError(f"{source}: no package for {arch} matches the version lock {lock!r} "
                              "(the driver role's dnf versionlock add)")
    kept = {id(p): p for p in packages if any(_lock_matches(p, lock) for lock in locks)}
    names = {p["name"] for p in kept.values()}
    return [p for p in packages if p["name"] not in names or id(p) in kept]


def _index(packages):
    by_name, provides = {}, {}
    for package in _newest_first(packages):
        by_name.setdefault(package["name"], []).append(package)
        for entry in package["provides"]:
            if entry["name"] != package["name"]:
                provides.setdefault(entry["name"], []).append(package)
    return by_name, provides


#: rpm's dependency flags and the comparison results that satisfy them
_FLAGS = {"EQ": (0,), "GE": (0, 1), "GT": (1,), "LE": (0, -1), "LT": (-1,)}


def _satisfies(package, entry):
    """Whether ``package`` meets a requires ``entry`` (``name``, ``flags``, ``evr``)."""
    if not entry.get("flags"):
        return True
    epoch, version, release = entry["evr"]
    candidates = [package["evr"]] + [p["evr"] for p in package["provides"]
                                     if p["name"] == entry["name"] and p["evr"][1]]
    for have in candidates:
        # a version without a release matches every release of it (rpm-version(7))
        order = compare_evr((have[0], have[1], have[2] if release else ""), (epoch, version, release or ""))
        if order in _FLAGS.get(entry["flags"], ()):
            return True
    return False


def _pick(index, request, entry=None):
    """The newest package for a request ``name``, ``name-VERSION[-RELEASE]`` (globs allowed),
    or for a requires ``entry`` (its flags and version met)."""
    by_name, provides = index
    for package in by_name.get(request, []) + provides.get(request, []):
        if entry is None or _satisfies(package, entry):
            return package
    if entry is not None:
        return None
    for name, packages in by_name.items():
        if request.startswith(name + "-"):
            for package in packages:
                version, release = package["evr"][1:]
                label = f"{name}-{version}-{release}"
                if fnmatch.fnmatchcase(label, request) or fnmatch.fnmatchcase(label, request + "-*"):
                    return package
    return None


def resolve(packages, wanted, arch, *, streams=None, enabled=(), locks=(), source="primary.xml"):
    """The packages of one repository that install ``wanted`` on an ``arch`` node, with the
    dependencies the same repository provides (those it does not are the distribution's).

    ``wanted``: dnf requests as the driver concern gives them: ``name``,
    ``name-VERSION[-RELEASE]`` (globs allowed), ``@module:stream[/profile]``; ``enabled``: the
    module streams enabled first (``dnf module enable nvidia-driver:580-open``), as a
    ``@`` request enables its own; ``locks``: the ``dnf versionlock add`` specs added first (EL 10
    pins the driver's branch so). ``streams``: :func:`parse_modules` of the repository.
    """
    streams = streams or {}
    enabled = set(enabled) | {w[1:].partition("/")[0] for w in wanted if w.startswith("@")}
    index = _index(_locked(_visible(packages, arch, streams, enabled, source), locks, arch, source))
    chosen, queue = {}, []
    for request in wanted:
        names = _profile_packages(request, streams, arch, source) if request.startswith("@") else [request]
        for name in names:
            package = _pick(index, name)
            if package is None:
                where = f" with {', '.join(sorted(enabled))} enabled" if enabled else ""
                where += f" under the version lock {', '.join(locks)}" if locks else ""
                raise BundleError(f"{source}: no package for {arch} matches {name!r}{where}")
            queue.append(package)
    while queue:
        package = queue.pop(0)
        if package["name"] in chosen:
            continue
        chosen[package["name"]] = package
        for entry in package["requires"]:
            if _met(entry, list(chosen.values()) + queue):
                continue  # dnf keeps a provider it installs already (nvidia-kmod: the kmod asked for)
            found = _pick(index, entry["name"], entry)
            if found is not None and found["name"] not in chosen:
                queue.append(found)
    return sorted(chosen.values(), key=lambda p: p["name"])


def _met(entry, packages):
    """Whether one of ``packages`` meets a requires ``entry`` (by its name or a provide)."""
    return any((p["name"] == entry["name"] or any(e["name"] == entry["name"] for e in p["provides"]))
               and _satisfies(p, entry) for p in packages)


def downloads(repository, packages, dest):
    """``[{"url", "dest", "checksum", "package", "version"}]`` for offline_bundle_fetch."""
    base = repository.rstrip("/") + "/"
    return [{"url": base + p["href"], "dest": f"{dest}/{p['href'].rsplit('/', 1)[-1]}",
             "checksum": f"{p['checksum_type']}:{p['checksum']}", "package": p["name"],
             "version": "{}-{}".format(*p["evr"][1:])} for p in packages]
