#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module nvidia_gpu_facts: the NVIDIA PCI devices of a host and the driver branch they need."""

DOCUMENTATION = r"""
---
module: nvidia_gpu_facts
short_description: Detect NVIDIA GPUs and NVSwitches from sysfs and pick a driver branch
description:
  - Reads the PCI devices of vendor C(10de) from sysfs (not C(lspci)), classifies them by class code
    (C(0300)/C(0302) GPU, C(0680) NVSwitch, C(0403) audio, C(0c03) USB, C(0c80) serial bus, else other),
    names them from the system's C(pci.ids) and reports the bound driver and NUMA node of each.
  - Reports the loaded NVIDIA kernel module's version (C(module/nvidia/version), else
    C(/proc/driver/nvidia/version), proprietary and open module formats) and whether nvidia or nouveau
    is loaded (C(/proc/modules)).
  - Computes the driver branches that drive every GPU on the host from a table generated from its sources
    (Debian's nvidia-detect lists, NVIDIA's support matrix and release notes, NVIDIA's Blackwell device ID
    ranges; legacy branches 340, 390, 470 and 580 for older GPUs), and recommends the newest. A GPU newer
    than the table is served by the newest branch, with a warning naming it. Says whether a GPU needs the
    open kernel modules (Grace Hopper, Blackwell, GB10). Warns when the recommended branch has reached its
    end of life.
  - Tells the host's NVLink fabric and its RDMA network functions from PCI alone, before any driver or
    InfiniBand module is loaded (RV(ansible_facts.nvidia_gpu.fabric),
    RV(ansible_facts.nvidia_gpu.rdma_devices)). The PCI VPD of the Mellanox (C(15b3)) network functions
    (C(bus/pci/devices/*/vpd), readable by root only) tells the NVLink management ports of an HGX B200/B300
    (C(SW_MNG) in a vendor keyword). A VPD that cannot be read or parsed is warned about, naming the file,
    and never makes the fabric C(none) - on a host with B200/B300 GPUs and no management port found, such
    a function makes the fabric C(nvlink5) and stays out of RV(ansible_facts.nvidia_gpu.rdma_devices);
    elsewhere it is listed there.
  - Never changes anything.
  - A O(sysfs_root) or O(proc_root) that does not exist or is not absolute fails the task (a wrong
    inventory variable would otherwise read as "no GPU"). A host whose sysfs has no C(bus/pci/devices) reports
    RV(ansible_facts.nvidia_gpu.present=false) with a warning.
version_added: "1.0.0"
author:
  - gpunode maintainers (@gpunode)
options:
  sysfs_root:
    description: Where sysfs is mounted; a simulated node points this at its fake tree.
    type: path
    default: /sys
  proc_root:
    description: Where procfs is mounted; a simulated node points this at its fake tree.
    type: path
    default: /proc
  pci_ids_path:
    description:
      - The C(pci.ids) file to name devices from (plain or C(.gz)).
      - Default the first of C(/usr/share/misc/pci.ids), C(/usr/share/hwdata/pci.ids),
        C(/usr/share/pci.ids), C(/var/lib/pciutils/pci.ids) and their C(.gz) forms that exists; without
        one, names come from the module's own table or say what the device is (C(NVIDIA GPU 10de:2335)).
      - A path given here that does not exist fails the task.
    type: path
  require_gpu:
    description: Fail on a host where no NVIDIA GPU is found.
    type: bool
    default: false
  require_branch:
    description: Fail on a host with GPUs that no single driver branch drives, saying why.
    type: bool
    default: false
  fabric:
    description:
      - The NVLink fabric as the inventory says it (the driver role's C(nvidia_driver_fabric)), which wins
        over what PCI tells; V(auto) detects. For a board that shares the GB200 IDs but stands alone,
        V(none). NVLink management ports (C(SW_MNG)) stay out of RV(ansible_facts.nvidia_gpu.rdma_devices).
    type: str
    choices: [auto, none, nvswitch, nvlink5, mnnvl]
    default: auto
extends_documentation_fragment:
  - module_attributes.no_diff
  - module_attributes.facts
notes:
  - Names are the product names of C(pci.ids) (the bracketed part, C(TU104GL [Tesla T4]) gives
    C(Tesla T4)); the subsystem's name is used for NVIDIA's own boards (subsystem vendor C(10de)).
"""

EXAMPLES = r"""
- name: Detect NVIDIA GPUs
  nvidia_gpu_facts:

- name: Detect on a simulated node
  nvidia_gpu_facts:
    sysfs_root: /opt/gpunode-sim/sys
    proc_root: /opt/gpunode-sim/proc

- name: Show the recommended driver branch
  ansible.builtin.debug:
    msg: "{{ ansible_facts.nvidia_gpu.recommended_branch }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    nvidia_gpu:
      description: The NVIDIA devices of the host and what they need.
      returned: always
      type: dict
      contains:
        present:
          description: Whether the host has at least one NVIDIA GPU.
          type: bool
          sample: true
        gpu_count:
          description: Number of GPU functions (class 0300 or 0302).
          type: int
          sample: 8
        nvswitch_count:
          description: Number of NVSwitch devices (class 0680).
          type: int
          sample: 4
        devices:
          description: Every NVIDIA PCI function, sorted by address.
          type: list
          elements: dict
          sample:
            - address: "0000:00:1e.0"
              vendor_id: 10de
              device_id: 1eb8
              subsystem_vendor_id: 10de
              subsystem_device_id: 12a2
              class_id: "0302"
              kind: gpu
              name: Tesla T4
              bound_driver: nvidia
              numa_node: null
          contains:
            address:
              description: PCI address, C(domain:bus:device.function).
              type: str
            vendor_id:
              description: Vendor ID, lower-case hex without C(0x).
              type: str
            device_id:
              description: Device ID, lower-case hex without C(0x).
              type: str
            subsystem_vendor_id:
              description: Subsystem vendor ID, or null when sysfs has none.
              type: str
            subsystem_device_id:
              description: Subsystem device ID, or null when sysfs has none.
              type: str
            class_id:
              description: Class and subclass, 4 hex digits (C(0302)).
              type: str
            kind:
              description: One of C(gpu), C(nvswitch), C(audio), C(usb), C(serial), C(other).
              type: str
            name:
              description: Product name; never empty.
              type: str
            bound_driver:
              description: Name of the bound kernel driver, or null.
              type: str
            numa_node:
              description: NUMA node, or null when unknown (C(-1) in sysfs).
              type: int
        models:
          description: Distinct GPU names, in address order.
          type: list
          elements: str
          sample: [H100 SXM5 80GB]
        model_counts:
          description: Number of GPUs of each model.
          type: dict
          sample: {H100 SXM5 80GB: 8}
        loaded_driver_version:
          description: Version of the loaded nvidia kernel module, or null.
          type: str
          sample: 535.129.03
        loaded_module_type:
          description: C(open) or C(proprietary) when C(/proc/driver/nvidia/version) tells, else null.
          type: str
          sample: proprietary
        nvidia_loaded:
          description: Whether the nvidia module is loaded.
          type: bool
        nouveau_loaded:
          description: Whether the nouveau module is loaded.
          type: bool
        supported_branches:
          description: Driver branches (majors as strings), newest first, that each drive every GPU.
          type: list
          elements: str
          sample: ["580", "570", "550", "535", "470"]
        recommended_branch:
          description: The first supported branch; null with no GPU or when no branch drives them all.
          type: str
          sample: "580"
        open_kernel_module_capable:
          description: Whether every GPU can use the open kernel modules (Turing and newer).
          type: bool
        open_kernel_module_required:
          description: Whether a GPU is driven only by the open kernel modules (Grace Hopper, Blackwell).
          type: bool
        summary:
          description: One line saying what the host has.
          type: str
          sample: >-
            Tesla T4 x 1 | NVSwitch: 0 | driver: nvidia 535.129.03 (proprietary) | recommended branch: 620
        fabric:
          description:
            - The NVLink fabric, from PCI IDs, class and VPD, unless O(fabric) says it. V(mnnvl) - a
              Grace-Blackwell GPU (GB200 C(10de:2941), GB300 C(10de:31c2)), a GB200/GB300 NVL72 compute
              tray (a host that is not aarch64 adds a warning). V(nvlink5) - a C(15b3) function whose VPD
              holds C(SW_MNG), the NVLink management port of an HGX B200/B300 (found whether or not
              C(mlx5_ib) is loaded). V(nvswitch) - NVSwitches as PCI bridges (class C(0680)), HGX
              A100/H100/H200. V(none) otherwise (a DGX Spark's GB10 too).
          type: str
          choices: [none, nvswitch, nvlink5, mnnvl]
          sample: nvlink5
        rdma_devices:
          description: PCI addresses (as RV(ansible_facts.nvidia_gpu.devices[].address)) of the RDMA-capable
            network functions - vendor C(15b3), class C(02xx), physical functions (no C(physfn) link), not
            NVLink management ports; sorted.
          type: list
          elements: str
          sample: ["0000:18:00.0", "0000:40:00.0"]
        branch_data:
          description: Where the branch table comes from.
          type: str
          sample: Debian nvidia-detect 550.163.01-5.1
        pci_ids_path:
          description: The pci.ids file names were read from, or null.
          type: str
          sample: /usr/share/misc/pci.ids
        warnings:
          description: Why no branch is recommended, assumptions made, devices skipped.
          type: list
          elements: str
"""

import platform

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.driver.fabric import CHOICES
from ansible.module_utils.gpunode.driver.gpu import GpuDetectError, detect
from ansible.module_utils.gpunode.host.lock import exit_run

ARGUMENT_SPEC = {
    "sysfs_root": {"type": "path", "default": "/sys"},
    "proc_root": {"type": "path", "default": "/proc"},
    "pci_ids_path": {"type": "path"},
    "require_gpu": {"type": "bool", "default": False},
    "require_branch": {"type": "bool", "default": False},
    "fabric": {"type": "str", "choices": list(CHOICES), "default": "auto"},
}


def build_module():
    return AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


def run(module):
    params = module.params
    facts, warnings = detect(params["sysfs_root"], params["proc_root"], params["pci_ids_path"],
                             require_gpu=params["require_gpu"], require_branch=params["require_branch"],
                             machine=platform.machine(), fabric_kind=params["fabric"])
    for warning in warnings:
        module.warn(warning)
    return {"changed": False, "ansible_facts": {"nvidia_gpu": facts}}


def main():
    exit_run(build_module(), run, (GpuDetectError,), lock=False)


if __name__ == "__main__":
    main()
