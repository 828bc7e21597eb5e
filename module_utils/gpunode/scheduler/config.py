# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The GPU-share scheduler extender in kube-scheduler's configuration.

Pure logic, no Ansible: ``plan(params, read)`` reads files through ``read``
and returns what each file should become; the module writes. Files are edited
through ``yaml_edit`` (every byte an edit does not touch is kept); a file that
cannot be edited exactly is refused unless ``allow_rewrite`` is set.

Formats by Kubernetes version: the legacy Policy file (``--policy-config-file``)
up to 1.18; from 1.19 a KubeSchedulerConfiguration (``--config``) in the
apiVersion that version prefers (``SERVED`` below says which versions serve
which apiVersion, with the sources).

Standard library and PyYAML (python3-yaml) only: this runs on target hosts;
modules check ``yaml_edit.YAML_IMPORT_ERROR`` before calling anything here.
"""

import copy
import json

try:
    import yaml
except ImportError:  # the node has no python3-yaml; the module says so
    yaml = None

from ansible.module_utils.gpunode.common.text_file import read_text
from ansible.module_utils.gpunode.formats.json_config import detect_indent
from ansible.module_utils.gpunode.formats.json_config import render as render_json
from ansible.module_utils.gpunode.formats.kube_version import minor as kube_minor
from ansible.module_utils.gpunode.formats.kube_version import parse as parse_kube_version
from ansible.module_utils.gpunode.formats.yaml_edit import YamlEditError, apply_ops_to_data, is_flow
from ansible.module_utils.gpunode.formats.yaml_edit import edit as edit_yaml

GROUP = "kubescheduler.config.k8s.io"
POLICY = "Policy"
KSC = "KubeSchedulerConfiguration"

# apiVersion -> (first, last) Kubernetes minor that serves it; None: still served.
#   v1beta1  1.19-1.22  beta in 1.19; removed with the Policy API when v1beta3 came in 1.23
#                       (kubernetes/enhancements keps/sig-scheduling/785-scheduler-component-
#                       config-api/README.md, summary and implementation history 2021-09-01)
#   v1beta2  1.22-1.27  introduced in 1.22 (KEP-785); removed in 1.28 (kubernetes/kubernetes#117649)
#   v1beta3  1.23-1.28  introduced in 1.23 (KEP-785); removed in 1.29 (kubernetes/kubernetes#119994)
#   v1       1.25-      GA in 1.25 (KEP-785, 2022-05-18); the only version served from 1.29 on:
#                       staging/src/k8s.io/kube-scheduler/config holds no later version through
#                       the 1.38 cycle (kubernetes/kubernetes, checked 2026-11)
SERVED = {
    "v1beta1": ((1, 19), (1, 22)),
    "v1beta2": ((1, 22), (1, 27)),
    "v1beta3": ((1, 23), (1, 28)),
    "v1": ((1, 25), None),
}
# The last Kubernetes minor the table above was checked against.
CHECKED_THROUGH = (1, 38)
# The Policy API (--policy-config-file) was removed in 1.23 (KEP-785 history, 2021-09-01).
POLICY_REMOVED = (1, 23)

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
    "apiVersion", "kind", "clientConnection", "leaderElection", "extenders", "parallelism",
    "percentageOfNodesToScore", "podInitialBackoffSeconds", "podMaxBackoffSeconds",
    "enableProfiling", "enableContentionProfiling",
}
INSECURE_FIELDS = ("healthzBindAddress", "metricsBindAddress")
SKELETON_FIELDS = {
    "apiVersion", "kind", "clientConnection", "leaderElection", "enableProfiling",
    "enableContentionProfiling", *INSECURE_FIELDS,
}


class KubeSchedulerError(Exception):
    """Refusal or bad input; the message names the file and the problem."""


# ---------------------------------------------------------------- versions

def parse_version(text):
    """``"v1.28.9+rke2r1"`` -> ``(1, 28)``; raises KubeSchedulerError naming kubernetes_version."""
    version = parse_kube_version(text, KubeSchedulerError, "kubernetes_version")
    if version[0] != 1:
        raise KubeSchedulerError(f"kubernetes_version {text!r}: expected a Kubernetes 1.x version")
    return kube_minor(version)


def served(api_version, version):
    low, high = SERVED[api_version]
    return low <= version and (high is None or version <= high)


def preferred_api(version):
    """apiVersion (short: v1beta1 ... v1) to write for a new file, or POLICY."""
    if version <= (1, 18):
        return POLICY
    if version <= (1, 21):
        return "v1beta1"
    if version == (1, 22):
        return "v1beta2"
    if version <= (1, 24):
        return "v1beta3"
    return "v1"


def split_api_version(api_version):
    """``"group/version"`` -> ``(group, version)``; ``("", "")`` parts where missing."""
    parts = str(api_version).partition("/")
    return parts[0], parts[2]


def api_name(short):
    return POLICY if short == POLICY else f"{GROUP}/{short}"


def served_list(version):
    return ", ".join(api_name(api) for api in SERVED if served(api, version)) or "none"


def version_warnings(version):
    if version > CHECKED_THROUGH:
        return [f"Kubernetes {version[0]}.{version[1]} is newer than gpunode's table of scheduler "
                f"configuration versions (checked through {CHECKED_THROUGH[0]}.{CHECKED_THROUGH[1]}): "
                f"writing {api_name(preferred_api(version))}, the newest apiVersion known to be served"]
    return []


# ---------------------------------------------------------------- the extender entry

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
            for r in extender["managed_resources"]]
    entry["ignorable"] = bool(extender["ignorable"])
    return entry


def check_extender(extender):
    """Refuse settings kube-scheduler would refuse or that mean nothing."""
    url = str(extender.get("url_prefix") or "")
    if not url.startswith(("http://", "https://")):
        raise KubeSchedulerError(f"extender url_prefix {url!r}: must be an http:// or https:// URL")
    if not extender.get("filter_verb"):
        raise KubeSchedulerError("extender filter_verb: must not be empty")
    for resource in extender.get("managed_resources") or []:
        if not resource.get("name"):
            raise KubeSchedulerError("extender managed_resources: every resource needs a name")


def _resource_names(entry):
    return {r.get("name") for r in entry.get("managedResources") or [] if isinstance(r, dict)}


def find_ours(extenders, entry):
    """Index of our extender (same urlPrefix, or one of our managed resources), or None."""
    names = _resource_names(entry)
    for index, item in enumerate(extenders):
        if isinstance(item, dict) and (item.get("urlPrefix") == entry["urlPrefix"]
                                       or names & _resource_names(item)):
            return index
    return None


def validate_config(data, version, path):
    """Check what kube-scheduler would refuse for this version; raise naming path."""
    if not isinstance(data, dict):
        raise KubeSchedulerError(f"{path}: not a mapping")
    kind = data.get("kind")
    if kind == POLICY:
        if version >= POLICY_REMOVED:
            raise KubeSchedulerError(f"{path}: Policy files are not read by Kubernetes "
                                     f"{version[0]}.{version[1]} (removed in 1.23)")
    elif kind == KSC:
        group, api = split_api_version(data.get("apiVersion"))
        if group != GROUP or api not in SERVED or not served(api, version):
            raise KubeSchedulerError(f"{path}: apiVersion {data.get('apiVersion')} is not served by "
                                     f"Kubernetes {version[0]}.{version[1]} (served: {served_list(version)})")
        if not (data.get("clientConnection") or {}).get("kubeconfig"):
            raise KubeSchedulerError(f"{path}: clientConnection.kubeconfig is empty; with --config "
                                     "kube-scheduler ignores --kubeconfig")
        for field in INSECURE_FIELDS:
            if field in data and api not in ("v1beta1", "v1beta2"):
                raise KubeSchedulerError(f"{path}: {field} does not exist in {data['apiVersion']}")
            if field in data and version >= (1, 23) and data[field] not in ("", None) \
                    and not str(data[field]).endswith(":0"):
                raise KubeSchedulerError(f"{path}: {field} must be empty or port 0 from Kubernetes 1.23")
    else:
        raise KubeSchedulerError(f"{path}: kind {kind!r} is neither {KSC} nor {POLICY}")
    extenders = data.get("extenders") or []
    if not isinstance(extenders, list):
        raise KubeSchedulerError(f"{path}: extenders is not a list")
    binders, names = [], set()
    for item in extenders:
        if not isinstance(item, dict) or not item.get("urlPrefix"):
            raise KubeSchedulerError(f"{path}: an extender without urlPrefix")
        if kind == KSC and "enableHttps" in item:
            raise KubeSchedulerError(f"{path}: extender {item['urlPrefix']}: enableHttps is spelled "
                                     "enableHTTPS in a KubeSchedulerConfiguration")
        if item.get("bindVerb"):
            binders.append(item["urlPrefix"])
        for name in _resource_names(item):
            if name in names:
                raise KubeSchedulerError(f"{path}: managed resource {name} is claimed by two extenders")
            names.add(name)
    if len(binders) > 1:
        raise KubeSchedulerError(f"{path}: only one extender may bind pods; bindVerb is set on "
                                 + " and ".join(binders))


# ---------------------------------------------------------------- reading and editing files

def one_line(exc):
    return " ".join(str(exc).split())


def load_yaml(path, text, what="YAML"):
    """The parsed document (None for an empty one); a parse error names the file."""
    try:
        return yaml.safe_load(text) if text else None
    except yaml.YAMLError as exc:
        raise KubeSchedulerError(f"{path}: not valid {what} ({one_line(exc)}); left unchanged") from exc


def load_mapping(path, text):
    data = load_yaml(path, text)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise KubeSchedulerError(f"{path}: not a YAML mapping; left unchanged")
    return data


def _parse_config(path, text):
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text), "json"
        except ValueError as exc:
            raise KubeSchedulerError(f"{path}: cannot parse ({one_line(exc)}); left unchanged") from exc
    return load_yaml(path, text), "yaml"


REWRITE_HINT = "allow_rewrite=true re-writes the whole file instead"


def edit_text(path, text, ops, *, fmt="yaml", rewrite=False, warnings=None):
    """``text`` with ``ops`` applied (see yaml_edit.edit), keeping everything else.

    YAML is spliced; JSON (no comments to keep) is written again in its own
    indentation, which is exact when the file already had that layout. A file
    that cannot be edited exactly raises KubeSchedulerError, or with
    ``rewrite`` is dumped again as a whole, with a warning.
    """
    if fmt == "json":
        data = json.loads(text)
        indent = detect_indent(text)
        final = "\n" if text.endswith("\n") else ""
        exact = render_json(data, indent).rstrip("\n") + final == text
        if not exact and not rewrite:
            raise KubeSchedulerError(f"{path}: its JSON layout cannot be kept by an edit; left unchanged "
                                     f"({REWRITE_HINT})")
        if not exact:
            warnings.append(f"{path}: re-written as a whole (allow_rewrite): its layout was not kept")
        return render_json(apply_ops_to_data(data, ops), indent).rstrip("\n") + final
    try:
        new, rewritten = edit_yaml(text, ops, rewrite=rewrite)
    except YamlEditError as exc:
        raise KubeSchedulerError(f"{path}: cannot be edited exactly ({exc}); comments and layout would be "
                                 f"lost; left unchanged ({REWRITE_HINT})") from exc
    if rewritten:
        warnings.append(f"{path}: re-written as a whole (allow_rewrite): comments and layout were not kept")
    return new


# ---------------------------------------------------------------- scheduler configuration files

def new_config(fmt, version, extender, kubeconfig, carried=None):
    """Text of a new config file: a Policy or a KubeSchedulerConfiguration."""
    entry = extender_entry(extender, fmt)
    if fmt == POLICY:
        data = {"apiVersion": "v1", "kind": POLICY, "extenders": [entry]}
    else:
        data = {"apiVersion": api_name(fmt), "kind": KSC}
        carried = copy.deepcopy(carried or {})
        client = carried.pop("clientConnection", {})
        client.setdefault("kubeconfig", kubeconfig)
        data["clientConnection"] = client
        data.update(carried)
        data["extenders"] = [entry]
    validate_config(data, version, "new config")
    return MARKER + "\n" + yaml.safe_dump(data, default_flow_style=False, sort_keys=False)


def ensure_config(path, text, *, version, extender, kubeconfig, carried=None, adopt=False, rewrite=False,
                  warnings):
    """The one create-or-merge of a scheduler configuration file: ``(new_text, api_version)``.

    No file: a new one in the apiVersion ``version`` prefers (``carried`` holds the
    meaning of flags that ``--config`` makes the scheduler ignore). A file the
    scheduler is started with (``adopt``) or that gpunode wrote (marker line) gets
    the extender merged in, every other field and extender kept. Any other
    existing file is refused: it is someone else's.
    """
    if text is None:
        fmt = preferred_api(version)
        return new_config(fmt, version, extender, kubeconfig, carried if fmt != POLICY else None), \
            api_name(fmt)
    if not adopt and MARKER not in text:
        raise KubeSchedulerError(f"{path}: exists but kube-scheduler is not started with it; refusing to "
                                 "take it over, choose another config_path; left unchanged")
    return merge_config(path, text, version=version, extender=extender, kubeconfig=kubeconfig,
                        rewrite=rewrite, warnings=warnings)


def merge_config(path, text, *, version, extender, kubeconfig, rewrite=False, warnings):
    """(new_text, api_version) with our extender merged into an existing config file."""
    data, fmt = _parse_config(path, text)
    if not isinstance(data, dict):
        raise KubeSchedulerError(f"{path}: not a mapping; left unchanged")
    ops, kind = [], data.get("kind")
    if kind == POLICY:
        if version >= POLICY_REMOVED:
            raise KubeSchedulerError(f"{path}: is a Policy file; the Policy API was removed in Kubernetes "
                                     "1.23, migrate it to a KubeSchedulerConfiguration first; left unchanged")
        entry_fmt, api_out = POLICY, POLICY
    elif kind == KSC:
        group, api = split_api_version(data.get("apiVersion"))
        if group != GROUP or api not in SERVED:
            raise KubeSchedulerError(f"{path}: apiVersion {data.get('apiVersion')!r} is not a known "
                                     f"{KSC} version ({', '.join(SERVED)}); left unchanged")
        if version < (1, 19):
            raise KubeSchedulerError(f"{path}: {data.get('apiVersion')} needs Kubernetes 1.19+, cluster is "
                                     f"{version[0]}.{version[1]}; left unchanged")
        api_out = data["apiVersion"]
        if not served(api, version):
            ops += _convert_ops(path, data, version)
            api_out = api_name(preferred_api(version))
        entry_fmt = api_out
        client = data.get("clientConnection")
        if not isinstance(client, dict):
            ops.append(("set", ["clientConnection"], {"kubeconfig": kubeconfig}))
        elif not client.get("kubeconfig"):
            ops.append(("set", ["clientConnection", "kubeconfig"], kubeconfig))
    else:
        raise KubeSchedulerError(f"{path}: kind {kind!r} is neither {KSC} nor {POLICY}; left unchanged")
    replaced, data = _replace_ops(data, extender)
    ops += replaced + _extender_ops(path, data, extender_entry(extender, entry_fmt))
    if not ops:
        return text, api_out
    new = edit_text(path, text, ops, fmt=fmt, rewrite=rewrite, warnings=warnings)
    validate_config(_parse_config(path, new)[0], version, path)
    return new, api_out


def _convert_ops(path, data, version):
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
                ops.append(("remove", [field]))
            else:
                blocking.append(f"{field}: {data[field]} (insecure serving was removed)")
    if blocking:
        raise KubeSchedulerError(
            f"{path}: apiVersion {data['apiVersion']} is not served by Kubernetes {version[0]}.{version[1]} "
            f"(served: {served_list(version)}) and cannot be converted safely because of: "
            f"{', '.join(blocking)}; migrate it by hand; left unchanged")
    return [("set", ["apiVersion"], api_name(target)), *ops]


def _replace_ops(data, extender):
    """Take out the extenders ``extender["replaces"]`` names by urlPrefix (a switch of GPU-sharing mode:
    kube-scheduler allows one binding extender). Returns ``(ops, data without them)``."""
    urls = set(extender.get("replaces") or ()) - {extender["url_prefix"]}
    extenders = data.get("extenders")
    if not urls or not isinstance(extenders, list):
        return [], data
    drop = [i for i, item in enumerate(extenders) if isinstance(item, dict) and item.get("urlPrefix") in urls]
    if not drop:
        return [], data
    rest = dict(data)
    rest["extenders"] = [item for i, item in enumerate(extenders) if i not in drop]
    if not rest["extenders"]:
        del rest["extenders"]
        return [("remove", ["extenders"])], rest
    return [("remove", ["extenders", i]) for i in reversed(drop)], rest


def _extender_ops(path, data, entry):
    extenders = data.get("extenders")
    if extenders is None:
        return [("set", ["extenders"], [entry])]
    if not isinstance(extenders, list):
        raise KubeSchedulerError(f"{path}: extenders is not a list; left unchanged")
    index = find_ours(extenders, entry)
    if index is not None:
        merged = dict(extenders[index])
        merged.update(entry)
        if "bindVerb" not in entry:
            merged.pop("bindVerb", None)
        return [] if merged == extenders[index] else [("set", ["extenders", index], merged)]
    for item in extenders:
        if isinstance(item, dict) and item.get("bindVerb") and entry.get("bindVerb"):
            raise KubeSchedulerError(f"{path}: extender {item.get('urlPrefix')} already binds pods "
                                     "(bindVerb); kube-scheduler allows only one binding extender; "
                                     "left unchanged")
        clash = _resource_names(entry) & _resource_names(item if isinstance(item, dict) else {})
        if clash:
            raise KubeSchedulerError(f"{path}: extender {item.get('urlPrefix')} already manages "
                                     f"{', '.join(sorted(clash))}; left unchanged")
    return [("append", ["extenders"], entry)]


def strip_config(path, text, extender, *, rewrite=False, warnings):
    """state=absent: the file without our extender (nor those it ``replaces``), or None when the whole
    file is ours to delete."""
    data, fmt = _parse_config(path, text)
    if not isinstance(data, dict):
        raise KubeSchedulerError(f"{path}: not a mapping; left unchanged")
    extenders = data.get("extenders") if isinstance(data.get("extenders"), list) else []
    entry = extender_entry(extender, POLICY if data.get("kind") == POLICY else "ksc")
    index = find_ours(extenders, entry)
    replaced = set(extender.get("replaces") or ())
    drop = {n for n, e in enumerate(extenders)
            if n == index or (isinstance(e, dict) and e.get("urlPrefix") in replaced)}
    rest = [e for n, e in enumerate(extenders) if n not in drop]
    if MARKER in text and not rest and not set(data) - SKELETON_FIELDS - {"extenders"}:
        return None
    if not drop:
        return text
    if rest:
        ops = [("remove", ["extenders", n]) for n in sorted(drop, reverse=True)]
    else:
        ops = [("remove", ["extenders"])]
    return edit_text(path, text, ops, fmt=fmt, rewrite=rewrite, warnings=warnings)


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
            parts = arg[2:].partition("=")
            flags[parts[0]] = parts[2]
    return flags


def _bool(value):
    return str(value).lower() in ("true", "1", "yes", "")


def carried_settings(flags, api):
    """KubeSchedulerConfiguration fields that carry the meaning of flags --config makes it ignore."""
    out = {}
    client = {}
    if flags.get("kubeconfig"):
        client["kubeconfig"] = flags["kubeconfig"]
    for flag, field, conv in (("kube-api-qps", "qps", float), ("kube-api-burst", "burst", int),
                              ("kube-api-content-type", "contentType", str)):
        if flag in flags:
            client[field] = conv(flags[flag])
    if client:
        out["clientConnection"] = client
    election = {}
    for flag, field, conv in (("leader-elect", "leaderElect", _bool),
                              ("leader-elect-lease-duration", "leaseDuration", str),
                              ("leader-elect-renew-deadline", "renewDeadline", str),
                              ("leader-elect-retry-period", "retryPeriod", str),
                              ("leader-elect-resource-lock", "resourceLock", str),
                              ("leader-elect-resource-name", "resourceName", str),
                              ("leader-elect-resource-namespace", "resourceNamespace", str),
                              ("lock-object-name", "resourceName", str),
                              ("lock-object-namespace", "resourceNamespace", str)):
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


def read_file(path):
    try:
        return read_text(path, KubeSchedulerError)
    except KubeSchedulerError as exc:
        raise KubeSchedulerError(f"{exc}; left unchanged") from exc


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


def rke2_files(config_path, listdir):
    """config.yaml, then config.yaml.d/*.yaml and *.yml in name order: the order RKE2 reads them
    (rancher/rke2-docs docs/install/configuration.md, "Multiple Config Files")."""
    names = listdir(config_path + ".d")
    return [config_path] + [f"{config_path}.d/{name}" for name in sorted(names)
                            if name.endswith((".yaml", ".yml"))]


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
