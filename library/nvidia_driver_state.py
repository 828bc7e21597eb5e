#!/usr/bin/python
"""Ansible module nvidia_driver_state: what NVIDIA driver a host has, and what to do."""

import glob
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.nvidia_driver import (
    NVIDIA_MODULES,
    SECURE_BOOT_EFIVAR,
    DriverError,
    kernel_module_type,
    module_from_modinfo,
    parse_dkms_status,
    parse_efi_secure_boot,
    parse_mokutil_sb_state,
    parse_proc_driver_version,
    parse_proc_modules,
    parse_smi_query,
    plan,
    resolve_wanted,
    runfile_flags,
    userspace_version_from_names,
)

DOCUMENTATION = r"""
---
module: nvidia_driver_state
short_description: Read the NVIDIA driver state of a host and plan the change to a wanted version
description:
  - Reads, without changing anything, the NVIDIA kernel module on disk for a kernel (C(modinfo -k)),
    the DKMS registrations (C(dkms status)), the loaded module (sysfs and C(/proc/driver/nvidia/version)),
    the userspace version (C(libnvidia-ml.so.<version>)), what C(nvidia-smi) reports, whether kernel
    headers are present, whether nouveau is loaded and the Secure Boot state.
  - With O(wanted), also returns the plan to get there (install, rebuild for this kernel, unload, load,
    reboot), so that no task parses command output.
  - With O(gpu_device_ids) (from the C(nvidia_gpu) facts), first decides what is wanted from O(version),
    O(branch) or O(recommended_branch), refusing a branch that cannot drive every GPU or a kernel module
    type the GPUs cannot take, and returns it as RV(request) (with the runfile installer's options).
options:
  wanted:
    description: >-
      Wanted branch (V(535)) or full version (V(535.129.03)); RV(request) decides instead when
      O(gpu_device_ids) is set.
    type: str
  version:
    description: A full driver version the user asked for.
    type: str
  branch:
    description: A driver branch the user asked for.
    type: str
  supported_branches:
    description: Branches that drive every GPU on the host (the facts' C(supported_branches)).
    type: list
    elements: str
    default: []
  recommended_branch:
    description: The branch used when neither O(version) nor O(branch) is set.
    type: str
  check_branch:
    description: Refuse a O(branch) or O(version) outside O(supported_branches).
    type: bool
    default: true
  gpu_device_ids:
    description: PCI device IDs of the host's GPUs (lower-case hex), to decide the kernel module type.
    type: list
    elements: str
  module_type:
    description: Kernel module type wanted.
    type: str
    choices: [auto, open, proprietary]
    default: auto
  signing_key:
    description: Module signing secret key on the host (runfile options).
    type: path
  signing_cert:
    description: Module signing public key (DER certificate) on the host (runfile options).
    type: path
  kernel:
    description: Kernel release to look at; default the running one.
    type: str
  sysfs_root:
    description: Where sysfs is mounted (a fake tree in tests).
    type: path
    default: /sys
  proc_root:
    description: Where procfs is mounted (a fake tree in tests).
    type: path
    default: /proc
  modules_dir:
    description: Directory holding C(<kernel>/build) and the installed modules.
    type: path
    default: /lib/modules
  lib_dirs:
    description: Directories searched for C(libnvidia-ml.so.<version>) (one level of subdirectories too).
    type: list
    elements: path
    default: [/usr/lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu, /usr/lib64, /usr/lib]
  query_smi:
    description: Ask C(nvidia-smi) for the driver version and persistence mode when a module is loaded.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
author: gpunode
"""

EXAMPLES = r"""
- name: Read the driver state and plan for 535.129.03
  nvidia_driver_state:
    wanted: "535.129.03"
  register: driver_state

- name: Install only when needed
  ansible.builtin.debug:
    msg: "{{ driver_state.plan.reasons }}"
  when: driver_state.plan.install
"""

RETURN = r"""
kernel:
  description: The kernel release looked at.
  returned: always
  type: str
headers_present:
  description: Whether C(<modules_dir>/<kernel>/build) exists (kernel headers for DKMS).
  returned: always
  type: bool
module_on_disk:
  description: >-
    The nvidia module that C(modprobe) would load for the kernel (path, version, flavor, kernel), or null.
  returned: always
  type: dict
dkms:
  description: C(dkms status) entries of the nvidia module (module, version, kernel, arch, status, warning).
  returned: always
  type: list
  elements: dict
loaded:
  description: The loaded nvidia module (version, flavor), or null.
  returned: always
  type: dict
loaded_modules:
  description: Names of the loaded NVIDIA kernel modules.
  returned: always
  type: list
  elements: str
nouveau_loaded:
  description: Whether nouveau is loaded.
  returned: always
  type: bool
userspace_version:
  description: Version of the installed userspace driver (libnvidia-ml), or null.
  returned: always
  type: str
secure_boot:
  description: Secure Boot state (true/false), null when it cannot be told.
  returned: always
  type: bool
smi:
  description: What nvidia-smi says (driver_versions, persistence_mode per GPU) or error; null when not asked.
  returned: always
  type: dict
request:
  description: >-
    With O(gpu_device_ids) - branch, version (or null), wanted (version or branch), module_type and
    runfile_flags (null without a version).
  returned: when gpu_device_ids is set
  type: dict
plan:
  description: With O(wanted) - install, dkms_build, unload, load, reboot_required, up_to_date, reasons.
  returned: when wanted is set
  type: dict
"""

LIB_DIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"]
C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}


def build_module():
    return AnsibleModule(
        argument_spec={
            "wanted": {"type": "str"},
            "version": {"type": "str"},
            "branch": {"type": "str"},
            "supported_branches": {"type": "list", "elements": "str", "default": []},
            "recommended_branch": {"type": "str"},
            "check_branch": {"type": "bool", "default": True},
            "gpu_device_ids": {"type": "list", "elements": "str"},
            "module_type": {"type": "str", "choices": ["auto", "open", "proprietary"], "default": "auto"},
            "signing_key": {"type": "path"},
            "signing_cert": {"type": "path"},
            "kernel": {"type": "str"},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "proc_root": {"type": "path", "default": "/proc"},
            "modules_dir": {"type": "path", "default": "/lib/modules"},
            "lib_dirs": {
                "type": "list",
                "elements": "path",
                "default": LIB_DIRS,
            },
            "query_smi": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )


def _read(path, mode="r"):
    try:
        with open(path, mode) as handle:
            return handle.read()
    except (FileNotFoundError, NotADirectoryError):
        return None


def _run(module, argv):
    return module.run_command(argv, environ_update=C_LOCALE)


def read_module_on_disk(module, kernel):
    modinfo = module.get_bin_path("modinfo")
    if not modinfo:
        module.fail_json(msg="modinfo not found (install kmod)")
    rc, out, _err = _run(module, [modinfo, "-k", kernel, "nvidia"])
    if rc != 0:
        return None
    try:
        return module_from_modinfo(out)
    except DriverError as exc:
        module.fail_json(msg=f"modinfo -k {kernel} nvidia: {exc}")
    return None


def read_dkms(module):
    dkms = module.get_bin_path("dkms")
    if not dkms:
        return []
    rc, out, err = _run(module, [dkms, "status", "nvidia"])
    if rc != 0:
        module.fail_json(msg=f"dkms status nvidia failed: {err.strip() or out.strip()}")
    return [e for e in parse_dkms_status(out) if e["module"] == "nvidia"]


def read_loaded(params):
    text = _read(os.path.join(params["proc_root"], "modules")) or ""
    names = parse_proc_modules(text)
    loaded = None
    if "nvidia" in names:
        version = (_read(os.path.join(params["sysfs_root"], "module", "nvidia", "version")) or "").strip()
        flavor = None
        proc_version = _read(os.path.join(params["proc_root"], "driver", "nvidia", "version"))
        if proc_version:
            try:
                parsed = parse_proc_driver_version(proc_version)
                version = version or parsed["version"]
                flavor = parsed["flavor"]
            except DriverError:
                pass
        loaded = {"version": version or None, "flavor": flavor}
    return loaded, [n for n in NVIDIA_MODULES if n in names], "nouveau" in names


def read_userspace(params):
    names = []
    for directory in params["lib_dirs"]:
        for pattern in ("libnvidia-ml.so.*", "*/libnvidia-ml.so.*"):
            names.extend(os.path.basename(p) for p in glob.glob(os.path.join(directory, pattern)))
    return userspace_version_from_names(names)


def read_secure_boot(module, sysfs_root):
    efi = os.path.join(sysfs_root, "firmware", "efi")
    data = _read(os.path.join(efi, "efivars", SECURE_BOOT_EFIVAR), "rb")
    if data is not None:
        try:
            return parse_efi_secure_boot(data)
        except DriverError as exc:
            module.fail_json(msg=f"{efi}/efivars/{SECURE_BOOT_EFIVAR}: {exc}")
    if not os.path.isdir(efi):
        return False  # booted by BIOS: no Secure Boot
    mokutil = module.get_bin_path("mokutil")
    if mokutil:
        _rc, out, err = _run(module, [mokutil, "--sb-state"])
        return parse_mokutil_sb_state(out + err)
    return None


def read_smi(module):
    smi = module.get_bin_path("nvidia-smi")
    if not smi:
        return {"error": "nvidia-smi not found", "driver_versions": [], "persistence_mode": []}
    rc, out, err = _run(module, [smi, "--query-gpu=driver_version,persistence_mode", "--format=csv,noheader"])
    if rc != 0:
        return {
            "error": (out.strip() or err.strip() or f"rc {rc}"),
            "driver_versions": [],
            "persistence_mode": [],
        }
    try:
        result = parse_smi_query(out)
    except DriverError as exc:
        return {"error": str(exc), "driver_versions": [], "persistence_mode": []}
    result["error"] = None
    return result


def build_request(params):
    chosen = resolve_wanted(
        version=params["version"],
        branch=params["branch"],
        supported_branches=params["supported_branches"],
        recommended_branch=params["recommended_branch"],
        check_gpus=params["check_branch"],
    )
    module_type = kernel_module_type(params["module_type"], chosen["branch"], params["gpu_device_ids"])
    flags = None
    if chosen["version"]:
        flags = runfile_flags(
            chosen["version"],
            module_type,
            signing_key=params["signing_key"],
            signing_cert=params["signing_cert"],
        )
    return {
        "branch": chosen["branch"],
        "version": chosen["version"],
        "wanted": chosen["version"] or chosen["branch"],
        "module_type": module_type,
        "runfile_flags": flags,
    }


def run(module):
    params = module.params
    request = None
    if params["gpu_device_ids"] is not None:
        request = build_request(params)
    kernel = params["kernel"] or os.uname().release
    loaded, loaded_modules, nouveau_loaded = read_loaded(params)
    state = {
        "kernel": kernel,
        "headers_present": os.path.isdir(os.path.join(params["modules_dir"], kernel, "build")),
        "module_on_disk": read_module_on_disk(module, kernel),
        "dkms": read_dkms(module),
        "loaded": loaded,
        "loaded_modules": loaded_modules,
        "nouveau_loaded": nouveau_loaded,
        "userspace_version": read_userspace(params),
        "secure_boot": read_secure_boot(module, params["sysfs_root"]),
        "smi": read_smi(module) if params["query_smi"] and loaded else None,
    }
    wanted = request["wanted"] if request else params["wanted"]
    if request:
        state["request"] = request
    if wanted:
        state["plan"] = plan(state, wanted)
    state["changed"] = False
    return state


def main():
    module = build_module()
    try:
        result = run(module)
    except DriverError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
