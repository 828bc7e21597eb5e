#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module kubelet_feature_gates: set kubelet feature gates where the kubelet reads them."""

DOCUMENTATION = r"""
---
module: kubelet_feature_gates
short_description: Set kubelet feature gates where the kubelet reads them, refusing any it would reject
description:
  - Finds the kubelet (its process, its systemd unit and the unit's drop-ins and environment files,
    or RKE2), asks its version once, and merges the gates where the kubelet reads them, keeping every
    other setting, comment and layout. With no file named, the gates go to a drop-in gpunode owns in
    the kubelet's C(--config-dir) when it reads one (the main files are not touched), else to its
    C(--config) file (YAML or JSON, which stays JSON), else to its C(--feature-gates) flag at the
    assignment that really reaches C(ExecStart) by systemd's rules (C(EnvironmentFile=) wins over
    C(Environment=); a variable C(ExecStart) never expands reaches nothing).
  - Checks each gate against a table of gate histories (module_utils/gpunode/kubelet/gates.py, with sources)
    for the kubelet's version. A gate this version does not know, or a value it cannot take (a GA gate
    locked to its default), fails with the reason and nothing is written. On a kubelet newer than the
    table, gates are written as they stood in the table's last version, with a warning that names it.
  - A gate removed after it graduated, asked for with its graduated value (C(DevicePlugins=true)
    on 1.28+), needs no setting; it is reported in RV(skipped_gates) and, if the file still holds
    it (the kubelet would refuse to start), removed from the file.
  - Compares the result with the running kubelet (its C(--feature-gates), its start time against the
    config file's, systemd's C(NeedDaemonReload)) and reports RV(restart_required) when the kubelet
    must restart to run what the files say, also when an earlier run wrote them and was stopped
    before the restart. Before a restart would be needed, refuses (writing nothing) when the kubelet
    would not come back - a flag its version removed (C(--pod-infra-container-image) from 1.35, the
    cAdvisor flags from 1.37), or a cgroup v1 host from 1.35 without C(failCgroupV1=false).
  - Gates already in the file and not asked about are kept as they are. If the kubelet would
    refuse one of them, the module warns.
  - Publishes C(ansible_facts.kubelet_gpu).
requirements:
  - PyYAML (C(python3-yaml)) on the node for YAML files (KubeletConfiguration in YAML, RKE files);
    JSON configurations, flags files and units need only the standard library.
options:
  gates:
    description:
      - Gate name -> value. A name is letters and digits starting with a letter (C([A-Za-z][A-Za-z0-9]*)),
        spelled as the kubelet knows it (a known gate in another case fails, naming the right spelling);
        a value is a boolean. Anything else fails before any file is read, also with O(allow_unknown).
    type: dict
    default: {}
  gpu_node:
    description:
      - Also set the gates a GPU node needs on this kubelet version
        (C(DevicePlugins=true) where it is alpha, 1.8-1.9), and take out of the file the GPU gates a
        newer kubelet no longer knows (C(DevicePlugins), C(KubeletPodResources),
        C(KubeletPodResourcesGetAllocatable), C(DevicePluginCDIDevices)); gates in O(gates) win.
    type: bool
    default: false
  legacy_accelerators:
    description:
      - With O(gpu_node), also set C(Accelerators=true) on kubelets that still have it (before 1.11),
        for the alpha C(alpha.kubernetes.io/nvidia-gpu) resource.
    type: bool
    default: false
  kubernetes_version:
    description:
      - Version of the kubelet (C(1.28.2) or C(v1.28.2)).
      - When omitted, read from C(kubelet --version) of the binary the kubelet's unit starts (or
        O(kubelet_path), the PATH, C(/var/lib/rancher/rke2/bin)); with O(rke_cluster_yml), from its
        C(kubernetes_version).
    type: str
  kubelet_path:
    description: The kubelet binary to ask for its version.
    type: path
  target:
    description:
      - Where the gates go when no file is named. V(auto) finds it (RKE2, else the kubelet's
        C(--config-dir), C(--config), flags); V(config) the kubelet's C(--config) file; V(flags) its
        flags; V(rke2) RKE2's C(/etc/rancher/rke2/config.yaml).
    type: str
    choices: [auto, config, flags, rke2]
    default: auto
  config_file:
    description: A KubeletConfiguration file (YAML or JSON) whose C(featureGates) to set.
    type: path
  flags_file:
    description:
      - A file holding kubelet flags; the gates are merged into one C(--feature-gates=) flag.
      - An environment file (C(/etc/default/kubelet), C(/etc/sysconfig/kubelet)) is created
        when missing; a systemd unit or drop-in (C(10-kubeadm.conf)) must exist.
      - When this file is a unit or drop-in, or the kubelet's unit reads it, the module resolves the
        command line systemd would run with the new text (the drop-in alone when the unit is not
        found; its C(EnvironmentFile=) files read, missing C(-) ones skipped) and reports a gate
        applied only if it is there. When another assignment wins (an C(EnvironmentFile=) over
        C(Environment=), a later file), the flag goes to the assignment that wins (that file is then
        in RV(files) and the diff), or the module fails saying which file and line win; nothing is
        written then.
    type: path
  flags_format:
    description: Format of O(flags_file); V(auto) is V(systemd) when the file has a C([Section]) header.
    type: str
    choices: [auto, env, systemd]
    default: auto
  flags_variable:
    description:
      - Variable that gets the flag when no C(--feature-gates) is present yet. Default
        C(KUBELET_EXTRA_ARGS) when C(ExecStart) expands it, else the last variable it expands that
        holds flags. A variable name (C([A-Za-z_][A-Za-z0-9_]*)).
    type: str
  rke_cluster_yml:
    description:
      - RKE1 C(cluster.yml); sets C(services.kubelet.extra_args.feature-gates).
      - Run C(rke up) after a change.
    type: path
  rke2_config:
    description:
      - RKE2 C(config.yaml); sets a C(feature-gates=...) item of C(kubelet-arg), taking the
        C(config.yaml.d/*.yaml) drop-ins (and C(kubelet-arg+)) into account.
    type: path
  service:
    description:
      - The systemd unit that runs the kubelet; found when omitted (the running kubelet's,
        C(kubelet), or RKE2's). A unit name (letters, digits, C(:), C(-), C(_), C(.), C(@) and backslash).
    type: str
  unit_files:
    description:
      - The kubelet unit's files in the order systemd applies them (the unit, then its drop-ins);
        found with C(systemctl show) when omitted.
    type: list
    elements: path
  proc_root:
    description: Where the node's C(/proc) is (the kubelet process, the cgroup mounts).
    type: path
    default: /proc
  check_running:
    description: Compare with the running kubelet and report a restart when it runs older settings.
    type: bool
    default: true
  allow_unknown:
    description: Write gates that are not in the module's table, unchecked.
    type: bool
    default: false
  backup:
    description: Keep a timestamped copy of each file changed (never where the kubelet would load it).
    type: bool
    default: false
  registration_taint:
    description:
      - A taint (C(key[=value]:Effect), e.g. C(readiness.k8s.io/gpunode-gpu-unvalidated:NoSchedule)) the
        kubelet registers its Node with (C(registerWithTaints)), put in while O(validation_record) does not
        say the node passed its validation; once it does, the file is left as it is (the kubelet reads the
        list only when it registers, so taking it out would change the node for nothing, and a node that
        registers again starts tainted). A change of it alone restarts no kubelet. The other taints there
        are kept. Written where the gates go - C(registerWithTaints) of the C(--config) file or of gpunode's
        C(--config-dir) drop-in (with the list of the files before it, which a drop-in's list replaces), the
        C(--register-with-taints) flag (merged into the one there, else starting from the config file's
        list, which the flag replaces), RKE2's C(node-taint) list; with O(rke_cluster_yml) (every node's
        kubelet) a warning says it is not set.
      - Omitted, C(registerWithTaints) is not touched.
    type: str
  registration_taint_state:
    description:
      - V(unvalidated) - the taint is put in C(registerWithTaints) while the node has not passed its
        validation (and left there once it has); V(absent) - it is taken out (the validation gate switched
        off).
    type: str
    choices: [unvalidated, absent]
    default: unvalidated
  validation_record:
    description: The record of the node's last validation (role gpu_validate) O(registration_taint) follows.
    type: path
    default: /var/lib/gpunode/validated.json
  image_build:
    description:
      - An image build (docs/ROLES.md, "Image bake mode") - the kubelet's configuration file its flags name
        not existing yet (kubeadm's C(config.yaml) before the join) skips the kubelet with a warning
        instead of failing; the join writes it, a run after the join sets the gates.
    type: bool
    default: false
  registration_labels:
    description:
      - Labels (key -> value) the kubelet registers its Node with (e.g. C(nvidia.com/gpu.present=true)), set
        whatever the validation says. KubeletConfiguration has no field for them, so they go where the flags
        go - C(--node-labels), merged with the operator's labels into the first such flag that reaches the
        kubelet (repeated flags add up), else a new flag where a C(--feature-gates) flag would go (also where
        the gates go to a C(--config) file or drop-in); RKE2's (or k3s') C(node-label) list; with
        O(rke_cluster_yml) a warning says they are not set. Never taken out; a change of them alone
        restarts no kubelet.
      - Keys and values as Kubernetes takes labels; none under C(kubernetes.io) or C(k8s.io) but
        C(kubelet.kubernetes.io) and C(node.kubernetes.io) (the kubelet refuses to start with them).
      - Empty, C(--node-labels) is not touched.
    type: dict
    default: {}
notes:
  - At most one of O(config_file), O(flags_file), O(rke_cluster_yml), O(rke2_config).
  - A file that is a symbolic link (also relative, or a chain of links) is followed; the file at
    the end of the link is edited and the link kept; a backup holds that file's content; --diff
    headers read C(link -> target). A link to a file that does not exist yet gets that file
    created (as with template follow=yes); a link into a folder that does not exist, or a link
    loop, fails naming the link.
  - A drop-in this module would delete (no gate left) that is a symbolic link is the operator's, so
    the module fails naming it and removes neither the link nor its target.
  - Paths (O(config_file), O(flags_file), O(rke_cluster_yml), O(rke2_config), O(kubelet_path),
    O(proc_root), O(unit_files)) must be absolute and hold no newline.
extends_documentation_fragment:
  - module_attributes
  - module_attributes.facts
  - node_lock
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Gates wherever this node's kubelet reads them (found), restart decided by the module
  kubelet_feature_gates:
    gates: {DynamicResourceAllocation: true}
    gpu_node: true
    backup: true
  register: kubelet_gates

- name: DevicePlugins on a 1.9 kubelet (alpha there; must be set)
  kubelet_feature_gates:
    gates: {DevicePlugins: true}
    flags_file: /etc/systemd/system/kubelet.service.d/10-kubeadm.conf
    backup: true

- name: EKS node (a JSON KubeletConfiguration stays JSON)
  kubelet_feature_gates:
    gates: {KubeletPodResourcesDynamicResources: true}
    config_file: /etc/kubernetes/kubelet/config.json

- name: RKE2 node
  kubelet_feature_gates:
    gates: {KubeletPodResourcesGetAllocatable: true}
    rke2_config: /etc/rancher/rke2/config.yaml
    kubernetes_version: v1.26.9+rke2r1
"""

RETURN = r"""
changed:
  description: Whether a file was (or in check mode would be) changed.
  type: bool
  returned: always
diff:
  description: Before/after text of each file changed (a list when several files are involved).
  type: raw
  returned: when changed and diff mode is on
restart_required:
  description:
    - The kubelet (or rke2 service, or C(rke up)) must be restarted to run what the files say - because
      they changed, or because what runs is older than them (RV(stale)).
    - Not for a change of the registration taint or labels alone, which the kubelet reads only when it
      creates its Node - the files are written, a C(--config) file or drop-in keeping its modification
      time, so that the next run does not take the kubelet for older than its settings either.
  type: bool
  returned: always
stale:
  description: Why the running kubelet is older than its files (empty when it is not).
  type: list
  elements: str
  returned: always
  sample:
    - the running kubelet (PID 812) has --feature-gates=(none), its files give --feature-gates=A=true
daemon_reload:
  description:
    - A unit file or drop-in changed (or systemd has not reloaded one) - run C(systemctl daemon-reload)
      before the restart.
  type: bool
  returned: always
service:
  description: The unit that runs the kubelet (C(kubelet.service), C(rke2-agent.service)); null on RKE1.
  type: str
  returned: always
applied_gates:
  description: The asked-for gates that the file now sets.
  type: dict
  returned: always
  sample: {DevicePlugins: true}
skipped_gates:
  description: Asked-for gates not written, and why.
  type: dict
  returned: always
  sample: {DevicePlugins: "DevicePlugins graduated to GA in Kubernetes 1.26 and was removed in 1.28: ..."}
gates:
  description: Every gate the target sets after the run (asked for or not).
  type: dict
  returned: always
kubernetes_version:
  description: The kubelet version the gates were checked against (null when no kubelet was found).
  type: str
  returned: always
  sample: 1.28.2
target:
  description: The kind of place the gates are in (V(config), V(config_dir), V(flags), V(rke2), V(rke1)).
  type: str
  returned: always
location:
  description:
    - Where exactly (C(/var/lib/kubelet/config.yaml featureGates), C(/etc/default/kubelet KUBELET_EXTRA_ARGS),
      ...).
  type: str
  returned: always
registration_taint:
  description:
    - With O(registration_taint) - the taint, whether the kubelet registers with it (C(present)), why
      (C(why)) and where it is written (C(where), null where it is not).
  type: dict
  returned: when a kubelet was found and O(registration_taint) was given
  sample: {taint: "readiness.k8s.io/gpunode-gpu-unvalidated:NoSchedule", present: true,
           where: "/var/lib/kubelet/config.yaml registerWithTaints",
           why: "/var/lib/gpunode/validated.json: not validated yet"}
registration_labels:
  description:
    - With O(registration_labels) - the labels, whether the kubelet registers with them (C(present)) and where
      they are written (C(where), null where they are not).
  type: dict
  returned: when a kubelet was found and O(registration_labels) was given
  sample: {labels: {nvidia.com/gpu.present: "true"}, present: true,
           where: "/etc/default/kubelet KUBELET_EXTRA_ARGS --node-labels"}
present:
  description: Whether a kubelet was found (false - nothing done, with a warning).
  type: bool
  returned: always
summary:
  description: One line for gpunode_changes - the gates and where they are.
  type: str
  returned: when a kubelet was found
  sample: kubelet gates DynamicResourceAllocation=true in /var/lib/kubelet/config.yaml featureGates
files:
  description: Files changed (or that would change in check mode).
  type: list
  elements: str
  returned: always
needed_gates:
  description: With O(gpu_node), the gates a GPU node needs on this version (empty on modern kubelets).
  type: dict
  returned: always
restore:
  description:
    - What C(verified_restart) puts back when the kubelet does not come back - each file with its
      backup (none - the file did not exist and is removed).
  type: list
  elements: dict
  returned: always
backup_file:
  description: Backup of the changed file (the first one, when several).
  type: str
  returned: when backup=true and a file changed
backup_files:
  description: Changed file -> its backup.
  type: dict
  returned: when backup=true and a file changed
ansible_facts:
  description:
    - C(kubelet_gpu) - present, kubernetes_version, target, files, gates, service, restart_pending
      (RV(restart_required) as read; the role sets it false once it restarted the kubelet).
    - Without a kubelet also C(skipped), why, for the run's table - no kubelet on this host, or no service
      manager (systemd) to run one (an image host's container).
  type: dict
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.gpunode.formats.yaml_edit import YAML_IMPORT_ERROR
from ansible.module_utils.gpunode.host.edits import apply_into
from ansible.module_utils.gpunode.host.files import FileError
from ansible.module_utils.gpunode.host.lock import LOCK_OPTION, exit_run
from ansible.module_utils.gpunode.kubelet.discovery import MissingRequirement, PlanError
from ansible.module_utils.gpunode.kubelet.state_call import (
    ARGUMENT_SPEC,
    MUTUALLY_EXCLUSIVE,
    planned_result,
    read,
)


def build_module():
    return AnsibleModule(argument_spec=dict(ARGUMENT_SPEC, **LOCK_OPTION),
                         mutually_exclusive=MUTUALLY_EXCLUSIVE, supports_check_mode=True)


def run(module):
    try:
        outcome = read(module)
        result = planned_result(outcome, module._diff)
    except MissingRequirement as exc:
        module.fail_json(msg=f"{exc}: {missing_required_lib('PyYAML (python3-yaml)')}",
                         exception=YAML_IMPORT_ERROR)
    except PlanError as exc:
        module.fail_json(msg=str(exc))
    for warning in outcome.warnings:
        module.warn(warning)
    if outcome.changes and not module.check_mode:
        try:
            apply_into(result, outcome.changes, module.params["backup"], module.atomic_move,
                       keep_mtime=outcome.keep_mtime)
        except FileError as exc:  # names the file and the cause
            module.fail_json(msg=str(exc), **result)
    return result


def main():
    exit_run(build_module(), run, failed=lambda exc: {"changed": False})


if __name__ == "__main__":
    main()
