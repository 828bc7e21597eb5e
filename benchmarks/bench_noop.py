#!/usr/bin/env python3
"""No-op site.yml against `ansible -m setup`: one simulated GPU node and a fleet of 16.

Issue 14's benchmark. What it does:

1. Builds what it needs. The simulated node image (tests/simnode/build-image.sh
   bookworm); then the bench node image, gpunode-bench-node:latest: that image
   after tests/simnode/prepare-demo.yml (the demo's T4 with 535 loaded, its fake
   sysfs, the local driver and toolkit repositories, Docker, containerd and the
   stand-in kubelet running), committed once and reused while its inputs
   (the base image, tests/simnode/, the demo inventory) are unchanged.
2. Starts N nodes gpunode-bench-01..N from it, with the demo T4 node's inventory
   variables, converges them all with one site.yml run (forks >= N), and runs
   site.yml once more, which must report changed=0 and failed=0 on every node.
3. Measures alternately, A B A B ..., `ansible -m ansible.builtin.setup` (A: the
   floor, fact gathering) and the no-op `ansible-playbook site.yml` (B) on the
   same nodes at the same time: node 01 alone (--rounds pairs), then all N nodes
   (--fleet-rounds pairs). Wall time, and the controller's CPU: user+sys of the
   command and all its children (the forks, the docker CLI of the connection),
   from the rusage that wait4() returns. On the fleet also the controller's peak
   memory: the peak sum of PSS over the command's process tree, sampled from /proc.
   Every no-op sample must report changed=0 and failed=0, or the run stops.
4. Removes its nodes and their volumes afterwards, also when interrupted
   (Ctrl-C, SIGTERM, SIGHUP); `--clean` removes leftovers of a killed run.

--profile adds one no-op run on node 01 with the task_timeline callback
(benchmarks/callback_plugins) and prints where its time goes: per play and
role, per kind of task (remote module call, fact gathering, controller-only
action, delegated to the controller, skipped), and the slowest tasks.

The simulated nodes share the machine's CPUs with the controller, so each ratio
compares runs on the same nodes in the same session, never against one node.
The last two lines printed are
    noop/setup ratio: X
    fleetN noop/setup ratio: Y
where X and Y are the larger of the controller-CPU ratio and the wall ratio of
the medians (issue 14's goals hold both under 2.5 and 3); the lines carry the
medians and the spread of the per-pair ratios they come from.

Usage: python benchmarks/bench_noop.py [--nodes 16] [--rounds 7] [--fleet-rounds 3]
                                       [--profile] [--keep] [--clean]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import pathlib
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORK = ROOT / ".cache" / "bench"
BASE_FLAVOR = "bookworm"
BASE_IMAGE = f"gpunode-{BASE_FLAVOR}-systemd:latest"
NODE_IMAGE = "gpunode-bench-node:latest"
NODE_PREFIX = "gpunode-bench-"
BUILD_NODE = NODE_PREFIX + "build"
INPUTS_LABEL = "gpunode.bench.inputs"
# bump when the way the node image is made changes outside the hashed files
NODE_RECIPE = "prepare-demo, path units masked, stopped, committed: 2"
# systemd's units that hold an inotify instance each in every node and serve no
# purpose there (no password prompts): masked so that 16 nodes fit under the
# kernel's per-user limit (fs.inotify.max_user_instances, 128 by default)
MASKED_UNITS = ("systemd-ask-password-console.path", "systemd-ask-password-wall.path")
# inotify instances a running node holds for root, the masks above in place:
# systemd (PID 1) 3, containerd 1 (counted in /proc/<pid>/fd of a node's processes)
INOTIFY_PER_NODE = 4
DEMO_INVENTORY = ROOT / "inventories" / "demo" / "hosts.yml"
PREPARE_PLAYBOOK = ROOT / "tests" / "simnode" / "prepare-demo.yml"
RECAP = re.compile(
    r"^(?P<host>\S+)\s+:\s+ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)\s+rescued=(?P<rescued>\d+)\s+ignored=(?P<ignored>\d+)",
    re.MULTILINE,
)
# actions that never reach the managed node (action plugins that run on the controller)
CONTROLLER_ACTIONS = {
    "ansible.builtin." + name
    for name in (
        "set_fact",
        "assert",
        "debug",
        "fail",
        "meta",
        "include_tasks",
        "include_role",
        "import_tasks",
        "import_role",
        "include_vars",
        "add_host",
        "group_by",
        "set_stats",
        "validate_argument_spec",
        "pause",
    )
}
# the project's own action plugins do their work in the task's worker (gpunode_summary)
PROJECT_ACTIONS = {path.stem for path in (ROOT / "action_plugins").glob("*.py")}
FACT_ACTIONS = {"ansible.builtin.gather_facts", "ansible.builtin.setup"}
# one task of each kind for --profile's unit costs (none changes the node)
TASK_COST_KINDS = {
    "empty play": None,
    "round trip (stat)": {"ansible.builtin.stat": {"path": "/etc/os-release"}},
    "controller-only (set_fact)": {"ansible.builtin.set_fact": {"bench_value": 1}},
    "controller-only (debug)": {"ansible.builtin.debug": {"msg": "nothing"}},
    "skipped (stat, when: false)": {"ansible.builtin.stat": {"path": "/"}, "when": False},
}


class BenchError(Exception):
    """Something the benchmark needs failed; the message says what and where the log is."""


# ---------------------------------------------------------------- measuring


@dataclasses.dataclass
class Sample:
    """One measured command: wall and controller CPU seconds, memory, the play recap."""

    wall: float
    cpu: float
    maxrss_mib: float
    peak_pss_mib: float | None
    recap: dict
    log: pathlib.Path


class TreeMemory(threading.Thread):
    """Samples the summed PSS of a process and its descendants from /proc; keeps the peak."""

    def __init__(self, pid, interval=0.5):
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0
        self._done = threading.Event()

    @staticmethod
    def _parents():
        parents = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
        return parents

    def tree(self):
        children = {}
        for pid, parent in self._parents().items():
            children.setdefault(parent, []).append(pid)
        found, todo = [], [self.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return found

    @staticmethod
    def _pss_kib(pid):
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as handle:
                for line in handle:
                    if line.startswith("Pss:"):
                        return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return 0

    def run(self):
        while not self._done.is_set():
            self.peak_kib = max(self.peak_kib, sum(self._pss_kib(pid) for pid in self.tree()))
            self._done.wait(self.interval)

    def stop(self):
        self._done.set()
        self.join()


class Runner:
    """Runs commands in their own session, measured; kills the running one on cleanup."""

    def __init__(self, env):
        self.env = env
        self.current = None

    def measure(self, argv, log, sample_memory=False, extra_env=None):
        env = dict(self.env, **(extra_env or {}))
        with open(log, "w", encoding="utf-8") as out:
            start = time.perf_counter()
            process = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            self.current = process
            memory = TreeMemory(process.pid) if sample_memory else None
            if memory:
                memory.start()
            _, status, usage = os.wait4(process.pid, 0)
            wall = time.perf_counter() - start
            process.returncode = os.waitstatus_to_exitcode(status)
            self.current = None
            if memory:
                memory.stop()
        text = log.read_text(encoding="utf-8", errors="replace")
        return (
            process.returncode,
            text,
            Sample(
                wall=wall,
                cpu=usage.ru_utime + usage.ru_stime,
                maxrss_mib=usage.ru_maxrss / 1024,
                peak_pss_mib=memory.peak_kib / 1024 if memory else None,
                recap=parse_recap(text),
                log=log,
            ),
        )

    def kill_current(self):
        process = self.current
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(process.pid, 0)
            self.current = None


def parse_recap(text):
    """PLAY RECAP lines -> {host: {ok, changed, unreachable, failed, skipped, rescued, ignored}}."""
    recap = {}
    for match in RECAP.finditer(text):
        counts = {key: int(value) for key, value in match.groupdict().items() if key != "host"}
        recap[match.group("host")] = counts
    return recap


def check_noop(sample, hosts):
    """A no-op sample must cover every host with changed=0, failed=0, unreachable=0."""
    problems = []
    for host in hosts:
        counts = sample.recap.get(host)
        if counts is None:
            problems.append(f"{host}: not in the play recap")
        elif counts["changed"] or counts["failed"] or counts["unreachable"]:
            problems.append(
                f"{host}: changed={counts['changed']} failed={counts['failed']} "
                f"unreachable={counts['unreachable']}"
            )
    if problems:
        raise BenchError(f"site.yml was not a no-op ({'; '.join(problems)}); see {sample.log}")


def check_setup(returncode, text, sample, hosts):
    succeeded = set(re.findall(r"^(\S+) \| SUCCESS", text, re.MULTILINE))
    missing = [host for host in hosts if host not in succeeded]
    if returncode != 0 or missing:
        raise BenchError(f"ansible -m setup failed on {', '.join(missing) or 'some host'}; see {sample.log}")


# ---------------------------------------------------------------- statistics


@dataclasses.dataclass
class Spread:
    """Median and range of a series, and the relative range (max - min) / median."""

    values: list

    @property
    def median(self):
        return statistics.median(self.values)

    @property
    def low(self):
        return min(self.values)

    @property
    def high(self):
        return max(self.values)

    @property
    def relative_range(self):
        return (self.high - self.low) / self.median if self.median else 0.0

    def describe(self, unit="s", digits=2):
        return (
            f"{self.median:.{digits}f} {unit} ({self.low:.{digits}f}-{self.high:.{digits}f}, "
            f"range {self.relative_range:.0%})"
        )


@dataclasses.dataclass
class Comparison:
    """Alternating pairs of the floor (setup) and the no-op on the same hosts."""

    label: str
    hosts: list
    setup: list
    noop: list

    def metric(self, which, name):
        return Spread([getattr(sample, name) for sample in getattr(self, which)])

    def ratio(self, name):
        return self.metric("noop", name).median / self.metric("setup", name).median

    def pair_ratios(self, name):
        return Spread(
            [getattr(b, name) / getattr(a, name) for a, b in zip(self.setup, self.noop, strict=True)]
        )

    def headline(self):
        """The larger of the CPU and wall ratios: the goal holds both."""
        return max(self.ratio("cpu"), self.ratio("wall"))

    def summary_line(self, prefix):
        parts = []
        for name, title in (("cpu", "controller CPU"), ("wall", "wall")):
            noop, setup, pairs = self.metric("noop", name), self.metric("setup", name), self.pair_ratios(name)
            parts.append(
                f"{title} {noop.median:.2f} s / {setup.median:.2f} s = {self.ratio(name):.2f}x "
                f"(pairs {pairs.low:.2f}-{pairs.high:.2f}x)"
            )
        return (
            f"{prefix}noop/setup ratio: {self.headline():.2f} ({'; '.join(parts)}; "
            f"medians of {len(self.noop)} alternating pairs on {len(self.hosts)} node(s))"
        )

    def report(self):
        lines = [f"== {self.label}: medians of {len(self.noop)} alternating pairs (setup, no-op)"]
        for which, title in (("setup", "ansible -m setup"), ("noop", "site.yml no-op")):
            lines.append(
                f"  {title:18s} controller CPU {self.metric(which, 'cpu').describe()}   "
                f"wall {self.metric(which, 'wall').describe()}"
            )
        for name, title in (("cpu", "controller CPU"), ("wall", "wall")):
            pairs = self.pair_ratios(name)
            lines.append(
                f"  noop/setup {title:15s} {self.ratio(name):.2f}x of the medians; per pair "
                f"{pairs.median:.2f}x ({pairs.low:.2f}-{pairs.high:.2f})"
            )
        nodes = len(self.hosts)
        if nodes > 1:
            lines.append(
                f"  controller CPU per node per run: no-op {self.metric('noop', 'cpu').median / nodes:.2f} s,"
                f" setup {self.metric('setup', 'cpu').median / nodes:.2f} s"
            )
        if self.noop[0].peak_pss_mib is not None:
            for which, title in (("setup", "setup"), ("noop", "no-op")):
                pss = self.metric(which, "peak_pss_mib")
                rss = self.metric(which, "maxrss_mib")
                lines.append(
                    f"  controller peak memory, {title:6s} {pss.median:.0f} MiB summed PSS of the process "
                    f"tree ({pss.low:.0f}-{pss.high:.0f}); largest process {rss.median:.0f} MiB"
                )
        counts = self.noop[-1].recap.get(self.hosts[0], {})
        if counts:
            lines.append(
                f"  no-op tasks on {self.hosts[0]}: ok={counts['ok']} skipped={counts['skipped']} "
                f"changed={counts['changed']}"
            )
        return "\n".join(lines)


# ---------------------------------------------------------------- nodes


def docker(*args, check=True, capture=True):
    result = subprocess.run(["docker", *args], check=False, capture_output=capture, text=True)
    if check and result.returncode != 0:
        raise BenchError(f"docker {' '.join(args[:2])} failed: {(result.stderr or '').strip()}")
    return (result.stdout or "").strip()


def remove_nodes():
    """Remove every container of this benchmark (named gpunode-bench-*) with its volumes."""
    names = docker("ps", "-aq", "--filter", f"name=^{NODE_PREFIX}", check=False).split()
    if names:
        docker("rm", "-f", "-v", *names, check=False)
    return len(names)


def start_node(name, image):
    """A systemd container as tests/simnode's nodes run (see scripts/demo.sh)."""
    options = [
        ("--cap-add", "SYS_ADMIN"),
        ("--cap-add", "NET_ADMIN"),
        ("--security-opt", "seccomp=unconfined"),
        ("--security-opt", "apparmor=unconfined"),
        ("--cgroupns", "host"),
        ("--tmpfs", "/run"),
        ("--tmpfs", "/run/lock"),
        ("--tmpfs", "/tmp"),
        ("-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw"),
        ("-v", "/var/lib/docker"),
    ]
    docker("run", "-d", "--name", name, "--hostname", name, *itertools.chain(*options), image)


def wait_booted(names, timeout=180):
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            state = docker("exec", name, "systemctl", "is-system-running", check=False)
            if state in ("running", "degraded"):
                break
            if docker("inspect", "-f", "{{.State.Running}}", name, check=False) != "true":
                raise BenchError(
                    f"{name}: the node stopped while booting (systemd exits when it gets no inotify "
                    f"instance: {inotify_room_message(len(names))})"
                )
            if time.monotonic() > deadline:
                raise BenchError(f"{name}: systemd did not finish booting in {timeout} s (state {state!r})")
            time.sleep(0.5)


def inotify_instances_of_root():
    """inotify instances held by processes running as root (the nodes' systemd and containerd are)."""
    count = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", encoding="ascii", errors="replace") as handle:
                uids = next(line for line in handle if line.startswith("Uid:")).split()
            if uids[2] != "0":
                continue
            for descriptor in os.scandir(f"/proc/{entry.name}/fd"):
                with contextlib.suppress(OSError):
                    count += os.readlink(descriptor.path) == "anon_inode:inotify"
        except (OSError, StopIteration):
            continue
    return count


def inotify_room_message(nodes):
    limit = int(pathlib.Path("/proc/sys/fs/inotify/max_user_instances").read_text(encoding="ascii"))
    return (
        f"{nodes} node(s) need about {nodes * INOTIFY_PER_NODE} inotify instances for root "
        f"({INOTIFY_PER_NODE} each: systemd, containerd) and {inotify_instances_of_root()} of "
        f"fs.inotify.max_user_instances={limit} are in use; stop other containers, use fewer --nodes, "
        f"or raise the limit: sysctl -w fs.inotify.max_user_instances=512"
    )


def check_inotify_room(nodes):
    """Fail before starting nodes that could not boot (and would starve other containers)."""
    limit = int(pathlib.Path("/proc/sys/fs/inotify/max_user_instances").read_text(encoding="ascii"))
    if os.geteuid() == 0 and inotify_instances_of_root() + nodes * INOTIFY_PER_NODE > limit:
        raise BenchError(f"not enough inotify instances: {inotify_room_message(nodes)}")


def node_image_inputs():
    """Hash of what the bench node image is made from."""
    digest = hashlib.sha256(NODE_RECIPE.encode())
    digest.update(docker("image", "inspect", "-f", "{{.Id}}", BASE_IMAGE).encode())
    files = sorted(
        path
        for path in (ROOT / "tests" / "simnode").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )
    for path in [*files, DEMO_INVENTORY]:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def write_inventory(path, names):
    """The demo inventory, its groups' variables kept, with its first GPU node's (the T4's)
    variables given to each of `names`; these are its only hosts."""
    inventory = yaml.safe_load(DEMO_INVENTORY.read_text(encoding="utf-8"))
    groups = inventory["all"]["children"]
    node_vars = next(iter(groups["gpu_nodes"]["hosts"].values())) or {}
    for group in groups.values():
        if isinstance(group, dict):
            group.pop("hosts", None)
    groups["gpu_nodes"]["hosts"] = {name: dict(node_vars) for name in names}
    # the measured run is the nodes' no-op: the demo's add-on render (a controller-side
    # template run the demo shows) stays out of it, as before the demo rendered in site.yml
    shared = inventory["all"].get("vars") or {}
    for key in [k for k in shared if k.startswith("gpu_cluster_addons_")]:
        del shared[key]
    for key in [k for k in node_vars if k.startswith("gpu_cluster_addons_")]:
        for host in groups["gpu_nodes"]["hosts"].values():
            host.pop(key, None)
    path.write_text(
        "---\n# written by benchmarks/bench_noop.py from inventories/demo/hosts.yml\n"
        + yaml.safe_dump(inventory, sort_keys=False),
        encoding="utf-8",
    )
    return path


class Bench:
    def __init__(self, args):
        self.args = args
        self.nodes = [f"{NODE_PREFIX}{index:02d}" for index in range(1, args.nodes + 1)]
        self.forks = max(16, args.nodes)
        self.logs = WORK / "logs"
        venv_bin = ROOT / ".venv" / "bin"
        env = dict(os.environ, PY_COLORS="0", ANSIBLE_FORCE_COLOR="0", NO_COLOR="1")
        if venv_bin.is_dir():
            env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
        self.runner = Runner(env)
        self.fleet_inventory = WORK / "fleet-hosts.yml"
        self.one_inventory = WORK / "one-host.yml"

    def say(self, message):
        print(message, flush=True)

    def tool(self, name):
        path = shutil.which(name, path=self.runner.env["PATH"])
        if not path:
            raise BenchError(f"{name} not found: run `make bootstrap` (it creates .venv)")
        return path

    # -- building

    def build_node_image(self):
        if subprocess.run(
            [str(ROOT / "tests" / "simnode" / "build-image.sh"), BASE_FLAVOR], check=False
        ).returncode:
            raise BenchError(f"tests/simnode/build-image.sh {BASE_FLAVOR} failed")
        inputs = node_image_inputs()
        have = docker(
            "image",
            "inspect",
            "-f",
            f'{{{{ index .Config.Labels "{INPUTS_LABEL}" }}}}',
            NODE_IMAGE,
            check=False,
        )
        if have == inputs:
            self.say(f"image {NODE_IMAGE} is up to date ({inputs})")
            return
        self.say(f"== building {NODE_IMAGE} ({inputs}): {BASE_IMAGE} + tests/simnode/prepare-demo.yml")
        check_inotify_room(1)
        start_node(BUILD_NODE, BASE_IMAGE)
        wait_booted([BUILD_NODE])
        inventory = write_inventory(WORK / "build-hosts.yml", [BUILD_NODE])
        code, _, sample = self.runner.measure(
            [self.tool("ansible-playbook"), "-i", str(inventory), str(PREPARE_PLAYBOOK)],
            self.logs / "prepare.log",
        )
        if code != 0:
            raise BenchError(f"preparing the bench node failed; see {sample.log}")
        docker("exec", BUILD_NODE, "systemctl", "mask", *MASKED_UNITS)
        docker("stop", BUILD_NODE)
        docker("commit", "--change", f"LABEL {INPUTS_LABEL}={inputs}", BUILD_NODE, NODE_IMAGE)
        docker("rm", "-f", "-v", BUILD_NODE)
        self.say(f"built {NODE_IMAGE} (prepare {sample.wall:.0f} s)")

    def start_fleet(self):
        self.say(f"== starting {len(self.nodes)} nodes {self.nodes[0]}..{self.nodes[-1]} from {NODE_IMAGE}")
        check_inotify_room(len(self.nodes))
        for name in self.nodes:
            start_node(name, NODE_IMAGE)
        wait_booted(self.nodes)
        write_inventory(self.fleet_inventory, self.nodes)
        write_inventory(self.one_inventory, self.nodes[:1])

    # -- commands: every host of an inventory (no --limit: the controller plays run as for a user)

    def run_setup(self, inventory, hosts, log, sample_memory=False):
        argv = [self.tool("ansible"), "gpu_nodes", "-i", str(inventory), "-m", "ansible.builtin.setup"]
        code, text, sample = self.runner.measure([*argv, "--forks", str(self.forks)], log, sample_memory)
        check_setup(code, text, sample, hosts)
        return sample

    def site(self, inventory, log, sample_memory=False, extra_env=None):
        argv = [self.tool("ansible-playbook"), "-i", str(inventory), "site.yml", "--forks", str(self.forks)]
        return self.runner.measure(argv, log, sample_memory, extra_env)

    def run_noop(self, inventory, hosts, log, sample_memory=False, extra_env=None):
        _, _, sample = self.site(inventory, log, sample_memory, extra_env)
        check_noop(sample, hosts)
        return sample

    def converge(self):
        self.say(f"== first converge: site.yml on {len(self.nodes)} nodes (forks {self.forks})")
        code, _, sample = self.site(self.fleet_inventory, self.logs / "converge.log")
        bad = [
            host
            for host in self.nodes
            if sample.recap.get(host, {}).get("failed", 1) or sample.recap[host]["unreachable"]
        ]
        if code != 0 or bad:
            raise BenchError(
                f"the first converge failed on {', '.join(bad) or 'some host'}; see {sample.log}"
            )
        changed = Spread([sample.recap[host]["changed"] for host in self.nodes])
        self.say(
            f"  wall {sample.wall:.1f} s, controller CPU {sample.cpu:.1f} s "
            f"({sample.cpu / len(self.nodes):.2f} s per node), changed per node {changed.median:.0f}"
        )
        self.say("== second run: site.yml must change nothing on any node")
        sample = self.run_noop(self.fleet_inventory, self.nodes, self.logs / "second-run.log")
        self.say(
            f"  changed=0 on all {len(self.nodes)} nodes; wall {sample.wall:.1f} s, "
            f"controller CPU {sample.cpu:.1f} s"
        )

    def compare(self, label, inventory, hosts, rounds, *, sample_memory=False):
        tag = "fleet" if len(hosts) > 1 else "one"
        self.say(f"== {label}: a warm-up setup, then {rounds} pairs (setup, no-op)")
        self.run_setup(inventory, hosts, self.logs / f"{tag}-setup-warmup.log")
        setup, noop = [], []
        for index in range(1, rounds + 1):
            setup.append(
                self.run_setup(inventory, hosts, self.logs / f"{tag}-setup-{index}.log", sample_memory)
            )
            noop.append(self.run_noop(inventory, hosts, self.logs / f"{tag}-noop-{index}.log", sample_memory))
            self.say(
                f"  pair {index}/{rounds}: setup {setup[-1].cpu:.2f} s CPU {setup[-1].wall:.2f} s wall;"
                f" no-op {noop[-1].cpu:.2f} s CPU {noop[-1].wall:.2f} s wall; load {os.getloadavg()[0]:.1f}"
            )
        return Comparison(label, hosts, setup, noop)

    def timeline(self, log_name):
        """One no-op run on node 01 with the task_timeline callback (not timed): (document, sample)."""
        timeline = WORK / "timeline.json"
        extra_env = {
            "ANSIBLE_CALLBACK_PLUGINS": str(ROOT / "benchmarks" / "callback_plugins"),
            "ANSIBLE_CALLBACKS_ENABLED": "task_timeline",
            "GPUNODE_TASK_TIMELINE": str(timeline),
        }
        sample = self.run_noop(self.one_inventory, self.nodes[:1], self.logs / log_name, extra_env=extra_env)
        return json.loads(timeline.read_text(encoding="utf-8")), sample

    def count_round_trips(self):
        """Module executions on one converged node in a no-op run (fact gathering would be one)."""
        document, _sample = self.timeline("round-trips.log")
        return sum(round_trips(task) for task in document["tasks"])

    def profile(self):
        self.say(f"== profile: one no-op run on {self.nodes[0]} with the task_timeline callback")
        document, sample = self.timeline("profile.log")
        self.say(describe_timeline(document, sample))
        self.task_costs()

    def task_costs(self, tasks=40, runs=3):
        """Controller CPU and wall of one task of each kind on one node: plays of `tasks` equal tasks
        against an empty play, the median of `runs` runs each."""
        self.say(
            f"== what one task costs on {self.nodes[0]} ({tasks} equal tasks against an empty play, "
            f"medians of {runs})"
        )
        medians = {}
        for kind, task in TASK_COST_KINDS.items():
            playbook = WORK / f"task-cost-{re.sub('[^a-z0-9]+', '-', kind).strip('-')}.yml"
            play = {
                "name": f"{tasks} tasks: {kind}",
                "hosts": "gpu_nodes",
                "gather_facts": False,
                "tasks": [dict(task, name=f"{kind} {index}") for index in range(tasks if task else 0)],
            }
            playbook.write_text("---\n" + yaml.safe_dump([play], sort_keys=False), encoding="utf-8")
            argv = [self.tool("ansible-playbook"), "-i", str(self.one_inventory), str(playbook)]
            samples = []
            for index in range(runs):
                code, _, sample = self.runner.measure(argv, self.logs / f"{playbook.stem}-{index}.log")
                if code != 0:
                    raise BenchError(f"{playbook.name} failed; see {sample.log}")
                samples.append(sample)
            medians[kind] = (
                Spread([s.cpu for s in samples]).median,
                Spread([s.wall for s in samples]).median,
            )
        base_cpu, base_wall = medians.pop("empty play")
        self.say(f"  empty play: controller CPU {base_cpu:.2f} s, wall {base_wall:.2f} s (starting up)")
        for kind, (cpu, wall) in medians.items():
            self.say(
                f"  {kind:34s} controller CPU {1000 * (cpu - base_cpu) / tasks:6.0f} ms, "
                f"wall {1000 * (wall - base_wall) / tasks:6.0f} ms per task"
            )

    def run(self):
        shutil.rmtree(self.logs, ignore_errors=True)
        self.logs.mkdir(parents=True)
        load_start = os.getloadavg()
        if remove_nodes():
            self.say("removed the nodes of an earlier, interrupted run")
        self.build_node_image()
        self.start_fleet()
        self.converge()
        idle = f"; the other {len(self.nodes) - 1} idle" if len(self.nodes) > 1 else ""
        single = self.compare(
            f"one node ({self.nodes[0]}{idle})", self.one_inventory, self.nodes[:1], self.args.rounds
        )
        self.say(single.report())
        if self.args.profile:
            self.profile()
        fleet = self.compare(
            f"fleet of {len(self.nodes)} nodes (forks {self.forks})",
            self.fleet_inventory,
            self.nodes,
            self.args.fleet_rounds,
            sample_memory=True,
        )
        self.say(fleet.report())
        self.say(
            f"== machine: {os.cpu_count()} CPUs, {cpu_model()}; load average (1 min) "
            f"{load_start[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; logs in {self.logs}"
        )
        trips = f"round trips per converged node: {self.count_round_trips()}"
        self.say(f"{single.summary_line('')}; {trips}")
        self.say(f"{fleet.summary_line(f'fleet{len(self.nodes)} ')}; {trips}")


def cpu_model():
    with contextlib.suppress(OSError):
        for line in pathlib.Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


# ---------------------------------------------------------------- profile


def task_kind(task):
    """What a task cost: a skipped task is controller work whatever its action."""
    statuses = set(task["hosts"].values())
    action = task["action"]
    if statuses == {"skipped"}:
        return "skipped"
    if action in FACT_ACTIONS:
        return "fact gathering"
    if action in CONTROLLER_ACTIONS or action.rsplit(".", 1)[-1] in PROJECT_ACTIONS or not statuses:
        # (meta: flush_handlers reports no host)
        return "controller-only action"
    if task["delegate_to"] in ("localhost", "127.0.0.1") or set(task["hosts"]) == {"localhost"}:
        return "module on the controller"
    return "remote module call"


def round_trips(task):
    """Module executions on a node: one per host, or one per loop item."""
    if task_kind(task) not in ("remote module call", "fact gathering"):
        return 0
    return task["items"] or sum(status != "skipped" for status in task["hosts"].values())


def describe_timeline(document, sample, top=15):
    tasks = document["tasks"]
    main_cpu = document.get("main_cpu", 0.0)
    lines = [
        f"  {len(tasks)} tasks in {document['seconds']:.1f} s; plays: {len(document['plays'])}, of which "
        f"without a matching host: {sum(not play['matched'] for play in document['plays'])}; "
        f"round trips to the node: {sum(round_trips(task) for task in tasks)}",
        f"  controller CPU {sample.cpu:.1f} s: ansible-playbook's main process {main_cpu:.1f} s (templating, "
        f"conditionals, includes, callbacks), its forks and their docker CLI {sample.cpu - main_cpu:.1f} s",
    ]
    by_kind, by_role = {}, {}
    for task in tasks:
        for table, key in ((by_kind, task_kind(task)), (by_role, f"{task['play']} / {task['role'] or '-'}")):
            row = table.setdefault(key, {"tasks": 0, "seconds": 0.0, "main_cpu": 0.0, "round_trips": 0})
            row["tasks"] += 1
            row["seconds"] += task["seconds"]
            row["main_cpu"] += task.get("main_cpu", 0.0)
            row["round_trips"] += round_trips(task)
    header = "tasks  round trips  wall s  main-process CPU s"
    for title, table in (("by kind of task", by_kind), ("by play / role", by_role)):
        lines.append(f"  {title + ':':60s} {header}")
        for key, row in sorted(table.items(), key=lambda kv: -kv[1]["seconds"]):
            lines.append(
                f"    {key[:58]:58s} {row['tasks']:5d} {row['round_trips']:12d} {row['seconds']:7.2f} "
                f"{row['main_cpu']:9.2f}"
            )
    lines.append(f"  slowest {top} tasks:")
    for task in sorted(tasks, key=lambda t: -t["seconds"])[:top]:
        items = f", {task['items']} items" if task["items"] else ""
        lines.append(
            f"    {task['seconds']:6.2f} s  {task_kind(task):24s} {task['task']} ({task['action']}{items})"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------- main


class Interrupted(BaseException):
    """SIGTERM or SIGHUP: leave through the cleanup, like Ctrl-C."""


def _interrupt(signum, _frame):
    raise Interrupted(signal.Signals(signum).name)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=16, help="fleet size (default 16)")
    parser.add_argument("--rounds", type=int, default=7, help="alternating pairs on one node (default 7)")
    parser.add_argument(
        "--fleet-rounds", type=int, default=3, help="alternating pairs on the fleet (default 3)"
    )
    parser.add_argument("--profile", action="store_true", help="profile one no-op run on one node")
    parser.add_argument("--keep", action="store_true", help="keep the nodes afterwards (remove with --clean)")
    parser.add_argument(
        "--clean", action="store_true", help="remove the nodes and the bench node image, then exit"
    )
    args = parser.parse_args(argv)
    if args.clean:
        print(f"removed {remove_nodes()} bench container(s)")
        docker("image", "rm", NODE_IMAGE, check=False)
        return 0
    if args.nodes < 1 or args.rounds < 1 or args.fleet_rounds < 1:
        parser.error("--nodes, --rounds and --fleet-rounds must be at least 1")
    WORK.mkdir(parents=True, exist_ok=True)
    bench = Bench(args)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    try:
        bench.run()
    except BenchError as error:
        print(f"bench_noop: {error}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, Interrupted) as error:
        print(f"bench_noop: interrupted ({error or 'SIGINT'}); removing the nodes", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not stop the cleanup
        bench.runner.kill_current()
        if not args.keep:
            remove_nodes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
