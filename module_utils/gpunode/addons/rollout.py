# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Readiness of the GPU add-ons, from what k8s_info returns: rolled-out workloads, advertised GPUs.

Pure Python, tested without Ansible; ``gpu_cluster_addons_wait`` calls it.
"""

import re


def _node_name(node):
    return (node.get("metadata") or {}).get("name", "?") if isinstance(node, dict) else "?"


def workload_status(resources, kind, name):
    """Is a DaemonSet/Deployment rolled out? ``{ready, message}``."""
    objs = [r for r in resources or [] if isinstance(r, dict)]
    if not objs:
        return {"ready": False, "message": f"{kind} {name} does not exist"}
    obj = objs[0]
    status = obj.get("status") or {}
    generation = (obj.get("metadata") or {}).get("generation")
    observed = status.get("observedGeneration")
    if generation is not None and observed is not None and observed < generation:
        return {
            "ready": False,
            "message": f"{kind} {name}: controller has not seen generation {generation} yet",
        }
    if kind == "DaemonSet":
        desired = int(status.get("desiredNumberScheduled") or 0)
        ready = int(status.get("numberReady") or 0)
        updated = int(status.get("updatedNumberScheduled") or 0)
        if desired == 0:
            return {
                "ready": False,
                "message": f"DaemonSet {name}: no node matches its nodeSelector "
                "(are the GPU nodes labelled?)",
            }
        if ready < desired or updated < desired:
            return {
                "ready": False,
                "message": f"DaemonSet {name}: {ready}/{desired} pods ready, {updated}/{desired} updated",
            }
        return {"ready": True, "message": f"DaemonSet {name}: {ready}/{desired} pods ready"}
    wanted = int((obj.get("spec") or {}).get("replicas", 1) or 0)
    available = int(status.get("availableReplicas") or 0)
    updated = int(status.get("updatedReplicas") or 0)
    if available < wanted or updated < wanted:
        return {
            "ready": False,
            "message": f"{kind} {name}: {available}/{wanted} replicas available, {updated}/{wanted} updated",
        }
    return {"ready": True, "message": f"{kind} {name}: {available}/{wanted} replicas available"}


def _quantity_positive(value):
    text = str(value or "").strip()
    match = re.match(r"^(\d+(?:\.\d+)?)", text)
    return bool(match) and float(match.group(1)) > 0


def allocatable_status(nodes, expected, resource):
    """Does every expected GPU node advertise ``resource`` in its allocatable?

    ``nodes``: k8s_info resources (kind Node); ``expected``: node names.
    Returns ``{ready, missing: [...], message}`` naming each node that is
    absent from the cluster or advertises nothing.
    """
    by_name = {_node_name(n): n for n in nodes or [] if isinstance(n, dict)}
    problems = []
    for name in sorted(set(expected or [])):
        node = by_name.get(name)
        if node is None:
            problems.append(f"{name}: no such node in the cluster (set gpu_cluster_addons_node_name?)")
            continue
        value = ((node.get("status") or {}).get("allocatable") or {}).get(resource)
        if not _quantity_positive(value):
            problems.append(f"{name}: {resource} is {value or 'absent'} in allocatable")
    if problems:
        return {
            "ready": False,
            "missing": [p.split(":")[0] for p in problems],
            "message": f"GPU nodes not advertising {resource}: " + "; ".join(problems),
        }
    return {
        "ready": True,
        "missing": [],
        "message": f"all {len(set(expected or []))} GPU node(s) advertise {resource}",
    }
