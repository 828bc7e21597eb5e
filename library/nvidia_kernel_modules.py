#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module nvidia_kernel_modules: unload and load the NVIDIA modules, stopping what holds them."""

DOCUMENTATION = r"""
---
module: nvidia_kernel_modules
short_description: Unload and load the NVIDIA kernel modules, stopping the services that hold the GPU
description:
  - O(state=absent) stops the running services among O(stop_services), then unloads the loaded modules among
    O(names), in that order, with C(modprobe -r). When one cannot be unloaded (a process has the GPU open),
    what was unloaded is loaded again and the stopped services are started again, so the host is left as it
    was; the busy modules are reported in RV(busy), or the task fails with O(fail_on_busy).
  - O(state=present) loads the modules of O(load) that are not loaded, with C(modprobe), then starts
    O(start_services).
  - O(state=reloaded) does both - unload (as above), then, when nothing stayed busy, load O(load) and every
    module it unloaded (C(nvidia_peermem), C(nvidia_drm), ...; RV(restored)), the last unloaded first, and
    start again the services it stopped. With a busy module the old driver keeps running and RV(busy) says
    why; the caller decides about a reboot.
  - A module that will not load fails the task, naming it and modprobe's message, once the others are loaded
    and (when C(nvidia) is) the services started again. So C(nvidia_peermem), loaded before a reload and not
    loading again (C(ib_core) missing), leaves the node its driver and fails the task saying that GPUDirect
    RDMA is off - a failure, not a warning, as the node had it before.
  - Which modules are loaded is read from C(<proc_root>/modules) (C(<sysfs_root>/module) without it).
options:
  names:
    description: Module names, in the order to unload them.
    type: list
    elements: str
    default: [nvidia_uvm, nvidia_drm, nvidia_modeset, nvidia_peermem, nvidia]
  load:
    description: Modules to load, the last first (loading one loads what it depends on).
    type: list
    elements: str
    default: [nvidia_uvm, nvidia]
  state:
    description: Whether the modules should be loaded, unloaded, or unloaded and loaded again.
    type: str
    choices: [present, absent, reloaded]
    default: present
  stop_services:
    description:
      - Services stopped (when running) before unloading. With O(state=reloaded) they are started again
        once the modules are loaded; with O(state=absent) they stay stopped (RV(stopped)) unless a module
        stays busy.
    type: list
    elements: str
    default: []
  start_services:
    description: Services started after loading (those an earlier O(state=absent) run stopped).
    type: list
    elements: str
    default: []
  proc_root:
    description: Where procfs is mounted (a fake tree in tests).
    type: path
    default: /proc
  sysfs_root:
    description: Where sysfs is mounted (a fake tree in tests).
    type: path
    default: /sys
  fail_on_busy:
    description: Fail when a module cannot be unloaded (after putting back what was changed).
    type: bool
    default: false
  version:
    description:
      - With O(state=present) or O(state=reloaded), the driver (a full version, or a branch such as V(580))
        that the nvidia module on disk for the running kernel (C(modinfo -k)) must be; otherwise the task
        fails before any service is stopped or module unloaded, so a failed install never takes away the
        running driver. Not checked in check mode (a simulated install leaves nothing on disk).
    type: str
extends_documentation_fragment:
  - module_attributes.no_diff
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Replace the running driver with the one on disk
  nvidia_kernel_modules:
    state: reloaded
    stop_services: [nvidia-persistenced, nvidia-fabricmanager]
  register: reload

- name: Unload before the .run installer, refusing when the GPU is busy
  nvidia_kernel_modules:
    state: absent
    stop_services: [nvidia-persistenced]
    fail_on_busy: true
"""

RETURN = r"""
loaded:
  description: Modules loaded by this run (in the order loaded).
  returned: always
  type: list
  elements: str
unloaded:
  description: Modules unloaded by this run (with O(state=reloaded), RV(restored) are loaded again).
  returned: always
  type: list
  elements: str
restored:
  description: Modules this run unloaded and loaded again (O(state=reloaded)), in the order loaded.
  returned: always
  type: list
  elements: str
busy:
  description: Modules that could not be unloaded, with modprobe's message.
  returned: always
  type: dict
stopped:
  description: Services this run stopped (and did not start again).
  returned: always
  type: list
  elements: str
nvidia_loaded:
  description: Whether the nvidia module is loaded when the module ends.
  returned: always
  type: bool
on_disk_version:
  description: The driver version of the nvidia module on disk for the running kernel (it is O(version)).
  returned: when O(version) was checked
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.driver.driver import (
    LOAD_MODULES,
    MODULE_NEEDS,
    NVIDIA_MODULES,
    DriverError,
    version_matches,
)
from ansible.module_utils.gpunode.driver.gpu import read_loaded
from ansible.module_utils.gpunode.driver.host import read_module_on_disk
from ansible.module_utils.gpunode.host import systemd
from ansible.module_utils.gpunode.host.commands import Host
from ansible.module_utils.gpunode.host.files import is_dir


def build_module():
    return AnsibleModule(
        argument_spec={
            "names": {"type": "list", "elements": "str", "default": list(NVIDIA_MODULES)},
            "load": {"type": "list", "elements": "str", "default": list(LOAD_MODULES)},
            "state": {"type": "str", "choices": ["present", "absent", "reloaded"], "default": "present"},
            "stop_services": {"type": "list", "elements": "str", "default": []},
            "start_services": {"type": "list", "elements": "str", "default": []},
            "proc_root": {"type": "path", "default": "/proc"},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "fail_on_busy": {"type": "bool", "default": False},
            "version": {"type": "str"},
        },
        supports_check_mode=True,
    )


class Modules:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.modprobe = module.get_bin_path("modprobe", required=True)
        self.host = Host(module)
        self.result = {"changed": False, "loaded": [], "unloaded": [], "restored": [], "busy": {},
                       "stopped": []}

    def loaded(self):
        return set(read_loaded(self.params["sysfs_root"], self.params["proc_root"])["modules"])

    def _run(self, argv):
        return self.host.run(argv)

    def stop_services(self):
        for name in self.params["stop_services"]:
            if not systemd.is_active(self.host, name):  # False without systemd
                continue
            if not self.module.check_mode:
                error = systemd.control(self.host, "stop", name)
                if error:
                    self.module.fail_json(msg=f"systemctl stop {name} failed: {error}", **self.result)
            self.result["stopped"].append(name)

    def start_services(self, names):
        for name in names:
            if not self.module.check_mode:
                error = systemd.control(self.host, "start", name)
                if error:
                    self.module.fail_json(msg=f"systemctl start {name} failed: {error}", **self.result)
            if name in self.result["stopped"]:
                self.result["stopped"].remove(name)
            else:
                self.result.setdefault("started", []).append(name)

    def unload(self):
        for name in self.params["names"]:
            if name not in self.loaded():
                continue
            if self.module.check_mode:
                self.result["unloaded"].append(name)
                continue
            rc, out, err = self._run([self.modprobe, "-r", name])
            if rc == 0 and name not in self.loaded():
                self.result["unloaded"].append(name)
            else:
                self.result["busy"][name] = err.strip() or out.strip() or f"still loaded (rc {rc})"
                break  # what depends on a busy module stays too

    def load(self, names):
        """Load ``names``, the last first; ``{name: modprobe's message}`` of those that would not load."""
        failed = {}
        for name in reversed(names):
            if name in self.loaded() or (self.module.check_mode and name in self.result["unloaded"]):
                continue
            if not self.module.check_mode:
                rc, out, err = self._run([self.modprobe, name])
                if rc != 0:
                    failed[name] = err.strip() or out.strip() or f"rc {rc}"
                    continue
            self.result["loaded"].append(name)
        return failed

    def fail_load(self, failed):
        self.module.fail_json(msg="; ".join(f"modprobe {name} failed: {message}" + (
            f" ({MODULE_NEEDS[name]})" if name in MODULE_NEEDS else "") for name, message in failed.items()),
            **self.result)

    def put_back(self):
        """A module stayed busy: load again what was unloaded, start what was stopped."""
        unloaded = self.result["unloaded"]
        self.result["unloaded"] = []
        failed = self.load(unloaded)
        self.result["loaded"] = []
        self.start_services(list(self.result["stopped"]))
        if failed:
            self.fail_load(failed)


def running_kernel():
    return os.uname().release


def module_on_disk(host, wanted):
    """``(version, problem)``: the running kernel's nvidia module on disk, and why it is not
    ``wanted`` (None when it is)."""
    kernel = running_kernel()
    try:
        on_disk = (read_module_on_disk(host, kernel) or {}).get("version")
    except DriverError as exc:
        return None, str(exc)
    if version_matches(on_disk, wanted):
        return on_disk, None
    return on_disk, f"the nvidia module on disk for kernel {kernel} is {on_disk or 'absent'}, wanted {wanted}"


def run(module):
    params = module.params
    modules = Modules(module)
    result = modules.result
    if params["version"] and params["state"] != "absent" and not module.check_mode:
        result["on_disk_version"], problem = module_on_disk(modules.host, params["version"])
        if problem:
            module.fail_json(msg=f"{problem}: nothing was stopped, unloaded or loaded", **result)
    if params["state"] in ("absent", "reloaded"):
        if any(name in modules.loaded() for name in params["names"]):
            modules.stop_services()
            modules.unload()
        if result["busy"]:
            modules.put_back()
            if params["fail_on_busy"]:
                module.fail_json(msg=f"cannot unload {', '.join(result['busy'])}: "
                                     f"{'; '.join(result['busy'].values())}; the modules and services were "
                                     "put back as they were", **result)
    if params["state"] in ("present", "reloaded") and not result["busy"]:
        # every module unloaded goes back, the last unloaded first (nvidia_peermem after nvidia)
        failed = modules.load([n for n in params["load"] if n not in result["unloaded"]] + result["unloaded"])
        result["restored"] = [name for name in result["loaded"] if name in result["unloaded"]]
        if not failed or "nvidia" in modules.loaded():  # the driver is there: what held it starts again
            restart = list(result["stopped"]) if params["state"] == "reloaded" else []
            modules.start_services(restart + [s for s in params["start_services"] if s not in restart])
        if failed:
            modules.fail_load(failed)
    result["changed"] = any(result.get(key) for key in ("loaded", "unloaded", "stopped", "started"))
    if module.check_mode:
        result["nvidia_loaded"] = params["state"] != "absent" and not result["busy"]
    else:
        result["nvidia_loaded"] = "nvidia" in modules.loaded()
    return result


def main():
    module = build_module()
    if not is_dir(module.params["proc_root"]):
        module.fail_json(msg=f"proc_root {module.params['proc_root']}: no such directory")
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
