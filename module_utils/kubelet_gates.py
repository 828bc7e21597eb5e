"""Kubelet feature gates: what each Kubernetes version accepts, and what to write.

The gate table is data. Each gate lists its stages (alpha, beta, GA) with the
first and last minor version of each, the default, and whether the value is
locked; ``removed`` is the first version whose kubelet no longer knows the
gate: given it, that kubelet refuses to start ("unrecognized feature gate").

To add a gate, copy an entry and give its source. Sources (kubernetes/website,
content/en/docs/reference/command-line-tools-reference/feature-gates/<Gate>.md
and feature-gates-removed/index.md; kubernetes/kubernetes pkg/features/kube_features.go):

- Accelerators: alpha 1.6-1.10 (default false); deprecated 1.11 and removed
  with ``alpha.kubernetes.io/nvidia-gpu`` ("Provided an early form of plugin to
  enable Nvidia GPU support ... no longer available"). Accelerators.md.
- DevicePlugins: alpha 1.8-1.9 (false), beta 1.10-1.25 (true), GA 1.26-1.27
  locked to true (kube_features.go: ``LockToDefault: true // remove in 1.28``,
  kubernetes/kubernetes PR 117656 removed it), removed in 1.28. DevicePlugins.md.
- KubeletPodResources: alpha 1.13-1.14 (false), beta 1.15-1.27 (true), GA
  1.28-1.29 locked (``// GA in 1.28, remove in 1.30``), removed in 1.30.
  KubeletPodResources.md (the pod resources API that GPU monitoring uses).
- KubeletPodResourcesGetAllocatable: alpha 1.21-1.22 (false), beta 1.23-1.27
  (true), GA 1.28-1.29 locked, removed in 1.30. KubeletPodResourcesGetAllocatable.md.
- DynamicResourceAllocation: alpha 1.26-1.31 (false), beta 1.32-1.33 (false),
  GA 1.34 (true), GA locked from 1.35. DynamicResourceAllocation.md.

Pure Python, standard library only: this runs on target hosts.
"""

import re
from collections import namedtuple

Stage = namedtuple("Stage", "stage since until default locked")

GATES = {
    "Accelerators": {
        "stages": [Stage("alpha", "1.6", "1.10", False, False)],
        "removed": "1.11",
    },
    "DevicePlugins": {
        "stages": [
            Stage("alpha", "1.8", "1.9", False, False),
            Stage("beta", "1.10", "1.25", True, False),
            Stage("GA", "1.26", "1.27", True, True),
        ],
        "removed": "1.28",
    },
    "KubeletPodResources": {
        "stages": [
            Stage("alpha", "1.13", "1.14", False, False),
            Stage("beta", "1.15", "1.27", True, False),
            Stage("GA", "1.28", "1.29", True, True),
        ],
        "removed": "1.30",
    },
    "KubeletPodResourcesGetAllocatable": {
        "stages": [
            Stage("alpha", "1.21", "1.22", False, False),
            Stage("beta", "1.23", "1.27", True, False),
            Stage("GA", "1.28", "1.29", True, True),
        ],
        "removed": "1.30",
    },
    "DynamicResourceAllocation": {
        "stages": [
            Stage("alpha", "1.26", "1.31", False, False),
            Stage("beta", "1.32", "1.33", False, False),
            Stage("GA", "1.34", "1.34", True, False),
            Stage("GA", "1.35", None, True, True),
        ],
        "removed": None,
    },
}

_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")
# strconv.ParseBool, which the kubelet's --feature-gates parser uses
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


class GateError(ValueError):
    """A gate that this kubelet would refuse, or input that cannot be read."""


def parse_version(text):
    """(major, minor, patch) from ``1.28.2``, ``v1.28.2``, ``Kubernetes v1.28.2+rke2r1``."""
    match = _VERSION_RE.search(str(text or ""))
    if not match:
        raise GateError(f"cannot read a Kubernetes version from {text!r} (expected e.g. 1.28.2 or v1.28.2)")
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def format_version(version):
    return ".".join(str(part) for part in version)


def _minor(text):
    major, minor, _ = parse_version(text)
    return major, minor


def parse_bool(name, value):
    """A gate value as the kubelet reads it (Go's strconv.ParseBool)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise GateError(f"feature gate {name}: invalid value {value!r} (expected true or false)")


def parse_gate_string(text):
    """``A=true,B=false`` -> {"A": True, "B": False}, in order (later wins, as in the kubelet)."""
    gates = {}
    for raw_part in str(text or "").split(","):
        part = raw_part.strip()
        if not part:
            continue
        if "=" not in part:
            raise GateError(f"feature gate entry {part!r} is not Name=true|false")
        name, value = part.split("=", 1)
        name = name.strip()
        gates[name] = parse_bool(name, value.strip())
    return gates


def format_gate_string(gates):
    """{"A": True} -> ``A=true``; values lower-case, order kept."""
    return ",".join(f"{name}={'true' if value else 'false'}" for name, value in gates.items())


def stage_at(name, version):
    """The Stage of gate ``name`` in ``version``, or None when that version does not know it."""
    entry = GATES[name]
    minor = _minor(version)
    removed = entry.get("removed")
    if removed and minor >= _minor(removed):
        return None
    for stage in entry["stages"]:
        until = _minor(stage.until) if stage.until else None
        if _minor(stage.since) <= minor and (until is None or minor <= until):
            return stage
    return None


def decide(gates, version, allow_unknown=False):
    """Which asked-for gates to write, which to skip, and why; raises GateError on a refusal.

    Returns (apply, skipped, warnings): ``apply`` maps name -> bool to write;
    ``skipped`` maps name -> reason for gates that need no setting because the
    kubelet no longer has them and always behaves as asked (the file should
    not hold them either: the caller removes them). Every refusal is collected
    so that one message names them all.
    """
    version_text = format_version(parse_version(version))
    apply, skipped, warnings, errors = {}, {}, [], []
    for name, raw in gates.items():
        try:
            value = parse_bool(name, raw)
        except GateError as exc:
            errors.append(str(exc))
            continue
        word = "true" if value else "false"
        if name not in GATES:
            if allow_unknown:
                apply[name] = value
                warnings.append(
                    f"{name} is not in this module's gate table; written unchecked (allow_unknown)"
                )
            else:
                errors.append(
                    f"{name} is not a feature gate this module knows (known: {', '.join(sorted(GATES))}); "
                    "a kubelet given a gate it does not know refuses to start. "
                    "Check the spelling, or set allow_unknown=true to write it anyway"
                )
            continue
        entry = GATES[name]
        stage = stage_at(name, version_text)
        if stage is not None:
            if stage.locked and value != stage.default:
                errors.append(
                    f"{name} is {stage.stage} and locked to {str(stage.default).lower()} in Kubernetes "
                    f"{version_text}; the kubelet refuses {name}={word}"
                )
            else:
                apply[name] = value
            continue
        first = entry["stages"][0]
        if parse_version(version_text) < parse_version(first.since):
            errors.append(
                f"{name} was added in Kubernetes {first.since}; this kubelet is {version_text} "
                "and would not start with it"
            )
            continue
        last = entry["stages"][-1]
        if last.stage == "GA" and value == last.default:
            skipped[name] = (
                f"{name} graduated to GA in Kubernetes {last.since} and was removed in {entry['removed']}: "
                f"a {version_text} kubelet always behaves as {name}={word} and would refuse the gate, "
                "so it is not written (and is removed from the file if present)"
            )
            continue
        errors.append(
            f"{name} was removed in Kubernetes {entry['removed']}; this kubelet is {version_text} "
            f"and would not start with {name}={word}"
        )
    if errors:
        raise GateError("; ".join(errors))
    return apply, skipped, warnings


def refused_in_file(existing, version):
    """Gates present in a file (not asked about) that this kubelet would refuse: name -> why."""
    problems = {}
    for name, value in existing.items():
        if name not in GATES:
            continue
        stage = stage_at(name, version)
        if stage is None:
            problems[name] = f"{name} is not known to Kubernetes {format_version(parse_version(version))}"
        elif stage.locked and value != stage.default:
            problems[name] = f"{name} is locked to {str(stage.default).lower()}"
    return problems


def merge(existing, apply, remove):
    """Existing gates (order kept) updated by ``apply``, without the names in ``remove``."""
    merged = {name: value for name, value in existing.items() if name not in remove}
    for name, value in apply.items():
        merged[name] = value
    return merged


def gates_needed(version, legacy_accelerators=False):
    """The gates a GPU node needs on this version (what the role asks for by default).

    DevicePlugins must be set to true where it is alpha (1.8-1.9); beta and GA
    it is on by default, nothing to write. From its removal (1.28) it is asked
    for too: decide() then skips it, and the caller takes a leftover
    ``DevicePlugins=true`` out of the file (an upgraded node's kubelet would
    refuse to start with it). Accelerators (the pre-device-plugin GPU support)
    only where asked for and the version still has it (before 1.11).
    """
    needed = {}
    stage = stage_at("DevicePlugins", version)
    removed = GATES["DevicePlugins"]["removed"]
    if (stage is not None and stage.default is False) or parse_version(version) >= parse_version(removed):
        needed["DevicePlugins"] = True
    if legacy_accelerators and stage_at("Accelerators", version) is not None:
        needed["Accelerators"] = True
    return needed
