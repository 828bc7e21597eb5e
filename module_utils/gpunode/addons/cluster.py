# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Decisions of the gpu_cluster_addons role: what to roll out, where, and when it is done.

Everything the role decides is here, pure Python, tested without Ansible:
which API versions a Kubernetes version serves, which control-plane label and
tolerations a cluster needs, which labels a GPU node gets from the detection
facts, whether the device plugin pods must ask for the ``nvidia`` RuntimeClass
(from the container-runtime facts of each GPU node), which manifest files a
mode consists of, and whether what the cluster reports means "ready". The
modules ``gpu_cluster_addons_plan`` and ``gpu_cluster_addons_wait`` call it;
they run on the controller (the play's localhost).

Errors are raised as ``GpuAddonsError`` (a ValueError) naming the variable or
host at fault; the modules turn them into a task failure.
"""

import re

from ansible.module_utils.gpunode.driver.gpu import product_name
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

# Kubernetes label values: at most 63 characters, alphanumerics at both ends,
# '-', '_' and '.' between.
_LABEL_VALUE_MAX = 63

# The manifests of each mode: (file, template). Files sort in the order they
# must be applied; names are stable because GitOps repositories track them.
_RUNTIMECLASS = ("40-runtimeclass-nvidia.yaml", "runtimeclass-nvidia.yaml.j2")
_CATALOGUE = {
    "nvidia": (
        ("10-serviceaccount-nvidia-device-plugin.yaml", "serviceaccount-nvidia-device-plugin.yaml.j2"),
        ("20-configmap-nvidia-device-plugin-config.yaml", "configmap-nvidia-device-plugin-config.yaml.j2"),
        ("50-daemonset-nvidia-device-plugin.yaml", "daemonset-nvidia-device-plugin.yaml.j2"),
    ),
    "gpushare": (
        ("10-serviceaccount-gpushare-device-plugin.yaml", "serviceaccount-gpushare-device-plugin.yaml.j2"),
        ("10-serviceaccount-gpushare-schd-extender.yaml", "serviceaccount-gpushare-schd-extender.yaml.j2"),
        ("20-clusterrole-gpushare-device-plugin.yaml", "clusterrole-gpushare-device-plugin.yaml.j2"),
        ("20-clusterrole-gpushare-schd-extender.yaml", "clusterrole-gpushare-schd-extender.yaml.j2"),
        (
            "30-clusterrolebinding-gpushare-device-plugin.yaml",
            "clusterrolebinding-gpushare-device-plugin.yaml.j2",
        ),
        (
            "30-clusterrolebinding-gpushare-schd-extender.yaml",
            "clusterrolebinding-gpushare-schd-extender.yaml.j2",
        ),
        ("50-daemonset-gpushare-device-plugin.yaml", "daemonset-gpushare-device-plugin.yaml.j2"),
        ("50-deployment-gpushare-schd-extender.yaml", "deployment-gpushare-schd-extender.yaml.j2"),
        ("60-service-gpushare-schd-extender.yaml", "service-gpushare-schd-extender.yaml.j2"),
    ),
    "hami": (
        ("10-serviceaccount-hami-device-plugin.yaml", "serviceaccount-hami-device-plugin.yaml.j2"),
        ("10-serviceaccount-hami-scheduler.yaml", "serviceaccount-hami-scheduler.yaml.j2"),
        ("20-clusterrole-hami-device-plugin.yaml", "clusterrole-hami-device-plugin.yaml.j2"),
        ("20-clusterrole-hami-scheduler.yaml", "clusterrole-hami-scheduler.yaml.j2"),
        ("20-configmap-hami-device-plugin.yaml", "configmap-hami-device-plugin.yaml.j2"),
        ("20-configmap-hami-scheduler-device.yaml", "configmap-hami-scheduler-device.yaml.j2"),
        ("30-clusterrolebinding-hami-device-plugin.yaml", "clusterrolebinding-hami-device-plugin.yaml.j2"),
        ("30-clusterrolebinding-hami-scheduler.yaml", "clusterrolebinding-hami-scheduler.yaml.j2"),
        ("50-daemonset-hami-device-plugin.yaml", "daemonset-hami-device-plugin.yaml.j2"),
        ("50-deployment-hami-scheduler.yaml", "deployment-hami-scheduler.yaml.j2"),
        ("60-service-hami-scheduler.yaml", "service-hami-scheduler.yaml.j2"),
    ),
}
# Files a mode has only with an option (manifest_plan's ``options``): the NVIDIA
# plugin's config-manager reads its node's label (named configs), its MPS
# control daemon (a config shares by MPS); HAMi's scheduler configuration,
# for its own kube-scheduler (deployment) or for the cluster's (extender).
_OPTIONAL = {
    "nvidia-named": (
        ("20-clusterrole-nvidia-device-plugin.yaml", "clusterrole-nvidia-device-plugin.yaml.j2"),
        (
            "30-clusterrolebinding-nvidia-device-plugin.yaml",
            "clusterrolebinding-nvidia-device-plugin.yaml.j2",
        ),
    ),
    "nvidia-mps": (
        ("50-daemonset-nvidia-mps-control-daemon.yaml", "daemonset-nvidia-mps-control-daemon.yaml.j2"),
    ),
    "hami-deployment": (
        ("20-configmap-hami-scheduler.yaml", "configmap-hami-scheduler.yaml.j2"),
        ("30-clusterrolebinding-hami-scheduler-kube.yaml", "clusterrolebinding-hami-scheduler-kube.yaml.j2"),
        (
            "30-clusterrolebinding-hami-scheduler-volume.yaml",
            "clusterrolebinding-hami-scheduler-volume.yaml.j2",
        ),
    ),
    "hami-extender": (
        ("20-configmap-hami-kube-scheduler-extender.yaml", "configmap-hami-kube-scheduler-extender.yaml.j2"),
    ),
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


def _node_name(node):
    return (node.get("metadata") or {}).get("name", "?") if isinstance(node, dict) else "?"


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


# --------------------------------------------------------------------------
# GPU node labels from the detection role's facts
# --------------------------------------------------------------------------


def label_value(text):
    """A valid Kubernetes label value: ``"Tesla T4"`` -> ``"Tesla-T4"``."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-_.")
    value = re.sub(r"-{2,}", "-", value)
    return value[:_LABEL_VALUE_MAX].rstrip("-_.")


def accelerator_value(product):
    """The seeds' ``accelerator`` form: ``"Tesla T4"`` -> ``"nvidia-tesla-t4"``."""
    slug = re.sub(r"[^a-z0-9]+", "-", str(product).lower()).strip("-")
    if not slug.startswith("nvidia"):
        slug = "nvidia-" + slug if slug else "nvidia"
    return slug[:_LABEL_VALUE_MAX].rstrip("-")


# Labels that belong to one mode (value None in the others: a merge patch with
# None removes what an earlier run in another mode left).
MODE_LABELS = {
    "gpushare": {"gpushare": "true"},  # the gpushare device plugin's nodeSelector
    "hami": {"gpu": "on"},  # HAMi's device plugin's nodeSelector (chart: nvidiaNodeSelector)
    "nvidia": {},
}
# Set per node in nvidia mode by the plan (device plugin config of the node).
NVIDIA_CONFIG_LABELS = ("nvidia.com/device-plugin.config", "nvidia.com/mps.capable")


def node_labels(facts, mode, extra_labels=None, plugin_labels=None):
    """Labels a GPU node gets from its ``ansible_facts.nvidia_gpu``.

    ``nvidia.com/gpu.present``, ``nvidia.com/gpu.count``,
    ``nvidia.com/gpu.product`` (GPU feature discovery's names), ``accelerator``
    (``nvidia-tesla-t4``) and the labels of ``MODE_LABELS``: ``gpushare=true``
    in gpushare mode, ``gpu=on`` in hami mode, None (removed) in the other
    modes. ``plugin_labels``: the node's ``nvidia.com/device-plugin.config``
    and ``nvidia.com/mps.capable`` (nvidia mode; removed in the others).
    """
    if mode not in MODES:
        raise GpuAddonsError(f"gpu_cluster_addons_mode: {mode!r} is not one of {', '.join(MODES)}")
    if not isinstance(facts, dict):
        raise GpuAddonsError("nvidia_gpu facts must be a dict")
    count = int(facts.get("gpu_count") or 0)
    gpus = [d for d in facts.get("devices") or [] if isinstance(d, dict) and d.get("kind") == "gpu"]
    names = [d.get("name") for d in gpus if d.get("name")] or list(facts.get("models") or [])
    labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(count)}
    if names:
        # The first GPU by bus address names the node, as GPU feature discovery does.
        product = product_name(names[0])
        if label_value(product):
            labels["nvidia.com/gpu.product"] = label_value(product)
            labels["accelerator"] = accelerator_value(product)
    for owner, owned in sorted(MODE_LABELS.items()):
        for key, value in owned.items():
            labels[key] = value if owner == mode else None
    for key in NVIDIA_CONFIG_LABELS:
        labels[key] = (plugin_labels or {}).get(key) if mode == "nvidia" else None
    for key, value in (extra_labels or {}).items():
        labels[str(key)] = None if value is None else str(value)
    return labels


def gpu_nodes(hosts, mode, extra_labels=None):
    """The GPU nodes of the inventory: ``[{host, node, labels, gpu_count, sharing}]``, sorted by node.

    ``hosts``: one record per inventory host of the gpu_nodes group:
    ``{"host", "node_name" (gpu_cluster_addons_node_name or ""), "nodename"
    (ansible_facts.nodename or ""), "nvidia_gpu" (its facts or None)}``. The
    node name is ``node_name``, else the lower-cased ``nodename`` (what the
    kubelet registers), else the inventory name. A host without
    ``nvidia_gpu`` facts, or whose facts found no GPU, is an error naming every
    such host: labelling or waiting for a node that was never detected would
    hide the real problem.
    """
    result, missing, empty = [], [], []
    for record in hosts or []:
        host = record["host"]
        facts = record.get("nvidia_gpu")
        if not isinstance(facts, dict):
            missing.append(host)
            continue
        if not facts.get("present") or not int(facts.get("gpu_count") or 0):
            empty.append(host)
            continue
        node = record.get("node_name") or str(record.get("nodename") or host).lower()
        result.append(
            {
                "host": host,
                "node": str(node),
                "gpu_count": int(facts["gpu_count"]),
                "labels": node_labels(facts, mode, extra_labels, record.get("plugin_labels")),
                "sharing": record.get("sharing") or mode,
            }
        )
    problems = []
    if missing:
        problems.append(
            "no ansible_facts.nvidia_gpu for {}: run the GPU detection (playbooks/gpu_nodes.yml, "
            "module nvidia_gpu_facts) on these hosts in the same run".format(", ".join(missing))
        )
    if empty:
        problems.append("no NVIDIA GPU detected on {} (nvidia_gpu.present is false)".format(", ".join(empty)))
    if problems:
        raise GpuAddonsError("gpu_cluster_addons: " + "; ".join(problems))
    names = [r["node"] for r in result]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise GpuAddonsError(
            "gpu_cluster_addons: several hosts map to node {}; set gpu_cluster_addons_node_name "
            "per host".format(", ".join(dupes))
        )
    return sorted(result, key=lambda r: r["node"])


# --------------------------------------------------------------------------
# Which runtime the device plugin pods run with
# --------------------------------------------------------------------------

RUNTIME_CLASS_CHOICES = ("auto", "always", "never")


def pod_runtime_class(hosts, setting="auto", handler="nvidia"):
    """Must the device plugin pods set ``runtimeClassName: nvidia``? ``{name, reasons}``.

    The device plugin needs NVML, which only the NVIDIA container runtime puts
    in a container. Where nvidia is the default runtime of the engine a GPU
    node's kubelet uses, pods get it without asking; elsewhere (a containerd
    whose default stayed runc, an engine the container-runtime role did not
    configure, a node whose facts are missing) they must ask for the
    RuntimeClass whose handler is the nvidia runtime. One DaemonSet serves
    every GPU node, so one node that needs it is enough. The RuntimeClass is
    safe everywhere the container-runtime role ran (it declares the handler
    on every engine), so an unknown is decided for it.

    ``hosts``: records with ``host`` and ``container_runtime`` (the host's
    ``ansible_facts.nvidia_container_runtime`` or None). ``setting``: auto,
    always or never. Returns ``{"name": "nvidia" or None, "reasons": [...]}``.
    """
    if setting not in RUNTIME_CLASS_CHOICES:
        raise GpuAddonsError(
            f"gpu_cluster_addons_pod_runtime_class: {setting!r} is not one of "
            f"{', '.join(RUNTIME_CLASS_CHOICES)}"
        )
    if setting == "always":
        return {"name": handler, "reasons": ["gpu_cluster_addons_pod_runtime_class is always"]}
    if setting == "never":
        return {"name": None, "reasons": ["gpu_cluster_addons_pod_runtime_class is never"]}
    if not hosts:
        return {
            "name": handler,
            "reasons": ["no GPU host to tell whether nvidia is the default runtime of its kubelet's engine"],
        }
    needs = []
    for record in hosts:
        host, facts = record["host"], record.get("container_runtime")
        if not isinstance(facts, dict):
            needs.append(
                f"{host}: no ansible_facts.nvidia_container_runtime "
                "(playbooks/container_runtime.yml has not run on it in this run)"
            )
            continue
        engine = facts.get("kubelet_engine")
        if not engine:
            needs.append(f"{host}: the container engine of its kubelet is not known")
            continue
        default = ((facts.get("engines") or {}).get(engine) or {}).get("default_runtime")
        if default != handler:
            runs = default or "an unknown runtime"
            needs.append(f"{host}: its kubelet's engine {engine} runs {runs} by default")
    if needs:
        return {"name": handler, "reasons": needs}
    reason = f"nvidia is the default runtime of every GPU node's kubelet engine ({len(hosts)} node(s))"
    return {"name": None, "reasons": [reason]}


# --------------------------------------------------------------------------
# The manifest files of a mode
# --------------------------------------------------------------------------


def manifest_plan(mode, kubernetes_version, runtime_class=True, options=()):
    """``{"present": [{file, template}], "absent": [{file, template}]}``.

    ``present``: the files of ``mode`` in apply order, with those of its
    ``options`` (keys of ``_OPTIONAL`` such as ``nvidia-named``); ``absent``:
    every other file any mode or option renders (the modes are exclusive:
    switching removes the others' objects; turning an option off removes its
    files). The RuntimeClass belongs to every mode; with ``runtime_class``
    false it is in neither list: pods may use it, so gpunode stops managing
    it but never deletes it.
    """
    if mode not in MODES:
        raise GpuAddonsError(f"gpu_cluster_addons_mode: {mode!r} is not one of {', '.join(MODES)}")
    apis = api_versions(kubernetes_version)
    if mode == "dra":  # its device-plugin pools run nvidia's files; the DRA half: gpunode/addons/dra.py
        mode = "nvidia"
    present = list(_CATALOGUE.get(mode, ()))
    for key in sorted(set(options or ())):
        if key.split("-", 1)[0] == mode:
            present.extend(_OPTIONAL.get(key, ()))
    everything = [entry for files in _CATALOGUE.values() for entry in files]
    everything += [entry for files in _OPTIONAL.values() for entry in files]
    names = {entry[0] for entry in present}
    absent = sorted({entry for entry in everything if entry[0] not in names})
    if runtime_class and apis["runtimeclass"]:
        present.append(_RUNTIMECLASS)
    present.sort()
    return {
        "present": [{"file": f, "template": t} for f, t in present],
        "absent": [{"file": f, "template": t} for f, t in absent],
    }


# --------------------------------------------------------------------------
# Readiness, from what k8s_info returns
# --------------------------------------------------------------------------


def workload_status(resources, kind, name):
    """Is a DaemonSet/Deployment rolled out? ``{ready, message}``."""
    objs = [r for r in resources or [] if isinstance(r, dict)]
    if not objs:
        return {"ready": False, "message": f"{kind} {name} does not exist"}
    obj = objs[0]
    status = obj.get("status") or {}
    generation = (obj.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    if generation is not None and observed is not None and observed < generation:
        return {
            "ready": False,
            "message": f"{kind} {name}: controller has not seen generation {generation} yet",
        }
    if kind == "DaemonSet":
        desired = int(status.get("desiredNumberScheduled") or 0)
        ready = int(status.get("numberReady") or 0)
        updated = int(status.get("updatedNumberScheduled") or 0)
        if desired == 0:
            return {
                "ready": False,
                "message": f"DaemonSet {name}: no node matches its nodeSelector "
                "(are the GPU nodes labelled?)",
            }
        if ready < desired or updated < desired:
            return {
                "ready": False,
                "message": f"DaemonSet {name}: {ready}/{desired} pods ready, {updated}/{desired} updated",
            }
        return {"ready": True, "message": f"DaemonSet {name}: {ready}/{desired} pods ready"}
    wanted = int((obj.get("spec") or {}).get("replicas", 1) or 0)
    available = int(status.get("availableReplicas") or 0)
    updated = int(status.get("updatedReplicas") or 0)
    if available < wanted or updated < wanted:
        return {
            "ready": False,
            "message": f"{kind} {name}: {available}/{wanted} replicas available, {updated}/{wanted} updated",
        }
    return {"ready": True, "message": f"{kind} {name}: {available}/{wanted} replicas available"}


def _quantity_positive(value):
    text = str(value or "").strip()
    match = re.match(r"^(\d+(?:\.\d+)?)", text)
    return bool(match) and float(match.group(1)) > 0


def allocatable_status(nodes, expected, resource):
    """Does every expected GPU node advertise ``resource`` in its allocatable?

    ``nodes``: k8s_info resources (kind Node); ``expected``: node names.
    Returns ``{ready, missing: [...], message}`` naming each node that is
    absent from the cluster or advertises nothing.
    """
    by_name = {_node_name(n): n for n in nodes or [] if isinstance(n, dict)}
    problems = []
    for name in sorted(set(expected or [])):
        node = by_name.get(name)
        if node is None:
            problems.append(f"{name}: no such node in the cluster (set gpu_cluster_addons_node_name?)")
            continue
        value = ((node.get("status") or {}).get("allocatable") or {}).get(resource)
        if not _quantity_positive(value):
            problems.append(f"{name}: {resource} is {value or 'absent'} in allocatable")
    if problems:
        return {
            "ready": False,
            "missing": [p.split(":")[0] for p in problems],
            "message": f"GPU nodes not advertising {resource}: " + "; ".join(problems),
        }
    return {
        "ready": True,
        "missing": [],
        "message": f"all {len(set(expected or []))} GPU node(s) advertise {resource}",
    }
