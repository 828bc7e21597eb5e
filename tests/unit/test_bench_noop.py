"""benchmarks/bench_noop.py: what `make bench` reports is computed from what was measured.

Controller-side code (the benchmark runs on the controller only).
"""

import importlib.util
import pathlib
import re
import sys

import pytest
import yaml

pytestmark = pytest.mark.controller

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("bench_noop", ROOT / "benchmarks" / "bench_noop.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_noop"] = module
    spec.loader.exec_module(module)
    return module


bench = _load()

COUNTS = "unreachable=0    failed={failed}    skipped={skipped}   rescued=0    ignored=0"
RECAP_TEXT = "\n".join([
    "PLAY RECAP " + "*" * 69,
    "gpunode-bench-01           : ok=60   changed=0    " + COUNTS.format(failed=0, skipped=28),
    "gpunode-bench-02           : ok=59   changed=2    " + COUNTS.format(failed=1, skipped=28),
    "localhost                  : ok=3    changed=0    " + COUNTS.format(failed=0, skipped=1),
    "",
])

def sample(wall=1.0, cpu=1.0, recap=None, pss=None):
    return bench.Sample(wall=wall, cpu=cpu, maxrss_mib=10.0, peak_pss_mib=pss, recap=recap or {},
                        log=pathlib.Path("/nonexistent/run.log"))


def test_recap_is_read_per_host():
    recap = bench.parse_recap(RECAP_TEXT)
    assert set(recap) == {"gpunode-bench-01", "gpunode-bench-02", "localhost"}
    assert recap["gpunode-bench-01"] == {"ok": 60, "changed": 0, "unreachable": 0, "failed": 0, "skipped": 28,
                                         "rescued": 0, "ignored": 0}
    assert recap["gpunode-bench-02"]["changed"] == 2
    assert recap["gpunode-bench-02"]["failed"] == 1


def test_a_noop_sample_must_change_nothing_on_every_node():
    recap = bench.parse_recap(RECAP_TEXT)
    bench.check_noop(sample(recap=recap), ["gpunode-bench-01"])
    with pytest.raises(bench.BenchError, match=r"gpunode-bench-02: changed=2 failed=1.*run\.log"):
        bench.check_noop(sample(recap=recap), ["gpunode-bench-01", "gpunode-bench-02"])
    with pytest.raises(bench.BenchError, match="gpunode-bench-03: not in the play recap"):
        bench.check_noop(sample(recap=recap), ["gpunode-bench-03"])


def test_setup_must_succeed_on_every_node():
    text = 'gpunode-bench-01 | SUCCESS => {\n    "ansible_facts": {}\n}\n'
    bench.check_setup(0, text, sample(), ["gpunode-bench-01"])
    with pytest.raises(bench.BenchError, match="gpunode-bench-02"):
        bench.check_setup(0, text, sample(), ["gpunode-bench-01", "gpunode-bench-02"])
    with pytest.raises(bench.BenchError):
        bench.check_setup(2, text, sample(), ["gpunode-bench-01"])


def test_ratios_come_from_the_medians_and_the_headline_is_the_larger():
    setup = [sample(wall=2.0, cpu=1.0), sample(wall=4.0, cpu=1.2), sample(wall=2.2, cpu=0.8)]
    noop = [sample(wall=20.0, cpu=12.0), sample(wall=30.0, cpu=9.0), sample(wall=22.0, cpu=10.0)]
    comparison = bench.Comparison("fleet", ["a", "b"], setup, noop)
    assert comparison.ratio("cpu") == pytest.approx(10.0 / 1.0)
    assert comparison.ratio("wall") == pytest.approx(22.0 / 2.2)
    assert comparison.headline() == pytest.approx(10.0)
    pairs = comparison.pair_ratios("cpu")
    assert (pairs.low, pairs.high) == (pytest.approx(7.5), pytest.approx(12.5))
    line = comparison.summary_line("fleet2 ")
    assert line.startswith("fleet2 noop/setup ratio: 10.00 (")
    assert "medians of 3 alternating pairs on 2 node(s)" in line


def test_headline_is_bound_by_wall_when_wall_is_worse():
    comparison = bench.Comparison("one", ["a"], [sample(wall=1.0, cpu=1.0)], [sample(wall=3.0, cpu=2.0)])
    assert comparison.headline() == pytest.approx(3.0)
    assert comparison.summary_line("").startswith("noop/setup ratio: 3.00 (")


def test_report_gives_per_node_cpu_and_memory_on_a_fleet():
    recap = {"a": {"ok": 5, "skipped": 1, "changed": 0}}
    comparison = bench.Comparison("fleet", ["a", "b"], [sample(cpu=1.0, pss=100.0)],
                                  [sample(cpu=8.0, pss=400.0, recap=recap)])
    report = comparison.report()
    assert "controller CPU per node per run: no-op 4.00 s, setup 0.50 s" in report
    assert "400 MiB summed PSS" in report
    assert "ok=5 skipped=1 changed=0" in report


@pytest.mark.parametrize(
    ("action", "hosts", "delegate_to", "kind"),
    [
        ("ansible.builtin.stat", {"n": "ok"}, None, "remote module call"),
        ("ansible.builtin.stat", {"n": "skipped"}, None, "skipped"),
        ("ansible.builtin.gather_facts", {"n": "ok"}, None, "fact gathering"),
        ("ansible.builtin.set_fact", {"n": "ok"}, None, "controller-only action"),
        ("ansible.builtin.include_tasks", {"n": "ok"}, None, "controller-only action"),
        ("ansible.builtin.meta", {}, None, "controller-only action"),
        ("ansible.builtin.find", {"n": "ok"}, "localhost", "module on the controller"),
        ("ansible.builtin.ping", {"localhost": "ok"}, None, "module on the controller"),
        # the project's action plugin runs in the worker, no module anywhere
        ("gpunode_summary", {"localhost": "ok"}, None, "controller-only action"),
        ("gpunode.gpunode.gpunode_summary", {"localhost": "ok"}, None, "controller-only action"),
        ("nvidia_driver_state", {"n": "changed"}, None, "remote module call"),
    ],
)
def test_task_kinds(action, hosts, delegate_to, kind):
    task = {"action": action, "hosts": hosts, "delegate_to": delegate_to}
    assert bench.task_kind(task) == kind


def test_timeline_summary_counts_tasks_plays_and_round_trips():
    document = {
        "seconds": 3.0,
        "main_cpu": 0.5,
        "plays": [{"play": "p", "pattern": "gpu_nodes", "matched": True},
                  {"play": "q", "pattern": "kube_control_plane", "matched": False}],
        "tasks": [
            {"play": "p", "role": "r", "task": "r : look", "action": "ansible.builtin.stat",
             "delegate_to": None, "hosts": {"n": "ok"}, "items": 6, "seconds": 2.0, "main_cpu": 0.1},
            {"play": "p", "role": "r", "task": "r : set", "action": "docker_daemon_config",
             "delegate_to": None, "hosts": {"n": "ok", "m": "ok"}, "items": 0, "seconds": 0.4,
             "main_cpu": 0.1},
            {"play": "p", "role": "r", "task": "r : fact", "action": "ansible.builtin.set_fact",
             "delegate_to": None, "hosts": {"n": "ok"}, "items": 0, "seconds": 0.5, "main_cpu": 0.2},
        ],
    }
    text = bench.describe_timeline(document, sample(wall=3.5, cpu=1.5))
    assert "3 tasks in 3.0 s" in text
    assert "plays: 2, of which without a matching host: 1; round trips to the node: 8" in text
    assert "main process 0.5 s" in text
    assert "forks and their docker CLI 1.0 s" in text
    assert re.search(r"remote module call +2 +8 +2\.40 +0\.20\n", text)
    assert re.search(r"controller-only action +1 +0 +0\.50 +0\.20\n", text)
    assert re.search(r"2\.00 s +remote module call +r : look \(ansible\.builtin\.stat, 6 items\)", text)


def test_controller_cpu_counts_the_children_of_children(tmp_path):
    """The controller's CPU is ansible-playbook's and its forks' and their docker CLIs': all descendants."""
    burn = ("import os, time\n"
            "end = time.process_time() + 0.2\n"
            "while time.process_time() < end: pass\n"
            "t = os.times(); print(t.user + t.system)\n")
    script = tmp_path / "burn.py"
    script.write_text(burn, encoding="utf-8")
    runner = bench.Runner(env={"PATH": "/usr/bin:/bin"})
    code, text, measured = runner.measure(["/bin/sh", "-c", f"{sys.executable} {script}; true"],
                                          tmp_path / "log", sample_memory=True)
    assert code == 0
    grandchild_cpu = float(text.split()[-1])
    assert measured.cpu >= grandchild_cpu > 0
    assert measured.peak_pss_mib is not None


def test_the_fleet_inventory_gives_every_node_the_demo_nodes_variables(tmp_path):
    path = bench.write_inventory(tmp_path / "hosts.yml", ["gpunode-bench-01", "gpunode-bench-02"])
    demo = yaml.safe_load((ROOT / "inventories" / "demo" / "hosts.yml").read_text(encoding="utf-8"))
    written = yaml.safe_load(path.read_text(encoding="utf-8"))
    demo_vars = next(iter(demo["all"]["children"]["gpu_nodes"]["hosts"].values()))
    # but the add-ons' variables: the benchmark measures the nodes' no-op, not the demo's render
    node_side = {k: v for k, v in demo_vars.items() if not k.startswith("gpu_cluster_addons_")}
    hosts = written["all"]["children"]["gpu_nodes"]["hosts"]
    assert list(hosts) == ["gpunode-bench-01", "gpunode-bench-02"]
    assert all(node_vars == node_side for node_vars in hosts.values())
    assert not [k for k in written["all"].get("vars") or {} if k.startswith("gpu_cluster_addons_")]
    assert set(written["all"]["children"]) == set(demo["all"]["children"])
    # the demo's other hosts (its HGX, its control plane) are not in the fleet
    groups = written["all"]["children"].values()
    assert [name for group in groups for name in (group or {}).get("hosts") or {}] == list(hosts)
    assert written["all"]["children"]["gpu_nodes"]["vars"] == demo["all"]["children"]["gpu_nodes"].get("vars")
