# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kubeadm's kube-scheduler static pod manifest: how it hands the scheduler its
configuration (flag, hostPath mount), and the plan of the manifest and the configuration
file on a kubeadm control-plane node.

Standard library and PyYAML (python3-yaml) only: this runs on target hosts.
"""


from ansible.module_utils.gpunode.scheduler.api import (
    MARKER,
    POLICY,
    POLICY_REMOVED,
    VOLUME_NAME,
    KubeSchedulerError,
    preferred_api,
)
from ansible.module_utils.gpunode.scheduler.config_file import (
    carried_settings,
    edit_text,
    ensure_config,
    find_flag,
    flags_dict,
    load_yaml,
    strip_config,
)

# ---------------------------------------------------------------- the kubeadm static pod manifest


def parse_manifest(path, text):
    """(pod, index of the kube-scheduler container); refuses anything else, naming the file."""
    data = load_yaml(path, text)
    containers = ((data or {}).get("spec") or {}).get("containers") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("kind") != "Pod" or not isinstance(containers, list):
        raise KubeSchedulerError(f"{path}: not a static Pod manifest (kind Pod with spec.containers); "
                                 "left unchanged")
    for index, container in enumerate(containers):
        command = (container.get("command") or []) if isinstance(container, dict) else []
        if isinstance(container, dict) and (container.get("name") == "kube-scheduler" or (
                command and str(command[0]).endswith("kube-scheduler"))):
            return data, index
    raise KubeSchedulerError(f"{path}: no kube-scheduler container; left unchanged")


def container_argv(container):
    """What the container runs: command then args (the process's argv)."""
    return [str(a) for a in list(container.get("command") or []) + list(container.get("args") or [])]


def host_path(data, ci, container_path):
    """The host path mounted at container_path (or a parent directory of it), or None."""
    container = data["spec"]["containers"][ci]
    volumes = {v.get("name"): v for v in data["spec"].get("volumes") or [] if isinstance(v, dict)}
    best = None
    for mount in container.get("volumeMounts") or []:
        mount_path = str(mount.get("mountPath", "")).rstrip("/")
        if container_path == mount_path or container_path.startswith(mount_path + "/"):
            source = (volumes.get(mount.get("name")) or {}).get("hostPath") or {}
            if source.get("path") and (best is None or len(mount_path) > len(best[0])):
                best = (mount_path, source["path"].rstrip("/") + container_path[len(mount_path):])
    return best[1] if best else None


def _mount_hint(container):
    bad = [str(m.get("mountPath")) for m in container.get("volumeMounts") or []
           if isinstance(m, dict) and not str(m.get("mountPath", "")).startswith("/")]
    return f" (mountPath {', '.join(bad)} is not an absolute path)" if bad else ""


def _unique_volume_name(data):
    taken = {v.get("name") for v in data["spec"].get("volumes") or [] if isinstance(v, dict)}
    name, n = VOLUME_NAME, 1
    while name in taken:
        n += 1
        name = f"{VOLUME_NAME}-{n}"
    return name


def _one_flag(found, flag, manifest_path):
    if len(found) > 1:
        raise KubeSchedulerError(f"{manifest_path}: --{flag} is given {len(found)} times; left unchanged")
    return found[0][1] if found else None


def scheduler_wiring(data, ci):
    """How the manifest hands kube-scheduler its configuration: {flag, path, source, volume}.

    ``flag`` is ``config`` or ``policy-config-file`` (None when neither is given), ``path``
    the file as the container sees it, ``source`` the host file (None when no mount
    brings it in), ``volume`` the hostPath volume and mount gpunode added (None for
    the operator's own mount).
    """
    container = data["spec"]["containers"][ci]
    args = container_argv(container)
    config = _one_flag(find_flag(args, "config"), "config", "manifest")
    policy = _one_flag(find_flag(args, "policy-config-file"), "policy-config-file", "manifest")
    if not (config or policy):
        return {"flag": None, "path": None, "source": None, "volume": None}
    path = config or policy
    mounts = {m.get("name"): m for m in container.get("volumeMounts") or [] if isinstance(m, dict)}
    volume = None
    for item in data["spec"].get("volumes") or []:
        if isinstance(item, dict) and str(item.get("name", "")).startswith(VOLUME_NAME) \
                and item.get("name") in mounts and mounts[item["name"]].get("mountPath") == path:
            volume = {"name": item["name"], "hostPath": (item.get("hostPath") or {}).get("path"),
                      "mountPath": path, "readOnly": bool(mounts[item["name"]].get("readOnly")),
                      "pathType": (item.get("hostPath") or {}).get("type") or ""}
    return {"flag": "config" if config else "policy-config-file", "path": path,
            "source": host_path(data, ci, path), "volume": volume}


def plan_kubeadm(params, version, read, warnings):
    """(files, api_version, config_path, wiring) for a kubeadm control-plane node."""
    manifest_path, config_path = params["manifest_path"], params["config_path"]
    rewrite = params.get("allow_rewrite", False)
    text = read(manifest_path)
    if text is None:
        raise KubeSchedulerError(f"{manifest_path}: not found")
    data, ci = parse_manifest(manifest_path, text)
    container = data["spec"]["containers"][ci]
    args_key = "command" if isinstance(container.get("command"), list) else "args"
    try:
        wiring = scheduler_wiring(data, ci)
    except KubeSchedulerError as exc:
        raise KubeSchedulerError(f"{manifest_path}: {str(exc).split(': ', 1)[1]}") from exc
    if params["state"] == "absent":
        return _absent_kubeadm(params, text, data, ci=ci, wiring=wiring, read=read, warnings=warnings)
    files = {}
    if wiring["flag"]:
        flag, existing = wiring["flag"], wiring["path"]
        if flag == "policy-config-file" and version >= POLICY_REMOVED:
            raise KubeSchedulerError(f"{manifest_path}: kube-scheduler is started with "
                                     f"--policy-config-file={existing}; that flag and the Policy API were "
                                     "removed in Kubernetes 1.23; left unchanged")
        source = wiring["source"]
        if source is None:
            raise KubeSchedulerError(f"{manifest_path}: kube-scheduler is started with --{flag}={existing}, "
                                     "which no volumeMount brings in from the host"
                                     f"{_mount_hint(container)}; left unchanged")
        old = read(source)
        if old is None:
            raise KubeSchedulerError(f"{source}: not found, but kube-scheduler is started with "
                                     f"--{flag}={existing} ({manifest_path}); left unchanged")
        new, api = ensure_config(source, old, version=version, extender=params["extender"],
                                 kubeconfig=params["kubeconfig"], adopt=True, rewrite=rewrite,
                                 warnings=warnings)
        files[source] = (old, new)
        return files, api, source, wiring
    fmt = preferred_api(version)
    old_config = read(config_path)
    flags = flags_dict(container_argv(container))
    new_cfg, api = ensure_config(config_path, old_config, version=version, extender=params["extender"],
                                 kubeconfig=params["kubeconfig"], carried=carried_settings(flags, fmt),
                                 rewrite=rewrite, warnings=warnings)
    flag = "policy-config-file" if fmt == POLICY else "config"
    base = ["spec", "containers", ci]
    ops = [("append", [*base, args_key], f"--{flag}={config_path}")]
    volume = None
    if host_path(data, ci, config_path) != config_path:
        name = _unique_volume_name(data)
        volume = {"name": name, "hostPath": config_path, "mountPath": config_path, "readOnly": True,
                  "pathType": "File"}
        ops.append(("append", [*base, "volumeMounts"], {"mountPath": config_path, "name": name,
                                                        "readOnly": True}))
        ops.append(("append", ["spec", "volumes"], {"hostPath": {"path": config_path, "type": "File"},
                                                    "name": name}))
    files[config_path] = (old_config, new_cfg)
    files[manifest_path] = (text, edit_text(manifest_path, text, ops, rewrite=rewrite, warnings=warnings))
    wiring = {"flag": flag, "path": config_path, "source": config_path, "volume": volume}
    return files, api, config_path, wiring


def _absent_kubeadm(params, text, data, *, ci, wiring, read, warnings):
    manifest_path, config_path = params["manifest_path"], params["config_path"]
    rewrite = params.get("allow_rewrite", False)
    files = {}
    source = wiring["source"]
    if wiring["flag"] and source:
        old = read(source)
        if old is not None:
            new = strip_config(source, old, params["extender"], rewrite=rewrite, warnings=warnings)
            files[source] = (old, new)
            if new is None:
                files[manifest_path] = (text, _remove_wiring(params, text, data, ci=ci, wiring=wiring,
                                                             warnings=warnings))
    if config_path not in files:
        old = read(config_path)
        if old is not None and MARKER in old and source != config_path:
            files[config_path] = (old, None)  # ours, and kube-scheduler no longer uses it
    return files, None, source or config_path, {"flag": None, "path": None, "source": None, "volume": None}


def _remove_wiring(params, text, data, *, ci, wiring, warnings):
    container = data["spec"]["containers"][ci]
    base = ["spec", "containers", ci]
    ops = []
    for key in ("command", "args"):
        values = container.get(key) if isinstance(container.get(key), list) else []
        flags = [(i, n) for name in ("config", "policy-config-file")
                 for i, v, n in find_flag(values, name) if v == wiring["path"]]
        for index, count in sorted(flags, reverse=True):
            for offset in reversed(range(count)):
                ops.append(("remove", [*base, key, index + offset]))
    ours = {v.get("name") for v in data["spec"].get("volumes") or []
            if isinstance(v, dict) and str(v.get("name", "")).startswith(VOLUME_NAME)
            and (v.get("hostPath") or {}).get("path") == wiring["source"]}
    for index in reversed(range(len(container.get("volumeMounts") or []))):
        if container["volumeMounts"][index].get("name") in ours:
            ops.append(("remove_branch", [*base, "volumeMounts", index]))
    for index in reversed(range(len(data["spec"].get("volumes") or []))):
        if data["spec"]["volumes"][index].get("name") in ours:
            ops.append(("remove_branch", ["spec", "volumes", index]))
    if not ops:
        return text
    return edit_text(params["manifest_path"], text, ops, rewrite=params.get("allow_rewrite", False),
                     warnings=warnings)
