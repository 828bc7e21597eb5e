"""roles/nvidia_driver: its defaults are its argument specs, and the arguments it passes its
state module are the module's options (the EL repository settings included)."""

import pathlib

import yaml
from ansible.module_utils.gpunode.driver.state_call import ARGUMENT_SPEC

ROLE = pathlib.Path(__file__).resolve().parents[2] / "roles" / "nvidia_driver"


def role_yaml(path):
    return yaml.safe_load((ROLE / path).read_text())


def test_every_default_is_declared_in_argument_specs_with_the_same_value():
    defaults = role_yaml("defaults/main.yml")
    options = role_yaml("meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    assert set(defaults) <= set(options)
    for name, value in defaults.items():
        if isinstance(value, str) and "{{" in value:
            continue  # a default that follows another role's variable
        assert options[name].get("default") == value, name
        assert options[name].get("description"), name


def test_the_role_passes_the_el_repository_settings_to_its_state_module():
    arguments = role_yaml("vars/main.yml")["__nvidia_driver_args"]
    for option in ("rpm_repository", "rpm_key_url"):
        assert option in ARGUMENT_SPEC
        assert f"'{option}': nvidia_driver_{option}," in arguments
