# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every role's interface: each default in defaults/main.yml is declared in meta/argument_specs.yml with
the same value, a description, a name that starts with the role's, and (with choices) a value among
them, so that a wrong variable fails before anything runs (DESIGN.md) and ansible-doc tells the truth.
One test over roles/*: a new role is covered without a copy of it."""

import pathlib

import pytest
import yaml

ROLES = pathlib.Path(__file__).resolve().parents[2] / "roles"
NAMES = sorted(path.parent.parent.name for path in ROLES.glob("*/meta/argument_specs.yml"))


def role_yaml(role, path):
    return yaml.safe_load((ROLES / role / path).read_text()) or {}


def test_every_role_has_an_argument_spec():
    assert sorted(path.name for path in ROLES.iterdir() if (path / "tasks").is_dir()) == NAMES


def declared(role):
    """The options of every entry point of ``role`` (main, and e.g. gpushare_scheduler's rke_admin)."""
    options = {}
    for entry in role_yaml(role, "meta/argument_specs.yml")["argument_specs"].values():
        options.update(entry.get("options") or {})
    return options


@pytest.mark.parametrize("role", NAMES)
def test_every_default_is_declared_in_argument_specs_with_the_same_value(role):
    defaults = role_yaml(role, "defaults/main.yml")
    options = declared(role)
    assert set(defaults) <= set(options), f"undeclared defaults: {sorted(set(defaults) - set(options))}"
    for name, option in options.items():
        assert name.startswith(f"{role}_"), name
        assert option.get("description"), name
    for name, value in defaults.items():
        if isinstance(value, str) and "{{" in value:
            continue  # a default that follows another role's variable
        if options[name].get("required"):
            continue  # an entry point that needs it given (gpushare_scheduler's rke_admin), so no default
        assert options[name].get("default") == value, name
        choices = options[name].get("choices")
        if choices is not None:  # a list's choices are its elements'
            assert set(value) <= set(choices) if isinstance(value, list) else value in choices, name
