#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module docker_daemon_config: merge settings into /etc/docker/daemon.json."""

DOCUMENTATION = r"""
---
module: docker_daemon_config
short_description: Merge settings into Docker's daemon.json without losing other keys
description:
  - Deep-merges O(settings) into a JSON configuration file (by default
    C(/etc/docker/daemon.json)). Objects are merged key by key; any other value
    replaces the one in the file. Keys the settings do not name are kept.
  - A missing or empty file is created (mode 0644 unless O(mode) is given; the
    parent directory is created 0755). An existing file keeps its mode and owner.
  - The file is rewritten only when the merged configuration differs from the
    parsed file (semantic JSON equality, strict types). The text written is
    pretty-printed with the file's indentation and a trailing newline.
  - A file that is not valid JSON, or not a JSON object, fails with its path and
    the line and column of the problem, and is left byte for byte as it was.
  - RV(restart_required) is true when Docker (O(service)) runs and either the file was
    written or dockerd started before the file's last change (a run interrupted between
    the write and the restart).
  - Docker reads runtime arguments from C(runtimeArgs). When a runtime in the file
    already has C(args) (as C(nvidia-ctk runtime configure) writes it) equal to the
    wanted C(runtimeArgs), the file is left as it is; otherwise C(runtimeArgs) is added.
version_added: "1.0.0"
options:
  path:
    description: The JSON file to edit.
    type: path
    default: /etc/docker/daemon.json
  settings:
    description: Settings to deep-merge into the file.
    type: dict
    required: true
  backup:
    description:
      - Keep a timestamped copy of the file before changing it (next to it, since dockerd reads
        only its own file).
    type: bool
    default: false
  service:
    description:
      - The systemd unit of the daemon that reads the file; its main process is compared
        with the file's modification time. Empty to skip the comparison.
    type: str
    default: docker.service
notes:
  - A file that is a symbolic link (also relative, or a chain of links) is followed; the file at
    the end of the link is edited and the link kept; a backup holds that file's content; --diff
    headers read C(link -> target). A link to a file that does not exist yet gets that file
    created (as with template follow=yes); a link into a folder that does not exist, or a link
    loop, fails naming the link.
extends_documentation_fragment:
  - ansible.builtin.files
  - module_attributes
  - node_lock
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Make nvidia Docker's default runtime
  docker_daemon_config:
    settings:
      default-runtime: nvidia
      runtimes:
        nvidia:
          path: /usr/bin/nvidia-container-runtime
          runtimeArgs: []
    backup: true
  notify: Restart docker
"""

RETURN = r"""
changed:
  description: Whether the file was (or in check mode would be) written.
  returned: always
  type: bool
path:
  description: The file.
  returned: always
  type: str
  sample: /etc/docker/daemon.json
config:
  description: The configuration after the merge (what the file holds or would hold).
  returned: success
  type: dict
  sample: {"default-runtime": "nvidia", "log-driver": "json-file"}
restart_required:
  description: The daemon runs and has not read the file as it is (now or after this write).
  returned: always
  type: bool
stale_files:
  description: The file, when it changed after the running daemon started (before this run's write).
  returned: always
  type: list
  elements: str
restore:
  description:
    - How to put the file back after a failed restart, in the form verified_restart's C(restore)
      takes - the backup, or no backup for a file this run created (it is removed). Empty when
      nothing was written, or the file existed and no backup was kept.
  returned: always
  type: list
  elements: dict
  sample: [{"path": /etc/docker/daemon.json, "backup": /etc/docker/daemon.json.4242.2026-11-23@10:00:00~}]
backup_file:
  description: The backup's path; null when no backup was made.
  returned: always
  type: str
  sample: /etc/docker/daemon.json.12345.2024-01-01@12:00:00~
diff:
  description: The file's text before and after.
  returned: always
  type: dict
  sample: {"before": "{}\n", "after": "{\n    \"default-runtime\": \"nvidia\"\n}\n"}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.formats.json_config import JSONConfigError, plan
from ansible.module_utils.gpunode.host.commands import Host
from ansible.module_utils.gpunode.host.edits import apply_into
from ansible.module_utils.gpunode.host.files import FileError, exists, read_text, resolved_path, shown_path
from ansible.module_utils.gpunode.host.lock import LOCK_OPTION, exit_run
from ansible.module_utils.gpunode.host.systemd import restart_required

ARGUMENT_SPEC = {
    "path": {"type": "path", "default": "/etc/docker/daemon.json"},
    "settings": {"type": "dict", "required": True},
    "backup": {"type": "bool", "default": False},
    "service": {"type": "str", "default": "docker.service"},
    **LOCK_OPTION,
}


def build_module():
    return AnsibleModule(
        argument_spec=dict(ARGUMENT_SPEC),
        add_file_common_args=True,
        supports_check_mode=True,
    )


def run(module):
    path = module.params["path"]
    result = {"changed": False, "path": path, "backup_file": None}
    result.update(restart_required=False, stale_files=[], restore=[])
    try:
        shown = shown_path(path, JSONConfigError)
        text = read_text(path, JSONConfigError)
        changed, new_text, config = plan(text, module.params["settings"], path, docker=True)
    except JSONConfigError as exc:
        module.fail_json(msg=f"{exc}; left unchanged", **result)
    result["config"] = config
    result["diff"] = {
        "before_header": shown,
        "after_header": shown,
        "before": text or "",
        "after": new_text,
    }
    result["restart_required"], result["stale_files"] = restart_required(
        Host(module), module.params["service"], [path], changed)
    if changed and not module.check_mode:
        try:
            apply_into(result, {path: (text, new_text)}, module.params["backup"], replace=module.atomic_move)
        except FileError as exc:
            module.fail_json(msg=str(exc), **result)
    result["changed"] = changed
    file_args = module.load_file_common_arguments(module.params)
    file_args["path"] = resolved_path(path)  # owner/mode of a link's target, not of the link
    if not module.check_mode or exists(path):
        result["changed"] = module.set_fs_attributes_if_different(file_args, result["changed"], diff=None)
    return result


def main():
    module = build_module()
    exit_run(module, run, failed=lambda exc: {"changed": False, "path": module.params["path"]})


if __name__ == "__main__":
    main()
