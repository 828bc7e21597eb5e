# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The NVIDIA device plugin's own config file (``version: v1``), checked before anything is rendered.

The rules are the plugin's, read from NVIDIA/k8s-device-plugin v0.20.0
(api/config/v1/{config,flags,sharing,replicas,resources,imex,consts}.go and
cmd/nvidia-device-plugin/main.go validateFlags): the keys each level knows,
``migStrategy`` none|single|mixed, ``replicas >= 2`` for time-slicing and MPS
alike (ReplicatedResource.UnmarshalJSON), ``devices`` as ``all``, a count > 0
or a list of GPU/MIG indices and UUIDs, resource names of at most 63
characters, IMEX channel IDs ``[]`` or ``[0]``. Two rules are gpunode's, from
the plugin's behaviour: one sharing method per config (the plugin silently
prefers MPS when both are given) and MPS only with ``migStrategy: none`` (the
plugin refuses ``mixed`` with MPS, and its README: "Sharing with MPS is
currently not supported on devices with MIG enabled").

Every error names the key path, e.g.
``gpu_cluster_addons_device_plugin_configs.a100-ts.sharing.timeSlicing.resources[0].replicas: must be >= 2``.
"""

import re

try:
    import yaml  # PyYAML: for entries given as text (the chart's config.map); ansible-core requires it
except ImportError:  # pragma: no cover - an interpreter without PyYAML
    yaml = None

from ansible.module_utils.gpunode.addons.cluster import GpuAddonsError
from ansible.module_utils.gpunode.formats.yaml_load import safe_load

MIG_STRATEGIES = ("none", "single", "mixed")
DEFAULT_NAME = "default"
# The node label the plugin's config-manager reads to pick a named config.
CONFIG_LABEL = "nvidia.com/device-plugin.config"

_STR, _BOOL, _LIST = "a string", "true or false", "a list"
_TOP = {"version": None, "flags": None, "resources": None, "sharing": None, "imex": None}
_FLAGS = {
    "migStrategy": MIG_STRATEGIES, "failOnInitError": _BOOL, "mpsRoot": _STR, "nvidiaDriverRoot": _STR,
    "nvidiaDevRoot": _STR, "gdrcopyEnabled": _BOOL, "gdsEnabled": _BOOL, "mofedEnabled": _BOOL,
    "useNodeFeatureAPI": _BOOL, "deviceDiscoveryStrategy": ("auto", "nvml", "tegra"),
    "plugin": None, "gfd": None,
}
_PLUGIN = {
    "passDeviceSpecs": _BOOL, "deviceListStrategy": None, "deviceIDStrategy": ("uuid", "index"),
    "cdiAnnotationPrefix": _STR, "nvidiaCTKPath": _STR, "containerDriverRoot": _STR,
    "sharedDevicesAllocationPolicy": ("distributed", "packed"),
}
_GFD = {
    "oneshot": _BOOL, "noTimestamp": _BOOL, "sleepInterval": _STR, "outputFile": _STR,
    "machineTypeFile": _STR,
}
_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
_SHARING = {"timeSlicing": None, "mps": None}
_REPLICATED = {"renameByDefault": _BOOL, "failRequestsGreaterThanOne": _BOOL, "resources": None}
_RESOURCE = {"name": None, "rename": None, "devices": None, "replicas": None}
_IMEX = {"channelIDs": None, "required": _BOOL}
_RESOURCES = {"gpus": None, "mig": None}

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_DEVICE_REF = re.compile(
    rf"^(\d+|\d+:\d+|GPU-{_UUID}|MIG-{_UUID}|MIG-GPU-{_UUID}/\d+/\d+)$"
)
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")


def _fail(path, message):
    raise GpuAddonsError(f"{path}: {message}")


def _mapping(value, path, known):
    if not isinstance(value, dict):
        _fail(path, f"must be a mapping, not {type(value).__name__}")
    for key in value:
        if key not in known:
            _fail(f"{path}.{key}", "unknown key (known: {})".format(", ".join(sorted(known))))
    return value


def _scalars(value, path, known):
    """Check the plain fields of a mapping: booleans, strings, choices."""
    for key, rule in known.items():
        if key not in value or rule is None or value[key] is None:
            continue
        item, where = value[key], f"{path}.{key}"
        if rule == _BOOL and not isinstance(item, bool):
            _fail(where, f"must be {_BOOL}, not {item!r}")
        elif rule == _STR and not isinstance(item, str):
            _fail(where, f"must be {_STR}, not {item!r}")
        elif isinstance(rule, tuple) and item not in rule:
            _fail(where, "{!r} is not one of {}".format(item, ", ".join(rule)))


def resource_name(value, path):
    """``gpu`` or ``nvidia.com/gpu`` -> ``nvidia.com/gpu``, as the plugin's NewResourceName does."""
    if not isinstance(value, str) or not value:
        _fail(path, f"must be a resource name such as nvidia.com/gpu, not {value!r}")
    full = value if value.startswith("nvidia.com/") else "nvidia.com/" + value
    if len(full) > 63:
        _fail(path, f"{full!r} is longer than 63 characters")
    if not _DNS_SUBDOMAIN.match(full.split("/", 1)[1]):
        _fail(path, f"{full!r}: the part after nvidia.com/ must be lower-case alphanumerics, '-' and '.'")
    return full


def _devices(value, path):
    if value == "all":
        return
    if isinstance(value, bool) or value is None:
        _fail(path, f"must be 'all', a count > 0 or a list of GPU indices or UUIDs, not {value!r}")
    if isinstance(value, int):
        if value <= 0:
            _fail(path, f"a count of devices must be > 0, not {value}")
        return
    if isinstance(value, str):
        _fail(path, f"{value!r}: the only string it takes is 'all'")
    if not isinstance(value, list) or not value:
        _fail(path, "must be 'all', a count > 0 or a non-empty list of GPU indices or UUIDs")
    for index, ref in enumerate(value):
        if isinstance(ref, bool) or not (
            (isinstance(ref, int) and ref >= 0) or (isinstance(ref, str) and _DEVICE_REF.match(ref))
        ):
            _fail(f"{path}[{index}]", f"{ref!r} is not a GPU index (0), a MIG index (0:1) or a GPU/MIG UUID")


def _replicated_resource(value, path):
    _mapping(value, path, _RESOURCE)
    if "name" not in value:
        _fail(path, "no name (the resource to share, e.g. nvidia.com/gpu)")
    resource_name(value["name"], path + ".name")
    if "rename" in value and value["rename"] not in (None, ""):
        resource_name(value["rename"], path + ".rename")
    if "replicas" not in value:
        _fail(path, "no replicas")
    replicas = value["replicas"]
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        _fail(path + ".replicas", f"must be an integer, not {replicas!r}")
    if replicas < 2:
        _fail(path + ".replicas", "must be >= 2")
    if "devices" in value:
        _devices(value["devices"], path + ".devices")


def _replicated(value, path):
    _mapping(value, path, _REPLICATED)
    _scalars(value, path, _REPLICATED)
    resources = value.get("resources")
    if not isinstance(resources, list) or not resources:
        _fail(path + ".resources", "must be a non-empty list of {name, replicas, rename, devices}")
    names = []
    for index, item in enumerate(resources):
        _replicated_resource(item, f"{path}.resources[{index}]")
        names.append(resource_name(item["name"], path))
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        _fail(path + ".resources", "{} listed more than once".format(", ".join(dupes)))


def _flags(value, path):
    _mapping(value, path, _FLAGS)
    _scalars(value, path, _FLAGS)
    plugin = value.get("plugin")
    if plugin is not None:
        _mapping(plugin, path + ".plugin", _PLUGIN)
        _scalars(plugin, path + ".plugin", _PLUGIN)
        strategy = plugin.get("deviceListStrategy")
        if strategy is not None:
            items = strategy if isinstance(strategy, list) else [strategy]
            for item in items:
                if item not in _LIST_STRATEGIES:
                    _fail(path + ".plugin.deviceListStrategy",
                          "{!r} is not one of {}".format(item, ", ".join(_LIST_STRATEGIES)))
    gfd = value.get("gfd")
    if gfd is not None:
        _mapping(gfd, path + ".gfd", _GFD)
        _scalars(gfd, path + ".gfd", _GFD)


def _other_sections(config, path):
    resources = config.get("resources")
    if resources is not None:
        _mapping(resources, path + ".resources", _RESOURCES)
        for kind in ("gpus", "mig"):
            for index, item in enumerate(resources.get(kind) or []):
                where = f"{path}.resources.{kind}[{index}]"
                _mapping(item, where, {"pattern": None, "name": None})
                if not isinstance(item.get("pattern"), str) or "name" not in item:
                    _fail(where, "needs a pattern (string) and a name")
                resource_name(item["name"], where + ".name")
    imex = config.get("imex")
    if imex is not None:
        _mapping(imex, path + ".imex", _IMEX)
        _scalars(imex, path + ".imex", _IMEX)
        if imex.get("channelIDs") not in (None, [], [0]):
            _fail(path + ".imex.channelIDs", "must be [] or [0]")


def validate(config, path):
    """Check one config against the plugin's rules; return it with ``version: v1`` filled in."""
    _mapping(config, path, _TOP)
    version = config.get("version", "v1")
    if version != "v1":
        _fail(path + ".version", f"{version!r}: the device plugin reads version v1 only")
    if config.get("flags") is not None:
        _flags(config["flags"], path + ".flags")
    sharing = config.get("sharing")
    methods = []
    if sharing is not None:
        _mapping(sharing, path + ".sharing", _SHARING)
        for method in ("timeSlicing", "mps"):
            if sharing.get(method) is not None:
                _replicated(sharing[method], f"{path}.sharing.{method}")
                methods.append(method)
    if len(methods) > 1:
        _fail(path + ".sharing", "timeSlicing and mps both set: one sharing method per config "
              "(the plugin would silently use MPS)")
    if "mps" in methods and mig_strategy(config) != "none":
        _fail(path + ".flags.migStrategy", f"{mig_strategy(config)!r} with sharing.mps: MPS works with "
              "migStrategy none only (MPS is not supported on MIG devices)")
    _other_sections(config, path)
    result = dict(config)
    result["version"] = "v1"
    return result


def mig_strategy(config):
    return (config.get("flags") or {}).get("migStrategy") or "none"


def sharing_method(config):
    """``time-slicing``, ``mps`` or ``none``: what a node with this config offers."""
    sharing = config.get("sharing") or {}
    if sharing.get("mps"):
        return "mps"
    if sharing.get("timeSlicing"):
        return "time-slicing"
    return "none"


def shorthand(mig="none", replicas=0, rename=False, fail_requests_greater_than_one=False):
    """The config that the older variables stand for.

    ``gpu_cluster_addons_nvidia_mig_strategy`` and ``..._time_slicing_*`` are a
    shorthand for ``gpu_cluster_addons_device_plugin_config``: this is the one
    place that turns them into the plugin's format.
    """
    if mig not in MIG_STRATEGIES:
        _fail("gpu_cluster_addons_nvidia_mig_strategy", f"{mig!r} is not none, single or mixed")
    config = {
        "version": "v1",
        "flags": {
            "migStrategy": mig,
            "failOnInitError": True,
            "plugin": {"passDeviceSpecs": False, "deviceListStrategy": "envvar", "deviceIDStrategy": "uuid"},
        },
    }
    if int(replicas) > 1:
        config["sharing"] = {
            "timeSlicing": {
                "renameByDefault": bool(rename),
                "failRequestsGreaterThanOne": bool(fail_requests_greater_than_one),
                "resources": [{"name": "nvidia.com/gpu", "replicas": int(replicas)}],
            }
        }
    return config


CONFIG_VARIABLE = "gpu_cluster_addons_device_plugin_config"
CONFIGS_VARIABLE = "gpu_cluster_addons_device_plugin_configs"
DEFAULT_VARIABLE = "gpu_cluster_addons_device_plugin_config_default"


def _entry(name, value):
    """One entry of the configs: a mapping, or the YAML text of one as the chart's ``config.map`` holds it."""
    path = f"{CONFIGS_VARIABLE}.{name}"
    if not isinstance(name, str) or not _LABEL_VALUE.match(name):
        _fail(path, "a name must be a valid label value (letters, digits, '-', '_', '.'; at most 63)")
    if isinstance(value, str):
        if yaml is None:
            _fail(path, "a text entry needs PyYAML where gpu_cluster_addons_plan runs: give a mapping")
        try:
            value = safe_load(value)
        except yaml.YAMLError as exc:
            _fail(path, f"its text is not YAML: {exc}".replace("\n", " "))
    return validate(value, path)


def _main_config(config, short, entries, default_name):
    """The name of the config of every node that names no other, and that config (None: in ``entries``)."""
    short_set = bool(short) and shorthand(**short) != shorthand()
    if default_name:
        if default_name not in entries:
            _fail(DEFAULT_VARIABLE, f"{default_name!r} is not an entry of {CONFIGS_VARIABLE} "
                  f"(entries: {', '.join(sorted(entries)) or 'none'})")
        owner = f"{DEFAULT_VARIABLE} ({default_name})"
    elif DEFAULT_NAME in entries:
        default_name, owner = DEFAULT_NAME, f"{CONFIGS_VARIABLE}.{DEFAULT_NAME}"
    else:
        owner = None
    if owner and config:
        raise GpuAddonsError(
            f"{CONFIG_VARIABLE} and {owner} both name the main config (of every node that names no "
            f"other): keep one of them")
    if owner and short_set:
        raise GpuAddonsError(
            f"{owner} is the main config: the shorthand variables "
            "gpu_cluster_addons_nvidia_mig_strategy/_time_slicing_* must stay at their defaults")
    if owner:
        return default_name, None
    if config:
        if short_set:
            raise GpuAddonsError(
                f"{CONFIG_VARIABLE} is set: the shorthand variables "
                "gpu_cluster_addons_nvidia_mig_strategy/_time_slicing_* must stay at their defaults")
        return DEFAULT_NAME, validate(config, CONFIG_VARIABLE)
    return DEFAULT_NAME, validate(shorthand(**short), "gpu_cluster_addons_nvidia_* (shorthand)")


def plugin_configs(config=None, configs=None, short=None, default_name=None):
    """All configs the plugin may run with: ``{"default", "configs", "named"}``.

    The chart's shape (NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin
    values.yaml ``config.map`` and ``config.default``) and gpunode's both work.
    ``configs`` (``gpu_cluster_addons_device_plugin_configs``, the chart's
    ``config.map``) are configs by name, each a mapping or its YAML text, for
    nodes labelled ``nvidia.com/device-plugin.config=<name>``. The main config
    (of every node that names no other; ``default`` of the result names it)
    is the entry ``default_name`` names (``..._config_default``, the chart's
    ``config.default``), else the entry called ``default``, else ``config``
    (``gpu_cluster_addons_device_plugin_config``), else the one the shorthand
    variables (``short``: the keyword arguments of ``shorthand``) make. Two of
    them at once are refused, naming both. ``named`` is true when there are
    several configs: the plugin then needs its config-manager, which reads the
    node label.
    """
    short = dict(short or {})
    if configs is not None and not isinstance(configs, dict):
        _fail(CONFIGS_VARIABLE, "must be a mapping of name -> config")
    entries = {name: _entry(name, configs[name]) for name in sorted(configs or {}, key=str)}
    name, main = _main_config(config, short, entries, default_name)
    result = dict(entries)
    if main is not None:
        result[name] = main
    return {"default": name, "configs": dict(sorted(result.items())), "named": len(result) > 1}


def host_config(host, name, resolved):
    """The config name a host's node runs with; an unknown name is an error naming the host."""
    if name in (None, ""):
        return resolved["default"]
    if name not in resolved["configs"]:
        raise GpuAddonsError(
            "{}: gpu_cluster_addons_device_plugin_config_name {!r} is not a config (known: {})".format(
                host, name, ", ".join(sorted(resolved["configs"]))))
    return name


def mig_report(host, facts, strategy):
    """Warnings where a host's MIG state contradicts the strategy of its config.

    Reads ``mig_enabled`` of each GPU in ``ansible_facts.nvidia_gpu.devices``
    where the detection publishes it; without it there is nothing to compare.
    """
    gpus = [d for d in (facts or {}).get("devices") or [] if isinstance(d, dict) and d.get("kind") == "gpu"]
    known = [d for d in gpus if isinstance(d.get("mig_enabled"), bool)]
    if not known:
        return []
    enabled = [d.get("address", "?") for d in known if d["mig_enabled"]]
    disabled = [d.get("address", "?") for d in known if not d["mig_enabled"]]
    if strategy == "none" and enabled:
        return [f"{host}: MIG is enabled on {', '.join(enabled)} but its device plugin config has "
                "migStrategy none: those GPUs are advertised whole and cannot run CUDA work"]
    if strategy == "single" and enabled and disabled:
        return [f"{host}: migStrategy single needs MIG on every GPU or on none; enabled on "
                f"{', '.join(enabled)}, disabled on {', '.join(disabled)}: the plugin will refuse to start"]
    if strategy != "none" and not enabled:
        return [f"{host}: migStrategy {strategy} but MIG is enabled on no GPU: it advertises whole GPUs"]
    return []


def describe(config):
    """What a node with this config offers, in a few words: ``time-slicing x4``, ``mps x8``,
    ``mig mixed``, ``whole GPUs`` (for the run's summary)."""
    method = sharing_method(config)
    parts = []
    if method != "none":
        key = "timeSlicing" if method == "time-slicing" else "mps"
        replicas = sorted({r.get("replicas") for r in config["sharing"][key]["resources"]})
        parts.append("{} x{}".format(method, "/".join(str(r) for r in replicas)))
    if mig_strategy(config) != "none":
        parts.append("mig " + mig_strategy(config))
    return ", ".join(parts) or "whole GPUs"
