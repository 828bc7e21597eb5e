"""scripts/check_boilerplate.py: what the collection's sanity tests need of a module, in the sources.

Controller-side: the checker merges documentation fragments with ansible-core's controller.
"""

import ast
import functools
import sys

import pytest
from conftest import ROOT, load_file

pytestmark = pytest.mark.controller(reason="merges doc fragments with ansible-core's controller")

# A module as today's are: no licence header, imports first, author without a handle,
# attributes without descriptions.
BEFORE = '''#!/usr/bin/python
"""Ansible module example."""

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
---
module: example
short_description: An example
description:
  - Does nothing.
options: {}
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
author: gpunode
"""

EXAMPLES = r"""
- name: Example
  example:
"""

RETURN = r"""
"""


def main():
    AnsibleModule(argument_spec={}, supports_check_mode=True).exit_json()
'''

# The same module as docs/COLLECTION.md says it should be.
AFTER = '''#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module example."""

DOCUMENTATION = r"""
---
module: example
short_description: An example
description:
  - Does nothing.
options: {}
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  platform:
    platforms: posix
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Example
  example:
"""

RETURN = r"""
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    AnsibleModule(argument_spec={}, supports_check_mode=True).exit_json()
'''


@functools.lru_cache(maxsize=None)
def load_checker():
    sys.path.insert(0, str(ROOT / "scripts"))  # it imports build_collection from beside it
    module = load_file(ROOT / "scripts" / "check_boilerplate.py", "check_boilerplate")
    module.init_plugin_loader()  # as its main() does: fragments such as ansible.builtin.files resolve
    return module


def problems(tmp_path, text, name="example.py"):
    checker = load_checker()
    path = tmp_path / name
    path.write_text(text)
    found = checker.check_header(path, text) + checker.check_module(path, text, ast.parse(text))
    return [line.split(": ", 2)[1] for line in found], found


def test_a_module_as_today_gets_every_fix_named(tmp_path):
    kinds, lines = problems(tmp_path, BEFORE)
    assert sorted(kinds) == sorted(["licence-header", "imports-after-docs", "author",
                                    "attribute-description", "attribute-description",
                                    "attribute-description"])
    assert any("move the imports of lines 4-4 below RETURN" in line for line in lines)
    assert any("attribute facts has no description: add ansible.builtin.action_common_attributes.facts"
               in line for line in lines)


def test_the_module_as_docs_collection_md_shows_passes(tmp_path):
    assert problems(tmp_path, AFTER) == ([], [])


def test_documentation_that_is_not_yaml_is_named_with_its_line(tmp_path):
    # verified_restart's mistake: ": " inside a plain scalar that goes on over lines
    broken = AFTER.replace("  - Does nothing.", "  - Does nothing, and asked to\n    do something: nothing")
    kinds, lines = problems(tmp_path, broken)
    assert kinds == ["doc-yaml"]
    assert "example.py:13: doc-yaml: DOCUMENTATION is not valid YAML" in lines[0]  # the "do something" line


def test_filters_need_a_yaml_document_each(tmp_path, monkeypatch):
    checker = load_checker()
    monkeypatch.setattr(checker, "ROOT", tmp_path)
    (tmp_path / "filter_plugins").mkdir()
    plugin = tmp_path / "filter_plugins" / "things.py"
    plugin.write_text("class FilterModule:\n    def filters(self):\n        return {'a': len, 'b': str}\n")
    (tmp_path / "filter_plugins" / "a.yml").write_text("DOCUMENTATION:\n  name: a\n")
    (tmp_path / "filter_plugins" / "b.yml").write_text("DOCUMENTATION:\n  name: c\n")
    found = checker.check_filters(plugin.relative_to(tmp_path), {"a", "b"})
    assert found == ["filter_plugins/b.yml:1: filter-docs: DOCUMENTATION.name must be 'b', not 'c'"]
    (tmp_path / "filter_plugins" / "b.yml").unlink()
    found = checker.check_filters(plugin.relative_to(tmp_path), {"a", "b"})
    assert len(found) == 1 and "filter b is undocumented: add filter_plugins/b.yml" in found[0]
