# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the GPU cluster add-ons consist of: the decisions of ``gpu_cluster_addons_plan``.

:func:`plan` takes the module's parameters (the role's variables and the
facts the play gathered on each GPU host) and returns the module's result:
the device plugin's configs, each GPU node's labels and sharing, HAMi's and
DRA's parts, the control plane's placement and the manifests to render. It is
a list of short steps in the order they were always taken, so the first
error a user meets stays the same. Errors are raised (``GpuAddonsError``,
``dra.DraError``, ``ValueSyntaxError``); warnings go to ``warn``.

Standard library only; Python 3.8+.
"""

from ansible.module_utils.gpunode.addons import device_plugin_config as dpc
from ansible.module_utils.gpunode.addons import dra, dra_objects, dra_preflight
from ansible.module_utils.gpunode.addons import hami as hami_utils
from ansible.module_utils.gpunode.addons import images as addon_images
from ansible.module_utils.gpunode.addons.catalogue import manifest_plan
from ansible.module_utils.gpunode.addons.cluster import (
    RESOURCE_BY_MODE,
    WORKLOADS_BY_MODE,
    GpuAddonsError,
    api_versions,
    control_plane,
    kube_version,
)
from ansible.module_utils.gpunode.addons.gpu_nodes import (
    HOST_DRIVER_ROOT,
    device_plugin_driver_root,
    gpu_nodes,
    pod_runtime_class,
)
from ansible.module_utils.gpunode.addons.inputs import check_inputs, check_node_names
from ansible.module_utils.gpunode.formats import values
from ansible.module_utils.gpunode.validate import gate

READINESS_PREFIX = "readiness.k8s.io/"
READINESS_RULE_NAME = "gpunode-gpu-validated"


def host_records(hosts, host_facts, node_names):
    """What the decisions need of each GPU host, from the facts the play gathered on it."""
    records = []
    for host in hosts:
        facts = host_facts.get(host) or {}
        records.append(
            {
                "host": host,
                "node_name": node_names.get(host) or "",
                "nodename": facts.get("nodename") or "",
                "nvidia_gpu": facts.get("nvidia_gpu"),
                "nvidia_driver": facts.get("nvidia_driver"),
                "container_runtime": facts.get("nvidia_container_runtime"),
                "kubelet": facts.get("kubelet_gpu"),
                "verdict": facts.get("gpu_validate") or {},
            }
        )
    return records


def device_plugin(params):
    """The device plugin's configs, checked: dpc.plugin_configs plus what the manifests need to know."""
    short = {
        "mig": params["nvidia_mig_strategy"],
        "replicas": params["nvidia_time_slicing_replicas"],
        "rename": params["nvidia_time_slicing_rename"],
        "fail_requests_greater_than_one": params["nvidia_time_slicing_fail_requests_greater_than_one"],
    }
    resolved = dpc.plugin_configs(
        params["device_plugin_config"],
        params["device_plugin_configs"],
        short,
        params["device_plugin_config_default"],
    )
    configs = resolved["configs"].values()
    resolved["mig"] = any(dpc.mig_strategy(c) != "none" for c in configs)
    resolved["mps"] = any(dpc.sharing_method(c) == "mps" for c in configs)
    return resolved


def plugin_labels(records, names, resolved, mode):
    """Each host's config label (nvidia mode); warnings where its MIG state contradicts its config."""
    warnings = []
    for record in records:
        name = dpc.host_config(record["host"], names.get(record["host"]), resolved)
        config = resolved["configs"][name]
        method = dpc.sharing_method(config)
        record["plugin_labels"] = {
            dpc.CONFIG_LABEL: None if name == resolved["default"] else name,
            "nvidia.com/mps.capable": "true" if method == "mps" else None,
        }
        record["sharing"] = dpc.describe(config) if mode == "nvidia" else mode
        if mode == "nvidia":
            warnings.extend(dpc.mig_report(record["host"], record["nvidia_gpu"], dpc.mig_strategy(config)))
    return warnings


def hami(settings, version):
    """HAMi's scheduler placement and the configuration texts of both placements."""
    placement = settings.get("scheduler") or "deployment"
    if placement not in hami_utils.PLACEMENTS:
        raise GpuAddonsError(
            f"gpu_cluster_addons_hami_scheduler: {placement!r} is not deployment or extender")
    certificate = settings.get("certificate") or "controller"
    if certificate not in hami_utils.CERTIFICATE_SOURCES:
        raise GpuAddonsError(f"hami certificate: {certificate!r} is not controller or job")
    minor = tuple(int(x) for x in version.split(".")[:2])
    # the webhook in both placements, as HAMi's chart; the extender then serves HTTPS
    node_url = "https://127.0.0.1:{}".format(int(settings.get("node_port") or hami_utils.NODE_PORT))
    pod_url = "https://127.0.0.1:{}".format(int(settings.get("port") or 8080))
    return {
        "scheduler": placement,
        "scheduler_name": hami_utils.scheduler_name(placement),
        "webhook": True,
        "certificate": certificate,
        "tls_secret": hami_utils.WEBHOOK_SECRET,
        # before 1.19 kube-scheduler reads a Policy (--policy-config-file) instead
        "policy": minor < (1, 19),
        "url_prefix": node_url,
        "kube_scheduler_config": hami_utils.scheduler_config(minor, node_url),
        "own_scheduler_config": hami_utils.scheduler_config(
            minor, pod_url, profile=hami_utils.SCHEDULER_NAME),
        "device_config": hami_utils.device_config(
            settings.get("device_split_count", 10),
            settings.get("device_memory_scaling", 1),
            settings.get("device_core_scaling", 1),
        ),
    }


def options(mode, resolved, hami_plan):
    """The optional files of the mode (see gpu_cluster_addons.manifest_plan)."""
    keys = set()
    if resolved["named"]:
        keys.add("nvidia-named")
    if resolved["mps"]:
        keys.add("nvidia-mps")
    keys.add("hami-" + hami_plan["scheduler"])
    if hami_plan["webhook"]:
        keys.add("hami-webhook")
        if hami_plan["certificate"] == "job":
            keys.add("hami-certgen")
    return sorted(k for k in keys if k.startswith(mode + "-"))


def dra_cdi_root(params):
    return (params["dra"] or {}).get("cdi_root") or dra_objects.DEFAULT_SETTINGS["cdi_root"]


# --- the steps, in order --------------------------------------------------------


def cluster_version(params):
    """(version, api): the cluster's version and the API versions it serves; the namespace it allows."""
    version = kube_version(params["kubernetes_version"])
    api = api_versions(version)
    if not api["critical_priority_any_namespace"] and params["namespace"] != "kube-system":
        raise GpuAddonsError(
            f"Kubernetes {version} admits the system-node-critical priority class in kube-system only "
            f"(before 1.17): gpu_cluster_addons_namespace is {params['namespace']}"
        )
    return version, api


def gpu_hosts(params):
    """The records of the GPU hosts; none is an error where the play applies."""
    hosts = host_records(params["gpu_hosts"], params["host_facts"], params["node_names"])
    if params["require_gpu_hosts"] and not hosts:
        raise GpuAddonsError(
            "applying needs GPU hosts to label and wait for (gpu_cluster_addons_gpu_hosts, by default the "
            "inventory group gpu_nodes)"
        )
    return hosts


def plugin_driver_root(params, hosts, resolved, by_host):
    """The NVIDIA device plugin's driver root (``nvidia_device_plugin.driver_root``), from its configs
    or the device-plugin hosts' driver facts; ``/`` (nothing mounted) where no NVIDIA plugin is rendered."""
    if params["mode"] not in ("nvidia", "dra"):
        return HOST_DRIVER_ROOT
    records = [dict(r, allocation=by_host.get(r["host"])) for r in hosts]
    root = device_plugin_driver_root(records, resolved["configs"])
    option = "the device plugin's driver root (flags.nvidiaDriverRoot, or nvidia_driver.driver_root)"
    return values.word_path(option, root)


def sharing(params, hosts, resolved, by_host):
    """Each host's device plugin labels and sharing (``dra`` where DRA allocates it); the warnings."""
    plugin_mode = "nvidia" if params["mode"] == "dra" else params["mode"]
    warnings = plugin_labels(hosts, params["device_plugin_config_names"], resolved, plugin_mode)
    for record in hosts:
        if by_host.get(record["host"]) == "dra":
            record["sharing"] = "dra"
    return warnings


def runtime_class(params, hosts):
    """The RuntimeClass the device plugin pods ask for, and a warning where gpunode does not manage it."""
    runtime = pod_runtime_class(hosts, params["pod_runtime_class"], params["runtime_class_handler"])
    warnings = []
    if runtime["name"] and not params["runtime_class"]:
        warnings.append(
            f"the device plugin pods ask for the RuntimeClass {runtime['name']}, which gpunode does not "
            "manage (gpu_cluster_addons_runtime_class is false): it must exist in the cluster"
        )
    return runtime, warnings


def images_and_dra(params, version, by_host, hosts):
    """The add-on images (mirrored by gpu_cluster_addons_image_registry) and DRA's plan, with the
    preflight's findings on each host (``unchecked``, also warnings)."""
    images = addon_images.addon_images(params["images"], version, params["image_registry"])
    records = [dict(r, allocation=by_host[r["host"]]) for r in hosts]
    given = dict(params["dra"] or {})
    given["driver_root"] = dra_preflight.driver_root(records, given.get("driver_root"))
    given["gate_key"] = params["readiness_taint_key"]
    settings = addon_images.dra_settings(params["image_registry"], given)
    dra_plan = dra_objects.plan(params["mode"], version, by_host, settings)
    images.update(dra=dra_plan["image"], dra_example=dra_plan["example_image"])
    dra_plan["unchecked"] = dra_preflight.preflight(records, version, dra_cdi_root(params))
    return images, dra_plan


def gates(params, nodes, hosts):
    """``nodes`` (the plan's gpu_nodes), each with its ``gate`` (validate/gate.py ``node_gate``)."""
    verdicts = {record["host"]: record["verdict"] for record in hosts}
    settings = {"enabled": params["gate"]["enabled"], "rule": params["readiness_rule"],
                "applying": params["gate"]["apply"], "pods": params["gate"]["validation_pod"],
                "mode": params["mode"], "key": params["readiness_taint_key"],
                "condition_type": params["readiness_condition_type"],
                "check_mode": bool(params.get("check_mode"))}
    return [dict(node, gate=gate.node_gate(node, verdicts[node["host"]], settings))
            for node in nodes]


def readiness_rule(params):
    """The NodeReadinessRule's name, condition and taint; its CRD takes taint keys under
    ``readiness.k8s.io/`` only (CEL rule of spec.taint, node-readiness-controller v0.5.0)."""
    key = params["readiness_taint_key"]
    if params["readiness_rule"] and (not key.startswith(READINESS_PREFIX) or key.count("/") != 1):
        raise GpuAddonsError(
            f"gpu_cluster_addons_readiness_taint_key: {key!r}: the Node Readiness Controller manages only "
            f"taint keys {READINESS_PREFIX}<name> (its CRD refuses others)")
    return {"enabled": params["readiness_rule"], "name": READINESS_RULE_NAME, "taint_key": key,
            "condition_type": params["readiness_condition_type"]}


def manifests(params, version, resolved, hami_plan, dra_plan):
    """The manifest files to render (the mode's, with DRA's halves), and the workloads to wait for."""
    mode = params["mode"]
    plugin_mode = "nvidia" if mode == "dra" else mode
    optional = options(plugin_mode, resolved, hami_plan)
    files = manifest_plan(plugin_mode, version, params["runtime_class"], optional, params["readiness_rule"])
    return {
        "readiness_rule": readiness_rule(params),
        "validation_gate": gate.gate(params["readiness_taint_key"]),
        "manifests": dra.template_plan(mode, dra_plan["halves"], files),
        "resource": RESOURCE_BY_MODE.get(plugin_mode),
        "workloads": dra.workloads(WORKLOADS_BY_MODE.get(plugin_mode, ()), dra_plan["halves"]),
    }


def plan(params, warn):
    """The module's result for ``params`` (gpu_cluster_addons_plan's options); warnings through ``warn``."""
    check_inputs(params)
    mode = params["mode"]
    version, api = cluster_version(params)
    resolved = device_plugin(params)
    hosts = gpu_hosts(params)
    by_host = dra.allocations(params["gpu_hosts"], mode, params["allocations"])
    warnings = sharing(params, hosts, resolved, by_host)
    resolved["driver_root"] = plugin_driver_root(params, hosts, resolved, by_host)
    hami_plan = hami(params["hami"], version)
    runtime, runtime_warnings = runtime_class(params, hosts)
    images, dra_plan = images_and_dra(params, version, by_host, hosts)
    warnings += runtime_warnings + dra_plan["unchecked"]
    cp = control_plane(params["nodes"], params["distribution"], version, params["control_plane_label"])
    nodes = gpu_nodes(hosts, mode, params["extra_node_labels"])
    check_node_names(nodes)
    for warning in warnings + (cp["warnings"] if mode in ("gpushare", "hami") else []):
        warn(warning)
    gated = gates(params, dra.label_nodes(nodes, mode, by_host), hosts)
    untainted = {node["host"]: node["gate"]["untainted"] for node in gated if node["gate"]["untainted"]}
    return {
        "changed": False,
        "ansible_facts": {"gpu_cluster_addons": {"mode": mode, "offers": dra.offers(gated),
                                                 "untainted": untainted}},
        "version": version,
        "api": api,
        "control_plane": cp,
        "gpu_nodes": gated,
        **manifests(params, version, resolved, hami_plan, dra_plan),
        "runtime_class_name": runtime["name"],
        "runtime_class_reasons": runtime["reasons"],
        "nvidia_device_plugin_config": resolved["configs"][resolved["default"]],
        "nvidia_device_plugin": resolved,
        "hami": hami_plan,
        "allocations": by_host,
        "dra": dra_plan,
        "images": images,
    }
