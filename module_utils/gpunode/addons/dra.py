# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPUs by ResourceClaim: the NVIDIA DRA driver on host-installed drivers.

Decisions of ``gpu_cluster_addons`` for Dynamic Resource Allocation, pure
Python, tested without Ansible: which node pool allocates its GPUs by DRA
(label ``nvidia.com/gpu.allocation``), whether a node can take DRA (from the
facts the node roles published), which objects the cluster side consists of on
a Kubernetes version (built here as data, dumped to YAML by the role), and the
examples a user starts from.

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

from ansible.module_utils.gpunode.common.kube_version import parse as parse_kube_version
from ansible.module_utils.gpunode.kubelet.gates import GateError, refused_in_file
from ansible.module_utils.gpunode.validate import gate

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


def _version(value, what="gpu_cluster_addons_kubernetes_version"):
    return parse_kube_version(value, DraError, what)


def _text(version):
    return ".".join(str(part) for part in version)


def resource_api(kubernetes_version):
    """The resource.k8s.io version the DRA objects use: v1 from 1.34, refused before."""
    version = _version(kubernetes_version)
    if version[:2] < MIN_KUBERNETES[:2]:
        raise DraError(
            f"gpu_cluster_addons_mode dra: Kubernetes {_text(version)} serves DRA as beta only "
            "(resource.k8s.io/v1beta1 from 1.32, v1beta2 from 1.33, off by default); the NVIDIA DRA driver "
            f"needs {_text(MIN_KUBERNETES)} or later (resource.k8s.io/v1)"
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
# Preflight: can this node take DRA?
# --------------------------------------------------------------------------


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
        version = _version(kubelet["kubernetes_version"], "kubelet_gpu.kubernetes_version")
    except DraError as exc:
        found.unknowns.append(str(exc))
        return None
    if version < MIN_KUBERNETES:
        found.refusals.append(
            f"its kubelet is {_text(version)}; the NVIDIA DRA driver needs Kubernetes "
            f"{_text(MIN_KUBERNETES)} or later (resource.k8s.io/v1)"
        )
    gates = kubelet.get("gates") or {}
    try:
        refused = refused_in_file(gates, _text(version))
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
    cluster = _version(cluster_version) if cluster_version else None
    for record in records:
        if record.get("allocation") != "dra":
            continue
        found = Findings()
        version = _kubelet_check(record.get("kubelet"), found)
        if cluster and version and version[:2] > cluster[:2]:
            found.refusals.append(f"its kubelet {_text(version)} is newer than the cluster {_text(cluster)}")
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


# --------------------------------------------------------------------------
# RBAC of the kubelet plugin, per version
# --------------------------------------------------------------------------


def claim_status_rules(kubernetes_version, writes_device_status=WRITES_DEVICE_STATUS):
    """Rules for writing ResourceClaim ``status.devices``; none for a driver that does not.

    Before 1.36 ``resourceclaims/status`` (update, patch) covers it; from 1.36
    the API server also checks the synthetic ``resourceclaims/driver`` with
    node-aware verbs, and a kubelet plugin writes for its own node only
    (``associated-node:``). ``resourceclaims/binding`` is never granted: it
    is the scheduler's ([HARDEN]).
    """
    if not writes_device_status:
        return []
    rules = [
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims/status"],
            "verbs": ["get", "patch", "update"],
        }
    ]
    if _version(kubernetes_version)[:2] >= CLAIM_STATUS_AUTHZ_SINCE:
        rules.append(
            {
                "apiGroups": ["resource.k8s.io"],
                "resources": ["resourceclaims/driver"],
                "verbs": ["associated-node:patch", "associated-node:update"],
            }
        )
    return rules


def kubelet_plugin_rules(kubernetes_version, writes_device_status=WRITES_DEVICE_STATUS):
    """What the ``gpus`` kubelet plugin calls ([CODE]), a subset of [CHART] rbac-kubeletplugin.yaml.

    - resourceclaims get: ``cleanup.go`` reads a claim by name (the kubelet
      hands the plugin the claims to prepare);
    - resourceslices get/list/watch/create/update/delete: the ResourceSlices
      of its node, through the kubeletplugin helper (the chart grants the same);
    - nodes get: the helper makes its node the ResourceSlices' owner.

    Left out of the chart's role: nodes list/watch/update/patch (the
    compute-domains container's clique label), pods (MPS control daemons,
    ``sharing.go``), computedomains and computedomaincliques (ComputeDomains):
    none of them runs here.
    """
    rules = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]},
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceslices"],
            "verbs": ["create", "delete", "get", "list", "update", "watch"],
        },
    ]
    return rules + claim_status_rules(kubernetes_version, writes_device_status)


# --------------------------------------------------------------------------
# The objects of the cluster side
# --------------------------------------------------------------------------

DEFAULT_SETTINGS = {
    "namespace": "kube-system",
    # [CHART] values.yaml image.repository; tag v<appVersion>
    "image": "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu",
    "version": "v0.5.0",
    # the examples' pods (examples/, never applied): nvidia-smi comes from the host driver, by CDI
    "example_image": "ubuntu:24.04",
    "pull_policy": "IfNotPresent",
    "driver_root": "/",
    "kubelet_root": "/var/lib/kubelet",
    "cdi_root": "/var/run/cdi",
    "log_verbosity": 4,
    "extended_resource": True,
    "labels": {},
    "tolerations": [],
    "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
    "init_resources": {
        "requests": {"cpu": "10m", "memory": "32Mi"},
        "limits": {"cpu": "500m", "memory": "128Mi"},
    },
}


def settings_of(given):
    """DEFAULT_SETTINGS updated by the non-empty values of ``given``."""
    settings = dict(DEFAULT_SETTINGS)
    for key, value in (given or {}).items():
        if key not in DEFAULT_SETTINGS:
            raise DraError(
                f"dra settings: unknown key {key!r} (known: {', '.join(sorted(DEFAULT_SETTINGS))})"
            )
        if value is not None and value != "":
            settings[key] = value
    for key in ("driver_root", "kubelet_root", "cdi_root"):
        if not str(settings[key]).startswith("/"):
            raise DraError(f"gpu_cluster_addons_dra_{key}: {settings[key]!r} is not an absolute path")
    return settings


def _meta(name, settings, namespaced=True, component=None):
    labels = dict(settings["labels"])
    labels["app.kubernetes.io/name"] = NAME
    if component:
        labels["app.kubernetes.io/component"] = component
    meta = {"name": name}
    if namespaced:
        meta["namespace"] = settings["namespace"]
    meta["labels"] = dict(sorted(labels.items()))
    return meta


def _rbac(version, settings):
    rbac = "rbac.authorization.k8s.io/v1"
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _meta(SERVICE_ACCOUNT, settings, component="kubelet-plugin"),
    }
    role = {
        "apiVersion": rbac,
        "kind": "ClusterRole",
        "metadata": _meta(SERVICE_ACCOUNT, settings, False, "kubelet-plugin"),
        "rules": kubelet_plugin_rules(version),
    }
    binding = {
        "apiVersion": rbac,
        "kind": "ClusterRoleBinding",
        "metadata": _meta(SERVICE_ACCOUNT, settings, False, "kubelet-plugin"),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SERVICE_ACCOUNT},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": settings["namespace"]}],
    }
    return account, role, binding


def device_classes(version, settings):
    """gpu.nvidia.com and mig.nvidia.com ([CHART] deviceclass-gpu/mig.yaml).

    gpu.nvidia.com also serves ``nvidia.com/gpu`` as an extended resource where
    the version has it on and locked (1.37, [API]): a pod that asks for
    ``nvidia.com/gpu`` on a DRA node gets a whole GPU by DRA, while nodes of the
    device plugin keep serving it themselves.
    """
    api = resource_api(version)
    classes = []
    for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig")):
        expression = (
            f"device.driver == '{DRIVER_NAME}' && device.attributes['{DRIVER_NAME}'].type == '{kind}'"
        )
        spec = {"selectors": [{"cel": {"expression": expression}}]}
        if (
            kind == "gpu"
            and settings["extended_resource"]
            and _version(version)[:2] >= EXTENDED_RESOURCE_SINCE
        ):
            spec["extendedResourceName"] = "nvidia.com/gpu"
        meta = _meta(name, settings, False, "deviceclass")
        classes.append({"apiVersion": api, "kind": "DeviceClass", "metadata": meta, "spec": spec})
    return classes


def _env(settings):
    kubelet = settings["kubelet_root"].rstrip("/")
    return [
        {"name": "LOG_VERBOSITY", "value": str(settings["log_verbosity"])},
        {"name": "NVIDIA_DRIVER_ROOT", "value": settings["driver_root"]},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},  # [CHART]: runc, not "all"
        {"name": "CDI_ROOT", "value": settings["cdi_root"]},
        {"name": "NVIDIA_MIG_CONFIG_DEVICES", "value": "all"},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "SERVICE_ACCOUNT_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
        {"name": "IMAGE_NAME", "value": image_of(settings)},
        {"name": "IMAGE_PULL_POLICY", "value": settings["pull_policy"]},
        {"name": "KUBELET_REGISTRAR_DIRECTORY_PATH", "value": kubelet + "/plugins_registry"},
        {"name": "KUBELET_PLUGINS_DIRECTORY_PATH", "value": kubelet + "/plugins"},
        {"name": "HEALTHCHECK_PORT", "value": str(HEALTHCHECK_PORT)},
    ]


def image_of(settings):
    return f"{settings['image']}:{settings['version']}"


def _probe(failure, period):
    return {
        "grpc": {"port": HEALTHCHECK_PORT, "service": "liveness"},
        "failureThreshold": failure,
        "periodSeconds": period,
        "timeoutSeconds": 10,
    }


def _volumes(settings):
    kubelet = settings["kubelet_root"].rstrip("/")
    root = settings["driver_root"]
    parent = "/" if root.rstrip("/") == "" else (root.rstrip("/").rsplit("/", 1)[0] or "/")
    return [
        {
            "name": "plugins-registry",
            "hostPath": {"path": kubelet + "/plugins_registry", "type": "DirectoryOrCreate"},
        },
        {"name": "plugins", "hostPath": {"path": kubelet + "/plugins", "type": "DirectoryOrCreate"}},
        {"name": "cdi", "hostPath": {"path": settings["cdi_root"], "type": "DirectoryOrCreate"}},
        {"name": "driver-root-parent", "hostPath": {"path": parent, "type": "Directory"}},
        {"name": "driver-root", "hostPath": {"path": root, "type": "Directory"}},
    ]


def _containers(settings):
    kubelet = settings["kubelet_root"].rstrip("/")
    init = {
        # waits until the driver under the driver root answers ([CHART] kubelet-plugin-prestart.sh)
        "name": "init-container",
        "image": image_of(settings),
        "imagePullPolicy": settings["pull_policy"],
        "command": ["bash", "/usr/bin/kubelet-plugin-prestart.sh"],
        "env": [
            e
            for e in _env(settings)
            if e["name"]
            in (
                "NVIDIA_DRIVER_ROOT",
                "NVIDIA_VISIBLE_DEVICES",
                "KUBELET_REGISTRAR_DIRECTORY_PATH",
                "KUBELET_PLUGINS_DIRECTORY_PATH",
            )
        ],
        "resources": settings["init_resources"],
        "securityContext": {"privileged": True},
        "volumeMounts": [
            {"name": "driver-root-parent", "mountPath": "/driver-root-parent", "readOnly": True}
        ],
    }
    gpus = {
        "name": "gpus",
        "image": image_of(settings),
        "imagePullPolicy": settings["pull_policy"],
        "command": ["gpu-kubelet-plugin", "-v", "$(LOG_VERBOSITY)"],
        "env": _env(settings),
        "resources": settings["resources"],
        # creates MIG devices and device nodes, writes CDI specs: privileged, as upstream
        "securityContext": {"privileged": True},
        "startupProbe": _probe(600, 1),
        "livenessProbe": _probe(3, 30),
        "volumeMounts": [
            {"name": "plugins-registry", "mountPath": kubelet + "/plugins_registry"},
            {"name": "plugins", "mountPath": kubelet + "/plugins", "mountPropagation": "Bidirectional"},
            {"name": "cdi", "mountPath": settings["cdi_root"]},
            {"name": "driver-root", "mountPath": "/driver-root", "mountPropagation": "HostToContainer"},
        ],
    }
    return [init], [gpus]


def kubelet_plugin_daemonset(settings):
    """The kubelet plugin, on the DRA pool only: nodes labelled nvidia.com/gpu.allocation=dra."""
    init, containers = _containers(settings)
    # and the validation gate's taint: the GPUs are advertised before the gate opens
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                   dict(gate.TOLERATION)]
    tolerations += [t for t in settings["tolerations"] if t not in tolerations]
    pod = {
        "metadata": {"labels": dict(sorted(dict(SELECTOR, **{"app.kubernetes.io/name": NAME}).items()))},
        "spec": {
            "serviceAccountName": SERVICE_ACCOUNT,
            "priorityClassName": "system-node-critical",
            "nodeSelector": {"nvidia.com/gpu.present": "true", ALLOCATION_LABEL: "dra"},
            "tolerations": tolerations,
            "initContainers": init,
            "containers": containers,
            "volumes": _volumes(settings),
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _meta(DAEMONSET, settings, component="kubelet-plugin"),
        "spec": {
            "selector": {"matchLabels": dict(SELECTOR)},
            # [CHART]: replace every pod at once; claims already prepared stay usable
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": pod,
        },
    }


def manifests(kubernetes_version, given=None):
    """``{file: object}`` of the cluster side, files sorted in apply order."""
    settings = settings_of(given)
    account, role, binding = _rbac(kubernetes_version, settings)
    gpu, mig = device_classes(kubernetes_version, settings)
    return {
        f"10-serviceaccount-{SERVICE_ACCOUNT}.yaml": account,
        f"20-clusterrole-{SERVICE_ACCOUNT}.yaml": role,
        f"30-clusterrolebinding-{SERVICE_ACCOUNT}.yaml": binding,
        "40-deviceclass-gpu-nvidia-com.yaml": gpu,
        "40-deviceclass-mig-nvidia-com.yaml": mig,
        f"50-daemonset-{DAEMONSET}.yaml": kubelet_plugin_daemonset(settings),
    }


def removal(kubernetes_version, given=None):
    """The objects to take away when no pool uses DRA any more (DeviceClasses from 1.34 only)."""
    if _version(kubernetes_version)[:2] >= MIN_KUBERNETES[:2]:
        return manifests(kubernetes_version, given)
    settings = settings_of(given)
    account, role, binding = _rbac(kubernetes_version, settings)
    return {
        f"10-serviceaccount-{SERVICE_ACCOUNT}.yaml": account,
        f"20-clusterrole-{SERVICE_ACCOUNT}.yaml": role,
        f"30-clusterrolebinding-{SERVICE_ACCOUNT}.yaml": binding,
        f"50-daemonset-{DAEMONSET}.yaml": kubelet_plugin_daemonset(settings),
    }


# --------------------------------------------------------------------------
# Examples for users (rendered into examples/, never applied by the role)
# --------------------------------------------------------------------------

EXAMPLE_IMAGE = DEFAULT_SETTINGS["example_image"]
MIG_PROFILE = "1g.10gb"  # A100 80GB, H100 80GB, H200: the smallest slice


def _claim_template(api, name, device_class, selector=None):
    exactly = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": api,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def _pod(name, spec_extra, container_extra, image=EXAMPLE_IMAGE):
    container = {
        "name": "ctr",
        "image": image,
        "command": ["nvidia-smi", "-L"],  # lists the GPU or MIG device the claim gave it, then ends
    }
    container.update(container_extra)
    spec = {
        "restartPolicy": "Never",
        "nodeSelector": {ALLOCATION_LABEL: "dra"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [container],
    }
    spec.update(spec_extra)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def _claimed_pod(name, template, image):
    return _pod(
        name,
        {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]},
        {"resources": {"claims": [{"name": "gpu"}]}},
        image,
    )


def examples(kubernetes_version, image=EXAMPLE_IMAGE):
    """``{file: object}``: one GPU by a claim, one MIG slice, and from 1.37 ``nvidia.com/gpu`` by DRA."""
    api = resource_api(kubernetes_version)
    mig = f"device.attributes['{DRIVER_NAME}'].profile == '{MIG_PROFILE}'"
    result = {
        "10-resourceclaimtemplate-single-gpu.yaml": _claim_template(api, "single-gpu", "gpu.nvidia.com"),
        "11-pod-single-gpu.yaml": _claimed_pod("single-gpu", "single-gpu", image),
        "20-resourceclaimtemplate-mig-1g-10gb.yaml": _claim_template(
            api, "mig-1g-10gb", "mig.nvidia.com", mig
        ),
        "21-pod-mig-1g-10gb.yaml": _claimed_pod("mig-1g-10gb", "mig-1g-10gb", image),
    }
    if _version(kubernetes_version)[:2] >= EXTENDED_RESOURCE_SINCE:
        limits = {"resources": {"limits": {"nvidia.com/gpu": "1"}}}
        result["30-pod-extended-resource-gpu.yaml"] = _pod("extended-resource-gpu", {}, limits, image)
    return result


# --------------------------------------------------------------------------
# Putting the two halves together
# --------------------------------------------------------------------------


def _is_runtime_class(entry):
    return "runtimeclass" in entry["template"]


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


def plan(mode, kubernetes_version, by_host, given=None):
    """The DRA half of the plan: ``{enabled, manifests, removed, examples, image}``.

    ``manifests`` (files to write or apply) when some pool allocates by DRA,
    else ``removed`` (files to take away, objects to delete).
    """
    halves = pools(mode, by_host)
    settings = settings_of(given)
    served = _version(kubernetes_version)[:2] >= MIN_KUBERNETES[:2]
    result = {
        "enabled": halves["dra"],
        "halves": halves,
        "manifests": {},
        "removed": {},
        "examples": {},
        "example_files": sorted(examples(kubernetes_version)) if served else [],
        "image": image_of(settings),
        "example_image": settings["example_image"],
    }
    if halves["dra"]:
        result.update(manifests=manifests(kubernetes_version, given),
                      examples=examples(kubernetes_version, settings["example_image"]))
    else:
        result["removed"] = removal(kubernetes_version, given)
    return result


def workloads(device_plugin, halves):
    """What to wait for: ``[{kind, name}]`` of the device plugin's half and the DRA half that run."""
    result = [{"kind": k, "name": n} for k, n in device_plugin] if halves["device_plugin"] else []
    if halves["dra"]:
        result.append({"kind": "DaemonSet", "name": DAEMONSET})
    return result
