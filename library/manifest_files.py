#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module manifest_files: write rendered Kubernetes manifests into a directory, one per file."""

DOCUMENTATION = r"""
---
module: manifest_files
short_description: Write rendered Kubernetes manifests into a directory, one file per object
description:
  - Writes each entry of O(files) to O(path)/NAME, only when its content differs, atomically
    (a temporary file in the same directory, then a rename).
  - Removes the files named in O(remove) (the other mode's objects), when present.
  - Files in O(path) that are named in neither are never touched.
options:
  path:
    description: The output directory; created (mode 0755) when missing.
    type: path
    required: true
  files:
    description: File name (no directories, ending in .yaml or .yml) to file content.
    type: dict
    required: true
  remove:
    description: File names to remove from O(path) when present.
    type: list
    elements: str
    default: []
  mode:
    description: Permissions of the files written.
    type: raw
    default: "0644"
  backup:
    description: Keep a timestamped copy of each file before it is rewritten or removed.
    type: bool
    default: false
extends_documentation_fragment:
  - module_attributes
  - node_lock
notes:
  - A file that is a symbolic link (also relative, or a chain of links) is followed; the file at
    the end of the link is edited and the link kept; a backup holds that file's content; --diff
    headers read C(link -> target). A link to a file that does not exist yet gets that file
    created (as with template follow=yes); a link into a folder that does not exist, or a link
    loop, fails naming the link.
  - A file in O(remove) that is a symbolic link is the operator's, so the module fails naming it
    and removes neither the link nor its target.
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Write the manifests for GitOps
  manifest_files:
    path: /srv/gitops/gpu
    files:
      10-serviceaccount-nvidia-device-plugin.yaml: "{{ rendered_text }}"
    remove:
      - 50-daemonset-gpushare-device-plugin.yaml
"""

RETURN = r"""
created:
  description: Files written that did not exist.
  returned: always
  type: list
  elements: str
updated:
  description: Files rewritten because their content differed.
  returned: always
  type: list
  elements: str
removed:
  description: Files removed.
  returned: always
  type: list
  elements: str
backup_files:
  description: Backups made (O(backup=true)).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.addons.manifest_files import ManifestFilesError, diffs, plan
from ansible.module_utils.gpunode.host.edits import apply
from ansible.module_utils.gpunode.host.files import FileError, make_folders, resolved_path
from ansible.module_utils.gpunode.host.lock import LOCK_OPTION, exit_run


def build_module():
    return AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "files": {"type": "dict", "required": True},
            "remove": {"type": "list", "elements": "str", "default": []},
            "mode": {"type": "raw", "default": "0644"},
            "backup": {"type": "bool", "default": False},
            **LOCK_OPTION,
        },
        supports_check_mode=True,
    )


def run(module):
    params = module.params
    directory = params["path"]
    files = {str(k): v for k, v in params["files"].items()}
    changes = plan(directory, files, params["remove"])
    result = {
        "changed": bool(changes),
        "created": [c["name"] for c in changes if c["action"] == "create"],
        "updated": [c["name"] for c in changes if c["action"] == "update"],
        "removed": [c["name"] for c in changes if c["action"] == "remove"],
        "backup_files": [],
    }
    if module._diff:
        result["diff"] = diffs(changes)
    if not changes or module.check_mode:
        return result
    try:
        make_folders(directory)  # 0755 whatever the umask
    except OSError as exc:
        raise ManifestFilesError(f"{directory}: cannot create: {exc.strerror}") from exc
    edits = {change["path"]: (change["before"], change["after"]) for change in changes}
    try:
        _restore, backups = apply(edits, module.params["backup"], replace=module.atomic_move)
    except FileError as exc:  # names the file and the cause
        result["backup_files"] = [exc.backups[path] for path in sorted(exc.backups)]
        raise ManifestFilesError(str(exc)) from exc
    result["backup_files"] = [backups[path] for path in sorted(backups)]
    for path in (change["path"] for change in changes if change["after"] is not None):
        module.set_mode_if_different(resolved_path(path), module.params["mode"], False)
    return result


def main():
    exit_run(build_module(), run, (ManifestFilesError,))


if __name__ == "__main__":
    main()
