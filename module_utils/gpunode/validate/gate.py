# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The validation gate's names: the taint that keeps an unvalidated GPU node unschedulable, and the
toleration of the components that must run there before it opens (the device plugins, the DRA
kubelet plugin, HAMi's device plugin), so that the GPUs are advertised before the gate opens.

``NoSchedule``: pods already running on a node stay; new pods without the toleration are not
placed there. The gpu_cluster_addons role (tasks/validation_gate.yml) puts the taint on GPU nodes
whose last validation did not pass and lifts it from those that passed. Standard library only.
"""

TAINT_KEY = "gpunode.io/gpu-unvalidated"
TAINT = {"key": TAINT_KEY, "effect": "NoSchedule"}
TOLERATION = {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}
