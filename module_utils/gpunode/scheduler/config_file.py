# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kube-scheduler's configuration file (KubeSchedulerConfiguration or Policy, YAML or JSON):
read it, write a new one, merge the extender into one or strip it out, and carry the
settings of the scheduler's flags into it.

Files are edited through ``formats/yaml_edit.py`` (every byte an edit does not touch is
kept); a file that cannot be edited exactly is refused unless ``allow_rewrite`` is set.

Standard library and PyYAML (python3-yaml) only: this runs on target hosts;
modules check ``yaml_edit.YAML_IMPORT_ERROR`` before calling anything here.
"""

import copy
import json

try:
    import yaml
except ImportError:  # the node has no python3-yaml; the module says so
    yaml = None

from ansible.module_utils.gpunode.formats.json_config import detect_indent
from ansible.module_utils.gpunode.formats.json_config import render as render_json
from ansible.module_utils.gpunode.formats.yaml_edit import YamlEditError, apply_ops_to_data
from ansible.module_utils.gpunode.formats.yaml_edit import edit as edit_yaml
from ansible.module_utils.gpunode.formats.yaml_load import safe_load
from ansible.module_utils.gpunode.host.files import read_text
from ansible.module_utils.gpunode.scheduler.api import (
    GROUP,
    INSECURE_FIELDS,
    KSC,
    MARKER,
    POLICY,
    POLICY_REMOVED,
    PORTABLE_FIELDS,
    SERVED,
    SKELETON_FIELDS,
    KubeSchedulerError,
    _resource_names,
    api_name,
    extender_entry,
    find_ours,
    preferred_api,
    served,
    served_list,
    split_api_version,
    validate_config,
)

# ---------------------------------------------------------------- reading and editing files


def one_line(exc):
    return " ".join(str(exc).split())


def load_yaml(path, text, what="YAML"):
    """The parsed document (None for an empty one); a parse error names the file."""
    try:
        return safe_load(text) if text else None
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


def read_file(path):
    try:
        return read_text(path, KubeSchedulerError)
    except KubeSchedulerError as exc:
        raise KubeSchedulerError(f"{exc}; left unchanged") from exc
