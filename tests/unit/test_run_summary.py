"""The action gpunode_summary (action_plugins/gpunode_summary.py, documented in
library/gpunode_summary.py): the table a run ends with. It runs on the controller
only, so these tests run on the controller's Python."""

import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, load_file
from playbook_run import ansible_playbook

pytestmark = pytest.mark.controller(reason="an action plugin: it runs in ansible-playbook's own process")


@pytest.fixture(scope="module")
def summary():
    """The action plugin's Python module, imported from its file as Ansible does."""
    return load_file(ROOT / "action_plugins" / "gpunode_summary.py", "gpunode_summary_action")


HGX = {
    "nvidia_gpu": {"present": True, "gpu_count": 8, "nvswitch_count": 4,
                   "model_counts": {"H100 SXM5 80GB": 8}},
    "nvidia_driver": {"installed_version": "570.133.20", "loaded_version": "570.133.20",
                      "module_type": "open", "held": True, "reboot_required": False},
    "nvidia_container_runtime": {"kubelet_engine": "containerd",
                                 "engines": {"containerd": {"default_runtime": "nvidia"},
                                             "docker": {"default_runtime": "nvidia"}}},
    "kubelet_gpu": {"kubernetes_version": "1.37.1", "gates": {"DRAExtendedResource": True}},
}
CONTROL_PLANE = {"gpushare_scheduler": {"flavor": "kubeadm", "api_version": "kubescheduler.config.k8s.io/v1",
                                        "state": "present"}}


def test_a_row_per_host_from_its_facts_and_changes(summary):
    got = summary.rows(["hgx", "cp", "new"], {"hgx": HGX, "cp": CONTROL_PLANE},
                       {"hgx": ["driver 535.183.01 -> 570.133.20", "containerd: nvidia default runtime"]},
                       {"hgx": "device plugin, mig mixed"})
    assert got[0] == (
        "hgx", "8x H100 SXM5 80GB, 4 NVSwitch", "570.133.20 open, held",
        "containerd nvidia (kubelet), docker nvidia", "DRAExtendedResource=true (kubelet 1.37.1)", "-",
        "device plugin, mig mixed", "no", "not run", "-",
        "driver 535.183.01 -> 570.133.20; containerd: nvidia default runtime",
    )
    # a role that did not run on a host leaves its column at "-"
    assert got[1] == ("cp", "-", "-", "-", "-", "kubeadm kubescheduler.config.k8s.io/v1", "-", "-", "-", "-",
                      "nothing")
    assert got[2] == ("new", "-", "-", "-", "-", "-", "-", "-", "-", "-", "nothing")


@pytest.mark.parametrize("fabric, cell", [
    ("nvswitch", "8x H100 SXM5 80GB, 4 NVSwitch"),  # the NVSwitch count names it
    ("nvlink5", "8x B200, NVLink5 fabric"),
    ("mnnvl", "4x GB200, NVL72 (MNNVL) fabric"),
    ("none", "1x Tesla T4"),
])
def test_the_gpus_cell_names_the_nvlink_fabric_by_its_kind(summary, fabric, cell):
    model, count = cell.split(", ")[0].split("x ", 1)[::-1]
    gpu = {"present": True, "gpu_count": int(count), "nvswitch_count": 4 if fabric == "nvswitch" else 0,
           "model_counts": {model: int(count)}, "fabric": fabric}
    assert summary.rows(["node"], {"node": {"nvidia_gpu": gpu}}, {})[0][1] == cell


B200 = {"present": True, "gpu_count": 8, "nvswitch_count": 0, "model_counts": {"B200": 8},
        "fabric": "nvlink5"}


@pytest.mark.parametrize("gpu, verdict, cell", [
    (B200, {"passed": True, "ran": True, "fabric": "Completed"}, "8x B200, NVLink5 fabric Completed"),
    # the record of an earlier validation (site.yml's one read) carries it too
    (B200, {"passed": True, "ran": False, "fabric": "Completed"}, "8x B200, NVLink5 fabric Completed"),
    (dict(B200, model_counts={"GB200": 4}, gpu_count=4, fabric="mnnvl"),
     {"passed": False, "ran": True, "fabric": "In Progress"}, "4x GB200, NVL72 (MNNVL) fabric In Progress"),
    (dict(HGX["nvidia_gpu"], fabric="nvswitch"), {"passed": True, "ran": True, "fabric": "Completed"},
     "8x H100 SXM5 80GB, 4 NVSwitch, fabric Completed"),
    (B200, {"passed": True, "ran": False}, "8x B200, NVLink5 fabric"),  # a record older than the state
])
def test_the_gpus_cell_names_the_fabrics_state_the_validation_read(summary, gpu, verdict, cell):
    assert summary.rows(["node"], {"node": {"nvidia_gpu": gpu, "gpu_validate": verdict}}, {})[0][1] == cell


def test_what_needs_attention_reads_plainly(summary):
    facts = {"nvidia_gpu": {"present": False, "gpu_count": 0},
             "nvidia_driver": {"installed_version": None, "reboot_required": True},
             "nvidia_container_runtime": {"engines": {}},
             "kubelet_gpu": {"gates": {}, "restart_pending": True}}
    (row,) = summary.rows(["h"], {"h": facts}, {})
    assert row[1:8] == ("none", "not installed", "no engine", "none, restart pending", "-", "-",
                        "REBOOT NEEDED")


@pytest.mark.parametrize("verdict, shown", [
    ({"passed": True, "failed_checks": [], "ran": True, "validated_at": "2026-11-27T03:10:00Z"}, "passed"),
    ({"passed": True, "failed_checks": [], "ran": False, "validated_at": "2026-11-20T08:00:00Z"},
     "passed 2026-11-20"),
    ({"passed": False, "failed_checks": ["ecc", "xid"], "ran": True}, "failed (ecc, xid)"),
])
def test_the_validated_column_names_the_failed_checks(summary, verdict, shown):
    (row,) = summary.rows(["hgx"], {"hgx": dict(HGX, gpu_validate=verdict)}, {})
    assert row[summary.COLUMNS.index("validated")] == shown


def test_a_failed_node_no_taint_keeps_from_work_is_said_to_serve_untainted_and_why(summary):
    failed = dict(HGX, gpu_validate={"passed": False, "failed_checks": ["xid"], "ran": True})
    why = "render mode: nothing ran the printed kubectl commands"
    first, second = summary.rows(["hgx", "hgx-2"], {"hgx": failed, "hgx-2": failed}, {},
                                 untainted={"hgx": why})
    column = summary.COLUMNS.index("validated")
    assert first[column] == f"failed (xid); SERVING UNTAINTED ({why})"
    assert second[column] == "failed (xid)"


def test_table_is_aligned_under_its_header(summary):
    text = summary.table(summary.rows(["hgx", "cp"], {"hgx": HGX, "cp": CONTROL_PLANE}, {}))
    lines = text.splitlines()
    assert lines[0].split() == " ".join(summary.COLUMNS).split()
    assert set(lines[1]) == {"-", " "}
    starts = [lines[0].index(column) for column in summary.COLUMNS]
    for line in lines[2:]:
        for start in starts[1:]:
            assert line[start - 2:start] == "  "  # every column starts after the same gap
    assert all(line == line.rstrip() for line in lines)


def _ansible(*argv):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json")
    ansible = pathlib.Path(sys.executable).with_name("ansible")
    return subprocess.run([str(ansible), "localhost", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, check=False)


def test_the_action_returns_the_table_and_the_rows_without_a_module_run():
    args = {"hosts": ["hgx"], "host_facts": {"hgx": HGX},
            "changes": {"hgx": ["kubelet: DRAExtendedResource=true"]}}
    done = _ansible("-m", "gpunode_summary", "-a", json.dumps(args), "-vvv")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout[done.stdout.index("{"):])["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert not result["changed"]
    assert result["rows"][0]["this run"] == "kubelet: DRAExtendedResource=true"
    assert result["table"].splitlines()[2].startswith("hgx  ")
    # controller-side: no module is sent anywhere, no interpreter started for it
    assert "AnsiballZ" not in done.stdout + done.stderr and "EXEC" not in done.stdout + done.stderr


def test_a_missing_option_fails_with_its_name():
    done = _ansible("-m", "gpunode_summary", "-a", json.dumps({"host_facts": {}}))
    assert done.returncode != 0
    assert "missing required arguments: hosts" in done.stdout + done.stderr


def test_the_control_plane_row_shows_its_scheduler_version_and_whether_it_runs_the_extender(summary):
    facts = {"gpushare_scheduler": {**CONTROL_PLANE["gpushare_scheduler"], "kubernetes_version": "v1.30.4"}}
    rke = {"gpushare_scheduler": {"flavor": "rke", "api_version": "kubescheduler.config.k8s.io/v1beta2",
                                  "kubernetes_version": "1.24.17", "state": "pending",
                                  "waiting_for": "rke up"}}
    restart = {"gpushare_scheduler": {"flavor": "rke2", "kubernetes_version": "v1.28.9+rke2r1",
                                      "api_version": "kubescheduler.config.k8s.io/v1", "state": "pending"}}
    table_rows = summary.rows(["cp", "rke", "rke2"], {"cp": facts, "rke": rke, "rke2": restart}, {})
    got = [row[5] for row in table_rows]
    assert got == [
        "kubeadm kubescheduler.config.k8s.io/v1 (kube-scheduler 1.30.4)",
        "rke kubescheduler.config.k8s.io/v1beta2 (kube-scheduler 1.24.17), pending: waiting for rke up",
        "rke2 kubescheduler.config.k8s.io/v1 (kube-scheduler 1.28.9+rke2r1), pending",
    ]
    # GPU columns stay empty on a control-plane node the GPU roles did not run on
    assert summary.rows(["cp"], {"cp": facts}, {})[0][1:5] == ("-", "-", "-", "-")


def test_a_hosts_changes_are_listed_one_per_line_under_this_run(summary):
    changes = {"hgx": ["driver 535.183.01 -> 570.133.20", "fabric manager nvidia-fabricmanager-570: install",
                       "kubelet restarted\n(kubelet.service)"],
               "t4": ["docker: nvidia runtime (default)"]}
    text = summary.table(summary.rows(["hgx", "cp", "t4"], {"hgx": HGX, "cp": CONTROL_PLANE}, changes))
    lines = text.splitlines()
    last = lines[0].index("this run")
    assert [line[last:] for line in lines[2:]] == [
        "driver 535.183.01 -> 570.133.20", "fabric manager nvidia-fabricmanager-570: install",
        "kubelet restarted (kubelet.service)", "nothing", "docker: nvidia runtime (default)"]
    # a continuation line is blank up to the column; every host's row starts with its name
    assert [line.split()[0] for line in lines[2:]] == ["hgx", "fabric", "kubelet", "cp", "t4"]
    assert lines[3][:last].strip() == "" and lines[4][:last].strip() == ""
    assert len(lines[1]) == last + len("fabric manager nvidia-fabricmanager-570: install")


def test_a_long_change_goes_on_over_indented_lines_and_keeps_its_words(summary):
    long = ("kubelet gates DynamicResourceAllocation=true in /var/lib/kubelet/config.yaml featureGates "
            "and /etc/systemd/system/kubelet.service.d/10-kubeadm.conf")
    table_rows = summary.rows(["t4"], {}, {"t4": [long, "kubelet restarted (kubelet.service)"]})
    lines = summary.table(table_rows).splitlines()
    last = lines[0].index("this run")
    cells = [line[last:] for line in lines[2:]]
    assert len(cells) > 2 and cells[-1] == "kubelet restarted (kubelet.service)"
    assert all(cell.startswith("  ") for cell in cells[1:-1])
    assert all(len(cell) <= summary.CHANGE_WIDTH or " " not in cell.strip() for cell in cells)
    assert " ".join(" ".join(cells[:-1]).split()) == long


def test_without_host_facts_the_action_reads_each_hosts_facts_and_changes_from_hostvars(tmp_path):
    """summary.yml passes only the hosts: the facts and gpunode_changes come from hostvars."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {
        "hgx": {"ansible_connection": "local", "gpunode_changes": ["driver 535.129.03 -> 570.133.20"]},
        "cp": {"ansible_connection": "local"},
    }}}))
    playbook = tmp_path / "summary.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "gather_facts": False,
        "tasks": [
            {"ansible.builtin.set_fact": {"nvidia_gpu": HGX["nvidia_gpu"], "kubelet_gpu": HGX["kubelet_gpu"],
                                          "cacheable": True},
             "delegate_to": "hgx", "delegate_facts": True},
            # what the add-ons play publishes on localhost
            {"ansible.builtin.set_fact": {"gpu_cluster_addons": {"mode": "nvidia", "offers": {
                "hgx": "device plugin, time-slicing x4"}, "untainted": {"hgx": "why"}}, "cacheable": True}},
            {"gpunode_summary": {"hosts": ["cp", "hgx"]}, "register": "summary"},
            {"ansible.builtin.debug": {"var": "summary.rows"}},
        ],
    }]))
    done = ansible_playbook(playbook, inventory, ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                            ANSIBLE_STDOUT_CALLBACK="json")
    tasks = json.loads(done.stdout[done.stdout.index("{"):])["plays"][0]["tasks"]
    rows = {row["host"]: row for row in tasks[2]["hosts"]["localhost"]["rows"]}
    assert rows["hgx"]["GPUs"] == "8x H100 SXM5 80GB, 4 NVSwitch"
    assert rows["hgx"]["kubelet gates"].startswith("DRAExtendedResource=true")
    assert rows["hgx"]["this run"] == "driver 535.129.03 -> 570.133.20"
    assert rows["hgx"]["GPUs offered by"] == "device plugin, time-slicing x4"
    assert rows["hgx"]["validated"].endswith("; SERVING UNTAINTED (why)")
    assert rows["cp"]["GPUs"] == "-" and rows["cp"]["this run"] == "nothing"


def test_an_image_host_shows_its_adopted_driver_and_what_was_skipped_and_why(summary):
    driver = {"method": "preinstalled", "loaded_version": "580.159.04", "installed_version": "580.159.04",
              "module_type": "open", "held": False, "reboot_required": False,
              "skipped": ["nvidia-persistenced: no systemd on this host to run it"]}
    hostvars = {"vm": {"ansible_facts": {"nvidia_driver": driver},
                       "gpunode_skipped": ["container runtime: no container engine on this host"]}}
    host_facts, changes = summary.from_hostvars(hostvars, ["vm"])
    (row,) = summary.rows(["vm"], host_facts, changes)
    assert row[2] == "preinstalled 580.159.04 (open)"
    assert row[-1] == ("skipped: nvidia-persistenced: no systemd on this host to run it; "
                       "skipped: container runtime: no container engine on this host")


def test_a_host_without_a_kubelet_says_why_in_the_table(summary):
    kubelet = {"present": False, "gates": {}, "restart_pending": False,
               "skipped": ["kubelet: no service manager (systemd) on this host to run a kubelet: "
                           "no feature gates set"]}
    _facts, changes = summary.from_hostvars({"vm": {"ansible_facts": {"kubelet_gpu": kubelet}}}, ["vm"])
    assert changes["vm"] == ["skipped: kubelet: no service manager (systemd) on this host to run a kubelet: "
                             "no feature gates set"]


def test_a_host_refused_for_its_gpu_work_says_so_with_the_driver_it_runs(summary):
    read = {"refusal": "gpu-01: refused, ...",
            "disruption": {"disruptive": True, "reasons": ["driver reload"],
                           "gpu_work": [{"pid": 4242, "command": "python3 train.py", "unit": "train.service"},
                                        {"pid": 5000, "command": "sleep infinity", "unit": None}]},
            "plans": {"driver": {"before": {"installed_version": "535.129.03",
                                            "loaded_version": "535.129.03"}}}}
    # what the read published: the driver as its plan would leave it
    facts = {"nvidia_driver": {"installed_version": "570.133.20", "loaded_version": "570.133.20"}}
    hostvars = {"gpu-01": {"gpunode_node_state": read, "ansible_facts": facts},
                "gpu-02": {"gpunode_node_state": dict(read, refusal=None), "ansible_facts": facts}}
    host_facts, changes = summary.from_hostvars(hostvars, ["gpu-01", "gpu-02"])
    refused, allowed = summary.rows(["gpu-01", "gpu-02"], host_facts, changes)
    assert refused[2] == "535.129.03" and allowed[2] == "570.133.20"
    assert refused[-1] == "refused: GPU in use by pid 4242 (train.service), pid 5000 (sleep infinity)"
    assert allowed[-1] == "nothing"


def test_when_every_gpu_node_is_refused_the_run_fails_them_and_still_prints_the_table(tmp_path):
    """playbooks/node_state.yml's refusal play (localhost in it: a play where every host failed would end
    the run), then summary.yml, as site.yml runs them."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {
        "gpu-01": {"ansible_connection": "local"}, "gpu-02": {"ansible_connection": "local"}}}}}}))
    read = {"refusal": "REFUSED-{{ inventory_hostname }}",
            "disruption": {"gpu_work": [{"pid": 4242, "command": "sleep infinity", "unit": "work.service"}]}}
    refusal_play = yaml.safe_load((ROOT / "playbooks" / "node_state.yml").read_text())[1]
    playbook = tmp_path / "site.yml"
    playbook.write_text(yaml.safe_dump([
        {"hosts": "gpu_nodes", "gather_facts": False,
         "tasks": [{"ansible.builtin.set_fact": {"gpunode_node_state": read}}]},
        refusal_play,
        {"ansible.builtin.import_playbook": str(ROOT / "playbooks" / "summary.yml")},
    ]))
    done = ansible_playbook(playbook, inventory, check=False)
    assert done.returncode == 2, done.stdout[-3000:]
    output = done.stdout + done.stderr
    assert "REFUSED-gpu-01" in output and "REFUSED-gpu-02" in output
    assert output.count("refused: GPU in use by pid 4242 (work.service)") == 2, done.stdout[-3000:]


PDB_REFUSED = ("Failed to delete pod default/train-0 due to: (429) Reason: Too Many Requests: Cannot "
               "evict pod as it would violate the pod's disruption budget.")
DRAINED = {"changed": True, "result": "node gpu-01 marked unschedulable. 1 Pod(s) deleted from node."}
SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}


@pytest.mark.parametrize("record, facts, cell, failure", [
    (None, {}, "-", None),  # off the rolling path
    ({"drain": True, "drained": DRAINED, "uncordoned": {"changed": True}, "changed": True, "failed": None},
     {"gpu_validate": {"ran": True, "passed": True}}, "drained, changed, validated, uncordoned", None),
    ({"drain": False, "drained": SKIPPED, "uncordoned": SKIPPED, "changed": True, "failed": None}, {},
     "not drained, changed", None),
    ({"drain": True, "drained": DRAINED, "uncordoned": SKIPPED, "changed": True, "failed": None}, {},
     "drained, changed, left cordoned: reboot pending", None),
    ({"drain": True, "drained": DRAINED, "uncordoned": None, "changed": False,
      "failed": {"task": "Validate the GPUs", "msg": "ecc: GPU 0 has 3 uncorrectable errors"}}, {},
     "failed at Validate the GPUs, left cordoned",
     "rollout failed at Validate the GPUs: ecc: GPU 0 has 3 uncorrectable errors"),
    ({"drain": True, "drained": {"failed": True, "msg": "Failed to retrieve node"}, "uncordoned": None,
      "failed": {"task": "Rollout | cordon and drain", "msg": "Failed to retrieve node"}}, {},
     "failed at Rollout | cordon and drain",
     "rollout failed at Rollout | cordon and drain: Failed to retrieve node"),
    # a PodDisruptionBudget refused an eviction to the end: k8s_drain had cordoned the node
    ({"drain": True, "drained": None, "uncordoned": None,
      "failed": {"task": "Rollout | cordon and drain", "msg": PDB_REFUSED}}, {},
     "failed at Rollout | cordon and drain, left cordoned",
     f"rollout failed at Rollout | cordon and drain: {PDB_REFUSED}"),
    ({"not_started": "gpu-01"}, {}, "not started",
     "rollout not started: gpu-01 failed in an earlier batch, and no later batch starts"),
    ({"drain": True, "check_mode": True, "drained": SKIPPED, "failed": None}, {}, "would drain", None),
    ({"drain": False, "check_mode": True, "drained": SKIPPED, "failed": None}, {},
     "would change, not drained", None),
])
def test_the_rollout_cell_says_what_the_rolling_path_did_and_a_failure_fails_the_host(
        summary, record, facts, cell, failure):
    assert summary.rollout(record, facts) == (cell, failure)
    row = summary.rows(["gpu-01"], {"gpu-01": facts}, {}, rollouts={"gpu-01": record})[0]
    assert row[summary.COLUMNS.index("rollout")] == cell

