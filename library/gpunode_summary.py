#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation of the action gpunode_summary (action_plugins/gpunode_summary.py, on the controller)."""

DOCUMENTATION = r"""
---
module: gpunode_summary
short_description: Summarise a gpunode run in one table, a row per host
description:
  - Builds, from the facts the roles published on each host in this run, one row per host - its GPUs (with
    their NVSwitches, or C(NVLink5 fabric) on an HGX B200/B300, C(NVL72 (MNNVL\) fabric) on a GB200/GB300
    tray - the fabric's kind, then its state as the validation read it, this run's or the last one's
    record's, e.g. C(8x B200, NVLink5 fabric Completed); C(fabric Completed) after the NVSwitches on an
    HGX H100/H200), the NVIDIA driver loaded (module type, whether
    held), the default runtime of each container engine (and which one the kubelet uses), the kubelet
    feature gates, the scheduler extender, what offers its GPUs to the cluster, whether a reboot is
    pending, whether its GPUs passed validation (V(passed), V(failed) with the failed checks, V(not run);
    an earlier pass with its date; C(SERVING UNTAINTED) and why where it did not pass and no taint keeps work
    away), what the rolling path did there (C(drained, changed, validated,
    uncordoned), C(failed at TASK), C(not started), in check mode C(would drain); C(-) for a host off that
    path) - and what this run changed there (the host's C(gpunode_changes)).
  - A role that did not run on a host leaves its column at C(-). Changes nothing.
  - An action plugin - it runs on the controller, in the task's own process, and never on a host.
options:
  hosts:
    description: The hosts to list, in order.
    type: list
    elements: str
    required: true
  host_facts:
    description:
      - Per host, its C(ansible_facts) (or the part with C(nvidia_gpu), C(nvidia_driver),
        C(nvidia_container_runtime), C(kubelet_gpu), C(gpushare_scheduler)).
      - Omitted - read from the play's C(hostvars), so a playbook passes only O(hosts).
    type: dict
  offers:
    description:
      - Per GPU host, what offers its GPUs to the cluster (device plugin and its sharing, HAMi, DRA driver).
      - Omitted - what the add-ons play published on this host (C(ansible_facts.gpu_cluster_addons.offers)).
    type: dict
  untainted:
    description:
      - Per GPU host whose validation did not pass and that no taint keeps from work (the validation gate
        off, or render mode, without the Node Readiness Controller's rule), why; its validated cell says
        C(SERVING UNTAINTED) and why.
      - Omitted - what the add-ons play published on this host
        (C(ansible_facts.gpu_cluster_addons.untainted)).
    type: dict
  changes:
    description:
      - Per host, what this run changed there (its C(gpunode_changes) list).
      - Omitted - read from the play's C(hostvars).
    type: dict
  rollouts:
    description:
      - Per host, what the rolling path recorded there (its C(gpunode_rollout_record), set by
        C(playbooks/tasks/rollout_node.yml)).
      - Omitted - read from the play's C(hostvars) when O(host_facts) or O(changes) is too, else none.
    type: dict
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  platform:
    platforms: all
  check_mode:
    support: full
  diff_mode:
    support: none
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: What each host has now, and what this run changed
  gpunode_summary:
    hosts: "{{ groups['gpu_nodes'] }}"
  register: summary

- name: Show it
  ansible.builtin.debug:
    msg: "{{ summary.table }}"
"""

RETURN = r"""
table:
  description: The table as aligned text, a header, a rule and a row per host.
  returned: always
  type: str
rows:
  description: The rows, each a dict keyed by column name.
  returned: always
  type: list
  elements: dict
rollout_failures:
  description: Per host whose rolling path failed or did not start, the message that fails it after the
    table (C(playbooks/summary.yml)).
  returned: always
  type: dict
  sample: {gpu-02: "rollout not started: gpu-01 failed in an earlier batch, and no later batch starts"}
"""
