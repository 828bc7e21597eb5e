#!/usr/bin/python
"""Ansible module kube_scheduler_extender: add a scheduler extender to kube-scheduler."""

import os
import shutil
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.kube_scheduler import (
    DEFAULT_MANIFEST,
    DEFAULT_RKE2_CONFIG,
    KubeSchedulerError,
    plan,
    scheduler_pids,
)
from ansible.module_utils.text_file import write_text

DOCUMENTATION = r"""
---
module: kube_scheduler_extender
short_description: Add a scheduler extender (GPU share) to kube-scheduler on kubeadm, RKE1 or RKE2
description:
  - Writes the extender into a kube-scheduler configuration file and starts the
    scheduler with it. Kubernetes 1.18 and older get a legacy Policy file and
    C(--policy-config-file); 1.19 and newer a KubeSchedulerConfiguration and
    C(--config), in the apiVersion the version prefers (v1beta1 for 1.19-1.21,
    v1beta2 for 1.22, v1beta3 for 1.23-1.24, v1 from 1.25).
  - A scheduler already started with its own C(--config) or C(--policy-config-file)
    keeps that flag; the extender is merged into that file (other extenders,
    profiles and fields kept). A file in an apiVersion the version no longer
    serves is moved to a served one when only portable fields are in it, and
    refused (naming the file and the fields) otherwise. A Policy file on 1.23+ is refused.
  - kubeadm (O(flavor=kubeadm)) - the static pod manifest gets the flag, a hostPath
    volume and a read-only mount, spliced into the text so comments, indentation
    and every other flag, probe and volume stay. Nothing but the manifest itself
    is ever written into the static pod directory (the temp file is made in its
    parent directory and renamed into place; backups go to O(backup_dir)).
  - When C(--config) is added, the meaning of flags the scheduler then ignores
    (C(--kubeconfig), C(--leader-elect*), C(--profiling), C(--kube-api-*), and on
    1.19-1.22 C(--port=0) as C(healthzBindAddress)/C(metricsBindAddress) C(0.0.0.0:0))
    is written into the new file.
  - RKE1 (O(flavor=rke)) - with O(cluster_yml) (on the RKE admin host) sets
    C(services.scheduler.extra_args.config) in cluster.yml and returns the config path;
    without it (on a control-plane node) writes the config file there.
  - RKE2 (O(flavor=rke2)) - adds C(config=...) to C(kube-scheduler-arg) and the file to
    C(kube-scheduler-extra-mount) in O(rke2_config), and writes the config file.
  - O(state=absent) takes the extender out again; the flag, volume, mount and file
    are removed only when this module created the file (a marker comment on its
    first line) and nothing else was added to it since.
  - Malformed files fail with the path and the problem and are left untouched.
version_added: "1.0.0"
options:
  flavor:
    description: How the cluster runs kube-scheduler.
    type: str
    choices: [kubeadm, rke, rke2]
    default: kubeadm
  kubernetes_version:
    description: The cluster's Kubernetes version (C(1.29.2), C(v1.29.2), C(v1.28.9+rke2r1)).
    type: str
    required: true
  extender:
    description: The extender.
    type: dict
    default: {}
    suboptions:
      url_prefix:
        description: URL prefix of the extender service.
        type: str
        default: http://127.0.0.1:32766/gpushare-scheduler
      filter_verb:
        description: Verb for the filter call.
        type: str
        default: filter
      bind_verb:
        description: Verb for the bind call; empty for an extender that does not bind.
        type: str
        default: bind
      enable_https:
        description: Call the extender over HTTPS.
        type: bool
        default: false
      node_cache_capable:
        description: The extender caches node information (gets node names only).
        type: bool
        default: true
      ignorable:
        description: Scheduling goes on when the extender fails.
        type: bool
        default: false
      managed_resources:
        description: Extended resources the extender manages.
        type: list
        elements: dict
        default: [{name: aliyun.com/gpu-mem, ignored_by_scheduler: false}]
        suboptions:
          name:
            description: Resource name.
            type: str
            required: true
          ignored_by_scheduler:
            description: kube-scheduler does not check this resource itself.
            type: bool
            default: false
  config_path:
    description:
      - The configuration file to write when the scheduler has none yet. Default
        C(/etc/kubernetes/scheduler-extender-config.yaml);
        C(/etc/rancher/rke2/scheduler-extender-config.yaml) for RKE2.
    type: path
  manifest_path:
    description: The kube-scheduler static pod manifest (kubeadm).
    type: path
    default: /etc/kubernetes/manifests/kube-scheduler.yaml
  kubeconfig:
    description:
      - C(clientConnection.kubeconfig) for a new KubeSchedulerConfiguration (kube-scheduler
        ignores C(--kubeconfig) with C(--config)). A C(--kubeconfig) flag in the manifest, or
        a value already in the file, wins. Default per flavor - kubeadm
        C(/etc/kubernetes/scheduler.conf), RKE1 C(/etc/kubernetes/ssl/kubecfg-kube-scheduler.yaml),
        RKE2 C(/var/lib/rancher/rke2/server/cred/scheduler.kubeconfig).
    type: path
  cluster_yml:
    description: RKE1 cluster.yml to edit (run this on the RKE admin host).
    type: path
  rke2_config:
    description: RKE2 server configuration file.
    type: path
    default: /etc/rancher/rke2/config.yaml
  state:
    description: Whether the extender is configured.
    type: str
    choices: [present, absent]
    default: present
  backup:
    description: Copy each file into O(backup_dir) before changing it.
    type: bool
    default: false
  restore:
    description:
      - Roll back instead of configuring - a map of file to the backup to put back (as
        O(backup) made it and RV(backup_files) returned it), or to null for a file this
        module created, which is removed. The other options are then ignored except
        O(manifest_path) (temp files are never made in its directory).
      - Roles use it when kube-scheduler does not come back healthy after a change.
    type: dict
  backup_dir:
    description:
      - Where backups go; never inside the static pod directory. Default
        C(/etc/kubernetes/gpunode-backups) (C(/etc/rancher/rke2/gpunode-backups) for RKE2,
        the directory of O(cluster_yml) for RKE1 on the admin host).
    type: path
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
author: gpunode
"""

EXAMPLES = r"""
- name: Add the GPU share scheduler extender (kubeadm)
  kube_scheduler_extender:
    kubernetes_version: "1.29.2"
    backup: true

- name: Point RKE at a scheduler config (on the RKE admin host)
  kube_scheduler_extender:
    flavor: rke
    kubernetes_version: v1.26.8-rancher1-1
    cluster_yml: /home/rke/cluster.yml

- name: RKE2 server
  kube_scheduler_extender:
    flavor: rke2
    kubernetes_version: v1.28.9+rke2r1
"""

RETURN = r"""
changed:
  description: Whether any file was (or in check mode would be) changed.
  returned: always
  type: bool
api_version:
  description:
    - The apiVersion of the configuration written or merged into, C(Policy) for a Policy file.
    - Null for O(state=absent).
  returned: always
  type: str
  sample: kubescheduler.config.k8s.io/v1
files:
  description: The files changed (or, in check mode, that would change).
  returned: always
  type: list
  elements: str
  sample: [/etc/kubernetes/scheduler-extender-config.yaml, /etc/kubernetes/manifests/kube-scheduler.yaml]
config_path:
  description:
    - The configuration file kube-scheduler reads (an existing one it was started with, or O(config_path)).
  returned: always
  type: str
  sample: /etc/kubernetes/scheduler-extender-config.yaml
backup_files:
  description: Backup path for each file backed up.
  returned: always
  type: dict
  sample:
    /etc/kubernetes/manifests/kube-scheduler.yaml: /etc/kubernetes/gpunode-backups/kube-scheduler.yaml.2024~
rollback:
  description:
    - With O(backup=true), what to pass to O(restore) to undo this change - each file
      changed mapped to its backup, or to null for a file this run created.
  returned: when O(backup=true)
  type: dict
scheduler_pids:
  description:
    - PIDs of the kube-scheduler processes running just before the files changed. Until the kubelet
      (or rke2-server) replaces them, the old scheduler keeps answering its health endpoint, so a
      health check must first wait for them to be gone.
  returned: when files changed
  type: list
  elements: int
  sample: [2314]
diff:
  description: Text before and after, one entry per file.
  returned: when diff mode is on
  type: list
  elements: dict
"""

EXTENDER_SPEC = {
    "url_prefix": {"type": "str", "default": "http://127.0.0.1:32766/gpushare-scheduler"},
    "filter_verb": {"type": "str", "default": "filter"},
    "bind_verb": {"type": "str", "default": "bind"},
    "enable_https": {"type": "bool", "default": False},
    "node_cache_capable": {"type": "bool", "default": True},
    "ignorable": {"type": "bool", "default": False},
    "managed_resources": {
        "type": "list",
        "elements": "dict",
        "default": [{"name": "aliyun.com/gpu-mem", "ignored_by_scheduler": False}],
        "options": {
            "name": {"type": "str", "required": True},
            "ignored_by_scheduler": {"type": "bool", "default": False},
        },
    },
}
ARGUMENT_SPEC = {
    "flavor": {"type": "str", "choices": ["kubeadm", "rke", "rke2"], "default": "kubeadm"},
    "kubernetes_version": {"type": "str", "required": True},
    "extender": {"type": "dict", "default": {}, "options": EXTENDER_SPEC, "apply_defaults": True},
    "config_path": {"type": "path"},
    "manifest_path": {"type": "path", "default": DEFAULT_MANIFEST},
    "kubeconfig": {"type": "path"},
    "cluster_yml": {"type": "path"},
    "rke2_config": {"type": "path", "default": DEFAULT_RKE2_CONFIG},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "backup": {"type": "bool", "default": False},
    "backup_dir": {"type": "path"},
    "restore": {"type": "dict"},
}


def build_module():
    return AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


def _inside(path, directory):
    path, directory = os.path.realpath(path), os.path.realpath(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def backup_dir_for(params):
    if params["backup_dir"]:
        return params["backup_dir"]
    if params["flavor"] == "rke2":
        return "/etc/rancher/rke2/gpunode-backups"
    if params["flavor"] == "rke" and params["cluster_yml"]:
        return os.path.dirname(os.path.abspath(params["cluster_yml"]))
    return "/etc/kubernetes/gpunode-backups"


def make_backup(path, directory):
    os.makedirs(directory, mode=0o700, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target = os.path.join(directory, f"{os.path.basename(path)}.{stamp}~")
    n = 1
    while os.path.exists(target):
        n += 1
        target = os.path.join(directory, f"{os.path.basename(path)}.{stamp}.{n}~")
    shutil.copy2(path, target)
    return target


def _write(path, text, static_dir):
    tmp_dir = None
    if _inside(os.path.dirname(path), static_dir):
        # never a temp file inside the static pod directory: make it one level up
        tmp_dir = os.path.dirname(os.path.dirname(os.path.abspath(path)))
    write_text(path, text, new_file_mode=0o600, tmp_dir=tmp_dir)


def restore(module, static_dir):
    """Put backups back (null: remove the file); returns the result."""
    wanted = {}
    for path, backup in module.params["restore"].items():
        if backup is None:
            wanted[path] = None
            continue
        try:
            with open(backup, encoding="utf-8", newline="") as handle:
                wanted[path] = handle.read()
        except OSError as exc:
            module.fail_json(msg=f"{backup}: cannot read the backup of {path}: {exc.strerror}")
    changed = []
    for path, text in wanted.items():
        try:
            with open(path, encoding="utf-8", newline="") as handle:
                current = handle.read()
        except FileNotFoundError:
            current = None
        if current != text:
            changed.append(path)
            if module.check_mode:
                continue
            if text is None:
                os.unlink(path)
            else:
                _write(path, text, static_dir)
    return {
        "changed": bool(changed),
        "files": sorted(changed),
        "api_version": None,
        "backup_files": {},
        "config_path": module.params["config_path"],
    }


def run(module):
    params = module.params
    static_dir = os.path.dirname(params["manifest_path"])
    backup_dir = backup_dir_for(params)
    if params["restore"] is not None:
        return restore(module, static_dir)
    if params["flavor"] == "kubeadm" and _inside(backup_dir, static_dir):
        module.fail_json(
            msg=f"backup_dir {backup_dir}: inside the static pod directory {static_dir}; "
            "the kubelet would run a backup as a pod"
        )
    try:
        result = plan(params)
    except KubeSchedulerError as exc:
        module.fail_json(msg=str(exc))
    for warning in result["warnings"]:
        module.warn(warning)
    files = result["files"]
    out = {
        "changed": bool(files),
        "api_version": result["api_version"],
        "files": sorted(files),
        "config_path": result["config_path"],
        "backup_files": {},
    }
    if module._diff:
        out["diff"] = [
            {"before_header": path, "after_header": path, "before": old or "", "after": new or ""}
            for path, (old, new) in files.items()
        ]
    if module.check_mode or not files:
        return out
    out["scheduler_pids"] = scheduler_pids()
    manifest = params["manifest_path"]
    # present: the config exists before the scheduler is pointed at it; absent: the reverse
    order = sorted(files, key=lambda p: (p == manifest) == (params["state"] == "present"))
    for path in order:
        old, new = files[path]
        if params["backup"] and old is not None:
            out["backup_files"][path] = make_backup(path, backup_dir)
        if params["backup"]:
            out.setdefault("rollback", {})[path] = out["backup_files"].get(path)
        if new is None:
            os.unlink(path)
            continue
        _write(path, new, static_dir)
    return out


def main():
    module = build_module()
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
