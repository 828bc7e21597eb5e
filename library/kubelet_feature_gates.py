#!/usr/bin/python
"""Ansible module kubelet_feature_gates: set kubelet feature gates safely."""


from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.kubelet_flags import (
    FlagsError,
    GateError,
    YamlEditError,
    detect_format,
    read_config_gates,
    read_flags_gates,
    read_gate_values,
    read_rke1_gates,
    read_rke2_gates,
    rke2_files,
    rke2_items,
    set_gate_string,
    write_config_gates,
    write_rke1_gates,
    write_rke2_gates,
)
from ansible.module_utils.kubelet_gates import (
    decide,
    format_gate_string,
    format_version,
    gates_needed,
    merge,
    parse_version,
    refused_in_file,
)
from ansible.module_utils.text_file import read_text, write_text
from ansible.module_utils.yaml_edit import get as yaml_get

DOCUMENTATION = r"""
---
module: kubelet_feature_gates
short_description: Set kubelet feature gates, refusing any gate the kubelet version would reject
description:
  - Merges feature gates into the place the kubelet reads them from, keeping every other
    setting, comment and layout.
  - Checks each gate against a table of gate histories (module_utils/kubelet_gates.py) for the
    kubelet's version. A gate this version does not know, or a value it cannot take (a GA gate
    locked to its default), fails with the reason and nothing is written.
  - A gate removed after it graduated, asked for with its graduated value (C(DevicePlugins=true)
    on 1.28+), needs no setting; it is reported in RI(skipped_gates) and, if the file still holds
    it (the kubelet would refuse to start), removed from the file.
  - Gates already in the file and not asked about are kept as they are. If the kubelet would
    refuse one of them, the module warns.
options:
  gates:
    description: Gate name -> value.
    type: dict
    default: {}
  gpu_node:
    description:
      - Also set the gates a GPU node needs on this kubelet version
        (C(DevicePlugins=true) where it is alpha, 1.8-1.9); gates in I(gates) win.
    type: bool
    default: false
  legacy_accelerators:
    description:
      - With I(gpu_node), also set C(Accelerators=true) on kubelets that still have it (before 1.11),
        for the alpha C(alpha.kubernetes.io/nvidia-gpu) resource.
    type: bool
    default: false
  kubernetes_version:
    description:
      - Version of the kubelet (C(1.28.2) or C(v1.28.2)).
      - When omitted, read from C(kubelet --version) (I(kubelet_path) or the PATH, and
        C(/var/lib/rancher/rke2/bin)); with I(rke_cluster_yml), from its C(kubernetes_version).
    type: str
  kubelet_path:
    description: The kubelet binary to ask for its version.
    type: path
  config_file:
    description: A KubeletConfiguration file (C(/var/lib/kubelet/config.yaml)); sets C(featureGates).
    type: path
  flags_file:
    description:
      - A file holding kubelet flags; the gates are merged into one C(--feature-gates=) flag.
      - An environment file (C(/etc/default/kubelet), C(/etc/sysconfig/kubelet)) is created
        when missing; a systemd unit or drop-in (C(10-kubeadm.conf)) must exist.
    type: path
  flags_format:
    description: Format of I(flags_file); C(auto) is C(systemd) when the file has a C([Section]) header.
    type: str
    choices: [auto, env, systemd]
    default: auto
  flags_variable:
    description:
      - Variable that gets the flag when no C(--feature-gates) is present yet. Default
        C(KUBELET_EXTRA_ARGS), or in an environment file the only variable holding flags.
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
  allow_unknown:
    description: Write gates that are not in the module's table, unchecked.
    type: bool
    default: false
  backup:
    description: Keep a timestamped copy of each file changed.
    type: bool
    default: false
notes:
  - Exactly one of I(config_file), I(flags_file), I(rke_cluster_yml), I(rke2_config).
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
author: gpunode
"""

EXAMPLES = r"""
- name: DevicePlugins on a 1.9 kubelet (alpha there; must be set)
  kubelet_feature_gates:
    gates: {DevicePlugins: true}
    flags_file: /etc/systemd/system/kubelet.service.d/10-kubeadm.conf
    backup: true

- name: Gates in the KubeletConfiguration, version detected
  kubelet_feature_gates:
    gates: {DynamicResourceAllocation: true}
    config_file: /var/lib/kubelet/config.yaml

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
  description: Before/after text of each file changed (a list when several RKE2 files are involved).
  type: raw
  returned: when changed and diff mode is on
restart_required:
  description: The kubelet (or rke2 service, or C(rke up)) must be restarted for the change to take effect.
  type: bool
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
  description: The kubelet version the gates were checked against.
  type: str
  returned: always
  sample: 1.28.2
target:
  description: Where the gates are (C(featureGates), C(Environment KUBELET_EXTRA_ARGS), C(ExecStart), ...).
  type: str
  returned: always
files:
  description: Files changed (or that would change in check mode).
  type: list
  elements: str
  returned: always
needed_gates:
  description: With I(gpu_node), the gates a GPU node needs on this version (empty on modern kubelets).
  type: dict
  returned: always
backup_file:
  description: Backup of the changed file (the first one, when several).
  type: str
  returned: when backup=true and a file changed
backup_files:
  description: Changed file -> its backup.
  type: dict
  returned: when backup=true and a file changed
"""

TARGETS = ("config_file", "flags_file", "rke_cluster_yml", "rke2_config")
RKE2_BIN = "/var/lib/rancher/rke2/bin"


def build_module():
    return AnsibleModule(
        argument_spec={
            "gates": {"type": "dict", "default": {}},
            "gpu_node": {"type": "bool", "default": False},
            "legacy_accelerators": {"type": "bool", "default": False},
            "kubernetes_version": {"type": "str"},
            "kubelet_path": {"type": "path"},
            "config_file": {"type": "path"},
            "flags_file": {"type": "path"},
            "flags_format": {"type": "str", "choices": ["auto", "env", "systemd"], "default": "auto"},
            "flags_variable": {"type": "str"},
            "rke_cluster_yml": {"type": "path"},
            "rke2_config": {"type": "path"},
            "allow_unknown": {"type": "bool", "default": False},
            "backup": {"type": "bool", "default": False},
        },
        mutually_exclusive=[TARGETS],
        required_one_of=[TARGETS],
        supports_check_mode=True,
    )


class ModuleError(Exception):
    """Turned into fail_json once, in run()."""


def _read(path, missing_ok=False):
    text = read_text(path, ModuleError)
    if text is None and not missing_ok:
        raise ModuleError(f"{path}: does not exist")
    return text


def detect_version(module, params, texts):
    if params["kubernetes_version"]:
        return params["kubernetes_version"]
    if params["rke_cluster_yml"]:
        text = texts[params["rke_cluster_yml"]] or ""
        version = yaml_get(text, ["kubernetes_version"])
        if version:
            return str(version)
        raise ModuleError(
            f"{params['rke_cluster_yml']}: no kubernetes_version in the file; pass kubernetes_version"
        )
    kubelet = params["kubelet_path"] or module.get_bin_path("kubelet", opt_dirs=[RKE2_BIN])
    if not kubelet:
        raise ModuleError("kubelet not found to detect its version; pass kubernetes_version")
    rc, out, err = module.run_command([kubelet, "--version"], environ_update={"LC_ALL": "C"})
    if rc != 0:
        raise ModuleError(f"{kubelet} --version failed (rc={rc}): {(err or out).strip()}")
    return out.strip()


def _target_path(params):
    for name in TARGETS:
        if params[name]:
            return name, params[name]
    raise ModuleError("no target given")


def plan(module, params):
    """Compute everything; returns (result, new_texts) where new_texts maps path -> (old, new)."""
    kind, path = _target_path(params)
    texts = {}
    if kind == "rke2_config":
        for name in rke2_files(path):
            texts[name] = _read(name, missing_ok=(name == path))
        texts = {name: text or "" for name, text in texts.items()}
    elif kind == "flags_file":
        texts[path] = _read(path, missing_ok=params["flags_format"] != "systemd")
    else:
        texts[path] = _read(path)

    version = format_version(parse_version(detect_version(module, params, texts)))
    needed = gates_needed(version, params["legacy_accelerators"]) if params["gpu_node"] else {}
    asked = {**needed, **(params["gates"] or {})}
    try:
        apply, skipped, warnings = decide(asked, version, params["allow_unknown"])
    except GateError as exc:
        raise ModuleError(f"{path}: {exc}; nothing written") from exc

    text = texts.get(path)
    where = None
    flag_warnings = []
    try:
        if kind == "config_file":
            current = read_config_gates(text)
            where = "featureGates"
        elif kind == "flags_file":
            if text is None:
                fmt = "env"
                text = ""
            else:
                fmt = params["flags_format"] if params["flags_format"] != "auto" else detect_format(text)
            current = read_flags_gates(text, fmt)
        elif kind == "rke_cluster_yml":
            current = read_rke1_gates(text)
            where = "services.kubelet.extra_args.feature-gates"
        else:
            items = rke2_items(texts)
            current = read_rke2_gates(items)
            where = "kubelet-arg"
    except (GateError, FlagsError, YamlEditError) as exc:
        raise ModuleError(f"{path}: {exc}; left unchanged") from exc

    remove = {name for name in skipped if name in current}
    merged = merge(current, apply, remove)
    for why in refused_in_file({k: v for k, v in current.items() if k not in asked}, version).values():
        warnings.append(f"{path}: {why}; the kubelet would refuse it (not asked about, left as it is)")

    new_texts = {}
    try:
        if kind == "config_file":
            new_texts[path] = write_config_gates(text, current, merged)
        elif kind == "flags_file":
            if merged == current and list(merged) == list(current) and len(read_gate_values(text, fmt)) <= 1:
                new_texts[path] = text
            else:
                new, where, flag_warnings = set_gate_string(
                    text, fmt, format_gate_string(merged), params["flags_variable"]
                )
                new_texts[path] = new
            where = where or _where_flags(text, fmt)
        elif kind == "rke_cluster_yml":
            new_texts[path] = write_rke1_gates(text, current, merged)
        else:
            new_texts.update(write_rke2_gates(texts, items, current, merged))
    except (GateError, FlagsError, YamlEditError) as exc:
        raise ModuleError(f"{path}: {exc}; left unchanged") from exc

    before = texts if kind == "rke2_config" else {path: _read(path, missing_ok=True)}
    changes = {
        name: (before.get(name), new)
        for name, new in new_texts.items()
        if new != (before.get(name) or "") or (before.get(name) is None and new)
    }
    result = {
        "changed": bool(changes),
        "restart_required": bool(changes),
        "applied_gates": apply,
        "skipped_gates": skipped,
        "gates": merged,
        "kubernetes_version": version,
        "needed_gates": needed,
        "target": where,
        "files": sorted(changes),
    }
    for warning in warnings + flag_warnings:
        module.warn(warning)
    return result, changes


def _where_flags(text, fmt):
    found = read_gate_values(text, fmt)
    return found[0][0] if found else None


def run(module):
    params = module.params
    try:
        result, changes = plan(module, params)
    except ModuleError as exc:
        module.fail_json(msg=str(exc))
    if module._diff and changes:
        diffs = [
            {"before": old or "", "after": new, "before_header": name, "after_header": name}
            for name, (old, new) in sorted(changes.items())
        ]
        result["diff"] = diffs[0] if len(diffs) == 1 else diffs
    if changes and not module.check_mode:
        for name, (old, new) in sorted(changes.items()):
            if params["backup"] and old is not None:
                backup = module.backup_local(name)
                result.setdefault("backup_file", backup)
                result.setdefault("backup_files", {})[name] = backup
            write_text(name, new, replace=module.atomic_move)
    return result


def main():
    module = build_module()
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
