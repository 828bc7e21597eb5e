"""The rolling path (playbooks/rollout.yml, tasks/rollout_node.yml): the batch that serial made against
the one the hosts asked for (filter_plugins/gpunode_rollout.py), a failure that stops every later batch
and the closing table printed before the run fails them."""

import json
import subprocess
import sys
import time

import pytest
import yaml
from ansible.module_utils.gpunode.addons import dra, dra_objects
from conftest import ROOT, load_file
from playbook_run import ansible_playbook, local_inventory

FILTERS = load_file(ROOT / "filter_plugins" / "gpunode_rollout.py", "gpunode_rollout_filters")
batch_error = FILTERS.FilterModule().filters()["gpunode_rollout_batch_error"]
HOSTS = [f"gpu-{n:02}" for n in range(1, 6)]


@pytest.mark.parametrize("wanted, made", [
    (1, [[h] for h in HOSTS]),
    ("2", [HOSTS[:2], HOSTS[2:4], HOSTS[4:]]),  # the last batch smaller
    ("40%", [HOSTS[:2], HOSTS[2:4], HOSTS[4:]]),
    ("10%", [[h] for h in HOSTS]),  # a percentage is at least one host
    ([1, "50%"], [HOSTS[:1], HOSTS[1:3], HOSTS[3:]]),  # a list: its last size repeats
    (0, [HOSTS]),
])
def test_the_batches_are_cut_as_serial_cuts_them(wanted, made):
    assert FILTERS.batches(wanted, HOSTS) == made
    for batch in made:
        assert batch_error(batch, HOSTS, HOSTS, wanted) == ""


def test_a_batch_size_serial_did_not_see_stops_the_run_naming_the_variable_and_e():
    message = batch_error(HOSTS[:1], HOSTS, HOSTS, 3)
    assert message.startswith("gpunode_rollout_batch is 3 for this host, but the play made a batch of 1 "
                              "(gpu-01)")
    assert "Pass it with -e gpunode_rollout_batch=3" in message and "ansible/ansible#27166" in message
    assert batch_error(HOSTS[:2], HOSTS[:2], HOSTS[:2], 3) == ""  # all there is: the same batch
    assert "neither a count nor a percentage" in batch_error(HOSTS[:1], HOSTS, HOSTS, "two")


def test_hosts_failed_before_the_play_are_no_part_of_the_batch_serial_made():
    active = [h for h in HOSTS if h != "gpu-02"]  # refused by node_state.yml: in the batch, never run
    assert batch_error(["gpu-01", "gpu-03"], HOSTS, active, 3) == ""
    assert batch_error(["gpu-04", "gpu-05"], HOSTS, active, 3) == ""
    assert batch_error(["gpu-01"], HOSTS, active, 3) != ""


# --- The rolling path's control flow, run by ansible-playbook on local hosts ---------------------------
# Each node's read (gpunode_node_state) is given in the inventory as node_state.yml leaves it: every
# concern converged, so that no role runs here; a refusal (GPU work the drain did not end) fails a node.

def _inventory(tmp_path, refused=(), **group_vars):
    def read(host):
        return {"converged": {"driver": True, "container_runtime": True, "kubelet": True, "validated": True},
                "disruption": {"node_name": host, "rollout": True},
                "refusal": f"{host}: refused, GPU work runs here" if host in refused else None}
    hosts = {h: {"ansible_connection": "local", "gpunode_node_state": read(h)} for h in HOSTS[:3]}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {
        "gpu_nodes": {"hosts": hosts, "vars": group_vars},
        "gpunode_rollout": {"hosts": {h: {} for h in hosts}}}}}))
    return path


def _rows(stdout):
    """The closing table's rows, by host."""
    return {line.split()[0]: line for line in map(str.strip, stdout.splitlines())
            if line.startswith("gpu-0") and " : ok=" not in line}


def _playbook(tmp_path):
    path = tmp_path / "site.yml"
    path.write_text(yaml.safe_dump([{"ansible.builtin.import_playbook": str(ROOT / "playbooks" / name)}
                                    for name in ("rollout.yml", "summary.yml")]))
    return path


@pytest.mark.controller(reason="runs ansible-playbook")
def test_a_failed_node_stops_every_later_batch_and_the_table_is_printed_before_they_fail(tmp_path):
    done = ansible_playbook(_playbook(tmp_path), _inventory(tmp_path, refused=["gpu-01"]),
                            "-e", "gpunode_rollout_batch=2", check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output[-4000:]
    rows = _rows(done.stdout)
    assert "failed at Rollout | refuse GPU work left after the drain" in rows["gpu-01"]
    assert "not drained, unchanged" in rows["gpu-02"]  # the same batch: it went on
    assert "not started" in rows["gpu-03"]
    table_at = done.stdout.index("this run")
    for message in ("rollout failed at Rollout | refuse GPU work left after the drain: gpu-01: refused",
                    "rollout not started: gpu-01 failed in an earlier batch"):
        assert done.stdout.index(message) > table_at, output[-4000:]
    recap = {line.split()[0]: line for line in done.stdout.splitlines() if " : ok=" in line}
    assert "failed=1" in recap["gpu-01"] and "failed=0" in recap["gpu-02"] and "failed=1" in recap["gpu-03"]


@pytest.mark.controller(reason="runs ansible-playbook")
def test_a_failed_node_fails_the_run_when_limit_leaves_the_table_out(tmp_path):
    """--limit gpu-01 (no localhost: no table): the rescued failure still fails the host and the run."""
    done = ansible_playbook(_playbook(tmp_path), _inventory(tmp_path, refused=["gpu-01"]),
                            "--limit", "gpu-01", check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output[-4000:]
    assert "rollout failed at Rollout | refuse GPU work left after the drain: gpu-01: refused" in output
    assert "this run" not in done.stdout  # no table: localhost is outside the limit
    recap = {line.split()[0]: line for line in done.stdout.splitlines() if " : ok=" in line}
    assert set(recap) == {"gpu-01"} and "failed=1" in recap["gpu-01"]


@pytest.mark.controller(reason="runs ansible-playbook")
def test_a_batch_size_set_in_the_inventory_stops_the_run_before_any_node_is_touched(tmp_path):
    done = ansible_playbook(_playbook(tmp_path), _inventory(tmp_path, gpunode_rollout_batch=2), check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 2, output[-4000:]
    assert "Pass it with -e gpunode_rollout_batch=2" in output
    assert "Rollout | " not in done.stdout  # no task of a node ran


def test_the_label_the_rolling_path_pauses_a_node_with_keeps_every_gpu_daemonset_of_gpunode_off_it():
    block = next(task for task in yaml.safe_load((ROOT / "playbooks/tasks/rollout_node.yml").read_text())
                 if "block" in task)
    paused = next(task["kubernetes.core.k8s"]["definition"]["metadata"]["labels"] for task in block["block"]
                  if task["name"] == "Rollout | pause gpunode's GPU DaemonSets on the node")
    (key, value), = paused.items()
    role_vars = yaml.safe_load((ROOT / "roles/gpu_cluster_addons/vars/main.yml").read_text())
    wanted = {"key": key, "operator": "NotIn", "values": [value]}
    assert role_vars["__gpu_cluster_addons_not_paused"] == wanted == dra_objects.NOT_PAUSED
    pods = block["vars"]["__gpunode_rollout_daemon_pods"]
    templates = sorted((ROOT / "roles/gpu_cluster_addons/templates").glob("daemonset-*.yaml.j2"))
    for template in templates:
        text = template.read_text()
        if "gpushare" in template.name:  # the GPU-share plugin keeps upstream's manifest
            continue
        assert "__gpu_cluster_addons_not_paused" in text, template.name
        name = text.split("template:")[1].split("app.kubernetes.io/name: ")[1].split()[0]
        assert name in pods, template.name
    spec = dra_objects.kubelet_plugin_daemonset(dra_objects.settings_of({}))["spec"]["template"]
    terms = spec["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [wanted]}]
    assert spec["metadata"]["labels"]["app.kubernetes.io/name"] == dra.NAME and dra.NAME in pods


@pytest.mark.controller(reason="runs ansible-playbook")
def test_check_mode_cordons_and_labels_nothing_and_the_table_says_what_would_be_drained(tmp_path):
    drain = ["-e", "gpunode_rollout_drain=true", "-e", f"gpunode_rollout_kubeconfig={tmp_path / 'none'}"]
    done = ansible_playbook(_playbook(tmp_path), _inventory(tmp_path), "--check", *drain, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    rows = _rows(done.stdout)
    assert len(rows) == 3 and all("would drain" in row for row in rows.values()), rows
    api_tasks = [block for block in done.stdout.split("TASK [")[1:] if "-> localhost" in block
                 and not block.startswith("Rollout | note the batch's nodes]")]
    assert api_tasks == []  # no API call (they run from the controller)


@pytest.mark.controller(reason="runs ansible-playbook")
def test_a_node_lost_inside_its_batch_stops_every_later_batch_as_a_failed_one_does(tmp_path):
    """gpu-01 becomes unreachable in the block (its driver role's first call to the node): the rescue
    never runs for an unreachable host, yet no later batch starts, and the table is printed."""
    inventory = _inventory(tmp_path)
    data = yaml.safe_load(inventory.read_text())
    lost = data["all"]["children"]["gpu_nodes"]["hosts"]["gpu-01"]
    lost.update(ansible_connection="ssh", ansible_host="127.0.0.1", ansible_port=9, ansible_timeout=3)
    lost["gpunode_node_state"]["converged"]["driver"] = False
    inventory.write_text(yaml.safe_dump(data))
    done = ansible_playbook(_playbook(tmp_path), inventory, "-e", "gpunode_rollout_batch=2", check=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-4000:]
    rows = _rows(done.stdout)
    assert "not drained, unchanged" in rows["gpu-02"], output[-4000:]  # the same batch: it went on
    assert "not started" in rows["gpu-03"], output[-4000:]
    assert "rollout not started: gpu-01 failed in an earlier batch" in done.stdout, output[-4000:]
    recap = {line.split()[0]: line for line in done.stdout.splitlines() if " : ok=" in line}
    assert "unreachable=1" in recap["gpu-01"] and "failed=1" in recap["gpu-03"], output[-4000:]


def _drain(tmp_path, refusals, timeout):
    """The rolling path's drain (tasks/rollout_drain.yml) of gpu-01 against the API stand-in whose
    PodDisruptionBudget refuses the first ``refusals`` evictions (-1: every one); (run, the stand-in's
    events)."""
    record, kubeconfig = tmp_path / "standin.json", tmp_path / "standin.kubeconfig"
    standin = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fixtures" / "drain" / "api_standin.py"),
                                "--node", "gpu-01", "--kubeconfig", str(kubeconfig), "--record", str(record),
                                "--lifetime", "120", "--pdb-refusals", str(refusals)])
    try:
        for _ in range(100):
            if kubeconfig.exists():
                break
            time.sleep(0.1)
        playbook = tmp_path / "drain.yml"
        playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [
            {"ansible.builtin.include_tasks": str(ROOT / "playbooks" / "tasks" / "rollout_drain.yml"),
             "vars": {"__gpunode_rollout_node": "gpu-01"}}]}]))
        done = ansible_playbook(playbook, local_inventory(tmp_path / "inventory.json"), "-e",
                                json.dumps({"gpunode_rollout_kubeconfig": str(kubeconfig),
                                            "gpunode_rollout_drain_timeout": timeout,
                                            "gpunode_rollout_drain_retry_delay": 1}), check=False)
    finally:
        standin.terminate()
        standin.wait(timeout=30)
    return done, json.loads(record.read_text())["events"]


@pytest.mark.controller(reason="runs ansible-playbook")
def test_an_eviction_a_disruption_budget_refuses_is_tried_again_until_it_is_allowed(tmp_path):
    done, events = _drain(tmp_path, refusals=1, timeout=20)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert events == ["cordon", "pdb refuses default/gpu-work", "evict default/gpu-work"]


@pytest.mark.controller(reason="runs ansible-playbook")
def test_a_budget_that_refuses_to_the_end_fails_the_drain_naming_it_and_the_node_stays_cordoned(tmp_path):
    done, events = _drain(tmp_path, refusals=-1, timeout=2)
    assert done.returncode == 2
    assert "disruption budget" in done.stdout and "FAILED - RETRYING" in done.stdout
    assert events.count("pdb refuses default/gpu-work") == 3  # the first try and 2 more (2 s, 1 s apart)
    assert events[0] == "cordon" and "uncordon" not in events and "evict default/gpu-work" not in events
