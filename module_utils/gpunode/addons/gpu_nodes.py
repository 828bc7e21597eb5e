# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU nodes: the labels each gets from the detection facts, and the runtime its plugin pods ask for.

Pure Python, tested without Ansible (module_utils/gpunode/addons/cluster.py
holds the modes and the error).
"""

import re

from ansible.module_utils.gpunode.addons.cluster import MODES, GpuAddonsError
from ansible.module_utils.gpunode.driver.gpu import product_name

# Kubernetes label values: at most 63 characters, alphanumerics at both ends,
# '-', '_' and '.' between.
_LABEL_VALUE_MAX = 63


def label_value(text):
    """A valid Kubernetes label value: ``"Tesla T4"`` -> ``"Tesla-T4"``."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-_.")
    value = re.sub(r"-{2,}", "-", value)
    return value[:_LABEL_VALUE_MAX].rstrip("-_.")


def accelerator_value(product):
    """The seeds' ``accelerator`` form: ``"Tesla T4"`` -> ``"nvidia-tesla-t4"``."""
    slug = re.sub(r"[^a-z0-9]+", "-", str(product).lower()).strip("-")
    if not slug.startswith("nvidia"):
        slug = "nvidia-" + slug if slug else "nvidia"
    return slug[:_LABEL_VALUE_MAX].rstrip("-")


# Labels that belong to one mode (value None in the others: a merge patch with
# None removes what an earlier run in another mode left).
MODE_LABELS = {
    "gpushare": {"gpushare": "true"},  # the gpushare device plugin's nodeSelector
    "hami": {"gpu": "on"},  # HAMi's device plugin's nodeSelector (chart: nvidiaNodeSelector)
    "nvidia": {},
}
# Set per node in nvidia mode by the plan (device plugin config of the node).
NVIDIA_CONFIG_LABELS = ("nvidia.com/device-plugin.config", "nvidia.com/mps.capable")


def node_labels(facts, mode, extra_labels=None, plugin_labels=None):
    """Labels a GPU node gets from its ``ansible_facts.nvidia_gpu``.

    ``nvidia.com/gpu.present``, ``nvidia.com/gpu.count``,
    ``nvidia.com/gpu.product`` (GPU feature discovery's names), ``accelerator``
    (``nvidia-tesla-t4``) and the labels of ``MODE_LABELS``: ``gpushare=true``
    in gpushare mode, ``gpu=on`` in hami mode, None (removed) in the other
    modes. ``plugin_labels``: the node's ``nvidia.com/device-plugin.config``
    and ``nvidia.com/mps.capable`` (nvidia mode; removed in the others).
    """
    if mode not in MODES:
        raise GpuAddonsError(f"gpu_cluster_addons_mode: {mode!r} is not one of {', '.join(MODES)}")
    if not isinstance(facts, dict):
        raise GpuAddonsError("nvidia_gpu facts must be a dict")
    count = int(facts.get("gpu_count") or 0)
    gpus = [d for d in facts.get("devices") or [] if isinstance(d, dict) and d.get("kind") == "gpu"]
    names = [d.get("name") for d in gpus if d.get("name")] or list(facts.get("models") or [])
    labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(count)}
    if names:
        # The first GPU by bus address names the node, as GPU feature discovery does.
        product = product_name(names[0])
        if label_value(product):
            labels["nvidia.com/gpu.product"] = label_value(product)
            labels["accelerator"] = accelerator_value(product)
    for owner, owned in sorted(MODE_LABELS.items()):
        for key, value in owned.items():
            labels[key] = value if owner == mode else None
    for key in NVIDIA_CONFIG_LABELS:
        labels[key] = (plugin_labels or {}).get(key) if mode == "nvidia" else None
    for key, value in (extra_labels or {}).items():
        labels[str(key)] = None if value is None else str(value)
    return labels


def gpu_nodes(hosts, mode, extra_labels=None):
    """The GPU nodes of the inventory: ``[{host, node, labels, gpu_count, sharing}]``, sorted by node.

    ``hosts``: one record per inventory host of the gpu_nodes group:
    ``{"host", "node_name" (gpu_cluster_addons_node_name or ""), "nodename"
    (ansible_facts.nodename or ""), "nvidia_gpu" (its facts or None)}``. The
    node name is ``node_name``, else the lower-cased ``nodename`` (what the
    kubelet registers), else the inventory name. A host without
    ``nvidia_gpu`` facts, or whose facts found no GPU, is an error naming every
    such host: labelling or waiting for a node that was never detected would
    hide the real problem.
    """
    result, missing, empty = [], [], []
    for record in hosts or []:
        host = record["host"]
        facts = record.get("nvidia_gpu")
        if not isinstance(facts, dict):
            missing.append(host)
            continue
        if not facts.get("present") or not int(facts.get("gpu_count") or 0):
            empty.append(host)
            continue
        node = record.get("node_name") or str(record.get("nodename") or host).lower()
        result.append(
            {
                "host": host,
                "node": str(node),
                "gpu_count": int(facts["gpu_count"]),
                "labels": node_labels(facts, mode, extra_labels, record.get("plugin_labels")),
                "sharing": record.get("sharing") or mode,
            }
        )
    problems = []
    if missing:
        problems.append(
            "no ansible_facts.nvidia_gpu for {}: run the GPU detection (playbooks/gpu_nodes.yml, "
            "module nvidia_gpu_facts) on these hosts in the same run".format(", ".join(missing))
        )
    if empty:
        problems.append("no NVIDIA GPU detected on {} (nvidia_gpu.present is false)".format(", ".join(empty)))
    if problems:
        raise GpuAddonsError("gpu_cluster_addons: " + "; ".join(problems))
    names = [r["node"] for r in result]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise GpuAddonsError(
            "gpu_cluster_addons: several hosts map to node {}; set gpu_cluster_addons_node_name "
            "per host".format(", ".join(dupes))
        )
    return sorted(result, key=lambda r: r["node"])


# --------------------------------------------------------------------------
# Which runtime the device plugin pods run with
# --------------------------------------------------------------------------

RUNTIME_CLASS_CHOICES = ("auto", "always", "never")


def pod_runtime_class(hosts, setting="auto", handler="nvidia"):
    """Must the device plugin pods set ``runtimeClassName: nvidia``? ``{name, reasons}``.

    The device plugin needs NVML, which only the NVIDIA container runtime puts
    in a container. Where nvidia is the default runtime of the engine a GPU
    node's kubelet uses, pods get it without asking; elsewhere (a containerd
    whose default stayed runc, an engine the container-runtime role did not
    configure, a node whose facts are missing) they must ask for the
    RuntimeClass whose handler is the nvidia runtime. One DaemonSet serves
    every GPU node, so one node that needs it is enough. The RuntimeClass is
    safe everywhere the container-runtime role ran (it declares the handler
    on every engine), so an unknown is decided for it.

    ``hosts``: records with ``host`` and ``container_runtime`` (the host's
    ``ansible_facts.nvidia_container_runtime`` or None). ``setting``: auto,
    always or never. Returns ``{"name": "nvidia" or None, "reasons": [...]}``.
    """
    if setting not in RUNTIME_CLASS_CHOICES:
        raise GpuAddonsError(
            f"gpu_cluster_addons_pod_runtime_class: {setting!r} is not one of "
            f"{', '.join(RUNTIME_CLASS_CHOICES)}"
        )
    if setting == "always":
        return {"name": handler, "reasons": ["gpu_cluster_addons_pod_runtime_class is always"]}
    if setting == "never":
        return {"name": None, "reasons": ["gpu_cluster_addons_pod_runtime_class is never"]}
    if not hosts:
        return {
            "name": handler,
            "reasons": ["no GPU host to tell whether nvidia is the default runtime of its kubelet's engine"],
        }
    needs = []
    for record in hosts:
        host, facts = record["host"], record.get("container_runtime")
        if not isinstance(facts, dict):
            needs.append(
                f"{host}: no ansible_facts.nvidia_container_runtime "
                "(playbooks/container_runtime.yml has not run on it in this run)"
            )
            continue
        engine = facts.get("kubelet_engine")
        if not engine:
            needs.append(f"{host}: the container engine of its kubelet is not known")
            continue
        default = ((facts.get("engines") or {}).get(engine) or {}).get("default_runtime")
        if default != handler:
            runs = default or "an unknown runtime"
            needs.append(f"{host}: its kubelet's engine {engine} runs {runs} by default")
    if needs:
        return {"name": handler, "reasons": needs}
    reason = f"nvidia is the default runtime of every GPU node's kubelet engine ({len(hosts)} node(s))"
    return {"name": None, "reasons": [reason]}


# --------------------------------------------------------------------------
# Where the GPU nodes' driver lives (the driver root a plugin mounts)
# --------------------------------------------------------------------------

#: The root of a driver installed on the host (in /usr): what the plugins assume when not told.
HOST_DRIVER_ROOT = "/"


def hosts_by_driver_root(records, allocation):
    """``{driver_root: [host, ...]}`` of the hosts of one allocation (``dra``, ``device-plugin``), from
    their driver facts (``nvidia_driver.driver_root``: ``/`` for a driver in ``/usr``, an image's
    ``/usr/local/nvidia``...; see gpunode.driver.roots). Hosts without the fact are left out."""
    found = {}
    for record in records:
        root = (record.get("nvidia_driver") or {}).get("driver_root")
        if record.get("allocation") == allocation and root:
            found.setdefault(str(root), []).append(record["host"])
    return {root: sorted(hosts) for root, hosts in sorted(found.items())}


def roots_text(by_root):
    """``"/ on gpu-a; /usr/local/nvidia on gpu-b, gpu-c"``."""
    return "; ".join(f"{root} on {', '.join(hosts)}" for root, hosts in by_root.items())


def device_plugin_driver_root(records, configs):
    """The NVIDIA device plugin's driver root (its ``NVIDIA_DRIVER_ROOT``, mounted at ``/driver-root``
    as NVIDIA's chart does): the ``flags.nvidiaDriverRoot`` the plugin's configs give, else the root
    the device-plugin hosts' driver facts agree on, else ``/``. One DaemonSet mounts one root: hosts
    whose drivers live in different roots, or configs that give different ones, are refused."""
    given = sorted({str(c["flags"]["nvidiaDriverRoot"]) for c in (configs or {}).values()
                    if isinstance(c.get("flags"), dict) and c["flags"].get("nvidiaDriverRoot")})
    if len(given) > 1:
        raise GpuAddonsError(
            f"the device plugin's configs give different flags.nvidiaDriverRoot ({', '.join(given)}); "
            "its one DaemonSet mounts one driver root: give one root, or none (the GPU nodes' driver "
            "facts decide)")
    if given:
        return given[0]
    by_root = hosts_by_driver_root(records, "device-plugin")
    if len(by_root) > 1:
        raise GpuAddonsError(
            f"the device plugin's GPU hosts have their drivers in different roots ({roots_text(by_root)}); "
            "its one DaemonSet mounts one driver root: allocate the hosts of all roots but one by DRA "
            "(gpu_cluster_addons_gpu_allocation: dra), or set the root in the plugin's config "
            "(flags.nvidiaDriverRoot)")
    return next(iter(by_root), HOST_DRIVER_ROOT)
