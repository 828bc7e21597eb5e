#!/usr/bin/python
"""Ansible module containerd_runtime: declare a runtime in containerd's CRI plugin by a drop-in."""

import glob
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native
from ansible.module_utils.containerd_config import (
    DEFAULT_CONFIG,
    DEFAULT_DROPIN,
    ContainerdConfigError,
    major_version,
    parse,
    plan,
    version_from_output,
)
from ansible.module_utils.text_file import read_text, write_text

DOCUMENTATION = r"""
---
module: containerd_runtime
short_description: Add a runtime such as nvidia to containerd's CRI plugin through a drop-in
description:
  - Writes a drop-in file (O(dropin_path)) declaring the runtime under the CRI plugin
    (C(BinaryName), C(runtime_type), C(SystemdCgroup)) and, when O(set_default=true),
    makes it the CRI default runtime.
  - Adds the drop-in to the top-level C(imports) of O(config_path) by a minimal text
    edit that keeps everything else; a missing config.toml is created with
    C(version) and C(imports). An imports glob that already matches the drop-in counts.
    A re-run restores the import after a tool rewrote config.toml.
  - The schema (1, 2 or 3, from config.toml's C(version)) picks the plugin table
    (C(cri), C(io.containerd.grpc.v1.cri), C(io.containerd.cri.v1.runtime)); the
    drop-in carries the same C(version).
  - containerd before 2.0 replaces a plugin's whole table with an imported one, so for
    it the drop-in holds the complete CRI table (C(containerd config default),
    overlaid with config.toml's and its other imports' CRI settings, overlaid with the
    runtime). containerd 2.x merges key by key, so the drop-in holds the runtime only.
  - A config.toml that is not valid TOML, or has an unknown version, fails with its
    path and the problem and is left untouched.
version_added: "1.0.0"
options:
  config_path:
    description: containerd's main configuration file.
    type: path
    default: /etc/containerd/config.toml
  dropin_path:
    description: The drop-in file this module owns and writes whole.
    type: path
    default: /etc/containerd/conf.d/99-nvidia.toml
  name:
    description: The runtime's name (the RuntimeClass handler).
    type: str
    default: nvidia
  binary_name:
    description: The OCI runtime binary the runc shim calls (C(options.BinaryName)).
    type: path
    default: /usr/bin/nvidia-container-runtime
  runtime_type:
    description: The shim (C(runtime_type)).
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
  containerd_version:
    description: containerd's version; detected with C(containerd --version) when omitted.
    type: str
  backup:
    description: Keep a timestamped copy of config.toml (and of an existing drop-in) before changing them.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
author: gpunode
"""

EXAMPLES = r"""
- name: Declare the nvidia runtime in containerd
  containerd_runtime:
    set_default: false
    backup: true
  notify: Restart containerd
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
  sample: [/etc/containerd/config.toml, /etc/containerd/conf.d/99-nvidia.toml]
restart_required:
  description: containerd must restart to read the change (same as changed).
  returned: always
  type: bool
schema_version:
  description: The config schema used (1, 2 or 3).
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

ARGUMENT_SPEC = {
    "config_path": {"type": "path", "default": DEFAULT_CONFIG},
    "dropin_path": {"type": "path", "default": DEFAULT_DROPIN},
    "name": {"type": "str", "default": "nvidia"},
    "binary_name": {"type": "path", "default": "/usr/bin/nvidia-container-runtime"},
    "runtime_type": {"type": "str", "default": "io.containerd.runc.v2"},
    "systemd_cgroup": {"type": "bool"},
    "set_default": {"type": "bool", "default": False},
    "containerd_version": {"type": "str"},
    "backup": {"type": "bool", "default": False},
}
C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}


def build_module():
    return AnsibleModule(argument_spec=dict(ARGUMENT_SPEC), supports_check_mode=True)


def containerd_facts(module, wanted_version):
    """(version, `containerd config default` text or None)."""
    binary = module.get_bin_path("containerd")
    version = wanted_version
    if version is None and binary:
        rc, out, _ = module.run_command([binary, "--version"], environ_update=C_LOCALE)
        version = version_from_output(out) if rc == 0 else None
    defaults = None
    major = major_version(version)
    if binary and (major is None or major < 2):
        rc, out, _ = module.run_command([binary, "config", "default"], environ_update=C_LOCALE)
        defaults = out if rc == 0 else None
    return version, defaults


def other_imports(config_text, config_path, dropin_path):
    """(path, text) of the files config.toml imports now, in containerd's order, ours excluded."""
    if not config_text or not config_text.strip():
        return []
    imports = parse(config_text, config_path).get("imports", [])
    found = []
    for pattern in imports if isinstance(imports, list) else []:
        if not isinstance(pattern, str):
            continue
        absolute = pattern if os.path.isabs(pattern) else os.path.join(os.path.dirname(config_path), pattern)
        for path in sorted(glob.glob(absolute)):
            if os.path.abspath(path) != os.path.abspath(dropin_path) and os.path.isfile(path):
                found.append((path, read_text(path, ContainerdConfigError)))
    return found


def run(module):
    params = module.params
    config_path, dropin_path = params["config_path"], params["dropin_path"]
    result = {"changed": False, "files": [], "backup_files": {}, "diff": [], "restart_required": False}
    try:
        config_text = read_text(config_path, ContainerdConfigError)
        dropin_text = read_text(dropin_path, ContainerdConfigError)
        version, defaults = containerd_facts(module, params["containerd_version"])
        outcome = plan(
            config_text,
            config_path=config_path,
            dropin_path=dropin_path,
            name=params["name"],
            binary_name=params["binary_name"],
            runtime_type=params["runtime_type"],
            systemd_cgroup=params["systemd_cgroup"],
            set_default=params["set_default"],
            containerd_version=version,
            default_config_text=defaults,
            systemd_pid1=os.path.isdir("/run/systemd/system"),
            other_imports=other_imports(config_text, config_path, dropin_path),
        )
    except ContainerdConfigError as exc:
        module.fail_json(msg=f"{exc}; left unchanged", **result)
    for warning in outcome["warnings"]:
        module.warn(warning)
    result.update(
        schema_version=outcome["schema_version"],
        systemd_cgroup=outcome["systemd_cgroup"],
        containerd_version=version,
        full_cri_table=outcome["full_cri_table"],
    )
    writes = []
    for path, before, after in (
        (dropin_path, dropin_text, outcome["dropin_text"]),
        (config_path, config_text, outcome["config_text"]),
    ):
        if before != after:
            writes.append((path, before, after))
            result["diff"].append(
                {"before_header": path, "after_header": path, "before": before or "", "after": after}
            )
    result["files"] = [path for path, _, _ in writes]
    result["changed"] = result["restart_required"] = bool(writes)
    if module.check_mode:
        return result
    for path, before, after in writes:
        try:
            if params["backup"] and before is not None:
                result["backup_files"][path] = module.backup_local(path)
            write_text(path, after, replace=module.atomic_move)
        except OSError as exc:
            module.fail_json(msg=f"{path}: cannot write: {to_native(exc)}", **result)
    return result


def main():
    module = build_module()
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
