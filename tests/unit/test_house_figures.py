"""scripts/house_figures.py: the code lines, statements and module options `make lint` prints."""

import pytest
from conftest import ROOT, load_file

pytestmark = pytest.mark.controller(reason="a project check run by make lint on the controller")

MODULE = '''#!/usr/bin/python
"""A module: its docstring is no code."""

DOCUMENTATION = r"""
module: m
options:
  name: {type: str}
  path: {type: path}
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - node_lock
"""

# a comment is no code
def run(
    value,
):
    """Nor is a function's docstring."""
    total = value + 1; return total
'''

FRAGMENT = '''class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  lock_timeout: {type: int}
  name: {type: str}
"""
'''


@pytest.fixture(scope="module")
def house():
    return load_file(ROOT / "scripts" / "house_figures.py", "house_figures")


def test_code_lines_leave_out_docs_and_comments_statements_count_what_a_line_joins(house):
    # code lines: `def run(`, `value,`, `):`, `total = ...`; statements: def, two in one line
    assert house.file_figures(MODULE) == (4, 3)


def test_a_module_counts_its_own_options_and_its_gpunode_fragments_once(house, tmp_path):
    (tmp_path / "library").mkdir()
    (tmp_path / "doc_fragments").mkdir()
    (tmp_path / "library" / "m.py").write_text(MODULE)
    (tmp_path / "doc_fragments" / "node_lock.py").write_text(FRAGMENT)
    found = house.figures(tmp_path)
    assert found["module options"] == 3  # name, path, lock_timeout: name counted once
    assert found["code lines"] == 4
    assert found["per package"] == {"library": 4}


def test_it_prints_the_figures_of_the_repository(house, capsys):
    assert house.main([]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("house: ") and line.endswith(" public module options")
