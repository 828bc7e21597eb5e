#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module gpunode_node_state: every concern of a GPU node read in one call."""

DOCUMENTATION = r"""
---
module: gpunode_node_state
short_description: Read the driver, container runtime and kubelet of a GPU node in one call
description:
  - Reads each concern given with the same code and the same arguments as its own state module
    (C(nvidia_driver_state), C(nvidia_container_runtime_state), C(kubelet_feature_gates) in check
    mode) and says which ones have nothing to change, so that C(site.yml) recognizes a converged node
    in one round trip; its plays then leave that host out (C(playbooks/node_state.yml) groups the hosts
    by their converged concerns) instead of reading it again.
  - A concern counts as converged only when every concern before it (driver, container runtime,
    kubelet, in that order) is converged too - a change to one may change what the next one needs.
  - A concern whose read fails (a bad value, a missing library) is not converged - its role reads it
    again and fails there with its own module's message.
  - The first concern with changes planned (every concern before it converged) is handed over - RV(plans)
    holds what its state module returns for the same arguments, so that its role in the same run carries
    out that plan without reading the node again. The kubelet's plan also carries the files to write
    (C(edits)), which C(gpunode_planned_files) writes if each file still holds what this read found.
  - Says whether carrying out the plans disrupts GPU work on the node (RV(disruption) - a driver install
    or reload, a reboot, a container engine or kubelet restart, or a concern not read, which counts as
    unknown; never a first install on a host without a loaded NVIDIA module), which processes hold a GPU
    device (C(/dev/nvidia[0-9]+), read from C(/proc) only when a change is disruptive) and, when both hold
    and O(allow_in_use) and O(drain) are false, the message that refuses the node (RV(refusal)).
  - When the change is disruptive, also whether the node serves (registered in a cluster - the kubelet's
    kubeconfig is there, as C(gpu_node_condition) finds it - or running GPU work) and the kubelet's node
    name - such a node goes through the rolling path (RV(disruption.rollout)).
  - Publishes the facts of the converged concerns (C(nvidia_gpu), C(nvidia_driver),
    C(nvidia_container_runtime), C(kubelet_gpu)) and of the plan handed over, and shows their warnings;
    the roles that go on publish their own. Changes nothing.
version_added: "1.0.0"
requirements:
  - What each concern's module needs (PyYAML for a YAML kubelet configuration, tomli on Python 3.10 and
    older for containerd's); a concern whose library is missing is simply not converged.
options:
  driver:
    description: The arguments of C(nvidia_driver_state); omitted, the driver is not read.
    type: dict
  container_runtime:
    description:
      - The arguments of C(nvidia_container_runtime_state); omitted, the container runtime is not read.
      - An empty C(driver_version) is the loaded driver the driver read found.
    type: dict
  kubelet:
    description: The arguments of C(kubelet_feature_gates); omitted, the kubelet is not read.
    type: dict
  validated:
    description:
      - The last GPU validation (the gpu_validate role's record) - C(marker) (default
        V(/var/lib/gpunode/validated.json)), C(driver_version) (empty - the loaded driver the driver
        read found) and C(boot_unit) (the boot unit's file, empty when none is wanted). Converged when
        that validation passed with that driver and, where systemd runs, the wanted boot unit is
        installed; omitted, it is not read.
    type: dict
  gpu_services:
    description:
      - The services gpunode stops itself around a driver change (the driver role's
        C(nvidia_driver_gpu_services), a name without a suffix meaning C(NAME.service)) - their processes
        are no GPU work in RV(disruption.gpu_work).
    type: list
    elements: str
    default: []
  allow_in_use:
    description:
      - Carry out a disruptive change on a node with GPU work (C(gpunode_rollout_allow_in_use)) - RV(refusal)
        is then null; RV(disruption) is reported all the same.
    type: bool
    default: false
  drain:
    description:
      - The rolling path drains the node before its change (C(gpunode_rollout_drain)) - a node with GPU work
        is then not refused here (RV(refusal) is null); the rolling path reads the node again after the
        drain, with O(drain) false, and refuses what still runs.
    type: bool
    default: false
extends_documentation_fragment:
  - module_attributes.no_diff
  - module_attributes.facts
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Read every concern of the node in one call
  gpunode_node_state:
    driver: {branch: "580"}
    container_runtime: {engines: [containerd]}
    kubelet: {gates: {DynamicResourceAllocation: true}, gpu_node: true}
  register: gpunode_node_state

- name: The driver role ends here when nothing is to change
  ansible.builtin.meta: end_role
  when: gpunode_node_state.converged.driver | default(false)
"""

RETURN = r"""
converged:
  description: Per concern read, whether it and every concern before it have nothing to change.
  type: dict
  returned: always
  contains:
    driver:
      description: The driver (C(nvidia_driver_state)'s C(plan.converged)).
      type: bool
      returned: when O(driver) was given
    container_runtime:
      description: The container runtime, and the driver before it.
      type: bool
      returned: when O(container_runtime) was given
    kubelet:
      description: The kubelet (no file to write, no restart owed), and the concerns before it.
      type: bool
      returned: when O(kubelet) was given
    validated:
      description: The last GPU validation passed with the loaded driver, and every concern before it.
      type: bool
      returned: when O(validated) was given
  sample: {driver: true, container_runtime: true, kubelet: false}
reasons:
  description: Per concern not converged, why - changes planned, a concern before it changes, or its read
    failed.
  type: dict
  returned: always
  sample: {kubelet: changes planned}
plans:
  description: The reads handed over to the roles, by concern.
  type: dict
  returned: always
  contains:
    driver:
      description: When the driver has changes planned, the result of C(nvidia_driver_state) for O(driver) -
        C(request), C(plan), C(before), C(state), C(ansible_facts) (its RETURN).
      type: dict
      returned: when O(driver) was given, its read succeeded and it has changes planned
    container_runtime:
      description: When the driver is converged and the container runtime has changes planned, the result of
        C(nvidia_container_runtime_state) for O(container_runtime) - C(plan), C(ansible_facts) (its RETURN).
      type: dict
      returned: >-
        when O(container_runtime) was given, the driver is converged, and the runtime has changes planned
    kubelet:
      description:
        - When the driver and the container runtime are converged and the kubelet has changes planned (files
          to write, or a restart owed), the result of C(kubelet_feature_gates) in check mode for O(kubelet)
          (its RETURN, C(restore) included, no C(diff)).
        - C(edits) - the files to write, each C(path), C(before) (the text read, null when the file does not
          exist) and C(after) (the text to write, null to remove it), as the C(files) option of
          C(gpunode_planned_files) takes them.
      type: dict
      returned: >-
        when O(kubelet) was given, the concerns given before it are converged, and the kubelet has changes
        planned
  sample: {}
disruption:
  description: Whether carrying out the plans read disrupts GPU work on the node.
  type: dict
  returned: always
  contains:
    disruptive:
      description: Some plan installs, reloads or reboots the driver, or restarts the container engine or
        the kubelet, or a concern that may change was not read (unknown). False on a host without a loaded
        NVIDIA module (a first install).
      type: bool
      returned: always
    reasons:
      description: >-
        Why, one line each (C(driver install 535.129.03 -> 570.133.20), C(driver reload),
        C(reboot), C(container engine restart (containerd)), C(kubelet restart),
        C(kubelet: not read (a concern before it changes))).
      type: list
      elements: str
      returned: always
    gpu_work:
      description: The processes with a GPU device (C(/dev/nvidia[0-9]+)) open, but those of O(gpu_services)
        - C(pid), C(command) (its command line), C(unit) (its systemd service, or null), C(pod) (the
        uid of the Kubernetes pod it runs in, from its cgroup, or null) and C(pod_name) (that pod's
        C(namespace/name) from its container's spec under containerd, or null); empty when nothing is
        disruptive (not looked for).
      type: list
      elements: dict
      returned: always
    serving:
      description: The node serves - the kubelet's kubeconfig is there (C(/etc/kubernetes/kubelet.conf),
        RKE2's or k3s' agent kubeconfig, or the running kubelet's C(--kubeconfig)), or GPU work runs;
        false when nothing is disruptive (not looked for).
      type: bool
      returned: always
    node_name:
      description: The kubelet's node name (its client certificate's C(system:node:NAME), its
        C(--hostname-override)), else the hostname; null when nothing is disruptive.
      type: str
      returned: always
    rollout:
      description: Disruptive and serving - the node goes through the rolling path (C(playbooks/rollout.yml)),
        a batch at a time, instead of changing beside the others.
      type: bool
      returned: always
  sample: {disruptive: true, reasons: [driver install 535.129.03 -> 570.133.20, driver reload],
           gpu_work: [{pid: 4242, command: python3 train.py, unit: train.service, pod: null, pod_name: null}],
           serving: true,
           node_name: gpu-01, rollout: true}
refusal:
  description: When the plans are disruptive, the node has GPU work and O(allow_in_use) and O(drain) are
    false, the message that fails the node before anything changes (naming the node, each process and the
    reasons, and the variables C(gpunode_rollout_drain) and C(gpunode_rollout_allow_in_use)); else null.
  type: str
  returned: always
ansible_facts:
  description: The facts of the converged concerns and of the plans handed over, as their own modules
    publish them.
  type: dict
  returned: always
  contains:
    nvidia_gpu:
      description: The GPUs (C(nvidia_gpu_facts)), when the driver is converged or its plan handed over and
        no C(gpu) was given.
      type: dict
    nvidia_driver:
      description: The driver (C(nvidia_driver_state)), when it is converged or its plan is handed over
        (then as that plan will leave it).
      type: dict
    nvidia_container_runtime:
      description: The container runtime (C(nvidia_container_runtime_state)), when it is converged or its
        plan is handed over.
      type: dict
    kubelet_gpu:
      description: The kubelet (C(kubelet_feature_gates)), when it is converged or its plan is handed over.
      type: dict
    gpu_validate:
      description: The last validation (C(passed), C(failed_checks), C(validated_at)), when converged.
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.host.commands import Host
from ansible.module_utils.gpunode.kubelet.identity import IdentityError
from ansible.module_utils.gpunode.node_state import read
from ansible.module_utils.gpunode.rollout.disruption import assess

ARGUMENT_SPEC = {
    "driver": {"type": "dict"},
    "container_runtime": {"type": "dict"},
    "kubelet": {"type": "dict"},
    "validated": {"type": "dict"},
    "gpu_services": {"type": "list", "elements": "str", "default": []},
    "allow_in_use": {"type": "bool", "default": False},
    "drain": {"type": "bool", "default": False},
}


def build_module():
    return AnsibleModule(argument_spec=dict(ARGUMENT_SPEC), supports_check_mode=True)


def main():
    module = build_module()
    result = read(module, module.params)
    params = module.params
    result.update(assess(result, params["gpu_services"], params["allow_in_use"], drain=params["drain"],
                         host=Host(module, IdentityError)))
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
