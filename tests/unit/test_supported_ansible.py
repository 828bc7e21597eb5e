# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The supported ansible-core range is declared the same way everywhere.

The range's ends are the pins CI tests (.ci/run): requirements.txt (.venv, the
oldest) and requirements-newest.txt (.venv-newest, the newest). Every role's
min_ansible_version, the collection's requires_ansible and the README follow them.
"""

import re

import pytest
import yaml
from conftest import ROOT

ROLES = sorted(path.parent.parent for path in (ROOT / "roles").glob("*/meta/main.yml"))


def pinned_core(name):
    """(major, minor, patch) of the ansible-core== pin in a requirements file."""
    text = (ROOT / name).read_text(encoding="utf-8")
    pins = re.findall(r"^ansible-core==(\d+)\.(\d+)\.(\d+)\s*$", text, re.MULTILINE)
    assert len(pins) == 1, f"{name}: one exact ansible-core== pin expected, found {pins}"
    return tuple(int(part) for part in pins[0])


OLDEST = pinned_core("requirements.txt")
NEWEST = pinned_core("requirements-newest.txt")


def minor(version):
    return f"{version[0]}.{version[1]}"


def test_the_range_has_two_ends():
    assert OLDEST[:2] < NEWEST[:2]


@pytest.mark.parametrize("role", ROLES, ids=lambda path: path.name)
def test_every_role_needs_the_oldest(role):
    meta = yaml.safe_load((role / "meta" / "main.yml").read_text(encoding="utf-8"))
    assert meta["galaxy_info"]["min_ansible_version"] == minor(OLDEST), role / "meta" / "main.yml"


def test_the_roles_use_nothing_older_ansible_core_lacks():
    """meta: end_role (ansible-core 2.18) is one reason the range starts where it does."""
    uses_end_role = any("end_role" in path.read_text(encoding="utf-8")
                        for path in (ROOT / "roles").glob("*/tasks/*.yml"))
    assert not uses_end_role or OLDEST[:2] >= (2, 18)


def test_the_collection_requires_the_range():
    runtime = yaml.safe_load((ROOT / "collection" / "meta" / "runtime.yml").read_text(encoding="utf-8"))
    after = f"{NEWEST[0]}.{NEWEST[1] + 1}"
    assert runtime["requires_ansible"] == f">={minor(OLDEST)}.0,<{after}"


def test_the_readme_states_the_range():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stated = f"ansible-core {minor(OLDEST)} to {minor(NEWEST)}"
    assert stated in readme
    tested = f"{'.'.join(map(str, OLDEST))} and {'.'.join(map(str, NEWEST))}"
    assert tested in readme
