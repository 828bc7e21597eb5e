#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Documentation of the action gpunode_boot_archive (action_plugins/gpunode_boot_archive.py)."""

DOCUMENTATION = r"""
---
module: gpunode_boot_archive
short_description: Put on a node the archive its boot unit runs the validation and the Node condition from
description:
  - Builds on the controller one zip that runs the given modules without Ansible -
    C(python3 ARCHIVE module NAME ARGS) hands them to ansible-core's debugging entry,
    C(python3 ARCHIVE [SETTINGS]) runs the boot validation of the role gpu_validate
    (C(module_utils/gpunode/readiness/boot.py)) - and copies it to O(dest).
  - The zip holds the controller's own C(ansible/module_utils) (the ansible-core running the play), gpunode's
    module_utils where the modules import them from (also in the collection's layout), the modules and a
    C(__main__.py). Its entries are sorted and stamped 1980-01-01, so a re-run changes nothing; it is built
    once per run and inputs, not per host.
  - An action plugin - it builds on the controller and copies with the C(copy) action (check mode, diff).
options:
  dest:
    description: Where the archive goes on the node.
    type: path
    required: true
  modules:
    description: The modules the archive holds.
    type: list
    elements: str
    default: [nvidia_gpu_validate, gpu_node_condition]
  mode:
    description: The archive's mode.
    type: raw
    default: "0644"
attributes:
  check_mode:
    support: full
  diff_mode:
    support: partial
    details: a binary file - the diff says only that it changes
extends_documentation_fragment:
  - module_attributes
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: The boot unit's archive
  gpunode_boot_archive:
    dest: /usr/local/lib/gpunode/boot-validate.pyz
"""

RETURN = r"""
dest:
  description: The archive on the node (what the copy action returns besides).
  returned: success
  type: str
checksum:
  description: The archive's SHA-1.
  returned: success
  type: str
"""
