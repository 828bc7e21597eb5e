# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Decisions of the gpu_cluster_addons role: the cluster's versions and control plane.

Pure Python, tested without Ansible: the modes, which API versions a
Kubernetes version serves, and which control-plane label and tolerations a
cluster needs. The rest of the role's decisions sit beside it, by what they
decide: ``gpu_nodes`` (a GPU node's labels and runtime class),
``catalogue`` (the manifest files of a mode), ``rollout`` (whether what the
cluster reports means "ready"). The modules ``gpu_cluster_addons_plan`` and
``gpu_cluster_addons_wait`` call them; they run on the controller (the
play's localhost).

Errors are raised as ``GpuAddonsError`` (a ValueError) naming the variable or
host at fault; the modules turn them into a task failure.
"""

from ansible.module_utils.gpunode.formats.kube_version import parse as parse_kube_version

# Kubernetes versions the manifests are written for. 1.14 is the first with
# RuntimeClass in node.k8s.io/v1beta1; apps/v1, rbac/v1 and the
# system-node-critical priority class are all older.
MIN_VERSION = (1, 14)

# nvidia: NVIDIA's device plugin (with time-slicing/MPS/MIG from its config);
# gpushare: Aliyun's; hami: HAMi's device plugin and scheduler; dra: NVIDIA's
# DRA driver (module_utils/gpunode/addons/dra.py). Exclusive: one per cluster.
MODES = ("nvidia", "gpushare", "hami", "dra")
DISTRIBUTIONS = ("auto", "kubeadm", "rke", "rke2", "k3s")

RESOURCE_BY_MODE = {"nvidia": "nvidia.com/gpu", "gpushare": "aliyun.com/gpu-mem", "hami": "nvidia.com/gpu"}
# What must be rolled out before the GPUs are schedulable, per mode.
WORKLOADS_BY_MODE = {
    "nvidia": (("DaemonSet", "nvidia-device-plugin-daemonset"),),
    "gpushare": (("Deployment", "gpushare-schd-extender"), ("DaemonSet", "gpushare-device-plugin-ds")),
    "hami": (("Deployment", "hami-scheduler"), ("DaemonSet", "hami-device-plugin")),
}

# Control-plane node labels, in order of preference.
LABEL_CONTROL_PLANE = "node-role.kubernetes.io/control-plane"  # kubeadm >= 1.20, RKE2, k3s
LABEL_MASTER = "node-role.kubernetes.io/master"  # kubeadm < 1.24 (and RKE2/k3s, as "true")
LABEL_RKE1 = "node-role.kubernetes.io/controlplane"  # RKE1, value "true"
CONTROL_PLANE_LABELS = (LABEL_CONTROL_PLANE, LABEL_MASTER, LABEL_RKE1)

# Taints each family puts on control-plane nodes (key, effect). Tolerating a
# taint that a node does not carry is harmless; missing one leaves a Pending pod.
_TAINTS_KUBEADM = (
    (LABEL_CONTROL_PLANE, "NoSchedule"),  # kubeadm >= 1.24
    (LABEL_MASTER, "NoSchedule"),  # kubeadm < 1.25, and clusters upgraded from it
)
_TAINTS_RKE1 = (
    (LABEL_RKE1, "NoSchedule"),  # controlplane=true:NoSchedule
    ("node-role.kubernetes.io/etcd", "NoExecute"),  # etcd=true:NoExecute on combined nodes
)
_TAINTS_RKE2 = (
    (LABEL_CONTROL_PLANE, "NoSchedule"),
    ("CriticalAddonsOnly", None),  # the taint RKE2's docs suggest for dedicated servers
)
# A node whose cloud provider has not initialised it yet: the upstream manifest
# tolerates it so that the extender can start before the cloud controller.
_TAINT_UNINITIALIZED = ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule")

_TAINTS_BY_LABEL = {
    LABEL_CONTROL_PLANE: _TAINTS_KUBEADM + _TAINTS_RKE2,
    LABEL_MASTER: _TAINTS_KUBEADM + _TAINTS_RKE2,
    LABEL_RKE1: _TAINTS_RKE1,
}


class GpuAddonsError(ValueError):
    """Bad input to the role's selection logic; the message says what and why."""


# --------------------------------------------------------------------------
# Kubernetes versions and the APIs they serve
# --------------------------------------------------------------------------


def parse_version(value):
    """``"v1.29.3+rke2r1"`` -> ``(1, 29, 3)``; a missing patch level is 0."""
    return parse_kube_version(value, GpuAddonsError, "gpu_cluster_addons_kubernetes_version")


def kube_version(value):
    """Normalise a version string: ``"v1.29.3+rke2r1"`` -> ``"1.29.3"``."""
    return "{}.{}.{}".format(*parse_version(value))


def api_versions(version):
    """What the manifests may use on a cluster of ``version``.

    Returns a dict: ``apps``, ``rbac``, ``runtimeclass`` (None where RuntimeClass
    is not served), ``runtimeclass_scheduling``, ``seccomp_field`` (the
    securityContext field; the annotation before 1.19),
    ``critical_priority_any_namespace`` (system-*-critical outside kube-system),
    ``server_side_apply``.
    """
    ver = parse_version(version)
    if ver[:2] < MIN_VERSION:
        raise GpuAddonsError(
            f"Kubernetes {kube_version(version)} is older than {MIN_VERSION[0]}.{MIN_VERSION[1]}, "
            "the oldest version gpu_cluster_addons writes manifests for"
        )
    minor = ver[:2]
    return {
        "version": "{}.{}.{}".format(*ver),
        # DaemonSet/Deployment: apps/v1 since 1.9; extensions/v1beta1 gone in 1.16.
        "apps": "apps/v1",
        "rbac": "rbac.authorization.k8s.io/v1",
        # RuntimeClass: node.k8s.io/v1beta1 1.14-1.19 (removed in 1.25), v1 from 1.20.
        "runtimeclass": "node.k8s.io/v1" if minor >= (1, 20) else "node.k8s.io/v1beta1",
        # RuntimeClass.scheduling (nodeSelector, tolerations) from 1.16.
        "runtimeclass_scheduling": minor >= (1, 16),
        # securityContext.seccompProfile from 1.19; the alpha annotation before.
        "seccomp_field": minor >= (1, 19),
        # Before 1.17 pods with system-node-critical/system-cluster-critical
        # were admitted in kube-system only.
        "critical_priority_any_namespace": minor >= (1, 17),
        # Server-side apply is GA in 1.22.
        "server_side_apply": minor >= (1, 22),
    }


# --------------------------------------------------------------------------
# Control-plane selection
# --------------------------------------------------------------------------


def _toleration(key, effect):
    tol = {"key": key, "operator": "Exists"}
    if effect:
        tol["effect"] = effect
    return tol


def _tolerations(taints):
    unique = sorted(set(taints), key=lambda t: (t[0], t[1] or ""))
    return [_toleration(key, effect) for key, effect in unique]


def _labels_of(node):
    if not isinstance(node, dict):
        return {}
    return (node.get("metadata") or {}).get("labels") or {}


def _distribution_labels(distribution, version):
    if distribution == "kubeadm":
        # kubeadm labels control-plane nodes node-role.kubernetes.io/control-plane
        # from 1.20; before, only node-role.kubernetes.io/master.
        if version is not None and parse_version(version)[:2] < (1, 20):
            return [LABEL_MASTER]
        return [LABEL_CONTROL_PLANE]
    if distribution == "rke":
        return [LABEL_RKE1]
    if distribution in ("rke2", "k3s"):
        return [LABEL_CONTROL_PLANE]
    # auto without a node list: any of them (nodeSelectorTerms are ORed).
    return list(CONTROL_PLANE_LABELS)


def _placement(keys, taints, source, warnings=None):
    """The answer of control_plane: label keys, tolerations of ``taints``, where it came from."""
    return {
        "label_keys": keys,
        "tolerations": _tolerations(taints),
        "source": source,
        "warnings": warnings or [],
    }


def _all_control_plane_taints():
    return _TAINTS_BY_LABEL[LABEL_CONTROL_PLANE] + _TAINTS_BY_LABEL[LABEL_RKE1] + (_TAINT_UNINITIALIZED,)


def _taints_of_labels(keys):
    taints = [_TAINT_UNINITIALIZED]
    for key in keys:
        taints.extend(_TAINTS_BY_LABEL[key])
    return taints


def _placement_from_label(label):
    """An explicit node label key (the role variable) wins over what nodes and distribution say."""
    label = str(label).split("=", 1)[0].strip()
    if not label:
        raise GpuAddonsError("gpu_cluster_addons_control_plane_label: empty label key")
    taints = (*_TAINTS_BY_LABEL.get(label, _all_control_plane_taints()), _TAINT_UNINITIALIZED)
    return _placement([label], taints, "variable")


def _placement_from_nodes(nodes):
    """Where the extender runs, from the labels and taints of the cluster's nodes."""
    if not isinstance(nodes, list):
        raise GpuAddonsError("control_plane: nodes must be the list of Node objects from k8s_info")
    all_taints = _all_control_plane_taints()
    present = [key for key in CONTROL_PLANE_LABELS if any(key in _labels_of(n) for n in nodes)]
    if len(nodes) == 1:
        # Single-node cluster: the extender must run on the only node,
        # whatever it is labelled and however it is tainted.
        return _placement([], all_taints, "single-node")
    if not present:
        warning = (
            "no node carries a control-plane label ({}); the scheduler extender may run on any node: "
            "kube-scheduler must reach it through the node port".format(", ".join(CONTROL_PLANE_LABELS))
        )
        return _placement([], all_taints, "detected", [warning])
    # kubeadm 1.20-1.23 sets both control-plane and master: one is enough.
    keys = [LABEL_CONTROL_PLANE] if LABEL_CONTROL_PLANE in present else present
    if LABEL_RKE1 in present and LABEL_RKE1 not in keys:
        keys.append(LABEL_RKE1)
    taints = _taints_of_labels(keys)
    # And whatever known control-plane taint the selected nodes really carry.
    known = {t[0] for t in all_taints}
    for node in nodes:
        if any(k in _labels_of(node) for k in keys):
            for taint in (node.get("spec") or {}).get("taints") or []:
                if taint.get("key") in known:
                    taints.append((taint["key"], taint.get("effect")))
    return _placement(keys, taints, "detected")


def control_plane(nodes=None, distribution="auto", kubernetes_version=None, label=None):
    """Where the scheduler extender runs, and what it tolerates there.

    ``nodes``: the ``resources`` of ``kubernetes.core.k8s_info kind=Node`` (or
    None when rendering without a cluster). ``distribution``: auto, kubeadm,
    rke, rke2, k3s. ``label``: an explicit node label key that wins over both.

    Returns ``{"label_keys": [...], "tolerations": [...], "source": str,
    "warnings": [...]}``. ``label_keys`` become nodeAffinity terms with
    ``operator: Exists`` (ORed), which matches ``""`` (kubeadm) and ``"true"``
    (RKE1/RKE2/k3s) alike; an empty list means "any node" (single-node
    clusters, and clusters whose control plane is not visible as nodes).
    """
    if distribution not in DISTRIBUTIONS:
        raise GpuAddonsError(
            f"gpu_cluster_addons_distribution: {distribution!r} is not one of {', '.join(DISTRIBUTIONS)}"
        )
    if label:
        return _placement_from_label(label)
    if nodes:
        return _placement_from_nodes(nodes)
    keys = _distribution_labels(distribution, kubernetes_version)
    taints = _all_control_plane_taints() if distribution == "auto" else _taints_of_labels(keys)
    return _placement(keys, taints, "distribution")
