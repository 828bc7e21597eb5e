#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module nvidia_gpu_validate: prove a GPU node's GPUs are healthy and usable, changing nothing."""

DOCUMENTATION = r"""
---
module: nvidia_gpu_validate
short_description: Check that a host's NVIDIA GPUs answer, are healthy and are seen by containers
description:
  - Reads the GPUs' state (C(nvidia-smi -q -x), C(nvidia-smi nvlink -s), C(dcgmi diag), the kernel log)
    and answers per GPU and per check. Changes nothing on the host; check mode runs the same reads
    (a container image that is not there yet is not pulled in check mode).
  - Fails the host when a check fails, naming the check, the GPU (index, PCI bus id and UUID) and
    the value found. A check that does not apply (no ECC, no NVLink, not an NVSwitch system, no
    DCGM, no container image, no host-run IMEX, no O(peermem)) or could not read its source is
    reported with C(passed=null) and why.
  - C(nvml) every GPU on the PCI bus answers through NVML (C(Failed to initialize NVML - Driver/library
    version mismatch) fails it); C(driver_version) the driver is O(driver_version); C(persistence)
    persistence mode is on; C(ecc) ECC is on where the GPU has it and no volatile uncorrectable
    error was counted since boot (aggregate counts are lifetime counts, reported); C(remapped_rows)
    no pending or failed row remap (pending page retirement on GPUs before Ampere); C(pcie_link) the
    link runs at its maximum width, and at its maximum generation while the GPU is in P0;
    C(nvlink) every NVLink in use is up; C(fabric) every GPU that reports a fabric has state Completed,
    status Success and health Healthy (where read), and on a GB200/GB300 NVL72 tray (the fabric kind
    C(mnnvl) that nvidia_gpu_facts tells from the PCI bus under O(sysfs_root)) a non-zero cluster UUID
    and the same cluster UUID and clique ID as the node's other GPUs (an HGX B200/B300's clique 0 and
    all-zero cluster UUID are normal; its fabric still In Progress names NVLSM and C(ib_umad)/C(mlx5_ib));
    C(xid) no hardware XID (NVIDIA's XID catalog - 48, 61 to 64, 74, 79, 92, 95, 119, 120, 121, 140)
    in the kernel log since boot (94 and application XIDs are reported); C(dcgm_diag)
    C(dcgmi diag -r O(dcgm_diag_level)) passes on each GPU that runs no compute process (GPUs in use
    are skipped, naming the processes); C(cdi) each CDI spec of kind C(nvidia.com/gpu) in C(/etc/cdi) and
    C(/var/run/cdi) (YAML or JSON) lists C(all) and every GPU as C(nvidia-ctk cdi generate) names them
    (C(0) and C(GPU-<uuid>); a MIG device C(0:1) and C(MIG-<uuid>)), wherever such a spec is or the
    toolkit's C(nvidia-cdi-refresh.path) is enabled; C(container) C(nvidia-smi -L) in a container of
    O(container_image), started through Docker's default runtime (and CDI where a spec exists) and
    containerd's nvidia runtime, lists every GPU; C(imex) on a GB200/GB300 NVL72 tray (fabric C(mnnvl),
    or O(fabric)) whose host runs IMEX (O(imex_mode=host)), C(nvidia-imex-ctl -q) answers C(READY) and
    C(nvidia-imex-ctl -N) shows every node C(READY), every pair of nodes C(C) (Connected) and the domain
    state C(UP), a failure naming the nodes and their state; C(peermem) where O(peermem) is set,
    the C(nvidia_peermem) module is loaded (C(modules) under O(proc_root), else C(module/nvidia_peermem)
    under O(sysfs_root)).
  - An empty O(checks), O(driver_version), O(container_image), O(image_registry), O(nvidia_smi) or
    O(kernel_log) is that option left out (the gpu_validate role passes its variables as they are).
options:
  nvidia_smi:
    description: The nvidia-smi to run; default the one on PATH, else under /usr/local/nvidia/bin,
      /home/kubernetes/bin/nvidia/bin or /run/nvidia/driver/usr/bin.
    type: path
  sysfs_root:
    description: Where sysfs is mounted; the C(nvml) check compares the NVIDIA GPUs on its PCI bus with
      those NVML lists, the C(fabric) and C(imex) checks read the fabric kind from it (a simulated node
      points it at its fake tree).
    type: path
    default: /sys
  proc_root:
    description: Where procfs is mounted; the C(peermem) check reads C(modules) there.
    type: path
    default: /proc
  fabric:
    description: The NVLink fabric as the inventory says it (C(nvidia_gpu_facts)' O(fabric)), over what the
      PCI bus tells; V(auto) detects. The C(fabric) and C(imex) checks take it.
    type: str
    choices: [auto, none, nvswitch, nvlink5, mnnvl]
    default: auto
  imex_mode:
    description: Who runs IMEX on an NVL72 tray - V(host) (the C(nvidia-imex) service; the C(imex) check
      runs) or V(dra) (the DRA driver's ComputeDomain daemons, the host's service masked). Unset, or
      V(dra), the C(imex) check does not apply.
    type: str
    choices: [host, dra]
  peermem:
    description: The node uses C(nvidia_peermem) (GPUDirect RDMA); the C(peermem) check runs. Unset, it does
      not apply.
    type: bool
    default: false
  kernel_log:
    description: A file of kernel messages to read instead of the running kernel's log
      (C(journalctl -k -b), else C(dmesg)).
    type: path
  driver_version:
    description: The driver version wanted (V(580.159.04); V(580) accepts any 580 driver). Unset, the
      C(driver_version) check is skipped.
    type: str
  checks:
    description: The checks to run; default all of them.
    type: list
    elements: str
    choices: [nvml, driver_version, persistence, ecc, remapped_rows, pcie_link, nvlink, fabric, xid,
              dcgm_diag, cdi, container, imex, peermem]
  dcgm_diag_level:
    description: The run level of C(dcgmi diag -r); 2 and 3 load the GPUs for minutes.
    type: int
    default: 1
    choices: [1, 2, 3]
  container_image:
    description: The image the C(container) check runs C(nvidia-smi -L) in (a CUDA base image, best
      pinned by digest). Unset, the check is skipped.
    type: str
  image_registry:
    description: A registry mirror prefix that replaces O(container_image)'s registry host, as
      C(gpu_cluster_addons_image_registry) does for the add-ons (V(registry.local:5000/mirror) turns
      V(nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04) into
      V(registry.local:5000/mirror/nvidia/cuda:12.9.1-base-ubuntu24.04)).
    type: str
  pod_follows:
    description:
      - A CUDA validation pod follows this validation (the gpu_cluster_addons play's, with
        C(gpu_cluster_addons_validation_pod_digest)) - RV(condition) of a node that passed is then V(False),
        C(ValidationPodPending), until that play publishes the pod's verdict.
    type: bool
    default: false
requirements:
  - PyYAML (python3-yaml) for the C(cdi) check of a YAML spec (without it that spec is not judged, saying so)
extends_documentation_fragment:
  - module_attributes.no_diff
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Validate the GPUs (every check)
  nvidia_gpu_validate:
    driver_version: "580.159.04"
    container_image: nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04
  register: gpu_validation

- name: Only what nvidia-smi and the kernel log say, reading a saved log
  nvidia_gpu_validate:
    checks: [nvml, persistence, ecc, remapped_rows, pcie_link, xid]
    kernel_log: /var/log/kern.log
"""

RETURN = r"""
passed:
  description: No check failed.
  returned: always
  type: bool
results:
  description: One per check and GPU it ran for (C(gpu) V(host) or V(all) for host-wide checks).
  returned: always
  type: list
  elements: dict
  contains:
    check:
      description: The check's name.
      type: str
    gpu:
      description: The GPU as C(GPU index (bus id, UUID)), or V(host), V(all), a PCI address.
      type: str
    passed:
      description: True, false, or null when the check does not apply or could not read its source.
      type: bool
    message:
      description: What was found.
      type: str
  sample: [{"check": "persistence", "gpu": "GPU 0 (0000:00:06.0, GPU-0000...)", "passed": true,
            "message": "persistence mode Enabled"}]
failed_checks:
  description: The names of the checks that failed, each once.
  returned: always
  type: list
  elements: str
nvidia_smi:
  description: The nvidia-smi that was run.
  returned: always
  type: str
clique:
  description: The node's NVLink clique as GPU Feature Discovery labels it (C(nvidia.com/gpu.clique),
    C(<clusterUuid>.<cliqueId>)) - where every GPU attached to a fabric (state Completed, status Success, a
    non-zero cluster UUID) reports the same cluster and clique (a GB200/GB300 tray); null elsewhere (an
    HGX's zero cluster UUID, no fabric) or when nvidia-smi did not answer. The gpu_validate role labels the
    Node with it (C(gpu_validate_clique_label)).
  returned: always
  type: str
  sample: dc6e40c4-d722-4357-9ba6-5291dd461278.2
ansible_facts:
  description: C(gpu_validate) - C(passed), C(failed_checks), C(validated_at) (UTC), C(ran) (true),
    C(fabric) (the GPUs' fabric state, e.g. V(Completed), a status other than Success after it; null where no
    GPU reports a fabric or the C(fabric) check did not run), for the run's summary and the add-ons play's
    gate.
  returned: always
  type: dict
marker:
  description: The record the gpu_validate role writes (C(/var/lib/gpunode/validated.json)) - C(passed),
    C(failed_checks), C(driver_version) (the loaded driver nvidia-smi reported), C(fabric) (where a GPU
    reports a fabric).
  returned: always
  type: dict
  sample: {"passed": true, "failed_checks": [], "driver_version": "580.159.04"}
condition:
  description:
    - The Node condition the gpu_validate role publishes for this verdict (gpu_node_condition) - C(status),
      C(reason), C(message) - V(True)/C(Passed), V(False)/C(ValidationFailed) with the failure, or with
      O(pod_follows) V(False)/C(ValidationPodPending) for a node that passed.
  returned: always
  type: dict
  sample: {"status": "True", "reason": "Passed", "message": "the GPU validation passed"}
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.addons.images import mirrored, registry_prefix
from ansible.module_utils.gpunode.driver.fabric import CHOICES
from ansible.module_utils.gpunode.formats import k8s_names, values
from ansible.module_utils.gpunode.host.commands import Host
from ansible.module_utils.gpunode.readiness import condition
from ansible.module_utils.gpunode.validate import marker
from ansible.module_utils.gpunode.validate.run import ALL_CHECKS, ValidateError, failure_message, validate

ARGUMENT_SPEC = {
    "nvidia_smi": {"type": "path"},
    "sysfs_root": {"type": "path", "default": "/sys"},
    "proc_root": {"type": "path", "default": "/proc"},
    "fabric": {"type": "str", "choices": list(CHOICES), "default": "auto"},
    "imex_mode": {"type": "str", "choices": ["host", "dra"]},
    "peermem": {"type": "bool", "default": False},
    "kernel_log": {"type": "path"},
    "driver_version": {"type": "str"},
    "checks": {"type": "list", "elements": "str", "choices": list(ALL_CHECKS)},
    "dcgm_diag_level": {"type": "int", "default": 1, "choices": [1, 2, 3]},
    "container_image": {"type": "str"},
    "image_registry": {"type": "str"},
    "pod_follows": {"type": "bool", "default": False},
}

# Values that land on a command line: nvidia-smi is run by that name, the image is an argument of
# docker/ctr, the version is compared as dotted numbers.
VALUE_RULES = {
    "nvidia_smi": values.command,
    "kernel_log": values.path,
    "sysfs_root": values.path,
    "proc_root": values.path,
    "driver_version": values.debian_version,
    "container_image": k8s_names.image_reference,
    "image_registry": registry_prefix,
}


def build_module():
    return AnsibleModule(argument_spec=dict(ARGUMENT_SPEC), supports_check_mode=True)


#: the options whose empty value is the option left out
UNSET_WHEN_EMPTY = ("checks", "driver_version", "container_image", "image_registry", "nvidia_smi",
                    "kernel_log")


def run(module):
    params = {key: None if key in UNSET_WHEN_EMPTY and not value else value
              for key, value in module.params.items()}
    try:
        values.check(params, VALUE_RULES)
    except values.ValueSyntaxError as exc:
        raise ValidateError(f"{exc}; nothing was run") from None
    if params["container_image"]:
        params["container_image"] = mirrored(params["image_registry"], params["container_image"])
    outcome = validate(Host(module, ValidateError), params)
    failed = outcome.pop("failed")
    outcome["failed_checks"] = sorted({r["check"] for r in failed}, key=ALL_CHECKS.index)
    fabric = outcome.pop("fabric")
    outcome["ansible_facts"] = {"gpu_validate": {
        "passed": outcome["passed"], "failed_checks": outcome["failed_checks"], "ran": True,
        "validated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "fabric": fabric}}
    outcome["marker"] = marker.content(outcome, outcome.pop("driver_version"), fabric)
    outcome["condition"] = published(outcome["passed"], failure_message(failed) if failed else "",
                                     params["pod_follows"])
    return outcome, failed


def published(passed, message, pod_follows=False):
    """The condition the role publishes for this verdict (readiness/condition.py ``verdict``)."""
    return dict(zip(("status", "reason", "message"), condition.verdict(passed, message, pod_follows)))


def main():
    module = build_module()
    try:
        outcome, failed = run(module)
    except ValidateError as exc:
        module.fail_json(msg=str(exc), passed=False, results=[], failed_checks=[],
                         marker={"passed": False, "failed_checks": [], "driver_version": ""},
                         condition=published(False, str(exc)))
    if failed:
        module.fail_json(msg=failure_message(failed), **outcome)
    module.exit_json(changed=False, **outcome)


if __name__ == "__main__":
    main()
