#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module nvidia_driver_verify: check what a driver change left on the host."""

DOCUMENTATION = r"""
---
module: nvidia_driver_verify
short_description: Check that a driver change left the wanted NVIDIA driver, and say what changed
description:
  - Reads the host as C(nvidia_driver_state) does, with the same arguments (O(driver)), and fails when
    the run did not leave what was asked for, naming what differs.
  - O(stage=installed) - after the install or the module build - the wanted driver (its kernel module
    for the running kernel and its userspace libraries) must be on disk.
  - O(stage=final) - at the end of the driver role - the same, and a loaded driver must be the wanted one
    and answer C(nvidia-smi) on every GPU, unless a reboot is pending. With O(ran) and O(before),
    RV(changes) says what the run changed.
  - Changes nothing.
version_added: "1.0.0"
options:
  stage:
    description: V(installed) after installing, V(final) at the end of the run.
    type: str
    choices: [installed, final]
    required: true
  driver:
    description: The arguments of C(nvidia_driver_state) (the role gives both modules the same).
    type: dict
    required: true
  before:
    description: The facts before the run (C(nvidia_driver_state)'s C(before)), to say what changed.
    type: dict
  ran:
    description: The plan the run carried out (C(nvidia_driver_state)'s C(plan)).
    type: dict
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  platform:
    platforms: posix
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Read the driver state and plan
  nvidia_driver_state:
    branch: "580"
  register: driver

- name: Check the driver the run left, and say what changed
  nvidia_driver_verify:
    stage: final
    driver:
      branch: "580"
    before: "{{ driver.before }}"
    ran: "{{ driver.plan }}"
  register: driver_final
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
changes:
  description: One line per change the run made (with O(ran) and O(before), at O(stage=final)).
  returned: when the host has an NVIDIA GPU, O(stage=final), O(ran) and O(before) given
  type: list
  elements: str
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
from ansible.module_utils.gpunode.common.arguments import ArgumentsError, validated
from ansible.module_utils.gpunode.driver.state_call import ARGUMENT_SPEC, ERRORS, read

# what the result holds (the plan and the request are nvidia_driver_state's)
RETURNED = ("changed", "ansible_facts", "changes", "state", "msg")


def build_module():
    return AnsibleModule(
        argument_spec={
            "stage": {"type": "str", "choices": ["installed", "final"], "required": True},
            "driver": {"type": "dict", "required": True},
            "before": {"type": "dict"},
            "ran": {"type": "dict"},
        },
        supports_check_mode=True,
    )


def main():
    module = build_module()
    params = module.params
    try:
        driver = validated(ARGUMENT_SPEC, params["driver"], "driver")
        result = read(module, driver, stage=params["stage"], ran=params["ran"], before=params["before"])
    except ArgumentsError as exc:
        module.fail_json(msg=str(exc))
    except ERRORS as exc:
        module.fail_json(msg=str(exc), **getattr(exc, "result", {}))
    module.exit_json(**{key: result[key] for key in RETURNED if key in result})


if __name__ == "__main__":
    main()
