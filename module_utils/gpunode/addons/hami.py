# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""HAMi (Project-HAMi/HAMi v2.10.0): its scheduler extender and the configuration kube-scheduler needs.

What is read from HAMi's chart at v2.10.0 (charts/hami, commit 4707fb02c91c,
2026-08-21): the extender answers ``filter`` and ``bind`` at the root of its
HTTP address, ``nodeCacheCapable: true``, ``weight: 1``, ``httpTimeout: 30s``,
and manages ``nvidia.com/gpu``, ``nvidia.com/gpumem``, ``nvidia.com/gpucores``,
``nvidia.com/gpumem-percentage`` and ``nvidia.com/priority``, each
``ignoredByScheduler: true`` (kube-scheduler leaves their fit to HAMi). Its
Service publishes the scheduler on node port 31998.

Two ways to run it (``gpu_cluster_addons_hami_scheduler``):

- ``deployment`` (what HAMi's chart does, and the default): HAMi's own
  scheduler, a kube-scheduler named ``hami-scheduler`` with the extender
  beside it in one pod; pods that use HAMi's resources set
  ``schedulerName: hami-scheduler``.
- ``extender``: the cluster's kube-scheduler calls HAMi's extender through
  the node port over HTTPS (the extender serves the webhook too), wired by the
  gpushare_scheduler role (kube_scheduler_extender, kubeadm/RKE/RKE2) from
  ``extender(...)`` below; pods keep ``default-scheduler``.
"""

import json

from ansible.module_utils.gpunode.scheduler.api import POLICY, api_name, extender_entry, preferred_api

try:
    import yaml
except ImportError:  # the controller has PyYAML (ansible-core needs it)
    yaml = None

VERSION = "v2.10.0"
SCHEDULER_NAME = "hami-scheduler"
DEFAULT_SCHEDULER_NAME = "default-scheduler"
PLACEMENTS = ("deployment", "extender")
# Resources HAMi's extender manages (chart values resourceName, resourceMem, resourceCores,
# resourceMemPercentage, resourcePriority).
MANAGED_RESOURCES = (
    "nvidia.com/gpu",
    "nvidia.com/gpumem",
    "nvidia.com/gpucores",
    "nvidia.com/gpumem-percentage",
    "nvidia.com/priority",
)
NODE_PORT = 31998
# The admission webhook (chart scheduler/webhook.yaml) comes in both placements, as the chart
# renders it whatever scheduler.kubeScheduler.enabled says. It sets pod.spec.schedulerName to the
# extender's --scheduler-name (pkg/scheduler/webhook.go) on pods that ask for HAMi's resources:
# the chart passes its schedulerName value; here hami-scheduler with HAMi's own kube-scheduler and
# default-scheduler (Kubernetes' DefaultSchedulerName) in the extender placement, where the
# cluster's kube-scheduler calls the extender. With the chart's forceOverwriteDefaultScheduler
# (true) a pod whose schedulerName is another scheduler's is left alone. Its serving certificate
# lives in this Secret (the chart's "<release>-scheduler-tls"); the extender then serves HTTPS.
WEBHOOK_NAME = "hami-webhook"
WEBHOOK_SECRET = "hami-scheduler-tls"
CERTIFICATE_SOURCES = ("controller", "job")


def scheduler_name(placement):
    """The extender's --scheduler-name, which its webhook writes into pods (see WEBHOOK_NAME)."""
    return SCHEDULER_NAME if placement == "deployment" else DEFAULT_SCHEDULER_NAME


def extender(url_prefix):
    """HAMi's extender in the kube_scheduler_extender module's terms."""
    return {
        "url_prefix": url_prefix,
        "filter_verb": "filter",
        "bind_verb": "bind",
        "enable_https": url_prefix.startswith("https://"),
        # its serving certificate is the webhook's: the chart's configmap.yaml calls
        # https://127.0.0.1:443 with tlsConfig insecure
        "tls_insecure": url_prefix.startswith("https://"),
        "node_cache_capable": True,
        "ignorable": False,
        "managed_resources": [{"name": name, "ignored_by_scheduler": True} for name in MANAGED_RESOURCES],
    }


def scheduler_config(kubernetes_version, url_prefix, profile=None, kubeconfig=None):
    """The text of a KubeSchedulerConfiguration (a Policy before 1.19) calling HAMi's extender.

    ``profile``: a scheduler name for a profile of its own (HAMi's own
    scheduler); None for the cluster's kube-scheduler (its default profile).
    ``kubernetes_version``: ``(major, minor)``.
    """
    fmt = preferred_api(tuple(kubernetes_version[:2]))
    entry = extender_entry(extender(url_prefix), fmt)
    entry["weight"] = 1
    if fmt == POLICY:
        entry["httpTimeout"] = 30000000000  # nanoseconds in a Policy
        return json.dumps({"kind": POLICY, "apiVersion": "v1", "extenders": [entry]}, indent=2) + "\n"
    entry["httpTimeout"] = "30s"
    data = {"apiVersion": api_name(fmt), "kind": "KubeSchedulerConfiguration"}
    if kubeconfig:
        data["clientConnection"] = {"kubeconfig": kubeconfig}
    if profile:
        data["leaderElection"] = {"leaderElect": False}
        data["profiles"] = [{"schedulerName": profile}]
    data["extenders"] = [entry]
    return yaml.safe_dump(data, default_flow_style=False, sort_keys=False)


def device_config(split_count, memory_scaling, core_scaling, runtime_class=""):
    """HAMi's device-config.yaml, the nvidia part of the chart's default (scheduler and device plugin)."""
    nvidia = {
        "resourceCountName": MANAGED_RESOURCES[0],
        "resourceMemoryName": MANAGED_RESOURCES[1],
        "resourceMemoryPercentageName": MANAGED_RESOURCES[3],
        "resourceCoreName": MANAGED_RESOURCES[2],
        "resourcePriorityName": MANAGED_RESOURCES[4],
        "overwriteEnv": False,
        "defaultMemory": 0,
        "defaultCores": 0,
        "defaultGPUNum": 1,
        "preConfiguredDeviceMemory": 0,
        "memoryFactor": 1,
        "deviceSplitCount": int(split_count),
        "deviceMemoryScaling": float(memory_scaling),
        "deviceCoreScaling": float(core_scaling),
        "enableNumaTopology": False,
        "runtimeClassName": runtime_class or "",
    }
    return yaml.safe_dump({"nvidia": nvidia}, default_flow_style=False, sort_keys=False)
