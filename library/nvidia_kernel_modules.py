#!/usr/bin/python
"""Ansible module nvidia_kernel_modules: load or unload the NVIDIA kernel modules."""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nvidia_driver import NVIDIA_MODULES, parse_proc_modules

DOCUMENTATION = r"""
---
module: nvidia_kernel_modules
short_description: Load or unload the NVIDIA kernel modules, reporting the ones that are busy
description:
  - With O(state=absent), unloads the loaded modules among O(names), in that order, with C(modprobe -r).
    A module that cannot be unloaded (in use) is reported in RV(busy) rather than failing, unless
    O(fail_on_busy) is set, so a role can still put the new driver on disk and ask for a reboot.
  - With O(state=present), loads the modules of O(names) that are not loaded, with C(modprobe).
  - Which modules are loaded is read from C(<proc_root>/modules).
options:
  names:
    description: Module names, in the order to unload them (loading goes in reverse).
    type: list
    elements: str
    default: [nvidia_uvm, nvidia_drm, nvidia_modeset, nvidia_peermem, nvidia]
  state:
    description: Whether the modules should be loaded.
    type: str
    choices: [present, absent]
    default: present
  proc_root:
    description: Where procfs is mounted (a fake tree in tests).
    type: path
    default: /proc
  fail_on_busy:
    description: Fail when a module cannot be unloaded.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
author: gpunode
"""

EXAMPLES = r"""
- name: Unload the driver before replacing it
  nvidia_kernel_modules:
    state: absent
  register: unload

- name: Load nvidia and nvidia_uvm
  nvidia_kernel_modules:
    names: [nvidia_uvm, nvidia]
    state: present
"""

RETURN = r"""
loaded:
  description: Modules loaded by this run (in the order loaded).
  returned: always
  type: list
  elements: str
unloaded:
  description: Modules unloaded by this run.
  returned: always
  type: list
  elements: str
busy:
  description: Modules that could not be unloaded, with modprobe's message.
  returned: always
  type: dict
"""

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}


def build_module():
    return AnsibleModule(
        argument_spec={
            "names": {"type": "list", "elements": "str", "default": list(NVIDIA_MODULES)},
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "proc_root": {"type": "path", "default": "/proc"},
            "fail_on_busy": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )


def loaded_modules(proc_root):
    path = os.path.join(proc_root, "modules")
    try:
        with open(path) as handle:
            return set(parse_proc_modules(handle.read()))
    except FileNotFoundError:
        return set()


def run(module):
    params = module.params
    result = {"changed": False, "loaded": [], "unloaded": [], "busy": {}}
    modprobe = module.get_bin_path("modprobe", required=True)
    if params["state"] == "absent":
        for name in params["names"]:
            if name not in loaded_modules(params["proc_root"]):
                continue
            if module.check_mode:
                result["unloaded"].append(name)
                continue
            rc, out, err = module.run_command([modprobe, "-r", name], environ_update=C_LOCALE)
            if rc == 0 and name not in loaded_modules(params["proc_root"]):
                result["unloaded"].append(name)
            else:
                result["busy"][name] = err.strip() or out.strip() or f"still loaded (rc {rc})"
                break  # what depends on a busy module stays too
        if result["busy"] and params["fail_on_busy"]:
            module.fail_json(
                msg=f"cannot unload {', '.join(result['busy'])}: {'; '.join(result['busy'].values())}",
                **result,
            )
    else:
        for name in reversed(params["names"]):
            if name in loaded_modules(params["proc_root"]):
                continue
            if not module.check_mode:
                rc, out, err = module.run_command([modprobe, name], environ_update=C_LOCALE)
                if rc != 0:
                    module.fail_json(msg=f"modprobe {name} failed: {err.strip() or out.strip()}", **result)
            result["loaded"].append(name)
    result["changed"] = bool(result["loaded"] or result["unloaded"])
    return result


def main():
    module = build_module()
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
