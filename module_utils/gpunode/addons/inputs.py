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

Each option that lands in a manifest has its rule here, and each message names
the role variable users set with the option it reached the module in
(``gpu_cluster_addons_field_manager (field_manager)``). The images are checked
by ``images.addon_images``; a new role variable that lands in a manifest gets an
option of the plan module and one line here.

Standard library only; Python 3.8+.
"""

from ansible.module_utils.gpunode.formats import k8s_names
from ansible.module_utils.gpunode.formats.values import ValueSyntaxError, refuse

# The plan module's own options: option -> (the role variable users set, rule).
OPTION_RULES = {
    "namespace": ("gpu_cluster_addons_namespace", k8s_names.namespace),
    "control_plane_label": ("gpu_cluster_addons_control_plane_label", k8s_names.node_label_term),
    "runtime_class_handler": ("gpu_cluster_addons_runtime_class_handler", k8s_names.runtime_class_handler),
    "extra_node_labels": ("gpu_cluster_addons_extra_node_labels", k8s_names.labels),
    "readiness_taint_key": ("gpu_cluster_addons_readiness_taint_key", k8s_names.taint_key),
    "readiness_condition_type": ("gpu_cluster_addons_readiness_condition_type", k8s_names.qualified_name),
}

# The containers' resources the templates write: option resources' key -> the role variable.
RESOURCES = {
    name: f"gpu_cluster_addons_{name}_resources"
    for name in ("nvidia_device_plugin", "gpushare_device_plugin", "gpushare_extender",
                 "hami_scheduler", "hami_device_plugin", "hami_monitor")
}
# option gpushare_extender's keys -> the role variable
GPUSHARE_EXTENDER_PORTS = {"port": "gpu_cluster_addons_gpushare_extender_port",
                           "node_port": "gpu_cluster_addons_gpushare_extender_node_port"}


def _check_each(params, option, variables, what, rule):
    """Each value of the mapping option by its key's rule; a key not in ``variables`` is refused."""
    given = params.get(option) or {}
    unknown = sorted(set(given) - set(variables))
    if unknown:
        refuse(option, unknown[0], what, ", ".join(variables))
    for key, variable in variables.items():
        if given.get(key) is not None:
            rule(f"{variable} ({option}.{key})", given[key])


def check_inputs(params):
    """Refuse the first option that breaks its syntax; raises ValueSyntaxError.

    Empty options mean "not set" (an empty control-plane label: detect it); a value given as
    None in a mapping option is not set either (not rendered by the role).
    """
    for option, (variable, rule) in OPTION_RULES.items():
        value = params.get(option)
        if value not in (None, ""):
            rule(f"{variable} ({option})" if variable != option else option, value)
    for host, name in sorted((params.get("node_names") or {}).items()):
        if name not in (None, ""):
            k8s_names.node_name(f"gpu_cluster_addons_node_name of {host} (node_names)", name)
    _check_each(params, "resources", RESOURCES, "a container's name", k8s_names.resources)
    _check_each(params, "gpushare_extender", GPUSHARE_EXTENDER_PORTS, "a port's name", k8s_names.port)
    k8s_names.tolerations("gpu_cluster_addons_extra_tolerations (extra_tolerations)",
                          params.get("extra_tolerations") or [])
    if params.get("field_manager") is not None:
        k8s_names.field_manager("gpu_cluster_addons_field_manager (field_manager)", params["field_manager"])


def check_node_names(gpu_nodes):
    """Every GPU node's name (given, else the host's nodename fact or inventory name): a DNS subdomain."""
    for record in gpu_nodes:
        k8s_names.node_name(
            f"the node name of {record['host']} (gpu_cluster_addons_node_name, else its nodename fact)",
            record["node"],
        )


__all__ = ["GPUSHARE_EXTENDER_PORTS", "OPTION_RULES", "RESOURCES", "ValueSyntaxError", "check_inputs",
           "check_node_names"]
