# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The labels a GPU node registers with (``nvidia.com/gpu.present=true`` by default), so that what
selects GPU nodes (the Node Readiness Controller's rule, the device plugins) finds a node that joins
by itself before anything else labels it.

The kubelet puts ``--node-labels`` on its Node when it creates it; KubeletConfiguration has no field
for them, so they go where the flags go (kubelet/registration.py): ``--node-labels=k=v,...`` (a
repeated flag adds to the earlier ones: kubernetes staging/src/k8s.io/component-base/cli/flag
``MapStringString``, split at ``,``, each item ``key=value`` trimmed), RKE2's and k3s'
``node-label`` items. The operator's labels are kept; gpunode's are set, never taken out.

Standard library only; Python 3.8+ (runs on target hosts).
"""

from ansible.module_utils.gpunode.formats import k8s_names
from ansible.module_utils.gpunode.formats.values import refuse

# the namespaces the kubelet takes --node-labels in (pkg/kubelet/apis: kubeletLabelNamespaces); it
# refuses to start with another key under kubernetes.io or k8s.io
KUBELET_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


class LabelError(ValueError):
    """A ``--node-labels`` value that is not ``key=value`` pairs; the message says which."""


def check(option, labels):
    """Refuse what the kubelet would not start with: a label key or value that is none, or a key
    under kubernetes.io or k8s.io outside :data:`KUBELET_NAMESPACES`."""
    k8s_names.labels(option, labels, allow_null=False)
    for key in labels:
        prefix = key.rpartition("/")[0]
        if _under(prefix, ("kubernetes.io", "k8s.io")) and not _under(prefix, KUBELET_NAMESPACES):
            refuse(f"{option} key", key, "a label the kubelet registers with",
                   "under kubernetes.io or k8s.io only " + " or ".join(KUBELET_NAMESPACES))


def _under(prefix, namespaces):
    return any(prefix == name or prefix.endswith("." + name) for name in namespaces)


def merged(values):
    """The labels of ``--node-labels`` values in order (a later value of a key wins)."""
    labels = {}
    for value in values:
        for item in (part for part in str(value).split(",") if part):
            key, equals, text = item.partition("=")
            if not equals:
                raise LabelError(f"--node-labels={value}: {item!r} is not key=value")
            labels[key.strip()] = text.strip()
    return labels


def new_value(values, wanted):
    """The ``--node-labels`` value that holds ``values``' labels and ``wanted`` (gpunode's win), or
    None when ``wanted`` already holds."""
    labels = merged(values)
    if all(labels.get(key) == value for key, value in wanted.items()):
        return None
    labels.update(wanted)
    return ",".join(f"{key}={value}" for key, value in labels.items())
