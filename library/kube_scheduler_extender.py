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
      tls_insecure:
        description:
          - With O(extender.enable_https), do not check the extender's certificate (C(tlsConfig.insecure)),
            as HAMi's chart configures kube-scheduler to call HAMi's extender, which serves with its
            admission webhook's self-made certificate.
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
  - module_attributes
  - node_lock
notes:
  - A file that is a symbolic link (also relative, or a chain of links) is followed; the file at
    the end of the link is edited and the link kept; a backup holds that file's content; --diff
    headers read C(link -> target). A link to a file that does not exist yet gets that file
    created (as with template follow=yes); a link into a folder that does not exist, or a link
    loop, fails naming the link.
  - With O(state=absent), a configuration file to remove that is a symbolic link is the
    operator's, so the module fails naming it and removes neither the link nor its target.
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
  contains:
    reason:
      description: Why kube-scheduler must start again (for the run's output and a failure's message).
      type: str
    unit:
      description: A systemd unit to restart (C(rke2-server)), or null.
      type: str
    stop:
      description: PIDs to stop (what runs them starts them again - the kubelet, for a static pod).
      type: list
      elements: int
    wait_for_exit:
      description: PIDs that must be gone before health counts.
      type: list
      elements: int
    restore:
      description: The files to put back (C(path), C(backup)) when kube-scheduler does not come back healthy.
      type: list
      elements: dict
    pending:
      description: A change that waits for someone else (C(rke up)), or null.
      type: str
missing_library:
  description: The Python library the node lacks (C(PyYAML)), when that is why the module failed.
  returned: on that failure
  type: str
missing_packages:
  description: The distribution packages that provide it (C(python3-yaml)), for the role to install.
  returned: on that failure
  type: list
  elements: str
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

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.gpunode.formats import k8s_names, values
from ansible.module_utils.gpunode.formats.yaml_edit import YAML_IMPORT_ERROR
from ansible.module_utils.gpunode.host.lock import LOCK_OPTION, exit_run
from ansible.module_utils.gpunode.scheduler import apply
from ansible.module_utils.gpunode.scheduler.api import (
    DEFAULT_MANIFEST,
    DEFAULT_RKE2_CONFIG,
    KubeSchedulerError,
)
from ansible.module_utils.gpunode.scheduler.config_file import read_file

EXTENDER_SPEC = {
    "url_prefix": {"type": "str", "default": "http://127.0.0.1:32766/gpushare-scheduler"},
    "filter_verb": {"type": "str", "default": "filter"},
    "bind_verb": {"type": "str", "default": "bind"},
    "enable_https": {"type": "bool", "default": False},
    "tls_insecure": {"type": "bool", "default": False},
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
    **LOCK_OPTION,
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
PACKAGES = {"PyYAML": "python3-yaml"}
# The host side (files, processes, commands) and the record of a change not yet seen running
# healthy (in backup_dir): module_utils/gpunode/scheduler/apply.py
Node = apply.Node
JOURNAL = apply.JOURNAL


def build_module():
    # a copy: AnsibleModule fills the suboption defaults into the dict default of `extender`
    # itself, which would change ARGUMENT_SPEC for every later module in this process
    return AnsibleModule(argument_spec=copy.deepcopy(ARGUMENT_SPEC), supports_check_mode=True)


def run(module):
    """Check the values, decide (module_utils/gpunode/scheduler/apply.py), write unless in check mode."""
    try:
        values.check(module.params, VALUE_RULES)
    except values.ValueSyntaxError as exc:
        raise KubeSchedulerError(f"{exc}; nothing was read or written") from exc
    node = Node(module, read=read_file)
    decision = apply.decide(node)
    for warning in decision.warnings:
        module.warn(warning)
    if not module.check_mode:
        apply.write(node, decision)
    return decision.out


def main():
    module = build_module()
    if YAML_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("PyYAML (python3-yaml)"), exception=YAML_IMPORT_ERROR,
                         missing_library="PyYAML", missing_packages=[PACKAGES["PyYAML"]])
    exit_run(module, run, (KubeSchedulerError,))


if __name__ == "__main__":
    main()
