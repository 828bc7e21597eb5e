# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One small step per check: a reading in, ``{check, gpu, passed, message}`` results out.

``passed`` is True, False, or None when the check does not apply to that GPU or
could not read what it needs (the message says which). A check never runs a
command: :mod:`validate.run` reads, these judge. Standard library only;
Python 3.8+ (runs on managed nodes).
"""

from collections import Counter

from ansible.module_utils.gpunode.validate import imex, xid
from ansible.module_utils.gpunode.validate.smi import describe, uncorrectable

HOST = "host"


def result(check, gpu, passed, message):
    return {"check": check, "gpu": gpu if isinstance(gpu, str) else describe(gpu),
            "passed": passed, "message": message}


def skipped(check, gpu, message):
    return result(check, gpu, None, message)


def nvml(smi, sysfs_gpus):
    """Every GPU on the PCI bus (sysfs) answers through NVML (is in ``nvidia-smi -q -x``)."""
    if smi.get("error"):
        return [result("nvml", address, False, f"NVML does not answer: {smi['error']}")
                for address in (sysfs_gpus or [HOST])]
    seen = {gpu["bus_id"] for gpu in smi["gpus"]}
    results = [result("nvml", gpu, True, f"answers through NVML ({gpu['name']})") for gpu in smi["gpus"]]
    for address in sysfs_gpus:
        if address not in seen:
            results.append(result("nvml", address, False,
                                  f"GPU {address} is on the PCI bus but NVML does not list it "
                                  f"(nvidia-smi lists {', '.join(sorted(seen)) or 'no GPU'})"))
    if not results:
        results.append(result("nvml", HOST, False, "nvidia-smi lists no GPU"))
    return results


def _version_matches(found, wanted):
    parts = wanted.split(".")
    return (found or "").split(".")[:len(parts)] == parts


def driver_version(smi, wanted):
    if not wanted:
        return [skipped("driver_version", HOST, "no driver_version given to compare with")]
    found = smi["driver_version"]
    if _version_matches(found, wanted):
        return [result("driver_version", HOST, True, f"driver {found}")]
    return [result("driver_version", HOST, False, f"driver {found}, wanted {wanted}")]


def persistence(gpu):
    mode = gpu["persistence_mode"]
    if mode == "Enabled":
        return result("persistence", gpu, True, "persistence mode Enabled")
    return result("persistence", gpu, False, f"persistence mode {mode} (wanted Enabled: nvidia-persistenced)")


def ecc(gpu):
    mode = gpu["ecc_mode"]
    if mode in (None, "N/A"):
        return skipped("ecc", gpu, "the GPU has no ECC (ecc_mode N/A)")
    aggregate = sum(uncorrectable(gpu["ecc_aggregate"]).values())
    lifetime = f"lifetime uncorrectable {aggregate} (aggregate, reported)"
    if mode != "Enabled":
        return result("ecc", gpu, False, f"ECC mode {mode} (pending {gpu['ecc_pending']}), wanted Enabled")
    volatile = {name: count for name, count in uncorrectable(gpu["ecc_volatile"]).items() if count}
    if volatile:
        shown = ", ".join(f"{name}={count}" for name, count in sorted(volatile.items()))
        return result("ecc", gpu, False, f"volatile uncorrectable ECC errors since boot: {shown}; {lifetime}")
    if gpu["unrepairable_memory"] == "Yes":
        return result("ecc", gpu, False, f"unrepairable_memory Yes; {lifetime}")
    return result("ecc", gpu, True, f"ECC Enabled, no volatile uncorrectable error; {lifetime}")


def remapped_rows(gpu):
    if gpu["remap_pending"] is None and gpu["remap_failure"] is None:
        pending = gpu["retired_pending"]
        if pending in (None, "N/A"):
            return skipped("remapped_rows", gpu, "neither row remapping nor page retirement reported (N/A)")
        if pending == "Yes":
            return result("remapped_rows", gpu, False, "retired pages pending: reset the GPU or reboot")
        return result("remapped_rows", gpu, True, f"retired pages pending: {pending}")
    if gpu["remap_failure"] == "Yes":
        return result("remapped_rows", gpu, False, "row remapping failure: the GPU needs service")
    if gpu["remap_pending"] == "Yes":
        return result("remapped_rows", gpu, False, "row remap pending: reset the GPU or reboot")
    return result("remapped_rows", gpu, True, "no pending or failed row remap")


def pcie_link(gpu):
    link = gpu["pcie"]
    if link["max_width"] is None or link["current_width"] is None:
        return skipped("pcie_link", gpu, "nvidia-smi reports no PCIe link width")
    if link["current_width"] < link["max_width"]:
        return result("pcie_link", gpu, False,
                      f"PCIe link x{link['current_width']}, its maximum is x{link['max_width']}")
    shown = f"PCIe link x{link['current_width']} gen {link['current_gen']} (max gen {link['max_gen']})"
    state = gpu["performance_state"]
    if state != "P0":
        return result("pcie_link", gpu, True,
                      f"{shown}; generation not judged in {state} (links slow down at idle)")
    if None not in (link["current_gen"], link["max_gen"]) and link["current_gen"] < link["max_gen"]:
        return result("pcie_link", gpu, False, f"{shown} in P0: trained below its maximum generation")
    return result("pcie_link", gpu, True, shown)


#: What an NVLink5 fabric still ``In Progress`` waits for (Fabric Manager User Guide, NVLink5: the
#: fabric manager's unit starts NVLSM on a management port first; gpu-operator issue 2781).
NVLINK5_NEEDS = ("an NVLink5 fabric needs NVLSM running, started by nvidia-fabricmanager, on the "
                 "management ports, and the ib_umad and mlx5_ib modules loaded before it")
NOT_APPLICABLE = (None, "N/A")


def zero_uuid(uuid):
    return uuid in NOT_APPLICABLE or not uuid.replace("0", "").replace("-", "")


def _fabric_problems(gpu, kind):
    state, status, health = gpu["fabric_state"], gpu["fabric_status"], gpu["fabric_health"]
    problems = []
    if state != "Completed":
        needs = f" ({NVLINK5_NEEDS})" if kind == "nvlink5" and state == "In Progress" else ""
        problems.append(f"fabric state {state}, wanted Completed{needs}")
    if status not in ("Success", *NOT_APPLICABLE):
        problems.append(f"fabric status {status}, wanted Success")
    if health not in ("Healthy", *NOT_APPLICABLE):
        problems.append(f"fabric health summary {health}, wanted Healthy")
    if kind == "mnnvl" and zero_uuid(gpu["fabric_cluster"]):
        problems.append(f"clusterUuid {gpu['fabric_cluster']}: not in a multi-node NVLink domain")
    return problems


def fabric(gpus, kind):
    """Each GPU that reports a fabric: state Completed, status Success, health Healthy where read; on an
    ``mnnvl`` node (:mod:`driver.fabric`) a non-zero clusterUuid and one (clusterUuid, cliqueId) for all."""
    reporting = [gpu for gpu in gpus if gpu["fabric_state"] not in NOT_APPLICABLE]
    pairs = Counter((gpu["fabric_cluster"], gpu["fabric_clique"]) for gpu in reporting)
    common = pairs.most_common(1)[0][0] if pairs else None
    results = []
    for gpu in gpus:
        if gpu not in reporting:
            results.append(skipped("fabric", gpu, "not an NVSwitch system (fabric state N/A)"))
            continue
        problems = _fabric_problems(gpu, kind)
        pair = (gpu["fabric_cluster"], gpu["fabric_clique"])
        if kind == "mnnvl" and pair != common:
            problems.append(f"cliqueId {pair[1]} of clusterUuid {pair[0]}, while the node's other GPUs have "
                            f"cliqueId {common[1]} of clusterUuid {common[0]} (one per node)")
        shown = (f"fabric state Completed, status {gpu['fabric_status']}, health {gpu['fabric_health']}"
                 + (f", cliqueId {pair[1]}, clusterUuid {pair[0]}" if kind == "mnnvl" else "") + f" ({kind})")
        results.append(result("fabric", gpu, not problems, "; ".join(problems) or shown))
    return results


def _said(rc, out, err):
    return " ".join((out + " " + err).split())[:300] or f"exit {rc}"


def imex_query(rc, out, err):
    """``nvidia-imex-ctl -q`` answers ``READY`` (what the DRA driver's kubelet plugin asks too)."""
    if rc == 0 and out.strip() == "READY":
        return result("imex", HOST, True, "nvidia-imex-ctl -q: READY")
    return result("imex", HOST, False, f"nvidia-imex-ctl -q: {_said(rc, out, err)} (exit {rc}), wanted READY")


def imex_domain(rc, out, err):
    """``nvidia-imex-ctl -N``: every node READY and connected to every other, ``Domain State: UP``."""
    reading = imex.parse_domain(out)
    if not reading["nodes"] and reading["domain"] is None:
        return result("imex", HOST, False, f"nvidia-imex-ctl -N: {_said(rc, out, err)}: no IMEX domain read")
    found = imex.problems(reading)
    if found:
        return result("imex", HOST, False, "nvidia-imex-ctl -N: " + "; ".join(found))
    return result("imex", HOST, True, f"nvidia-imex-ctl -N: Domain State UP, {len(reading['nodes'])} nodes "
                                      "READY, every pair Connected")


def nvlink(gpus, links, error=None):
    """A GPU with some links up has all up; on an NVSwitch system, or where another GPU has
    links up, a GPU with every link down fails too."""
    nvswitch = any(gpu["fabric_state"] not in (None, "N/A") for gpu in gpus)
    if error:
        return [result("nvlink", gpu, False if nvswitch else None, f"nvidia-smi nvlink -s: {error}")
                for gpu in gpus]
    any_up = any(state != "inactive" for per_gpu in links.values() for state in per_gpu.values())
    results = []
    for gpu in gpus:
        own = links.get(gpu["index"], {})
        down = sorted(number for number, state in own.items() if state == "inactive")
        if not own:
            results.append(skipped("nvlink", gpu, "the GPU has no NVLink"))
        elif not down:
            results.append(result("nvlink", gpu, True, f"{len(own)} links up"))
        elif len(down) < len(own) or nvswitch or any_up:
            results.append(result("nvlink", gpu, False, f"links down: {', '.join(map(str, down))} "
                                                        f"of {len(own)}"))
        else:
            results.append(skipped("nvlink", gpu, f"no link in use ({len(own)} inactive; no NVLink peer)"))
    return results


def xids(gpu, events):
    hardware, other = xid.classify(xid.events_of(events, gpu["bus_id"]))
    reported = f"; reported, not faults: {', '.join(other)}" if other else ""
    if hardware:
        return result("xid", gpu, False, f"hardware XID since boot: {', '.join(hardware)}{reported}")
    return result("xid", gpu, True, f"no hardware XID since boot{reported}")


def dcgm_diag(gpu, verdicts, level):
    tests = verdicts.get(gpu["index"])
    if not tests:
        return result("dcgm_diag", gpu, False, f"dcgmi diag -r {level} reported nothing for this GPU")
    failed = [t for t in tests if t["status"].lower() == "fail"]
    if failed:
        shown = "; ".join(f"{t['test']}: {t['message'] or 'Fail'}" for t in failed)
        return result("dcgm_diag", gpu, False, f"dcgmi diag -r {level} failed: {shown}")
    counted = sum(1 for t in tests if t["status"].lower() == "pass")
    return result("dcgm_diag", gpu, True, f"dcgmi diag -r {level}: {counted} tests passed, none failed")


def busy(gpu):
    """``PID name`` of each compute process on the GPU (dcgmi diag refuses GPUs in use)."""
    return [f"{p['pid']} ({p['name']})" for p in gpu["processes"] if "C" in p["type"] or not p["type"]]
