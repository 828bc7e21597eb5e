"""Selection logic of the gpu_cluster_addons role, as Jinja filters.

Everything here is pure Python (standard library only) and runs on the
controller: which API versions a Kubernetes version serves, which control-plane
label and tolerations a cluster needs, which labels a GPU node gets from the
facts of the detection role, which manifest files a mode consists of, and
whether what the cluster reports means "ready". The role's tasks only call
these filters; tests/unit/test_gpu_cluster_addons.py tests them directly.

Errors are raised as ``GpuAddonsError`` (a ValueError); Ansible turns them into
a task failure that carries the message.
"""

import re

# Kubernetes versions the manifests are written for. 1.14 is the first with
# RuntimeClass in node.k8s.io/v1beta1; apps/v1, rbac/v1 and the
# system-node-critical priority class are all older.
MIN_VERSION = (1, 14)

MODES = ("nvidia", "gpushare")
DISTRIBUTIONS = ("auto", "kubeadm", "rke", "rke2", "k3s")

RESOURCE_BY_MODE = {"nvidia": "nvidia.com/gpu", "gpushare": "aliyun.com/gpu-mem"}

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
}


class GpuAddonsError(ValueError):
    """Bad input to the role's selection logic; the message says what and why."""


# --------------------------------------------------------------------------
# Kubernetes versions and the APIs they serve
# --------------------------------------------------------------------------

_VERSION_RE = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+][0-9A-Za-z.+-]*)?\s*$")


def parse_version(value):
    """``"v1.29.3+rke2r1"`` -> ``(1, 29, 3)``; a missing patch level is 0.

    Accepts what ``kubectl version`` and the API server report (``gitVersion``
    with ``-eks-...``, ``+k3s1``, ``-gke.100`` suffixes) and what users type
    (``1.28``, ``v1.28.2``).
    """
    if isinstance(value, (list, tuple)):
        value = ".".join(str(part) for part in value)
    match = _VERSION_RE.match(str(value)) if value is not None else None
    if not match:
        raise GpuAddonsError(
            f"gpu_cluster_addons_kubernetes_version: {value!r} is not a Kubernetes version "
            "(expected e.g. 1.29 or v1.29.3)"
        )
    major, minor, patch = match.groups()
    return (int(major), int(minor), int(patch or 0))


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
    warnings = []
    all_taints = (
        _TAINTS_BY_LABEL[LABEL_CONTROL_PLANE] + _TAINTS_BY_LABEL[LABEL_RKE1] + (_TAINT_UNINITIALIZED,)
    )

    if label:
        label = str(label).split("=", 1)[0].strip()
        if not label:
            raise GpuAddonsError("gpu_cluster_addons_control_plane_label: empty label key")
        taints = (*_TAINTS_BY_LABEL.get(label, all_taints), _TAINT_UNINITIALIZED)
        return {"label_keys": [label], "tolerations": _tolerations(taints), "source": "variable",
                "warnings": warnings}

    if nodes:
        if not isinstance(nodes, list):
            raise GpuAddonsError("control_plane: nodes must be the list of Node objects from k8s_info")
        present = [key for key in CONTROL_PLANE_LABELS if any(key in _labels_of(n) for n in nodes)]
        if len(nodes) == 1:
            # Single-node cluster: the extender must run on the only node,
            # whatever it is labelled and however it is tainted.
            return {"label_keys": [], "tolerations": _tolerations(all_taints), "source": "single-node",
                    "warnings": warnings}
        if not present:
            warnings.append(
                "no node carries a control-plane label ({}); the scheduler extender may run on any node: "
                "kube-scheduler must reach it through the node port".format(", ".join(CONTROL_PLANE_LABELS))
            )
            return {"label_keys": [], "tolerations": _tolerations(all_taints), "source": "detected",
                    "warnings": warnings}
        # kubeadm 1.20-1.23 sets both control-plane and master: one is enough.
        keys = [LABEL_CONTROL_PLANE] if LABEL_CONTROL_PLANE in present else present
        if LABEL_RKE1 in present and LABEL_RKE1 not in keys:
            keys.append(LABEL_RKE1)
        taints = [_TAINT_UNINITIALIZED]
        for key in keys:
            taints.extend(_TAINTS_BY_LABEL[key])
        # And whatever known control-plane taint the selected nodes really carry.
        known = {t[0] for t in all_taints}
        for node in nodes:
            if any(k in _labels_of(node) for k in keys):
                for taint in (node.get("spec") or {}).get("taints") or []:
                    if taint.get("key") in known:
                        taints.append((taint["key"], taint.get("effect")))
        return {"label_keys": keys, "tolerations": _tolerations(taints), "source": "detected",
                "warnings": warnings}

    keys = _distribution_labels(distribution, kubernetes_version)
    if distribution == "auto":
        taints = all_taints
    else:
        taints = [_TAINT_UNINITIALIZED]
        for key in keys:
            taints.extend(_TAINTS_BY_LABEL[key])
    return {"label_keys": keys, "tolerations": _tolerations(taints), "source": "distribution",
            "warnings": warnings}


# --------------------------------------------------------------------------
# GPU node labels from the detection role's facts
# --------------------------------------------------------------------------

_BRACKETED = re.compile(r"\[([^\]]+)\]")


def product_name(model):
    """The marketing name of a GPU from its pci.ids name.

    ``"TU104GL [Tesla T4]"`` -> ``"Tesla T4"``; ``"GA100 [A100 SXM4 40GB]"`` ->
    ``"A100 SXM4 40GB"``; a name without brackets is kept. Where pci.ids lists
    several names (``"GP102 [TITAN X / TITAN Xp]"``), the first is taken.
    """
    text = str(model or "").strip()
    match = _BRACKETED.search(text)
    if match:
        text = match.group(1)
    text = text.split(" / ")[0].strip()
    return text


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


def node_labels(facts, mode, extra_labels=None):
    """Labels a GPU node gets from its ``ansible_facts.nvidia_gpu``.

    ``nvidia.com/gpu.present``, ``nvidia.com/gpu.count``,
    ``nvidia.com/gpu.product`` (GPU feature discovery's names), ``accelerator``
    (``nvidia-tesla-t4``) and, in gpushare mode, ``gpushare=true`` (the
    device plugin's nodeSelector). In nvidia mode ``gpushare`` is None: a
    merge patch with None removes the label left by a previous gpushare run.
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
    labels["gpushare"] = "true" if mode == "gpushare" else None
    for key, value in (extra_labels or {}).items():
        labels[str(key)] = None if value is None else str(value)
    return labels


def gpu_nodes(hosts, hostvars, mode, extra_labels=None):
    """The GPU nodes of the inventory: ``[{host, node, labels, gpu_count}]``.

    ``hosts``: inventory names (the gpu_nodes group); ``hostvars``: Ansible's
    hostvars. The node name is the host's ``gpu_cluster_addons_node_name``,
    else its lower-cased ``ansible_facts.nodename`` (what kubelet registers),
    else the inventory name. A host without ``ansible_facts.nvidia_gpu``, or
    whose facts found no GPU, is an error naming every such host: labelling or
    waiting for a node that was never detected would hide the real problem.
    """
    result, missing, empty = [], [], []
    for host in hosts or []:
        hvars = hostvars.get(host, {})
        facts = (hvars.get("ansible_facts") or {}).get("nvidia_gpu")
        if not isinstance(facts, dict):
            missing.append(host)
            continue
        if not facts.get("present") or not int(facts.get("gpu_count") or 0):
            empty.append(host)
            continue
        node = hvars.get("gpu_cluster_addons_node_name") or str(
            (hvars.get("ansible_facts") or {}).get("nodename") or host
        ).lower()
        result.append({
            "host": host,
            "node": str(node),
            "gpu_count": int(facts["gpu_count"]),
            "labels": node_labels(facts, mode, extra_labels),
        })
    problems = []
    if missing:
        problems.append(
            "no ansible_facts.nvidia_gpu for {}: run the GPU detection (playbooks/gpu_nodes.yml, "
            "module nvidia_gpu_facts) on these hosts first, or keep the fact cache".format(", ".join(missing))
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
# The manifest files of a mode
# --------------------------------------------------------------------------


def manifest_plan(mode, kubernetes_version, runtime_class=True):
    """``{"present": [{file, template}], "absent": [{file, template}]}``.

    ``present``: the files of ``mode`` in apply order; ``absent``: those of the
    other mode (the two device plugins conflict, so switching removes the
    other one). The RuntimeClass belongs to both modes; with
    ``runtime_class`` false it is in neither list: pods may use it, so
    gpunode stops managing it but never deletes it.
    """
    if mode not in MODES:
        raise GpuAddonsError(f"gpu_cluster_addons_mode: {mode!r} is not one of {', '.join(MODES)}")
    apis = api_versions(kubernetes_version)
    other = "gpushare" if mode == "nvidia" else "nvidia"
    present = list(_CATALOGUE[mode])
    absent = list(_CATALOGUE[other])
    if runtime_class and apis["runtimeclass"]:
        present.append(_RUNTIMECLASS)
    present.sort()
    absent.sort()
    return {
        "present": [{"file": f, "template": t} for f, t in present],
        "absent": [{"file": f, "template": t} for f, t in absent],
    }


def manifest_files(names, contents):
    """zip() of file names and rendered texts into a dict, checking both line up."""
    names, contents = list(names), list(contents)
    if len(names) != len(contents):
        raise GpuAddonsError(f"manifest_files: {len(names)} names but {len(contents)} rendered templates")
    return dict(zip(names, contents, strict=True))


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
        return {"ready": False,
                "message": f"{kind} {name}: controller has not seen generation {generation} yet"}
    if kind == "DaemonSet":
        desired = int(status.get("desiredNumberScheduled") or 0)
        ready = int(status.get("numberReady") or 0)
        updated = int(status.get("updatedNumberScheduled") or 0)
        if desired == 0:
            return {"ready": False, "message": f"DaemonSet {name}: no node matches its nodeSelector "
                                               "(are the GPU nodes labelled?)"}
        if ready < desired or updated < desired:
            return {"ready": False, "message": f"DaemonSet {name}: {ready}/{desired} pods ready, "
                                               f"{updated}/{desired} updated"}
        return {"ready": True, "message": f"DaemonSet {name}: {ready}/{desired} pods ready"}
    wanted = int((obj.get("spec") or {}).get("replicas", 1) or 0)
    available = int(status.get("availableReplicas") or 0)
    updated = int(status.get("updatedReplicas") or 0)
    if available < wanted or updated < wanted:
        return {"ready": False, "message": f"{kind} {name}: {available}/{wanted} replicas available, "
                                           f"{updated}/{wanted} updated"}
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
        return {"ready": False, "missing": [p.split(":")[0] for p in problems],
                "message": f"GPU nodes not advertising {resource}: " + "; ".join(problems)}
    return {"ready": True, "missing": [],
            "message": f"all {len(set(expected or []))} GPU node(s) advertise {resource}"}


class FilterModule:
    """gpu_cluster_addons filters."""

    def filters(self):
        return {
            "gpu_addons_kube_version": kube_version,
            "gpu_addons_api": api_versions,
            "gpu_addons_control_plane": control_plane,
            "gpu_addons_node_labels": node_labels,
            "gpu_addons_gpu_nodes": gpu_nodes,
            "gpu_addons_manifest_plan": manifest_plan,
            "gpu_addons_manifest_files": manifest_files,
            "gpu_addons_workload_status": workload_status,
            "gpu_addons_allocatable_status": allocatable_status,
            "gpu_addons_label_value": label_value,
        }
