# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The bundle's dnf repositories for EL nodes: from a repository's repomd.xml to its exact ``.rpm`` files.

For each ``format: rpm`` repository of the plan (NVIDIA's CUDA repository of an EL release, the
container toolkit's RPM repository), playbooks/offline_bundle.yml fetches ``repodata/repomd.xml``,
then what :func:`metadata_files` names (``primary`` and, where the repository has module streams,
``modules``, each checked against the checksum repomd.xml gives), then the ``.rpm`` files that
:func:`rpm_downloads` resolves from them (:mod:`.rpm_index`: each node's dnf request with its module
streams and version locks, the requires the same repository provides), each checked against
primary's checksum. The playbook then writes the folder's own metadata with ``createrepo_c`` and
adds the module streams back with ``modifyrepo_c --mdtype=modules`` (the two steps of a modular
repository: Fedora's "Hosting modules", https://docs.fedoraproject.org/en-US/modularity/hosting-modules/;
without the modules metadata dnf takes the streams' packages as non-modular), so that
``dnf module enable nvidia-driver:<branch>-open`` works from the bundle.

Errors are :class:`~.packages_index.BundleError`, naming the repository and the file or package.
Standard library only (and PyYAML for modules.yaml, as :mod:`.rpm_index`); Python 3.8+.
"""

import gzip
import hashlib
import posixpath

try:  # optional in a Python built without liblzma or libbz2
    import lzma
except ImportError:
    lzma = None
try:
    import bz2
except ImportError:
    bz2 = None

from ansible.module_utils.gpunode.bundle import rpm_index
from ansible.module_utils.gpunode.bundle.packages_index import BundleError
from ansible.module_utils.gpunode.host.files import read_bytes

#: the metadata the bundle reads, by its ``<data type>`` in repomd.xml
METADATA = ("primary", "modules")
#: repomd.xml's checksum types as hashlib (and offline_bundle_fetch's ``checksum``) names them
#: (createrepo's ``sha`` is SHA-1)
CHECKSUM_TYPES = {"sha": "sha1", "sha1": "sha1", "sha224": "sha224", "sha256": "sha256", "sha384": "sha384",
                  "sha512": "sha512", "md5": "md5"}
#: the compressions createrepo_c writes metadata in, by their magic bytes
_MAGIC = ((b"\x1f\x8b", "gzip", gzip), (b"\xfd7zXZ\x00", "xz", lzma), (b"BZh", "bzip2", bz2))
_ZSTD = b"\x28\xb5\x2f\xfd"
#: what a broken compressed file raises (gzip: OSError, EOFError; bz2: OSError, ValueError)
_BROKEN = (OSError, EOFError, ValueError) + ((lzma.LZMAError,) if lzma else ())


def _source(repository):
    return f"{repository['name']} ({repository['url']})"


def _algorithm(entry, what):
    algorithm = CHECKSUM_TYPES.get(str(entry.get("checksum_type") or "").lower())
    if algorithm is None or not entry.get("checksum"):
        raise BundleError(f"{what}: checksum type {entry.get('checksum_type')!r} is not one of "
                          f"{', '.join(sorted(CHECKSUM_TYPES))}")
    return algorithm


def repomd_path(folder):
    return posixpath.join(folder, "repomd.xml")


def metadata_path(folder, entry):
    """Where a metadata file repomd.xml names is kept: ``folder``, under its own name."""
    return posixpath.join(folder, posixpath.basename(entry["href"]))


def _repomd(repository, folder):
    path = repomd_path(folder)
    data = read_bytes(path, BundleError)
    if data is None:
        raise BundleError(f"{_source(repository)}: {path} is missing (repodata/repomd.xml not fetched)")
    return rpm_index.parse_repomd(data, f"{_source(repository)}: repodata/repomd.xml")


def metadata_files(repository, folder, found=None):
    """``[{"repository", "type", "url", "dest", "checksum"}]``: the metadata files the repository's
    repomd.xml (fetched to ``folder``/repomd.xml; ``found``: it parsed already) names that the bundle
    reads, with their checksums as ``algorithm:hex`` for offline_bundle_fetch; each kept in
    ``folder`` under its own name."""
    found = found or _repomd(repository, folder)
    files = []
    for kind in METADATA:
        if kind in found:
            entry = found[kind]
            algorithm = _algorithm(entry, f"{_source(repository)}: repomd.xml <data type={kind!r}>")
            files.append({"repository": repository["name"], "type": kind,
                          "url": repository["url"] + entry["href"],
                          "dest": metadata_path(folder, entry),
                          "checksum": f"{algorithm}:{entry['checksum']}"})
    return files


def decompress(data, source):
    """The bytes of a metadata file, uncompressed as its magic bytes say (gzip, xz, bzip2, none)."""
    for magic, name, library in _MAGIC:
        if data.startswith(magic):
            if library is None:
                raise BundleError(f"{source}: {name}-compressed metadata, and this Python lacks its module")
            try:
                return library.decompress(data)
            except _BROKEN as exc:
                raise BundleError(f"{source}: a broken {name} file: {exc}") from None
    if data.startswith(_ZSTD):
        raise BundleError(f"{source}: zstd-compressed metadata, which Python's standard library cannot "
                          "read before 3.14; mirror the repository with createrepo_c --compress-type=gz")
    return data


def _checked(repository, folder, entry, kind):
    """A metadata file fetched to ``folder``, checked against repomd.xml's checksum, uncompressed."""
    path = metadata_path(folder, entry)
    data = read_bytes(path, BundleError)
    source = f"{_source(repository)}: {path}"
    if data is None:
        raise BundleError(f"{source}: missing (the {kind} metadata repomd.xml names was not fetched)")
    algorithm = _algorithm(entry, source)
    if hashlib.new(algorithm, data).hexdigest() != entry["checksum"].lower():
        raise BundleError(f"{source}: its {algorithm} is not the {entry['checksum']} repodata/repomd.xml "
                          "gives (fetched from another state of the repository: run the bundle again)")
    return decompress(data, source), path


def rpm_downloads(repository, folder, dest, found=None):
    """``(rpms, modules)``: the ``.rpm`` files that install each of the repository's ``requests``
    (:func:`.plan._want_rpm`: a node's packages, module streams and version locks) with the
    requires the repository provides, as :func:`.rpm_index.downloads` lists them (into ``dest``, each
    with the ``repository`` name), and the path of the fetched modules metadata (``""`` where the
    repository has none). ``found``: repomd.xml parsed already (read from ``folder`` when not given)."""
    found = found or _repomd(repository, folder)
    source = _source(repository)
    primary_data, _path = _checked(repository, folder, found["primary"], "primary")
    packages = rpm_index.parse_primary(primary_data, f"{source}: primary")
    streams, modules = {}, ""
    if "modules" in found:
        modules_data, modules = _checked(repository, folder, found["modules"], "modules")
        try:
            text = modules_data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BundleError(f"{source}: {modules}: byte {exc.start}: not UTF-8 text") from None
        streams = rpm_index.parse_modules(text, f"{source}: {modules}")
    chosen = {}
    for request in repository.get("requests") or [{"packages": repository["packages"]}]:
        for package in rpm_index.resolve(packages, request["packages"], repository["arch"], streams=streams,
                                         enabled=request.get("module_streams") or (),
                                         locks=request.get("version_locks") or (), source=source):
            chosen[rpm_index.nevra(package)] = package
    picked = [chosen[key] for key in sorted(chosen)]
    rpms = rpm_index.downloads(repository["url"], picked, dest)
    for rpm, package in zip(rpms, picked):
        what = f"{source}: primary: package {rpm_index.nevra(package)}"
        rpm["checksum"] = f"{_algorithm(package, what)}:{package['checksum']}"
        rpm["repository"] = repository["name"]
    return rpms, modules


def gather(repositories, folders, dest, resolve=False):
    """``{"rpm_metadata", "rpms", "rpm_modules"}`` of the ``rpm`` repositories that ``folders`` (name ->
    the folder its repomd.xml was fetched to) names: the metadata to fetch and, with ``resolve``, the
    ``.rpm`` files (into ``dest``/rpms/<name>) and each repository's modules metadata, where it has one."""
    metadata, rpms, modules = [], [], {}
    for repository in repositories:
        folder = folders.get(repository["name"])
        if repository["format"] != "rpm" or not folder:
            continue
        repomd = _repomd(repository, folder)  # parsed once for both
        metadata.extend(metadata_files(repository, folder, repomd))
        if resolve:
            found, modules[repository["name"]] = rpm_downloads(repository, folder,
                                                               f"{dest}/rpms/{repository['name']}", repomd)
            rpms.extend(found)
    return {"rpm_metadata": metadata, "rpms": rpms, "rpm_modules": {k: v for k, v in modules.items() if v}}
