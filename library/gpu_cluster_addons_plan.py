#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module gpu_cluster_addons_plan: decide what the GPU cluster add-ons consist of."""

DOCUMENTATION = r"""
---
module: gpu_cluster_addons_plan
short_description: Decide the GPU add-ons of a cluster (API versions, placement, node labels, runtime)
description:
  - The decisions of the gpu_cluster_addons role, from what the play knows; changes nothing.
  - The API versions the manifests use on O(kubernetes_version); where the scheduler extender runs and what it
    tolerates (from the cluster's O(nodes), else O(distribution)); the labels of each GPU node from its
    detection facts; the manifest files of O(mode) and those of the other mode to remove.
  - Whether the device plugin pods ask for the C(nvidia) RuntimeClass (O(pod_runtime_class=auto)) - yes unless
    nvidia is the default runtime of the engine each GPU node's kubelet uses, as the container runtime role
    reported in C(ansible_facts.nvidia_container_runtime).
  - Runs on the controller (the add-ons play's localhost).
options:
  mode:
    description:
      - C(nvidia) (NVIDIA's device plugin), C(gpushare) (GPU-share device plugin and extender),
        C(hami) (HAMi's device plugin and scheduler) or C(dra) (NVIDIA's DRA driver).
    type: str
    choices: [nvidia, gpushare, hami, dra]
    required: true
  kubernetes_version:
    description: The cluster's Kubernetes version (C(1.30), C(v1.30.2+rke2r1)).
    type: str
    required: true
  nodes:
    description: The cluster's Node objects (C(kubernetes.core.k8s_info) resources); omitted when rendering.
    type: list
    elements: dict
  distribution:
    description: Where the extender runs when the nodes are not known.
    type: str
    choices: [auto, kubeadm, rke, rke2, k3s]
    default: auto
  control_plane_label:
    description: An explicit control-plane node label key; wins over the rest.
    type: str
  gpu_hosts:
    description: The inventory's GPU hosts (the gpu_nodes group).
    type: list
    elements: str
    default: []
  host_facts:
    description:
      - Per GPU host, its C(ansible_facts) (or the part of them with C(nvidia_gpu), C(nvidia_driver),
        C(nvidia_container_runtime) and C(nodename)). A host missing here has no facts.
    type: dict
    default: {}
  node_names:
    description: Per GPU host, its Kubernetes node name when it is not the host's lower-cased nodename.
    type: dict
    default: {}
  require_gpu_hosts:
    description: Fail without GPU hosts (applying labels and waits for them).
    type: bool
    default: false
  extra_node_labels:
    description: More labels for every GPU node (a null value removes one).
    type: dict
    default: {}
  runtime_class:
    description: Manage the RuntimeClass C(nvidia).
    type: bool
    default: true
  pod_runtime_class:
    description:
      - Whether the device plugin pods set C(runtimeClassName) - C(auto) (when some GPU node needs it),
        C(always) or C(never).
    type: str
    choices: [auto, always, never]
    default: auto
  runtime_class_handler:
    description: The RuntimeClass's handler (the runtime's name in containerd and Docker).
    type: str
    default: nvidia
  namespace:
    description: The add-ons' namespace.
    type: str
    default: kube-system
  device_plugin_config:
    description:
      - The NVIDIA device plugin's config (its C(version v1) format) for every node that names no other;
        empty, the C(nvidia_*) shorthand options make it.
    type: dict
    default: {}
  device_plugin_configs:
    description:
      - More device plugin configs by name, for nodes labelled C(nvidia.com/device-plugin.config=<name>).
    type: dict
    default: {}
  device_plugin_config_default:
    description:
      - The entry of O(device_plugin_configs) that is the main config (the chart's C(config.default));
        empty, the entry called C(default) is, when there is one.
    type: str
    default: ""
  device_plugin_config_names:
    description: Per GPU host, the name of its config (C(gpu_cluster_addons_device_plugin_config_name)).
    type: dict
    default: {}
  hami:
    description:
      - HAMi settings - C(scheduler) (C(deployment) or C(extender)), C(node_port), C(port),
        C(device_split_count), C(device_memory_scaling), C(device_core_scaling), C(certificate)
        (where the admission webhook's certificate comes from - C(controller), made when applying, or
        C(job), HAMi's own certificate Jobs in the rendered files).
    type: dict
    default: {}
  nvidia_mig_strategy:
    description: NVIDIA device plugin MIG strategy (shorthand for O(device_plugin_config)).
    type: str
    choices: [none, single, mixed]
    default: none
  nvidia_time_slicing_replicas:
    description: Time-slicing replicas per GPU (0 or 1 - off).
    type: int
    default: 0
  nvidia_time_slicing_rename:
    description: Advertise time-sliced GPUs as C(nvidia.com/gpu.shared).
    type: bool
    default: false
  nvidia_time_slicing_fail_requests_greater_than_one:
    description: Refuse requests for more than one time-sliced GPU.
    type: bool
    default: false
  image_registry:
    description:
      - C(gpu_cluster_addons_image_registry) - when set, replaces the registry host of every add-on image
        (RV(images), the DRA driver's and its examples'), as module_utils/gpunode/addons/images.py says.
        It must name a registry host (C(registry.local:5000/mirror)).
    type: str
    default: ""
  images:
    description:
      - The add-on images the role's templates write, by name, each a dict of C(repository) (the image
        without tag, C(nvcr.io/nvidia/k8s-device-plugin)) and C(tag) (optionally pinned to a digest,
        C(v0.20.0@sha256:...)), from the role's C(gpu_cluster_addons_<name>_image) and C(_version).
      - Names - C(nvidia_device_plugin), C(gpushare_device_plugin), C(gpushare_extender), C(hami),
        C(hami_kube_scheduler) (its tag is always the cluster's version; a C(tag) given is not used),
        C(hami_certgen). Another name, or another key, is refused.
      - One left out is not rendered (RV(images) leaves it out). A repository or tag that breaks
        Kubernetes' image syntax is refused, naming the role variable, before anything is rendered.
    type: dict
    default: {}
  resources:
    description:
      - The containers' resources (requests, limits, claims) the templates write, by container - checked
        against Kubernetes' quantity syntax. Each is the role's C(gpu_cluster_addons_<container>_resources).
      - Containers - C(nvidia_device_plugin), C(gpushare_device_plugin), C(gpushare_extender),
        C(hami_scheduler), C(hami_device_plugin), C(hami_monitor). Another name is refused.
    type: dict
    default: {}
  extra_tolerations:
    description: C(gpu_cluster_addons_extra_tolerations) - tolerations added to every GPU pod, each checked.
    type: raw
    default: []
  gpushare_extender:
    description:
      - The GPU-share scheduler extender's ports, each 1 to 65535 - C(port)
        (C(gpu_cluster_addons_gpushare_extender_port), the port it listens on) and C(node_port)
        (C(gpu_cluster_addons_gpushare_extender_node_port), its Service's node port). Another key is refused.
    type: dict
    default: {}
  field_manager:
    description:
      - C(gpu_cluster_addons_field_manager) - the server-side apply field manager, 1 to 128 printable
        characters.
    type: str
  allocations:
    description:
      - Per GPU host, C(device-plugin) or C(dra) (its gpu_cluster_addons_gpu_allocation); a host missing
        here or empty gets the mode's own (C(dra) in mode dra). Shown as the node label
        C(nvidia.com/gpu.allocation).
      - A host allocating by DRA must pass the DRA preflight (kubelet 1.34.2+, driver 565+, CDI on in its
        kubelet's engine, no kubelet gate its version refuses), from C(kubelet_gpu), C(nvidia_gpu) and
        C(nvidia_container_runtime) in O(host_facts).
    type: dict
    default: {}
  dra:
    description:
      - Settings of the DRA driver's objects - namespace, image, version, example_image, pull_policy,
        driver_root, kubelet_root, cdi_root, log_verbosity, extended_resource, labels, tolerations, resources,
        init_resources.
        Empty values keep the defaults.
    type: dict
    default: {}
  readiness_rule:
    description:
      - C(gpu_cluster_addons_readiness_rule) - render or apply the Node Readiness Controller's
        C(NodeReadinessRule) C(gpunode-gpu-validated) (RV(readiness_rule)); false puts its file in
        C(manifests.absent).
    type: bool
    default: false
  readiness_taint_key:
    description:
      - C(gpu_cluster_addons_readiness_taint_key) (by default C(gpu_validate_taint_key)) - the validation
        gate's taint key (effect C(NoSchedule), RV(validation_gate)), and the taint the rule keeps on GPU
        nodes whose condition O(readiness_condition_type) is not C(True); with O(readiness_rule) keys
        C(readiness.k8s.io/<name>) only (the controller manages no others).
    type: str
    default: readiness.k8s.io/gpunode-gpu-unvalidated
  readiness_condition_type:
    description:
      - C(gpu_cluster_addons_readiness_condition_type) - the Node condition the rule requires C(True).
    type: str
    default: gpunode.io/GPUValidated
  gate:
    description:
      - What the validation gate does to each GPU node (RV(gpu_nodes[].gate)), from its last validation
        (C(gpu_validate) in O(host_facts)). With O(readiness_rule) the play leaves the taint to the
        Node Readiness Controller. Omitted - its suboptions' defaults.
    type: dict
    suboptions:
      enabled:
        description: C(gpu_cluster_addons_validation_gate); false lifts the taint from every GPU node.
        type: bool
        default: true
      validation_pod:
        description: A validation pod image is pinned (C(gpu_cluster_addons_validation_pod_digest)).
        type: bool
        default: false
      apply:
        description: The play applies to the cluster; false is render mode (kubectl commands printed).
        type: bool
        default: true
extends_documentation_fragment:
  - module_attributes.no_diff
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Decide the add-ons for a 1.30 cluster rendered for GitOps
  gpu_cluster_addons_plan:
    mode: nvidia
    kubernetes_version: "1.30"
    gpu_hosts: [gpu-01]
    host_facts:
      gpu-01: "{{ hostvars['gpu-01'].ansible_facts }}"
  register: addons
"""

RETURN = r"""
ansible_facts:
  description: What the cluster is given, for the run's summary.
  returned: always
  type: dict
  contains:
    gpu_cluster_addons:
      description:
        - C(mode), C(offers) - per GPU host, what offers its GPUs (C(device plugin, time-slicing x4),
          C(device plugin, mig mixed), C(DRA driver), C(HAMi), C(gpushare)) - and C(untainted) - per GPU
          host whose validation did not pass and that no taint keeps from work, why (the run's table
          says it serves unvalidated).
      type: dict
      sample: {mode: nvidia, offers: {gpu-01: "device plugin, time-slicing x4", gpu-02: DRA driver},
               untainted: {gpu-03: "render mode: nothing ran the printed kubectl commands"}}
version:
  description: The Kubernetes version the manifests are for.
  returned: always
  type: str
  sample: 1.30.0
api:
  description: API versions and features of that version.
  returned: always
  type: dict
  contains:
    apps:
      description: The apiVersion of DaemonSets and Deployments.
      type: str
    rbac:
      description: The apiVersion of the RBAC objects.
      type: str
    runtimeclass:
      description: The apiVersion of RuntimeClass, or null before 1.14.
      type: str
    runtimeclass_scheduling:
      description: Whether a RuntimeClass may carry scheduling (tolerations, node selector).
      type: bool
    seccomp_field:
      description: Whether pods take C(securityContext.seccompProfile) (1.19+) instead of the annotation.
      type: bool
    server_side_apply:
      description: Whether the objects are applied server-side (1.22+).
      type: bool
control_plane:
  description: Where the scheduler extender runs.
  returned: always
  type: dict
  contains:
    label_keys:
      description: The control-plane node label keys for its node affinity.
      type: list
      elements: str
    tolerations:
      description: The tolerations for the control plane's taints.
      type: list
      elements: dict
    source:
      description: How they were found (the label variable, the cluster's nodes, the distribution).
      type: str
    warnings:
      description: What could not be told (also warnings).
      type: list
      elements: str
gpu_nodes:
  description:
    - The GPU nodes - host, node, gpu_count, labels and sharing (what the node offers - C(time-slicing x4),
      C(mps x8), C(mig mixed), C(whole GPUs) in nvidia mode, else the mode), allocation, and C(gate).
  returned: always
  type: list
  elements: dict
  contains:
    gate:
      description:
        - What the validation gate does to the node (O(gate)) - C(taint) (C(present), C(absent) with the
          key used before, or null - left as it is, and always with O(readiness_rule), whose controller
          keeps it), C(taints) (the taints it puts or lifts), C(label) (C(labels) and C(annotations), or
          null), C(pod) (a validation pod runs before the taint is lifted), C(no_pod) (why a node that
          passed in this run gets none), C(lifted_after_pod) (the taints the pod's success lifts),
          C(pod_conditions) (with O(readiness_rule), the Node condition the pod's verdict publishes -
          C(succeeded) or not, C(True) C(Passed) or C(False) C(CUDAPodFailed)), C(commands) (render
          mode's kubectl lines), C(untainted) (why a node whose validation did not pass serves
          untainted, else empty).
      type: dict
manifests:
  description: The files to render or apply, and those to take away.
  returned: always
  type: dict
  contains:
    present:
      description: The mode's files (C(file), C(template)), in apply order.
      type: list
      elements: dict
    absent:
      description: The other modes' and turned-off options' files (C(file), C(template)).
      type: list
      elements: dict
readiness_rule:
  description: The NodeReadinessRule - whether it is rendered, its name, condition type and taint key.
  returned: always
  type: dict
  contains:
    enabled:
      description: O(readiness_rule).
      type: bool
    name:
      description: C(gpunode-gpu-validated).
      type: str
    condition_type:
      description: O(readiness_condition_type).
      type: str
    taint_key:
      description: O(readiness_taint_key).
      type: str
validation_gate:
  description:
    - The validation gate's taints (tasks/validation_gate.yml) - each C(key) and C(effect).
  returned: always
  type: dict
  contains:
    taint:
      description: The taint a GPU node that did not pass gets - O(readiness_taint_key), C(NoSchedule).
      type: dict
    lifted:
      description:
        - The taints a node that passed has lifted - O(readiness_taint_key) and C(gpunode.io/gpu-unvalidated),
          the key gpunode's nodes registered with before.
      type: list
      elements: dict
    tolerations:
      description: The tolerations of the DaemonSets that run before the gate opens - both keys, C(Exists).
      type: list
      elements: dict
runtime_class_name:
  description: C(nvidia) when the device plugin pods must ask for the RuntimeClass, else null.
  returned: always
  type: str
runtime_class_reasons:
  description: Why (the GPU nodes that need it, or that none does).
  returned: always
  type: list
  elements: str
resource:
  description: The extended resource the GPU nodes advertise in this mode.
  returned: always
  type: str
  sample: nvidia.com/gpu
workloads:
  description: The DaemonSets and Deployments to wait for (kind, name).
  returned: always
  type: list
  elements: dict
nvidia_device_plugin_config:
  description: The NVIDIA device plugin's default configuration (version v1 format).
  returned: always
  type: dict
nvidia_device_plugin:
  description:
    - The device plugin's configs - C(configs) (name -> config, C(default) included), C(default) (its name),
      C(named) (several - the config-manager picks one by node label), C(mig) (some config has a MIG strategy
      other than none), C(mps) (some config shares by MPS), C(driver_root) (the root the plugin mounts).
  returned: always
  type: dict
  contains:
    configs:
      description: Name -> config (the plugin's own format), the default one included.
      type: dict
    default:
      description: The default config's name.
      type: str
    named:
      description: Several configs - the config-manager picks one by the node label.
      type: bool
    mig:
      description: Some config has a MIG strategy other than none.
      type: bool
    mps:
      description: Some config shares by MPS.
      type: bool
    driver_root:
      description:
        - Where the GPU nodes' driver lives, the plugin's C(NVIDIA_DRIVER_ROOT), mounted at C(/driver-root) as
          NVIDIA's chart mounts C(nvidiaDriverRoot); C(/) (nothing mounted) for a driver on the host.
        - The configs' C(flags.nvidiaDriverRoot) when they give one, else the root the device-plugin hosts'
          driver facts agree on (C(nvidia_driver.driver_root)); hosts in different roots are refused.
      type: str
      sample: /usr/local/nvidia
hami:
  description:
    - HAMi's scheduler placement (C(scheduler)), C(url_prefix) of its extender, C(kube_scheduler_config)
      (for the cluster's kube-scheduler, extender placement), C(own_scheduler_config) (for its own
      kube-scheduler) and C(device_config).
  returned: always
  type: dict
  contains:
    scheduler:
      description: C(deployment) (HAMi's own scheduler) or C(extender) (the cluster's kube-scheduler).
      type: str
    url_prefix:
      description: The extender's URL prefix for that placement.
      type: str
    kube_scheduler_config:
      description: The KubeSchedulerConfiguration text for the cluster's kube-scheduler (extender placement).
      type: str
    own_scheduler_config:
      description: The KubeSchedulerConfiguration text of HAMi's own kube-scheduler.
      type: str
    policy:
      description: The scheduler Policy text before Kubernetes 1.19, else null.
      type: str
    device_config:
      description: HAMi's device configuration (split count, memory and core scaling).
      type: dict
    webhook:
      description: Whether HAMi's admission webhook is rendered (with its own scheduler, deployment).
      type: bool
    certificate:
      description: Where the webhook's certificate comes from - C(controller) or C(job).
      type: str
    tls_secret:
      description: The Secret of the webhook's serving certificate.
      type: str
images:
  description:
    - The add-on images the role's templates write, by name (nvidia_device_plugin, gpushare_device_plugin,
      gpushare_extender, hami, hami_kube_scheduler, hami_certgen, dra, dra_example), each C(repository:tag)
      with the registry prefix O(image_registry) applied. Those missing from O(images) are left out (dra
      and dra_example never are).
  returned: always
  type: dict
  contains:
    nvidia_device_plugin:
      description: NVIDIA's device plugin (also its config-manager and MPS daemon).
      type: str
    gpushare_device_plugin:
      description: The GPU-share device plugin.
      type: str
    gpushare_extender:
      description: The GPU-share scheduler extender.
      type: str
    hami:
      description: HAMi (device plugin, monitor, scheduler extender).
      type: str
    hami_kube_scheduler:
      description: The kube-scheduler of HAMi's own scheduler.
      type: str
    dra:
      description: NVIDIA's DRA driver.
      type: str
    dra_example:
      description: The DRA examples' pod image.
      type: str
allocations:
  description: Per GPU host, C(device-plugin) or C(dra).
  returned: always
  type: dict
dra:
  description: The DRA driver's part of the plan.
  returned: always
  type: dict
  contains:
    enabled:
      description: Whether some pool allocates by DRA.
      type: bool
    halves:
      description: device_plugin and dra - which of the two the cluster runs.
      type: dict
    manifests:
      description: File name to object, when enabled.
      type: dict
    removed:
      description: File name to object to take away, when not enabled.
      type: dict
    examples:
      description: File name to object of the examples (a claim for one GPU, one for a MIG slice, from 1.37
        a pod asking for nvidia.com/gpu served by DRA), when enabled.
      type: dict
    example_files:
      description: The examples' file names on this version (to take away when no pool uses DRA).
      type: list
      elements: str
    image:
      description: The DRA driver's image (mirrored, see RV(images)).
      type: str
    example_image:
      description: The examples' image (mirrored).
      type: str
    unchecked:
      description: What the DRA preflight could not check on a DRA host, for a missing fact (also warnings).
      type: list
      elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.addons import dra
from ansible.module_utils.gpunode.addons.cluster import DISTRIBUTIONS, MODES, GpuAddonsError
from ansible.module_utils.gpunode.addons.gpu_nodes import RUNTIME_CLASS_CHOICES
from ansible.module_utils.gpunode.addons.inputs import ValueSyntaxError
from ansible.module_utils.gpunode.addons.plan import plan
from ansible.module_utils.gpunode.validate import gate

ARGUMENT_SPEC = {
    "mode": {"type": "str", "choices": list(MODES), "required": True},
    "kubernetes_version": {"type": "str", "required": True},
    "nodes": {"type": "list", "elements": "dict"},
    "distribution": {"type": "str", "choices": list(DISTRIBUTIONS), "default": "auto"},
    "control_plane_label": {"type": "str"},
    "gpu_hosts": {"type": "list", "elements": "str", "default": []},
    "host_facts": {"type": "dict", "default": {}},
    "node_names": {"type": "dict", "default": {}},
    "require_gpu_hosts": {"type": "bool", "default": False},
    "extra_node_labels": {"type": "dict", "default": {}},
    "runtime_class": {"type": "bool", "default": True},
    "pod_runtime_class": {"type": "str", "choices": list(RUNTIME_CLASS_CHOICES), "default": "auto"},
    "runtime_class_handler": {"type": "str", "default": "nvidia"},
    "namespace": {"type": "str", "default": "kube-system"},
    "device_plugin_config": {"type": "dict", "default": {}},
    "device_plugin_configs": {"type": "dict", "default": {}},
    "device_plugin_config_default": {"type": "str", "default": ""},
    "device_plugin_config_names": {"type": "dict", "default": {}},
    "hami": {"type": "dict", "default": {}},
    "nvidia_mig_strategy": {"type": "str", "choices": ["none", "single", "mixed"], "default": "none"},
    "nvidia_time_slicing_replicas": {"type": "int", "default": 0},
    "nvidia_time_slicing_rename": {"type": "bool", "default": False},
    "nvidia_time_slicing_fail_requests_greater_than_one": {"type": "bool", "default": False},
    "image_registry": {"type": "str", "default": ""},
    "images": {"type": "dict", "default": {}},
    "resources": {"type": "dict", "default": {}},
    "extra_tolerations": {"type": "raw", "default": []},
    "gpushare_extender": {"type": "dict", "default": {}},
    "field_manager": {"type": "str"},
    "allocations": {"type": "dict", "default": {}},
    "dra": {"type": "dict", "default": {}},
    "readiness_rule": {"type": "bool", "default": False},
    # a taint's key, not a secret (ansible-test's no-log-needed reads "key" as one)
    "readiness_taint_key": {"type": "str", "default": gate.TAINT_KEY, "no_log": False},
    "readiness_condition_type": {"type": "str", "default": "gpunode.io/GPUValidated"},
    "gate": {"type": "dict", "apply_defaults": True, "options": {
        "enabled": {"type": "bool", "default": True},
        "validation_pod": {"type": "bool", "default": False},
        "apply": {"type": "bool", "default": True},
    }},
}


def build_module():
    return AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
    )


def run(module):
    """The plan (module_utils/gpunode/addons/plan.py); its warnings become the module's."""
    return plan(dict(module.params, check_mode=module.check_mode), module.warn)


def main():
    module = build_module()
    try:
        result = run(module)
    except (GpuAddonsError, dra.DraError) as exc:
        module.fail_json(msg=str(exc))
    except ValueSyntaxError as exc:
        module.fail_json(msg=f"{exc}; nothing was rendered or applied")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
