# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU-share scheduler extender in kube-scheduler's configuration: the plan of the files.

Pure logic, no Ansible: ``plan(params, read)`` reads files through ``read``
and returns what each file should become; the module writes. The parts:
``scheduler/api.py`` (API versions, the extender entry), ``config_file.py`` (the
configuration file's YAML/JSON edits), ``manifest.py`` (kubeadm's static pod
wiring), ``rke.py`` (RKE1 and RKE2).

Standard library and PyYAML (python3-yaml) only: this runs on target hosts;
modules check ``yaml_edit.YAML_IMPORT_ERROR`` before calling anything here.
"""

from ansible.module_utils.gpunode.scheduler.api import (
    DEFAULT_CONFIG_PATH,
    DEFAULT_KUBECONFIG,
    DEFAULT_MANIFEST,
    DEFAULT_RKE2_CONFIG,
    KubeSchedulerError,
    check_extender,
    parse_version,
    version_warnings,
)
from ansible.module_utils.gpunode.scheduler.config_file import read_file
from ansible.module_utils.gpunode.scheduler.manifest import plan_kubeadm
from ansible.module_utils.gpunode.scheduler.rke import (
    plan_rke2,
    plan_rke_cluster,
    plan_rke_node,
)

# ---------------------------------------------------------------- entry point


def resolve_params(params):
    """The parameters with each flavor's defaults filled in."""
    flavor = params["flavor"]
    params = dict(params)
    params["config_path"] = params.get("config_path") or DEFAULT_CONFIG_PATH[flavor]
    params["kubeconfig"] = params.get("kubeconfig") or DEFAULT_KUBECONFIG[flavor]
    params["manifest_path"] = params.get("manifest_path") or DEFAULT_MANIFEST
    params["rke2_config"] = params.get("rke2_config") or DEFAULT_RKE2_CONFIG
    return params


def _no_listdir(path):
    return []


def plan(params, read=read_file, listdir=_no_listdir):
    """What each file should become.

    Returns dict(files={path: (old or None, new or None)} (only files that change),
    api_version, config_path, warnings, wiring (kubeadm: how the manifest hands the
    scheduler its configuration)).
    """
    warnings = []
    version = parse_version(params["kubernetes_version"])
    warnings += version_warnings(version)
    flavor = params["flavor"]
    params = resolve_params(params)
    if params["state"] == "present":
        check_extender(params["extender"])
    if not params["config_path"].startswith("/"):
        raise KubeSchedulerError(f"config_path {params['config_path']}: must be an absolute path")
    wiring = None
    if flavor == "kubeadm":
        manifest_dir = params["manifest_path"].rsplit("/", 1)[0]
        if params["config_path"].rsplit("/", 1)[0] == manifest_dir:
            raise KubeSchedulerError(f"config_path {params['config_path']}: must not be in the static pod "
                                     f"directory {manifest_dir} (the kubelet would run it as a pod)")
        files, api, config_path, wiring = plan_kubeadm(params, version, read, warnings)
    elif flavor == "rke2":
        files, api, config_path = plan_rke2(params, version, read, warnings, listdir)
    elif params.get("cluster_yml"):
        files, api, config_path = plan_rke_cluster(params, version, read, warnings)
    else:
        files, api, config_path = plan_rke_node(params, version, read, warnings)
    files = {p: (old, new) for p, (old, new) in files.items() if old != new}
    return {"files": files, "api_version": api, "warnings": warnings, "config_path": config_path,
            "wiring": wiring, "version": version}
