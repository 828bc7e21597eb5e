# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The DRA driver's objects: its kubelet plugin's RBAC, DeviceClasses, DaemonSet, the users' examples.

Built here as data (the role dumps them to YAML), pure Python, tested
without Ansible. Sources ([CHART], [CODE], [HARDEN], [API]) and the error
type: ``dra.py``.
"""

from ansible.module_utils.gpunode.addons.dra import (
    ALLOCATION_LABEL,
    CLAIM_STATUS_AUTHZ_SINCE,
    DAEMONSET,
    DRIVER_NAME,
    EXTENDED_RESOURCE_SINCE,
    HEALTHCHECK_PORT,
    MIN_KUBERNETES,
    NAME,
    SELECTOR,
    SERVICE_ACCOUNT,
    WRITES_DEVICE_STATUS,
    DraError,
    pools,
    resource_api,
    version_of,
)
from ansible.module_utils.gpunode.validate import gate

# not on a node the rolling path pauses gpunode's GPU DaemonSets on (playbooks/tasks/rollout_node.yml;
# the role's __gpu_cluster_addons_not_paused for the other DaemonSets)
NOT_PAUSED = {"key": "gpunode.io/gpu-daemonsets", "operator": "NotIn", "values": ["paused"]}

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
    if version_of(kubernetes_version)[:2] >= CLAIM_STATUS_AUTHZ_SINCE:
        rules.append(
            {
                "apiGroups": ["resource.k8s.io"],
                "resources": ["resourceclaims/driver"],
                "verbs": ["associated-node:patch", "associated-node:update"],
            }
        )
    return rules


# The rules of [CHART] ``templates/rbac-kubeletplugin.yaml`` that no feature of
# the rendered driver uses: (apiGroup, resource) -> (verbs left out, why).
# docs/DRA.md says the same to users.
KUBELET_PLUGIN_LEFT_OUT = {
    ("", "nodes"): (
        ("list", "patch", "update", "watch"),
        "the compute-domains container's clique label (ComputeDomains are not rendered)",
    ),
    ("", "pods"): (("get", "list", "watch"), "MPS control daemons (sharing.go; feature gate MPSSupport off)"),
    ("resource.nvidia.com", "computedomains"): (("get", "list", "watch"), "ComputeDomains are not rendered"),
    ("resource.nvidia.com", "computedomaincliques"): (("get",), "ComputeDomains are not rendered"),
    ("apps", "deployments"): (
        ("create", "delete", "get", "list", "patch", "update", "watch"),
        "MPS control daemons (the chart grants it only with featureGates.MPSSupport)",
    ),
}


def kubelet_plugin_rules(kubernetes_version, writes_device_status=WRITES_DEVICE_STATUS):
    """The ClusterRole of the ``gpus`` kubelet plugin: [CHART] rbac-kubeletplugin.yaml's rules
    that the rendered driver's features use, less those of ``KUBELET_PLUGIN_LEFT_OUT``.

    - resourceclaims get/list/watch, as the chart grants them: ``cleanup.go``
      reads a claim by name ([CODE]); list and watch are the chart's, so a
      driver that lists or watches claims does not fail on a real node only;
    - resourceslices get/list/watch/create/update/delete: the ResourceSlices
      of its node, through the kubeletplugin helper (the chart grants the same);
    - nodes get: the helper makes its node the ResourceSlices' owner.
    """
    rules = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims"],
            "verbs": ["get", "list", "watch"],
        },
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
    # the validation gate's taint key (gpu_cluster_addons_plan gives its readiness_taint_key)
    "gate_key": gate.TAINT_KEY,
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
            and version_of(version)[:2] >= EXTENDED_RESOURCE_SINCE
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
                   *gate.gate(settings["gate_key"])["tolerations"]]
    tolerations += [t for t in settings["tolerations"] if t not in tolerations]
    pod = {
        "metadata": {"labels": dict(sorted(dict(SELECTOR, **{"app.kubernetes.io/name": NAME}).items()))},
        "spec": {
            "serviceAccountName": SERVICE_ACCOUNT,
            "priorityClassName": "system-node-critical",
            "nodeSelector": {"nvidia.com/gpu.present": "true", ALLOCATION_LABEL: "dra"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [dict(NOT_PAUSED, values=["paused"])]}]}}},
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
    if version_of(kubernetes_version)[:2] >= MIN_KUBERNETES[:2]:
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
    if version_of(kubernetes_version)[:2] >= EXTENDED_RESOURCE_SINCE:
        limits = {"resources": {"limits": {"nvidia.com/gpu": "1"}}}
        result["30-pod-extended-resource-gpu.yaml"] = _pod("extended-resource-gpu", {}, limits, image)
    return result


def plan(mode, kubernetes_version, by_host, given=None):
    """The DRA half of the plan: ``{enabled, manifests, removed, examples, image}``.

    ``manifests`` (files to write or apply) when some pool allocates by DRA,
    else ``removed`` (files to take away, objects to delete).
    """
    halves = pools(mode, by_host)
    settings = settings_of(given)
    served = version_of(kubernetes_version)[:2] >= MIN_KUBERNETES[:2]
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
