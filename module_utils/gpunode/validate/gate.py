# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The validation gate's names: the taint that keeps an unvalidated GPU node unschedulable, and the
toleration of the components that must run there before it opens (the device plugins, the DRA
kubelet plugin, HAMi's device plugin, dcgm-exporter), so that the GPUs are advertised before the
gate opens.

``NoSchedule``: pods already running on a node stay; new pods without the toleration are not
placed there. The gpu_cluster_addons role (tasks/validation_gate.yml) puts the taint on GPU nodes
whose last validation did not pass and lifts it from those that passed. The key is
``gpu_validate_taint_key`` (:data:`TAINT_KEY` by default); nodes that registered with the key
gpunode used before (:data:`LEGACY_KEY`) have it lifted too, and the DaemonSets tolerate both.
Standard library only.
"""

TAINT_KEY = "readiness.k8s.io/gpunode-gpu-unvalidated"
LEGACY_KEY = "gpunode.io/gpu-unvalidated"
EFFECT = "NoSchedule"


def gate(key=TAINT_KEY):
    """``taint`` (what a node that did not pass gets), ``lifted`` (what a node that passed loses: the
    key in use and the legacy one) and ``tolerations`` (of the DaemonSets that run before it opens)."""
    keys = list(dict.fromkeys([key, LEGACY_KEY]))
    return {
        "taint": {"key": key, "effect": EFFECT},
        "lifted": [{"key": name, "effect": EFFECT} for name in keys],
        "tolerations": [{"key": name, "operator": "Exists", "effect": EFFECT} for name in keys],
    }


#: the label and annotations a GPU node gets from its last validation (apply mode)
VALIDATED_LABEL = "gpunode.io/gpu-validated"
#: with the readiness rule, the Node condition the add-ons play publishes after a node's validation pod,
#: by whether it succeeded (the node published ValidationPodPending, or Passed, before it ran)
POD_VERDICTS = {True: ("True", "Passed", "the GPU validation and its CUDA validation pod passed"),
                False: ("False", "CUDAPodFailed", "its CUDA validation pod did not succeed")}
#: why a GPU node whose validation did not pass carries no taint after the run (the closing table says so)
UNTAINTED = {
    "off": "gpu_cluster_addons_validation_gate is false",
    "render": "render mode: nothing ran the printed kubectl commands",
}


def node_gate(node, verdict, settings):
    """What the gate does to one GPU node (a record of the add-ons plan's ``gpu_nodes``) whose last
    validation is ``verdict`` (its ``gpu_validate`` facts; empty when the run has none).

    ``settings``: ``enabled`` (gpu_cluster_addons_validation_gate), ``rule`` (the Node Readiness
    Controller's rule keeps the taint from the node's condition: the play leaves the taint to it),
    ``applying`` (not render mode), ``pods`` (a validation pod image is pinned), ``mode``, ``key``,
    ``condition_type`` (the rule's), ``check_mode``.

    Returns ``taint`` ("present", "absent" with the legacy key, or None: left as it is), ``taints``
    (the taints it puts or lifts), ``label`` (the node's label and annotations, or None), ``pod`` (a
    validation pod runs before the taint is lifted), ``no_pod`` (why a node that passed in this run
    gets none), ``lifted_after_pod`` (the taints its pod's success lifts), ``pod_conditions`` (with the
    rule: the Node condition its pod's verdict publishes, ``succeeded`` or not; POD_VERDICTS),
    ``commands`` (render mode's kubectl lines) and ``untainted`` (why a node that did not pass serves
    untainted, else "")."""
    name, passed, ran = node["node"], bool(verdict.get("passed")), bool(verdict.get("ran"))
    result = {"taint": None, "taints": [], "label": None, "pod": False, "no_pod": "", "lifted_after_pod": [],
              "pod_conditions": [], "commands": [], "untainted": ""}
    if verdict and not passed and not settings["rule"] and not (settings["enabled"] and settings["applying"]):
        result["untainted"] = UNTAINTED["render" if settings["enabled"] else "off"]
    names = gate(settings["key"])
    if not settings["enabled"]:  # lifted everywhere, but where the controller keeps it
        result["taint"] = "absent" if settings["applying"] and not settings["rule"] else None
        result["taints"] = names["lifted"] if result["taint"] else []
        return result
    label = "true" if passed else "false"
    if not settings["applying"]:  # whoever applies the files gates each node: one without a verdict too
        taints = [] if settings["rule"] else (
            [f"kubectl taint node {name} {t['key']}:{EFFECT}-" for t in names["lifted"]] if passed
            else [f"kubectl taint node {name} {settings['key']}:{EFFECT} --overwrite"])
        result["commands"] = [*taints, f"kubectl label node {name} --overwrite {VALIDATED_LABEL}={label}"]
        return result
    if not verdict:
        return result
    advertised = node.get("allocation") != "dra" and settings["mode"] != "gpushare"
    newly = ran and passed
    result["pod"] = newly and settings["pods"] and advertised and not settings["check_mode"]
    if newly and not (settings["pods"] and advertised):
        result["no_pod"] = ("gpu_cluster_addons_validation_pod_digest is empty" if not settings["pods"]
                            else "its GPUs are not advertised as nvidia.com/gpu (DRA, or gpushare mode)")
    if not settings["rule"]:
        result["taint"] = "absent" if passed and not result["pod"] else "present"
        result["taints"] = names["lifted"] if result["taint"] == "absent" else [names["taint"]]
        result["lifted_after_pod"] = names["lifted"] if result["pod"] else []
    elif result["pod"]:  # the controller lifts or puts back the taint from the pod's verdict
        result["pod_conditions"] = [
            {"succeeded": succeeded, "type": settings["condition_type"], "status": status, "reason": reason,
             "message": message} for succeeded, (status, reason, message) in POD_VERDICTS.items()]
    result["label"] = {"labels": {VALIDATED_LABEL: label},
                       "annotations": {"gpunode.io/gpu-validated-at": str(verdict.get("validated_at") or ""),
                                       "gpunode.io/gpu-validation-failed":
                                           ",".join(verdict.get("failed_checks") or [])}}
    return result
