#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module gpu_node_condition: set a condition of this node's Node with the kubelet's credentials."""

DOCUMENTATION = r"""
---
module: gpu_node_condition
short_description: Set a condition of this node's Node object with the kubelet's own credentials
description:
  - Reads this node's Node (a GET, also in check mode) and, when the condition O(type) does not
    already hold O(status), O(reason) and O(message), sends a strategic-merge PATCH of
    C(/api/v1/nodes/NAME/status) holding only that condition, so every other condition stays.
  - C(lastTransitionTime) changes only when the status changes; C(lastHeartbeatTime) is the time
    of the write. Nothing is sent in check mode; C(--diff) shows the condition before and after.
  - Uses the kubelet's kubeconfig and client certificate (the NodeRestriction admission plugin lets
    a kubelet patch its own Node's status). The Node Readiness Controller maps such a condition to
    a taint (the add-ons role's C(gpu_cluster_addons_readiness_rule)).
requirements:
  - PyYAML (python3-yaml), to read the kubeconfig
options:
  kubeconfig:
    description:
      - The kubeconfig to use; default the running kubelet's C(--kubeconfig), else the first that
        exists of C(/etc/kubernetes/kubelet.conf) (kubeadm),
        C(/var/lib/rancher/rke2/agent/kubelet.kubeconfig) (RKE2) and
        C(/var/lib/rancher/k3s/agent/kubelet.kubeconfig) (k3s).
    type: path
  node_name:
    description:
      - The Node's name; default the kubelet's - the CN C(system:node:NAME) of its client
        certificate, else its C(--hostname-override), else the hostname.
    type: str
  type:
    description: The condition's type (a qualified name, such as C(gpunode.io/GPUValidated)).
    type: str
    required: true
  status:
    description: The condition's status.
    type: str
    choices: ["True", "False", "Unknown"]
    required: true
  reason:
    description: Why, in CamelCase (C(Passed), C(NotValidatedSinceBoot)).
    type: str
    required: true
  message:
    description: What a person reads.
    type: str
    default: ""
  labels:
    description:
      - Labels this Node should carry (a null value - absent), such as C(nvidia.com/gpu.clique). Each is
        set, in one PATCH of the Node with the field manager C(gpunode), only where no other field manager
        owns it (C(metadata.managedFields)) - a label GPU Feature Discovery, the kubelet's C(--node-labels)
        or an operator set stays theirs. A label is removed only where gpunode owns it.
      - The kubelet may label its own Node outside the C(kubernetes.io) and C(k8s.io) namespaces
        (NodeRestriction).
    type: dict
    default: {}
extends_documentation_fragment:
  - module_attributes
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Say that this node's GPUs passed their validation
  gpu_node_condition:
    type: gpunode.io/GPUValidated
    status: "True"
    reason: Passed
    message: all checks passed on 8 GPUs
"""

RETURN = r"""
condition:
  description: The condition the Node holds after the run (what it would hold in check mode).
  returned: always
  type: dict
  sample: {"type": "gpunode.io/GPUValidated", "status": "True", "reason": "Passed", "message": "",
           "lastHeartbeatTime": "2026-11-28T10:00:00Z", "lastTransitionTime": "2026-11-28T10:00:00Z"}
node_name:
  description: The Node's name, and what named it (RV(named_by)).
  returned: always
  type: str
named_by:
  description: C(node_name), C(client certificate), C(--hostname-override) or C(hostname).
  returned: always
  type: str
kubeconfig:
  description: The kubeconfig used.
  returned: always
  type: str
labels:
  description: What became of each of O(labels) - C(set), C(removed), C(unchanged) or C(left to <managers>)
    (another field manager owns it).
  returned: always
  type: dict
  sample: {"nvidia.com/gpu.clique": "set"}
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.formats import k8s_names, values
from ansible.module_utils.gpunode.host import files
from ansible.module_utils.gpunode.host.commands import Host
from ansible.module_utils.gpunode.kubelet.identity import IdentityError, identity
from ansible.module_utils.gpunode.readiness.condition import (
    STATUSES,
    ConditionError,
    NodeApi,
    find,
    now,
    plan,
    plan_labels,
)
from ansible.module_utils.gpunode.readiness.condition import reason as reason_rule

ARGUMENT_SPEC = {
    "kubeconfig": {"type": "path"},
    "node_name": {"type": "str"},
    "type": {"type": "str", "required": True},
    "status": {"type": "str", "choices": list(STATUSES), "required": True},
    "reason": {"type": "str", "required": True},
    "message": {"type": "str", "default": ""},
    "labels": {"type": "dict", "default": {}},
}
VALUE_RULES = {
    "kubeconfig": values.path,
    "node_name": k8s_names.node_name,
    "type": k8s_names.qualified_name,
    "reason": reason_rule,
    "labels": k8s_names.labels,
}


def build_module():
    return AnsibleModule(argument_spec=dict(ARGUMENT_SPEC), supports_check_mode=True)


def _shown(condition):
    return "" if condition is None else json.dumps(condition, indent=2, sort_keys=True) + "\n"


def run(module):
    params = module.params
    values.check(params, VALUE_RULES)
    who = identity(Host(module, IdentityError), params["kubeconfig"], params["node_name"])

    def write_private(name, text):
        path = module.tmpdir + "/" + name  # removed with the module's temp folder
        files.write_text(path, text, new_file_mode=0o600)
        return path

    api = NodeApi(who, write_private)
    node = api.get_node()
    current = find(node, params["type"])
    wanted = {key: params[key] for key in ("type", "status", "reason", "message")}
    condition, patch = plan(current, wanted, now())
    label_patch, labels = plan_labels(node, params["labels"])
    if patch is not None and not module.check_mode:
        condition = find(api.patch_status(patch), params["type"]) or condition
    if label_patch is not None and not module.check_mode:
        api.patch_node(label_patch)
    result = {"changed": bool(patch or label_patch), "condition": condition, "node_name": who.node_name,
              "named_by": who.named_by, "kubeconfig": who.kubeconfig, "labels": labels}
    if module._diff:
        header = f"node {who.node_name} condition {params['type']}"
        changed = (label_patch or {"metadata": {"labels": {}}})["metadata"]["labels"]
        have = (node.get("metadata") or {}).get("labels") or {}
        result["diff"] = {"before": _shown(current) + _shown_labels({key: have.get(key) for key in changed}),
                          "after": _shown(condition) + _shown_labels(changed),
                          "before_header": header, "after_header": header}
    return result


def _shown_labels(labels):
    return "labels: " + json.dumps(labels, sort_keys=True) + "\n" if labels else ""


def main():
    module = build_module()
    try:
        result = run(module)
    except (IdentityError, ConditionError, values.ValueSyntaxError, OSError) as exc:
        module.fail_json(msg=f"{exc}; the Node was not changed")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
