"""roles/nvidia_driver: the arguments it passes its state module are the module's options (the EL
repository settings included); its defaults against its argument specs: test_role_interfaces.py."""

import json
import pathlib
import sys

import pytest
import yaml
from ansible.module_utils.gpunode.driver.state_call import ARGUMENT_SPEC
from playbook_run import ansible_playbook

ROLE = pathlib.Path(__file__).resolve().parents[2] / "roles" / "nvidia_driver"


def role_yaml(path):
    return yaml.safe_load((ROLE / path).read_text())


def test_the_role_passes_the_el_repository_settings_and_the_fabric_to_its_state_module():
    arguments = role_yaml("vars/main.yml")["__nvidia_driver_args"]
    for option in ("rpm_repository", "rpm_key_url", "fabric"):
        assert option in ARGUMENT_SPEC
        assert f"'{option}': nvidia_driver_{option}," in arguments


@pytest.mark.controller(reason="runs ansible-playbook over the role's vars")
def test_imex_nodes_are_the_groups_hosts_in_order_by_imex_address_else_ansible_host(tmp_path):
    """nvidia_driver_imex_nodes_group's hosts as the module's imex_nodes: the role only gathers them from
    hostvars (the module checks that each is an IP address); a host without the group gets none."""
    inventory = tmp_path / "inventory.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(yaml.safe_dump({"all": {"vars": local, "children": {"rack1": {
        "hosts": {"tray1": {"ansible_host": "10.0.0.11", "nvidia_driver_imex_address": "192.168.1.1"},
                  "tray2": {"ansible_host": "10.0.0.12"}, "10.0.0.13": {}}}}}}, sort_keys=False))
    playbook = tmp_path / "nodes.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "tray2", "gather_facts": False, "vars": {"nvidia_driver_imex_nodes_group": group}, "tasks": [
            {"ansible.builtin.include_vars": str(ROLE / "vars" / "main.yml")},
            {"ansible.builtin.copy": {"content": "{{ __nvidia_driver_imex_nodes | to_json }}",
                                      "dest": str(tmp_path / f"{group or 'none'}.json"), "mode": "0600"}}]}
        for group in ("", "rack1")]))
    ansible_playbook(playbook, inventory)
    assert json.loads((tmp_path / "none.json").read_text()) == []
    assert json.loads((tmp_path / "rack1.json").read_text()) == ["192.168.1.1", "10.0.0.12", "10.0.0.13"]
