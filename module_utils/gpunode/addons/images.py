# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The add-ons' container images, and the one registry prefix that moves them all to a mirror.

``gpu_cluster_addons_image_registry`` empty: every image as pinned. Set (for
example ``registry.local:5000/mirror``): every image's registry host is
replaced by it, the path, tag and digest kept (:func:`mirrored`):

- ``nvcr.io/nvidia/k8s-device-plugin:v0.20.0`` ->
  ``registry.local:5000/mirror/nvidia/k8s-device-plugin:v0.20.0``;
- the first path component is a registry host when it holds a ``.`` or a
  ``:`` (a port) or is ``localhost``, as ``github.com/distribution/reference``
  decides; otherwise the image is on Docker Hub;
- Docker Hub images (``docker.io/...``, or no host) keep their Hub path, and
  official images get Docker Hub's implicit ``library/``: ``ubuntu:24.04`` ->
  ``PREFIX/library/ubuntu:24.04``, ``docker.io/projecthami/hami`` ->
  ``PREFIX/projecthami/hami``.

That is the layout ``skopeo copy docker://SRC docker://PREFIX/PATH`` (and the
offline bundle's README) fills: one path per image whatever registry it came
from. The prefix must itself name a registry host (``registry.local:5000``,
``mirror.example.com/gpu``): a bare ``mirror`` would be a Docker Hub user.

Standard library only; Python 3.8+.
"""

from ansible.module_utils.gpunode.addons import dra_objects
from ansible.module_utils.gpunode.formats import k8s_names
from ansible.module_utils.gpunode.formats.values import refuse, string

REGISTRY_VARIABLE = "gpu_cluster_addons_image_registry"
DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")
PREFIX_RULE = ("a registry host with an optional port and path, no tag and no trailing '/' "
               "(registry.local:5000, mirror.example.com/gpu): the host holds a '.' or a port, "
               "or is localhost")

#: The add-on images the role's templates write: name -> (image variable, tag variable), as the role
#: hands them (vars/main.yml __gpu_cluster_addons_images), so that a refusal names the variable;
#: a tag variable None means the tag is ``v<Kubernetes version>`` (the cluster's kube-scheduler).
#: The DRA driver's images come from its settings (gpu_cluster_addons_dra_image/_version).
IMAGES = {
    "nvidia_device_plugin": ("gpu_cluster_addons_nvidia_device_plugin_image",
                             "gpu_cluster_addons_nvidia_device_plugin_version"),
    "gpushare_device_plugin": ("gpu_cluster_addons_gpushare_device_plugin_image",
                               "gpu_cluster_addons_gpushare_device_plugin_version"),
    "gpushare_extender": ("gpu_cluster_addons_gpushare_extender_image",
                          "gpu_cluster_addons_gpushare_extender_version"),
    "hami": ("gpu_cluster_addons_hami_image", "gpu_cluster_addons_hami_version"),
    "hami_kube_scheduler": ("gpu_cluster_addons_hami_kube_scheduler_image", None),
    "hami_certgen": ("gpu_cluster_addons_hami_certgen_image", "gpu_cluster_addons_hami_certgen_version"),
}


def is_registry_host(component):
    """Whether an image's first path component names a registry (distribution/reference's rule)."""
    return "." in component or ":" in component or component == "localhost" or component.startswith("[")


def split_registry(reference):
    """``(registry host or None for Docker Hub, path with tag and digest)``; Hub paths get ``library/``."""
    first, slash, rest = reference.partition("/")
    if slash and is_registry_host(first):
        host, path = first, rest
    else:
        host, path = None, reference
    if (host is None or host in DOCKER_HUB) and "/" not in path:
        path = "library/" + path
    return (None if host in DOCKER_HUB else host), path


def registry_prefix(option, value):
    """The mirror prefix: refused unless it names a registry host and could start an image repository."""
    string(option, value, "an image registry prefix", PREFIX_RULE)
    if not k8s_names.is_valid(k8s_names.image_repository, value + "/x") \
            or not is_registry_host(value.split("/", 1)[0]):
        refuse(option, value, "an image registry prefix", PREFIX_RULE)
    return value


def mirrored(prefix, reference):
    """``reference`` with its registry host replaced by ``prefix``; unchanged when ``prefix`` is empty."""
    if not prefix:
        return reference
    return f"{prefix}/{split_registry(reference)[1]}"


def prefix_of(prefix):
    """The mirror prefix (option ``image_registry``), checked; ``""`` when none."""
    shown = f"{REGISTRY_VARIABLE} (image_registry)"
    return registry_prefix(shown, prefix) if prefix else ""


def _checked(prefix, shown, reference):
    shown = f"{shown} with {REGISTRY_VARIABLE} {prefix!r}" if prefix else shown
    return k8s_names.image_reference(shown, mirrored(prefix, reference))


def addon_images(images, kubernetes_version, prefix=""):
    """``{name: image reference}`` the role's templates write, mirrored under ``prefix``, each checked.

    ``images``: the option, ``{name: {"repository", "tag"}}`` (names of :data:`IMAGES`; one left out,
    or given as None, is not rendered). A repository and a tag are both checked against Kubernetes'
    syntax, named by the role variable and the option; ``hami_kube_scheduler``'s tag is always
    ``v<kubernetes_version>`` (the cluster's own kube-scheduler).
    """
    prefix = prefix_of(prefix)
    images = images or {}
    unknown = sorted(set(images) - set(IMAGES))
    if unknown:
        refuse("images", unknown[0], "an add-on image's name", ", ".join(IMAGES))
    result = {}
    for name, (image_variable, tag_variable) in IMAGES.items():
        entry = images.get(name)
        if entry is None:
            continue
        if not isinstance(entry, dict) or set(entry) - {"repository", "tag"}:
            refuse(f"images.{name}", entry, "an image", "a dict of repository and tag")
        repository = k8s_names.image_repository(f"{image_variable} (images.{name}.repository)",
                                                entry.get("repository"))
        if tag_variable:
            tag = k8s_names.image_tag(f"{tag_variable} (images.{name}.tag)", entry.get("tag"))
        else:
            tag = f"v{kubernetes_version}"
        result[name] = _checked(prefix, f"{image_variable} (images.{name})", f"{repository}:{tag}")
    return result


def dra_settings(prefix, given):
    """The DRA driver's settings (``dra_objects.settings_of``'s input), images mirrored and checked."""
    prefix = prefix_of(prefix)
    settings = dra_objects.settings_of(given)
    _checked(prefix, "gpu_cluster_addons_dra_image", f"{settings['image']}:{settings['version']}")
    result = dict(given or {})
    result["image"] = mirrored(prefix, settings["image"])
    result["example_image"] = _checked(prefix, "the DRA examples' image", settings["example_image"])
    return result


__all__ = ["IMAGES", "REGISTRY_VARIABLE", "addon_images", "dra_settings", "mirrored",
           "prefix_of", "registry_prefix", "split_registry"]
