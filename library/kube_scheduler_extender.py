#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module kube_scheduler_extender: add a scheduler extender to kube-scheduler."""

DOCUMENTATION = r"""
---
module: kube_scheduler_extender
short_description: Add a scheduler extender (GPU share) to kube-scheduler on kubeadm, RKE1 or RKE2
description:
  - One call decides everything about kube-scheduler on this host - how it runs (O(flavor)), its
    Kubernetes version, the files that carry the extender, and whether the running scheduler
    carries what those files say - writes what differs, and publishes
    C(ansible_facts.gpushare_scheduler). A converged host costs this one call.
  - Kubernetes 1.18 and older get a legacy Policy file and C(--policy-config-file); 1.19 and newer
    a KubeSchedulerConfiguration and C(--config), in the apiVersion that version prefers (v1beta1
    for 1.19-1.21, v1beta2 for 1.22, v1beta3 for 1.23-1.24, v1 from 1.25; only v1 is served from
    1.29 on). A version newer than the table gets v1 and a warning naming the table's last version.
  - A scheduler already started with its own C(--config) or C(--policy-config-file) keeps that flag;
    the extender is merged into that file (other extenders, profiles and fields kept). A file in an
    apiVersion the version no longer serves is moved to a served one when only portable fields are
    in it, and refused (naming the file and the fields) otherwise. A Policy file on 1.23+ is refused.
  - Files are edited in place - comments, quoting, indentation and every other flag, probe, volume
    and key are kept. A file that cannot be edited that way is refused, naming it, unless
    O(allow_rewrite) is set.
  - kubeadm - the static pod manifest gets the flag, a hostPath volume and a read-only mount. Nothing
    but the manifest itself is ever written into the static pod directory. With O(kubeadm_config),
    the flag and volume are also recorded in the C(kube-system/kubeadm-config) ConfigMap's
    ClusterConfiguration (C(scheduler.extraArgs), C(scheduler.extraVolumes), in the document's own
    apiVersion), so that C(kubeadm upgrade) writes them again; this happens once the running
    scheduler carries the change (a second call after the health check), never before.
  - RKE1 - with O(cluster_yml) (on the RKE admin host) sets C(services.scheduler.extra_args.config)
    in cluster.yml and reports whether C(rke up) still has to apply it (RV(rke_up_pending)); without
    it (on a control-plane node) writes the configuration file there.
  - RKE2 - adds C(config=...) to C(kube-scheduler-arg) and the file to C(kube-scheduler-extra-mount)
    in the RKE2 configuration (config.yaml, or the drop-in of config.yaml.d that sets the list), and
    writes the configuration file.
  - The running scheduler is compared with the files on every call, not only after a write - its
    command line against the manifest (or the RKE flag), its start time against the files'
    modification times, and its health endpoint. RV(restart) says what has to happen (for the
    C(verified_restart) module); after an interrupted run the files of the unverified change are
    offered for rollback.
  - O(state=absent) takes the extender out again; the flag, volume, mount and file are removed only
    when this module created the file (a marker comment on its first line) and nothing else was
    added to it since.
  - Malformed files fail with the path and the problem and are left untouched.
version_added: "1.0.0"
requirements:
  - PyYAML (the distribution's python3-yaml) on the managed node
options:
  flavor:
    description:
      - How the cluster runs kube-scheduler. V(auto) detects it - kubeadm when O(manifest_path) exists,
        RKE2 when the directory of O(rke2_config) exists, RKE1 with O(cluster_yml) or on a node that has
        RKE's scheduler kubeconfig.
    type: str
    choices: [auto, kubeadm, rke, rke2]
    default: kubeadm
  kubernetes_version:
    description:
      - The cluster's Kubernetes version (C(1.29.2), C(v1.29.2), C(v1.28.9+rke2r1)).
      - Empty - detected from what is there, and RV(version_source) says from what. kubeadm - the tag
        of the kube-scheduler image in the manifest, else the running scheduler's binary
        (C(/proc/PID/exe --version), for a digest-pinned image), else kubeadm's records
        (the kubeadm-config ConfigMap, C(/etc/kubernetes/kubeadm-config.yaml)). RKE2 - C(rke2 --version),
        else the running binary. RKE1 - cluster.yml's C(kubernetes_version) (admin host), the running
        binary (node).
    type: str
  extender:
    description: The extender.
    type: dict
    default: {}
    suboptions:
      url_prefix:
        description:
          - URL prefix of the extender service - an http:// or https:// URL with a host, of RFC 3986
            characters (no whitespace or quotes).
        type: str
        default: http://127.0.0.1:32766/gpushare-scheduler
      filter_verb:
        description: Verb for the filter call - one URL path segment (letters, digits, C(. _ ~ -)).
        type: str
        default: filter
      bind_verb:
        description: Verb for the bind call (a URL path segment, as O(extender.filter_verb)); empty for none.
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
            description: An extended resource name, C(domain/name) outside C(kubernetes.io).
            type: str
            required: true
          ignored_by_scheduler:
            description: kube-scheduler does not check this resource itself.
            type: bool
            default: false
      replaces:
        description:
          - URL prefixes of extenders this one replaces (another GPU-sharing mode's, e.g. gpushare's when
            HAMi's goes in); with O(state=present) they are taken out of the configuration in the same edit.
        type: list
        elements: str
        default: []
  config_path:
    description:
      - The configuration file to write when the scheduler has none yet. Default
        C(/etc/kubernetes/scheduler-extender-config.yaml);
        C(/etc/rancher/rke2/scheduler-extender-config.yaml) for RKE2.
      - It becomes a flag value (C(--config=PATH)) and half of RKE2's C(PATH:PATH:ro) mount, so it is
        an absolute path of letters, digits and C(. _ - + @ ~ /) only; anything else fails before any read.
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
      - An absolute path of letters, digits and C(. _ - + @ ~ /) only.
    type: path
  cluster_yml:
    description: RKE1 cluster.yml to edit (run this on the RKE admin host).
    type: path
  rke2_config:
    description: RKE2 server configuration file (its C(.d) drop-ins are read too).
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
  backup_dir:
    description:
      - Where backups go; never inside the static pod directory. Default
        C(/etc/kubernetes/gpunode-backups) (C(/etc/rancher/rke2/gpunode-backups) for RKE2,
        the directory of O(cluster_yml) for RKE1 on the admin host).
    type: path
  allow_rewrite:
    description:
      - A file that cannot be edited in place (keeping its comments and layout) is re-written
        as a whole from its parsed content, with a warning, instead of being refused.
    type: bool
    default: false
  kubeadm_config:
    description:
      - Record the flag and volume in the C(kube-system/kubeadm-config) ConfigMap (kubeadm), so that
        C(kubeadm upgrade) keeps them. V(auto) - when O(kubectl) and O(admin_kubeconfig) are there and
        the API server answers, else a warning; V(required) - fail when it cannot be done; V(skip) - never.
    type: str
    choices: [auto, required, skip]
    default: auto
  kubectl:
    description: The kubectl binary (default - found on the PATH).
    type: path
  admin_kubeconfig:
    description: The kubeconfig kubectl uses for the kubeadm-config ConfigMap.
    type: path
    default: /etc/kubernetes/admin.conf
  health_url:
    description:
      - kube-scheduler's health endpoint, checked when nothing else says it must restart; empty - never.
    type: str
    default: https://127.0.0.1:10259/healthz
  health_validate_certs:
    description: Check the health endpoint's certificate (kube-scheduler's own is self-signed).
    type: bool
    default: false
  proc_root:
    description: Where the processes are read (C(/proc)); tests point it at a fake tree.
    type: path
    default: /proc
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
notes:
  - A file that is a symbolic link (also relative, or a chain of links) is followed; the file at
    the end of the link is edited and the link kept; a backup holds that file's content; --diff
    headers read C(link -> target). A link to a file that does not exist yet gets that file
    created (as with template follow=yes); a link into a folder that does not exist, or a link
    loop, fails naming the link.
  - With O(state=absent), a configuration file to remove that is a symbolic link is the
    operator's, so the module fails naming it and removes neither the link nor its target.
attributes:
  platform:
    platforms: posix
  check_mode:
    support: full
  diff_mode:
    support: full
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Add the GPU share scheduler extender (kubeadm; version detected)
  kube_scheduler_extender:
    backup: true

- name: Point RKE at a scheduler config (on the RKE admin host)
  kube_scheduler_extender:
    flavor: rke
    cluster_yml: /home/rke/cluster.yml

- name: RKE2 server
  kube_scheduler_extender:
    flavor: rke2
    kubernetes_version: v1.28.9+rke2r1
"""

RETURN = r"""
changed:
  description: Whether any file (or the kubeadm-config ConfigMap) was, or in check mode would be, changed.
  returned: always
  type: bool
api_version:
  description:
    - The apiVersion of the configuration written or merged into, C(Policy) for a Policy file.
    - Null for O(state=absent), and for cluster.yml pointing at a file of the operator's.
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
flavor:
  description: How kube-scheduler runs here (O(flavor), or what V(auto) found).
  returned: always
  type: str
  sample: kubeadm
kubernetes_version:
  description: The Kubernetes version the configuration was written for.
  returned: always
  type: str
  sample: 1.29.2
version_source:
  description: Where RV(kubernetes_version) came from.
  returned: always
  type: str
  sample: "/proc/2314/exe --version (kube-scheduler PID 2314)"
backup_files:
  description: Backup path for each file backed up.
  returned: always
  type: dict
  sample:
    /etc/kubernetes/manifests/kube-scheduler.yaml: /etc/kubernetes/gpunode-backups/kube-scheduler.yaml.2024~
restart_required:
  description: Whether kube-scheduler must be restarted (or waited for) to run what its files say.
  returned: always
  type: bool
restart:
  description:
    - Null when the running kube-scheduler carries what the files say and is healthy. Otherwise what
      has to happen, shaped for the C(verified_restart) module - C(reason); C(unit), a systemd unit to
      restart (C(rke2-server)) or null; C(stop), PIDs to stop (what runs them starts them again);
      C(wait_for_exit), PIDs that must be gone before health counts; C(restore), the files to put back
      ({path, backup}) when it does not come back healthy (this run's change, or an earlier
      unverified one); C(pending), a change that waits for someone else (C(rke up)).
  returned: always
  type: dict
changes:
  description: One short line per change, for the run's summary.
  returned: always
  type: list
  elements: str
  sample:
    - "kube-scheduler: extender http://127.0.0.1:32766/gpushare-scheduler (kubescheduler.config.k8s.io/v1)"
kubeadm_config:
  description:
    - kubeadm only - C(state) of the record in the kubeadm-config ConfigMap (C(recorded), C(changed),
      C(deferred) until the scheduler runs the change, C(skipped), C(unknown)) and C(reason).
  returned: when flavor is kubeadm
  type: dict
rke_up_pending:
  description:
    - RKE1 admin host - what C(rke up) has not applied yet (cluster.yml against its C(.rkestate)),
      as reasons; an empty list when it is up to date; null when there is no state file.
  returned: with O(cluster_yml)
  type: list
  elements: str
ansible_facts:
  description:
    - C(gpushare_scheduler) - flavor, kubernetes_version, version_source, api_version, config_path,
      state (C(present), C(absent), or C(pending) while the scheduler does not run it yet), waiting_for
      (C(rke up), or null), and on the RKE admin host rke_up_pending.
  returned: always
  type: dict
diff:
  description: Text before and after, one entry per file (and the ConfigMap's ClusterConfiguration).
  returned: when diff mode is on
  type: list
  elements: dict
"""

import copy
import json
import os
import shutil
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.gpunode.common import k8s_names, values
from ansible.module_utils.gpunode.common.commands import C_LOCALE
from ansible.module_utils.gpunode.common.service_health import probe_url
from ansible.module_utils.gpunode.common.text_file import (
    check_removable,
    fsync_directory,
    resolved_path,
    shown_path,
    write_text,
)
from ansible.module_utils.gpunode.common.yaml_edit import YAML_IMPORT_ERROR
from ansible.module_utils.gpunode.scheduler.config import (
    DEFAULT_MANIFEST,
    DEFAULT_RKE2_CONFIG,
    KubeSchedulerError,
    load_yaml,
    parse_manifest,
    plan,
    read_file,
    resolve_params,
    rke2_files,
    rke_state_path,
    rke_up_pending,
)
from ansible.module_utils.gpunode.scheduler.kubeadm_config import (
    CONFIGMAP,
    KEY,
    plan_record,
    read_configmap,
    write_configmap,
)
from ansible.module_utils.gpunode.scheduler.node import (
    RKE2_BINARIES,
    binary_version,
    change_lines,
    detect_flavor,
    detect_version,
    digest,
    journal_entries,
    processes,
    restart_plan,
    scheduler_facts,
    tag_version,
)

EXTENDER_SPEC = {
    "url_prefix": {"type": "str", "default": "http://127.0.0.1:32766/gpushare-scheduler"},
    "filter_verb": {"type": "str", "default": "filter"},
    "bind_verb": {"type": "str", "default": "bind"},
    "enable_https": {"type": "bool", "default": False},
    "node_cache_capable": {"type": "bool", "default": True},
    "ignorable": {"type": "bool", "default": False},
    "managed_resources": {
        "type": "list", "elements": "dict",
        "default": [{"name": "aliyun.com/gpu-mem", "ignored_by_scheduler": False}],
        "options": {"name": {"type": "str", "required": True},
                    "ignored_by_scheduler": {"type": "bool", "default": False}},
    },
    "replaces": {"type": "list", "elements": "str", "default": []},
}
ARGUMENT_SPEC = {
    "flavor": {"type": "str", "choices": ["auto", "kubeadm", "rke", "rke2"], "default": "kubeadm"},
    "kubernetes_version": {"type": "str"},
    "extender": {"type": "dict", "default": {}, "options": EXTENDER_SPEC, "apply_defaults": True},
    "config_path": {"type": "path"},
    "manifest_path": {"type": "path", "default": DEFAULT_MANIFEST},
    "kubeconfig": {"type": "path"},
    "cluster_yml": {"type": "path"},
    "rke2_config": {"type": "path", "default": DEFAULT_RKE2_CONFIG},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "backup": {"type": "bool", "default": False},
    "backup_dir": {"type": "path"},
    "allow_rewrite": {"type": "bool", "default": False},
    "kubeadm_config": {"type": "str", "choices": ["auto", "required", "skip"], "default": "auto"},
    "kubectl": {"type": "path"},
    "admin_kubeconfig": {"type": "path", "default": "/etc/kubernetes/admin.conf"},
    "health_url": {"type": "str", "default": "https://127.0.0.1:10259/healthz"},
    "health_validate_certs": {"type": "bool", "default": False},
    "proc_root": {"type": "path", "default": "/proc"},
}
# The syntax of each value that lands in a file or on kube-scheduler's command line, checked
# before anything is read: config_path is a flag value (--config=PATH, RKE2's config=PATH) and
# half of RKE2's "PATH:PATH:ro" mount; the extender's fields go into its configuration and
# its URLs (urlPrefix + "/" + verb); managedResources are extended resource names.
VALUE_RULES = {
    "extender.url_prefix": values.http_url,
    "extender.filter_verb": values.url_segment,
    "extender.bind_verb": values.optional(values.url_segment),
    "extender.managed_resources[].name": k8s_names.extended_resource_name,
    "config_path": values.word_path,
    "kubeconfig": values.word_path,
    "manifest_path": values.path,
    "cluster_yml": values.path,
    "rke2_config": values.path,
    "backup_dir": values.path,
    "kubectl": values.command,
    "admin_kubeconfig": values.path,
    "health_url": values.optional(values.http_url),
    "proc_root": values.path,
}
JOURNAL = "gpunode-scheduler-unverified.json"
PACKAGES = {"PyYAML": "python3-yaml"}


def build_module():
    # a copy: AnsibleModule fills the suboption defaults into the dict default of `extender`
    # itself, which would change ARGUMENT_SPEC for every later module in this process
    return AnsibleModule(argument_spec=copy.deepcopy(ARGUMENT_SPEC), supports_check_mode=True)


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
    shutil.copy2(resolved_path(path), target)  # a link: its target's content, never a link
    return target


def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


class Node:
    """The host side: files, processes, commands."""

    def __init__(self, module):
        self.module = module
        self.params = module.params

    def run(self, argv, data=None):
        return self.module.run_command(argv, environ_update=C_LOCALE, data=data, binary_data=data is not None)

    def schedulers(self):
        return processes("kube-scheduler", self.params["proc_root"])

    def rke2_server(self):
        servers = [p for p in processes("rke2", self.params["proc_root"]) if p.argv[1:2] == ["server"]]
        return servers[0] if servers else None

    def rke2_version(self):
        binary = self.module.get_bin_path("rke2", opt_dirs=[os.path.dirname(b) for b in RKE2_BINARIES])
        if not binary:
            return None
        rc, out, _err = self.run([binary, "--version"])
        return out if rc == 0 else None

    def kubectl(self):
        return self.params["kubectl"] or self.module.get_bin_path("kubectl")

    def get_kubeadm_config(self):
        """((configmap, ClusterConfiguration text), None), or (None, why it cannot be read)."""
        kubectl, admin = self.kubectl(), self.params["admin_kubeconfig"]
        if not kubectl:
            return None, "kubectl is not installed"
        if not os.path.exists(admin):
            return None, f"{admin} does not exist"
        rc, out, err = self.run([kubectl, "--kubeconfig", admin, "--namespace", "kube-system",
                                 "get", "configmap", "kubeadm-config", "--output", "json"])
        if rc != 0:
            return None, f"kubectl get configmap kubeadm-config: {(err or out).strip()}"
        try:
            return read_configmap(out), None
        except KubeSchedulerError as exc:
            return None, str(exc)

    def replace_kubeadm_config(self, configmap, text):
        kubectl, admin = self.kubectl(), self.params["admin_kubeconfig"]
        body = write_configmap(configmap, text)
        rc, out, err = self.run([kubectl, "--kubeconfig", admin, "replace", "--filename", "-"], data=body)
        if rc != 0:
            raise KubeSchedulerError(f"{CONFIGMAP}: kubectl replace failed: "
                                     f"{(err or out).strip()}")


# ---------------------------------------------------------------- decisions

def _flavor(module):
    params = module.params
    if params["flavor"] != "auto":
        return params["flavor"]
    flavor = detect_flavor(os.path.exists, params["manifest_path"], params["rke2_config"],
                           params["cluster_yml"])
    if flavor is None:
        module.fail_json(msg=f"cannot tell how kube-scheduler runs here: no {params['manifest_path']} "
                             f"(kubeadm), no {os.path.dirname(params['rke2_config'])} (RKE2), no RKE "
                             "scheduler kubeconfig (RKE1); set flavor")
    return flavor


def _version(node, flavor, manifest, schedulers, cluster_configuration):
    """(version, source, warnings) from what this host has, best source first."""
    params = node.params
    if params["kubernetes_version"]:
        return params["kubernetes_version"], "kubernetes_version", []
    running = [binary_version(p, node.run, params["proc_root"]) or (None, f"kube-scheduler PID {p.pid}")
               for p in schedulers[-1:]]
    candidates = []
    if flavor == "kubeadm" and manifest:
        data, ci = manifest
        image = str(data["spec"]["containers"][ci].get("image") or "")
        candidates.append((tag_version(image), f"the image tag in {params['manifest_path']} ({image})"))
        candidates += running
        if cluster_configuration:
            recorded = load_yaml(CONFIGMAP, cluster_configuration) or {}
            version = recorded.get("kubernetesVersion") if isinstance(recorded, dict) else None
            candidates.append((version, f"{CONFIGMAP} ClusterConfiguration.kubernetesVersion"))
        # kubespray keeps the configuration it gave kubeadm next to the manifests' folder
        kube_dir = os.path.dirname(os.path.dirname(params["manifest_path"]))
        records_path = os.path.join(kube_dir, "kubeadm-config.yaml")
        for document in (read_file(records_path) or "").split("\n---"):
            record = load_yaml(records_path, document) or {}
            if isinstance(record, dict) and record.get("kubernetesVersion"):
                candidates.append((record["kubernetesVersion"], records_path))
    elif flavor == "rke2":
        candidates.append((node.rke2_version(), "rke2 --version"))
        candidates += running
    elif params["cluster_yml"]:
        text = read_file(params["cluster_yml"])
        version = (load_yaml(params["cluster_yml"], text) or {}).get("kubernetes_version") if text else None
        candidates.append((version, f"kubernetes_version in {params['cluster_yml']}"))
    else:
        candidates += running
    version, source, warnings = detect_version(candidates)
    if version is None:
        tried = "; ".join(s for _v, s in candidates) or "no kube-scheduler process, no file that records it"
        raise KubeSchedulerError(f"cannot tell the Kubernetes version ({flavor}); looked at: {tried}; "
                                 "set kubernetes_version")
    return version, source, warnings


def _journal_path(params, flavor):
    return os.path.join(backup_dir_for(dict(params, flavor=flavor)), JOURNAL)


def _read_journal(path):
    text = read_file(path)
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def run(module):
    params = module.params
    try:
        values.check(params, VALUE_RULES)
    except values.ValueSyntaxError as exc:
        module.fail_json(msg=f"{exc}; nothing was read or written")
    node = Node(module)
    flavor = _flavor(module)
    params = dict(params, flavor=flavor)
    static_dir = os.path.dirname(params["manifest_path"])
    backup_dir = backup_dir_for(params)
    if flavor == "kubeadm" and _inside(backup_dir, static_dir):
        module.fail_json(msg=f"backup_dir {backup_dir}: inside the static pod directory {static_dir}; "
                             "the kubelet would run a backup as a pod")
    admin = flavor == "rke" and bool(params["cluster_yml"])
    schedulers = [] if admin else node.schedulers()
    manifest = None
    if flavor == "kubeadm":
        text = read_file(params["manifest_path"])
        manifest = parse_manifest(params["manifest_path"], text) if text is not None else None
    kubeadm_cm = (None, "not a kubeadm control plane")
    if flavor == "kubeadm" and params["kubeadm_config"] != "skip":
        kubeadm_cm = node.get_kubeadm_config()
    cluster_configuration = kubeadm_cm[0][1] if kubeadm_cm[0] else None
    version, source, version_warnings = _version(node, flavor, manifest, schedulers, cluster_configuration)
    result = plan(dict(params, kubernetes_version=version), read_file, _listdir)
    result["warnings"] = version_warnings + result["warnings"]
    files = result["files"]
    shown = _shown_paths(files)
    resolved = resolve_params(params)

    # the running scheduler against the files
    restart = None
    if not admin:
        restart = _restart(node, flavor, resolved, result, schedulers=schedulers)
    # kubeadm-config: only once the scheduler runs the change (or predicted in check mode)
    kubeadm_facts, kubeadm_new = None, None
    if flavor == "kubeadm":
        verified = module.check_mode or (restart is None and params["manifest_path"] not in files)
        kubeadm_new, kubeadm_facts = plan_record(
            params["kubeadm_config"], params["state"], cluster_configuration,
            kubeadm_cm[1], wiring=result["wiring"], config_path=result["config_path"], verified=verified,
            rewrite=params["allow_rewrite"], warnings=result["warnings"])
        if kubeadm_facts["state"] == "unknown" and params["state"] == "present":
            result["warnings"].append(f"{CONFIGMAP} not checked ({kubeadm_facts['reason']}): "
                                      "kubeadm upgrade would drop the kube-scheduler change")
    out = {"changed": bool(files) or kubeadm_new is not None, "api_version": result["api_version"],
           "files": sorted(files), "config_path": result["config_path"], "backup_files": {},
           "flavor": flavor, "kubernetes_version": version, "version_source": source, "restart": restart,
           "restart_required": bool(restart) and not restart.get("pending"),
           "changes": change_lines(params, result, kubeadm_new, restart)}
    if kubeadm_facts is not None:
        out["kubeadm_config"] = kubeadm_facts
    if admin:
        state_path = rke_state_path(params["cluster_yml"])
        cluster_text = files[params["cluster_yml"]][1] if params["cluster_yml"] in files \
            else read_file(params["cluster_yml"])
        out["rke_up_pending"] = rke_up_pending(params["cluster_yml"], cluster_text, read_file(state_path))
    for warning in result["warnings"]:
        module.warn(warning)
    if module._diff:
        out["diff"] = [{"before_header": shown[path], "after_header": shown[path], "before": old or "",
                        "after": new or ""} for path, (old, new) in files.items()]
        if kubeadm_new is not None:
            where = f"{CONFIGMAP} ({KEY})"
            out["diff"].append({"before_header": where, "after_header": where,
                                "before": cluster_configuration, "after": kubeadm_new})
    out["ansible_facts"] = {"gpushare_scheduler": scheduler_facts(params, out)}
    if module.check_mode:
        return out
    _write(module, params, files, out, backup_dir=backup_dir, static_dir=static_dir, flavor=flavor)
    if kubeadm_new is not None:
        node.replace_kubeadm_config(kubeadm_cm[0][0], kubeadm_new)
    return out


def _shown_paths(files):
    """path -> its diff header (``link -> target``); refuses a link loop, or an operator's link to remove."""
    for path in (path for path, (_old, new) in files.items() if new is None):
        check_removable(path, KubeSchedulerError)
    return {path: shown_path(path, KubeSchedulerError) for path in files}


def _restart(node, flavor, params, result, *, schedulers):
    """The restart plan, with what to roll back, and the health check when nothing else is due."""
    files = result["files"]
    manifest_argv = None
    config_flag = None
    if flavor == "kubeadm":
        text = files[params["manifest_path"]][1] if params["manifest_path"] in files \
            else read_file(params["manifest_path"])
        if text:
            data, ci = parse_manifest(params["manifest_path"], text)
            manifest_argv = [str(a) for a in list(data["spec"]["containers"][ci].get("command") or [])
                             + list(data["spec"]["containers"][ci].get("args") or [])]
    elif params["state"] == "present" and result["api_version"]:
        flag = "policy-config-file" if result["api_version"] == "Policy" else "config"
        config_flag = f"--{flag}={result['config_path']}"
    rke2_paths = rke2_files(params["rke2_config"], _listdir) if flavor == "rke2" else []
    source = result["config_path"]
    mtimes = {path: _mtime(path) for path in [params["manifest_path"], source, *rke2_paths]}
    plan_ = restart_plan(flavor, changed=files, manifest_path=params["manifest_path"],
                         manifest_argv=manifest_argv, config_source=source, config_flag=config_flag,
                         schedulers=schedulers, rke2_server=node.rke2_server() if flavor == "rke2" else None,
                         rke2_files=rke2_paths, mtimes=mtimes)
    journal_path = _journal_path(params, flavor)
    if plan_ is None and not files and params["health_url"] and (schedulers or params["state"] == "present"):
        problem = probe_url(params["health_url"], params["health_validate_certs"])
        if problem:
            plan_ = restart_plan(flavor, changed={}, health_problem=problem)
        elif not node.module.check_mode and os.path.exists(journal_path):
            os.unlink(journal_path)  # the last change runs and is healthy: nothing left to roll back
    if plan_ is None or plan_["pending"]:
        return plan_
    journal = _read_journal(journal_path) if not files else None
    current = {path: digest(read_file(path)) for path in (journal or {}).get("files", {})}
    plan_["restore"] = journal_entries(journal, current)
    return plan_


def _write(module, params, files, out, *, backup_dir, static_dir, flavor):
    """Back up, record the change as unverified, write: config before manifest (present) or after."""
    if not files:
        return
    manifest = params["manifest_path"]
    # present: the config exists before the scheduler is pointed at it; absent: the reverse
    order = sorted(files, key=lambda p: (p == manifest) == (params["state"] == "present"))
    journal = {"files": {}}
    for path in order:
        old, new = files[path]
        backup = make_backup(path, backup_dir) if params["backup"] and old is not None else None
        if backup:
            out["backup_files"][path] = backup
        journal["files"][path] = {"backup": backup, "sha256": digest(new)}
    if params["backup"] and not (flavor == "rke" and params["cluster_yml"]):
        os.makedirs(backup_dir, mode=0o700, exist_ok=True)
        write_text(os.path.join(backup_dir, JOURNAL), json.dumps(journal, indent=2) + "\n",
                   new_file_mode=0o600)
    if out["restart"] is not None and params["backup"]:
        # put back in the reverse order of the writes: the manifest before the file it points at
        out["restart"]["restore"] = [{"path": path, "backup": journal["files"][path]["backup"]}
                                     for path in reversed(order)]
    for path in order:
        new = files[path][1]
        if new is None:
            os.unlink(path)
            fsync_directory(path)
            continue
        tmp_dir, target = None, resolved_path(path)  # a link: its target is written, the link kept
        if _inside(os.path.dirname(target), static_dir):
            # never a temp file inside the static pod directory: make it one level up
            tmp_dir = os.path.dirname(os.path.dirname(os.path.abspath(target)))
        write_text(path, new, new_file_mode=0o600, tmp_dir=tmp_dir, replace=module.atomic_move)


def main():
    module = build_module()
    if YAML_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("PyYAML (python3-yaml)"), exception=YAML_IMPORT_ERROR,
                         missing_library="PyYAML", missing_packages=[PACKAGES["PyYAML"]])
    try:
        module.exit_json(**run(module))
    except KubeSchedulerError as exc:
        module.fail_json(msg=str(exc))


if __name__ == "__main__":
    main()
