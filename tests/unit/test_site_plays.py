"""site.yml's plays on a converged fleet (docs/DEVELOPING.md, "Roles: the converged path costs one call"):
ansible-playbook parses every play at each start, the static parts of a play without hosts included, so
the plays after the one read (playbooks/node_state.yml) read their roles and node tasks only when a host
reaches them."""

import pytest
import yaml
from conftest import ROOT
from playbook_run import ansible_playbook

STATIC = ("import_role", "import_tasks", "ansible.builtin.import_role", "ansible.builtin.import_tasks")


def _plays():
    for entry in yaml.safe_load((ROOT / "site.yml").read_text()):
        path = ROOT / entry["ansible.builtin.import_playbook"]
        for play in yaml.safe_load(path.read_text()):
            yield path.name, play


def _tasks(tasks):
    for task in tasks or []:
        yield task
        for section in ("block", "rescue", "always"):
            yield from _tasks(task.get(section))


def test_the_plays_after_the_one_read_parse_no_role_and_no_task_file_before_a_host_reaches_them():
    after_the_read = [(name, play) for name, play in _plays() if name != "node_state.yml"]
    assert len(after_the_read) >= 13
    for name, play in after_the_read:
        assert "roles" not in play, (name, play["name"])
        static = [task["name"] for task in _tasks(play.get("tasks")) if set(task) & set(STATIC)]
        assert static == [], (name, play["name"])


def test_a_node_roles_include_runs_its_argument_validation_under_any_tags():
    for name, play in _plays():
        for task in _tasks(play.get("tasks")):
            include = task.get("ansible.builtin.include_role")
            if include and name in ("driver.yml", "mig.yml", "container_runtime.yml", "kubelet.yml",
                                    "validate.yml", "control_plane.yml"):
                assert task.get("tags") == ["always"], (name, task["name"])


@pytest.mark.controller(reason="runs ansible-playbook")
def test_a_converged_host_leaves_the_refusal_play_at_a_meta_task_and_a_refused_one_fails(tmp_path):
    """playbooks/node_state.yml's second play: no worker process for a host with nothing to refuse."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"gpu_nodes": {"hosts": {
        "gpu-01": {"ansible_connection": "local", "gpunode_node_state": {"refusal": None}},
        "gpu-02": {"ansible_connection": "local", "gpunode_node_state": {"refusal": "REFUSED-gpu-02"}},
    }}}}}))
    refusal_play = yaml.safe_load((ROOT / "playbooks" / "node_state.yml").read_text())[1]
    playbook = tmp_path / "site.yml"
    playbook.write_text(yaml.safe_dump([refusal_play]))
    done = ansible_playbook(playbook, inventory, check=False)
    assert done.returncode == 2, done.stdout[-3000:]
    assert "REFUSED-gpu-02" in done.stdout
    recap = {line.split()[0]: line for line in done.stdout.splitlines() if " : ok=" in line}
    assert "failed=1" in recap["gpu-02"]
    # ended at the meta task: no task ran for them, none was skipped, none failed
    assert "gpu-01" not in recap and "localhost" not in recap, done.stdout[-3000:]
