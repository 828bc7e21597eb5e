"""Tests of the fault-injection harness itself: `pytest tests/faults`.

The kill is tested for real: ansible-playbook runs a local playbook through
interrupt.py's own functions and must die right after the chosen task, before
the next one, while this test process lives on. The node checks' parsers run
over real containerd configurations from ../shared/fixtures and over outputs
captured on a simulated node (fixtures/ here).
"""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SHARED = os.path.join(os.path.dirname(REPO), "shared", "fixtures")
VENV_BIN = os.path.dirname(sys.executable)


def load(name):
    spec = importlib.util.spec_from_file_location("faults_" + name, os.path.join(HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


interrupt = load("interrupt")
node_checks = load("node_checks")
report = load("report")

PLAYBOOK = textwrap.dedent(
    """\
    - name: Three steps
      hosts: localhost
      gather_facts: false
      tasks:
        - name: Step | one
          ansible.builtin.command: touch {{ out }}/one
        - name: Step | two
          ansible.builtin.command: touch {{ out }}/two
          changed_when: {{ two_changes }}
        - name: Step | three
          ansible.builtin.command: touch {{ out }}/three
    """
)


def run_local(tmp_path, kill_after, two_changes=True):
    """Run the three-step playbook under the kill callback; (rc, records, files left)."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK.replace("{{ two_changes }}", "true" if two_changes else "false"))
    record = str(tmp_path / "kill.jsonl")
    env = dict(os.environ, PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
    env = interrupt.kill_env(env, kill_after, "localhost", record)
    argv = [
        "ansible-playbook",
        "-c",
        "local",
        "-i",
        "localhost,",
        "-e",
        "out=" + str(tmp_path),
        str(playbook),
    ]
    rc = interrupt.run_playbook(argv, env, str(tmp_path / "run.log"))
    done = sorted(name for name in ("one", "two", "three") if (tmp_path / name).exists())
    return rc, interrupt.read_records(record), done


def test_the_run_dies_right_after_the_task_reports(tmp_path):
    rc, records, done = run_local(tmp_path, {"task": r"^Step \| two$"})
    assert rc == -signal.SIGKILL
    assert done == ["one", "two"]  # step three never ran
    assert [(r["task"], r["status"], r["killed"]) for r in records] == [("Step | two", "changed", True)]
    assert interrupt.verdict({"name": "w", "interrupt": {"kill_after": {"task": "two"}}}, rc, records)[0]
    # the whole process group went: no ansible-playbook of that group is left
    assert subprocess.run(["pgrep", "-g", str(records[0]["pgid"])], check=False).returncode == 1


def test_a_task_that_changed_nothing_is_not_the_window(tmp_path):
    rc, records, done = run_local(tmp_path, {"task": r"^Step \| two$"}, two_changes=False)
    assert rc == 0
    assert done == ["one", "three", "two"]
    assert records[0]["killed"] is False
    assert "needs changed" in records[0]["why"]
    reached, why = interrupt.verdict({"name": "w", "interrupt": {"kill_after": {"task": "two"}}}, rc, records)
    assert not reached
    assert "reported ok" in why


def test_status_any_kills_on_ok(tmp_path):
    rc, _, done = run_local(tmp_path, {"task": r"^Step \| two$", "status": "any"}, two_changes=False)
    assert rc == -signal.SIGKILL
    assert done == ["one", "two"]


def test_a_task_that_never_runs_is_reported(tmp_path):
    rc, records, done = run_local(tmp_path, {"task": "no such task"})
    assert rc == 0
    assert done == ["one", "three", "two"]
    reached, why = interrupt.verdict(
        {"name": "w", "interrupt": {"kill_after": {"task": "no such task"}}}, rc, records
    )
    assert not reached
    assert "no task matching 'no such task'" in why


def test_kill_env_keeps_other_callbacks():
    env = interrupt.kill_env(
        {"ANSIBLE_CALLBACKS_ENABLED": "profile_tasks", "ANSIBLE_CALLBACK_PLUGINS": "/x"},
        {"task": "t"},
        "h",
        "/r",
    )
    assert env["ANSIBLE_CALLBACKS_ENABLED"] == "profile_tasks,gpunode_fault_kill"
    assert env["ANSIBLE_CALLBACK_PLUGINS"] == "/x" + os.pathsep + os.path.join(HERE, "callback_plugins")
    assert (env["GPUNODE_FAULT_STATUS"], env["GPUNODE_FAULT_OCCURRENCE"]) == ("changed", "1")


def test_every_window_names_a_node_an_interrupt_and_known_checks():
    windows = report.load_windows(os.path.join(HERE, "windows.yml"))
    assert len({w["node"] for w in windows}) == len(windows)
    assert report.REFERENCE not in {w["node"] for w in windows}
    for window in windows:
        assert set(window["interrupt"]) <= {"kill_after", "crash_dpkg_in_postinst"}, window["name"]
        assert set(window["checks"]) <= set(report.CHECK_ORDER), window["name"]


@pytest.mark.parametrize(
    ("fixture", "default"),
    [
        ("containerd-config.toml-v2-gpu-operator-runtimes-tuttlebr.toml", "nvidia"),
        ("containerd-config.toml-v2-nvidia-default-cloud-native-stack.toml", "nvidia"),
        ("containerd-config.toml-v1-schema-no-nvidia-jessfraz.toml", None),
        ("containerd-config.toml-v1-commented-nvidia-fffrs.toml", None),
        ("containerd-config.toml-docker-package-cri-disabled-idein.toml", None),
    ],
)
def test_containerd_runtimes_pattern_reads_what_toml_reads(fixture, default):
    """The fallback below Python 3.11 finds the same runtimes as tomllib in real configurations."""
    path = os.path.join(SHARED, "docker", fixture)
    if not os.path.exists(path):
        pytest.skip(path + " is not here")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    names, found_default, _ = node_checks.containerd_runtimes(text)
    saved, node_checks.tomllib = node_checks.tomllib, None
    try:
        pattern_names, pattern_default, _ = node_checks.containerd_runtimes(text)
    finally:
        node_checks.tomllib = saved
    assert (pattern_names, pattern_default) == (names, found_default)
    assert ("nvidia" in names) == (default is not None)  # commented-out tables do not count
    assert found_default == default


def test_containerd_dump_of_a_node():
    with open(os.path.join(HERE, "fixtures", "containerd-1.6-config-dump.toml"), encoding="utf-8") as handle:
        text = handle.read()
    names, default, imports = node_checks.containerd_runtimes(text)
    assert names == ["nvidia", "runc"]
    assert default == "runc"
    assert imports == ["/etc/containerd/conf.d/99-nvidia.toml", "/etc/containerd/config.toml"]
    node_checks.tomllib, saved = None, node_checks.tomllib
    try:
        assert node_checks.containerd_runtimes(text) == (names, default, imports)
    finally:
        node_checks.tomllib = saved


def test_kubelet_gates_are_those_of_its_last_start():
    journal = (
        "kubelet v1.30.4 starting; feature gates: {}\n"
        "kubelet v1.30.4 starting; feature gates: {'DynamicResourceAllocation': True}\n"
    )
    assert node_checks.kubelet_gates_from_journal(journal) == {"DynamicResourceAllocation": True}
    assert node_checks.kubelet_gates_from_journal("nothing\n") is None
    assert node_checks.gate_differences({"A": True, "B": False}, {"A": True, "B": True}) == [
        "B=false (running: true)"
    ]
    assert node_checks.gate_differences({"A": True}, {}) == ["A=true (running: none)"]
    argv = ["/usr/bin/kubelet", "--kubeconfig=/k", "--config=/var/lib/kubelet/config.yaml"]
    assert node_checks.kubelet_config_path(argv) == "/var/lib/kubelet/config.yaml"
    assert node_checks.kubelet_config_path(["kubelet", "--config", "/c.yaml"]) == "/c.yaml"


def test_a_unit_reads_its_file_drop_ins_and_every_environment_file():
    shown = (
        "FragmentPath=/etc/systemd/system/kubelet.service\n"
        "EnvironmentFiles=/var/lib/kubelet/kubeadm-flags.env (ignore_errors=yes)\n"
        "EnvironmentFiles=/etc/default/kubelet (ignore_errors=yes)\n"
        "DropInPaths=/etc/systemd/system/kubelet.service.d/10-kubeadm.conf /run/x.conf\n"
        "MainPID=42\n"
    )
    assert node_checks.unit_files(node_checks.parse_unit_show(shown)) == [
        "/etc/systemd/system/kubelet.service",
        "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
        "/run/x.conf",
        "/var/lib/kubelet/kubeadm-flags.env",
        "/etc/default/kubelet",
    ]


def test_dpkg_outputs():
    with open(os.path.join(HERE, "fixtures", "dpkg-audit-interrupted.txt"), encoding="utf-8") as handle:
        audit = handle.read()
    assert node_checks.audit_packages(audit) == [
        "libnvidia-compute-570-server",
        "nvidia-tesla-570-driver",
        "nvidia-dkms-570-server",
    ]
    assert node_checks.installed("hold ok installed")
    assert node_checks.installed("install ok installed")
    assert not node_checks.installed("install ok half-configured")
    assert not node_checks.installed("deinstall ok config-files")
    assert node_checks.parse_dpkg_status("a\t1.0\tinstall ok installed\nbad line\n") == {
        "a": ("1.0", "install ok installed")
    }
    assert node_checks.newer_than_start({"/a": 10.0, "/b": 30.0, "/c": None}, 20.0) == ["/b"]


def node_result(**state):
    checks = {name: {"ok": True, "detail": "fine"} for name in report.CHECK_ORDER}
    return {"checks": checks, "state": state}


def test_a_node_unlike_the_reference_fails_the_check_that_owns_the_difference():
    reference = node_result(held=["nvidia-tesla-570-driver"], docker={"default_runtime": "nvidia"})
    node = node_result(held=[], docker={"default_runtime": "nvidia"})
    rows = dict((check, (ok, detail)) for check, ok, detail in report.judge(node, reference))
    assert rows["holds"][0] is False
    assert 'held: [] (faults-reference: ["nvidia-tesla-570-driver"])' in rows["holds"][1]
    assert all(ok for check, (ok, _) in rows.items() if check != "holds")


def test_verify_fails_for_a_window_not_reached(tmp_path):
    windows = report.load_windows(os.path.join(HERE, "windows.yml"))
    window = windows[0]
    (tmp_path / "interrupted.json").write_text(
        json.dumps([{"window": window["name"], "reached": False, "why": "the run ended with status 0"}])
    )
    for node in (report.REFERENCE, window["node"]):
        (tmp_path / f"{node}.verify-1.json").write_text(json.dumps(node_result(held=["x"])))
    lines, ok = report.report_verify(str(tmp_path), [window], "verify-1")
    assert not ok
    assert any("NOT REACHED" in line for line in lines)
    (tmp_path / "interrupted.json").write_text(
        json.dumps([{"window": window["name"], "reached": True, "why": "k"}])
    )
    assert report.report_verify(str(tmp_path), [window], "verify-1")[1]
