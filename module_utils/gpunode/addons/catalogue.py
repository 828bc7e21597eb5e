# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The manifest files of each mode of the gpu_cluster_addons role, and which to remove.

Pure Python, tested without Ansible.
"""

from ansible.module_utils.gpunode.addons.cluster import MODES, GpuAddonsError, api_versions

# The manifests of each mode: (file, template). Files sort in the order they
# must be applied; names are stable because GitOps repositories track them.
_RUNTIMECLASS = ("40-runtimeclass-nvidia.yaml", "runtimeclass-nvidia.yaml.j2")
# The Node Readiness Controller's rule (gpu_cluster_addons_readiness_rule), in every mode.
_READINESS_RULE = (
    "70-nodereadinessrule-gpunode-gpu-validated.yaml", "nodereadinessrule-gpunode-gpu-validated.yaml.j2")
_CATALOGUE = {
    "nvidia": (
        ("10-serviceaccount-nvidia-device-plugin.yaml", "serviceaccount-nvidia-device-plugin.yaml.j2"),
        ("20-configmap-nvidia-device-plugin-config.yaml", "configmap-nvidia-device-plugin-config.yaml.j2"),
        ("50-daemonset-nvidia-device-plugin.yaml", "daemonset-nvidia-device-plugin.yaml.j2"),
    ),
    "gpushare": (
        ("10-serviceaccount-gpushare-device-plugin.yaml", "serviceaccount-gpushare-device-plugin.yaml.j2"),
        ("10-serviceaccount-gpushare-schd-extender.yaml", "serviceaccount-gpushare-schd-extender.yaml.j2"),
        ("20-clusterrole-gpushare-device-plugin.yaml", "clusterrole-gpushare-device-plugin.yaml.j2"),
        ("20-clusterrole-gpushare-schd-extender.yaml", "clusterrole-gpushare-schd-extender.yaml.j2"),
        (
            "30-clusterrolebinding-gpushare-device-plugin.yaml",
            "clusterrolebinding-gpushare-device-plugin.yaml.j2",
        ),
        (
            "30-clusterrolebinding-gpushare-schd-extender.yaml",
            "clusterrolebinding-gpushare-schd-extender.yaml.j2",
        ),
        ("50-daemonset-gpushare-device-plugin.yaml", "daemonset-gpushare-device-plugin.yaml.j2"),
        ("50-deployment-gpushare-schd-extender.yaml", "deployment-gpushare-schd-extender.yaml.j2"),
        ("60-service-gpushare-schd-extender.yaml", "service-gpushare-schd-extender.yaml.j2"),
    ),
    "hami": (
        ("10-serviceaccount-hami-device-plugin.yaml", "serviceaccount-hami-device-plugin.yaml.j2"),
        ("10-serviceaccount-hami-scheduler.yaml", "serviceaccount-hami-scheduler.yaml.j2"),
        ("20-clusterrole-hami-device-plugin.yaml", "clusterrole-hami-device-plugin.yaml.j2"),
        ("20-clusterrole-hami-scheduler.yaml", "clusterrole-hami-scheduler.yaml.j2"),
        ("20-configmap-hami-device-plugin.yaml", "configmap-hami-device-plugin.yaml.j2"),
        ("20-configmap-hami-scheduler-device.yaml", "configmap-hami-scheduler-device.yaml.j2"),
        ("30-clusterrolebinding-hami-device-plugin.yaml", "clusterrolebinding-hami-device-plugin.yaml.j2"),
        ("30-clusterrolebinding-hami-scheduler.yaml", "clusterrolebinding-hami-scheduler.yaml.j2"),
        ("50-daemonset-hami-device-plugin.yaml", "daemonset-hami-device-plugin.yaml.j2"),
        ("50-deployment-hami-scheduler.yaml", "deployment-hami-scheduler.yaml.j2"),
        ("60-service-hami-scheduler.yaml", "service-hami-scheduler.yaml.j2"),
    ),
}
# Files a mode has only with an option (manifest_plan's ``options``): the NVIDIA
# plugin's config-manager reads its node's label (named configs), its MPS
# control daemon (a config shares by MPS); HAMi's scheduler configuration,
# for its own kube-scheduler (deployment) or for the cluster's (extender).
_OPTIONAL = {
    "nvidia-named": (
        ("20-clusterrole-nvidia-device-plugin.yaml", "clusterrole-nvidia-device-plugin.yaml.j2"),
        (
            "30-clusterrolebinding-nvidia-device-plugin.yaml",
            "clusterrolebinding-nvidia-device-plugin.yaml.j2",
        ),
    ),
    "nvidia-mps": (
        ("50-daemonset-nvidia-mps-control-daemon.yaml", "daemonset-nvidia-mps-control-daemon.yaml.j2"),
    ),
    "hami-deployment": (
        ("20-configmap-hami-scheduler.yaml", "configmap-hami-scheduler.yaml.j2"),
        ("30-clusterrolebinding-hami-scheduler-kube.yaml", "clusterrolebinding-hami-scheduler-kube.yaml.j2"),
        (
            "30-clusterrolebinding-hami-scheduler-volume.yaml",
            "clusterrolebinding-hami-scheduler-volume.yaml.j2",
        ),
    ),
    # HAMi's admission webhook; rendered to files, HAMi's own certificate Jobs make its
    # Secret and patch its caBundle (the chart's scheduler/job-patch/), so no key is rendered.
    "hami-webhook": (
        (
            "60-mutatingwebhookconfiguration-hami-webhook.yaml",
            "mutatingwebhookconfiguration-hami-webhook.yaml.j2",
        ),
    ),
    "hami-certgen": (
        ("10-serviceaccount-hami-admission.yaml", "serviceaccount-hami-admission.yaml.j2"),
        ("20-clusterrole-hami-admission.yaml", "clusterrole-hami-admission.yaml.j2"),
        ("20-role-hami-admission.yaml", "role-hami-admission.yaml.j2"),
        ("30-clusterrolebinding-hami-admission.yaml", "clusterrolebinding-hami-admission.yaml.j2"),
        ("30-rolebinding-hami-admission.yaml", "rolebinding-hami-admission.yaml.j2"),
        ("50-job-hami-admission-create.yaml", "job-hami-admission-create.yaml.j2"),
        ("70-job-hami-admission-patch.yaml", "job-hami-admission-patch.yaml.j2"),
    ),
    "hami-extender": (
        ("20-configmap-hami-kube-scheduler-extender.yaml", "configmap-hami-kube-scheduler-extender.yaml.j2"),
    ),
}


def manifest_plan(mode, kubernetes_version, runtime_class=True, options=(), readiness_rule=False):
    """``{"present": [{file, template}], "absent": [{file, template}]}``.

    ``present``: the files of ``mode`` in apply order, with those of its
    ``options`` (keys of ``_OPTIONAL`` such as ``nvidia-named``); ``absent``:
    every other file any mode or option renders (the modes are exclusive:
    switching removes the others' objects; turning an option off removes its
    files). The RuntimeClass belongs to every mode; with ``runtime_class``
    false it is in neither list: pods may use it, so gpunode stops managing
    it but never deletes it. The readiness rule belongs to every mode, in ``present`` with
    ``readiness_rule``, else in ``absent``.
    """
    if mode not in MODES:
        raise GpuAddonsError(f"gpu_cluster_addons_mode: {mode!r} is not one of {', '.join(MODES)}")
    apis = api_versions(kubernetes_version)
    if mode == "dra":  # its device-plugin pools run nvidia's files; the DRA half: gpunode/addons/dra.py
        mode = "nvidia"
    present = list(_CATALOGUE.get(mode, ()))
    for key in sorted(set(options or ())):
        if key.split("-", 1)[0] == mode:
            present.extend(_OPTIONAL.get(key, ()))
    everything = [entry for files in _CATALOGUE.values() for entry in files]
    everything += [entry for files in _OPTIONAL.values() for entry in files] + [_READINESS_RULE]
    if readiness_rule:
        present.append(_READINESS_RULE)
    names = {entry[0] for entry in present}
    absent = sorted({entry for entry in everything if entry[0] not in names})
    if runtime_class and apis["runtimeclass"]:
        present.append(_RUNTIMECLASS)
    present.sort()
    return {
        "present": [{"file": f, "template": t} for f, t in present],
        "absent": [{"file": f, "template": t} for f, t in absent],
    }
