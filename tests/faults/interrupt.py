#!/usr/bin/env python3
"""Cut a run of site.yml short at one window of tests/faults/windows.yml.

    interrupt.py --window NAME --inventory INVENTORY --out DIR [--windows FILE] [--project DIR]

Runs the window's setup playbooks on its node (each must succeed), then
site.yml limited to the node, in a new session so that the kill takes
ansible-playbook, its workers and their connections and nothing else:

- kill_after: the callback plugin gpunode_fault_kill (callback_plugins/ here,
  enabled for this run only) SIGKILLs the run when the task reports on the node;
- crash_dpkg_in_postinst: the node was armed by molecule/faults/prepare.yml
  (node/dkms-crash in this folder): dpkg dies on the node, the run goes on and fails.

Prints one JSON object (also written to DIR/<window>.json): the window, the
node, the exit status of the interrupted run, what the callback recorded and
whether the window was reached ("reached": true or false, "why"). Exits 0 when
the run was cut where the window says, 1 when it was not (the window is not
reachable on this code: the task did not run, or changed nothing), 2 on a
setup failure. Logs of every run are kept in DIR.
"""

import argparse
import json
import os
import signal
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CALLBACK = "gpunode_fault_kill"


def load_window(path, name):
    """The window called name in the windows file at path (ValueError when absent)."""
    with open(path, encoding="utf-8") as handle:
        windows = yaml.safe_load(handle)["windows"]
    for window in windows:
        if window["name"] == name:
            return window
    raise ValueError(
        "{}: no window named {} (there are: {})".format(path, name, ", ".join(w["name"] for w in windows))
    )


def extend_path_list(current, value, sep):
    """current (an env value, maybe empty) with value appended, once."""
    items = [item for item in (current or "").split(sep) if item]
    if value not in items:
        items.append(value)
    return sep.join(items)


def kill_env(base, kill_after, host, record):
    """The environment that enables the kill callback for this run only."""
    env = dict(base)
    env["ANSIBLE_CALLBACK_PLUGINS"] = extend_path_list(
        base.get("ANSIBLE_CALLBACK_PLUGINS"), os.path.join(HERE, "callback_plugins"), os.pathsep
    )
    env["ANSIBLE_CALLBACKS_ENABLED"] = extend_path_list(base.get("ANSIBLE_CALLBACKS_ENABLED"), CALLBACK, ",")
    env["GPUNODE_FAULT_TASK"] = kill_after["task"]
    env["GPUNODE_FAULT_HOST"] = host
    env["GPUNODE_FAULT_STATUS"] = kill_after.get("status", "changed")
    env["GPUNODE_FAULT_OCCURRENCE"] = str(kill_after.get("occurrence", 1))
    env["GPUNODE_FAULT_RECORD"] = record
    return env


def run_playbook(argv, env, log_path):
    """Run ansible-playbook as the leader of a new session; its exit status (-9: killed)."""
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("$ {}\n".format(" ".join(argv)))
        log.flush()
        process = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return process.wait()


def read_records(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def verdict(window, rc, records):
    """(reached, why) for a finished interrupted run."""
    interrupt = window["interrupt"]
    if "kill_after" in interrupt:
        killed = [r for r in records if r.get("killed")]
        if killed and rc == -signal.SIGKILL:
            return True, "killed after {!r} reported {}".format(killed[0]["task"], killed[0]["status"])
        seen = "; ".join(
            "{!r} reported {}: {}".format(r["task"], r["status"], r.get("why", "")) for r in records
        )
        return False, "the run ended with status {} without the kill: {}".format(
            rc,
            seen or "no task matching {!r} reported on the node".format(interrupt["kill_after"]["task"]),
        )
    if "crash_dpkg_in_postinst" in interrupt:
        # the node's own record says whether dpkg was killed (molecule/faults/prepare.yml reads it)
        if rc == 0:
            return False, "the run succeeded: no postinst of {} ran".format(
                interrupt["crash_dpkg_in_postinst"]
            )
        return True, f"the run failed with status {rc} (dpkg killed on the node: see its crash record)"
    raise ValueError("window {}: unknown interrupt {}".format(window["name"], sorted(interrupt)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", required=True)
    parser.add_argument("--inventory", required=True)
    parser.add_argument("--out", required=True, help="folder for logs and the result")
    parser.add_argument("--windows", default=os.path.join(HERE, "windows.yml"))
    parser.add_argument("--project", default=os.path.dirname(os.path.dirname(HERE)))
    args = parser.parse_args(argv)

    window = load_window(args.windows, args.window)
    node = window["node"]
    os.makedirs(args.out, exist_ok=True)
    base = ["ansible-playbook", "-i", args.inventory, "--limit", node]
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    result = {"window": window["name"], "node": node, "setup": []}

    for number, setup in enumerate(window.get("setup") or [], 1):
        log = os.path.join(args.out, f"{window['name']}.setup{number}.log")
        argv = [*base, os.path.join(args.project, setup["playbook"])]
        if setup.get("extra_vars"):
            argv += ["-e", json.dumps(setup["extra_vars"])]
        rc = run_playbook(argv, env, log)
        result["setup"].append({"playbook": setup["playbook"], "rc": rc, "log": log})
        if rc != 0:
            result.update(
                reached=False,
                why="setup run {} failed with status {} (log: {})".format(setup["playbook"], rc, log),
            )
            print(json.dumps(result, sort_keys=True))
            return 2

    record = os.path.join(args.out, "{}.kill.jsonl".format(window["name"]))
    if os.path.exists(record):
        os.remove(record)
    if "kill_after" in window["interrupt"]:
        env = kill_env(env, window["interrupt"]["kill_after"], node, record)
    log = os.path.join(args.out, "{}.interrupted.log".format(window["name"]))
    rc = run_playbook([*base, os.path.join(args.project, "site.yml")], env, log)
    records = read_records(record)
    reached, why = verdict(window, rc, records)
    result.update(rc=rc, log=log, records=records, reached=reached, why=why)
    with open(os.path.join(args.out, "{}.json".format(window["name"])), "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2, sort_keys=True)
    print(json.dumps(result, sort_keys=True))
    return 0 if reached else 1


if __name__ == "__main__":
    sys.exit(main())
