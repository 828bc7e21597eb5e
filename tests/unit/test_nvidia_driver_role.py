"""roles/nvidia_driver: the arguments it passes its state module are the module's options (the EL
repository settings included); its defaults against its argument specs: test_role_interfaces.py."""

import pathlib

import yaml
from ansible.module_utils.gpunode.driver.state_call import ARGUMENT_SPEC

ROLE = pathlib.Path(__file__).resolve().parents[2] / "roles" / "nvidia_driver"


def role_yaml(path):
    return yaml.safe_load((ROLE / path).read_text())


def test_the_role_passes_the_el_repository_settings_and_the_fabric_to_its_state_module():
    arguments = role_yaml("vars/main.yml")["__nvidia_driver_args"]
    for option in ("rpm_repository", "rpm_key_url", "fabric"):
        assert option in ARGUMENT_SPEC
        assert f"'{option}': nvidia_driver_{option}," in arguments
