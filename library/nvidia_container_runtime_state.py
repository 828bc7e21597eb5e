#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module nvidia_container_runtime_state: the container runtime's whole state, a plan, the facts."""

DOCUMENTATION = r"""
---
module: nvidia_container_runtime_state
short_description: Read a node's NVIDIA container runtime state, plan its convergence, publish facts
description:
  - One call returns what the role C(nvidia_container_runtime) needs to decide, so a converged
    node costs one round trip. It changes nothing.
  - "It reads: the node's package manager (apt on Debian and Ubuntu, dnf on the RHEL family), the toolkit's
    repository key and source (a deb822 source, or a C(.repo) file compared with what
    C(ansible.builtin.yum_repository) would write), the packages installed and what the package index
    knows about them (C(apt-cache policy) or C(dnf repoquery), only when something may be installed),
    the container engines
    (Docker, containerd, RKE2's or k3s's containerd), daemon.json and containerd's files compared
    with what the writing modules would make of them (C(docker_daemon_config),
    C(containerd_runtime): the same code), whether the running daemons run what the files say
    (C(docker info), the main process's start time against the files), the kubelet's engine, and
    the CDI spec."
  - The plan says what differs and why (C(plan.reasons)); the facts describe the node as it will be
    once the plan is applied (in check mode, as far as it can be predicted).
  - RKE2 and k3s generate their containerd configuration at every start and detect the nvidia
    runtime themselves; the plan sets their C(default-runtime) option in a config.yaml.d drop-in and
    restarts them, never editing the generated file.
  - Values that land in a file or on the package manager's command line (O(repo_url), O(rpm_repo_url),
    O(keyring), O(rpm_keyring), O(version), O(binary),
    O(containerd_dropin), the paths) are checked against their format's syntax first; a bad one fails
    naming the option, the value and the rule, and nothing is read.
version_added: "1.1.0"
requirements:
  - tomli (python3-tomli) or toml (python3-toml) on Python 3.10 and older, to read containerd's
    configuration (Python 3.11+ has tomllib); without it the plan installs it first.
  - PyYAML (python3-yaml) on RKE2/k3s nodes, to read their config.yaml; without it the plan installs it first.
options:
  package:
    description: The package that brings the runtime.
    type: str
    choices: [nvidia-container-toolkit, nvidia-docker2]
    default: nvidia-container-toolkit
  version:
    description:
      - The version the package must be at (apt's C([epoch:]upstream[-revision]), rpm's C(version-release));
        empty for any. On dnf nodes a pinned toolkit pins C(nvidia-container-toolkit-base),
        C(libnvidia-container-tools) and C(libnvidia-container1) with it, as NVIDIA's install guide does.
    type: str
    default: ""
  manage_repo:
    description: Whether the repository key and source are part of the plan.
    type: bool
    default: true
  repo_url:
    description: The flat apt repository (suite "/"); C(scheme:...) without whitespace or quotes.
    type: str
    default: "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"
  repo_key_checksum:
    description: C(algorithm:hex) checksum of the key file; empty to trust any key file present.
    type: str
    default: ""
  keyring:
    description: Where the repository key is kept (C(Signed-By)).
    type: path
    default: /etc/apt/keyrings/nvidia-container-toolkit.asc
  sources_path:
    description: The deb822 source file of the repository.
    type: path
    default: /etc/apt/sources.list.d/nvidia-container-toolkit.sources
  rpm_repo_url:
    description:
      - On dnf nodes (RHEL, Rocky, AlmaLinux 9 and 10), the C(baseurl) of the toolkit's RPM repository
        (NVIDIA's C(nvidia-container-toolkit.repo), or a mirror); http://, https:// or file:///, dnf expands
        C($basearch).
    type: str
    default: "https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch"
  rpm_gpgcheck:
    description:
      - On dnf nodes, whether dnf checks each package's signature (C(gpgcheck)); the repository metadata's
        signature is always checked (C(repo_gpgcheck)), as NVIDIA's repository file does.
    type: bool
    default: true
  rpm_keyring:
    description: On dnf nodes, where the repository key is kept (the C(gpgkey) of the repository, as C(file://)).
    type: path
    default: /etc/pki/rpm-gpg/RPM-GPG-KEY-nvidia-container-toolkit
  rpm_repo_path:
    description:
      - On dnf nodes, the repository file (C(ansible.builtin.yum_repository) writes
        C(<reposdir>/<file>.repo)).
    type: path
    default: /etc/yum.repos.d/nvidia-container-toolkit.repo
  engines:
    description: C(auto) (the installed engines) or a list of C(docker), C(containerd).
    type: raw
    default: auto
  binary:
    description:
      - The nvidia runtime binary the engines call - an absolute path or a bare name, of letters, digits
        and C(. _ - + @ ~ /) only (it is written into daemon.json and config.toml).
    type: path
    default: /usr/bin/nvidia-container-runtime
  docker_default_runtime:
    description: Whether nvidia must be Docker's default runtime.
    type: bool
    default: true
  docker_daemon_json:
    description: Docker's configuration file.
    type: path
    default: /etc/docker/daemon.json
  containerd_default_runtime:
    description: Whether nvidia must be containerd's CRI default runtime (RKE2/k3s, their C(default-runtime)).
    type: bool
    default: true
  containerd_systemd_cgroup:
    description: SystemdCgroup of the nvidia runtime; null follows the node.
    type: bool
  containerd_config:
    description: containerd's config.toml.
    type: path
    default: /etc/containerd/config.toml
  containerd_dropin:
    description: The drop-in the role owns.
    type: path
    default: /etc/containerd/conf.d/99-nvidia.toml
  cdi:
    description: Whether the engines must have CDI on and the node a CDI spec for its GPUs.
    type: bool
    default: true
  driver_version:
    description: The loaded NVIDIA driver's version; read from C(/sys/module/nvidia/version) when empty.
    type: str
    default: ""
  image_build:
    description:
      - Image bake mode (docs/ROLES.md) - write the files and install the packages, restart nothing and
        generate no CDI spec (no driver runs while an image is built); the boot starts the engines.
    type: bool
    default: false
  driver_root:
    description:
      - The directory the loaded driver's files hang from (the C(driver_root) of the C(nvidia_driver) facts),
        C(/) for a driver in C(/usr), an image's prefix such as C(/usr/local/nvidia) otherwise.
      - Outside C(/) the CDI spec is made with C(nvidia-ctk cdi generate --driver-root=ROOT --dev-root=/),
        or C(nvidia-cdi-refresh.service) gets C(NVIDIA_CTK_DRIVER_ROOT) and C(NVIDIA_CTK_DEV_ROOT) in
        C(/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env) (toolkit 1.18+).
    type: path
    default: /
extends_documentation_fragment:
  - module_attributes.no_diff
  - module_attributes.facts
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Read the container runtime's state and plan
  nvidia_container_runtime_state:
    version: 1.17.8-1
    engines: auto
  register: runtime_state

- name: Converge only when something differs
  ansible.builtin.include_tasks: apply.yml
  when: runtime_state.plan.changes
"""

RETURN = r"""
changed:
  description: Always false; the module only reads.
  returned: always
  type: bool
plan:
  description: What differs and what the role does about it.
  returned: success
  type: dict
  contains:
    changes:
      description: Whether anything is to be done.
      type: bool
    reasons:
      description: Why, one line per difference.
      type: list
      elements: str
    warnings:
      description: Problems the user should know about (also emitted as warnings).
      type: list
      elements: str
    notes:
      description: Facts that explain the plan (no CDI on an old engine, no driver loaded yet...).
      type: list
      elements: str
    package_manager:
      description: C(apt) or C(dnf), the node's package manager; it picks the repository and install tasks.
      type: str
    keyring:
      description: Where the repository key goes (O(keyring) on apt, O(rpm_keyring) on dnf).
      type: str
    repo_key:
      description: Download the repository key.
      type: bool
    repo_source:
      description: Write the repository source (C(sources_text)).
      type: bool
    sources_text:
      description: The deb822 source file's content (apt; null on dnf).
      type: str
    rpm_repository:
      description: The arguments of C(ansible.builtin.yum_repository) for the toolkit's repository
        (dnf; null on apt).
      type: dict
    update_cache:
      description: Refresh the package index (a package to install is unknown to it, or the source is new).
      type: bool
    install:
      description: Install C(packages).
      type: bool
    packages:
      description: Package specs to install (C(name), C(name=version) on apt, C(name-version) on dnf).
      type: list
      elements: str
    packages_known:
      description: Whether the package index knows every package to install now (false on a fresh node).
      type: bool
    docker:
      description:
        - C(configure) (merge C(settings) into daemon.json), C(restart) (through systemd).
        - C(restart_needed) where the file changes on a host systemd does not run - C(restart needed, no
          service manager), said in C(summary); no restart is tried there. In an image build
          C(started at boot with these files (image build)).
      type: dict
    containerd:
      description:
        - C(configure) (call containerd_runtime with C(args)), C(restart) (through systemd), C(restart_needed)
          as for C(docker).
      type: dict
    rancher:
      description: RKE2/k3s - C(flavor), C(unit), C(dropin_path), C(dropin_text) (null to remove),
        C(generated), C(configure), C(restart).
      type: dict
    cdi:
      description: C(action) (null; C(generate) - C(nvidia-ctk cdi generate); C(refresh), toolkit 1.18+ where
        systemd runs - the same, then C(systemctl reset-failed) of nvidia-cdi-refresh.service and .path and
        a restart of the path unit, also when only those units are failed), C(path), C(args) (more
        arguments of C(nvidia-ctk cdi generate)) and C(environment) (the variables nvidia-cdi-refresh reads
        from its environment file), both empty for a driver in C(/), and C(checks) (verified_restart's,
        of the path unit).
      type: dict
    summary:
      description: One line for the run's output - the engines and their default runtimes as the plan
        leaves them.
      type: str
    readers_ready:
      description: Whether the node has the Python libraries the writing modules need (a TOML parser, PyYAML
        for RKE2/k3s); false until the role installed them.
      type: bool
ansible_facts:
  description: The facts the cluster add-ons read.
  returned: success
  type: dict
  contains:
    nvidia_container_runtime:
      description: C(toolkit_version), C(engines) (per engine C(nvidia_runtime), C(default_runtime),
        C(managed_by)), C(kubelet_engine), C(cdi) (C(enabled), C(spec_dirs)).
      type: dict
      sample:
        toolkit_version: 1.17.8
        engines:
          docker: {nvidia_runtime: true, default_runtime: nvidia, managed_by: docker}
          containerd: {nvidia_runtime: true, default_runtime: nvidia, managed_by: containerd}
        kubelet_engine: containerd
        cdi: {enabled: true, spec_dirs: [/etc/cdi, /var/run/cdi]}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.formats.values import ValueSyntaxError
from ansible.module_utils.gpunode.runtime.state_call import ARGUMENT_SPEC, ERRORS, read


def build_module():
    return AnsibleModule(argument_spec=dict(ARGUMENT_SPEC), supports_check_mode=True)


def main():
    module = build_module()
    try:
        result = read(module)
    except ValueSyntaxError as exc:
        module.fail_json(msg=f"{exc}; nothing was read or written")
    except ERRORS as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
