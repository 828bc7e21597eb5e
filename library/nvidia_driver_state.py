#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module nvidia_driver_state: the NVIDIA driver of a host, and the plan to the wanted one."""

DOCUMENTATION = r"""
---
module: nvidia_driver_state
short_description: Read the NVIDIA driver state of a host in one call and plan the change to the wanted driver
description:
  - Decides what is wanted from O(version), O(branch) or the GPU facts' recommended branch, refusing a
    branch that cannot drive every GPU, a kernel module type the GPUs cannot take (Grace Hopper and Blackwell
    need the open modules), a package source without the packages, or a runfile without its checksum.
  - Reads, without changing anything, everything the driver role decides from - the userspace driver
    (C(libnvidia-ml.so.<version>)), the module on disk for the kernel (C(modinfo -k)), DKMS registrations
    (only when the module is missing), the loaded modules (sysfs, C(/proc)), dpkg's packages, holds and
    whether a dpkg run was interrupted, the persistence daemon and fabric manager units, the nouveau
    blacklist, Secure Boot, the signing keys and, when it installs, whether apt's index knows the packages.
  - Returns the plan (RV(plan)) and publishes C(ansible_facts.nvidia_driver) - with O(stage=plan) the state
    the run will leave as far as it can be predicted (check mode included), with O(stage=final) the state
    read after the run, with the lines that say what changed.
  - Without O(gpu), detects the GPUs itself (the C(nvidia_gpu_facts) logic, with its O(pci_ids_path),
    O(require_gpu) and O(require_branch)) and publishes C(ansible_facts.nvidia_gpu) too, so a run that
    starts with the driver reads the host once for both.
  - Needs no gathered facts - the distribution, its version, the machine and the kernel are read on the
    host (Ansible's own C(get_distribution) and C(get_distribution_version), the ones fact gathering uses)
    unless given.
  - O(stage=installed) and O(stage=final) verify - the wanted driver must be on disk; at the final stage a
    loaded driver must be the wanted one and answer C(nvidia-smi) on every GPU unless a reboot is pending.
options:
  stage:
    description: V(plan) before the run, V(installed) after installing, V(final) at the end.
    type: str
    choices: [plan, installed, final]
    default: plan
  gpu:
    description: The C(nvidia_gpu) facts; detected here when omitted.
    type: dict
  pci_ids_path:
    description: Without O(gpu) - the C(pci.ids) file to name devices from (as C(nvidia_gpu_facts));
      default the system's, if any.
    type: path
  require_gpu:
    description: Without O(gpu) - fail on a host where no NVIDIA GPU is found (as C(nvidia_gpu_facts)).
    type: bool
    default: false
  require_branch:
    description: Without O(gpu) - fail on a host with GPUs that no single driver branch drives (as
      C(nvidia_gpu_facts)).
    type: bool
    default: false
  method:
    description: V(packages) or V(runfile).
    type: str
    choices: [packages, runfile]
    default: packages
  version:
    description: A full driver version the user asked for.
    type: str
  branch:
    description: A driver branch the user asked for.
    type: str
  check_branch:
    description: Refuse a O(branch) or O(version) that cannot drive every GPU.
    type: bool
    default: true
  module_type:
    description: Kernel module type wanted.
    type: str
    choices: [auto, open, proprietary]
    default: auto
  package_source:
    description: V(distro) (the distribution's archive) or V(cuda) (NVIDIA's CUDA repository).
    type: str
    choices: [distro, cuda]
    default: distro
  apt_repository:
    description: An apt source line to use instead of the default for the source.
    type: str
  apt_key_url:
    description: The repository's signing key URL.
    type: str
  keyring:
    description: Where the role stores the repository's key (the source line's C(signed-by)).
    type: path
    default: /etc/apt/keyrings/gpunode-nvidia-driver.asc
  hold:
    description: Hold the driver packages (converged on every run - a false value releases them).
    type: bool
    default: true
  install_prerequisites:
    description: Plan kernel headers, DKMS and a compiler when a build needs them.
    type: bool
    default: true
  blacklist_nouveau:
    description: Want nouveau blacklisted in O(blacklist_path).
    type: bool
    default: true
  blacklist_path:
    description: The modprobe.d file of the nouveau blacklist.
    type: path
    default: /etc/modprobe.d/blacklist-nouveau.conf
  persistence:
    description: Want C(nvidia-persistenced) enabled and running.
    type: bool
    default: true
  fabricmanager:
    description: The fabric manager at the driver's version - V(auto) (with NVSwitches), V(always), V(never).
    type: str
    choices: [auto, always, never]
    default: auto
  signing_key:
    description: Module signing secret key on the host.
    type: path
  signing_cert:
    description: Module signing public key (DER certificate) on the host.
    type: path
  runfile_url:
    description: Where the installer comes from (default NVIDIA's server for the version).
    type: str
  runfile_checksum:
    description: The installer's sha256 (V(sha256:<hex>) or V(<hex>)); required by the runfile method.
    type: str
  runfile_extra_flags:
    description: Further installer options.
    type: list
    elements: str
    default: []
  before:
    description: With O(stage=final) - the facts RV(before) of the plan stage, to say what changed.
    type: dict
  ran:
    description: With O(stage=final) - the plan the run carried out (RV(plan) of the plan stage).
    type: dict
  distribution:
    description: The distribution as C(ansible_facts.distribution) names it; default the host's, read as fact
      gathering reads it.
    type: str
  distribution_version:
    description: Its version as C(ansible_facts.distribution_version) gives it; default the host's.
    type: str
  architecture:
    description: The machine (C(ansible_facts.architecture)); default the module's own.
    type: str
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
  admindir:
    description: dpkg's database directory.
    type: path
    default: /var/lib/dpkg
  lib_dirs:
    description: Directories searched for C(libnvidia-ml.so.<version>) (one level of subdirectories too).
    type: list
    elements: path
    default: [/usr/lib/x86_64-linux-gnu, /usr/lib/aarch64-linux-gnu, /usr/lib64, /usr/lib]
  query_smi:
    description: Ask C(nvidia-smi) whether the loaded driver answers.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  platform:
    platforms: posix
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Read the driver state and plan the change to the recommended branch (detects the GPUs too)
  nvidia_driver_state:
  register: driver

- name: Change only when needed
  ansible.builtin.include_tasks: converge.yml
  when: not driver.plan.converged
"""

RETURN = r"""
ansible_facts:
  description: C(nvidia_driver) (method, branch, wanted, installed_version, loaded_version, module_type, held,
    reboot_required) and, when this module detected the GPUs, C(nvidia_gpu).
  returned: always
  type: dict
request:
  description: What is wanted - method, branch, version, wanted, module_type, packages (install, pin, hold),
    fabricmanager_package, headers_package, repository (line, key_url, and sources_text - the line as the
    deb822 .sources file the role writes), runfile (url, checksum, name, flags).
  returned: when the host has an NVIDIA GPU
  type: dict
plan:
  description: The steps - repair_dpkg, install, install_packages, refresh_index, prerequisites, dkms_build,
    dkms_version, unhold, hold, blacklist_nouveau, unload, load, reboot_required, persistence, fabricmanager,
    converged, disruptive, reasons.
  returned: when the host has an NVIDIA GPU
  type: dict
before:
  description: C(nvidia_driver) facts of the host as read (before the run).
  returned: when the host has an NVIDIA GPU
  type: dict
changes:
  description: One line per change - with O(stage=plan) the changes the plan will make (as far as they can be
    predicted), with O(stage=final) those the run made.
  returned: when the host has an NVIDIA GPU (stage final - when O(ran) and O(before) are given)
  type: list
  elements: str
state:
  description: What was read - distribution, distribution_version, architecture, kernel,
    headers_present, module_on_disk, dkms, loaded, userspace_version, dpkg_interrupted, services,
    blacklist_complete, secure_boot, smi, initramfs_command.
  returned: always
  type: dict
"""

import glob
import os
import platform

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.sys_info import get_distribution, get_distribution_version
from ansible.module_utils.dpkg_database import DpkgError, interrupted, parse_dpkg_query, parse_madison
from ansible.module_utils.nvidia_driver import (
    FABRICMANAGER,
    PERSISTENCED,
    SECURE_BOOT_EFIVAR,
    DriverError,
    blacklist_complete,
    build_request,
    change_lines,
    driver_facts,
    index_lookups,
    module_from_modinfo,
    needs_dkms_status,
    parse_dkms_status,
    parse_efi_secure_boot,
    parse_mokutil_sb_state,
    parse_smi_query,
    parse_systemctl_show,
    pending_reboot,
    plan,
    service_exists,
    userspace_version_from_names,
    version_matches,
)
from ansible.module_utils.nvidia_gpu import GpuDetectError, detect, read_loaded

LIB_DIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"]
C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
INITRAMFS_TOOLS = (("update-initramfs", ["-u"]), ("dracut", ["--force"]))


def build_module():
    return AnsibleModule(
        argument_spec={
            "stage": {"type": "str", "choices": ["plan", "installed", "final"], "default": "plan"},
            "gpu": {"type": "dict"},
            "pci_ids_path": {"type": "path"},
            "require_gpu": {"type": "bool", "default": False},
            "require_branch": {"type": "bool", "default": False},
            "method": {"type": "str", "choices": ["packages", "runfile"], "default": "packages"},
            "version": {"type": "str"},
            "branch": {"type": "str"},
            "check_branch": {"type": "bool", "default": True},
            "module_type": {"type": "str", "choices": ["auto", "open", "proprietary"], "default": "auto"},
            "package_source": {"type": "str", "choices": ["distro", "cuda"], "default": "distro"},
            "apt_repository": {"type": "str"},
            "apt_key_url": {"type": "str", "no_log": False},
            "keyring": {"type": "path", "default": "/etc/apt/keyrings/gpunode-nvidia-driver.asc"},
            "hold": {"type": "bool", "default": True},
            "install_prerequisites": {"type": "bool", "default": True},
            "blacklist_nouveau": {"type": "bool", "default": True},
            "blacklist_path": {"type": "path", "default": "/etc/modprobe.d/blacklist-nouveau.conf"},
            "persistence": {"type": "bool", "default": True},
            "fabricmanager": {"type": "str", "choices": ["auto", "always", "never"], "default": "auto"},
            "signing_key": {"type": "path"},
            "signing_cert": {"type": "path"},
            "runfile_url": {"type": "str"},
            "runfile_checksum": {"type": "str", "no_log": False},
            "runfile_extra_flags": {"type": "list", "elements": "str", "default": []},
            "before": {"type": "dict"},
            "ran": {"type": "dict"},
            "distribution": {"type": "str"},
            "distribution_version": {"type": "str"},
            "architecture": {"type": "str"},
            "kernel": {"type": "str"},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "proc_root": {"type": "path", "default": "/proc"},
            "modules_dir": {"type": "path", "default": "/lib/modules"},
            "admindir": {"type": "path", "default": "/var/lib/dpkg"},
            "lib_dirs": {"type": "list", "elements": "path", "default": LIB_DIRS},
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


def _run(module, argv, **kwargs):
    return module.run_command(argv, environ_update=C_LOCALE, **kwargs)


def read_module_on_disk(module, kernel):
    modinfo = module.get_bin_path("modinfo")
    if not modinfo:
        module.fail_json(msg="modinfo not found: install kmod")
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


def read_userspace(lib_dirs):
    names = []
    for directory in lib_dirs:
        for pattern in ("libnvidia-ml.so.*", "*/libnvidia-ml.so.*"):
            names.extend(os.path.basename(p) for p in glob.glob(os.path.join(directory, pattern)))
    return userspace_version_from_names(names)


def read_packages(module, admindir):
    """dpkg's packages and the reasons a ``dpkg --configure -a`` is needed; (None, []) without dpkg."""
    query = module.get_bin_path("dpkg-query")
    if not query:
        return None, []
    fields = "${Package}\t${Version}\t${Status}\n"
    rc, out, err = _run(module, [query, f"--admindir={admindir}", "-W", "-f", fields])
    if rc != 0:
        module.fail_json(msg=f"dpkg-query -W failed (rc {rc}): {err.strip()}")
    packages = parse_dpkg_query(out)
    return packages, interrupted(packages, admindir)


def read_services(module):
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return {}
    _rc, out, _err = _run(module, [systemctl, "show", "-p", "Id,LoadState,ActiveState,UnitFileState",
                                   f"{PERSISTENCED}.service", f"{FABRICMANAGER}.service"])
    return parse_systemctl_show(out)


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
        error = out.strip() or err.strip() or f"rc {rc}"
        return {"error": error, "driver_versions": [], "persistence_mode": []}
    try:
        result = parse_smi_query(out)
    except DriverError as exc:
        return {"error": str(exc), "driver_versions": [], "persistence_mode": []}
    result["error"] = None
    return result


def read_index(module, names):
    madison = module.get_bin_path("apt-cache")
    if not madison or not names:
        return None
    _rc, out, _err = _run(module, [madison, "madison", *names])
    return parse_madison(out)


def initramfs_command(module):
    for tool, args in INITRAMFS_TOOLS:
        path = module.get_bin_path(tool)
        if path:
            return [path, *args]
    return None


def read_state(module, request):
    """Everything the plan needs, in as few commands as the host allows."""
    params = module.params
    kernel = params["kernel"] or os.uname().release
    packages, dpkg_interrupted = read_packages(module, params["admindir"])
    services = read_services(module)
    state = {
        "kernel": kernel,
        "headers_present": os.path.isdir(os.path.join(params["modules_dir"], kernel, "build")),
        "module_on_disk": read_module_on_disk(module, kernel),
        "dkms": None,
        "loaded": read_loaded(params["sysfs_root"], params["proc_root"]),
        "userspace_version": read_userspace(params["lib_dirs"]),
        "packages": packages,
        "dpkg_interrupted": dpkg_interrupted,
        "services": services,
        "persistenced_unit": service_exists(services, PERSISTENCED),
        "blacklist_complete": blacklist_complete(_read(params["blacklist_path"])),
        "secure_boot": read_secure_boot(module, params["sysfs_root"]),
        "signing_files_missing": [p for p in (params["signing_key"], params["signing_cert"])
                                  if p and not os.path.exists(p)],
        "index": None,
        "smi": None,
        "initramfs_command": initramfs_command(module),
    }
    if needs_dkms_status(state, request):
        state["dkms"] = read_dkms(module)
    return state


def verify(module, state, request, stage):
    """Fail when the run did not leave what it was asked for."""
    on_disk = (state["module_on_disk"] or {}).get("version")
    if not version_matches(on_disk, request["wanted"]) or not version_matches(state["userspace_version"],
                                                                              request["wanted"]):
        module.fail_json(msg=f"after installing, the driver for kernel {state['kernel']} is "
                             f"{on_disk or 'absent'} (userspace {state['userspace_version'] or 'absent'}), "
                             f"wanted {request['wanted']}", state=_public(state))
    if stage != "final" or pending_reboot(state) or not state["loaded"]["version"]:
        return
    smi = state["smi"] or {}
    gpus = sum(1 for d in module.params["gpu"]["devices"] if d.get("kind") == "gpu")
    if smi.get("error") or len(smi.get("driver_versions") or []) != gpus \
            or set(smi["driver_versions"]) != {state["userspace_version"]}:
        module.fail_json(msg=f"nvidia-smi: {smi.get('error') or smi.get('driver_versions')}; wanted "
                             f"{state['userspace_version']} on {gpus} GPU(s)", state=_public(state))


def _public(state):
    return {k: v for k, v in state.items() if k not in ("packages", "index")}


def run(module):
    params = module.params
    facts = {}
    gpu = params["gpu"]
    if gpu is None:
        gpu, warnings = detect(params["sysfs_root"], params["proc_root"], params["pci_ids_path"],
                               require_gpu=params["require_gpu"], require_branch=params["require_branch"],
                               machine=platform.machine())
        for warning in warnings:
            module.warn(warning)
        params["gpu"] = facts["nvidia_gpu"] = gpu
    if not gpu.get("present"):
        return {"changed": False, "ansible_facts": facts, "msg": "no NVIDIA GPU: nothing to do",
                "plan": {"converged": True, "disruptive": False, "reasons": []}}
    os_info = {
        "distribution": params["distribution"] or get_distribution(),
        "distribution_version": params["distribution_version"] or get_distribution_version(),
        "architecture": params["architecture"] or platform.machine(),
        "kernel": params["kernel"] or os.uname().release,
    }
    request = build_request(params, gpu, os_info)
    for warning in request["warnings"]:
        module.warn(warning)
    state = read_state(module, request)
    state.update((key, os_info[key]) for key in ("distribution", "distribution_version", "architecture"))
    steps = plan(state, request)
    lookups = index_lookups(steps, request)
    if lookups:
        state["index"] = read_index(module, lookups) or {}
        steps = plan(state, request)
    loaded = state["loaded"]["version"]
    if params["query_smi"] and loaded and (params["stage"] == "final" or steps["converged"]):
        state["smi"] = read_smi(module)
        if params["stage"] == "plan" and state["smi"]["error"]:
            module.warn(f"nvidia-smi does not answer with the driver {loaded} loaded: "
                        f"{state['smi']['error']}")
    before = driver_facts(state, request)
    result = {"changed": False, "request": request, "plan": steps, "before": before, "state": _public(state)}
    if params["stage"] == "plan":
        facts["nvidia_driver"] = driver_facts(state, request, steps)
        result["changes"] = [] if steps["converged"] else change_lines(steps, before, facts["nvidia_driver"])
    else:
        verify(module, state, request, params["stage"])
        facts["nvidia_driver"] = before
        if params["stage"] == "final" and params["ran"] and params["before"]:
            result["changes"] = change_lines(params["ran"], params["before"], before)
    result["ansible_facts"] = facts
    return result


def main():
    module = build_module()
    try:
        result = run(module)
    except (DriverError, GpuDetectError, DpkgError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
