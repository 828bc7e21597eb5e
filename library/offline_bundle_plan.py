#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module offline_bundle_plan: what an inventory needs carried to a site without internet."""

DOCUMENTATION = r"""
---
module: offline_bundle_plan
short_description: Decide what an offline bundle holds (packages, runfiles, images)
description:
  - Runs where playbooks/offline_bundle.yml runs (the machine with access), and decides nothing itself. For
    each GPU node it asks the driver concern what the nvidia_driver role installs there (the role's own
    request and plan, from the node's distribution, release, architecture, kernel, GPUs and
    C(nvidia_driver_*) values, on a node that has no driver yet) and lists it - the packages NVIDIA's
    CUDA repository serves, those the distribution's own archive serves, the C(.run) installer - with
    the container toolkit's repository and package and the add-on images of the add-on mode.
  - Given the downloaded C(Packages) indexes (O(indexes)), it also picks the exact C(.deb) files, with
    the dependencies found in the same index and the SHA256 the index gives for each.
  - For EL nodes (dnf), given the folders where each RPM repository's C(repodata/repomd.xml) was
    downloaded (O(rpm_repodata)), it names the metadata to fetch (primary, modules) with the checksums
    repomd.xml gives; with O(rpm_resolve), from that metadata, the exact C(.rpm) files each node's dnf
    request installs (its module streams enabled, its version locks added), with the requires the same
    repository provides and the checksum primary gives for each.
  - Changes nothing; the playbook downloads.
options:
  nodes:
    description:
      - The GPU nodes as the operator gives them (offline_bundle_nodes), each with C(host),
        C(distribution), C(distribution_version), C(architecture), C(gpus) (the GPUs' PCI device IDs,
        such as C(1eb8)), and optionally C(kernel) (C(uname -r); needed by C(ubuntu-signed) and for the
        kernel headers), C(nvswitches) (a count), C(fabric) (C(auto), C(none), C(nvswitch), C(nvlink5),
        C(mnnvl), as nvidia_driver_fabric; C(auto) takes HGX B200/B300 GPUs as nvlink5, with a warning,
        since the bundle cannot read the node's management port), C(secure_boot) (the role then takes
        Ubuntu's signed modules where no signing key is set), and the nvidia_driver values that decide
        what the role installs, named without the C(nvidia_driver_) prefix - C(method), C(package_source),
        C(branch), C(version), C(module_type), C(fabricmanager), C(check_branch), C(install_prerequisites),
        C(signing_key), C(signing_cert), C(runfile_url), C(runfile_checksum). A value left out is the
        role's default. They win over O(host_facts) for the same host.
    type: list
    elements: dict
    default: []
  host_facts:
    description: Host to its C(ansible_facts) (distribution, architecture, kernel, nvidia_gpu), for hosts
      not in O(nodes).
    type: dict
    default: {}
  host_vars:
    description:
      - Each nvidia_driver value of O(nodes) (the names without the prefix) as a list of the values of the
        hosts of O(host_facts), in the order of its keys as given; empty values mean the role's default.
    type: dict
    default: {}
  toolkit_repo_url:
    description: The container toolkit's repository (C($(ARCH)) is the Debian architecture).
    type: str
    default: "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"
  toolkit_rpm_repo_url:
    description: The container toolkit's RPM repository for EL nodes (C($basearch) - the node's architecture).
    type: str
    default: "https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch"
  toolkit_version:
    description: The toolkit package's version (empty - the newest in the index).
    type: str
    default: ""
  cuda_repo_base:
    description: Where NVIDIA's CUDA repositories are read from (empty - NVIDIA's server).
    type: str
    default: ""
  mode:
    description: The add-on mode whose images go into the bundle; C(none) - no images.
    type: str
    choices: [nvidia, gpushare, hami, dra, none]
    default: nvidia
  images:
    description:
      - The add-on images by name, each a dict of C(repository) and C(tag), as C(gpu_cluster_addons_plan)'s
        option of that name takes them (C(playbooks/offline_bundle.yml) hands the role's own
        C(__gpu_cluster_addons_images)); carried as pinned, without the registry prefix of a mirror.
    type: dict
    default: {}
  dra:
    description:
      - The DRA driver's settings, as C(gpu_cluster_addons_plan)'s option of that name takes them; C(image)
        and C(version) are read (empty - the role's defaults).
    type: dict
    default: {}
  hami_scheduler:
    description:
      - Where HAMi's scheduler extender runs (C(gpu_cluster_addons_hami_scheduler)) - V(extender) in the
        cluster's own kube-scheduler, so that HAMi's kube-scheduler image is not carried.
    type: str
    choices: [deployment, extender]
    default: deployment
  kubernetes_version:
    description: The cluster's Kubernetes version (the tag of HAMi's kube-scheduler image).
    type: str
    default: ""
  dest:
    description: The bundle's directory (paths in the result are under it).
    type: path
    required: true
  indexes:
    description: Repository name (the C(name) of an entry of RV(repositories)) to the path of its downloaded
      C(Packages) index.
    type: dict
    default: {}
  rpm_repodata:
    description: Repository name (the C(name) of an entry of RV(repositories) whose C(format) is C(rpm)) to
      the folder where its C(repodata/repomd.xml) was downloaded (as C(repomd.xml)), and where the metadata
      files of RV(rpm_metadata) are downloaded.
    type: dict
    default: {}
  rpm_resolve:
    description: Read the metadata files of RV(rpm_metadata) (downloaded, each checked again against
      repomd.xml) and return RV(rpms); without it only RV(rpm_metadata) is returned.
    type: bool
    default: false
extends_documentation_fragment:
  - module_attributes.no_diff
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: What the bundle holds
  offline_bundle_plan:
    nodes:
      - {host: gpu-01, distribution: Ubuntu, distribution_version: "24.04", architecture: x86_64,
         kernel: 6.8.0-60-generic, gpus: [1eb8], package_source: cuda, branch: "580"}
    dest: /srv/gpunode-bundle
  register: bundle
"""

RETURN = r"""
nodes:
  description: Per node, the driver the nvidia_driver role installs there - host, method (after the role's
    switch to C(ubuntu-signed) under Secure Boot), branch, version (null - the newest of the branch),
    module_type. All but host are null for a node without an NVIDIA GPU (the role installs nothing).
  returned: always
  type: list
  elements: dict
repositories:
  description: The repositories to read - name, url, index (the C(Packages) file's or C(repomd.xml)'s URL),
    arch, packages, format (C(deb) - a flat apt repository; C(rpm) - a dnf repository, with module_streams,
    version_locks, keys - the key files to carry, and requests - each node's packages, streams and locks).
  returned: always
  type: list
  elements: dict
distro_packages:
  description: Per release (C(ubuntu-24.04)), the packages that come from the distribution's archive, as the
    role's apt requests (C(name), or C(name=VERSION-*) for a pinned driver).
  returned: always
  type: dict
runfiles:
  description: The C(.run) installers - name, url, checksum (empty when not given).
  returned: always
  type: list
  elements: dict
images:
  description: The add-on images as pinned - name, image, archive (the OCI archive's path in the bundle),
    path (its place under gpu_cluster_addons_image_registry).
  returned: always
  type: list
  elements: dict
debs:
  description: The C(.deb) files to download (package, version, url, dest, checksum), from O(indexes).
  returned: always
  type: list
  elements: dict
external:
  description: Per repository, the dependencies its index lacks (the distribution's archive has them).
  returned: always
  type: dict
rpm_metadata:
  description: The metadata files of each RPM repository of O(rpm_repodata) to download - repository, type
    (C(primary), C(modules)), url, dest, checksum (C(algorithm:hex), as repomd.xml gives it).
  returned: always
  type: list
  elements: dict
rpms:
  description: With O(rpm_resolve), the C(.rpm) files to download (package, version, url, dest, checksum).
  returned: always
  type: list
  elements: dict
rpm_modules:
  description: With O(rpm_resolve), per RPM repository with module streams, the downloaded modules metadata
    (for C(modifyrepo_c --mdtype=modules)).
  returned: always
  type: dict
warnings_found:
  description: What the bundle leaves out or cannot verify.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.bundle import packages_index, rpm_repos
from ansible.module_utils.gpunode.bundle import plan as offline_bundle
from ansible.module_utils.gpunode.formats.values import ValueSyntaxError
from ansible.module_utils.gpunode.host.files import read_text

ARGUMENT_SPEC = {
    "nodes": {"type": "list", "elements": "dict", "default": []},
    "host_facts": {"type": "dict", "default": {}},
    "host_vars": {"type": "dict", "default": {}},
    "toolkit_repo_url": {"type": "str", "default": "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"},
    "toolkit_rpm_repo_url": {"type": "str", "default": "https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch"},
    "toolkit_version": {"type": "str", "default": ""},
    "cuda_repo_base": {"type": "str", "default": ""},
    "mode": {"type": "str", "choices": ["nvidia", "gpushare", "hami", "dra", "none"], "default": "nvidia"},
    "images": {"type": "dict", "default": {}},
    "dra": {"type": "dict", "default": {}},
    "hami_scheduler": {"type": "str", "choices": ["deployment", "extender"], "default": "deployment"},
    "kubernetes_version": {"type": "str", "default": ""},
    "dest": {"type": "path", "required": True},
    "indexes": {"type": "dict", "default": {}},
    "rpm_repodata": {"type": "dict", "default": {}},
    "rpm_resolve": {"type": "bool", "default": False},
}


def build_module():
    return AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


def nodes_of(params):
    """The operator's nodes first, then every host with facts that the operator did not name."""
    given = {str(n.get("host") or ""): n for n in params["nodes"]}
    if "" in given:
        raise offline_bundle.BundleError("offline_bundle_nodes: every node needs a host name")
    records = [offline_bundle.node_input(host, {}, node) for host, node in given.items()]
    for index, host in enumerate(params["host_facts"]):
        if host not in given:
            driver = {name: values[index] for name, values in params["host_vars"].items()
                      if isinstance(values, list) and index < len(values) and values[index] != ""}
            records.append(offline_bundle.node_input(host, params["host_facts"][host] or {}, driver))
    if not records:
        raise offline_bundle.BundleError("no GPU nodes: give offline_bundle_nodes, or run the bundle with "
                                         "the inventory's gpu_nodes reachable")
    return records


def run(module):
    params = module.params
    result = offline_bundle.plan(
        nodes_of(params), params["toolkit_repo_url"], toolkit_version=params["toolkit_version"],
        mode=params["mode"],
        addons={name: params[name] for name in ("images", "dra", "hami_scheduler")},
        kubernetes_version=params["kubernetes_version"], cuda_repo_base=params["cuda_repo_base"],
        toolkit_rpm_repo_url=params["toolkit_rpm_repo_url"])
    debs, external = [], {}
    for repository in result["repositories"]:
        path = params["indexes"].get(repository["name"])
        if path:
            text = read_text(path, packages_index.BundleError)
            if text is None:
                raise offline_bundle.BundleError(f"{path}: the index of {repository['name']} is missing")
            found, external[repository["name"]] = packages_index.downloads(repository, text, params["dest"])
            debs.extend(found)
    return dict(result, changed=False, debs=debs, external=external, warnings_found=result.pop("warnings"),
                **rpm_repos.gather(result["repositories"], params["rpm_repodata"], params["dest"],
                                   resolve=params["rpm_resolve"]))


def main():
    module = build_module()
    try:
        result = run(module)
    except (offline_bundle.BundleError, ValueSyntaxError) as exc:
        module.fail_json(msg=str(exc))
    for warning in result["warnings_found"]:
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
