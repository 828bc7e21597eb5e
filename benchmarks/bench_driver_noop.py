#!/usr/bin/env python3
"""How long a no-op `playbooks/driver.yml` takes on a converged simulated T4 node.

Starts one simulated GPU node (a systemd container of gpunode-bookworm-systemd),
gives it the driver fakes (tests/simnode/fakes/driver: a T4 without a driver, a
local repository of stub driver packages), converges it once with
`ansible-playbook playbooks/driver.yml` (packages, 570.133.20, held), then
measures, alternately in one run, N no-op runs of the playbook against N runs
of `ansible -m ansible.builtin.setup` on the same node (the floor: facts). It
prints the medians (wall and controller CPU: user + system of the
ansible processes) with their spread, the tasks a no-op run executes, and the
ratio. The node is removed afterwards (--keep keeps it).

A benchmark, not a test: it prints, it does not assert.

Usage: python benchmarks/bench_driver_noop.py [-n RUNS] [--keep]
"""

import argparse
import json
import os
import pathlib
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
NODE = "driver-bench-t4"
IMAGE = "gpunode-bookworm-systemd:latest"
WORK = ROOT / ".cache" / "bench-driver-noop"

INVENTORY = {
    "all": {
        "children": {
            "gpu_nodes": {
                "hosts": {
                    NODE: {
                        "ansible_connection": "community.docker.docker",
                        "ansible_python_interpreter": "/usr/bin/python3",
                        "nvidia_gpu_detect_sysfs_root": "/opt/gpunode-sim/sys",
                        "nvidia_gpu_detect_proc_root": "/opt/gpunode-sim/proc",
                        "nvidia_driver_method": "packages",
                        # Debian 12 packages 535 and 470 only: 570 from NVIDIA's CUDA repository
                        "nvidia_driver_package_source": "cuda",
                        "nvidia_driver_version": "570.133.20",
                        "nvidia_driver_apt_repository": (
                            "deb [signed-by=/etc/apt/keyrings/gpunode-nvidia-driver.asc] "
                            "http://127.0.0.1:8391/ /"),
                        "nvidia_driver_apt_key_url": "http://127.0.0.1:8391/gpunode-test-archive.asc",
                    }
                }
            }
        }
    }
}

# two levels below the repository, as tests/simnode/fakes/driver/prepare-node.yml expects
PREPARE = """---
- name: Simulated T4 node for the driver benchmark
  hosts: gpu_nodes
  gather_facts: true
  tasks:
    - name: Driver fakes
      ansible.builtin.include_tasks: ../../tests/simnode/fakes/driver/prepare-node.yml
      vars:
        gpunode_driver_spec: t4-fresh
        gpunode_driver_packages: [570.133.20]
        gpunode_driver_workdir: "{{ playbook_dir }}"
"""


def sh(argv, **kwargs):
    return subprocess.run(argv, check=True, text=True, **kwargs)


def start_node():
    subprocess.run(["docker", "rm", "-f", NODE], capture_output=True, check=False)
    sh(["docker", "run", "-d", "--name", NODE, "--hostname", NODE, "--cap-add", "SYS_ADMIN",
        "--cap-add", "NET_ADMIN", "--security-opt", "seccomp=unconfined", "--security-opt",
        "apparmor=unconfined", "--cgroupns", "host", "--tmpfs", "/run", "--tmpfs", "/run/lock",
        "--tmpfs", "/tmp", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", IMAGE], capture_output=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        state = subprocess.run(["docker", "exec", NODE, "systemctl", "is-system-running"],
                               capture_output=True, text=True, check=False).stdout.strip()
        if state in ("running", "degraded"):
            return
        time.sleep(0.5)
    raise SystemExit(f"{NODE}: systemd did not come up")


def timed(argv, env):
    """(wall seconds, controller CPU seconds, stdout) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-2000:])
        raise SystemExit(f"{' '.join(argv)} failed (rc {proc.returncode})")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.stdout


def summary(samples):
    return statistics.median(samples), min(samples), max(samples)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the node afterwards")
    args = parser.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    inventory = WORK / "hosts.yml"
    inventory.write_text(json.dumps(INVENTORY, indent=2))
    (WORK / "prepare.yml").write_text(PREPARE)
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_CACHE_PLUGIN="memory",
               ANSIBLE_CALLBACK_RESULT_FORMAT="yaml", ANSIBLE_RETRY_FILES_ENABLED="0")
    playbook = ["ansible-playbook", "-i", str(inventory)]
    try:
        print(f"== starting {NODE} ({IMAGE})", flush=True)
        start_node()
        print("== preparing the simulated T4 and its stub driver repository", flush=True)
        timed([*playbook, str(WORK / "prepare.yml")], env)
        wall, _cpu, out = timed([*playbook, "playbooks/driver.yml"], env)
        print(f"== first converge of playbooks/driver.yml: {wall:.1f} s", flush=True)
        noop, setup, recap = {"wall": [], "cpu": []}, {"wall": [], "cpu": []}, ""
        for run in range(args.runs):
            wall, cpu, out = timed([*playbook, "playbooks/driver.yml"], env)
            recap = [line for line in out.splitlines() if line.startswith(NODE + " ")][-1]
            if not re.search(r"changed=0 .*failed=0", recap):
                raise SystemExit(f"run {run + 1} was not a no-op: {recap}")
            noop["wall"].append(wall)
            noop["cpu"].append(cpu)
            wall, cpu, _ = timed(["ansible", "-i", str(inventory), NODE, "-m", "ansible.builtin.setup"], env)
            setup["wall"].append(wall)
            setup["cpu"].append(cpu)
        tasks = re.search(r"ok=(\d+) .*skipped=(\d+)", recap)
        print(f"== no-op recap: {recap.split(':', 1)[1].strip()}")
        ran, skipped = int(tasks.group(1)), int(tasks.group(2))
        print(f"   tasks run: {ran + skipped} ({ran} ok, {skipped} skipped)")
        for label, data in (("playbooks/driver.yml no-op", noop), ("ansible -m setup (floor)", setup)):
            wall, cpu = summary(data["wall"]), summary(data["cpu"])
            print(f"   {label:28s} wall {wall[0]:5.2f} s ({wall[1]:.2f}-{wall[2]:.2f})"
                  f"   controller CPU {cpu[0]:5.2f} s ({cpu[1]:.2f}-{cpu[2]:.2f})")
        ratio_wall = statistics.median(noop["wall"]) / statistics.median(setup["wall"])
        ratio_cpu = statistics.median(noop["cpu"]) / statistics.median(setup["cpu"])
        print(f"driver noop/setup ratio: wall {ratio_wall:.2f}, controller CPU {ratio_cpu:.2f} "
              f"(medians of {args.runs}, alternating)")
    finally:
        if not args.keep:
            subprocess.run(["docker", "rm", "-f", NODE], capture_output=True, check=False)
            shutil.rmtree(WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
