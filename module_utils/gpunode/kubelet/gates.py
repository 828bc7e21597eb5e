# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Kubelet feature gates: what each Kubernetes version accepts, and what to write.

The gate table is data. Each gate lists its stages (alpha, beta, GA) with the
first and last minor version of each, the default, and whether the value is
locked; ``removed`` is the first version whose kubelet no longer knows the
gate: given it, that kubelet refuses to start ("unrecognized feature gate").
``checked_through`` is the last minor version the sources were read for;
``planned_removal`` is a removal the sources announce for a later release.

Every kubelet knows every gate of the Kubernetes gate registry (the DRA gates
that moved to kube-scheduler's own file in 1.37 are still registered in the
kubelet's binary), so the table holds the gates a GPU node may set, whichever
component they act in. Sources, each read in kubernetes/kubernetes or
kubernetes/website:

- [KF133] kubernetes/kubernetes pkg/features/kube_features.go @ b0b89d3bd251
  (1.33 tree: versioned specs of DevicePluginCDIDevices, KubeletPodResources*,
  ResourceHealthStatus).
- [KF135] the same file in the 1.35 tree (KubeletPodResourcesGet and
  KubeletPodResourcesDynamicResources beta from 1.34; no DevicePluginCDIDevices).
- [KS137] kubernetes/kubernetes staging/src/k8s.io/kube-scheduler/pkg/features/
  kube_features.go @ ead35706ec68 (1.37 tree: every DRA gate's versioned specs,
  with the removal comments quoted below).
- [CL136] kubernetes/kubernetes CHANGELOG/CHANGELOG-1.36.md: "Promoted the
  KubeletPodResourcesDynamicResources and KubeletPodResourcesGet feature gates
  to GA" (kubernetes/kubernetes#136728).
- [WS] kubernetes/website content/en/docs/reference/command-line-tools-reference/
  feature-gates/<Gate>.md: DynamicResourceAllocation.md @ 1067c0957e9f,
  DevicePluginCDIDevices.md @ 36968e86b222 (stable 1.31-1.33, removed),
  KubeletPodResourcesDynamicResources.md and ResourceHealthStatus.md @
  77db41e9c776 (stable from 1.36; beta from 1.36), and for the gates removed
  long ago Accelerators.md, DevicePlugins.md, KubeletPodResources.md,
  KubeletPodResourcesGetAllocatable.md.

The kubelet merges gates from its config file and its flags, flags winning
per gate (cmd/kubelet/app/server.go, kubeletConfigFlagPrecedence).

Pure Python, standard library only: this runs on target hosts (Python 3.8+).
"""

import re
from collections import namedtuple

from ansible.module_utils.gpunode.formats.kube_version import minor as kube_minor
from ansible.module_utils.gpunode.formats.kube_version import parse as kube_parse
from ansible.module_utils.gpunode.formats.kube_version import text as kube_text

Stage = namedtuple("Stage", "stage since until default locked")

GATES = {
    # [WS] Accelerators.md: alpha 1.6-1.10, removed with alpha.kubernetes.io/nvidia-gpu
    "Accelerators": {
        "stages": [Stage("alpha", "1.6", "1.10", False, False)],
        "removed": "1.11",
    },
    # [WS] DevicePlugins.md; kube_features.go "LockToDefault: true // remove in 1.28" (PR 117656)
    "DevicePlugins": {
        "stages": [
            Stage("alpha", "1.8", "1.9", False, False),
            Stage("beta", "1.10", "1.25", True, False),
            Stage("GA", "1.26", "1.27", True, True),
        ],
        "removed": "1.28",
    },
    # [WS] KubeletPodResources.md; kube_features.go "GA in 1.28, remove in 1.30"
    "KubeletPodResources": {
        "stages": [
            Stage("alpha", "1.13", "1.14", False, False),
            Stage("beta", "1.15", "1.27", True, False),
            Stage("GA", "1.28", "1.29", True, True),
        ],
        "removed": "1.30",
    },
    # [WS] KubeletPodResourcesGetAllocatable.md; kube_features.go "GA in 1.28, remove in 1.30"
    "KubeletPodResourcesGetAllocatable": {
        "stages": [
            Stage("alpha", "1.21", "1.22", False, False),
            Stage("beta", "1.23", "1.27", True, False),
            Stage("GA", "1.28", "1.29", True, True),
        ],
        "removed": "1.30",
    },
    # [KF133] alpha 1.28, beta 1.29, GA locked 1.31 "// remove in 1.33"; [WS] stable to 1.33, removed
    "DevicePluginCDIDevices": {
        "stages": [
            Stage("alpha", "1.28", "1.28", False, False),
            Stage("beta", "1.29", "1.30", True, False),
            Stage("GA", "1.31", "1.33", True, True),
        ],
        "removed": "1.34",
    },
    # [KS137] alpha 1.26, beta 1.32, GA 1.34, GA locked 1.35; "remove completely in 1.38"
    # (kubernetes/kubernetes#134459); [WS] DynamicResourceAllocation.md says the same to 1.35
    "DynamicResourceAllocation": {
        "stages": [
            Stage("alpha", "1.26", "1.31", False, False),
            Stage("beta", "1.32", "1.33", False, False),
            Stage("GA", "1.34", "1.34", True, False),
            Stage("GA", "1.35", None, True, True),
        ],
        "removed": None,
        "planned_removal": "1.38",
        "checked_through": "1.37",
    },
    # [KS137] alpha 1.32, beta 1.34, GA locked 1.36 "// GA in 1.36; remove in 1.39"
    "DRAAdminAccess": {
        "stages": [
            Stage("alpha", "1.32", "1.33", False, False),
            Stage("beta", "1.34", "1.35", True, False),
            Stage("GA", "1.36", None, True, True),
        ],
        "removed": None,
        "planned_removal": "1.39",
        "checked_through": "1.37",
    },
    # [KS137] alpha 1.34, beta 1.36
    "DRAConsumableCapacity": {
        "stages": [
            Stage("alpha", "1.34", "1.35", False, False),
            Stage("beta", "1.36", None, True, False),
        ],
        "removed": None,
        "checked_through": "1.37",
    },
    # [KS137] alpha 1.33, beta 1.36, GA 1.37 "// LockToDefault: true in 1.38; remove in 1.41"
    "DRADeviceTaints": {
        "stages": [
            Stage("alpha", "1.33", "1.35", False, False),
            Stage("beta", "1.36", "1.36", True, False),
            Stage("GA", "1.37", None, True, False),
        ],
        "removed": None,
        "planned_removal": "1.41",
        "checked_through": "1.37",
    },
    # [KS137] alpha 1.34, beta 1.36, GA locked 1.37 "// GA in 1.37; remove in 1.40"
    "DRAExtendedResource": {
        "stages": [
            Stage("alpha", "1.34", "1.35", False, False),
            Stage("beta", "1.36", "1.36", True, False),
            Stage("GA", "1.37", None, True, True),
        ],
        "removed": None,
        "planned_removal": "1.40",
        "checked_through": "1.37",
    },
    # [KS137] alpha 1.33, beta 1.36
    "DRAPartitionableDevices": {
        "stages": [
            Stage("alpha", "1.33", "1.35", False, False),
            Stage("beta", "1.36", None, True, False),
        ],
        "removed": None,
        "checked_through": "1.37",
    },
    # [KS137] alpha 1.33, beta 1.34, GA 1.36, GA locked 1.37 "// Remove completely in 1.40."
    "DRAPrioritizedList": {
        "stages": [
            Stage("alpha", "1.33", "1.33", False, False),
            Stage("beta", "1.34", "1.35", True, False),
            Stage("GA", "1.36", "1.36", True, False),
            Stage("GA", "1.37", None, True, True),
        ],
        "removed": None,
        "planned_removal": "1.40",
        "checked_through": "1.37",
    },
    # [KF135] alpha 1.27, beta 1.34; [CL136] GA in 1.36; [WS] stable from 1.36, not locked
    "KubeletPodResourcesDynamicResources": {
        "stages": [
            Stage("alpha", "1.27", "1.33", False, False),
            Stage("beta", "1.34", "1.35", True, False),
            Stage("GA", "1.36", None, True, False),
        ],
        "removed": None,
        "checked_through": "1.36",
    },
    # [KF135] alpha 1.27, beta 1.34; [CL136] GA in 1.36
    "KubeletPodResourcesGet": {
        "stages": [
            Stage("alpha", "1.27", "1.33", False, False),
            Stage("beta", "1.34", "1.35", True, False),
            Stage("GA", "1.36", None, True, False),
        ],
        "removed": None,
        "checked_through": "1.36",
    },
    # [KF133]/[KF135] alpha 1.31; [WS] ResourceHealthStatus.md: beta (default true) from 1.36
    "ResourceHealthStatus": {
        "stages": [
            Stage("alpha", "1.31", "1.35", False, False),
            Stage("beta", "1.36", None, True, False),
        ],
        "removed": None,
        "checked_through": "1.36",
    },
}

# The newest minor version any gate of the table was checked for.
TABLE_LAST_VERSION = "1.37"

# Gates a GPU node had to set on some versions (or that installers wrote for
# GPU nodes) and that later kubelets refuse: with gpu_node, a leftover is taken
# out of the file once the kubelet no longer knows the gate.
GPU_LEFTOVER_GATES = (
    "DevicePlugins",
    "KubeletPodResources",
    "KubeletPodResourcesGetAllocatable",
    "DevicePluginCDIDevices",
)

# strconv.ParseBool, which the kubelet's --feature-gates parser uses
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


GATE_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*")


class GateError(ValueError):
    """A gate that this kubelet would refuse, or input that cannot be read."""


def parse_version(text):
    """(major, minor, patch) of a Kubernetes version, through kube_version."""
    return kube_parse(text, error=GateError)


def format_version(version):
    return kube_text(version)


def _minor(text):
    return kube_minor(parse_version(text))


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


def check_gate_name(name):
    """Refuse a name that is not an identifier, or a known gate spelled in another case (GateError).

    The kubelet splits ``--feature-gates`` at ``,`` and ``=`` and knows names
    case-sensitively; a quote, newline or space would end the value in the
    file that holds the flag. Nothing is ever quoted or escaped instead.
    """
    if not isinstance(name, str) or not GATE_NAME_RE.fullmatch(name):
        raise GateError(
            f"{name!r} is not a feature gate name (letters and digits, starting with a letter: "
            "[A-Za-z][A-Za-z0-9]*)"
        )
    if name not in GATES:
        same = [known for known in sorted(GATES) if known.lower() == name.lower()]
        if same:
            raise GateError(
                f"{name!r} is not a feature gate name the kubelet knows (names are case-sensitive): "
                f"did you mean {same[0]}?"
            )


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


def _word(value):
    return "true" if value else "false"


def checked_through(name):
    """The last minor version the table's sources cover for ``name``."""
    entry = GATES[name]
    if entry.get("removed"):
        return None
    return entry.get("checked_through", TABLE_LAST_VERSION)


def beyond_table(name, version):
    """True when ``version`` is newer than what the table knows of gate ``name``."""
    last = checked_through(name)
    return last is not None and _minor(version) > _minor(last)


def stage_at(name, version):
    """The Stage of gate ``name`` in ``version``, or None when that version does not know it.

    A version newer than the table gets the last known stage (callers warn: see decide()).
    """
    entry = GATES[name]
    minor = _minor(version)
    removed = entry.get("removed")
    if removed and minor >= _minor(removed):
        return None
    if beyond_table(name, version):
        minor = _minor(checked_through(name))
    for stage in entry["stages"]:
        until = _minor(stage.until) if stage.until else None
        if _minor(stage.since) <= minor and (until is None or minor <= until):
            return stage
    return None


def _beyond_table(name, value, version_text, stage, outcome):
    """decide() for a kubelet newer than the table: never a silent guess.

    ``outcome`` is decide()'s (apply, skipped, warnings, errors), filled in here.
    """
    apply, skipped, warnings, errors = outcome
    entry = GATES[name]
    last = checked_through(name)
    planned = entry.get("planned_removal")
    due = planned and _minor(version_text) >= _minor(planned)
    if stage.locked and value == stage.default:
        skipped[name] = (
            f"{name} is {stage.stage} and locked to {_word(stage.default)} in Kubernetes {last}, the "
            f"last version this module's gate table knows; a {version_text} kubelet behaves as "
            f"{name}={_word(value)}"
            + (f" and, by its planned removal in {planned}, may no longer know the gate" if due else "")
            + ", so it is not written (and is removed from the file if present)"
        )
        warnings.append(f"{name}: {skipped[name]}")
        return
    if stage.locked:
        errors.append(
            f"{name} is locked to {_word(stage.default)} since Kubernetes {stage.since} (this module's gate "
            f"table knows it through {last}); a {version_text} kubelet refuses {name}={_word(value)}"
        )
        return
    if due:
        errors.append(
            f"{name} is due to be removed in Kubernetes {planned} and this kubelet is {version_text}, "
            f"newer than this module's gate table (last: {last}); not written: check the release notes, "
            "then set allow_unknown=true to write it anyway"
        )
        return
    apply[name] = value
    warnings.append(
        f"Kubernetes {version_text} is newer than this module's gate table for {name} (last: {last}): "
        f"written as it stood in {last} ({stage.stage}, default {_word(stage.default)}); check the "
        f"{'.'.join(map(str, _minor(version_text)))} release notes"
    )


def _unknown(name, value, allow_unknown, outcome):
    """decide() for a gate outside the table: written only with allow_unknown."""
    apply, _skipped, warnings, errors = outcome
    if allow_unknown:
        apply[name] = value
        warnings.append(f"{name} is not in this module's gate table; written unchecked (allow_unknown)")
        return
    errors.append(
        f"{name} is not a feature gate this module knows (known: {', '.join(sorted(GATES))}); "
        "a kubelet given a gate it does not know refuses to start. "
        "Check the spelling, or set allow_unknown=true to write it anyway"
    )


def _known_stage(name, value, version_text, stage, outcome):
    """decide() for a gate this kubelet has: written unless locked to the other value."""
    apply, _skipped, _warnings, errors = outcome
    if stage.locked and value != stage.default:
        errors.append(
            f"{name} is {stage.stage} and locked to {_word(stage.default)} in Kubernetes "
            f"{version_text}; the kubelet refuses {name}={_word(value)}"
        )
    else:
        apply[name] = value


def _not_served(name, value, version_text, outcome):
    """decide() for a gate this kubelet does not have: too new, or removed (skipped when GA as asked)."""
    _apply, skipped, _warnings, errors = outcome
    entry = GATES[name]
    word = _word(value)
    first = entry["stages"][0]
    if parse_version(version_text) < parse_version(first.since):
        errors.append(
            f"{name} was added in Kubernetes {first.since}; this kubelet is {version_text} "
            "and would not start with it"
        )
        return
    last = entry["stages"][-1]
    if last.stage == "GA" and value == last.default:
        skipped[name] = (
            f"{name} graduated to GA in Kubernetes {last.since} and was removed in {entry['removed']}: "
            f"a {version_text} kubelet always behaves as {name}={word} and would refuse the gate, "
            "so it is not written (and is removed from the file if present)"
        )
        return
    errors.append(
        f"{name} was removed in Kubernetes {entry['removed']}; this kubelet is {version_text} "
        f"and would not start with {name}={word}"
    )


def decide(gates, version, allow_unknown=False):
    """Which asked-for gates to write, which to skip, and why; raises GateError on a refusal.

    Returns (apply, skipped, warnings): ``apply`` maps name -> bool to write;
    ``skipped`` maps name -> reason for gates that need no setting because the
    kubelet no longer has them (or, past the table, has them locked) and always
    behaves as asked (the file should not hold them either: the caller removes
    them). Every refusal is collected so that one message names them all.
    """
    version_text = format_version(parse_version(version))
    apply, skipped, warnings, errors = {}, {}, [], []
    outcome = (apply, skipped, warnings, errors)
    for name, raw in gates.items():
        try:
            check_gate_name(name)
            value = parse_bool(name, raw)
        except GateError as exc:
            errors.append(str(exc))
            continue
        stage = stage_at(name, version_text) if name in GATES else None
        if name not in GATES:
            _unknown(name, value, allow_unknown, outcome)
        elif stage is not None and beyond_table(name, version_text):
            _beyond_table(name, value, version_text, stage, outcome)
        elif stage is not None:
            _known_stage(name, value, version_text, stage, outcome)
        else:
            _not_served(name, value, version_text, outcome)
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
            problems[name] = f"{name} is locked to {_word(stage.default)}"
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
    it is on by default, nothing to write. The GPU gates that graduated and
    were removed (GPU_LEFTOVER_GATES) are asked for with their final value
    from their removal on: decide() then skips them, and the caller takes a
    leftover out of the file (an upgraded node's kubelet would refuse to start
    with it). Accelerators (the pre-device-plugin GPU support) only where asked
    for and the version still has it (before 1.11).
    """
    needed = {}
    stage = stage_at("DevicePlugins", version)
    if stage is not None and stage.default is False:
        needed["DevicePlugins"] = True
    for name in GPU_LEFTOVER_GATES:
        entry = GATES[name]
        if entry["removed"] and parse_version(version) >= parse_version(entry["removed"]):
            needed[name] = entry["stages"][-1].default
    if legacy_accelerators and stage_at("Accelerators", version) is not None:
        needed["Accelerators"] = True
    return needed
