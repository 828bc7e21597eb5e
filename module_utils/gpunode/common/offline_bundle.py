# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What an inventory needs carried to a site without internet (playbooks/offline_bundle.yml).

Runs on the machine with access (the playbook's localhost). From each node's
distribution, release, architecture and driver choice it decides:

- the flat apt repositories to read (NVIDIA's CUDA repository for
  ``nvidia_driver_package_source: cuda``, the container toolkit's repository)
  and the packages wanted from each; :func:`resolve` reads a repository's
  ``Packages`` index and picks the exact ``.deb`` files, their dependencies
  found in the same index included, each with the index's SHA256;
- the packages that come from the distribution's own archive (the ``distro``
  source, ``ubuntu-signed``, kernel headers): listed per release, with the
  ``apt-get download`` line that fetches them on a host of that release -
  an offline site normally mirrors its distribution already;
- the ``.run`` installers (URL and checksum);
- the add-on images (``images.addon_images`` of the add-on mode).

Package names come from ``nvidia_packages``, image names from
``gpunode.addons.images``: one implementation of each. Errors are raised as
:class:`BundleError`, naming the host or the index. Standard library only;
Python 3.8+.
"""

import re

from ansible.module_utils.gpunode.addons import dra_objects
from ansible.module_utils.gpunode.addons import images as addon_images
from ansible.module_utils.gpunode.driver import packages as nvidia_packages
from ansible.module_utils.gpunode.driver import ubuntu_signed
from ansible.module_utils.gpunode.driver.driver import RUNFILE_URL

TOOLKIT_PACKAGE = "nvidia-container-toolkit"
#: dpkg's architecture names ($(ARCH) in the toolkit's repository URL)
DEB_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
CUDA_REPOS = nvidia_packages.CUDA_REPO_URL.split("{distro}", maxsplit=1)[0]
#: the add-on images each mode runs (names of images.addon_images plus dra)
MODE_IMAGES = {
    "nvidia": ("nvidia_device_plugin",),
    "gpushare": ("gpushare_device_plugin", "gpushare_extender"),
    "hami": ("hami", "hami_kube_scheduler"),
    "dra": ("dra", "nvidia_device_plugin"),
}


class BundleError(Exception):
    pass


def node_record(host, facts, given):
    """One node from its facts (``ansible_facts``) and driver variables; ``given`` wins over the facts."""
    driver = facts.get("nvidia_driver") or {}
    gpu = facts.get("nvidia_gpu") or {}
    record = {
        "host": host,
        "distribution": given.get("distribution") or facts.get("distribution"),
        "distribution_version": str(given.get("distribution_version") or facts.get("distribution_version")
                                    or ""),
        "architecture": given.get("architecture") or facts.get("architecture") or "x86_64",
        "method": given.get("method") or driver.get("method") or "packages",
        "package_source": given.get("package_source") or "distro",
        "version": given.get("version") or "",
        "branch": str(given.get("branch") or driver.get("branch") or gpu.get("recommended_branch") or ""),
        "module_type": given.get("module_type") or driver.get("module_type") or "proprietary",
        "fabricmanager": bool(given.get("fabricmanager") or gpu.get("nvswitch_count")),
        "runfile_url": given.get("runfile_url") or "",
        "runfile_checksum": given.get("runfile_checksum") or "",
        "kernel": given.get("kernel") or facts.get("kernel") or "",
    }
    if record["version"] and not record["branch"]:
        record["branch"] = record["version"].split(".")[0]
    if not record["distribution"] or not record["distribution_version"]:
        raise BundleError(f"{host}: no distribution facts; run the bundle with access to the node, or give "
                          "it in offline_bundle_nodes (distribution, distribution_version, architecture)")
    if not record["branch"]:
        raise BundleError(f"{host}: no driver branch (nvidia_driver_branch or _version, or the GPUs' "
                          "recommended branch from the facts)")
    return record


def driver_needs(node, cuda_repo_base=""):
    """``{"release", "repository" (url or None), "packages", "distro_packages", "runfile" (or None)}``."""
    family, key, _warning = nvidia_packages.release_of(node["distribution"], node["distribution_version"])
    needs = {"release": f"{family}-{key}", "repository": None, "packages": [], "distro_packages": [],
             "runfile": None}
    if node["method"] == "runfile":
        version, arch = node["version"], node["architecture"]
        if not version:
            raise BundleError(f"{node['host']}: the runfile method needs nvidia_driver_version")
        needs["runfile"] = {
            "name": f"NVIDIA-Linux-{arch}-{version}.run",
            "url": node["runfile_url"] or RUNFILE_URL.format(version=version, arch=arch),
            "checksum": node["runfile_checksum"],
        }
        return needs
    source = "distro" if node["method"] == "ubuntu-signed" else node["package_source"]
    if node["method"] == "ubuntu-signed":
        name = ubuntu_signed.series(node["branch"], node["module_type"])
        kernel = node.get("kernel") or ""
        modules = (ubuntu_signed.modules_package(name, kernel) if kernel
                   else ubuntu_signed.flavour_package(name, "generic"))
        needs["distro_packages"] = [*ubuntu_signed.userspace_packages(node["branch"], node["module_type"]),
                                    modules]
        return needs
    version = node["version"] or None
    packages = nvidia_packages.driver_packages(family, key, source, node["branch"],
                                               module_type=node["module_type"], version=version)
    wanted = ([packages["pin"]] if packages["pin"] else []) + list(packages["install"])
    if node["fabricmanager"]:
        wanted.append(nvidia_packages.fabricmanager_package(family, source, node["branch"]))
    if source == "cuda":
        url = nvidia_packages.cuda_repository(family, key, node["architecture"])[0]
        if cuda_repo_base:
            url = cuda_repo_base.rstrip("/") + "/" + url[len(CUDA_REPOS):]
        needs["repository"] = url
        needs["packages"] = wanted
    else:
        needs["distro_packages"] = wanted
    return needs


def plan(nodes, toolkit_repo_url, *, toolkit_version="", mode="nvidia", addon_values=None,
         kubernetes_version="", cuda_repo_base=""):
    """The whole bundle: ``{"repositories", "distro_packages", "runfiles", "images", "warnings"}``.

    ``repositories``: ``[{"name", "url", "index", "arch", "packages"}]`` (flat repositories;
    ``index`` the Packages file's URL); ``distro_packages``: release -> sorted names.
    """
    repositories, distro, runfiles, warnings = {}, {}, {}, []
    for node in nodes:
        try:
            needs = driver_needs(node, cuda_repo_base)
        except nvidia_packages.PackageError as exc:
            raise BundleError(f"{node['host']}: {exc}") from exc
        arch = DEB_ARCH.get(node["architecture"], node["architecture"])
        if needs["repository"]:
            _want(repositories, "cuda-" + needs["release"] + "-" + arch, needs["repository"], arch,
                  needs["packages"])
        if needs["distro_packages"]:
            distro.setdefault(needs["release"], set()).update(needs["distro_packages"])
        if needs["runfile"]:
            runfiles[needs["runfile"]["name"]] = needs["runfile"]
        toolkit = toolkit_repo_url.replace("$(ARCH)", arch)
        _want(repositories, "toolkit-" + arch, toolkit.rstrip("/") + "/", arch,
              [TOOLKIT_PACKAGE + (f" (= {toolkit_version})" if toolkit_version else "")])
    for name, runfile in runfiles.items():
        if not runfile["checksum"]:
            warnings.append(f"{name}: no nvidia_driver_runfile_checksum given; the bundle records the "
                            "checksum of what it downloaded")
    return {
        "repositories": sorted(repositories.values(), key=lambda r: r["name"]),
        "distro_packages": {release: sorted(names) for release, names in sorted(distro.items())},
        "runfiles": [runfiles[name] for name in sorted(runfiles)],
        "images": bundle_images(mode, addon_values or {}, kubernetes_version, warnings),
        "warnings": warnings,
    }


def _want(repositories, name, url, arch, packages):
    entry = repositories.setdefault(name, {"name": name, "url": url, "index": url + "Packages", "arch": arch,
                                           "packages": []})
    entry["packages"] = sorted(set(entry["packages"]) | set(packages))


def bundle_images(mode, addon_values, kubernetes_version, warnings):
    """``[{"name", "image", "archive", "path"}]``: the add-on images of ``mode`` as pinned (never mirrored);
    ``path``: the image's place under a mirror prefix (``images.mirrored``)."""
    values = dict(addon_values)
    values.pop(addon_images.REGISTRY_VARIABLE, None)
    found = addon_images.addon_images(values, kubernetes_version or "0.0.0")
    dra = dra_objects.settings_of({"image": values.get("gpu_cluster_addons_dra_image"),
                                   "version": values.get("gpu_cluster_addons_dra_version")})
    found["dra"] = f"{dra['image']}:{dra['version']}"
    result = []
    extender = values.get("gpu_cluster_addons_hami_scheduler") == "extender"
    for name in MODE_IMAGES.get(mode, ()):
        if name == "hami_kube_scheduler" and (extender or not kubernetes_version):
            if not extender:
                warnings.append("HAMi's kube-scheduler image needs gpu_cluster_addons_kubernetes_version "
                                "(its tag is the cluster's version): left out")
            continue
        if name in found:
            result.append({"name": name, "image": found[name], "archive": archive_name(found[name]),
                           "path": addon_images.split_registry(found[name])[1]})
    return result


def archive_name(image):
    """The OCI archive's file name for an image: its path and tag, '/' and ':' made '_'."""
    path = addon_images.split_registry(image)[1].split("@")[0]
    return "images/" + re.sub(r"[/:]", "_", path) + ".oci.tar"


# ----------------------------------------------------------------------------- Packages indexes

_DEPENDENCY = re.compile(r"^\s*(?P<name>[a-z0-9][a-z0-9+.-]+)(?::[a-z0-9]+)?\s*"
                         r"(?:\((?P<op>[<>=]+)\s*(?P<version>[^)\s]+)\s*\))?")


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
    """``(debs, external)``: the stanzas for ``wanted`` (``name`` or ``name (= version)``) and their
    dependencies found in the index; ``external`` the dependencies it lacks (the distribution's).

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
    """``[{"url", "dest", "checksum"}]`` of the .deb files of one repository, and the names it lacks."""
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
        result.append({"package": stanza["Package"], "version": stanza["Version"],
                       "url": repository["url"] + relative,
                       "dest": f"{dest}/debs/{repository['name']}/{name}",
                       "checksum": "sha256:" + stanza["SHA256"]})
    return result, external


__all__ = ["BundleError", "archive_name", "bundle_images", "compare_versions", "downloads", "driver_needs",
           "node_record", "parse_packages", "plan", "resolve"]
