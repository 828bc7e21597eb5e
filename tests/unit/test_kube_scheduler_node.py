"""kube_scheduler_node: what runs on the node, compared with kube-scheduler's files."""

import subprocess

import pytest
from ansible.module_utils.gpunode.host import processes
from ansible.module_utils.gpunode.scheduler import node as kn
from fake_proc import KUBEADM_SCHEDULER_ARGV, FakeProc

MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"
CONFIG = "/etc/kubernetes/scheduler-extender-config.yaml"
ARGV = KUBEADM_SCHEDULER_ARGV
WITH_CONFIG = [*ARGV, f"--config={CONFIG}"]


def run(argv):
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    return done.returncode, done.stdout, done.stderr


# ---------------------------------------------------------------- processes


def test_processes_are_found_by_command_name_with_argv_and_start_time(tmp_path):
    proc = FakeProc(tmp_path)
    proc.add(412, "kube-scheduler", WITH_CONFIG, age=120)
    proc.add(77, "kube-apiserver", ["kube-apiserver"], age=300)
    proc.add(9001, "kube-scheduler", ["kube-scheduler", "--config=/etc/second.yaml"], age=10)
    found = kn.processes("kube-scheduler", str(proc.root))
    assert [p.pid for p in found] == [412, 9001]  # oldest first
    assert found[0].argv == WITH_CONFIG
    assert abs(found[0].started - proc.started(120)) < 1
    assert kn.processes("kube-scheduler", str(tmp_path / "absent")) == []


def test_a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields(tmp_path):
    proc = FakeProc(tmp_path)
    proc.add(5, "odd) name (x", ["x"], age=42)
    assert abs(processes.start_time(5, str(proc.root)) - proc.started(42)) < 1
    assert processes.start_time(6, str(proc.root)) is None


def test_the_running_binary_tells_its_version(tmp_path):
    proc = FakeProc(tmp_path)
    process = kn.processes("kube-scheduler", str(proc.root)) or None
    assert process is None
    proc.add(10, "kube-scheduler", ARGV, version="v1.31.4")
    process = kn.processes("kube-scheduler", str(proc.root))[0]
    version, source = kn.binary_version(process, run, str(proc.root))
    assert version == "1.31.4"
    assert source == f"{proc.root}/10/exe --version (kube-scheduler PID 10)"


def test_a_binary_that_is_not_kube_scheduler_gives_no_version(tmp_path):
    proc = FakeProc(tmp_path)
    proc.add(11, "kube-scheduler", ARGV)  # its exe prints a Python version, not Kubernetes
    process = kn.processes("kube-scheduler", str(proc.root))[0]
    assert kn.binary_version(process, run, str(proc.root)) is None


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("registry.k8s.io/kube-scheduler:v1.29.2", "1.29.2"),
        ("registry.k8s.io/kube-scheduler:v1.29.2@sha256:" + "a" * 64, "1.29.2"),
        ("registry.k8s.io/kube-scheduler@sha256:" + "b" * 64, None),
        ("registry.example:5000/kube-scheduler@sha256:" + "c" * 64, None),
        ("registry.example:5000/google_containers/kube-scheduler:v1.22.17", "1.22.17"),
        ("registry.aliyuncs.com/google_containers/kube-scheduler:v1.18.16", "1.18.16"),
        ("kube-scheduler:latest", None),
    ],
)
def test_the_image_tag_is_read_and_a_digest_is_not_a_tag(image, version):
    assert kn.tag_version(image) == version


def test_the_first_source_with_a_version_wins_and_a_disagreement_is_reported():
    version, source, warnings = kn.detect_version(
        [
            (None, "the image tag in the manifest"),
            ("1.30.2", "/proc/9/exe --version"),
            ("v1.29.0", "kubeadm-config"),
        ]
    )
    assert (version, source) == ("1.30.2", "/proc/9/exe --version")
    assert warnings == [
        "Kubernetes version 1.30.2 (/proc/9/exe --version) differs from v1.29.0 (kubeadm-config); "
        "using 1.30.2"
    ]
    assert kn.detect_version([(None, "a"), (None, "b")]) == (None, None, [])


def test_flavor_comes_from_what_the_node_has(tmp_path):
    present = set()
    exists = present.__contains__
    assert kn.detect_flavor(exists, MANIFEST, "/etc/rancher/rke2/config.yaml", None) is None
    assert kn.detect_flavor(exists, MANIFEST, "/etc/rancher/rke2/config.yaml", "/root/cluster.yml") == "rke"
    present.add(kn.RKE1_NODE_MARKER)
    assert kn.detect_flavor(exists, MANIFEST, "/etc/rancher/rke2/config.yaml", None) == "rke"
    present.add("/etc/rancher/rke2")
    assert kn.detect_flavor(exists, MANIFEST, "/etc/rancher/rke2/config.yaml", None) == "rke2"
    present.add(MANIFEST)
    assert kn.detect_flavor(exists, MANIFEST, "/etc/rancher/rke2/config.yaml", None) == "kubeadm"


# ---------------------------------------------------------------- running state


def proc_of(pid, argv, age):
    return kn.Process(pid, argv, kn.time.time() - age)


def test_a_changed_manifest_waits_for_the_kubelet_to_replace_the_scheduler():
    plan = kn.restart_plan(
        "kubeadm",
        changed={MANIFEST: ("a", "b")},
        manifest_path=MANIFEST,
        manifest_argv=WITH_CONFIG,
        config_source=CONFIG,
        schedulers=[proc_of(5, ARGV, 60)],
    )
    assert plan["wait_for_exit"] == [5] and plan["stop"] == [] and plan["unit"] is None
    assert "the kubelet replaces kube-scheduler" in plan["reason"]


def test_a_changed_config_alone_stops_the_scheduler_so_that_it_rereads_it():
    plan = kn.restart_plan(
        "kubeadm",
        changed={CONFIG: ("a", "b")},
        manifest_path=MANIFEST,
        manifest_argv=WITH_CONFIG,
        config_source=CONFIG,
        schedulers=[proc_of(5, WITH_CONFIG, 60)],
    )
    assert plan["stop"] == [5] and plan["wait_for_exit"] == [5]


def test_a_scheduler_with_other_flags_than_the_manifest_is_waited_for():
    # a run killed after writing the manifest, with the kubelet not yet done
    plan = kn.restart_plan(
        "kubeadm",
        changed={},
        manifest_path=MANIFEST,
        manifest_argv=WITH_CONFIG,
        config_source=CONFIG,
        schedulers=[proc_of(5, ARGV, 600)],
        mtimes={MANIFEST: kn.time.time() - 10},
    )
    assert plan["wait_for_exit"] == [5] and "other flags than" in plan["reason"]


def test_a_scheduler_older_than_its_config_file_is_stopped():
    plan = kn.restart_plan(
        "kubeadm",
        changed={},
        manifest_path=MANIFEST,
        manifest_argv=WITH_CONFIG,
        config_source=CONFIG,
        schedulers=[proc_of(5, WITH_CONFIG, 600)],
        mtimes={MANIFEST: kn.time.time() - 3600, CONFIG: kn.time.time() - 60},
    )
    assert plan["stop"] == [5] and f"{CONFIG} changed after it started" in plan["reason"]


def test_a_current_scheduler_needs_nothing_and_another_scheduler_is_left_alone():
    second = proc_of(9, ["kube-scheduler", "--config=/etc/profiles.yaml"], 5)
    plan = kn.restart_plan(
        "kubeadm",
        changed={},
        manifest_path=MANIFEST,
        manifest_argv=WITH_CONFIG,
        config_source=CONFIG,
        schedulers=[proc_of(5, WITH_CONFIG, 60), second],
        mtimes={MANIFEST: kn.time.time() - 3600, CONFIG: kn.time.time() - 3600},
    )
    assert plan is None
    assert kn.restart_plan("kubeadm", changed={}, health_problem="refused") == {
        "reason": "kube-scheduler is not healthy: refused",
        "unit": None,
        "stop": [],
        "wait_for_exit": [],
        "pending": None,
    }


def test_rke2_restarts_rke2_server_for_its_config_and_stops_the_scheduler_for_its_file():
    files = ["/etc/rancher/rke2/config.yaml", "/etc/rancher/rke2/config.yaml.d/50-gpu.yaml"]
    flag = "--config=/etc/rancher/rke2/scheduler-extender-config.yaml"
    sched = proc_of(5, ["kube-scheduler", flag], 60)
    server = proc_of(2, ["rke2", "server"], 100)
    plan = kn.restart_plan(
        "rke2",
        changed={files[1]: ("", "x")},
        config_source=CONFIG,
        config_flag=flag,
        schedulers=[sched],
        rke2_server=server,
        rke2_files=files,
    )
    assert plan["unit"] == "rke2-server" and plan["wait_for_exit"] == [5]
    stale = kn.restart_plan(
        "rke2",
        changed={},
        config_source=CONFIG,
        config_flag=flag,
        schedulers=[sched],
        rke2_server=server,
        rke2_files=files,
        mtimes={files[0]: kn.time.time() - 30},
    )
    assert stale["unit"] == "rke2-server" and "changed after it started" in stale["reason"]
    reread = kn.restart_plan(
        "rke2",
        changed={CONFIG: ("a", "b")},
        config_source=CONFIG,
        config_flag=flag,
        schedulers=[sched],
        rke2_server=server,
        rke2_files=files,
    )
    assert reread["unit"] is None and reread["stop"] == [5]
    assert (
        kn.restart_plan(
            "rke2",
            changed={},
            config_source=CONFIG,
            config_flag=flag,
            schedulers=[sched],
            rke2_server=server,
            rke2_files=files,
            mtimes={files[0]: kn.time.time() - 300},
        )
        is None
    )


def test_rke1_node_waits_for_rke_up_until_the_scheduler_carries_the_flag():
    flag = f"--config={CONFIG}"
    plan = kn.restart_plan(
        "rke",
        changed={CONFIG: (None, "x")},
        config_source=CONFIG,
        config_flag=flag,
        schedulers=[proc_of(5, ["kube-scheduler", "--v=2"], 60)],
    )
    assert plan["pending"] == "rke up" and plan["stop"] == []
    plan = kn.restart_plan(
        "rke",
        changed={CONFIG: ("a", "b")},
        config_source=CONFIG,
        config_flag=flag,
        schedulers=[proc_of(5, ["kube-scheduler", flag], 60)],
    )
    assert plan["stop"] == [5] and plan["pending"] is None


def test_journal_entries_roll_back_only_files_that_still_hold_the_change():
    journal = {
        "files": {
            MANIFEST: {"backup": "/b/m~", "sha256": kn.digest("new manifest")},
            CONFIG: {"backup": None, "sha256": kn.digest("new config")},
        }
    }
    current = {MANIFEST: kn.digest("new manifest"), CONFIG: kn.digest("edited by someone since")}
    assert kn.journal_entries(journal, current) == [{"path": MANIFEST, "backup": "/b/m~"}]
    assert kn.journal_entries(None, {}) == []


def test_what_the_call_reports_says_what_changed_and_what_is_pending():
    params = {"state": "present", "extender": {"url_prefix": "http://127.0.0.1:32766/gpushare-scheduler"}}
    manifest = "/etc/kubernetes/manifests/kube-scheduler.yaml"
    result = {"files": {manifest: ("old", "new")}, "api_version": "kubescheduler.config.k8s.io/v1"}
    lines = kn.change_lines(params, result, "recorded", {"reason": "its manifest changed"})
    assert lines == [
        "kube-scheduler: extender http://127.0.0.1:32766/gpushare-scheduler "
        f"(kubescheduler.config.k8s.io/v1): {manifest}",
        "kube-system/kubeadm-config: scheduler flag and volume recorded for kubeadm upgrade",
    ]
    # nothing written, but the running scheduler is behind its files: the restart is the change
    assert kn.change_lines(params, {"files": {}, "api_version": None}, None, {"reason": "stale"}) == [
        "kube-scheduler: restart (stale)"]
    out = {"flavor": "kubeadm", "kubernetes_version": "1.37.0", "version_source": "kube-scheduler --version",
           "api_version": "kubescheduler.config.k8s.io/v1", "config_path": "/etc/kubernetes/x.yaml",
           "restart": {"pending": "the kubelet replaces kube-scheduler"}}
    facts = kn.scheduler_facts(params, out)
    assert facts["state"] == "pending" and facts["waiting_for"] == "the kubelet replaces kube-scheduler"
    assert kn.scheduler_facts(params, dict(out, restart=None))["state"] == "present"
    assert kn.scheduler_facts({"state": "absent"}, dict(out, restart=None))["state"] == "absent"
