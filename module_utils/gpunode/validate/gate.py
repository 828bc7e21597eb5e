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
