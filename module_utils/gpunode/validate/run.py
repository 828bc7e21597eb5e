# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read what the checks judge (each source once, only for the checks asked) and run them.

Everything that touches the node goes through ``host`` (:class:`Host` in the
module: ``run(argv) -> (rc, out, err)`` with the C locale, ``which(name)``,
``check_mode``); nothing here writes. Standard library only; Python 3.8+.
"""

import os
import platform

from ansible.module_utils.gpunode.driver.driver import MODULE_NEEDS
from ansible.module_utils.gpunode.driver.gpu import (
    classify,
    named_devices,
    read_fabric,
    read_loaded,
    read_pci_devices,
)
from ansible.module_utils.gpunode.host.files import is_executable, read_file
from ansible.module_utils.gpunode.validate import checks, dcgm, smi, xid
from ansible.module_utils.gpunode.validate.cdi import cdi
from ansible.module_utils.gpunode.validate.container import container

ALL_CHECKS = ("nvml", "driver_version", "persistence", "ecc", "remapped_rows", "pcie_link", "nvlink",
              "fabric", "xid", "dcgm_diag", "cdi", "container", "imex", "peermem")
#: The checks that read ``nvidia-smi -q -x``: skipped, saying so, when NVML does not answer.
NEEDS_SMI = ALL_CHECKS[1:11]

DRA_IMEX = "IMEX runs in the DRA driver's ComputeDomain daemons, the host's service masked (imex_mode dra)"

#: Where drivers that are not on PATH keep nvidia-smi: the GPU Operator's and containerized
#: drivers (/run/nvidia/driver), GKE's installer (/home/kubernetes/bin/nvidia), images that put the
#: driver's userspace under /usr/local/nvidia. (A local finder: helper image-driver adds
#: driver-roots finding in driver/, which this one gives way to at merge.)
DRIVER_ROOTS = ("/usr/local/nvidia/bin", "/home/kubernetes/bin/nvidia/bin", "/run/nvidia/driver/usr/bin")


class ValidateError(Exception):
    """A validation that cannot start (no nvidia-smi, an unreadable kernel_log file)."""


def find_nvidia_smi(given, which, roots=None):
    if given:
        return given
    found = which("nvidia-smi")
    if found:
        return found
    for root in DRIVER_ROOTS if roots is None else roots:
        path = os.path.join(root, "nvidia-smi")
        if is_executable(path):
            return path
    return None


def sysfs_gpus(root):
    """PCI addresses of the NVIDIA GPUs (display and 3D controllers) sysfs under ``root`` shows."""
    devices, _warnings = read_pci_devices(root)
    return [device["address"] for device in devices if classify(device["class_id"]) == "gpu"]


def read_smi(host, nvidia_smi):
    """``nvidia-smi -q -x`` parsed, or ``{"error": ...}`` with what it said (NVML not answering)."""
    if not nvidia_smi:
        return {"error": f"nvidia-smi not found on PATH nor under {', '.join(DRIVER_ROOTS)}",
                "gpus": [], "driver_version": None}
    rc, out, err = host.run([nvidia_smi, "-q", "-x"])
    if rc != 0:
        said = " ".join((out + " " + err).split()) or f"exit {rc}"
        return {"error": f"{nvidia_smi} -q -x: {said}", "gpus": [], "driver_version": None}
    try:
        reading = smi.parse_query_xml(out)
    except smi.SmiError as exc:
        return {"error": str(exc), "gpus": [], "driver_version": None}
    reading["error"] = None
    return reading


def read_kernel_log(host, kernel_log):
    """(text, None) or (None, why not): the file given, else journalctl -k -b, else dmesg."""
    if kernel_log:
        try:
            return read_file(kernel_log, "utf-8", "replace"), None
        except OSError as exc:
            raise ValidateError(f"kernel_log {kernel_log}: cannot read it: {exc.strerror}") from None
    tried = []
    for name, argv in (("journalctl", ["-k", "-b", "--no-pager", "-q"]), ("dmesg", [])):
        path = host.which(name)
        if not path:
            tried.append(f"{name}: not installed")
            continue
        rc, out, err = host.run([path, *argv])
        if rc == 0:
            return out, None
        tried.append(f"{name}: exit {rc}: {' '.join(err.split())[:200]}")
    return None, "could not read the kernel log (" + "; ".join(tried) + ")"


def run_xid(host, params, reading):
    text, why = read_kernel_log(host, params.get("kernel_log"))
    if text is None:
        return [checks.skipped("xid", gpu, why) for gpu in reading["gpus"]]
    events = xid.parse_xids(text)
    return [checks.xids(gpu, events) for gpu in reading["gpus"]]


def run_nvlink(host, params, reading):
    rc, out, err = host.run([params["nvidia_smi"], "nvlink", "-s"])
    if rc != 0:
        return checks.nvlink(reading["gpus"], {}, " ".join((err or out).split())[:300] or f"exit {rc}")
    return checks.nvlink(reading["gpus"], smi.parse_nvlink_status(out))


def node_fabric(params):
    """The fabric kind as nvidia_gpu_facts tells it: from the PCI bus, unless ``fabric`` says it."""
    root = params.get("sysfs_root") or "/sys"
    return read_fabric(root, named_devices(read_pci_devices(root)[0], {}), platform.machine(),
                       params.get("fabric"))[0]


def run_fabric(_host, params, reading):
    """The fabric check, on the node's fabric kind (read only where a GPU reports a fabric)."""
    kind = None
    if any(gpu["fabric_state"] not in checks.NOT_APPLICABLE for gpu in reading["gpus"]):
        kind = node_fabric(params)
    return checks.fabric(reading["gpus"], kind)


def fabric_state(reading):
    """The fabric's state as the GPUs report it (``Completed``; a status other than Success after it), for
    the closing table: each once, those of GPUs not Completed with Success where some are; None where no
    GPU reports one."""
    said = []
    for gpu in (gpu for gpu in reading["gpus"] if gpu["fabric_state"] not in checks.NOT_APPLICABLE):
        status = gpu["fabric_status"]
        text = gpu["fabric_state"] + ("" if status in ("Success", *checks.NOT_APPLICABLE) else f" ({status})")
        said += [text] if text not in said else []
    return " / ".join([text for text in said if text != "Completed"] if len(said) > 1 else said) or None


def clique(reading):
    """The node's NVLink clique as GPU Feature Discovery labels it (``nvidia.com/gpu.clique``:
    ``<clusterUuid>.<cliqueId>``, NVIDIA/k8s-device-plugin internal/lm/imex.go @1b826ac): over the GPUs
    attached to a fabric (state Completed, status Success, a non-zero clusterUuid: go-nvlib's
    ``IsFabricAttached``), one cluster and one clique, else None."""
    attached = {(gpu["fabric_cluster"].lower(), gpu["fabric_clique"]) for gpu in reading["gpus"]
                if gpu["fabric_state"] == "Completed" and gpu["fabric_status"] == "Success"
                and not checks.zero_uuid(gpu["fabric_cluster"])
                and gpu["fabric_clique"] not in checks.NOT_APPLICABLE}
    return ".".join(attached.pop()) if len(attached) == 1 else None


def run_imex(host, params):
    """On an NVL72 tray whose host runs IMEX (``imex_mode`` host): ``nvidia-imex-ctl -q`` and ``-N``."""
    mode = params.get("imex_mode")
    if mode != "host":
        return [checks.skipped("imex", checks.HOST, DRA_IMEX if mode == "dra" else "no imex_mode given")]
    kind = node_fabric(params)
    if kind != "mnnvl":
        return [checks.skipped("imex", checks.HOST, f"not an NVL72 tray (fabric {kind}): no IMEX domain")]
    ctl = host.which("nvidia-imex-ctl")
    if not ctl:
        return [checks.result("imex", checks.HOST, False, "nvidia-imex-ctl not found: the nvidia-imex "
                              "package (at the driver's version) is not installed")]
    return [checks.imex_query(*host.run([ctl, "-q"])), checks.imex_domain(*host.run([ctl, "-N"]))]


def run_peermem(_host, params):
    """Where nvidia_peermem was chosen (``peermem``): the module is loaded."""
    if not params.get("peermem"):
        return [checks.skipped("peermem", checks.HOST, "nvidia_peermem not chosen (peermem false)")]
    sysfs_root, proc_root = params.get("sysfs_root") or "/sys", params.get("proc_root") or "/proc"
    if "nvidia_peermem" in read_loaded(sysfs_root, proc_root, names=("nvidia_peermem",))["modules"]:
        return [checks.result("peermem", checks.HOST, True, "nvidia_peermem is loaded")]
    return [checks.result("peermem", checks.HOST, False, f"nvidia_peermem is not loaded (not in {proc_root}/"
                          f"modules nor live under {sysfs_root}/module): {MODULE_NEEDS['nvidia_peermem']}")]


#: The checks of the host rather than of its GPUs, run whatever nvidia-smi says.
HOST_CHECKS = {"imex": run_imex, "peermem": run_peermem}


def run_dcgm(host, params, reading):
    level = params.get("dcgm_diag_level") or 1
    dcgmi = host.which("dcgmi")
    if not dcgmi:
        return [checks.skipped("dcgm_diag", gpu, "DCGM is not installed (no dcgmi)")
                for gpu in reading["gpus"]]
    results, idle = [], []
    for gpu in reading["gpus"]:
        processes = checks.busy(gpu)
        if processes:
            results.append(checks.skipped("dcgm_diag", gpu, "refused: compute processes run on it "
                                          f"(PID {', '.join(processes)}); dcgmi diag runs on idle GPUs only"))
        else:
            idle.append(gpu)
    if not idle:
        return results
    argv = [dcgmi, "diag", "-r", str(level), "-j", "-i", ",".join(str(gpu["index"]) for gpu in idle)]
    rc, out, err = host.run(argv)
    try:
        verdicts = dcgm.parse_diag(out)
    except dcgm.DcgmError as exc:
        said = " ".join(err.split())[:300]
        why = f"{exc} (exit {rc}{': ' + said if said else ''})"
        return results + [checks.result("dcgm_diag", gpu, False, why) for gpu in idle]
    return results + [checks.dcgm_diag(gpu, verdicts, level) for gpu in idle]


def _step(name, host, params, reading):
    if name == "driver_version":
        return checks.driver_version(reading, params.get("driver_version"))
    per_gpu = {"persistence": checks.persistence, "ecc": checks.ecc, "remapped_rows": checks.remapped_rows,
               "pcie_link": checks.pcie_link}
    if name in per_gpu:
        return [per_gpu[name](gpu) for gpu in reading["gpus"]]
    readers = {"nvlink": run_nvlink, "xid": run_xid, "dcgm_diag": run_dcgm, "fabric": run_fabric, "cdi": cdi}
    return readers[name](host, params, reading)


def validate(host, params):
    """{"passed", "results", "failed", "nvidia_smi", "driver_version", "fabric" (:func:`fabric_state`, where
    the fabric check ran), "clique" (:func:`clique`)} for the checks asked (all when none are named)."""
    params = dict(params)
    params["nvidia_smi"] = find_nvidia_smi(params.get("nvidia_smi"), host.which)
    names = params.get("checks") or list(ALL_CHECKS)
    reading = read_smi(host, params["nvidia_smi"])
    results = []
    if "nvml" in names:
        results.extend(checks.nvml(reading, sysfs_gpus(params.get("sysfs_root") or "/sys")))
    for name in names:
        if name in NEEDS_SMI:
            if reading["error"]:
                results.append(checks.skipped(name, checks.HOST, "not run: nvidia-smi -q -x did not answer"))
            else:
                results.extend(_step(name, host, params, reading))
    if "container" in names:
        uuids = [gpu["uuid"] for gpu in reading["gpus"]]
        results.extend(container(host, params.get("container_image"), uuids))
    for name in names:
        if name in HOST_CHECKS:
            results.extend(HOST_CHECKS[name](host, params))
    failed = [r for r in results if r["passed"] is False]
    return {"passed": not failed, "results": results, "failed": failed, "nvidia_smi": params["nvidia_smi"],
            "driver_version": reading["driver_version"],
            "fabric": fabric_state(reading) if "fabric" in names and not reading["error"] else None,
            "clique": None if reading["error"] else clique(reading)}


def failure_message(failed):
    """One line per failed result: check, GPU, value."""
    return "GPU validation failed: " + "; ".join(
        f"{r['check']} on {r['gpu']}: {r['message']}" for r in failed)
