#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module gpu_cluster_addons_wait: wait until the add-ons run and every GPU node advertises GPUs."""

DOCUMENTATION = r"""
---
module: gpu_cluster_addons_wait
short_description: Wait until the GPU add-ons are rolled out and every GPU node advertises its GPU resource
description:
  - Polls the cluster until the add-ons' DaemonSets and Deployment of O(mode) have every pod ready and
    updated, and every node of O(nodes) advertises the mode's resource (C(nvidia.com/gpu) or
    C(aliyun.com/gpu-mem)) in its allocatable; fails after O(timeout) seconds naming what is still missing.
  - Runs on the controller (the add-ons play's localhost), with the same cluster access as kubernetes.core.
  - Changes nothing; in check mode it does not poll.
requirements:
  - kubernetes (the Python client kubernetes.core also uses)
options:
  mode:
    description: Which add-ons to wait for.
    type: str
    choices: [nvidia, gpushare, hami, dra]
    required: true
  nodes:
    description: Kubernetes names of the GPU nodes that must advertise the resource.
    type: list
    elements: str
    required: true
  namespace:
    description: The add-ons' namespace.
    type: str
    default: kube-system
  kubeconfig:
    description:
      - Kubeconfig file; default C($KUBECONFIG) or C(~/.kube/config), else the in-cluster service account.
    type: path
  context:
    description: Kubeconfig context; default its current context.
    type: str
  timeout:
    description: Seconds to wait.
    type: int
    default: 300
  delay:
    description: Seconds between two looks.
    type: int
    default: 10
extends_documentation_fragment:
  - module_attributes.no_diff
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Wait until every GPU node advertises nvidia.com/gpu
  gpu_cluster_addons_wait:
    mode: nvidia
    nodes: [gpu-01, gpu-02]
    timeout: 300
"""

RETURN = r"""
ready:
  description: Whether everything was ready in time (null in check mode).
  returned: always
  type: bool
messages:
  description: The last status of each workload and of the GPU nodes.
  returned: always
  type: list
  elements: str
missing_nodes:
  description: GPU nodes that did not advertise the resource.
  returned: always
  type: list
  elements: str
"""

import time
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.gpunode.addons.cluster import MODES, RESOURCE_BY_MODE, WORKLOADS_BY_MODE
from ansible.module_utils.gpunode.addons.rollout import allocatable_status, workload_status

try:
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.client.exceptions import ApiException
    from kubernetes.config.config_exception import ConfigException
    from urllib3.exceptions import HTTPError as TransportError
except ImportError:
    k8s_client = None
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()
else:
    KUBERNETES_IMPORT_ERROR = None


def build_module():
    return AnsibleModule(
        argument_spec={
            "mode": {"type": "str", "choices": list(MODES), "required": True},
            "nodes": {"type": "list", "elements": "str", "required": True},
            "namespace": {"type": "str", "default": "kube-system"},
            "kubeconfig": {"type": "path"},
            "context": {"type": "str"},
            "timeout": {"type": "int", "default": 300},
            "delay": {"type": "int", "default": 10},
        },
        supports_check_mode=True,
    )


class Cluster:
    """The few reads the wait needs, as plain dicts."""

    def __init__(self, kubeconfig, context):
        try:
            self.api = k8s_config.new_client_from_config(config_file=kubeconfig, context=context)
        except ConfigException:
            if kubeconfig or context:
                raise
            # no kubeconfig at all ($KUBECONFIG, ~/.kube/config): a pod's service account
            k8s_config.load_incluster_config()
            self.api = k8s_client.ApiClient()
        self.apps = k8s_client.AppsV1Api(self.api)
        self.core = k8s_client.CoreV1Api(self.api)

    def workload(self, kind, name, namespace):
        if kind == "DaemonSet":
            read = self.apps.read_namespaced_daemon_set
        else:
            read = self.apps.read_namespaced_deployment
        try:
            return [self.api.sanitize_for_serialization(read(name, namespace))]
        except ApiException as exc:
            if exc.status == 404:
                return []
            raise

    def gpu_nodes(self):
        found = self.core.list_node(label_selector="nvidia.com/gpu.present=true")
        return self.api.sanitize_for_serialization(found).get("items") or []


def look(cluster, params):
    """(statuses of the workloads and of the GPU nodes, nodes missing the resource)."""
    statuses = [
        workload_status(cluster.workload(kind, name, params["namespace"]), kind, name)
        for kind, name in WORKLOADS_BY_MODE[params["mode"]]
    ]
    allocatable = allocatable_status(cluster.gpu_nodes(), params["nodes"], RESOURCE_BY_MODE[params["mode"]])
    return [*statuses, allocatable], allocatable["missing"]


def run(module):
    params = module.params
    result = {"changed": False, "ready": None, "messages": [], "missing_nodes": []}
    if module.check_mode:
        return result
    if k8s_client is None:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR, **result)
    try:
        cluster = Cluster(params["kubeconfig"], params["context"])
        deadline = time.monotonic() + params["timeout"]
        while True:
            statuses, missing = look(cluster, params)
            ready = all(status["ready"] for status in statuses)
            result.update(ready=ready, messages=[s["message"] for s in statuses], missing_nodes=missing)
            if ready or time.monotonic() + params["delay"] > deadline:
                break
            time.sleep(params["delay"])
    except (ApiException, ConfigException, TransportError, OSError) as exc:
        module.fail_json(msg=f"cannot read the cluster: {exc}", **result)
    if not result["ready"]:
        waiting = [s["message"] for s in statuses if not s["ready"]]
        module.fail_json(msg=f"not ready after {params['timeout']} s: {'; '.join(waiting)}", **result)
    return result


def main():
    module = build_module()
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
