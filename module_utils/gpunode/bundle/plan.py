# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What an inventory needs carried to a site without internet (playbooks/offline_bundle.yml).

Runs on the machine with access (the playbook's localhost) and decides nothing itself:

- the driver: for each node it asks the driver concern what the nvidia_driver role
  installs there (``driver.install_packages.role_install``: the role's own request and
  plan, from the node's distribution, release, architecture, kernel, GPUs and
  ``nvidia_driver_*`` values) and lists it: the packages NVIDIA's CUDA repository serves
  (a flat apt repository whose ``Packages`` index :mod:`.packages_index` resolves to
  exact ``.deb`` files; on EL nodes a dnf repository whose metadata :mod:`.rpm_index`
  resolves to exact ``.rpm`` files), those the distribution's own archive serves (listed per
  release), the ``.run`` installer;
- the container toolkit's repository and packages (apt's, or the RPM repository on EL nodes);
- the add-on images (``addons.images``) of the add-on mode.

Errors are raised as :class:`BundleError`, naming the host or the index. Standard
library only; Python 3.8+.
"""

import re

from ansible.module_utils.gpunode.addons import dra_objects
from ansible.module_utils.gpunode.addons import images as addon_images
from ansible.module_utils.gpunode.bundle.packages_index import BundleError
from ansible.module_utils.gpunode.driver import fabric
from ansible.module_utils.gpunode.driver import packages as nvidia_packages
from ansible.module_utils.gpunode.driver.driver import DriverError
from ansible.module_utils.gpunode.driver.gpu import choose_branches
from ansible.module_utils.gpunode.driver.install_packages import role_install
from ansible.module_utils.gpunode.runtime.toolkit_source import RPM_REPO_URL, package_specs, pinned

TOOLKIT_PACKAGE = "nvidia-container-toolkit"
#: dpkg's architecture names ($(ARCH) in the toolkit's repository URL)
DEB_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
CUDA_REPOS = nvidia_packages.CUDA_REPO_URL.split("{distro}", maxsplit=1)[0]
#: the add-on images each mode runs (names of images.addon_images plus dra)
MODE_IMAGES = {
    "nvidia": ("nvidia_device_plugin",),
    "gpushare": ("gpushare_device_plugin", "gpushare_extender"),
    # hami_certgen: HAMi's certificate Jobs (its chart's kube-webhook-certgen), which make the
    # webhook's certificate when the add-ons are rendered to files (gpu_cluster_addons_output_dir);
    # carried in either case, since the bundle cannot know whether the cluster's add-ons will be
    # rendered or applied (applied, the certificate is made on the controller)
    "hami": ("hami", "hami_kube_scheduler", "hami_certgen"),
    "dra": ("dra", "nvidia_device_plugin"),
}
#: The nvidia_driver_* values (without the prefix) that decide what the role installs; the
#: playbook reads each from the inventory (its __bundle_host_vars).
ROLE_VALUES = ("method", "package_source", "branch", "version", "module_type", "fabricmanager",
               "check_branch", "install_prerequisites", "signing_key", "signing_cert", "runfile_url",
               "runfile_checksum")
#: What offline_bundle_nodes says of a node besides its role values: the node and its GPUs.
NODE_KEYS = ("host", "distribution", "distribution_version", "architecture", "kernel", "gpus",
             "nvswitches", "fabric", "secure_boot")
_GPU_ID = re.compile(r"^(?:(?:0x)?10de:)?(?:0x)?([0-9a-f]{4})$")


def node_input(host, facts, given):
    """One node: ``{"host", "os_info", "gpu", "values", "secure_boot"}`` from its facts
    (``ansible_facts``: distribution, architecture, kernel, ``nvidia_gpu``) and what is given for
    it (an entry of offline_bundle_nodes, or its ``nvidia_driver_*`` values); given wins."""
    unknown = sorted(set(given) - set(NODE_KEYS) - set(ROLE_VALUES))
    if unknown:
        raise BundleError(f"{host}: unknown key(s) {', '.join(unknown)}; a node takes "
                          f"{', '.join(NODE_KEYS + ROLE_VALUES)}")
    os_info = {
        "distribution": given.get("distribution") or facts.get("distribution"),
        "distribution_version": str(given.get("distribution_version") or facts.get("distribution_version")
                                    or ""),
        "architecture": given.get("architecture") or facts.get("architecture") or "x86_64",
        "kernel": given.get("kernel") or facts.get("kernel") or "",
    }
    if not os_info["distribution"] or not os_info["distribution_version"]:
        raise BundleError(f"{host}: no distribution facts; run the bundle with access to the node, or give "
                          "it in offline_bundle_nodes (distribution, distribution_version, architecture)")
    if given.get("gpus") is not None:
        gpu = given_gpu(host, given["gpus"], given.get("nvswitches"), os_info["architecture"],
                        given.get("fabric") or "auto")
    elif facts.get("nvidia_gpu"):
        gpu = facts["nvidia_gpu"]
    else:
        raise BundleError(f"{host}: its GPUs are not known, and the driver's branch and module type depend "
                          "on them: give gpus (PCI device IDs such as 1eb8) in offline_bundle_nodes, or run "
                          "the bundle with the node reachable (its nvidia_gpu facts)")
    values = {name: given.get(name) for name in ROLE_VALUES}
    if isinstance(values["fabricmanager"], bool):  # an earlier bundle's yes/no
        values["fabricmanager"] = "always" if values["fabricmanager"] else "never"
    return {"host": host, "os_info": os_info, "gpu": gpu, "values": values,
            "secure_boot": bool(given.get("secure_boot"))}


def given_gpu(host, device_ids, nvswitches, architecture, fabric_kind="auto"):
    """The ``nvidia_gpu`` facts the driver's request reads, for GPUs named by PCI device ID; the fabric
    as ``driver.fabric`` decides it from them (``fabric_kind``: the inventory's override)."""
    ids = []
    for item in device_ids if isinstance(device_ids, list) else [device_ids]:
        match = _GPU_ID.match(str(item).strip().lower())
        if not match:
            raise BundleError(f"{host}: gpus: {item!r} is not a PCI device ID (4 hex digits such as 1eb8, "
                              "or 10de:1eb8)")
        ids.append(match.group(1))
    if fabric_kind not in fabric.CHOICES:
        raise BundleError(f"{host}: fabric: {fabric_kind!r} is not one of {', '.join(fabric.CHOICES)}")
    supported, recommended, _warnings = choose_branches(ids, architecture)
    kind, warnings = fabric.kind_from_ids(ids, nvswitches, architecture, fabric_kind)
    return {"present": bool(ids), "devices": [{"device_id": i, "kind": "gpu"} for i in ids],
            "nvswitch_count": int(nvswitches or 0), "supported_branches": supported,
            "recommended_branch": recommended, "fabric": kind, "fabric_warnings": warnings}


def driver_needs(node, cuda_repo_base=""):
    """What the role installs on ``node`` (:func:`node_input`), as the driver concern answers:
    ``{"driver", "release", "repository" (url or None), "packages", "distro_packages", "runfile"
    (or None), "warnings"}``; ``driver``: the method, branch, version and module type it installs."""
    try:
        install = role_install(node["values"], node["gpu"], node["os_info"], node["secure_boot"])
    except (DriverError, nvidia_packages.PackageError) as exc:
        raise BundleError(f"{node['host']}: {exc}") from exc
    url = install["repository"]
    if url and cuda_repo_base:
        url = cuda_repo_base.rstrip("/") + "/" + url[len(CUDA_REPOS):]
    return {"driver": dict({k: install[k] for k in ("method", "branch", "version", "module_type")},
                           host=node["host"]),
            "release": install["release"], "repository": url, "packages": install["repository_packages"],
            "package_manager": install["package_manager"], "module_streams": install["module_streams"],
            "version_locks": install["version_locks"],
            "distro_packages": install["distribution_packages"], "runfile": install["runfile"],
            "warnings": [f"{node['host']}: {warning}"
                         for warning in node["gpu"].get("fabric_warnings", []) + install["warnings"]]}


def plan(nodes, toolkit_repo_url, *, toolkit_version="", mode="nvidia", addons=None,
         kubernetes_version="", cuda_repo_base="", toolkit_rpm_repo_url=RPM_REPO_URL):
    """The whole bundle: ``{"nodes", "repositories", "distro_packages", "runfiles", "images", "warnings"}``.

    ``nodes``: per node the driver the role installs (``host``, ``method``, ``branch``, ``version``,
    ``module_type``); ``repositories``: ``[{"name", "url", "index", "arch", "packages", "format"}]``
    (``deb``: flat apt repositories, ``index`` the Packages file's URL; ``rpm``: the dnf repositories
    of EL nodes, NVIDIA's CUDA repository and the toolkit's, ``index`` their repomd.xml, with
    ``module_streams``, ``version_locks`` and ``keys``); ``distro_packages``:
    release -> sorted apt or dnf requests (``name``, or ``name=VERSION-*`` for a pinned driver);
    ``addons``: the add-ons' settings, as :func:`bundle_images` takes them.
    """
    drivers, repositories, distro, runfiles, warnings = [], {}, {}, {}, []
    for node in nodes:
        needs = driver_needs(node, cuda_repo_base)
        drivers.append(needs["driver"])
        warnings.extend(needs["warnings"])
        architecture = node["os_info"]["architecture"]
        arch = DEB_ARCH.get(architecture, architecture)
        if needs["distro_packages"]:
            distro.setdefault(needs["release"], set()).update(needs["distro_packages"])
        if needs["runfile"]:
            runfiles[needs["runfile"]["name"]] = needs["runfile"]
        if needs["package_manager"] == "dnf" or \
                str(node["os_info"]["distribution"]).lower() in nvidia_packages.EL_DISTRIBUTIONS:
            _want_el(repositories, needs, architecture, toolkit_rpm_repo_url,
                     package_specs("dnf", {TOOLKIT_PACKAGE: toolkit_version or None}))
            continue
        if needs["repository"]:
            _want(repositories, "cuda-" + needs["release"] + "-" + arch, needs["repository"], arch,
                  needs["packages"])
        toolkit = toolkit_repo_url.replace("$(ARCH)", arch)
        _want(repositories, "toolkit-" + arch, toolkit.rstrip("/") + "/", arch,
              [f"{name} (= {version})" if version else name
               for name, version in pinned({TOOLKIT_PACKAGE: toolkit_version or None})])
    for name, runfile in runfiles.items():
        if not runfile["checksum"]:
            warnings.append(f"{name}: no nvidia_driver_runfile_checksum given; the bundle records the "
                            "checksum of what it downloaded")
    return {
        "nodes": drivers,
        "repositories": sorted(repositories.values(), key=lambda r: r["name"]),
        "distro_packages": {release: sorted(names) for release, names in sorted(distro.items())},
        "runfiles": [runfiles[name] for name in sorted(runfiles)],
        "images": bundle_images(mode, addons or {}, kubernetes_version, warnings),
        "warnings": warnings,
    }


def _want(repositories, name, url, arch, packages):
    entry = repositories.setdefault(name, {"name": name, "url": url, "index": url + "Packages", "arch": arch,
                                           "packages": [], "format": "deb"})
    entry["packages"] = sorted(set(entry["packages"]) | set(packages))


def _want_el(repositories, needs, architecture, toolkit_rpm_repo_url, toolkit_packages):
    """An EL node's RPM repositories (``format: rpm``, ``index`` the repository's repomd.xml):
    NVIDIA's CUDA repository of its release with the driver's dnf requests, the module streams
    the role enables first (EL 9) and the version locks it adds first (EL 10), the key the role
    finds under a mirror (``D42D0685.pub``); the container toolkit's RPM repository
    (``$basearch`` expanded) with the toolkit's requests (``runtime.toolkit_source``)."""
    if needs["repository"]:
        _want_rpm(repositories, f"cuda-{needs['release']}-{architecture}", needs["repository"], architecture,
                  needs["packages"], streams=needs["module_streams"], locks=needs["version_locks"],
                  keys=[needs["repository"] + nvidia_packages.CUDA_RPM_KEY_NAME])
    url = toolkit_rpm_repo_url.replace("$basearch", architecture).rstrip("/") + "/"
    _want_rpm(repositories, "toolkit-rpm-" + architecture, url, architecture, toolkit_packages)


def _want_rpm(repositories, name, url, arch, packages, *, streams=(), locks=(), keys=()):
    """One dnf repository; ``requests``: each node's own (its packages with the streams it enables
    and the locks it adds: two nodes on other branches are resolved apart, as each node's dnf
    sees only its own stream), ``packages``, ``module_streams`` and ``version_locks`` all of them."""
    entry = repositories.setdefault(name, {"name": name, "url": url, "arch": arch, "format": "rpm",
                                           "index": url + "repodata/repomd.xml", "packages": [],
                                           "module_streams": [], "version_locks": [], "keys": list(keys),
                                           "requests": []})
    request = {"packages": sorted(packages), "module_streams": sorted(streams),
               "version_locks": sorted(locks)}
    if request not in entry["requests"]:
        entry["requests"].append(request)
    for key, values in request.items():
        entry[key] = sorted(set(entry[key]) | set(values))


def bundle_images(mode, addons, kubernetes_version, warnings):
    """``[{"name", "image", "archive", "path"}]``: the add-on images of ``mode`` as pinned (never mirrored);
    ``path``: the image's place under a mirror prefix (``images.mirrored``).

    ``addons``: what ``gpu_cluster_addons_plan`` takes for them, from the same role variables:
    ``images`` (name -> ``{repository, tag}``), ``dra`` (its settings: ``image``, ``version``) and
    ``hami_scheduler`` (``deployment`` or ``extender``: the extender runs in the cluster's own scheduler).
    """
    found = addon_images.addon_images(addons.get("images") or {}, kubernetes_version or "0.0.0")
    dra = dra_objects.settings_of({key: value for key, value in (addons.get("dra") or {}).items()
                                   if key in ("image", "version")})
    found["dra"] = f"{dra['image']}:{dra['version']}"
    result = []
    extender = addons.get("hami_scheduler") == "extender"
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


__all__ = ["BundleError", "archive_name", "bundle_images", "driver_needs", "given_gpu", "node_input", "plan"]
