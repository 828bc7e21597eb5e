# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The DRA preflight: can each node of the DRA pool take DRA, from the facts the node roles published?

Pure Python, tested without Ansible. Sources and the error type: ``dra.py``.
"""

from ansible.module_utils.gpunode.addons.dra import (
    CDI_HINT,
    MIN_DRIVER_BRANCH,
    MIN_KUBERNETES,
    DraError,
    version_of,
    version_text,
)
from ansible.module_utils.gpunode.addons.gpu_nodes import HOST_DRIVER_ROOT, hosts_by_driver_root, roots_text
from ansible.module_utils.gpunode.kubelet.gates import GateError, refused_in_file


class Findings:
    """What the preflight found on one node: refusals (facts that rule DRA out) and unknowns."""

    def __init__(self):
        self.refusals = []
        self.unknowns = []


def _kubelet_check(kubelet, found):
    """The kubelet's version (or None) from ``ansible_facts.kubelet_gpu``; problems into ``found``."""
    if not isinstance(kubelet, dict):
        found.unknowns.append("no ansible_facts.kubelet_gpu (playbooks/kubelet.yml did not run on it)")
        return None
    if not kubelet.get("present") or not kubelet.get("kubernetes_version"):
        found.unknowns.append("no kubelet found on it yet (kubelet_gpu.present is false)")
        return None
    try:
        version = version_of(kubelet["kubernetes_version"], "kubelet_gpu.kubernetes_version")
    except DraError as exc:
        found.unknowns.append(str(exc))
        return None
    if version < MIN_KUBERNETES:
        found.refusals.append(
            f"its kubelet is {version_text(version)}; the NVIDIA DRA driver needs Kubernetes "
            f"{version_text(MIN_KUBERNETES)} or later (resource.k8s.io/v1)"
        )
    gates = kubelet.get("gates") or {}
    try:
        refused = refused_in_file(gates, version_text(version))
    except GateError as exc:
        refused = {"gates": str(exc)}
    for name in sorted(refused):
        found.refusals.append(f"its kubelet sets a feature gate this version refuses: {refused[name]}")
    if gates.get("DynamicResourceAllocation") is False and "DynamicResourceAllocation" not in refused:
        found.refusals.append(
            "its kubelet sets DynamicResourceAllocation=false: the kubelet would not prepare claims"
        )
    return version


def _driver_check(gpu, found):
    if not isinstance(gpu, dict):
        found.unknowns.append("no ansible_facts.nvidia_gpu (the GPU detection did not run on it)")
        return
    if "loaded_driver_version" not in gpu:
        found.unknowns.append("its nvidia_gpu facts do not say which driver is loaded")
        return
    loaded = gpu["loaded_driver_version"]
    if not loaded:
        found.refusals.append("no NVIDIA driver loaded (nvidia_gpu.loaded_driver_version is null)")
        return
    try:
        branch = int(str(loaded).split(".", maxsplit=1)[0])
    except ValueError:
        found.unknowns.append(f"cannot read the loaded NVIDIA driver version {loaded!r}")
        return
    if branch < MIN_DRIVER_BRANCH:
        found.refusals.append(
            f"its NVIDIA driver is {loaded}; the DRA driver needs branch {MIN_DRIVER_BRANCH} or later "
            "for GPU allocation (nvidia_driver_branch)"
        )


def _cdi_check(runtime, cdi_root, found):
    if not isinstance(runtime, dict):
        found.unknowns.append(
            "no ansible_facts.nvidia_container_runtime (playbooks/container_runtime.yml did not run on it)"
        )
        return
    engine = runtime.get("kubelet_engine") or "the kubelet's container engine"
    cdi = runtime.get("cdi")
    if not isinstance(cdi, dict):
        found.unknowns.append(f"its container runtime facts do not say whether {engine} has CDI on")
        return
    if not cdi.get("enabled"):
        found.refusals.append(
            f"CDI is off in {engine}, which its kubelet uses; DRA hands GPUs over by CDI ({CDI_HINT})"
        )
        return
    dirs = [str(d).rstrip("/") for d in cdi.get("spec_dirs") or []]
    if dirs and cdi_root.rstrip("/") not in dirs:
        found.refusals.append(
            f"{engine} reads CDI specs from {', '.join(dirs)}, "
            f"not from {cdi_root} where the driver writes them"
        )


def driver_root(records, given=""):
    """The DRA driver's ``nvidiaDriverRoot``: ``given`` (gpu_cluster_addons_dra_driver_root) when
    set; else the root the DRA hosts' driver facts agree on (``nvidia_driver.driver_root``: ``/``
    for a driver in ``/usr``, an image's ``/usr/local/nvidia`` or ``/home/kubernetes/bin/nvidia``;
    see gpunode.driver.roots), ``/`` where no host says. One DaemonSet has one root: DRA hosts
    whose drivers live in different roots are refused, each named with its root."""
    if given:
        return given
    by_root = hosts_by_driver_root(records, "dra")
    if len(by_root) > 1:
        raise DraError(f"the DRA hosts' drivers live in different roots ({roots_text(by_root)}); "
                       "the DRA driver's one DaemonSet takes one nvidiaDriverRoot: allocate the hosts of "
                       "all roots but one by the device plugin "
                       "(gpu_cluster_addons_gpu_allocation: device-plugin)")
    return next(iter(by_root), HOST_DRIVER_ROOT)


def preflight(records, cluster_version=None, cdi_root="/var/run/cdi"):
    """Refuse every DRA node that cannot take DRA (raise); return what could not be checked.

    ``records``: ``{"host", "allocation", "nvidia_gpu", "container_runtime",
    "kubelet"}`` per GPU host (the facts the node roles published, None where
    missing). Only hosts whose allocation is ``dra`` are checked. A fact that
    rules DRA out refuses the host, naming it and why; a missing fact cannot
    (a node rendered for before it joins) and is returned as a warning
    ``"host: ..."`` that says which play reads it. A kubelet newer than
    ``cluster_version`` is refused too (the API server must be at least the
    kubelet's version).
    """
    refused, warnings = {}, []
    cluster = version_of(cluster_version) if cluster_version else None
    for record in records:
        if record.get("allocation") != "dra":
            continue
        found = Findings()
        version = _kubelet_check(record.get("kubelet"), found)
        if cluster and version and version[:2] > cluster[:2]:
            found.refusals.append(
                f"its kubelet {version_text(version)} is newer than the cluster {version_text(cluster)}"
            )
        _driver_check(record.get("nvidia_gpu"), found)
        _cdi_check(record.get("container_runtime"), cdi_root, found)
        if found.refusals:
            refused[record["host"]] = found.refusals
        for unknown in found.unknowns:
            warnings.append(f"{record['host']}: DRA preflight cannot check: {unknown}")
    if refused:
        lines = [f"{host}: {'; '.join(reasons)}" for host, reasons in sorted(refused.items())]
        raise DraError(
            "gpu_cluster_addons: these nodes cannot allocate GPUs by DRA (set "
            "gpu_cluster_addons_gpu_allocation: device-plugin for them, or fix the node): "
            + " | ".join(lines)
        )
    return warnings
