#!/usr/bin/env python3
"""Run a playbook with --check --diff and say plainly how it went.

    check-run.py --log FILE [--converged] -- ansible-playbook ARGS...

Runs the command, keeps its whole output in FILE, and prints a short report:
the PLAY RECAP, and

- when the run failed: each host's failing task with its message (a failure
  that was rescued or ignored is not one);
- on converged nodes (--converged): every task that reported a change (a
  converged node must report changed=0 in check mode).

Exit status: 0 when the run passed (and, converged, changed nothing); 1 when
not; the report says why. Used by tests/molecule/check-mode.yml.
"""

import argparse
import os
import re
import subprocess
import sys

BANNER = re.compile(r"^(?:TASK|RUNNING HANDLER) \[(?P<task>.*)\] \**$")
RESULT = re.compile(r"^(?P<status>changed|fatal|failed): \[(?P<host>[^\]]+?)(?: -> [^\]]+)?\]"
                    r"(?::? (?:FAILED! )?=> (?P<rest>.*))?")
ITEM = re.compile(r"\(item=(?P<item>.*?)\)")
RECAP = re.compile(r"^(?P<host>\S+)\s+: ok=\d+\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
                   r"\s+failed=(?P<failed>\d+)")
DETAIL_LINES = 12


def parse(lines):
    """Changed and failed results (task, host, item, detail lines) and the recap per host."""
    task = None
    changed, failures, recap = [], [], {}
    in_recap = False
    for index, line in enumerate(lines):
        if line.startswith("PLAY RECAP"):
            in_recap = True
            continue
        if in_recap:
            match = RECAP.match(line)
            if match:
                recap[match["host"]] = line.strip()
                continue
            if line.strip():
                in_recap = False
        banner = BANNER.match(line)
        if banner:
            task = banner["task"]
            continue
        result = RESULT.match(line)
        if not result:
            continue
        item = ITEM.search(line)
        entry = {"task": task, "host": result["host"], "item": item["item"] if item else None}
        if result["status"] == "changed":
            changed.append(entry)
            continue
        detail = [result["rest"]] if result["rest"] and result["rest"] not in ("", "{") else []
        for follow in lines[index + 1:]:
            if not follow.startswith((" ", "\t")) or not follow.strip():
                break
            detail.append(follow.strip())
        following = lines[index + 1 + len(detail):index + 3 + len(detail)]
        entry["ignored"] = any(f.startswith("...ignoring") for f in following)
        entry["detail"] = detail
        failures.append(entry)
    return changed, failures, recap


def failed_hosts(recap):
    hosts = set()
    for host, line in recap.items():
        match = RECAP.match(line)
        if int(match["failed"]) or int(match["unreachable"]):
            hosts.add(host)
    return hosts


def where(entry):
    return f"TASK [{entry['task']}]" + (f" (item={entry['item']})" if entry["item"] else "")


def report(rc, lines, converged, log):
    """The report lines and whether the check passed."""
    changed, failures, recap = parse(lines)
    out = []
    ok = rc == 0
    if rc != 0:
        out.append(f"ansible-playbook --check --diff failed (rc {rc}); full output: {log}")
        stopped = {}
        for entry in failures:
            if not entry["ignored"] and entry["host"] in failed_hosts(recap):
                stopped[entry["host"]] = entry  # a host stops at its last unrescued failure
        for host, entry in sorted(stopped.items()):
            out.append(f"  {host}: {where(entry)}")
            out.extend(f"      {d}" for d in entry["detail"][:DETAIL_LINES])
        if not stopped:
            out.append("  no failed task in the output; its last lines:")
            out.extend(f"      {line}" for line in lines[-30:])
    if converged and changed:
        ok = False
        out.append(f"check mode on converged nodes reported {len(changed)} changes (must be none); "
                   f"diffs in {log}:")
        for entry in changed:
            out.append(f"  {entry['host']}: {where(entry)}")
    if converged and not changed and any(int(RECAP.match(line)["changed"]) for line in recap.values()):
        ok = False
        out.append(f"the recap counts changes that the output does not show; see {log}")
    if recap:
        out.append("PLAY RECAP:")
        out.extend(f"  {line}" for line in recap.values())
    elif rc == 0:
        ok = False
        out.append(f"no PLAY RECAP in the output; see {log}")
    return ok, out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", required=True)
    parser.add_argument("--converged", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    with open(args.log, "w", encoding="utf-8") as log:
        proc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, check=False)
    with open(args.log, encoding="utf-8", errors="replace") as log:
        lines = log.read().splitlines()
    ok, out = report(proc.returncode, lines, args.converged, args.log)
    state = "converged" if args.converged else "fresh"
    print(f"check run on the {state} nodes: {'passed' if ok else 'FAILED'}")
    print("\n".join(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
