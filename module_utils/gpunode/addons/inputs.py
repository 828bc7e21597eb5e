# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which of gpu_cluster_addons' inputs lands in a manifest, and the syntax it must have there.

The role's templates put these values in place as they are (``image:
"{{ image }}:{{ version }}"``, ``namespace: {{ namespace }}``), so they are
checked once, by the plan module, before anything is rendered, applied or
read from the cluster's files: a value that breaks Kubernetes' syntax is
refused with the variable, the value and the rule (``k8s_names.py``), never
rewritten. Values derived from facts (GPU product labels) are made valid by
``gpu_cluster_addons.label_value`` instead.

A new role variable that lands in a manifest gets one line in
``ROLE_VARIABLE_RULES``; the role hands the module all its variables
(``role_values``), and those not listed here are not checked.

Standard library only; Python 3.8+.
"""

from ansible.module_utils.gpunode.formats import k8s_names
from ansible.module_utils.gpunode.formats.values import ValueSyntaxError

# The plan module's own options: option -> (the role variable users set, rule).
OPTION_RULES = {
    "namespace": ("gpu_cluster_addons_namespace", k8s_names.namespace),
    "control_plane_label": ("gpu_cluster_addons_control_plane_label", k8s_names.node_label_term),
    "runtime_class_handler": ("gpu_cluster_addons_runtime_class_handler", k8s_names.runtime_class_handler),
    "extra_node_labels": ("gpu_cluster_addons_extra_node_labels", k8s_names.labels),
}

# Role variables the templates write, by name (handed over in the option role_values).
ROLE_VARIABLE_RULES = {
    "gpu_cluster_addons_nvidia_device_plugin_image": k8s_names.image_repository,
    "gpu_cluster_addons_nvidia_device_plugin_version": k8s_names.image_tag,
    "gpu_cluster_addons_gpushare_device_plugin_image": k8s_names.image_repository,
    "gpu_cluster_addons_gpushare_device_plugin_version": k8s_names.image_tag,
    "gpu_cluster_addons_gpushare_extender_image": k8s_names.image_repository,
    "gpu_cluster_addons_gpushare_extender_version": k8s_names.image_tag,
    "gpu_cluster_addons_nvidia_device_plugin_resources": k8s_names.resources,
    "gpu_cluster_addons_gpushare_device_plugin_resources": k8s_names.resources,
    "gpu_cluster_addons_gpushare_extender_resources": k8s_names.resources,
    "gpu_cluster_addons_extra_tolerations": k8s_names.tolerations,
    "gpu_cluster_addons_gpushare_extender_port": k8s_names.port,
    "gpu_cluster_addons_gpushare_extender_node_port": k8s_names.port,
    "gpu_cluster_addons_field_manager": k8s_names.field_manager,
}


def check_inputs(params):
    """Refuse the first option or role variable that breaks its syntax; raises ValueSyntaxError.

    Empty options mean "not set" (an empty control-plane label: detect it).
    """
    for option, (variable, rule) in OPTION_RULES.items():
        value = params.get(option)
        if value not in (None, ""):
            rule(f"{variable} ({option})" if variable != option else option, value)
    for host, name in sorted((params.get("node_names") or {}).items()):
        if name not in (None, ""):
            k8s_names.node_name(f"gpu_cluster_addons_node_name of {host} (node_names)", name)
    role_values = params.get("role_values") or {}
    for variable, rule in ROLE_VARIABLE_RULES.items():
        if role_values.get(variable) is not None:
            rule(variable, role_values[variable])


def check_node_names(gpu_nodes):
    """Every GPU node's name (given, else the host's nodename fact or inventory name): a DNS subdomain."""
    for record in gpu_nodes:
        k8s_names.node_name(
            f"the node name of {record['host']} (gpu_cluster_addons_node_name, else its nodename fact)",
            record["node"],
        )


__all__ = ["OPTION_RULES", "ROLE_VARIABLE_RULES", "ValueSyntaxError", "check_inputs", "check_node_names"]
