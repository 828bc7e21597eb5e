# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""RKE1 and RKE2: the scheduler configuration an RKE1 control-plane node runs, cluster.yml on
the RKE admin host (and whether ``rke up`` has applied it), and RKE2's config.yaml and
config.yaml.d on a server node.

Standard library and PyYAML (python3-yaml) only: this runs on target hosts.
"""

import json

from ansible.module_utils.gpunode.formats.yaml_edit import is_flow
from ansible.module_utils.gpunode.host.files import rke2_files
from ansible.module_utils.gpunode.scheduler.api import (
    FLAVOR_FLAGS,
    POLICY,
    POLICY_REMOVED,
    KubeSchedulerError,
    api_name,
    preferred_api,
)
from ansible.module_utils.gpunode.scheduler.config_file import (
    carried_settings,
    edit_text,
    ensure_config,
    load_mapping,
    one_line,
    strip_config,
)


def plan_rke_node(params, version, read, warnings):
    """RKE1 control-plane node: the config file cluster.yml points kube-scheduler at."""
    path = params["config_path"]
    rewrite = params.get("allow_rewrite", False)
    old = read(path)
    if params["state"] == "absent":
        if old is None:
            return {}, None, path
        return {path: (old, strip_config(path, old, params["extender"], rewrite=rewrite,
                                         warnings=warnings))}, None, path
    fmt = preferred_api(version)
    carried = carried_settings(FLAVOR_FLAGS["rke"], fmt)
    new, api = ensure_config(path, old, version=version, extender=params["extender"],
                             kubeconfig=params["kubeconfig"], carried=carried, rewrite=rewrite,
                             warnings=warnings)
    return {path: (old, new)}, api, path


# ---------------------------------------------------------------- RKE1 cluster.yml (admin host)

RKE1_ARGS = ["services", "scheduler", "extra_args"]
# What `rke up` applied last: <cluster file without extension>.rkestate next to it (rancher/rke
# cluster/state.go GetStateFilePath), written by UpdateClusterCurrentState once the control
# plane is deployed; currentState.rkeConfig.services.<service>.extraArgs is cluster.yml's
# services.<service>.extra_args (types/rke_types.go BaseService: json "extraArgs").
RKE_STATE_KEYS = (("scheduler", ("config", "policy-config-file")), ("kubelet", ("feature-gates",)))


def rke_state_path(cluster_yml):
    base, _ext = cluster_yml.rsplit(".", 1) if "." in cluster_yml.rsplit("/", 1)[-1] else (cluster_yml, "")
    return base + ".rkestate"


def _rke_args(path, data, service):
    node = data
    for key in ("services", service, "extra_args"):
        node = node.get(key) if isinstance(node, dict) else None
        if node is not None and not isinstance(node, dict):
            raise KubeSchedulerError(f"{path}: services.{service}.extra_args is not a mapping; "
                                     "left unchanged")
    return node or {}


def rke_up_pending(cluster_yml, cluster_text, state_text):
    """What `rke up` has not applied yet: reasons, [] when up to date, None without a state file.

    Compares the extra_args gpunode manages (the scheduler's config flag, the
    kubelet's feature gates) in cluster.yml with the current state the last
    `rke up` recorded; a run killed between editing cluster.yml and `rke up`
    leaves them different, and the next run applies them.
    """
    if state_text is None:
        return None
    state_path = rke_state_path(cluster_yml)
    try:
        state = json.loads(state_text)
    except ValueError as exc:
        raise KubeSchedulerError(f"{state_path}: not valid JSON ({one_line(exc)})") from exc
    data = load_mapping(cluster_yml, cluster_text)
    current = ((((state or {}).get("currentState") or {}).get("rkeConfig") or {}).get("services") or {})
    reasons = []
    for service, keys in RKE_STATE_KEYS:
        wanted = _rke_args(cluster_yml, data, service)
        applied = (current.get(service) or {}).get("extraArgs") or {}
        for key in keys:
            want = None if wanted.get(key) is None else str(wanted[key])
            have = applied.get(key)
            if want != have:
                reasons.append(f"services.{service}.extra_args.{key} is {want!r} in {cluster_yml}, "
                               f"{have!r} in what the last rke up applied ({state_path})")
    return reasons


def plan_rke_cluster(params, version, read, warnings):
    """Edit services.scheduler.extra_args in cluster.yml; returns (files, api_version, config_path)."""
    path, config_path = params["cluster_yml"], params["config_path"]
    rewrite = params.get("allow_rewrite", False)
    text = read(path)
    if text is None:
        raise KubeSchedulerError(f"{path}: not found")
    extra = _rke_args(path, load_mapping(path, text), "scheduler")
    cfg, pol = extra.get("config"), extra.get("policy-config-file")
    fmt = preferred_api(version)
    if params["state"] == "absent":
        key = "config" if cfg == config_path else "policy-config-file" if pol == config_path else None
        if key is None:
            return {}, None, config_path
        ops = [("remove_branch", [*RKE1_ARGS, key])]
        new = edit_text(path, text, ops, rewrite=rewrite, warnings=warnings)
        return {path: (text, new)}, None, config_path
    if pol and version >= POLICY_REMOVED:
        raise KubeSchedulerError(f"{path}: services.scheduler.extra_args.policy-config-file={pol}: "
                                 "the Policy API was removed in Kubernetes 1.23; left unchanged")
    if cfg or pol:
        return {}, POLICY if (pol and not cfg) else None, str(cfg or pol)
    key = "policy-config-file" if fmt == POLICY else "config"
    if not extra and is_flow(text, RKE1_ARGS):
        # rke's generated `extra_args: {}` stays a flow mapping, so that state=absent gives it back
        op = ("set", RKE1_ARGS, {key: config_path})
    else:
        op = ("set", [*RKE1_ARGS, key], config_path)
    new = edit_text(path, text, [op], rewrite=rewrite, warnings=warnings)
    return {path: (text, new)}, api_name(fmt), config_path


# ---------------------------------------------------------------- RKE2 config.yaml (server node)

RKE2_ARG = "kube-scheduler-arg"
RKE2_MOUNT = "kube-scheduler-extra-mount"


def rke2_effective(texts, key):
    """(owner, items) of an RKE2 list option across its files.

    ``items`` are (file, index or None for a scalar, value) in effect: a later
    ``key`` replaces the list, ``key+`` appends to it. ``owner`` is the file
    whose ``key`` is in effect (where a new item goes), or None.
    """
    owner, items = None, []
    for path, text in texts.items():
        data = load_mapping(path, text)
        for name in (key, key + "+"):
            if name not in data or data[name] is None:
                continue
            values = data[name] if isinstance(data[name], list) else [data[name]]
            indexed = [(path, name, i if isinstance(data[name], list) else None, str(v))
                       for i, v in enumerate(values)]
            if name == key:
                owner, items = path, indexed
            else:
                items += indexed
    return owner, items


def _rke2_mounts(items):
    out = {}
    for _path, _name, _index, value in items:
        parts = value.split(":")
        if len(parts) >= 2:
            out[parts[1]] = parts[0]
    return out


def _rke2_texts(config_file, read, listdir):
    """(texts, config_exists): each RKE2 configuration file's text ("" for a missing config.yaml)."""
    texts = {}
    config_exists = True
    for path in rke2_files(config_file, listdir):
        text = read(path)
        if path == config_file and text is None:
            config_exists = False
        if text is not None or path == config_file:
            texts[path] = text or ""
    return texts, config_exists


def _rke2_config_arg(config_file, args):
    """The one kube-scheduler-arg item that sets the scheduler's config, or None; two are refused."""
    flags = ("config=", "policy-config-file=", "--config=", "--policy-config-file=")
    existing = [item for item in args if item[3].startswith(flags)]
    if len(existing) > 1:
        raise KubeSchedulerError(f"{config_file}: {RKE2_ARG} sets the scheduler config {len(existing)} times "
                                 f"({', '.join(item[0] for item in existing)}); left unchanged")
    return existing[0] if existing else None


def _absent_rke2(params, _version, read, rke2, *, rewrite, warnings):
    """state=absent: the extender out of the file in use; its flag and mount out when the file goes."""
    found, source, container_path = rke2["found"], rke2["source"], rke2["container_path"]
    files = {}
    if found:
        old = read(source)
        if old is not None:
            new = strip_config(source, old, params["extender"], rewrite=rewrite, warnings=warnings)
            files[source] = (old, new)
            if new is None:
                ours = [found, *(m for m in rke2["mounts"] if m[3].startswith(f"{source}:{container_path}"))]
                files.update(_rke2_unwire(rke2["texts"], ours, rewrite=rewrite, warnings=warnings))
    return files, None, container_path or params["config_path"]


def _adopt_rke2(params, version, read, rke2, *, rewrite, warnings):
    """kube-scheduler already has a config file: the extender is merged into it."""
    found, source = rke2["found"], rke2["source"]
    if "policy-config-file" in found[3] and version >= POLICY_REMOVED:
        raise KubeSchedulerError(f"{found[0]}: {RKE2_ARG} {found[3]}: the Policy API was removed in "
                                 "Kubernetes 1.23; left unchanged")
    old = read(source)
    if old is None:
        raise KubeSchedulerError(f"{source}: not found, but {found[0]} starts kube-scheduler with it; "
                                 "left unchanged")
    new, api = ensure_config(source, old, version=version, extender=params["extender"],
                             kubeconfig=params["kubeconfig"], adopt=True, rewrite=rewrite,
                             warnings=warnings)
    return {source: (old, new)}, api, source


def _wire_rke2(params, version, read, rke2, *, rewrite, warnings):
    """A new config file, its flag in kube-scheduler-arg and its mount, where each list is in effect."""
    config_file, config_path = params["rke2_config"], params["config_path"]
    texts = rke2["texts"]
    fmt = preferred_api(version)
    old_config = read(config_path)
    new_cfg, api = ensure_config(config_path, old_config, version=version, extender=params["extender"],
                                 kubeconfig=params["kubeconfig"],
                                 carried=carried_settings(FLAVOR_FLAGS["rke2"], fmt), rewrite=rewrite,
                                 warnings=warnings)
    files = {config_path: (old_config, new_cfg)}
    flag = "policy-config-file" if fmt == POLICY else "config"
    edits = {}
    edits.setdefault(rke2["arg_owner"] or config_file, []).append(
        ("append", [RKE2_ARG], f"{flag}={config_path}"))
    if _rke2_mounts(rke2["mounts"]).get(config_path) != config_path:
        edits.setdefault(rke2["mount_owner"] or config_file, []).append(
            ("append", [RKE2_MOUNT], f"{config_path}:{config_path}:ro"))
    for path, ops in edits.items():
        old = texts[path] if path != config_file or rke2["config_exists"] else None
        files[path] = (old, edit_text(path, texts[path], ops, rewrite=rewrite, warnings=warnings))
    return files, api, config_path


def plan_rke2(params, version, read, warnings, listdir):
    """RKE2 server: (files, api_version, config_path) from config.yaml and its drop-ins."""
    config_file = params["rke2_config"]
    texts, config_exists = _rke2_texts(config_file, read, listdir)
    arg_owner, args = rke2_effective(texts, RKE2_ARG)
    mount_owner, mounts = rke2_effective(texts, RKE2_MOUNT)
    found = _rke2_config_arg(config_file, args)
    container_path = found[3].split("=", 1)[1] if found else None
    source = _rke2_mounts(mounts).get(container_path, container_path) if found else None
    rke2 = {"texts": texts, "config_exists": config_exists, "arg_owner": arg_owner,
            "mount_owner": mount_owner, "mounts": mounts, "found": found,
            "container_path": container_path, "source": source}
    step = _absent_rke2 if params["state"] == "absent" else _adopt_rke2 if found else _wire_rke2
    return step(params, version, read, rke2, rewrite=params.get("allow_rewrite", False), warnings=warnings)


def _rke2_unwire(texts, ours, *, rewrite, warnings):
    ops = {}
    for path, name, index, _value in sorted(ours, key=lambda m: (m[0], m[1], -1 if m[2] is None else m[2]),
                                            reverse=True):
        ops.setdefault(path, []).append(("remove_branch", [name] if index is None else [name, index]))
    return {path: (texts[path], edit_text(path, texts[path], edits, rewrite=rewrite, warnings=warnings))
            for path, edits in ops.items()}
