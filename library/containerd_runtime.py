#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module containerd_runtime: declare a runtime in containerd's CRI plugin by a drop-in."""

DOCUMENTATION = r"""
---
module: containerd_runtime
short_description: Add a runtime such as nvidia to containerd's CRI plugin through a drop-in
description:
  - Writes a drop-in file (O(dropin_path)) declaring the runtime under the CRI plugin
    (C(BinaryName), C(runtime_type), C(SystemdCgroup)) and, when O(set_default=true),
    makes it the CRI default runtime; with O(enable_cdi=true) it also turns on CDI where
    containerd has it off (1.7; 2.x has it on by default).
  - Adds the drop-in to the top-level C(imports) of O(config_path) by a minimal text
    edit that keeps everything else; a missing (or empty) config.toml is created with
    C(version) and C(imports). An imports glob that already matches the drop-in counts
    (containerd 2.2+ writes C(imports = ["/etc/containerd/conf.d/*.toml"])); containerd
    loads the file once either way. A re-run restores the import after a tool rewrote config.toml.
  - The schema (config.toml's C(version), 1 to 4; none means 1) picks the plugin table
    (C(cri), C(io.containerd.grpc.v1.cri), C(io.containerd.cri.v1.runtime)); the drop-in
    carries the same C(version), never a higher one.
  - containerd before 2.0 replaces a plugin's whole table with an imported one, so for
    it the drop-in holds the complete CRI table (C(containerd config default),
    overlaid with config.toml's and its other imports' CRI settings, overlaid with the
    runtime). containerd 2.x merges key by key, so the drop-in holds the runtime only.
  - Every value that lands in a file (O(name), O(binary_name), O(runtime_type), O(dropin_path)) is checked
    against its format's syntax first; a bad one fails naming the option, the value and the rule, and
    nothing is read or written.
  - A config.toml that is not valid TOML, has an unknown version, a version this
    containerd cannot read (3 or 4 on 1.x, 4 before 2.3), or no version on containerd
    2.0 to 2.2 (which ignore the CRI settings of such files) fails with its path and
    the problem and is left untouched.
  - RV(restart_required) is true when containerd (O(service)) runs and either a file
    was written or its main process started before a file's last change (a run
    interrupted between the write and the restart).
version_added: "1.0.0"
requirements:
  - tomli (python3-tomli) or toml (python3-toml) on Python 3.10 and older; Python 3.11+ has tomllib
options:
  config_path:
    description: containerd's main configuration file.
    type: path
    default: /etc/containerd/config.toml
  dropin_path:
    description:
      - The drop-in file this module owns and writes whole; an entry of config.toml's C(imports), so an
        absolute path of letters, digits and C(. _ - + @ ~ /) only (no glob characters).
    type: path
    default: /etc/containerd/conf.d/99-nvidia.toml
  name:
    description:
      - The runtime's name (the RuntimeClass handler), a key of config.toml - letters, digits, C(_), C(.)
        and C(-) only (a RuntimeClass handler must also be a lower-case DNS label).
    type: str
    default: nvidia
  binary_name:
    description:
      - The OCI runtime binary the runc shim calls (C(options.BinaryName)) - an absolute path or a bare
        name found on the PATH, of letters, digits and C(. _ - + @ ~ /) only.
    type: path
    default: /usr/bin/nvidia-container-runtime
  runtime_type:
    description: The shim (C(runtime_type)), C(io.containerd.NAME.vN).
    type: str
    default: io.containerd.runc.v2
  systemd_cgroup:
    description:
      - C(options.SystemdCgroup). Default (null) follows the node, the value on
        config.toml's runc runtime, else true when systemd is PID 1.
    type: bool
  set_default:
    description: Make the runtime the CRI default (C(default_runtime_name)).
    type: bool
    default: false
  enable_cdi:
    description: Turn on the CRI plugin's CDI support (C(enable_cdi)) where it is off; containerd 1.7+.
    type: bool
    default: false
  containerd_version:
    description: containerd's version; detected with C(containerd --version) when omitted.
    type: str
  service:
    description:
      - The systemd unit of the containerd that reads these files; its main process is
        compared with the files' modification times. Empty to skip the comparison.
    type: str
    default: containerd.service
  backup:
    description: Keep a timestamped copy of config.toml (and of an existing drop-in) before changing them.
    type: bool
    default: false
  backup_dir:
    description:
      - Where the copies go, at each file's own path below it; never next to the file, where
        an imports glob would load the copy.
    type: path
    default: /var/backups/gpunode
extends_documentation_fragment:
  - module_attributes
  - node_lock
notes:
  - A file that is a symbolic link (also relative, or a chain of links) is followed; the file at
    the end of the link is edited and the link kept; a backup holds that file's content; --diff
    headers read C(link -> target). A link to a file that does not exist yet gets that file
    created (as with template follow=yes); a link into a folder that does not exist, or a link
    loop, fails naming the link.
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Declare the nvidia runtime in containerd and make it the default
  containerd_runtime:
    set_default: true
    enable_cdi: true
    backup: true
  register: containerd_nvidia
"""

RETURN = r"""
changed:
  description: Whether a file was (or in check mode would be) written.
  returned: always
  type: bool
files:
  description: The files written (or that would be).
  returned: always
  type: list
  elements: str
  sample: [/etc/containerd/conf.d/99-nvidia.toml, /etc/containerd/config.toml]
restart_required:
  description: containerd runs and has not read the files as they are (now or after this write).
  returned: always
  type: bool
stale_files:
  description: Files changed after the running containerd started (before this run's writes).
  returned: always
  type: list
  elements: str
schema_version:
  description: The config schema used (1 to 4).
  returned: success
  type: int
  sample: 2
systemd_cgroup:
  description: The SystemdCgroup value written.
  returned: success
  type: bool
containerd_version:
  description: The containerd version used to decide the drop-in's content; null when unknown.
  returned: success
  type: str
  sample: 1.6.20~ds1
full_cri_table:
  description: Whether the drop-in carries the whole CRI table (containerd before 2.0).
  returned: success
  type: bool
effective:
  description: What containerd runs with once it has read the files.
  returned: success
  type: dict
  sample: {"default_runtime": "nvidia", "runtimes": ["nvidia", "runc"], "cdi_enabled": true,
           "cdi_spec_dirs": ["/etc/cdi", "/var/run/cdi"]}
restore:
  description:
    - How to put the files back after a failed restart, in the form verified_restart's C(restore)
      takes - each written file with its backup, or without one when this run created it (it is
      removed). A file that existed but was not backed up is not listed.
  returned: always
  type: list
  elements: dict
backup_files:
  description: Backups made, by file.
  returned: always
  type: dict
diff:
  description: Before and after of each file.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.gpunode.formats import values
from ansible.module_utils.gpunode.formats.toml_reader import TOML_IMPORT_ERROR, TOML_PARSER, TOML_REQUIREMENT
from ansible.module_utils.gpunode.host.backups import DEFAULT_BACKUP_DIR
from ansible.module_utils.gpunode.host.commands import Host
from ansible.module_utils.gpunode.host.files import read_text
from ansible.module_utils.gpunode.host.lock import LOCK_OPTION, exit_run
from ansible.module_utils.gpunode.host.systemd import restart_required
from ansible.module_utils.gpunode.runtime import containerd_dropin as steps
from ansible.module_utils.gpunode.runtime.containerd_config import (
    DEFAULT_CONFIG,
    DEFAULT_DROPIN,
    ContainerdConfigError,
    containerd_facts,
)

ARGUMENT_SPEC = {
    "config_path": {"type": "path", "default": DEFAULT_CONFIG},
    "dropin_path": {"type": "path", "default": DEFAULT_DROPIN},
    "name": {"type": "str", "default": "nvidia"},
    "binary_name": {"type": "path", "default": "/usr/bin/nvidia-container-runtime"},
    "runtime_type": {"type": "str", "default": "io.containerd.runc.v2"},
    "systemd_cgroup": {"type": "bool"},
    "set_default": {"type": "bool", "default": False},
    "enable_cdi": {"type": "bool", "default": False},
    "containerd_version": {"type": "str"},
    "service": {"type": "str", "default": "containerd.service"},
    "backup": {"type": "bool", "default": False},
    "backup_dir": {"type": "path", "default": DEFAULT_BACKUP_DIR},
    **LOCK_OPTION,
}

# The syntax of each value that lands in a file (checked before anything is read):
# the runtime's name is a TOML key, the binary and the drop-in are TOML strings
# (the drop-in also an imports entry, where glob characters would match other files).
VALUE_RULES = {
    "config_path": values.path,
    "dropin_path": values.word_path,
    "name": values.containerd_runtime_name,
    "binary_name": values.command,
    "runtime_type": values.containerd_runtime_type,
    "backup_dir": values.path,
}


def build_module():
    return AnsibleModule(argument_spec=dict(ARGUMENT_SPEC), supports_check_mode=True)


def run(module):
    """The steps of module_utils/gpunode/runtime/containerd_dropin.py; each error fails here, once."""
    params = module.params
    result = steps.empty_result()
    try:
        values.check(params, VALUE_RULES)
    except values.ValueSyntaxError as exc:
        module.fail_json(msg=f"{exc}; nothing was read or written", **result)
    if TOML_PARSER is None:
        module.fail_json(msg=missing_required_lib(TOML_REQUIREMENT), exception=TOML_IMPORT_ERROR, **result)
    try:
        node = steps.read_node(Host(module), params, read_text, containerd_facts)
        outcome = steps.plan_files(params, node)
    except ContainerdConfigError as exc:
        module.fail_json(msg=f"{exc}; left unchanged", **result)
    for warning in outcome["warnings"]:
        module.warn(warning)
    writes = steps.changes(result, params, node, outcome)
    result["restart_required"], result["stale_files"] = restart_required(
        Host(module), params["service"], steps.read_files(params, node), result["changed"])
    if module.check_mode:
        return result
    try:
        steps.write(writes, params, result, module.atomic_move)
    except steps.WriteError as exc:
        module.fail_json(msg=str(exc), **result)
    return result


def main():
    exit_run(build_module(), run, failed=lambda exc: steps.empty_result())


if __name__ == "__main__":
    main()
