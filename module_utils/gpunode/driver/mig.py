# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""MIG geometry: mig-parted's ``version: v1`` config, nvidia-smi's MIG state, and the plan between them.

Pure Python with the standard library only: the ``nvidia_mig`` module runs it through
``module.run_command``, and the boot unit the ``nvidia_mig`` role installs runs the same file
through ``subprocess`` (roles/nvidia_mig/files/gpunode-mig-apply), so the layout applied at boot
is decided by the code the play used.

The config format is mig-parted's (github.com/NVIDIA/mig-parted, api/spec/v1):
``{"version": "v1", "mig-configs": {NAME: [{"devices": "all" | [index, ...],
"device-filter": "0x233010DE" | [...], "mig-enabled": bool, "mig-devices": {profile: count}}]}}``.
A GPU takes the first entry of the selected config that matches it (index and device filter);
a GPU no entry matches is left as it is. Profiles are GPU-instance profiles by their nvidia-smi
names (``1g.10gb``, ``1g.10gb+me``), each created with its full compute instance (``-cgi ... -C``).
"""

import re

VERSION = "v1"
TOP_KEYS = ("version", "mig-configs")
ENTRY_KEYS = ("devices", "device-filter", "mig-enabled", "mig-devices")
FILTER_RE = re.compile(r"^0x([0-9a-fA-F]{4})([0-9a-fA-F]{4})(?::0x[0-9a-fA-F]{8})?$")
PROFILE_RE = re.compile(r"^(\d+)g\.(\d+)gb([+-][a-z][a-z0-9.+-]*)?$")
CI_PROFILE_RE = re.compile(r"^\d+c\.\d+g\.\d+gb")
QUERY_GPU = "index,pci.device_id,mig.mode.current,mig.mode.pending,name"
QUERY_APPS = "gpu_uuid,pid,process_name"
LGIP_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s")
LGI_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s*\|")
LCI_ROW = re.compile(r"^\|\s*(\d+)\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)(?:\s+\d+:\d+)?\s*\|")
GPU_LINE = re.compile(r"^GPU (\d+): .*\(UUID: (\S+)\)\s*$")
EMPTY_MARKERS = ("No MIG-enabled devices found", "No GPU instances found", "No compute instances found")
DRAIN_SERVICES = ("dcgm-exporter.service", "nvidia-dcgm.service", "nvidia-persistenced.service",
                  "nvidia-fabricmanager.service")


class MigError(Exception):
    """A config, a GPU or a command refused; the message says which and why."""


# ---------------------------------------------------------------- the config


def _check_keys(value, known, path):
    if not isinstance(value, dict):
        raise MigError(f"{path}: must be a mapping, got {type(value).__name__}")
    unknown = sorted(str(k) for k in value if k not in known)
    if unknown:
        raise MigError(f"{path}: unknown key {', '.join(unknown)} (known: {', '.join(known)})")


def _devices(value, path):
    if value == "all":
        return "all"
    indices = isinstance(value, list) and value and all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value)
    if indices:
        return sorted(set(value))
    raise MigError(f"{path}: must be 'all' or a list of GPU indices, got {value!r}")


def _filters(value, path):
    if value is None or value == "":
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise MigError(f"{path}: must be a device id or a list of them, got {value!r}")
    out = []
    for i, item in enumerate(items):
        match = FILTER_RE.match(item) if isinstance(item, str) else None
        if not match:
            where = path if isinstance(value, str) else f"{path}[{i}]"
            raise MigError(f"{where}: {item!r} is not a PCI device id as 0xDEVICEVENDOR (e.g. 0x233010DE)")
        out.append((match.group(1) + match.group(2)).upper())
    return out


def _mig_devices(value, enabled, path):
    if value is None:
        if enabled:
            raise MigError(f"{path}: required when mig-enabled is true ({{}} for none)")
        return {}
    if not isinstance(value, dict):
        raise MigError(f"{path}: must be a mapping of profile -> count, got {value!r}")
    if value and not enabled:
        raise MigError(f"{path}: MIG devices given while mig-enabled is false")
    out = {}
    for name, count in value.items():
        where = f"{path}.{name}"
        if not isinstance(name, str) or CI_PROFILE_RE.match(name):
            raise MigError(f"{where}: compute-instance profiles are not supported; name a GPU instance "
                           "profile (e.g. 1g.10gb), created with its full compute instance")
        if not PROFILE_RE.match(name):
            raise MigError(f"{where}: not a MIG profile name (e.g. 1g.10gb, 1g.10gb+me)")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise MigError(f"{where}: count must be a positive integer, got {count!r}")
        if count:
            out[name] = count
    return out


def _entry(value, path):
    _check_keys(value, ENTRY_KEYS, path)
    for key in ("devices", "mig-enabled"):
        if key not in value:
            raise MigError(f"{path}: missing required key {key}")
    if not isinstance(value["mig-enabled"], bool):
        raise MigError(f"{path}.mig-enabled: must be true or false, got {value['mig-enabled']!r}")
    enabled = value["mig-enabled"]
    return {
        "devices": _devices(value["devices"], f"{path}.devices"),
        "filters": _filters(value.get("device-filter"), f"{path}.device-filter"),
        "mig_enabled": enabled,
        "instances": _mig_devices(value.get("mig-devices"), enabled, f"{path}.mig-devices"),
    }


def parse_config(doc, selected, source="config"):
    """The selected config's entries, validated; MigError names the key path."""
    _check_keys(doc, TOP_KEYS, source)
    if doc.get("version") != VERSION:
        raise MigError(f"{source}.version: must be {VERSION!r}, got {doc.get('version')!r}")
    configs = doc.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        raise MigError(f"{source}.mig-configs: at least one named config is required")
    if selected not in configs:
        raise MigError(f"{source}.mig-configs: no config named {selected!r} (there: "
                       f"{', '.join(sorted(str(k) for k in configs))})")
    entries = configs[selected]
    path = f"{source}.mig-configs.{selected}"
    if not isinstance(entries, list) or not entries:
        raise MigError(f"{path}: must be a list of at least one entry")
    return [_entry(e, f"{path}[{i}]") for i, e in enumerate(entries)]


def match_entry(entries, gpu):
    """The first entry that names the GPU (index and device filter), or None."""
    for entry in entries:
        if entry["devices"] != "all" and gpu["index"] not in entry["devices"]:
            continue
        if entry["filters"] and gpu["device_id"] not in entry["filters"]:
            continue
        return entry
    return None


# ---------------------------------------------------------------- nvidia-smi's answers


def _mode(text):
    text = text.strip()
    if text in ("Enabled", "Disabled"):
        return text == "Enabled"
    return None  # [N/A]: no MIG on this GPU


def parse_query_gpu(text):
    """``--query-gpu=QUERY_GPU --format=csv,noheader`` -> list of GPUs (device_id as DEVICEVENDOR)."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",", 4)]
        if len(parts) != 5 or not parts[0].isdigit():
            raise MigError(f"nvidia-smi --query-gpu: cannot read line {line!r}")
        device_id = parts[1][2:] if parts[1].lower().startswith("0x") else parts[1]
        gpus.append({"index": int(parts[0]), "device_id": device_id.upper(), "mig_current": _mode(parts[2]),
                     "mig_pending": _mode(parts[3]), "name": parts[4]})
    return gpus


def parse_uuids(text):
    """``nvidia-smi -L`` -> {GPU UUID: index} (MIG device lines aside)."""
    rows = (GPU_LINE.match(line) for line in text.splitlines())
    return {m.group(2): int(m.group(1)) for m in rows if m}


def parse_compute_apps(text):
    """``--query-compute-apps=QUERY_APPS --format=csv,noheader`` -> [{gpu_uuid, pid, name}]."""
    apps = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",", 2)]
        if len(parts) == 3 and parts[1].isdigit():
            apps.append({"gpu_uuid": parts[0], "pid": int(parts[1]), "name": parts[2]})
    return apps


def parse_lgip(text):
    """``nvidia-smi mig -lgip`` -> {GPU index: {profile name: {id, free, total, slices}}}."""
    profiles = {}
    for line in text.splitlines():
        match = LGIP_ROW.match(line.strip())
        if match:
            name = match.group(2)
            slices = PROFILE_RE.match(name)
            gpu = profiles.setdefault(int(match.group(1)), {})
            ident, free, total = (int(match.group(n)) for n in (3, 4, 5))
            gpu.setdefault(name, {"id": ident, "free": free, "total": total,
                                  "slices": int(slices.group(1)) if slices else 0})
    return profiles


def parse_lgi(text):
    """``nvidia-smi mig -lgi`` -> [{gpu, gi, name, profile_id, start, size}]."""
    return [{"gpu": int(m.group(1)), "gi": int(m.group(4)), "name": m.group(2), "profile_id": int(m.group(3)),
             "start": int(m.group(5)), "size": int(m.group(6))}
            for m in (LGI_ROW.match(line.strip()) for line in text.splitlines()) if m]


def parse_lci(text):
    """``nvidia-smi mig -lci`` -> [{gpu, gi, ci, name, profile_id}]."""
    return [{"gpu": int(m.group(1)), "gi": int(m.group(2)), "ci": int(m.group(5)), "name": m.group(3),
             "profile_id": int(m.group(4))}
            for m in (LCI_ROW.match(line.strip()) for line in text.splitlines()) if m]


def instance_counts(gis, cis):
    """(profile -> count of GPU instances, whether each GI holds exactly its one full compute instance)."""
    counts = {}
    clean = True
    for gi in gis:
        counts[gi["name"]] = counts.get(gi["name"], 0) + 1
        own = [ci for ci in cis if ci["gi"] == gi["gi"]]
        if len(own) != 1 or not _full(own[0]["name"], gi["name"]):
            clean = False
    return counts, clean


def _full(ci_name, gi_name):
    """A compute instance spans its GPU instance (``1g.10gb`` in ``1g.10gb+me``; not ``1c.2g.20gb``)."""
    ci, gi = PROFILE_RE.match(ci_name), PROFILE_RE.match(gi_name)
    return bool(ci and gi) and ci.group(1) == gi.group(1)


# ---------------------------------------------------------------- decisions


def describe(gpu):
    return f"GPU {gpu['index']} ({gpu['name']}, 0x{gpu['device_id']})"


def check_profiles(gpu, wanted, profiles):
    """Refuse profiles the GPU does not have, counts over its limits, or more slices than it has."""
    if not profiles or not wanted:
        return
    unknown = sorted(name for name in wanted if name not in profiles)
    if unknown:
        there = ", ".join(sorted(profiles, key=lambda n: (profiles[n]["slices"], n)))
        raise MigError(f"{describe(gpu)}: MIG profile {', '.join(unknown)} does not exist there; "
                       f"its profiles: {there}")
    for name, count in sorted(wanted.items()):
        if count > profiles[name]["total"]:
            raise MigError(f"{describe(gpu)}: {count} x {name} asked, the GPU holds at most "
                           f"{profiles[name]['total']}")
    most = max(p["slices"] for p in profiles.values())
    used = sum(profiles[n]["slices"] * c for n, c in wanted.items())
    if used > most:
        raise MigError(f"{describe(gpu)}: the layout {format_instances(wanted)} needs {used} compute slices, "
                       f"the GPU has {most}")


def check_supported(gpu, entry, selected):
    if entry["mig_enabled"] and gpu["mig_current"] is None:
        raise MigError(f"{describe(gpu)} does not support MIG (mig.mode.current is [N/A]); the selected "
                       f"config {selected!r} asks MIG for it: narrow its devices or device-filter")


def check_idle(gpu, apps):
    mine = [a for a in apps if a.get("gpu") == gpu["index"]]
    if mine:
        names = ", ".join(f"PID {a['pid']} ({a['name']})" for a in mine)
        raise MigError(f"{describe(gpu)} is in use by {names}: stop them before its MIG layout changes "
                       "(drain stops only the system services that hold GPUs, never users' processes)")


def format_instances(instances):
    return ", ".join(f"{c}x{n}" for n, c in sorted(instances.items())) or "none"


def gpu_plan(gpu, entry, state):
    """What must change on one GPU: {mode, destroy, create} (mode None when it is right)."""
    want_mig = entry["mig_enabled"]
    mode = None if gpu["mig_current"] == want_mig and gpu["mig_pending"] == want_mig else want_mig
    counts, clean = state["instances"], state["clean"]
    want = entry["instances"] if want_mig else {}
    wrong = counts != want or not clean
    return {"mode": mode, "destroy": bool(state["gis"] or state["cis"]) and (wrong or mode is not None),
            "create": want if want_mig and (wrong or mode is not None) and want else {}}


def create_order(wanted, profiles):
    """Profile ids for ``-cgi``, largest first (as mig-parted orders them) so placements fit."""
    names = []

    def size(name):
        match = PROFILE_RE.match(name)
        return (-int(match.group(1)), -int(match.group(2)), name)

    for name in sorted(wanted, key=size):
        names.extend([name] * wanted[name])
    return [str(profiles[n]["id"]) for n in names]


def view(gpu, state):
    """A GPU as the module reports it (``gpus.N.before`` / ``after``)."""
    out = {"mig_enabled": bool(gpu["mig_current"]), "instances": dict(state["instances"])}
    if gpu["mig_pending"] is not None and gpu["mig_pending"] != gpu["mig_current"]:
        out["mig_pending"] = gpu["mig_pending"]
    return out


def wanted_view(entry):
    return {"mig_enabled": entry["mig_enabled"], "instances": dict(entry["instances"])}


def change_lines(selected, gpus):
    """One line for the run's summary (``gpunode_changes``) when a GPU's layout changed, e.g.
    ``MIG hgx-mixed: GPU 0-3 -> 7x1g.10gb; GPU 4-7 -> 2x1g.10gb, 1x2g.20gb, 1x3g.40gb``."""
    groups = {}
    for index in sorted(gpus, key=int):
        item = gpus[index]
        if item["before"] == item["after"]:
            continue
        after = item["after"]
        text = format_instances(after["instances"]) if after["mig_enabled"] else "MIG off"
        if "mig_pending" in after:
            text = "MIG mode pending (reboot)"
        groups.setdefault(text, []).append(int(index))
    parts = [f"GPU {_span(indices)} -> {text}" for text, indices in groups.items()]
    return [f"MIG {selected}: " + "; ".join(parts)] if parts else []


def _span(indices):
    """``0-3`` for consecutive indices, else ``0,2,5``."""
    if len(indices) > 1 and indices == list(range(indices[0], indices[-1] + 1)):
        return f"{indices[0]}-{indices[-1]}"
    return ",".join(map(str, indices))


def diff_text(gpus, key):
    lines = []
    for index in sorted(gpus, key=int):
        item = gpus[index][key]
        mode = "MIG enabled" if item["mig_enabled"] else "MIG disabled"
        if "mig_pending" in item:
            mode += f" (pending: {'enabled' if item['mig_pending'] else 'disabled'})"
        lines.append(f"GPU {index}: {mode}; instances: {format_instances(item['instances'])}\n")
    return "".join(lines)


# ---------------------------------------------------------------- carrying it out


class Smi:
    """nvidia-smi through ``run(argv) -> (rc, stdout, stderr)`` (the C locale is the caller's)."""

    def __init__(self, run, path, commands=None):
        self.run = run
        self.path = path
        self.commands = [] if commands is None else commands

    def call(self, args, empty_ok=False, record=False):
        rc, out, err = self.run([self.path, *args])
        if record:
            self.commands.append(" ".join(["nvidia-smi", *args]))
        text = (out or "") + (err or "")
        if rc != 0 and not (empty_ok and any(m in text for m in EMPTY_MARKERS)):
            raise MigError(f"nvidia-smi {' '.join(args)} failed (rc {rc}): {text.strip()}")
        return out or ""

    def gpus(self):
        return parse_query_gpu(self.call([f"--query-gpu={QUERY_GPU}", "--format=csv,noheader"]))

    def gpu(self, index):
        for gpu in self.gpus():
            if gpu["index"] == index:
                return gpu
        raise MigError(f"nvidia-smi --query-gpu: GPU {index} is gone")

    def apps(self):
        """Compute processes, each with the index of its GPU (UUIDs from ``-L``, read only when some run)."""
        apps = parse_compute_apps(self.call([f"--query-compute-apps={QUERY_APPS}", "--format=csv,noheader"]))
        if apps:
            uuids = parse_uuids(self.call(["-L"]))
            for app in apps:
                app["gpu"] = uuids.get(app["gpu_uuid"])
        return apps

    def all_profiles(self):
        """Every GPU's profiles (one ``mig -lgip``); {} where nvidia-smi lists none."""
        rc, out, _err = self.run([self.path, "mig", "-lgip"])
        return parse_lgip(out or "") if rc == 0 else {}

    def profiles(self, gpu):
        return self.all_profiles().get(gpu["index"], {}) if gpu["mig_current"] is not None else {}

    def listing(self):
        """Every GPU's GPU and compute instances (one ``mig -lgi`` and one ``mig -lci``)."""
        gis = parse_lgi(self.call(["mig", "-lgi"], empty_ok=True))
        return gis, parse_lci(self.call(["mig", "-lci"], empty_ok=True))

    def state(self, gpu, listing=None):
        if not gpu["mig_current"]:
            return {"gis": [], "cis": [], "instances": {}, "clean": True}
        gis, cis = listing if listing is not None else self.listing()
        gis = [gi for gi in gis if gi["gpu"] == gpu["index"]]
        cis = [ci for ci in cis if ci["gpu"] == gpu["index"]]
        counts, clean = instance_counts(gis, cis)
        return {"gis": gis, "cis": cis, "instances": counts, "clean": clean}


class Services:
    """The system services that hold GPUs, stopped around a reset when draining.

    ``active(name)``: whether the service runs; ``control(verb, name)`` (``stop``, ``start``):
    "" when done, else why not. The caller runs systemd: ``gpunode.host.systemd`` in the
    ``nvidia_mig`` module, the boot script's own ``systemctl`` at boot.
    """

    def __init__(self, names, active, control):
        self.names = list(names)
        self.active = active
        self.control = control
        self.stopped = []

    def stop(self):
        for name in self.names:
            if not self.active(name):
                continue
            error = self.control("stop", name)
            if error:
                raise MigError(f"systemctl stop {name} failed: {error}")
            self.stopped.append(name)

    def start(self):
        failed = []
        while self.stopped:
            name = self.stopped.pop()
            error = self.control("start", name)
            if error:
                failed.append(f"{name}: {error}")
        if failed:
            raise MigError(f"systemctl start failed after the GPU reset: {'; '.join(failed)}")


def reset_gpu(smi, gpu, services):
    """Reset one GPU so its pending MIG mode takes effect; '' when done, else why not."""
    if services is not None:
        services.stop()
    try:
        rc, out, err = smi.run([smi.path, "--gpu-reset", "-i", str(gpu["index"])])
        smi.commands.append(f"nvidia-smi --gpu-reset -i {gpu['index']}")
    finally:
        if services is not None:
            services.start()
    return "" if rc == 0 else (" ".join(((out or "") + (err or "")).split()) or f"rc {rc}")


def apply_mode(smi, gpu, want, services):
    """Set the MIG mode and reset for it; (gpu read again, why the mode is still not in effect)."""
    index = str(gpu["index"])
    if gpu["mig_pending"] != want:
        smi.call(["-i", index, "-mig", "1" if want else "0"], record=True)
        gpu = smi.gpu(gpu["index"])
    if gpu["mig_current"] == want:
        return gpu, ""
    why = reset_gpu(smi, gpu, services)
    gpu = smi.gpu(gpu["index"])
    if gpu["mig_current"] != want:
        return gpu, why or "the mode is still pending after the reset"
    return gpu, ""


def destroy_all(smi, gpu, state):
    index = str(gpu["index"])
    if state["cis"]:
        smi.call(["mig", "-i", index, "-dci"], record=True)
    if state["gis"]:
        smi.call(["mig", "-i", index, "-dgi"], record=True)


def apply_gpu(smi, gpu, entry, state, services):
    """Converge one GPU; returns (gpu, state) read after, and why a reboot is needed ('' if not)."""
    want = entry["mig_enabled"]
    wrong = not want or gpu["mig_current"] != want or state["instances"] != entry["instances"]
    if (state["gis"] or state["cis"]) and (wrong or not state["clean"]):
        destroy_all(smi, gpu, state)
    gpu, why = apply_mode(smi, gpu, want, services)
    if why:
        return gpu, smi.state(gpu), why
    state = smi.state(gpu)
    if want and (state["instances"] != entry["instances"] or not state["clean"]):
        destroy_all(smi, gpu, state)
        profiles = smi.profiles(gpu)
        check_profiles(gpu, entry["instances"], profiles)
        if entry["instances"]:
            ids = create_order(entry["instances"], profiles)
            smi.call(["mig", "-i", str(gpu["index"]), "-cgi", ",".join(ids), "-C"], record=True)
        state = smi.state(gpu)
    return gpu, state, ""


def survey(smi, entries, selected):
    """Read and judge every GPU the config names before anything changes: [(gpu, entry, state, plan)]."""
    named = []
    for gpu in smi.gpus():
        entry = match_entry(entries, gpu)
        if entry is None:
            continue
        check_supported(gpu, entry, selected)
        if gpu["mig_current"] is not None:  # else no MIG, and none asked for
            named.append((gpu, entry))
    listing = smi.listing() if any(gpu["mig_current"] for gpu, _entry in named) else ([], [])
    targets = [(gpu, entry, smi.state(gpu, listing)) for gpu, entry in named]
    targets = [(gpu, entry, state, gpu_plan(gpu, entry, state)) for gpu, entry, state in targets]
    changing = [t for t in targets if t[3]["mode"] is not None or t[3]["destroy"] or t[3]["create"]]
    if changing:  # a converged host costs three reads: the GPUs, their GPU and compute instances
        profiles = smi.all_profiles()
        apps = smi.apps()
        for gpu, entry, _state, _plan in changing:
            check_profiles(gpu, entry["instances"], profiles.get(gpu["index"], {}))
        for gpu, _entry, _state, _plan in changing:
            check_idle(gpu, apps)
    return targets


def converge(smi, entries, selected, check_mode=False, services=None):
    """Bring the GPUs to the selected layout; the module's result (without diff)."""
    result = {"changed": False, "reset_required": False, "reboot_required": False, "gpus": {},
              "commands": smi.commands, "reasons": []}
    for gpu, entry, state, plan in survey(smi, entries, selected):
        item = result["gpus"][str(gpu["index"])] = {"before": view(gpu, state)}
        if plan["mode"] is None and not plan["destroy"] and not plan["create"]:
            item["after"] = item["before"]
            continue
        result["changed"] = True
        if check_mode:
            item["after"] = wanted_view(entry)
            if gpu["mig_current"] != entry["mig_enabled"]:
                result["reset_required"] = True
                result["reasons"].append(f"{describe(gpu)}: MIG mode change takes effect at a GPU reset")
            continue
        now, after, why = apply_gpu(smi, gpu, entry, state, services)
        item["after"] = view(now, after)
        if why:
            result["reset_required"] = result["reboot_required"] = True
            result["reasons"].append(f"{describe(now)}: the GPU reset for the MIG mode failed ({why}); "
                                     "the layout is not applied: reboot, then run again")
    result["changes"] = change_lines(selected, result["gpus"])
    return result


def parse_list(text):
    """``nvidia-smi -L`` -> {GPU index: {profile: count of MIG devices}} (indented MIG lines are no GPUs)."""
    found = {}
    current = None
    for line in text.splitlines():
        gpu = re.match(r"^GPU (\d+): ", line)
        if gpu:
            current = found.setdefault(int(gpu.group(1)), {})
            continue
        device = re.match(r"^\s+MIG (\S+)\s+Device\s+\d+:", line)
        if device and current is not None:
            current[device.group(1)] = current.get(device.group(1), 0) + 1
    return found
