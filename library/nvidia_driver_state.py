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
    (C(libnvidia-ml.so.<version>)), the module on disk for the kernel (C(modinfo -k), when kmod is there),
    DKMS registrations (only when the module is missing), the loaded modules (sysfs, C(/proc)), dpkg's
    packages, holds and whether a dpkg run was interrupted, the persistence daemon and fabric units,
    where the driver's tools are and who installed it (a package, a C(.run) install, the image), the nouveau
    blacklist, Secure Boot, the signing keys and, when it installs, whether apt's index knows the packages.
  - Returns the plan (RV(plan)) and publishes C(ansible_facts.nvidia_driver) - the state the run will leave
    as far as it can be predicted (check mode included).
  - Without O(gpu), detects the GPUs itself (the C(nvidia_gpu_facts) logic, with its O(pci_ids_path),
    O(require_gpu), O(require_branch) and O(fabric)) and publishes C(ansible_facts.nvidia_gpu) too, so a
    run that starts with the driver reads the host once for both.
  - Needs no gathered facts - the distribution, its version, the machine and the running kernel are read
    on the host (Ansible's own C(get_distribution) and C(get_distribution_version), the ones fact gathering
    uses), the kernel's headers under C(/lib/modules).
  - C(nvidia_driver_verify) checks, with the same request, what the run left; the C(nvidia_driver_changes)
    filter tells what it changed from RV(plan), RV(before) and the facts after.
options:
  update_cache:
    description:
      - Refresh the package index (C(apt-get update), C(dnf makecache)) before reading it, as
        M(ansible.builtin.apt)'s C(update_cache) does - so that a package the
        index still lacks is missing from the archive, not merely unknown (with V(ubuntu-signed), a signed
        module for the kernel that the archive lacks is then refused, naming what it has).
      - Never in check mode (the index is read as it is). The rest of the call changes nothing.
    type: bool
    default: false
extends_documentation_fragment:
  - module_attributes.no_diff
  - module_attributes.facts
  - node_lock
  - nvidia_driver_request
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

- name: Plan Ubuntu's signed modules from a fresh index (refused when the archive has none for the kernel)
  nvidia_driver_state:
    method: ubuntu-signed
    branch: "580"
    update_cache: true
  register: driver
  when: not ansible_check_mode
"""

RETURN = r"""
ansible_facts:
  description: C(nvidia_driver) and, when this module detected the GPUs, C(nvidia_gpu).
  returned: always
  type: dict
  contains:
    nvidia_driver:
      description: The driver as the host has it after the run (in check mode, as predicted) - method, branch,
        wanted, installed_version, loaded_version, module_type, held, reboot_required, origin (package,
        runfile, image, operator), tools_prefix, driver_root, skipped (what is left alone and why).
      returned: when the host has an NVIDIA GPU
      type: dict
    nvidia_gpu:
      description: The detection facts, as the module C(nvidia_gpu_facts) returns them.
      returned: when the module detected the GPUs
      type: dict
request:
  description: What is wanted, from the options and the GPUs.
  returned: when the host has an NVIDIA GPU
  type: dict
  contains:
    method:
      description: C(packages), C(runfile), C(preinstalled), C(ubuntu-signed) (Canonical's signed modules,
        also chosen on Ubuntu under Secure Boot without a signing key) or C(el-signed) (the RHEL family's,
        chosen there likewise).
      type: str
      returned: always
    signed_fallback:
      description: Whether the distribution's signed modules replace a DKMS build this host cannot load
        (Secure Boot on, no signing key; Ubuntu with the distribution's packages, the RHEL family).
      type: bool
      returned: always
    image_build:
      description: Whether this is an image build (O(image_build)) - the plan is for the image's kernel and
        loads, starts and reboots nothing.
      type: bool
      returned: except with C(preinstalled)
    signed_auto:
      description: Set when the method was switched to C(ubuntu-signed) or C(el-signed) for Secure Boot.
      type: bool
      returned: when the method was switched
    branch:
      description: The driver branch, e.g. C(570).
      type: str
      returned: always
    version:
      description: The full version asked for, or empty for the branch's newest.
      type: str
      returned: always
    wanted:
      description: The version the loaded driver must match (the full version, or the branch).
      type: str
      returned: always
    module_type:
      description: C(open) or C(proprietary).
      type: str
      returned: always
    hold:
      description: Whether the driver packages are to be held.
      type: bool
      returned: always
    kernel_hold:
      description: Whether the kernel metapackages are to be held (O(kernel_hold)).
      type: bool
      returned: always
    persistence:
      description: Whether C(nvidia-persistenced) is to run.
      type: bool
      returned: always
    fabricmanager:
      description: Whether the host needs the fabric manager (NVSwitch and NVLink5 systems, or asked for).
      type: bool
      returned: always
    blacklist_nouveau:
      description: Whether nouveau is to be blacklisted.
      type: bool
      returned: always
    install_prerequisites:
      description: Whether missing kernel headers, DKMS and a compiler are installed.
      type: bool
      returned: always
    signing:
      description: Whether the module is signed (Secure Boot with a signing key).
      type: bool
      returned: always
    headers_package:
      description: The kernel headers package of the running kernel (C(linux-headers-<kernel>),
        C(kernel-devel-<kernel>) on EL).
      type: str
      returned: always
    build_prerequisites:
      description: What a DKMS build needs besides the headers package (the compiler, DKMS; on EL also
        C(kernel-headers)).
      type: list
      elements: str
      returned: always except with the preinstalled method
    package_manager:
      description: C(apt) (Debian, Ubuntu) or C(dnf) (RHEL, Rocky, AlmaLinux); the role's package tasks
        follow it.
      type: str
      returned: always
    warnings:
      description: Warnings of the package data (a release newer than the data).
      type: list
      elements: str
      returned: always
    packages:
      description: The driver's packages - C(install) (names), C(pin) (a pinning package or null),
        C(hold) (names); with C(ubuntu-signed) also C(follow) (the flavour's metapackage), C(unversioned),
        C(series) and C(provisional); with C(el-signed) also C(follow) (the signed modules of the kernels
        that boot next); on EL also C(stream) (EL 9 - the dnf module stream, e.g.
        C(nvidia-driver:580-open), or null) and C(lock) (EL 10 - the C(dnf versionlock add) spec that pins
        the branch before the install, e.g. C(*nvidia*580*), or null).
      type: dict
      returned: with the packages method
    fabricmanager_package:
      description: The fabric manager package, or null.
      type: str
      returned: always
    fabric:
      description: What the host's NVLink fabric (C(nvidia_gpu.fabric)) and O(peermem) need beside the
        driver, or null - C(kind), C(pinned) (packages at the driver's version), C(unpinned), C(modules)
        (kernel modules to load), C(modules_extra) (Ubuntu's C(linux-modules-extra-<kernel>) where a kernel
        lacks C(mlx5_ib)), C(boot_files) (path to content), C(nvidia_params) (the nvidia module's options as
        C(/proc/driver/nvidia/params) shows them), C(units) (to run), C(mask), C(imex_nodes) (the nodes
        file's content, host mode) and C(imex_config) (C(config.cfg) settings). Null with the preinstalled
        method.
      type: dict
      returned: with an NVIDIA GPU
    repository:
      description: The apt source the role adds - C(line) (null - none to add), C(key_url) and
        C(sources_text) (the line as the deb822 C(.sources) file the role writes); on EL the dnf
        repository - C(name), C(baseurl), C(key_url) (checked - C(gpgcheck)), C(line) and
        C(sources_text) null.
      type: dict
      returned: with the packages method
    runfile:
      description: The installer - C(url), C(checksum), C(name), C(flags); null with the packages method.
      type: dict
      returned: always
    skipped:
      description: What the role leaves alone on this host, with the reason (no systemd to run a daemon).
      type: list
      elements: str
      returned: always
    asked_version:
      description: With V(preinstalled) - the O(version) the loaded driver must be exactly.
      type: str
      returned: with the preinstalled method
    asked_branch:
      description: With V(preinstalled) - the O(branch) the loaded driver must be on.
      type: str
      returned: with the preinstalled method
    asked_module_type:
      description: With V(preinstalled) - the O(module_type) the loaded module must be (V(auto) - any).
      type: str
      returned: with the preinstalled method
    check_branch:
      description: With V(preinstalled) - whether the loaded driver's branch must drive every GPU.
      type: bool
      returned: with the preinstalled method
plan:
  description: The steps the role runs; a converged host has C(converged) true and nothing else to do.
  returned: when the host has an NVIDIA GPU
  type: dict
  contains:
    repair_dpkg:
      description: Finish an interrupted dpkg run first (C(dpkg --configure -a)).
      type: bool
      returned: always
    install:
      description: Install the wanted driver.
      type: bool
      returned: always
    install_packages:
      description: The package specs to install (C(name=version) where pinned).
      type: list
      elements: str
      returned: always
    refresh_index:
      description: Refresh apt's index first (it does not know a package to install).
      type: bool
      returned: always
    prerequisites:
      description: Packages a module build needs that the host lacks (headers, DKMS, compiler).
      type: list
      elements: str
      returned: always
    dkms_build:
      description: Build the module for the running kernel with DKMS.
      type: bool
      returned: always
    dkms_kernels:
      description: The kernels to build the module for with DKMS (C(dkms install -k)) - the running kernel
        with RV(plan.dkms_build), then the kernels that boot next (RV(state.boot_kernels)) for which DKMS has
        not installed the wanted driver's module (a kernel that unattended-upgrades or dnf-automatic
        installed while DKMS's own hook failed), built before they boot; those disrupt nothing.
      type: list
      elements: str
      returned: always
    dkms_module:
      description: The name the driver's package registered its module under with DKMS, to build,
        or null. C(nvidia), or C(nvidia-open) for the open modules of NVIDIA's EL package
        kmod-nvidia-open-dkms.
      type: str
      returned: always
    dkms_version:
      description: The DKMS module version to build, or null.
      type: str
      returned: always
    remove:
      description: Packages of the other method that a switch between DKMS and the distribution's signed
        modules (C(ubuntu-signed), C(el-signed)) removes.
      type: list
      elements: str
      returned: always
    kernel_modules:
      description: Signed modules of the kernels that boot next, installed without touching the running
        driver.
      type: list
      elements: str
      returned: always
    module_stream:
      description: EL 9 - the dnf module stream the install enables first, or null (none to change).
      type: dict
      returned: always
      contains:
        stream:
          description: The stream, e.g. C(nvidia-driver:580-open).
          type: str
        command:
          description: C(enable) (no stream of the module enabled) or C(switch-to) (another one is).
          type: str
        enabled:
          description: The stream enabled before, or null.
          type: str
    version_lock:
      description: EL 10 - the C(dnf versionlock add) spec that pins the branch before the install
        (e.g. C(*nvidia*580*)), or null.
      type: str
      returned: always
    allow_erasing:
      description: EL - the install replaces the installed driver's flavour or branch (another module
        stream, or kmod-nvidia-open-dkms and kmod-nvidia-latest-dkms, which conflict), so dnf installs
        with C(--allowerasing) as NVIDIA's guide does ("Switching between Driver Module Flavors").
      type: bool
      returned: always
    unhold:
      description: Packages to release before the install.
      type: list
      elements: str
      returned: always
    hold:
      description: Packages to hold.
      type: list
      elements: str
      returned: always
    kernel_hold:
      description: Kernel packages to hold (O(kernel_hold), not held yet) - the same task holds them.
      type: list
      elements: str
      returned: always
    kernel_unhold:
      description: Kernel packages gpunode held to release (O(kernel_hold) false).
      type: list
      elements: str
      returned: always
    kernel_record:
      description: The kernel packages gpunode holds, to write to C(/var/lib/gpunode/kernel-holds) (before
        new holds are made, after holds are released), or null when the record stays.
      type: list
      elements: str
      returned: always
    blacklist_nouveau:
      description: Write the nouveau blacklist and rebuild the initramfs.
      type: bool
      returned: always
    unload:
      description: Unload the running modules (the GPU services are stopped around it).
      type: bool
      returned: always
    load:
      description: Load the nvidia modules.
      type: bool
      returned: always
    reboot_required:
      description: The wanted driver runs only after a reboot.
      type: bool
      returned: always
    persistence:
      description: What C(nvidia-persistenced) needs - C(unit), C(enable), C(start).
      type: list
      elements: str
      returned: always
    fabric:
      description: What the host's NVLink fabric needs (RV(request.fabric)) and the host lacks, or null.
      type: dict
      returned: always
      contains:
        kind:
          description: The fabric kind (C(nvswitch), C(nvlink5), C(mnnvl)); null where no fabric is wanted and
            only RV(plan.fabric.remove) has something to do.
          type: str
        version:
          description: The driver version the packages of RV(plan.fabric.install) take (null - the version the
            install brings, known once it is on disk).
          type: str
        install:
          description: Packages to install at exactly the driver's version (the fabric manager, NSCQ, NVSDM,
            IMEX), held with the driver's.
          type: list
          elements: str
        packages:
          description: Packages to install at their own version (C(nvlsm), C(infiniband-diags),
            C(linux-modules-extra-<kernel>) for each kernel without C(mlx5_ib) on Ubuntu).
          type: list
          elements: str
        boot_files:
          description: Files read when a module loads - C(path), C(content) (the IB modules in modules-load.d,
            the nvidia module's IMEX and CDMM options in modprobe.d) - written before the driver loads; the
            initramfs is rebuilt.
          type: list
          elements: dict
        disable:
          description: Units to stop and disable before their file in RV(plan.fabric.remove) goes
            (C(gpunode-nvidia-peermem), O(peermem) turned off).
          type: list
          elements: str
        remove:
          description: Boot files gpunode wrote for a fabric or O(peermem) that nothing wants now (turned
            off), removed so that the next boot loads none of it; the initramfs is rebuilt. What is loaded
            stays until then.
          type: list
          elements: str
        modules:
          description: Kernel modules to load, in order (C(mlx5_core), C(mlx5_ib), C(ib_umad)), before the
            fabric manager starts; then C(nvidia_peermem) (O(peermem)).
          type: list
          elements: str
        files:
          description: Files written after the packages - C(path), C(content) (IMEX's nodes file).
          type: list
          elements: dict
        imex_config:
          description: Settings of IMEX's C(config.cfg) to write - C(key), C(value).
          type: list
          elements: dict
        stop:
          description: Units to stop and disable (then masked).
          type: list
          elements: str
        mask:
          description: Units to mask (the fabric manager and NVLSM on a tray, C(nvidia-imex) in dra mode).
          type: list
          elements: str
        enable:
          description: Units to enable.
          type: list
          elements: str
        start:
          description: Units to start (after an install or a reload, or not running).
          type: list
          elements: str
        restart:
          description: Running units to restart (C(nvidia-imex), its files changed).
          type: list
          elements: str
    converged:
      description: Nothing to do.
      type: bool
      returned: always
    disruptive:
      description: The plan installs, unloads, needs a reboot or restarts a fabric daemon (a drain before it
        is worth it).
      type: bool
      returned: always
    reasons:
      description: Why each step is needed, one line each.
      type: list
      elements: str
      returned: always
before:
  description: C(nvidia_driver) facts of the host as read, before the run (keys as in
    RV(ansible_facts.nvidia_driver)); with RV(plan) and the facts after the run, the
    C(nvidia_driver_changes) filter tells what the run changed.
  returned: when the host has an NVIDIA GPU
  type: dict
  contains:
    method:
      description: The method (C(packages), C(runfile), C(ubuntu-signed), C(el-signed), C(preinstalled)).
      type: str
      returned: always
    branch:
      description: The driver branch.
      type: str
      returned: always
    wanted:
      description: The version the loaded driver must match (the full version, or the branch).
      type: str
      returned: always
    installed_version:
      description: The version of the installed userspace driver, or null.
      type: str
      returned: always
    loaded_version:
      description: The version of the loaded kernel module, or null.
      type: str
      returned: always
    module_type:
      description: C(open) or C(proprietary) (of the loaded module, else of the one on disk), or null.
      type: str
      returned: always
    held:
      description: Whether the driver packages are held (null where the method holds none).
      type: bool
      returned: always
    reboot_required:
      description: Whether the driver on disk waits for a reboot to run.
      type: bool
      returned: always
    origin:
      description: Who installed the loaded driver (C(package), C(runfile), C(image), C(operator)), or null.
      type: str
      returned: always
    driver_root:
      description: The driver's root for C(nvidia-ctk cdi generate --driver-root), or null.
      type: str
      returned: always
    tools_prefix:
      description: Where the driver's tools are (an image's prefix), or null.
      type: str
      returned: always
    skipped:
      description: What the role leaves alone on this host, with the reason.
      type: list
      returned: always
      elements: str
cache_updated:
  description: Whether the package index was refreshed (O(update_cache), not in check mode).
  returned: always
  type: bool
state:
  description: What was read on the host.
  returned: always
  type: dict
  contains:
    distribution:
      description: The distribution, as Ansible's C(get_distribution) reads it.
      type: str
      returned: always
    distribution_version:
      description: Its version.
      type: str
      returned: always
    architecture:
      description: The machine (C(x86_64), C(aarch64)).
      type: str
      returned: always
    kernel:
      description: The running kernel release.
      type: str
      returned: always
    headers_present:
      description: Whether the kernel's build directory exists.
      type: bool
      returned: when the host has an NVIDIA GPU
    boot_kernels:
      description: The kernels installed after the running one (newer; the boot loader starts the newest
        next) whose headers are there (C(/lib/modules/KERNEL/build)), oldest first.
      type: list
      elements: str
      returned: when the host has an NVIDIA GPU
    module_on_disk:
      description: The nvidia module installed for the kernel (C(version), C(module_type)), or null.
      type: dict
      returned: when the host has an NVIDIA GPU
    dkms:
      description: C(dkms status) entries, read only when the plan depends on them, else null.
      type: list
      returned: when the host has an NVIDIA GPU
    loaded:
      description: The loaded driver - C(modules), C(version), C(module_type).
      type: dict
      returned: always
    userspace_version:
      description: The version of the installed userspace libraries, or null.
      type: str
      returned: when the host has an NVIDIA GPU
    dpkg_interrupted:
      description: Why dpkg must be finished first (empty - it need not).
      type: list
      elements: str
      returned: when the host has an NVIDIA GPU
    services:
      description: The GPU services as systemd shows them, by unit name.
      type: dict
      returned: when the host has an NVIDIA GPU
    persistenced_unit:
      description: Whether C(nvidia-persistenced) has a unit.
      type: bool
      returned: when the host has an NVIDIA GPU
    blacklist_complete:
      description: Whether nouveau is blacklisted as the role writes it.
      type: bool
      returned: when the host has an NVIDIA GPU
    secure_boot:
      description: Whether Secure Boot is on.
      type: bool
      returned: when the host has an NVIDIA GPU
    signing_files_missing:
      description: Signing key or certificate paths given that do not exist.
      type: list
      elements: str
      returned: when the host has an NVIDIA GPU
    smi:
      description: What C(nvidia-smi) reports, when it was asked, else null.
      type: dict
      returned: when the host has an NVIDIA GPU
    initramfs_command:
      description: The command that rebuilds the initramfs (C(update-initramfs -u); C(dracut --force) on
        EL), or null.
      type: list
      elements: str
      returned: when the host has an NVIDIA GPU
    module_stream:
      description: EL 9 - the enabled stream of the C(nvidia-driver) dnf module (e.g. C(580-open)), or null.
      type: str
      returned: when the host has an NVIDIA GPU
    versionlock_plugin:
      description: On dnf nodes, whether dnf's versionlock plugin (the holds) is installed; null elsewhere.
      type: bool
      returned: when the host has an NVIDIA GPU
    running_kernel:
      description: The running kernel's release (C(<proc_root>/sys/kernel/osrelease)).
      type: str
      returned: when the host has an NVIDIA GPU
    kernel_hold_record:
      description: The kernel packages gpunode holds, as its record says.
      type: list
      elements: str
      returned: when the host has an NVIDIA GPU
    location:
      description: Where the driver's tools are - C(smi) (nvidia-smi's path, on PATH or under an image's
        prefix such as C(/usr/local/nvidia/bin)), C(tools_prefix), C(driver_root) (what
        C(nvidia-ctk cdi generate --driver-root) takes), C(operator) (under C(/run/nvidia/driver)).
      type: dict
      returned: when the host has an NVIDIA GPU
    origin:
      description: Who put the loaded driver there - C(kind) (C(package), C(runfile), C(image), C(operator)),
        C(where), C(packages) (dpkg's owners), C(traces) (the installer's); null with no driver loaded.
      type: dict
      returned: when the host has an NVIDIA GPU
    systemd:
      description: Whether the host has systemd (C(systemctl)); without it the daemons are skipped.
      type: bool
      returned: when the host has an NVIDIA GPU
    fabric:
      description: What the fabric's plan compares, or null without a fabric - C(loaded) (the loaded kernel
        modules), C(files) (path to text, null when absent), C(nvidia_params) (C(/proc/driver/nvidia/params),
        null when unread) and C(kernels_without_ib) (kernels, running or booting next, whose C(modinfo -k)
        finds no C(mlx5_ib); read on Ubuntu only).
      type: dict
      returned: when the host has an NVIDIA GPU
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.driver.state_call import ARGUMENT_SPEC, ERRORS, read
from ansible.module_utils.gpunode.host.lock import LOCK_OPTION, exit_run


def build_module():
    return AnsibleModule(argument_spec=dict(ARGUMENT_SPEC, **LOCK_OPTION), supports_check_mode=True)


def main():
    exit_run(build_module(), read, ERRORS, failed=lambda exc: getattr(exc, "result", {}))


if __name__ == "__main__":
    main()
