#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module nvidia_driver_verify: check what a driver change left on the host."""

DOCUMENTATION = r"""
---
module: nvidia_driver_verify
short_description: Check that a driver change left the wanted NVIDIA driver
description:
  - Reads the host as C(nvidia_driver_state) does, with the same request (the options below; the driver
    role gives both modules the same values), and fails when the run did not leave what was asked for,
    naming what differs - the wanted driver (its kernel module for the running kernel and its userspace
    libraries) must be on disk, and a loaded driver must be the wanted one and answer C(nvidia-smi) on
    every GPU, unless a reboot is pending.
  - Publishes C(ansible_facts.nvidia_driver) as the host has it now; the C(nvidia_driver_changes) filter
    tells what the run changed from C(nvidia_driver_state)'s C(plan) and C(before) and these facts.
  - Changes nothing.
version_added: "1.0.0"
extends_documentation_fragment:
  - module_attributes.no_diff
  - module_attributes.facts
  - nvidia_driver_request
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Read the driver state and plan
  nvidia_driver_state:
    branch: "580"
  register: driver

- name: Check the driver the run left
  nvidia_driver_verify:
    branch: "580"

- name: Say what the run changed
  ansible.builtin.debug:
    msg: "{{ driver.plan | nvidia_driver_changes(driver.before, ansible_facts['nvidia_driver']) }}"
"""

RETURN = r"""
ansible_facts:
  description: C(nvidia_driver) as the host has it now (and C(nvidia_gpu) when the GPUs were detected).
  returned: always
  type: dict
  contains:
    nvidia_driver:
      description: Method, branch, wanted, installed_version, loaded_version, module_type, held,
        reboot_required, origin, tools_prefix, driver_root, skipped.
      returned: when the host has an NVIDIA GPU
      type: dict
state:
  description: What was read on the host (as C(nvidia_driver_state) returns it).
  returned: when the host has an NVIDIA GPU
  type: dict
  contains:
    userspace_version:
      description: The version of the installed userspace libraries, or null.
      type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.driver.state_call import ERRORS, REQUEST_SPEC, read
from ansible.module_utils.gpunode.host.lock import exit_run

# what the result holds (the plan and the request are nvidia_driver_state's)
RETURNED = ("changed", "ansible_facts", "state", "msg")


def build_module():
    return AnsibleModule(argument_spec=dict(REQUEST_SPEC), supports_check_mode=True)


def run(module):
    result = read(module, stage="final")
    return {key: result[key] for key in RETURNED if key in result}


def main():
    exit_run(build_module(), run, ERRORS, failed=lambda exc: getattr(exc, "result", {}), lock=False)


if __name__ == "__main__":
    main()
