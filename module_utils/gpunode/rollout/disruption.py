# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether carrying out a node's plans disrupts its GPU work, and the refusal when it would.

Read from the result of the one read of every concern (``node_state.read``): each concern that
changes says why it disrupts (a driver install or reload, a reboot, a container engine or kubelet
restart); a concern not read because one before it changes, or whose read failed, is unknown and
counts as disruptive. A bare host (no NVIDIA module loaded) has no GPU work to disrupt: its first
install is never disruptive. GPU work is a process holding ``/dev/nvidiaN`` open
(``host.processes.gpu_holders``) other than the services gpunode stops itself around a driver
change; /proc is scanned only when a change is disruptive. DESIGN.md, "Rollout".

A node whose change disrupts goes through the rolling path (``rollout``) when it serves: it is
registered in a cluster (the kubelet's kubeconfig is there, as ``kubelet/identity.py`` finds it) or
GPU work runs on it. With a drain (``gpunode_rollout_drain``) its GPU work is not refused here: the
rolling path drains the node, then reads it again and refuses what still runs.
"""

import platform

from ansible.module_utils.gpunode.host import processes
from ansible.module_utils.gpunode.kubelet import identity

ALLOW_VARIABLE = "gpunode_rollout_allow_in_use"
DRAIN_VARIABLES = "gpunode_rollout_drain: true (with gpunode_rollout_kubeconfig)"
# the concerns whose change can stop GPU work (the validation record's is a read)
CHANGING = ("driver", "container_runtime", "kubelet")


def driver_reasons(result):
    """Why the driver's plan disrupts: [] on a bare host (nothing loaded: nothing runs on the GPUs)."""
    plan, loaded = result.get("plan") or {}, (result.get("before") or {}).get("loaded_version")
    if not loaded:
        return []
    request = result.get("request") or {}
    reasons = [f"driver install {loaded} -> {request.get('version') or request.get('wanted')}"] \
        if plan.get("install") else []
    restart = (plan.get("fabric") or {}).get("restart")  # IMEX, its nodes or settings changed
    reasons += [why for step, why in (("unload", "driver reload"), ("reboot_required", "reboot"))
                if plan.get(step)]
    return reasons + ([f"fabric daemon restart ({', '.join(restart)})"] if restart else [])


def runtime_reasons(result):
    plan = result.get("plan") or {}
    engines = [(plan[name].get("flavor") or name) if name == "rancher" else name
               for name in ("docker", "containerd", "rancher") if (plan.get(name) or {}).get("restart")]
    return [f"container engine restart ({', '.join(engines)})"] if engines else []


def kubelet_reasons(result):
    return ["kubelet restart"] if result.get("restart_required") else []


REASONS = {"driver": driver_reasons, "container_runtime": runtime_reasons, "kubelet": kubelet_reasons}


def reasons(read):
    """Why carrying out the read's plans disrupts the node's GPU work ([]: it does not)."""
    plans, found = read.get("plans") or {}, []
    if "driver" in plans and not (plans["driver"].get("before") or {}).get("loaded_version"):
        return []  # a first install: the concerns after it change nothing that runs on a GPU
    for name in CHANGING:
        if name not in read["converged"] or read["converged"][name]:
            continue
        if name in plans:
            found += REASONS[name](plans[name])
        else:
            found.append(f"{name}: not read ({read['reasons'].get(name)})")
    return found


def gpu_work(gpu_services):
    """The processes holding a GPU, as ``{pid, command, unit, pod, pod_name}``, but those of
    ``gpu_services``."""
    own = {name if "." in name else name + ".service" for name in gpu_services}
    return [{"pid": holder.pid, "command": " ".join(holder.argv), "unit": holder.unit, "pod": holder.pod,
             "pod_name": holder.pod_name}
            for holder in processes.gpu_holders(processes.PROC) if holder.unit not in own]


def _holder(process):
    pod = process.get("pod_name") or process.get("pod")
    where = f"pod {pod}" if pod else process["unit"] or "no systemd unit"
    return f"pid {process['pid']} ({where}): {process['command'] or '?'}"


def refusal(node, disruption):
    """The message that fails a node whose disruptive change would hit its GPU work."""
    work = disruption["gpu_work"]
    pods = sum(1 for process in work if process.get("pod"))
    # a DaemonSet's pod (gpunode's device plugin, dcgm-exporter) holds the GPUs too: a drain pauses those
    in_pods = (f" {pods} of them in pods: a drain evicts those but a DaemonSet's, and pauses gpunode's own "
               "GPU DaemonSets (device plugin, dcgm-exporter) there.") if pods else ""
    return (f"{node}: refused, GPU work runs here and this run would disrupt it "
            f"({', '.join(disruption['reasons'])}): {'; '.join(_holder(p) for p in work)}.{in_pods} Nothing "
            f"was changed. Stop that work, have the node drained first ({DRAIN_VARIABLES}; a process a drain "
            f"does not end still refuses it), or set {ALLOW_VARIABLE}: true to change the node anyway (the "
            "work may fail).")


def serving(host, work):
    """``(serves, node name)``: registered (the kubelet's kubeconfig is there, whether or not its
    credentials can be read) or running GPU work; the name is the kubelet's, else the hostname."""
    hostname = platform.node().strip().lower()
    try:
        return True, identity.identity(host, proc_root=processes.PROC).node_name
    except identity.NoKubeconfig:
        return bool(work), hostname
    except identity.IdentityError:
        return True, hostname


def assess(read, gpu_services, allow_in_use, *, drain=False, host=None, node=None):
    """``{"disruption": {disruptive, reasons, gpu_work, serving, node_name, rollout}, "refusal": message
    or None}`` for the result of ``node_state.read``; ``host`` (``commands.Host``) reads the kubelet's
    identity, only when the change is disruptive."""
    why = reasons(read)
    work = gpu_work(gpu_services) if why else []
    serves, name = serving(host, work) if why else (False, None)
    disruption = {"disruptive": bool(why), "reasons": why, "gpu_work": work, "serving": serves,
                  "node_name": name, "rollout": bool(why) and serves}
    refused = work and not allow_in_use and not drain
    return {"disruption": disruption,
            "refusal": refusal(node or platform.node(), disruption) if refused else None}
