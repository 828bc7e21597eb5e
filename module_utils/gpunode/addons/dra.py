# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPUs by ResourceClaim: the NVIDIA DRA driver on host-installed drivers.

Decisions of ``gpu_cluster_addons`` for Dynamic Resource Allocation, pure
Python, tested without Ansible: which node pool allocates its GPUs by DRA
(label ``nvidia.com/gpu.allocation``) and how its two halves (device plugin,
DRA driver) fit together. Beside it: ``dra_preflight`` (whether a node can
take DRA, from the facts the node roles published) and ``dra_objects`` (which
objects the cluster side consists of on a Kubernetes version, built as data
and dumped to YAML by the role, and the examples a user starts from). The
sources below are theirs too.

Sources (read, not copied):

- [CHART] kubernetes-sigs/dra-driver-nvidia-gpu ``deployments/helm/
  dra-driver-nvidia-gpu`` @ 95932046 (chart 0.5.0-dev, the tree v0.5.0 was
  cut from: PR #1367 "Bump versions for the release of v0.5.0", issue #1365):
  ``templates/kubeletplugin.yaml`` (init container, the ``gpus`` container,
  its environment, probes and host paths), ``rbac-kubeletplugin.yaml``,
  ``deviceclass-gpu.yaml`` (``extendedResourceName: nvidia.com/gpu`` with
  resource.k8s.io/v1), ``deviceclass-mig.yaml``, ``values.yaml``
  (``nvidiaDriverRoot: /`` for a driver installed on the host, the image
  ``registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu``).
- [PREREQ] the same repository, ``site/content/docs/prerequisites.md``:
  Kubernetes v1.34.2 or later, NVIDIA driver v565 or later for GPU allocation
  (v570.158.01 for ComputeDomains), CDI enabled in the container runtime
  (containerd 2.0+ by default).
- [CODE] ``cmd/gpu-kubelet-plugin`` @ 95932046: reads ResourceClaims (get
  in ``cleanup.go``), publishes ResourceSlices through
  ``k8s.io/dynamic-resource-allocation/kubeletplugin``; no call writes a
  ResourceClaim's status (no ``UpdateStatus``/``ApplyStatus`` on claims), and
  Deployments only for MPS (feature gate ``MPSSupport``, off here).
- [HARDEN] kubernetes.io/docs/concepts/security/hardening-guide/
  dynamic-resource-allocation: from 1.36 a status write needs
  ``resourceclaims/driver`` (``status.devices``, node-aware verbs
  ``associated-node:update|patch``) or ``resourceclaims/binding``
  (``status.allocation``/``reservedFor``: the scheduler's, never a driver's).
- [API] resource.k8s.io: v1beta1 from 1.32, v1beta2 from 1.33, v1 GA and
  served by default from 1.34 (kubernetes.io DRA concept page, "DRA is GA in
  1.34"); ``DeviceClass.spec.extendedResourceName`` is the DRAExtendedResource
  feature: alpha 1.34, beta 1.36, GA (locked on) 1.37 (module_utils/gpunode/kubelet/gates.py).

ComputeDomains (multi-node NVLink, IMEX) are not rendered: they need MNNVL
hardware, GPU feature discovery's clique labels and their CRDs and controller
([PREREQ]); the ``compute-domains`` container stays off, as with the chart's
``resources.computeDomains.enabled: false``, which also drops the controller
Deployment ([CHART] ``controller.yaml`` is gated on it).

Errors are raised as ``DraError`` (a ValueError) naming the host or variable.
Python 3.8+, standard library only.
"""

from ansible.module_utils.gpunode.formats.kube_version import parse as parse_kube_version

DRIVER_NAME = "gpu.nvidia.com"
NAME = "dra-driver-nvidia-gpu"
DAEMONSET = NAME + "-kubelet-plugin"
SERVICE_ACCOUNT = NAME + "-kubelet-plugin"
# [CHART] selectorLabels: "<chart name>-component: kubelet-plugin"
SELECTOR = {NAME + "-component": "kubelet-plugin"}

ALLOCATION_LABEL = "nvidia.com/gpu.allocation"
ALLOCATIONS = ("device-plugin", "dra")

MIN_KUBERNETES = (1, 34, 2)  # [PREREQ]
MIN_DRIVER_BRANCH = 565  # [PREREQ]
EXTENDED_RESOURCE_SINCE = (1, 37)  # [API]
CLAIM_STATUS_AUTHZ_SINCE = (1, 36)  # [HARDEN]
# [CODE]: v0.5.0 writes no ResourceClaim status, so it gets no status rule.
WRITES_DEVICE_STATUS = False
HEALTHCHECK_PORT = 51516  # [CHART] values.yaml kubeletPlugin.containers.gpus.healthcheckPort
# containerd 1.7 has CDI behind enable_cdi; 2.0 turns it on ([PREREQ]).
CDI_HINT = (
    "containerd 2.0 has CDI on; containerd 1.7 needs enable_cdi = true (nvidia_container_runtime_cdi: true), "
    "Docker 25-28.1 features.cdi, CRI-O 1.23+"
)


class DraError(ValueError):
    """Input the DRA decisions cannot take; the message says what and why."""


def version_of(value, what="gpu_cluster_addons_kubernetes_version"):
    return parse_kube_version(value, DraError, what)


def version_text(version):
    return ".".join(str(part) for part in version)


def resource_api(kubernetes_version):
    """The resource.k8s.io version the DRA objects use: v1 from 1.34, refused before."""
    version = version_of(kubernetes_version)
    if version[:2] < MIN_KUBERNETES[:2]:
        raise DraError(
            f"gpu_cluster_addons_mode dra: Kubernetes {version_text(version)} serves DRA as beta only "
            "(resource.k8s.io/v1beta1 from 1.32, v1beta2 from 1.33, off by default); the NVIDIA DRA driver "
            f"needs {version_text(MIN_KUBERNETES)} or later (resource.k8s.io/v1)"
        )
    return "resource.k8s.io/v1"


# --------------------------------------------------------------------------
# Node pools: which hosts allocate by DRA
# --------------------------------------------------------------------------


def default_allocation(mode):
    """What a host without ``gpu_cluster_addons_gpu_allocation`` gets: the mode's own."""
    return "dra" if mode == "dra" else "device-plugin"


def allocations(hosts, mode, chosen):
    """``{host: "dra"|"device-plugin"}`` from each host's variable (empty: the mode's default).

    A DRA pool next to the GPU-share or HAMi device plugin is refused: those
    plugins share GPUs by their own labels and scheduler, which a DRA node
    would not follow.
    """
    result, bad, foreign = {}, [], []
    for host in hosts:
        value = str((chosen or {}).get(host) or "") or default_allocation(mode)
        if value not in ALLOCATIONS:
            bad.append(f"{host}: {value!r}")
            continue
        if value == "dra" and mode not in ("nvidia", "dra"):
            foreign.append(host)
        result[host] = value
    if bad:
        raise DraError("gpu_cluster_addons_gpu_allocation must be device-plugin or dra: " + ", ".join(bad))
    if foreign:
        raise DraError(
            f"gpu_cluster_addons_gpu_allocation: dra on {', '.join(foreign)} needs gpu_cluster_addons_mode "
            f"nvidia or dra (the {mode} device plugin cannot share a cluster's GPUs with DRA pools)"
        )
    return result


def summary_allocation(mode, allocation):
    """What offers a host's GPUs, for the summary: dra, device-plugin, gpushare, hami."""
    if allocation == "dra":
        return "dra"
    return "device-plugin" if mode in ("nvidia", "dra") else mode


OFFERED_BY = {"dra": "DRA driver", "gpushare": "gpushare", "hami": "HAMi"}


def offers(nodes):
    """Per host, what offers its GPUs to the cluster, in a few words (the run's summary):
    ``device plugin, time-slicing x4``, ``device plugin, mig mixed``, ``DRA driver``, ``HAMi``."""
    result = {}
    for record in nodes:
        allocation = record.get("allocation") or "device-plugin"
        if allocation in OFFERED_BY:
            result[record["host"]] = OFFERED_BY[allocation]
        else:
            result[record["host"]] = "device plugin, " + (record.get("sharing") or "whole GPUs")
    return result


def label_nodes(nodes, mode, by_host):
    """Add the allocation label and ``allocation`` to each gpu_nodes record (new list)."""
    result = []
    for record in nodes:
        allocation = by_host.get(record["host"], default_allocation(mode))
        labels = dict(record["labels"])
        labels[ALLOCATION_LABEL] = allocation
        result.append(dict(record, labels=labels, allocation=summary_allocation(mode, allocation)))
    return result


def pools(mode, by_host):
    """Which halves the cluster needs: ``{"device_plugin": bool, "dra": bool}``.

    The mode's own half always; the other one when some host asks for it.
    Rendering without hosts gives the mode alone.
    """
    values = set(by_host.values())
    return {
        "device_plugin": mode != "dra" or "device-plugin" in values,
        "dra": mode == "dra" or "dra" in values,
    }


# --------------------------------------------------------------------------
# Putting the two halves together
# --------------------------------------------------------------------------


def _is_runtime_class(entry):
    """The RuntimeClass, or another file of every mode (the readiness rule)."""
    return "runtimeclass" in entry["template"] or "nodereadinessrule" in entry["template"]


def template_plan(mode, halves, base):
    """The templated files: ``base`` (manifest_plan of the device-plugin mode) as it stands,
    except in dra mode without a device-plugin pool, where the device plugin's files move to
    ``absent`` and only the RuntimeClass stays (pods may use it; gpunode never deletes it).
    """
    if mode != "dra" or halves["device_plugin"]:
        return base
    keep = [e for e in base["present"] if _is_runtime_class(e)]
    gone = [e for e in base["present"] if not _is_runtime_class(e)] + list(base["absent"])
    return {"present": keep, "absent": sorted(gone, key=lambda e: e["file"])}


def workloads(device_plugin, halves):
    """What to wait for: ``[{kind, name}]`` of the device plugin's half and the DRA half that run."""
    result = [{"kind": k, "name": n} for k, n in device_plugin] if halves["device_plugin"] else []
    if halves["dra"]:
        result.append({"kind": "DaemonSet", "name": DAEMONSET})
    return result
