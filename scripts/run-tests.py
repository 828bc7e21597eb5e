#!/usr/bin/env python3
"""Run gpunode's test steps side by side (`make test`, `make molecule`).

Steps: `lint` (`make lint`: ruff, scripts/check_function_length.py,
scripts/check_node_access.py, yamllint, ansible-lint), `unit` (scripts/unit-tests.py:
every target Python and the controller), `molecule:SCENARIO` (`molecule test
-s SCENARIO`, after `molecule destroy` when containers of the scenario are left
over) and `image:FLAVOR` (tests/simnode/build-image.sh FLAVOR, which does
nothing when the image is up to date); and, for `make ci`, the newest
ansible-core's (.venv-newest) `unit:newest` (its controller-side unit tests),
`demo:newest` (`make demo`, then `make demo-clean`), and `collection` and
`collection:newest` (`make collection` on each; never both at once: they build the
same tarball). A scenario starts once the images
its platforms use are built; image builds start at once and take no slot (they
mostly wait on the archive). At most --jobs other steps run at once (default: the
CPU count; TEST_JOBS overrides), the longest first, by the durations of the
last run (.cache/test/durations.json, else scripts/test-durations.json: the
figures of a whole run, for a fresh clone). Each step writes its own log under
.cache/test/; a step's output is printed when it fails (TEST_VERBOSE=1: always).
One step failing does not stop the others; the exit status is non-zero when
any failed. The last lines are a table of every step: result, wall time, and
for molecule the time of each action (create, prepare, converge, ...).

Usage: run-tests.py [--jobs N] [STEP ...]
  STEP: lint | unit | molecule (every scenario) | molecule:NAME | image:FLAVOR
        | unit:newest | demo:newest | collection | collection:newest
  default: lint unit molecule
"""

import argparse
import collections
import contextlib
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "test"
DURATIONS = CACHE / "durations.json"
SEED_DURATIONS = ROOT / "scripts" / "test-durations.json"
BASE_CONFIG = ROOT / ".config" / "molecule" / "config.yml"
IMAGE = re.compile(r"^\s*image:\s*[\"']?gpunode-([a-z0-9-]+)-systemd(?::latest)?[\"']?\s*$", re.M)
ACTION = re.compile(r"\[(?P<scenario>[^\]>]+?) > (?P<action>[a-z_]+)\] (?P<what>Executing|Executed)")
GUESS = {"lint": 150, "unit": 200, "image": 20, "molecule": 400, "demo": 450, "collection": 250}
NEWEST = "VENV=.venv-newest"
#: the steps `make ci` adds to `make test`'s, on the newest ansible-core (and the oldest's collection)
CI_STEPS = {
    "unit:newest": ["make", "--no-print-directory", "unit", NEWEST, "UNIT_ARGS=--controller-only"],
    "demo:newest": ["bash", "-c", "make --no-print-directory demo VENV=.venv-newest IMAGE_FLAVORS=bookworm "
                    "DEMO_LOG_DIR=.cache/demo-newest; status=$?; make --no-print-directory demo-clean; "
                    "exit $status"],
    "collection": ["make", "--no-print-directory", "collection"],
    # the compile and import sanity tests on every Python are the oldest's (`collection`); the
    # newest runs them on its controller's Python (3.12) only (scripts/collection_sanity.py)
    "collection:newest": ["make", "--no-print-directory", "collection", NEWEST,
                          "COLLECTION_TEST_ARGS=-- --controller-python-only"],
}
#: `molecule test -s NAME` (bash -c, $1: NAME); the scenarios' test_sequence has no destroy first
#: (.config/molecule/config.yml): containers left by an interrupted run (tests/molecule/create.yml
#: labels them gpunode.scenario=NAME) are destroyed, and molecule's state with them, before it
MOLECULE_TEST = ('if [ -n "$(docker ps -aq --filter "label=gpunode.scenario=$1")" ]; then '
                 'echo "run-tests: containers of $1 left over: molecule destroy first"; '
                 'molecule destroy -s "$1"; fi; '
                 'exec molecule test -s "$1"')
#: the images a CI step's nodes run
CI_NEEDS = {"demo:newest": ["image:bookworm"]}
#: --timeout times this for a kind of step: `unit` runs eight interpreters one after another
TIMEOUT_FACTOR = {"unit": 2}


class Step:
    def __init__(self, name, argv, needs=()):
        self.name = name
        self.argv = argv
        self.needs = set(needs)
        self.log = CACHE / "logs" / (name.replace(":", "-") + ".log")
        self.proc = None
        self.start = None
        self.end = None
        self.rc = None
        self.note = ""
        self.actions = []  # molecule actions in order: [action, seconds]
        self._open = {}
        self.reader = None
        self.logfile = None

    @property
    def kind(self):
        return self.name.split(":", 1)[0]

    @property
    def seconds(self):
        return (self.end or time.monotonic()) - self.start if self.start else 0.0

    def record(self, line, now):
        match = ACTION.search(line)
        if not match:
            return
        action = match["action"]
        if match["what"] == "Executing":
            self._open[action] = now
        elif action in self._open:
            self.actions.append([action, now - self._open.pop(action)])


def scenarios():
    return sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml"))


def flavors_of(scenario):
    """Image flavors a scenario's platforms use (the base config's when it names none)."""
    found = IMAGE.findall((ROOT / "molecule" / scenario / "molecule.yml").read_text())
    return sorted(set(found or IMAGE.findall(BASE_CONFIG.read_text())))


def plan(requested):
    steps = collections.OrderedDict()

    def add(step):
        steps.setdefault(step.name, step)

    for item in requested:
        if item == "lint":
            add(Step("lint", ["make", "--no-print-directory", "lint"]))
        elif item == "unit":
            add(Step("unit", [sys.executable, str(ROOT / "scripts" / "unit-tests.py"), "--jobs", "1"]))
        elif item == "molecule" or item.startswith("molecule:"):
            names = scenarios() if item == "molecule" else [item.split(":", 1)[1]]
            for name in names:
                if not (ROOT / "molecule" / name / "molecule.yml").is_file():
                    sys.exit(f"run-tests: no scenario {name} (molecule/{name}/molecule.yml)")
                needs = [f"image:{flavor}" for flavor in flavors_of(name)]
                for need in needs:
                    add(Step(need, ["bash", str(ROOT / "tests" / "simnode" / "build-image.sh"), need[6:]]))
                add(Step(f"molecule:{name}", ["bash", "-c", MOLECULE_TEST, "molecule-test", name], needs))
        elif item.startswith("image:"):
            add(Step(item, ["bash", str(ROOT / "tests" / "simnode" / "build-image.sh"), item[6:]]))
        elif item in CI_STEPS:
            for need in CI_NEEDS.get(item, []):
                add(Step(need, ["bash", str(ROOT / "tests" / "simnode" / "build-image.sh"), need[6:]]))
            add(Step(item, CI_STEPS[item], CI_NEEDS.get(item, [])))
        else:
            sys.exit(f"run-tests: unknown step {item!r} (lint, unit, molecule, molecule:NAME, image:FLAVOR, "
                     f"{', '.join(CI_STEPS)})")
    return list(steps.values())


def load_durations():
    """The last run's step durations over the committed ones (a fresh clone has only those)."""
    durations = {}
    for path in (SEED_DURATIONS, DURATIONS):
        with contextlib.suppress(OSError, ValueError):
            durations.update(json.loads(path.read_text()))
    return durations


def expected(step, durations):
    return durations.get(step.name, GUESS.get(step.kind, 100))


def reader(step, stream, log):
    for raw in iter(stream.readline, b""):
        now = time.monotonic()
        log.write(raw)
        log.flush()
        step.record(raw.decode("utf-8", "replace"), now)
    stream.close()


def launch(step, env, t0):
    step.log.parent.mkdir(parents=True, exist_ok=True)
    log = step.log.open("wb")
    step.start = time.monotonic()
    print(f"[{clock(t0)}] start {step.name}", flush=True)
    step.proc = subprocess.Popen(step.argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    step.reader = threading.Thread(target=reader, args=(step, step.proc.stdout, log), daemon=True)
    step.reader.start()
    step.logfile = log


def finish(step, t0, verbose):
    step.reader.join()
    step.logfile.close()
    step.end = time.monotonic()
    passed = step.rc == 0
    print(f"[{clock(t0)}] {'pass' if passed else 'FAIL'} {step.name} in {step.seconds:.0f} s"
          + (f" ({step.note})" if step.note else "") + f"  log: {step.log.relative_to(ROOT)}", flush=True)
    if verbose or not passed:
        text = step.log.read_text(errors="replace")
        lines = text.splitlines()
        shown = lines if verbose or len(lines) <= 400 else ["[... first lines in the log ...]", *lines[-400:]]
        print(f"----- {step.name} output -----")
        print("\n".join(shown))
        print(f"----- end of {step.name} -----", flush=True)


def clock(t0):
    seconds = int(time.monotonic() - t0)
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


def kill(step):
    try:
        os.killpg(step.proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        step.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(step.proc.pid, signal.SIGKILL)


def slots_taken(running):
    """How many of the --jobs slots the running steps take (image builds take none)."""
    return sum(1 for step in running if step.kind != "image")


def run(steps, jobs, timeout, verbose):
    durations = load_durations()
    env = dict(os.environ, PY_COLORS="0", ANSIBLE_FORCE_COLOR="0", NO_COLOR="1", ANSIBLE_NOCOLOR="1")
    t0 = time.monotonic()
    pending = list(steps)
    running = []
    done = {}
    print(f"run-tests: {len(steps)} steps, {jobs} at a time: {' '.join(s.name for s in steps)}", flush=True)
    try:
        while pending or running:
            for step in list(running):
                step.rc = step.proc.poll()
                limit = timeout * TIMEOUT_FACTOR.get(step.kind, 1)
                if step.rc is None and timeout and step.seconds > limit:
                    step.note = f"timed out after {limit} s"
                    kill(step)
                    step.rc = step.proc.wait()
                if step.rc is not None:
                    running.remove(step)
                    finish(step, t0, verbose)
                    done[step.name] = step
            for step in list(pending):
                blocked = [n for n in step.needs if n in done and done[n].rc != 0]
                if blocked:
                    pending.remove(step)
                    step.rc, step.start, step.end = -1, time.monotonic(), time.monotonic()
                    step.note = f"not run: {', '.join(blocked)} failed"
                    print(f"[{clock(t0)}] FAIL {step.name} ({step.note})", flush=True)
                    done[step.name] = step
            # the collection steps build the same tarball: one at a time
            building = any(s.kind == "collection" for s in running)
            ready = [s for s in pending if s.needs <= {n for n, d in done.items() if d.rc == 0}
                     and not (building and s.kind == "collection")]
            # images first and all at once, beside the --jobs steps: they gate scenarios and
            # mostly wait on the archive (build-image.sh makes flavors of a suite wait for
            # its base image); then the longest expected step
            ready.sort(key=lambda s: (s.kind != "image", -expected(s, durations)))
            while ready and (ready[0].kind == "image" or slots_taken(running) < jobs):
                step = ready.pop(0)
                pending.remove(step)
                launch(step, env, t0)
                running.append(step)
                if step.kind == "collection":
                    ready = [s for s in ready if s.kind != "collection"]
            if pending and not running and not ready:
                sys.exit("run-tests: steps wait on something that will never finish: "
                         + ", ".join(s.name for s in pending))
            time.sleep(0.5)
    except KeyboardInterrupt:
        for step in running:
            kill(step)
        raise
    wall = time.monotonic() - t0
    durations.update({s.name: round(s.seconds, 1) for s in steps if s.proc is not None and not s.note})
    DURATIONS.parent.mkdir(parents=True, exist_ok=True)
    DURATIONS.write_text(json.dumps(durations, indent=1, sort_keys=True) + "\n")
    return summary(steps, wall, jobs)


def summary(steps, wall, jobs):
    print(f"\n=== test summary ({jobs} at a time)")
    busy = 0.0
    for step in sorted(steps, key=lambda s: s.start or 0):
        busy += step.seconds
        result = "pass" if step.rc == 0 else "FAIL"
        actions = ", ".join(f"{a} {s:.0f}" for a, s in step.actions)
        extra = "; ".join(x for x in (step.note, actions) if x)
        print(f"{result:<4} {step.name:<30} {step.seconds:>6.0f} s  {extra}")
    failed = [s.name for s in steps if s.rc != 0]
    print(f"wall {wall:.0f} s for {busy:.0f} s of steps; {len(steps) - len(failed)} passed, "
          f"{len(failed)} failed" + (f": {' '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("TEST_JOBS") or os.cpu_count() or 1))
    parser.add_argument("--timeout", type=int, default=int(os.environ.get("TEST_STEP_TIMEOUT") or 2400),
                        help="seconds a step may run before it is stopped (0: no limit)")
    parser.add_argument("steps", nargs="*", default=["lint", "unit", "molecule"])
    args = parser.parse_args(argv)
    verbose = os.environ.get("TEST_VERBOSE") == "1"
    return run(plan(args.steps), max(1, args.jobs), args.timeout, verbose)


if __name__ == "__main__":
    sys.exit(main())
