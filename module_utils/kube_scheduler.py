"""Add a scheduler extender to kube-scheduler: kubeadm manifests, RKE1 cluster.yml, RKE2 config.yaml.

Pure logic: ``plan(...)`` reads files through a callable and returns what each file
should become; the module writes. Standard library and PyYAML only (runs on targets).

Formats by Kubernetes version: the legacy Policy file (``--policy-config-file``) up
to 1.18; a KubeSchedulerConfiguration (``--config``) from 1.19, written in the
apiVersion that version prefers. Served ranges: v1beta1 1.19-1.22, v1beta2
1.22-1.27, v1beta3 1.23-1.28, v1 1.25+. The Policy API was removed in 1.23.
"""

import copy
import json
import os
import re

import yaml
from ansible.module_utils.kube_scheduler_yaml import (
    YamlSpliceError,
    append,
    find,
    remove,
    replace_item,
    sequence_indent,
    set_key,
)
from ansible.module_utils.text_file import read_text
from ansible.module_utils.yaml_edit import YamlEditError, append_to_list, remove_key, set_scalar

GROUP = "kubescheduler.config.k8s.io"
POLICY = "Policy"
KSC = "KubeSchedulerConfiguration"
SERVED = {
    "v1beta1": ((1, 19), (1, 22)),
    "v1beta2": ((1, 22), (1, 27)),
    "v1beta3": ((1, 23), (1, 28)),
    "v1": ((1, 25), (1, 999)),
}
# Written once, at the top of a file this module creates: state=absent deletes only such files.
MARKER = "# Written by gpunode kube_scheduler_extender; state=absent removes this file."
VOLUME_NAME = "gpunode-scheduler-extender"
DEFAULT_CONFIG_PATH = {
    "kubeadm": "/etc/kubernetes/scheduler-extender-config.yaml",
    "rke": "/etc/kubernetes/scheduler-extender-config.yaml",
    "rke2": "/etc/rancher/rke2/scheduler-extender-config.yaml",
}
DEFAULT_KUBECONFIG = {
    "kubeadm": "/etc/kubernetes/scheduler.conf",
    "rke": "/etc/kubernetes/ssl/kubecfg-kube-scheduler.yaml",
    "rke2": "/var/lib/rancher/rke2/server/cred/scheduler.kubeconfig",
}
DEFAULT_MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"
DEFAULT_RKE2_CONFIG = "/etc/rancher/rke2/config.yaml"
# Flags RKE1 and RKE2 give kube-scheduler themselves (not visible on the host): their
# meaning goes into a new --config file, which makes the scheduler ignore them.
FLAVOR_FLAGS = {"rke": {"leader-elect": "true", "profiling": "false"}, "rke2": {"profiling": "false"}}
# Top-level fields whose meaning is the same in every KubeSchedulerConfiguration version:
# a file holding only these may be moved to a served apiVersion by rewriting apiVersion.
PORTABLE_FIELDS = {
    "apiVersion",
    "kind",
    "clientConnection",
    "leaderElection",
    "extenders",
    "parallelism",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "enableProfiling",
    "enableContentionProfiling",
}
INSECURE_FIELDS = ("healthzBindAddress", "metricsBindAddress")
SKELETON_FIELDS = {
    "apiVersion",
    "kind",
    "clientConnection",
    "leaderElection",
    "enableProfiling",
    "enableContentionProfiling",
    *INSECURE_FIELDS,
}


class KubeSchedulerError(Exception):
    """Refusal or bad input; the message names the file and the problem."""


# ---------------------------------------------------------------- versions


def parse_version(text):
    match = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.\d+)?", str(text or ""))
    if not match or int(match.group(1)) != 1:
        raise KubeSchedulerError(f"kubernetes_version {text!r}: expected a version like 1.29.2 or v1.29.2")
    return (1, int(match.group(2)))


def served(api_version, version):
    low, high = SERVED[api_version]
    return low <= version <= high


def preferred_api(version):
    """apiVersion (short: v1beta1...) to write for a new file, or POLICY."""
    if version <= (1, 18):
        return POLICY
    if version <= (1, 21):
        return "v1beta1"
    if version == (1, 22):
        return "v1beta2"
    if version <= (1, 24):
        return "v1beta3"
    return "v1"


def served_list(version):
    return ", ".join(f"{GROUP}/{api}" for api in SERVED if served(api, version)) or "none"


# ---------------------------------------------------------------- extender entries


def extender_entry(extender, fmt):
    """The extender as it appears in a KubeSchedulerConfiguration or (fmt POLICY) a Policy."""
    entry = {"urlPrefix": extender["url_prefix"], "filterVerb": extender["filter_verb"]}
    if extender.get("bind_verb"):
        entry["bindVerb"] = extender["bind_verb"]
    entry["enableHttps" if fmt == POLICY else "enableHTTPS"] = bool(extender["enable_https"])
    entry["nodeCacheCapable"] = bool(extender["node_cache_capable"])
    if extender.get("managed_resources"):
        entry["managedResources"] = [
            {"name": r["name"], "ignoredByScheduler": bool(r.get("ignored_by_scheduler", False))}
            for r in extender["managed_resources"]
        ]
    entry["ignorable"] = bool(extender["ignorable"])
    return entry


def _resource_names(entry):
    return {r.get("name") for r in entry.get("managedResources") or [] if isinstance(r, dict)}


def find_ours(extenders, entry):
    """Index of our extender (same urlPrefix, or one of our managed resources), or None."""
    names = _resource_names(entry)
    for index, item in enumerate(extenders):
        if isinstance(item, dict) and (
            item.get("urlPrefix") == entry["urlPrefix"] or names & _resource_names(item)
        ):
            return index
    return None


def validate_config(data, version, path):
    """Check what kube-scheduler would refuse for this version; raise naming path."""
    if not isinstance(data, dict):
        raise KubeSchedulerError(f"{path}: not a mapping")
    kind = data.get("kind")
    if kind == POLICY:
        if version >= (1, 23):
            raise KubeSchedulerError(
                f"{path}: Policy files are not read by Kubernetes {version[0]}.{version[1]} (removed in 1.23)"
            )
        https_key = "enableHttps"
    elif kind == KSC:
        group, _, api = str(data.get("apiVersion")).partition("/")
        if group != GROUP or api not in SERVED or not served(api, version):
            raise KubeSchedulerError(
                f"{path}: apiVersion {data.get('apiVersion')} is not served by "
                f"Kubernetes {version[0]}.{version[1]} (served: {served_list(version)})"
            )
        if not (data.get("clientConnection") or {}).get("kubeconfig"):
            raise KubeSchedulerError(
                f"{path}: clientConnection.kubeconfig is empty; with --config "
                "kube-scheduler ignores --kubeconfig"
            )
        for field in INSECURE_FIELDS:
            if field in data and api not in ("v1beta1", "v1beta2"):
                raise KubeSchedulerError(f"{path}: {field} does not exist in {data['apiVersion']}")
            if (
                field in data
                and version >= (1, 23)
                and data[field] not in ("", None)
                and not str(data[field]).endswith(":0")
            ):
                raise KubeSchedulerError(f"{path}: {field} must be empty or port 0 from Kubernetes 1.23")
        https_key = "enableHTTPS"
    else:
        raise KubeSchedulerError(f"{path}: kind {kind!r} is neither {KSC} nor {POLICY}")
    extenders = data.get("extenders") or []
    if not isinstance(extenders, list):
        raise KubeSchedulerError(f"{path}: extenders is not a list")
    binders, names = [], set()
    for item in extenders:
        if not isinstance(item, dict) or not item.get("urlPrefix"):
            raise KubeSchedulerError(f"{path}: an extender without urlPrefix")
        if https_key in ("enableHTTPS",) and "enableHttps" in item:
            raise KubeSchedulerError(
                f"{path}: extender {item['urlPrefix']}: enableHttps is spelled "
                "enableHTTPS in a KubeSchedulerConfiguration"
            )
        if item.get("bindVerb"):
            binders.append(item["urlPrefix"])
        for name in _resource_names(item):
            if name in names:
                raise KubeSchedulerError(f"{path}: managed resource {name} is claimed by two extenders")
            names.add(name)
    if len(binders) > 1:
        raise KubeSchedulerError(
            f"{path}: only one extender may bind pods; bindVerb is set on " + " and ".join(binders)
        )


# ---------------------------------------------------------------- config files


def _parse_config(path, text):
    try:
        if text.lstrip().startswith("{"):
            return json.loads(text), "json"
        return yaml.safe_load(text), "yaml"
    except (ValueError, yaml.YAMLError) as exc:
        raise KubeSchedulerError(f"{path}: cannot parse ({_one_line(exc)}); left unchanged") from exc


def _one_line(exc):
    return " ".join(str(exc).split())


def _json_text(data, old_text):
    indent = 2
    match = re.search(r"\n([ \t]+)\S", old_text)
    if match:
        indent = match.group(1) if "\t" in match.group(1) else len(match.group(1))
    text = json.dumps(data, indent=indent)
    return text + ("\n" if old_text.endswith("\n") else "")


def apply_ops(path, text, ops, fmt, warnings):
    """Apply ops to text by splicing (YAML) or re-dumping (JSON); returns new text."""
    data = yaml.safe_load(text) if fmt == "yaml" else json.loads(text)
    for op in ops:
        data = _apply_data(data, op)
    if fmt == "json":
        return _json_text(data, text)
    new = text
    try:
        for op in ops:
            new = _apply_text(new, op)
    except YamlSpliceError as exc:
        warnings.append(f"{path}: comments and layout could not be kept ({exc}); the file was re-written")
        new = yaml.safe_dump(data, default_flow_style=False, sort_keys=False, allow_unicode=True)
    if yaml.safe_load(new) != data:  # defence in depth: the splicer checks each step already
        raise KubeSchedulerError(f"{path}: internal error: edit does not match the plan; left unchanged")
    return new


def _apply_data(data, op):
    kind, path = op[0], op[1]
    if data is None:
        data = {}
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    if kind in ("set", "replace"):
        parent[path[-1]] = copy.deepcopy(op[2])
    elif kind == "append":
        parent[path[-1]].append(copy.deepcopy(op[2]))
    elif kind == "remove":
        del parent[path[-1]]
    return data


def _apply_text(text, op):
    kind, path = op[0], op[1]
    if kind == "set":
        return set_key(text, path, op[2], seq_indent=op[3] if len(op) > 3 else 0)
    if kind == "append":
        return append(text, path, op[2])
    if kind == "replace":
        return replace_item(text, path, op[2])
    return remove(text, path)


def new_config(fmt, version, extender, kubeconfig, carried=None):
    """Text of a new config file: a Policy or a KubeSchedulerConfiguration."""
    entry = extender_entry(extender, fmt)
    if fmt == POLICY:
        data = {"apiVersion": "v1", "kind": POLICY, "extenders": [entry]}
    else:
        data = {"apiVersion": f"{GROUP}/{fmt}", "kind": KSC}
        carried = copy.deepcopy(carried or {})
        client = carried.pop("clientConnection", {})
        client.setdefault("kubeconfig", kubeconfig)
        data["clientConnection"] = client
        data.update(carried)
        data["extenders"] = [entry]
    validate_config(data, version, "new config")
    return MARKER + "\n" + yaml.safe_dump(data, default_flow_style=False, sort_keys=False)


def merge_config(path, text, *, version, extender, kubeconfig, warnings):
    """(new_text, api_version) with our extender merged into an existing config file."""
    data, fmt = _parse_config(path, text)
    if not isinstance(data, dict):
        raise KubeSchedulerError(f"{path}: not a mapping; left unchanged")
    ops, kind = [], data.get("kind")
    if kind == POLICY:
        if version >= (1, 23):
            raise KubeSchedulerError(
                f"{path}: is a Policy file; the Policy API was removed in Kubernetes "
                "1.23, migrate it to a KubeSchedulerConfiguration first; left unchanged"
            )
        entry_fmt, api_out = POLICY, POLICY
    elif kind == KSC:
        group, _, api = str(data.get("apiVersion")).partition("/")
        if group != GROUP or api not in SERVED:
            raise KubeSchedulerError(
                f"{path}: apiVersion {data.get('apiVersion')!r} is not a known "
                f"{KSC} version ({', '.join(SERVED)}); left unchanged"
            )
        if version < (1, 19):
            raise KubeSchedulerError(
                f"{path}: {data.get('apiVersion')} needs Kubernetes 1.19+, cluster is "
                f"{version[0]}.{version[1]}; left unchanged"
            )
        api_out = data["apiVersion"]
        if not served(api, version):
            ops += _convert_ops(path, data, api, version)
            api_out = f"{GROUP}/{preferred_api(version)}"
        entry_fmt = api_out
        client = data.get("clientConnection")
        if not isinstance(client, dict):
            ops.append(("set", ("clientConnection",), {"kubeconfig": kubeconfig}))
        elif not client.get("kubeconfig"):
            ops.append(("set", ("clientConnection", "kubeconfig"), kubeconfig))
    else:
        raise KubeSchedulerError(f"{path}: kind {kind!r} is neither {KSC} nor {POLICY}; left unchanged")
    ops += _extender_ops(path, data, extender_entry(extender, entry_fmt))
    if not ops:
        return text, api_out
    new = apply_ops(path, text, ops, fmt, warnings)
    validate_config(yaml.safe_load(new), version, path)
    return new, api_out


def _convert_ops(path, data, api, version):
    target = preferred_api(version)
    blocking = sorted(set(data) - PORTABLE_FIELDS - set(INSECURE_FIELDS))
    for profile in data.get("profiles") or []:
        if not isinstance(profile, dict) or set(profile) - {"schedulerName"}:
            blocking.append("profiles (plugins/pluginConfig differ between versions)")
            break
    else:
        if "profiles" in blocking:
            blocking.remove("profiles")
    ops = []
    for field in INSECURE_FIELDS:
        if field in data and target not in ("v1beta1", "v1beta2"):
            if data[field] in ("", None) or str(data[field]).endswith(":0"):
                ops.append(("remove", (field,)))
            else:
                blocking.append(f"{field}: {data[field]} (insecure serving was removed)")
    if blocking:
        raise KubeSchedulerError(
            f"{path}: apiVersion {data['apiVersion']} is not served by Kubernetes {version[0]}.{version[1]} "
            f"(served: {served_list(version)}) and cannot be converted safely because of: "
            f"{', '.join(blocking)}; migrate it by hand; left unchanged"
        )
    return [("set", ("apiVersion",), f"{GROUP}/{target}"), *ops]


def _extender_ops(path, data, entry):
    extenders = data.get("extenders")
    if extenders is None:
        return [("set", ("extenders",), [entry])]
    if not isinstance(extenders, list):
        raise KubeSchedulerError(f"{path}: extenders is not a list; left unchanged")
    index = find_ours(extenders, entry)
    if index is not None:
        merged = dict(extenders[index])
        merged.update(entry)
        for key in ("bindVerb",):
            if key not in entry:
                merged.pop(key, None)
        return [] if merged == extenders[index] else [("replace", ("extenders", index), merged)]
    for item in extenders:
        if isinstance(item, dict) and item.get("bindVerb") and entry.get("bindVerb"):
            raise KubeSchedulerError(
                f"{path}: extender {item.get('urlPrefix')} already binds pods "
                "(bindVerb); kube-scheduler allows only one binding extender; "
                "left unchanged"
            )
        clash = _resource_names(entry) & _resource_names(item if isinstance(item, dict) else {})
        if clash:
            raise KubeSchedulerError(
                f"{path}: extender {item.get('urlPrefix')} already manages "
                f"{', '.join(sorted(clash))}; left unchanged"
            )
    return [("append", ("extenders",), entry)]


def strip_config(path, text, extender, warnings):
    """(new_text or None to delete, removed_anything) for state=absent."""
    data, fmt = _parse_config(path, text)
    if not isinstance(data, dict):
        raise KubeSchedulerError(f"{path}: not a mapping; left unchanged")
    extenders = data.get("extenders") if isinstance(data.get("extenders"), list) else []
    entry = extender_entry(extender, POLICY if data.get("kind") == POLICY else "ksc")
    index = find_ours(extenders, entry)
    rest = [e for n, e in enumerate(extenders) if n != index]
    ours = MARKER in text
    if ours and not rest and not set(data) - SKELETON_FIELDS - {"extenders"}:
        return None, True
    if index is None:
        return text, False
    op = ("remove", ("extenders",)) if not rest else ("remove", ("extenders", index))
    return apply_ops(path, text, [op], fmt, warnings), True


# ---------------------------------------------------------------- flags


def find_flag(args, name):
    """[(index, value, count)] for --name=value or --name value (count: items used)."""
    found = []
    for index, arg in enumerate(args):
        if not isinstance(arg, str):
            continue
        if arg.startswith(f"--{name}="):
            found.append((index, arg.split("=", 1)[1], 1))
        elif arg == f"--{name}" and index + 1 < len(args):
            found.append((index, str(args[index + 1]), 2))
    return found


def flags_dict(args):
    flags = {}
    for arg in args:
        if isinstance(arg, str) and arg.startswith("--"):
            name, _, value = arg[2:].partition("=")
            flags[name] = value
    return flags


def _bool(value):
    return str(value).lower() in ("true", "1", "yes", "")


def carried_settings(flags, api):
    """KubeSchedulerConfiguration fields that carry the meaning of flags --config makes it ignore."""
    out = {}
    client = {}
    if flags.get("kubeconfig"):
        client["kubeconfig"] = flags["kubeconfig"]
    for flag, field, conv in (
        ("kube-api-qps", "qps", float),
        ("kube-api-burst", "burst", int),
        ("kube-api-content-type", "contentType", str),
    ):
        if flag in flags:
            client[field] = conv(flags[flag])
    if client:
        out["clientConnection"] = client
    election = {}
    for flag, field, conv in (
        ("leader-elect", "leaderElect", _bool),
        ("leader-elect-lease-duration", "leaseDuration", str),
        ("leader-elect-renew-deadline", "renewDeadline", str),
        ("leader-elect-retry-period", "retryPeriod", str),
        ("leader-elect-resource-lock", "resourceLock", str),
        ("leader-elect-resource-name", "resourceName", str),
        ("leader-elect-resource-namespace", "resourceNamespace", str),
        ("lock-object-name", "resourceName", str),
        ("lock-object-namespace", "resourceNamespace", str),
    ):
        if flag in flags:
            election[field] = conv(flags[flag])
    if election:
        out["leaderElection"] = election
    if "profiling" in flags:
        out["enableProfiling"] = _bool(flags["profiling"])
    if "contention-profiling" in flags:
        out["enableContentionProfiling"] = _bool(flags["contention-profiling"])
    if api in ("v1beta1", "v1beta2") and ("port" in flags or "address" in flags):
        port = flags.get("port", "10251")
        # kubernetes #96345: with --config, --port=0 no longer closes the insecure port
        address = "0.0.0.0:0" if str(port) == "0" else f"{flags.get('address') or '0.0.0.0'}:{port}"
        out["healthzBindAddress"] = address
        out["metricsBindAddress"] = address
    return out


# ---------------------------------------------------------------- kubeadm manifest


def _manifest(path, text):
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KubeSchedulerError(f"{path}: not valid YAML ({_one_line(exc)}); left unchanged") from exc
    containers = ((data or {}).get("spec") or {}).get("containers") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("kind") != "Pod" or not isinstance(containers, list):
        raise KubeSchedulerError(
            f"{path}: not a static Pod manifest (kind Pod with spec.containers); left unchanged"
        )
    for index, container in enumerate(containers):
        command = container.get("command") or [] if isinstance(container, dict) else []
        if isinstance(container, dict) and (
            container.get("name") == "kube-scheduler"
            or (command and str(command[0]).endswith("kube-scheduler"))
        ):
            return data, index
    raise KubeSchedulerError(f"{path}: no kube-scheduler container; left unchanged")


def _container_args(container):
    key = "command" if isinstance(container.get("command"), list) else "args"
    return key, list(container.get("command") or []) + list(container.get("args") or [])


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
                best = (mount_path, source["path"].rstrip("/") + container_path[len(mount_path) :])
    return best[1] if best else None


def _mount_hint(container):
    bad = [
        str(m.get("mountPath"))
        for m in container.get("volumeMounts") or []
        if isinstance(m, dict) and not str(m.get("mountPath", "")).startswith("/")
    ]
    return f" (mountPath {', '.join(bad)} is not an absolute path)" if bad else ""


def _unique_volume_name(data):
    taken = {v.get("name") for v in data["spec"].get("volumes") or [] if isinstance(v, dict)}
    name, n = VOLUME_NAME, 1
    while name in taken:
        n += 1
        name = f"{VOLUME_NAME}-{n}"
    return name


def _flag_path(flags_found, flag, path, manifest_path):
    if len(flags_found) > 1:
        raise KubeSchedulerError(
            f"{manifest_path}: --{flag} is given {len(flags_found)} times; left unchanged"
        )
    return flags_found[0][1] if flags_found else None


def plan_kubeadm(params, version, read, warnings):
    manifest_path, config_path = params["manifest_path"], params["config_path"]
    kubeconfig = params["kubeconfig"]
    text = read(manifest_path)
    if text is None:
        raise KubeSchedulerError(f"{manifest_path}: not found")
    data, ci = _manifest(manifest_path, text)
    container = data["spec"]["containers"][ci]
    args_key, args = _container_args(container)
    cfg = _flag_path(find_flag(args, "config"), "config", config_path, manifest_path)
    pol = _flag_path(find_flag(args, "policy-config-file"), "policy-config-file", config_path, manifest_path)
    files = {}
    if params["state"] == "absent":
        return _absent_kubeadm(params, text, data, ci=ci, existing=cfg or pol, read=read, warnings=warnings)
    existing = cfg or pol
    if existing:
        flag = "config" if cfg else "policy-config-file"
        if pol and version >= (1, 23):
            raise KubeSchedulerError(
                f"{manifest_path}: kube-scheduler is started with "
                f"--policy-config-file={pol}; that flag and the Policy API were removed "
                "in Kubernetes 1.23; "
                "left unchanged"
            )
        source = host_path(data, ci, existing)
        if source is None:
            raise KubeSchedulerError(
                f"{manifest_path}: kube-scheduler is started with --{flag}={existing}, "
                "which no volumeMount brings in from the host"
                f"{_mount_hint(container)}; left unchanged"
            )
        old = read(source)
        if old is None:
            raise KubeSchedulerError(
                f"{source}: not found, but kube-scheduler is started with "
                f"--{flag}={existing} ({manifest_path}); left unchanged"
            )
        new, api = merge_config(
            source,
            old,
            version=version,
            extender=params["extender"],
            kubeconfig=kubeconfig,
            warnings=warnings,
        )
        files[source] = (old, new)
        return files, api, source
    fmt = preferred_api(version)
    old_config = read(config_path)
    if old_config is not None and MARKER not in old_config:
        raise KubeSchedulerError(
            f"{config_path}: exists but kube-scheduler is not started with it "
            f"({manifest_path}); refusing to take it over, choose another config_path; "
            "left unchanged"
        )
    if old_config is not None:
        new_cfg, api = merge_config(
            config_path,
            old_config,
            version=version,
            extender=params["extender"],
            kubeconfig=kubeconfig,
            warnings=warnings,
        )
    else:
        carried = carried_settings(flags_dict(args), fmt) if fmt != POLICY else {}
        new_cfg = new_config(fmt, version, params["extender"], kubeconfig, carried)
        api = POLICY if fmt == POLICY else f"{GROUP}/{fmt}"
    flag = "--policy-config-file" if fmt == POLICY else "--config"
    ops = [("append", ("spec", "containers", ci, args_key), f"{flag}={config_path}")]
    if host_path(data, ci, config_path) != config_path:
        name = _unique_volume_name(data)
        mount = {"mountPath": config_path, "name": name, "readOnly": True}
        volume = {"hostPath": {"path": config_path, "type": "File"}, "name": name}
        if isinstance(container.get("volumeMounts"), list):
            ops.append(("append", ("spec", "containers", ci, "volumeMounts"), mount))
        else:
            ops.append(("set", ("spec", "containers", ci, "volumeMounts"), [mount]))
        if isinstance(data["spec"].get("volumes"), list):
            ops.append(("append", ("spec", "volumes"), volume))
        else:
            ops.append(("set", ("spec", "volumes"), [volume]))
    files[config_path] = (old_config, new_cfg)
    files[manifest_path] = (text, apply_ops(manifest_path, text, ops, "yaml", warnings))
    return files, api, config_path


def _absent_kubeadm(params, text, data, *, ci, existing, read, warnings):
    manifest_path, config_path = params["manifest_path"], params["config_path"]
    files = {}
    source = host_path(data, ci, existing) if existing else None
    if existing and source:
        old = read(source)
        if old is not None:
            new, _ = strip_config(source, old, params["extender"], warnings)
            files[source] = (old, new)
            if new is None:
                files[manifest_path] = (
                    text,
                    _remove_wiring(
                        manifest_path,
                        text,
                        data,
                        ci=ci,
                        container_path=existing,
                        source=source,
                        warnings=warnings,
                    ),
                )
    if config_path not in files:
        old = read(config_path)
        if old is not None and MARKER in old and source != config_path:
            files[config_path] = (old, None)  # ours, and kube-scheduler no longer uses it
    return files, None, source or config_path


def _remove_wiring(manifest_path, text, data, *, ci, container_path, source, warnings):
    container = data["spec"]["containers"][ci]
    args_key = "command" if isinstance(container.get("command"), list) else "args"
    ops = []
    flags = [
        (i, n)
        for name in ("config", "policy-config-file")
        for i, v, n in find_flag(container.get(args_key) or [], name)
        if v == container_path
    ]
    for index, count in sorted(flags, reverse=True):
        for offset in reversed(range(count)):
            ops.append(("remove", ("spec", "containers", ci, args_key, index + offset)))
    ours = {
        v.get("name")
        for v in data["spec"].get("volumes") or []
        if isinstance(v, dict)
        and str(v.get("name", "")).startswith(VOLUME_NAME)
        and (v.get("hostPath") or {}).get("path") == source
    }
    for index in reversed(range(len(container.get("volumeMounts") or []))):
        if container["volumeMounts"][index].get("name") in ours:
            ops.append(("remove", ("spec", "containers", ci, "volumeMounts", index)))
    for index in reversed(range(len(data["spec"].get("volumes") or []))):
        if data["spec"]["volumes"][index].get("name") in ours:
            ops.append(("remove", ("spec", "volumes", index)))
    return apply_ops(manifest_path, text, ops, "yaml", warnings) if ops else text


# ---------------------------------------------------------------- RKE1 and RKE2


def _load_mapping(path, text):
    try:
        data = yaml.safe_load(text) if text is not None else None
    except yaml.YAMLError as exc:
        raise KubeSchedulerError(f"{path}: not valid YAML ({_one_line(exc)}); left unchanged") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise KubeSchedulerError(f"{path}: not a YAML mapping; left unchanged")
    return data


def plan_rke_cluster(params, version, read, warnings):
    """Edit services.scheduler.extra_args in cluster.yml; returns (files, api, config_path)."""
    path, config_path = params["cluster_yml"], params["config_path"]
    text = read(path)
    if text is None:
        raise KubeSchedulerError(f"{path}: not found")
    data = _load_mapping(path, text)
    chain = [("services",), ("services", "scheduler"), ("services", "scheduler", "extra_args")]
    node = data
    for step in chain:
        node = node.get(step[-1]) if isinstance(node, dict) else None
        if node is not None and not isinstance(node, dict):
            raise KubeSchedulerError(f"{path}: {'.'.join(step)} is not a mapping; left unchanged")
    extra = node or {}
    cfg, pol = extra.get("config"), extra.get("policy-config-file")
    fmt = preferred_api(version)
    if params["state"] == "absent":
        key = "config" if cfg == config_path else "policy-config-file" if pol == config_path else None
        if key is None:
            return {}, None, config_path
        target = _emptied_parent(text, ("services", "scheduler", "extra_args", key))
        new = edit_rke(path, text, [("remove_key", target)], [("remove", target)], warnings)
        return {path: (text, new)}, None, config_path
    if pol and version >= (1, 23):
        raise KubeSchedulerError(
            f"{path}: services.scheduler.extra_args.policy-config-file={pol}: "
            "the Policy API was removed in Kubernetes 1.23; left unchanged"
        )
    if cfg or pol:
        return {}, POLICY if (pol and not cfg) else None, str(cfg or pol)
    key = "policy-config-file" if fmt == POLICY else "config"
    # create the missing levels as one nested value under the deepest existing mapping
    keys = ["services", "scheduler", "extra_args", key]
    depth, probe = 0, data
    while depth < 3 and isinstance(probe.get(keys[depth]), dict):
        probe = probe[keys[depth]]
        depth += 1
    value = config_path
    for name in reversed(keys[depth + 1 :]):
        value = {name: value}
    target = tuple(keys[: depth + 1])
    # yaml_edit turns an empty flow mapping (rke's generated `extra_args: {}`) into a block
    # one; the own splicer keeps it flow, so state=absent gives back `{}` byte for byte
    parent = find(yaml.compose(text, Loader=yaml.SafeLoader), tuple(keys[:depth]))
    flow = depth > 0 and parent is not None and getattr(parent[1], "flow_style", False)
    edits = [] if flow else [("set_scalar", tuple(keys), config_path)]
    new = edit_rke(path, text, edits, [("set", target, value)], warnings)
    api = POLICY if fmt == POLICY else f"{GROUP}/{fmt}"
    return {path: (text, new)}, api, config_path


def edit_rke(path, text, edits, fallback_ops, warnings):
    """RKE1 cluster.yml / RKE2 config.yaml edits through yaml_edit (comment-preserving).

    ``edits`` are (function, path[, value]) for yaml_edit; ``fallback_ops`` the same
    change as ops for apply_ops, used to check the result and when yaml_edit cannot
    make an edit (an empty file, a layout it refuses).
    """
    functions = {"set_scalar": set_scalar, "append_to_list": append_to_list, "remove_key": remove_key}
    expected = yaml.safe_load(text) if text.strip() else None
    for op in fallback_ops:
        expected = _apply_data(expected, op)
    if text.strip() and edits:
        try:
            new = text
            for name, where, *value in edits:
                new = functions[name](new, list(where), *value)
            if yaml.safe_load(new) == expected:
                return new
        except (YamlEditError, yaml.YAMLError):
            pass
    return apply_ops(path, text, fallback_ops, "yaml", warnings)


def _emptied_parent(text, path):
    """path, or the block mapping above it that holds nothing else (created along with it)."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    while len(path) > 1:
        parent = find(root, path[:-1])[1]
        if parent.flow_style or len(parent.value) != 1:
            break
        path = path[:-1]
    return path


def _rke2_mounts(items):
    out = {}
    for item in items:
        parts = str(item).split(":")
        if len(parts) >= 2:
            out[parts[1]] = parts[0]
    return out


def plan_rke2(params, version, read, warnings):
    path, config_path = params["rke2_config"], params["config_path"]
    text = read(path)
    data = _load_mapping(path, text)
    text = text or ""
    args = data.get("kube-scheduler-arg")
    args = [args] if isinstance(args, str) else list(args or [])
    mounts = data.get("kube-scheduler-extra-mount")
    mounts = [mounts] if isinstance(mounts, str) else list(mounts or [])
    existing = [
        (i, str(a).split("=", 1)[1])
        for i, a in enumerate(args)
        if re.match(r"^(--)?(config|policy-config-file)=", str(a))
    ]
    if len(existing) > 1:
        raise KubeSchedulerError(
            f"{path}: kube-scheduler-arg sets the scheduler config {len(existing)} times; left unchanged"
        )
    files = {}
    if params["state"] == "absent":
        if existing:
            source = _rke2_mounts(mounts).get(existing[0][1], existing[0][1])
            old = read(source)
            if old is not None:
                new, _ = strip_config(source, old, params["extender"], warnings)
                files[source] = (old, new)
                if new is None:
                    files[path] = (
                        text,
                        _rke2_unwire(
                            path, text, data, container_path=existing[0][1], source=source, warnings=warnings
                        ),
                    )
        return files, None, existing[0][1] if existing else config_path
    if existing:
        source = _rke2_mounts(mounts).get(existing[0][1], existing[0][1])
        if "policy-config-file" in str(args[existing[0][0]]) and version >= (1, 23):
            raise KubeSchedulerError(
                f"{path}: kube-scheduler-arg {args[existing[0][0]]}: the Policy API was "
                "removed in Kubernetes 1.23; left unchanged"
            )
        old = read(source)
        if old is None:
            raise KubeSchedulerError(f"{source}: not found, but {path} starts kube-scheduler with it")
        new, api = merge_config(
            source,
            old,
            version=version,
            extender=params["extender"],
            kubeconfig=params["kubeconfig"],
            warnings=warnings,
        )
        files[source] = (old, new)
        return files, api, source
    fmt = preferred_api(version)
    old_config = read(config_path)
    if old_config is not None and MARKER not in old_config:
        raise KubeSchedulerError(
            f"{config_path}: exists but {path} does not start kube-scheduler with it; "
            "choose another config_path; left unchanged"
        )
    if old_config is not None:
        new_cfg, api = merge_config(
            config_path,
            old_config,
            version=version,
            extender=params["extender"],
            kubeconfig=params["kubeconfig"],
            warnings=warnings,
        )
    else:
        carried = carried_settings(FLAVOR_FLAGS["rke2"], fmt) if fmt != POLICY else {}
        new_cfg = new_config(fmt, version, params["extender"], params["kubeconfig"], carried)
        api = POLICY if fmt == POLICY else f"{GROUP}/{fmt}"
    flag = "policy-config-file" if fmt == POLICY else "config"
    indent = sequence_indent(text) if text.strip() else 0
    ops = [_list_add_op(data, "kube-scheduler-arg", f"{flag}={config_path}", indent)]
    if _rke2_mounts(mounts).get(config_path) != config_path:
        mount = f"{config_path}:{config_path}:ro"
        ops.append(_list_add_op(data, "kube-scheduler-extra-mount", mount, indent))
    ops = [op for group in ops for op in group]
    edits = [
        ("append_to_list", (key,), item)
        for key, item in (
            ("kube-scheduler-arg", f"{flag}={config_path}"),
            ("kube-scheduler-extra-mount", f"{config_path}:{config_path}:ro"),
        )
        if key == "kube-scheduler-arg" or _rke2_mounts(mounts).get(config_path) != config_path
    ]
    files[config_path] = (old_config, new_cfg)
    files[path] = (text if text else None, edit_rke(path, text, edits, ops, warnings))
    return files, api, config_path


def _list_add_op(data, key, item, indent):
    value = data.get(key)
    if isinstance(value, list):
        return [("append", (key,), item)]
    if isinstance(value, str):
        return [("remove", (key,)), ("set", (key,), [value, item], indent)]
    return [("set", (key,), [item], indent)]


def _rke2_unwire(path, text, data, *, container_path, source, warnings):
    ops = []
    for key, match in (
        (
            "kube-scheduler-arg",
            lambda a: re.match(rf"^(--)?(config|policy-config-file)={re.escape(container_path)}$", a),
        ),
        ("kube-scheduler-extra-mount", lambda a: a.startswith(f"{source}:{container_path}")),
    ):
        value = data.get(key)
        items = [value] if isinstance(value, str) else list(value or [])
        hits = [i for i, a in enumerate(items) if match(str(a))]
        if hits and (len(hits) == len(items) or isinstance(value, str)):
            ops.append(("remove", (key,)))
        else:
            ops += [("remove", (key, i)) for i in reversed(hits)]
    edits = [("remove_key", op[1]) for op in ops]
    return edit_rke(path, text, edits, ops, warnings) if ops else text


# ---------------------------------------------------------------- entry point


def read_file(path):
    try:
        return read_text(path, KubeSchedulerError)
    except KubeSchedulerError as exc:
        raise KubeSchedulerError(f"{exc}; left unchanged") from exc


def plan(params, read=read_file):
    """Returns dict(files={path: (old or None, new or None)}, api_version, warnings, config_path)."""
    warnings = []
    version = parse_version(params["kubernetes_version"])
    flavor = params["flavor"]
    params = dict(params)
    params["config_path"] = params.get("config_path") or DEFAULT_CONFIG_PATH[flavor]
    params["kubeconfig"] = params.get("kubeconfig") or DEFAULT_KUBECONFIG[flavor]
    params["manifest_path"] = params.get("manifest_path") or DEFAULT_MANIFEST
    params["rke2_config"] = params.get("rke2_config") or DEFAULT_RKE2_CONFIG
    if not os.path.isabs(params["config_path"]):
        raise KubeSchedulerError(f"config_path {params['config_path']}: must be an absolute path")
    if flavor == "kubeadm":
        manifest_dir = os.path.dirname(params["manifest_path"])
        if os.path.dirname(params["config_path"]) == manifest_dir:
            raise KubeSchedulerError(
                f"config_path {params['config_path']}: must not be in the static pod "
                f"directory {manifest_dir} (the kubelet would run it as a pod)"
            )
        files, api, config_path = plan_kubeadm(params, version, read, warnings)
    elif flavor == "rke2":
        files, api, config_path = plan_rke2(params, version, read, warnings)
    elif params.get("cluster_yml"):
        files, api, config_path = plan_rke_cluster(params, version, read, warnings)
    else:
        files, api, config_path = _plan_rke_node(params, version, read, warnings)
    files = {p: (old, new) for p, (old, new) in files.items() if old != new}
    return {"files": files, "api_version": api, "warnings": warnings, "config_path": config_path}


def _plan_rke_node(params, version, read, warnings):
    """RKE1 control-plane node: the config file cluster.yml points kube-scheduler at."""
    path = params["config_path"]
    old = read(path)
    if params["state"] == "absent":
        if old is None:
            return {}, None, path
        new, _ = strip_config(path, old, params["extender"], warnings)
        return {path: (old, new)}, None, path
    if old is not None:
        new, api = merge_config(
            path,
            old,
            version=version,
            extender=params["extender"],
            kubeconfig=params["kubeconfig"],
            warnings=warnings,
        )
        return {path: (old, new)}, api, path
    fmt = preferred_api(version)
    carried = carried_settings(FLAVOR_FLAGS["rke"], fmt) if fmt != POLICY else {}
    api = POLICY if fmt == POLICY else f"{GROUP}/{fmt}"
    text = new_config(fmt, version, params["extender"], params["kubeconfig"], carried)
    return {path: (None, text)}, api, path


def scheduler_pids(proc_root="/proc"):
    """PIDs of the running kube-scheduler processes (command name ``kube-scheduler``).

    Taken just before a change, so that the health check can first wait for
    these to be replaced: until the kubelet (or rke2-server) restarts the
    scheduler, the old one keeps answering /healthz with 200.
    """
    pids = []
    try:
        entries = os.listdir(proc_root)
    except OSError:
        return pids
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc_root, entry, "comm"), encoding="utf-8", errors="replace") as handle:
                if handle.read().strip() == "kube-scheduler":
                    pids.append(int(entry))
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return sorted(pids)
