#!/usr/bin/env python3
"""Tables of the fault-injection test (molecule/faults), from the files it keeps.

    report.py interrupted DIR [--nodes N...]    where each run was cut, and what the node looked like then
    report.py verify DIR STAGE [--nodes N...]   every node's checks at STAGE (verify-1, ...), by window

DIR holds interrupted.json (tests/faults/interrupt.py's results, one per
window) and one <node>.<stage>.json per node (tests/faults/node_checks.py;
stage "interrupted" is read right after the interruptions). --nodes limits the
windows to those on the given nodes (a scenario with fewer platforms).

`interrupted` only reports (exit 0). `verify` exits 1 when a window was not
reached (its task did not run, or changed nothing: update windows.yml), when
any check fails on any node, or when a node's state differs from the reference
node's (faults-reference, never interrupted): an interrupted node must end up
exactly like it.
"""

import argparse
import json
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = "faults-reference"
# which check answers for each part of the state compared with the reference
STATE_CHECK = {
    "held": "holds",
    "packages": "dpkg",
    "nvidia_smi": "driver",
    "toolkit": "toolkit",
    "docker": "docker",
    "containerd": "containerd",
    "kubelet_gates": "kubelet",
}
CHECK_ORDER = ["dpkg", "holds", "driver", "toolkit", "docker", "containerd", "kubelet"]


def load_windows(path, nodes=None):
    with open(path, encoding="utf-8") as handle:
        windows = yaml.safe_load(handle)["windows"]
    return [w for w in windows if nodes is None or w["node"] in nodes]


def load_json(path):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def one_line(text):
    return " ".join(str(text).split())


def compact(value):
    return json.dumps(value, sort_keys=True)


def difference(key, mine, theirs):
    """One line saying how mine differs from the reference's value of key."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        parts = []
        for name in sorted(set(mine) | set(theirs)):
            if name not in theirs:
                parts.append(f"{name} {compact(mine[name])} (not on {REFERENCE})")
            elif name not in mine:
                parts.append(f"{name} missing ({REFERENCE}: {compact(theirs[name])})")
            elif mine[name] != theirs[name]:
                parts.append(f"{name} {compact(mine[name])} ({REFERENCE}: {compact(theirs[name])})")
        return f"{key}: " + ", ".join(parts)
    return f"{key}: {one_line(compact(mine))} ({REFERENCE}: {one_line(compact(theirs))})"


def state_differences(state, reference):
    """{check: text} for every part of the state that differs from the reference's."""
    differences = {}
    for key, check in STATE_CHECK.items():
        mine, theirs = state.get(key), reference.get(key)
        if mine != theirs:
            text = difference(key, mine, theirs)
            differences[check] = f"{differences[check]}; {text}" if check in differences else text
    return differences


def judge(node_result, reference_result=None):
    """[(check, ok, detail)] for one node: its own checks, failed too where it differs from the reference."""
    if node_result is None:
        return [("node", False, "no checks recorded for this node")]
    differences = {}
    if reference_result is not None:
        differences = state_differences(node_result["state"], reference_result["state"])
    rows = []
    for check in CHECK_ORDER:
        outcome = node_result["checks"].get(check, {"ok": False, "detail": "not run"})
        ok, detail = outcome["ok"], one_line(outcome["detail"])
        if check in differences:
            ok, detail = False, f"{detail} | differs from {REFERENCE}: {differences[check]}"
        rows.append((check, ok, detail))
    return rows


def window_row(window, interrupted, directory):
    """("interrupt", reached, why) for a window, from interrupt.py's results (and the node's crash record)."""
    outcome = interrupted.get(window["name"])
    if outcome is None:
        return ("interrupt", False, "the window was not run")
    reached = bool(outcome.get("reached"))
    why = one_line(outcome.get("why", ""))
    if reached and "crash_dpkg_in_postinst" in window["interrupt"]:
        # the run failing is not enough: the node must say that dpkg was killed in the postinst
        crash = os.path.join(directory, "{}.dpkg-crash.log".format(window["node"]))
        text = ""
        if os.path.exists(crash):
            with open(crash, encoding="utf-8") as handle:
                text = handle.read()
        if "dpkg_pid=" not in text or "dpkg_pid=\n" in text:
            reached, why = False, f"{why}, but the node has no record of dpkg killed in a postinst"
        else:
            why = f"{why}; on the node: {one_line(text)}"
    return ("interrupt", reached, why if reached else f"NOT REACHED: {why} (update tests/faults/windows.yml)")


def mark(ok):
    return "ok  " if ok else "FAIL"


def describe(window):
    return "window {}: {}".format(window["name"], one_line(window["what"]))


def report_interrupted(directory, windows):
    interrupted = {r["window"]: r for r in (load_json(os.path.join(directory, "interrupted.json")) or [])}
    lines = []
    for window in windows:
        row = window_row(window, interrupted, directory)
        lines.append("{} - {}".format(window["node"], describe(window)))
        lines.append(f"  {mark(row[1])} {row[0]:<11} {row[2]}")
        node = load_json(os.path.join(directory, "{}.interrupted.json".format(window["node"])))
        for check, ok, detail in judge(node):
            if not ok or check in window.get("checks", []):
                lines.append(f"  {mark(ok)} {check:<11} {detail}")
    return lines, True


def report_verify(directory, windows, stage):
    interrupted = {r["window"]: r for r in (load_json(os.path.join(directory, "interrupted.json")) or [])}
    reference = load_json(os.path.join(directory, f"{REFERENCE}.{stage}.json"))
    lines, failed = [], []
    nodes = [(REFERENCE, "the reference node, never interrupted", None)] + [
        (w["node"], describe(w), w) for w in windows
    ]
    for node, title, window in nodes:
        rows = judge(load_json(os.path.join(directory, f"{node}.{stage}.json")), reference)
        focus = window.get("checks", []) if window else []
        if window:
            rows = [window_row(window, interrupted, directory), *rows]
        rows = [r for r in rows if r[0] in ("interrupt", *focus)] + [
            r for r in rows if r[0] not in ("interrupt", *focus)
        ]
        bad = [check for check, ok, _ in rows if not ok]
        if bad:
            failed.append("{} ({})".format(node, ", ".join(bad)))
        lines.append("{} - {}: {}".format(node, title, "FAIL" if bad else "ok"))
        lines.extend(
            f"  {mark(ok)} {check:<11}{'*' if check in focus else ' '} {detail}" for check, ok, detail in rows
        )
    lines.append("(* the checks the window puts at risk; every check must pass on every node)")
    if failed:
        lines.append("{}: failed on {}".format(stage, "; ".join(failed)))
    else:
        lines.append(
            f"{stage}: every window was reached; every node passes every check and matches {REFERENCE}"
        )
    return lines, not failed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["interrupted", "verify"])
    parser.add_argument("directory")
    parser.add_argument("stage", nargs="?", default="verify-1")
    parser.add_argument("--windows", default=os.path.join(HERE, "windows.yml"))
    parser.add_argument("--nodes", nargs="*", help="only the windows on these nodes (default: all)")
    args = parser.parse_args(argv)
    windows = load_windows(args.windows, args.nodes)
    if args.mode == "interrupted":
        lines, ok = report_interrupted(args.directory, windows)
    else:
        lines, ok = report_verify(args.directory, windows, args.stage)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
