# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""gpunode's kube-scheduler flag and volume in kubeadm's ClusterConfiguration.

``kubeadm upgrade`` writes the static pod manifests again from the
ClusterConfiguration stored in the ``kube-system/kubeadm-config`` ConfigMap
(key ``ClusterConfiguration``), so a flag added to the manifest alone is gone
after an upgrade. Recording it as ``scheduler.extraArgs`` and
``scheduler.extraVolumes`` makes kubeadm write it itself.

The shape depends on the document's apiVersion (kubeadm.k8s.io/...):

=========  =========================================  ==============================
version    scheduler.extraArgs                        kubeadm that reads it
=========  =========================================  ==============================
v1beta2    map flag -> value                          1.15-1.26 (removed in 1.27,
                                                      kubernetes/kubernetes#114540)
v1beta3    map flag -> value                          1.22-1.36; deprecated in 1.31,
                                                      removed in 1.37
                                                      (kubernetes/kubernetes#136016)
v1beta4    list of {name, value}                      1.31 on; the ConfigMap holds
                                                      v1beta4 from 1.31
                                                      (kubernetes/kubernetes#125029)
v1         list of {name, value}                      placeholder copy of v1beta4
                                                      (cmd/kubeadm/app/apis/kubeadm/
                                                      v1/types.go, ControlPlaneComponent)
=========  =========================================  ==============================

``extraVolumes`` is a list of ``{name, hostPath, mountPath, readOnly, pathType}``
in every version (HostPathMount in each version's types.go). The stored
document is edited in its own version and layout (yaml_edit), never converted.

Standard library and PyYAML only (runs on target hosts).
"""

import json

from ansible.module_utils.gpunode.scheduler.api import VOLUME_NAME, KubeSchedulerError, split_api_version
from ansible.module_utils.gpunode.scheduler.config_file import edit_text, load_mapping

GROUP = "kubeadm.k8s.io"
MAP_ARGS = ("v1beta1", "v1beta2", "v1beta3")
LIST_ARGS = ("v1beta4", "v1")
CONFIGMAP = "kube-system/kubeadm-config"
KEEP_SCHEDULER = 2  # remove_branch never removes the first two levels (scheduler.extraArgs ...)
KEY = "ClusterConfiguration"


def _where(path):
    return f"{path} ({KEY})"


def _args(path, data, list_form):
    """[(index or flag name, name, value)] of scheduler.extraArgs."""
    scheduler = data.get("scheduler") or {}
    if not isinstance(scheduler, dict):
        raise KubeSchedulerError(f"{_where(path)}: scheduler is not a mapping; left unchanged")
    args = scheduler.get("extraArgs") or ([] if list_form else {})
    if list_form and isinstance(args, list):
        return [(i, str(a.get("name")), None if a.get("value") is None else str(a.get("value")))
                for i, a in enumerate(args) if isinstance(a, dict)]
    if not list_form and isinstance(args, dict):
        return [(name, str(name), None if value is None else str(value)) for name, value in args.items()]
    shape = "a list of {name, value}" if list_form else "a mapping"
    raise KubeSchedulerError(f"{_where(path)}: scheduler.extraArgs is not {shape}; left unchanged")


def _volumes(path, data):
    volumes = (data.get("scheduler") or {}).get("extraVolumes") or []
    if not isinstance(volumes, list):
        raise KubeSchedulerError(f"{_where(path)}: scheduler.extraVolumes is not a list; left unchanged")
    return [v for v in volumes if isinstance(v, dict)]


def record_ops(path, text, wiring, config_path):
    """(ops, api_version): what the ClusterConfiguration needs to carry gpunode's wiring.

    ``wiring`` is how the manifest hands kube-scheduler its configuration
    (kube_scheduler.scheduler_wiring); only a flag pointing at ``config_path`` (the
    file gpunode manages) and gpunode's own volume are recorded: an operator's own
    flag is theirs to record. A different value already recorded for the flag is
    refused: kubeadm would write that one back at the next upgrade.
    """
    data = load_mapping(path, text)
    api = _api(path, data)
    if not wiring or wiring.get("path") != config_path or not wiring.get("flag"):
        return [], api
    list_form = api.rpartition("/")[2] in LIST_ARGS
    flag, value = wiring["flag"], wiring["path"]
    ops = []
    recorded = [item for item in _args(path, data, list_form) if item[1] == flag]
    if not recorded:
        if list_form:
            ops.append(("append", ["scheduler", "extraArgs"], {"name": flag, "value": value}))
        else:
            ops.append(("set", ["scheduler", "extraArgs", flag], value))
    elif recorded[-1][2] != value:
        raise KubeSchedulerError(
            f"{_where(path)}: scheduler.extraArgs has {flag}={recorded[-1][2]} but kube-scheduler is started "
            f"with --{flag}={value}; kubeadm upgrade would bring back {recorded[-1][2]}; left unchanged")
    volume = wiring.get("volume")
    if volume and not any(v.get("mountPath") == volume["mountPath"] for v in _volumes(path, data)):
        ops.append(("append", ["scheduler", "extraVolumes"], {
            "name": volume["name"], "hostPath": volume["hostPath"], "mountPath": volume["mountPath"],
            "readOnly": True, "pathType": volume.get("pathType") or "File"}))
    return ops, api


def forget_ops(path, text, config_path):
    """(ops, api_version) that take gpunode's flag and volume out again (state=absent).

    ``scheduler`` itself stays: left empty it is written ``scheduler: {}``, as kubeadm does.
    """
    data = load_mapping(path, text)
    api = _api(path, data)
    list_form = api.rpartition("/")[2] in LIST_ARGS
    ops = []
    for key, name, value in reversed(_args(path, data, list_form)):
        if name in ("config", "policy-config-file") and value == config_path:
            ops.append(("remove_branch", ["scheduler", "extraArgs", key], KEEP_SCHEDULER))
    volumes = (data.get("scheduler") or {}).get("extraVolumes") or []
    for index in reversed(range(len(volumes))):
        if isinstance(volumes[index], dict) and str(volumes[index].get("name", "")).startswith(VOLUME_NAME):
            ops.append(("remove_branch", ["scheduler", "extraVolumes", index], KEEP_SCHEDULER))
    return ops, api


def _api(path, data):
    if data.get("kind") != KEY:
        raise KubeSchedulerError(f"{_where(path)}: kind {data.get('kind')!r} is not {KEY}; left unchanged")
    api = str(data.get("apiVersion") or "")
    group, version = split_api_version(api)
    if group != GROUP or version not in MAP_ARGS + LIST_ARGS:
        known = ", ".join(f"{GROUP}/{v}" for v in MAP_ARGS + LIST_ARGS)
        raise KubeSchedulerError(f"{_where(path)}: apiVersion {api!r} is not one gpunode knows ({known}); "
                                 "left unchanged")
    return api


def edit(path, text, ops, *, rewrite=False, warnings):
    return edit_text(_where(path), text, ops, rewrite=rewrite, warnings=warnings) if ops else text


# ---------------------------------------------------------------- the ConfigMap

def read_configmap(output):
    """(configmap object, ClusterConfiguration text) from ``kubectl get -o json`` output."""
    try:
        configmap = json.loads(output)
    except ValueError as exc:
        raise KubeSchedulerError(f"{CONFIGMAP}: kubectl printed no JSON ({exc})") from exc
    text = ((configmap or {}).get("data") or {}).get(KEY)
    if not isinstance(text, str):
        raise KubeSchedulerError(f"{CONFIGMAP}: has no {KEY} key; is this a kubeadm cluster?")
    return configmap, text


def write_configmap(configmap, text):
    """The ConfigMap (JSON, for ``kubectl replace -f -``) with ``text`` as its ClusterConfiguration.

    Its metadata.resourceVersion is kept: the API server refuses the replace when
    someone changed the ConfigMap meanwhile, rather than losing their change.
    """
    configmap = json.loads(json.dumps(configmap))
    configmap["data"][KEY] = text
    return json.dumps(configmap)


# ---------------------------------------------------------------- the decision

def plan_record(mode, state, configmap_text, problem, *, wiring, config_path, verified, rewrite, warnings):
    """What to do with kubeadm-config's ClusterConfiguration: ``(new text or None, facts)``.

    ``mode``: record, required or skip (the module's ``kubeadm_config``); ``state``:
    present or absent; ``configmap_text``: the ClusterConfiguration, or None when it
    could not be read (``problem`` says why). The change is recorded only once the
    scheduler runs it (``verified``), so a kubeadm upgrade never writes a change that
    did not work. ``facts["state"]``: skipped, unknown, recorded, absent, deferred or
    changed.
    """
    if mode == "skip":
        return None, {"state": "skipped", "reason": "kubeadm_config=skip"}
    if configmap_text is None:
        if mode == "required":
            raise KubeSchedulerError(f"{CONFIGMAP}: cannot be read: {problem}")
        return None, {"state": "unknown", "reason": problem}
    if state == "absent":
        ops, _api = forget_ops(CONFIGMAP, configmap_text, config_path)
    else:
        ops, _api = record_ops(CONFIGMAP, configmap_text, wiring, config_path)
    if not ops:
        return None, {"state": "recorded" if state == "present" else "absent", "reason": None}
    if not verified:
        return None, {"state": "deferred", "reason": "recorded once kube-scheduler runs the change"}
    new = edit(CONFIGMAP, configmap_text, ops, rewrite=rewrite, warnings=warnings)
    return new, {"state": "changed", "reason": None}
