#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module gpunode_planned_files: write the file edits a read planned, if nothing changed since."""

DOCUMENTATION = r"""
---
module: gpunode_planned_files
short_description: Write the file edits that a gpunode read planned, unless a file changed since the read
description:
  - Carries out the file edits that C(gpunode_node_state) planned for a concern moments before (the
    C(edits) of its C(plans) for the kubelet), so that the role does not read
    the node a second time - see C(roles/kubelet_gpu/tasks/main.yml).
  - Under the node's lock, first compares each file with the text the read found (O(files[].before)). When
    any of them differs - another run or an operator edited it since - nothing is written and
    RV(changed_since) names those files; the caller then runs the planning module again, which reads the
    node and plans anew.
  - Otherwise writes each file atomically (a temporary file in the same folder, then a rename), keeping an
    existing file's mode and owner; removes those planned to go.
  - A symbolic link is followed, its target written and the link kept; a link is never removed, and a
    link into a folder that does not exist fails naming the link.
extends_documentation_fragment:
  - module_attributes
  - node_lock
options:
  files:
    description: The edits, as the read planned them.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: The file.
        type: path
        required: true
      before:
        description: The file's text as the read found it; omitted or null - the file did not exist.
        type: str
      after:
        description: The text to write; omitted or null - remove the file.
        type: str
      keep_mtime:
        description:
          - Keep an existing file's modification time (an edit the running daemon need not load, such as the
            kubelet's registration taint and labels, so that a later read does not take the daemon for older
            than its files).
        type: bool
        default: false
  backup:
    description:
      - Keep a timestamped copy of each file beside it before it is rewritten or removed (a name no
        daemon loads - C(config.yaml.1234.2026-11-27@10:00:00~)).
    type: bool
    default: false
notes:
  - In check mode the comparison is made and nothing is written.
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Write the kubelet's files that the one read planned
  gpunode_planned_files:
    files: "{{ gpunode_node_state.plans.kubelet.edits }}"
    backup: true
  register: written

- name: Plan and write again, reading the node, when a file changed since the read
  kubelet_feature_gates:
    gates: {DynamicResourceAllocation: true}
  when: written.changed_since | length > 0
"""

RETURN = r"""
changed:
  description: Whether a file was written or removed (in check mode - would be).
  type: bool
  returned: always
changed_since:
  description: The files whose text differs from O(files[].before); when not empty, nothing was written.
  type: list
  elements: str
  returned: always
  sample: [/var/lib/kubelet/config.yaml]
restore:
  description:
    - What C(verified_restart) puts back when the daemon does not come back - each file written, with its
      backup (none - the file did not exist and is removed).
  type: list
  elements: dict
  returned: when files were written
backup_file:
  description: Backup of the changed file (the first one, when several).
  type: str
  returned: when O(backup=true) and a file changed
backup_files:
  description: Changed file -> its backup.
  type: dict
  returned: when O(backup=true) and a file changed
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.host.edits import apply_into, changed_since, diff, headers
from ansible.module_utils.gpunode.host.files import FileError
from ansible.module_utils.gpunode.host.lock import LOCK_OPTION, exit_run

FILE_OPTIONS = {
    "path": {"type": "path", "required": True},
    "before": {"type": "str"},
    "after": {"type": "str"},
    "keep_mtime": {"type": "bool", "default": False},
}


def build_module():
    return AnsibleModule(
        argument_spec={
            "files": {"type": "list", "elements": "dict", "required": True, "options": FILE_OPTIONS},
            "backup": {"type": "bool", "default": False},
            **LOCK_OPTION,
        },
        supports_check_mode=True,
    )


def run(module):
    edits = {}
    for entry in module.params["files"]:
        if entry["path"] in edits:
            raise FileError(f"{entry['path']}: given twice in files")
        edits[entry["path"]] = (entry["before"], entry["after"])
    edits = {path: (old, new) for path, (old, new) in edits.items() if old != new}
    keep_mtime = [entry["path"] for entry in module.params["files"] if entry["keep_mtime"]]
    result = {"changed": False, "changed_since": changed_since(edits)}
    if result["changed_since"]:
        return result
    shown = headers(edits)
    result["changed"] = bool(edits)
    if module._diff and edits:
        result["diff"] = diff(edits, shown)
    if edits and not module.check_mode:
        try:
            apply_into(result, edits, module.params["backup"], module.atomic_move, keep_mtime=keep_mtime)
        except FileError as exc:  # names the file and the cause
            module.fail_json(msg=str(exc), **result)
    return result


def main():
    exit_run(build_module(), run)


if __name__ == "__main__":
    main()
