#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module nvidia_mig: converge a host's MIG geometry to a mig-parted v1 layout."""

DOCUMENTATION = r"""
---
module: nvidia_mig
short_description: Converge the MIG mode and the GPU and compute instances of a host's GPUs
description:
  - Applies one named layout of a config in mig-parted's v1 format (C(version) V(v1))
    (U(https://github.com/NVIDIA/mig-parted)). C(mig-configs) maps names to lists of
    C({devices, device-filter, mig-enabled, mig-devices}); a GPU takes the first entry whose C(devices)
    (V(all) or indices) and C(device-filter) (PCI device and vendor id as V(0xDEVICEVENDOR), e.g.
    V(0x233010DE); one or a list) match it. GPUs no entry matches are left as they are.
  - Enables or disables MIG mode per GPU and destroys and creates GPU instances, each with its full
    compute instance (C(nvidia-smi mig -cgi ... -C)), until C(nvidia-smi) shows exactly the layout; a
    converged host is not touched. Profiles are GPU instance profiles by their nvidia-smi names
    (V(1g.10gb), V(1g.10gb+me)).
  - Everything is read and judged before anything changes. It refuses, naming the GPU - a GPU without
    MIG (C(mig.mode.current) V([N/A]), e.g. T4 and consumer cards) that the layout asks MIG for; a
    profile the GPU does not have (listing the ones it has, from C(nvidia-smi mig -lgip)); more instances
    or compute slices than the GPU holds; a GPU whose layout must change while compute processes use it
    (naming PID and process).
  - A MIG mode change takes effect at a GPU reset (C(nvidia-smi --gpu-reset)). With O(drain), the
    system services that hold GPUs (O(drain_services) - DCGM, its exporter, the persistence daemon, the
    fabric manager of NVSwitch systems) are stopped around the reset and started again; users' processes
    are never stopped. A reset that fails leaves the mode pending - RV(reboot_required) is true, and that
    GPU's instances are neither created nor reported as applied.
  - Instances do not survive a reboot; the C(nvidia_mig) role installs a boot unit that applies the
    layout again.
requirements:
  - PyYAML (the distribution's python3-yaml) on the managed node, for a YAML O(config_file) only
options:
  config:
    description: The mig-parted document (C(version) V(v1)) as a dict.
    type: dict
  config_file:
    description: A file on the host holding that document (YAML or JSON), e.g. mig-parted's C(config.yaml).
    type: path
  selected:
    description: The name of the layout under C(mig-configs) to apply.
    type: str
    required: true
  nvidia_smi:
    description: The nvidia-smi to run; default the one found on PATH, else under an image's prefix
      (C(/usr/local/nvidia/bin), C(/home/kubernetes/bin/nvidia/bin)...).
    type: path
  drain:
    description: Stop O(drain_services) (those active) around a GPU reset, and start them again.
    type: bool
    default: false
  drain_services:
    description: The systemd units O(drain) stops, in this order (started again in reverse).
    type: list
    elements: str
    default:
      - dcgm-exporter.service
      - nvidia-dcgm.service
      - nvidia-persistenced.service
      - nvidia-fabricmanager.service
extends_documentation_fragment:
  - module_attributes
  - node_lock
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Seven 1g.10gb instances on every H100
  nvidia_mig:
    selected: all-1g.10gb
    config:
      version: v1
      mig-configs:
        all-1g.10gb:
          - devices: all
            device-filter: ["0x233010DE", "0x233110DE"]
            mig-enabled: true
            mig-devices: {"1g.10gb": 7}
  register: mig

- name: Mixed on GPU 0, MIG off elsewhere, from mig-parted's own file
  nvidia_mig:
    config_file: /etc/nvidia-mig-manager/config.yaml
    selected: custom-mixed
    drain: true
"""

RETURN = r"""
systemd:
  description: Whether the host has systemd (C(systemctl)); without it no boot unit can apply the layout
    again at boot, and O(drain) has no services to stop.
  returned: always
  type: bool
changed:
  description: Whether MIG mode or instances were (or in check mode would be) changed.
  returned: always
  type: bool
reset_required:
  description: A MIG mode change waits for a GPU reset (check mode - would need one; a run - one that failed).
  returned: always
  type: bool
reboot_required:
  description: The GPU reset the MIG mode needs failed; reboot, then run again. The layout is not applied.
  returned: always
  type: bool
gpus:
  description: Per GPU index that the layout names, its MIG state before and after (predicted in check mode).
  returned: always
  type: dict
  contains:
    before:
      description: C(mig_enabled), C(instances) (profile -> count), C(mig_pending) when a mode change waits.
      type: dict
    after:
      description: The same after the run.
      type: dict
  sample: {"0": {"before": {"mig_enabled": false, "instances": {}},
                 "after": {"mig_enabled": true, "instances": {"1g.10gb": 7}}}}
commands:
  description: The nvidia-smi commands that changed something, in order.
  returned: always
  type: list
  elements: str
  sample: ["nvidia-smi -i 0 -mig 1", "nvidia-smi --gpu-reset -i 0", "nvidia-smi mig -i 0 -cgi 19,19 -C"]
reasons:
  description: Why a reset or reboot is (or would be) needed.
  returned: always
  type: list
  elements: str
changes:
  description: One line for the run's summary when a GPU's layout changed (or would, in check mode).
  returned: always
  type: list
  elements: str
  sample: ["MIG hgx-mixed: GPU 0-3 -> 7x1g.10gb; GPU 4-7 -> 2x1g.10gb, 1x2g.20gb, 1x3g.40gb"]
diff:
  description: Per GPU, MIG mode and instances before and after.
  returned: when diff mode is on
  type: dict
"""

import json

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.gpunode.driver.mig import (
    DRAIN_SERVICES,
    MigError,
    Services,
    Smi,
    converge,
    diff_text,
    parse_config,
)
from ansible.module_utils.gpunode.driver.roots import TOOL_PREFIXES, find_smi
from ansible.module_utils.gpunode.formats import k8s_names, values
from ansible.module_utils.gpunode.formats.yaml_edit import YAML_IMPORT_ERROR, yaml
from ansible.module_utils.gpunode.formats.yaml_load import safe_load
from ansible.module_utils.gpunode.host import systemd
from ansible.module_utils.gpunode.host.commands import Host
from ansible.module_utils.gpunode.host.files import read_text
from ansible.module_utils.gpunode.host.lock import LOCK_OPTION, exit_run

ARGUMENT_SPEC = {
    "config": {"type": "dict"},
    "config_file": {"type": "path"},
    "selected": {"type": "str", "required": True},
    "nvidia_smi": {"type": "path"},
    "drain": {"type": "bool", "default": False},
    "drain_services": {"type": "list", "elements": "str", "default": list(DRAIN_SERVICES)},
    **LOCK_OPTION,
}

# The syntax of the values that land in a file or on a command line, checked before anything runs:
# the layout's name goes into gpunode-mig.service's ExecStart= and, with NVIDIA's mig-manager, into
# the node label nvidia.com/mig.config (a label value); nvidia-smi and the services are run by name.
VALUE_RULES = {
    "selected": k8s_names.label_value,
    "nvidia_smi": values.command,
    "config_file": values.path,
    "drain_services[]": values.unit_name,
}


def build_module():
    return AnsibleModule(argument_spec=dict(ARGUMENT_SPEC), supports_check_mode=True,
                         mutually_exclusive=[("config", "config_file")],
                         required_one_of=[("config", "config_file")])


def load_config(module, path):
    text = read_text(path, MigError)
    if text is None:
        raise MigError(f"{path}: no such file")
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise MigError(f"{path}: not valid JSON ({exc})") from None
    if YAML_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("PyYAML (python3-yaml)"), exception=YAML_IMPORT_ERROR)
    try:
        return safe_load(text)
    except yaml.YAMLError as exc:
        raise MigError(f"{path}: not valid YAML ({' '.join(str(exc).split())})") from None


def run(module, commands):
    params = module.params
    try:
        values.check(params, VALUE_RULES)
    except values.ValueSyntaxError as exc:
        raise MigError(f"{exc}; nothing was run") from None
    source = params["config_file"] or "config"
    doc = params["config"] if params["config"] is not None else load_config(module, source)
    entries = parse_config(doc, params["selected"], source)

    host = Host(module)
    smi_path = params["nvidia_smi"] or find_smi(host.which)
    if not smi_path:
        raise MigError(f"nvidia-smi not found on PATH nor under {', '.join(TOOL_PREFIXES)}; "
                       "set nvidia_mig_nvidia_smi")
    smi = Smi(host.run, smi_path, commands)
    has_systemd = systemd.available(host)
    services = None
    if params["drain"] and has_systemd:
        services = Services(params["drain_services"], lambda name: systemd.is_active(host, name),
                            lambda verb, name: systemd.control(host, verb, name))
    result = converge(smi, entries, params["selected"], module.check_mode, services)
    result["systemd"] = has_systemd
    if module._diff:
        result["diff"] = {"before": diff_text(result["gpus"], "before"),
                          "after": diff_text(result["gpus"], "after")}
    return result


def main():
    commands = []  # what ran before a refusal or a failed command, for the failure's result
    exit_run(build_module(), lambda module: run(module, commands), (MigError,),
             failed=lambda exc: {"changed": bool(commands), "commands": commands})


if __name__ == "__main__":
    main()
