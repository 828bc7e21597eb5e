"""scripts/build_collection.py: the Galaxy collection built from the playbook project.

Controller-side: the build needs ansible-core's controller, PyYAML and Jinja2,
so the script is loaded inside the tests, never at import.
"""

import ast
import functools
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest
import yaml
from conftest import ROOT, load_file

pytestmark = pytest.mark.controller(reason="the build runs on the controller (ansible-core, Jinja2)")

PREFIX = "gpunode.gpunode."


@functools.lru_cache(maxsize=None)
def load_build_collection():
    return load_file(ROOT / "scripts" / "build_collection.py", "build_collection")


@pytest.fixture(name="bc")
def fixture_bc():
    return load_build_collection()


def content():
    bc = load_build_collection()
    own = bc.Content("gpunode", "gpunode")
    own.modules = {"docker_daemon_config", "nvidia_gpu_facts", "gpu_addons_manifest_files"}
    own.module_utils = {"json_config", "text_file", "nvidia_branches"}
    own.roles = {"nvidia_driver", "kubelet_gpu"}
    own.playbooks = {pathlib.PurePosixPath("playbooks/driver.yml"): "driver",
                     pathlib.PurePosixPath("site.yml"): "site"}
    own.filters = {"gpu_addons_api", "gpu_addons_manifest_files"}
    own.tests = {"gpu_ready"}
    own.lookups = {"gpu_lookup"}
    return own


def rewrite_yaml(text, kind="tasks", source="roles/r/tasks/main.yml"):
    bc = load_build_collection()
    text = textwrap.dedent(text)
    return bc.YamlRewrite(text, source, content(), source=pathlib.PurePosixPath(source)).run(kind)


# --- YAML: what is rewritten, what is kept -----------------------------------


def test_task_actions_become_fqcns_and_the_rest_of_the_text_stays():
    source = """\
    ---
    # a comment that stays
    - name: Merge   # trailing comment
      docker_daemon_config:
        settings: {default-runtime: nvidia}   # flow mapping kept
      register: docker_daemon_config

    - name: A block
      block:
        - name: Inner
          nvidia_gpu_facts:
      rescue:
        - name: Rescue
          ansible.builtin.debug:
            msg: docker_daemon_config is a word here
    """
    expected = source.replace("  docker_daemon_config:\n", f"  {PREFIX}docker_daemon_config:\n").replace(
        "  nvidia_gpu_facts:\n", f"  {PREFIX}nvidia_gpu_facts:\n"
    )
    assert rewrite_yaml(source) == textwrap.dedent(expected)


def test_module_defaults_action_and_local_action():
    out = rewrite_yaml("""\
    - name: Defaults
      module_defaults:
        docker_daemon_config: {backup: true}
        ansible.builtin.file: {mode: "0644"}
      block:
        - name: A
          action: docker_daemon_config path=/tmp/x
        - name: B
          local_action:
            module: nvidia_gpu_facts
    """)
    data = yaml.safe_load(out)
    assert list(data[0]["module_defaults"]) == [f"{PREFIX}docker_daemon_config", "ansible.builtin.file"]
    assert data[0]["block"][0]["action"] == f"{PREFIX}docker_daemon_config path=/tmp/x"
    assert data[0]["block"][1]["local_action"]["module"] == f"{PREFIX}nvidia_gpu_facts"


@pytest.mark.parametrize(
    "written, expected",
    [
        ("name: kubelet_gpu", f"name: {PREFIX}kubelet_gpu"),
        ('name: "kubelet_gpu"', f'name: "{PREFIX}kubelet_gpu"'),
        ("name: 'kubelet_gpu'", f"name: '{PREFIX}kubelet_gpu'"),
        ("name: community.general.other", "name: community.general.other"),
        ("name: kubelet_gpu_extra", "name: kubelet_gpu_extra"),
    ],
)
def test_include_role_names(written, expected):
    out = rewrite_yaml(f"""\
    - name: Include
      ansible.builtin.include_role:
        {written}
        tasks_from: rke_admin
    """)
    assert f"    {expected}\n" in out
    assert "tasks_from: rke_admin" in out


def test_play_roles_playbook_imports_and_role_dependencies():
    out = rewrite_yaml("""\
    - name: Driver
      ansible.builtin.import_playbook: playbooks/driver.yml
    - name: Nodes
      hosts: gpu_nodes
      roles:
        - nvidia_driver
        - role: kubelet_gpu
          vars: {kubelet_gpu_x: 1}
        - {name: nvidia_driver}
      tasks:
        - name: Facts
          nvidia_gpu_facts:
    """, kind="playbook", source="site.yml")
    plays = yaml.safe_load(out)
    assert plays[0]["ansible.builtin.import_playbook"] == f"{PREFIX}driver"
    assert plays[1]["roles"] == [
        f"{PREFIX}nvidia_driver",
        {"role": f"{PREFIX}kubelet_gpu", "vars": {"kubelet_gpu_x": 1}},
        {"name": f"{PREFIX}nvidia_driver"},
    ]
    assert list(plays[1]["tasks"][0]) == ["name", f"{PREFIX}nvidia_gpu_facts"]
    meta = rewrite_yaml("---\ngalaxy_info: {}\ndependencies:\n  - role: nvidia_driver\n", kind="role-meta")
    assert yaml.safe_load(meta)["dependencies"] == [{"role": f"{PREFIX}nvidia_driver"}]


def test_import_playbook_relative_to_the_importing_file():
    out = rewrite_yaml("- name: Other\n  ansible.builtin.import_playbook: driver.yml\n",
                       kind="playbook", source="playbooks/upgrade.yml")
    assert yaml.safe_load(out)[0]["ansible.builtin.import_playbook"] == f"{PREFIX}driver"


def test_import_of_a_playbook_outside_the_project_fails_with_file_and_line(bc):
    with pytest.raises(bc.BuildError, match=r"^site\.yml:2: import_playbook 'elsewhere/x\.yml'"):
        rewrite_yaml("- name: X\n  ansible.builtin.import_playbook: elsewhere/x.yml\n",
                     kind="playbook", source="site.yml")


@pytest.mark.parametrize(
    "jinja, expected",
    [
        ("{{ v | gpu_addons_api }}", f"{{{{ v | {PREFIX}gpu_addons_api }}}}"),
        ("{{ v|gpu_addons_api(1) }}", f"{{{{ v|{PREFIX}gpu_addons_api(1) }}}}"),
        ("{{ v | map('gpu_addons_api') }}", f"{{{{ v | map('{PREFIX}gpu_addons_api') }}}}"),
        ("{{ v is gpu_ready }}", f"{{{{ v is {PREFIX}gpu_ready }}}}"),
        ("{{ v is not gpu_ready }}", f"{{{{ v is not {PREFIX}gpu_ready }}}}"),
        ("{{ v | select('gpu_ready') }}", f"{{{{ v | select('{PREFIX}gpu_ready') }}}}"),
        ("{{ lookup('gpu_lookup', 'x') }}", f"{{{{ lookup('{PREFIX}gpu_lookup', 'x') }}}}"),
        ("{{ q(\"gpu_lookup\") }}", f"{{{{ q(\"{PREFIX}gpu_lookup\") }}}}"),
        # not ours, or already qualified, or not a filter position: unchanged
        ("{{ v | gpu_addons_api_v2 }}", "{{ v | gpu_addons_api_v2 }}"),
        ("{{ v | other.coll.gpu_addons_api }}", "{{ v | other.coll.gpu_addons_api }}"),
        ("{{ gpu_addons_api }}", "{{ gpu_addons_api }}"),
        ("{{ v.gpu_addons_api }}", "{{ v.gpu_addons_api }}"),
    ],
)
def test_project_filters_tests_and_lookups_in_jinja(jinja, expected):
    assert content().rewrite_jinja(jinja) == expected


def test_jinja_in_every_scalar_style_is_rewritten_and_verified():
    out = rewrite_yaml("""\
    - name: Styles
      ansible.builtin.set_fact:
        plain: "{{ a | gpu_addons_api }}"
        single: '{{ a | gpu_addons_api }}'
        folded: >-
          {{ a
             | gpu_addons_api }}
        literal: |
          {{ a | gpu_addons_manifest_files(b) }}
      when: a | gpu_addons_api
      gpu_addons_manifest_files: not a key we touch as a filter
    """)
    facts = yaml.safe_load(out)[0]["ansible.builtin.set_fact"]
    assert facts["plain"] == facts["single"] == f"{{{{ a | {PREFIX}gpu_addons_api }}}}"
    assert facts["folded"] == f"{{{{ a\n   | {PREFIX}gpu_addons_api }}}}"  # more-indented: kept
    assert facts["literal"] == f"{{{{ a | {PREFIX}gpu_addons_manifest_files(b) }}}}\n"
    assert yaml.safe_load(out)[0]["when"] == f"a | {PREFIX}gpu_addons_api"


def test_a_rewrite_the_parser_disagrees_with_fails_instead_of_writing_it(bc):
    # "\x7c" is "|" once parsed: the value has a filter that the source text does not show,
    # so the rewritten text would not mean what was intended.
    with pytest.raises(bc.BuildError, match=r"roles/r/tasks/main\.yml:3: the rewrite made"):
        rewrite_yaml('- name: Escaped\n  ansible.builtin.debug:\n    msg: "{{ a \\x7c gpu_addons_api }}"\n')


def test_ansible_tags_are_kept():
    out = rewrite_yaml("- name: Unsafe\n  docker_daemon_config:\n    settings: !unsafe '{{ raw }}'\n")
    assert out == f"- name: Unsafe\n  {PREFIX}docker_daemon_config:\n    settings: !unsafe '{{{{ raw }}}}'\n"


# --- Python ----------------------------------------------------------------------


def rewrite_python(text, is_module=True):
    bc = load_build_collection()
    return bc.PythonRewrite(textwrap.dedent(text), "library/m.py", content(), is_module).run()


def test_imports_of_project_module_utils_point_into_the_collection():
    out = rewrite_python('''\
    #!/usr/bin/python
    # Ünïcode before the imports shifts byte offsets: "é"
    """Doc."""
    from ansible.module_utils.basic import AnsibleModule
    from ansible.module_utils.json_config import (  # comment kept
        JSONConfigError,
        plan,
    )
    from ansible.module_utils import nvidia_branches
    try:
        from ansible.module_utils.text_file import read_text as read_file_text
    except ImportError:
        read_file_text = None
    ''')
    package = "ansible_collections.gpunode.gpunode.plugins.module_utils"
    assert "from ansible.module_utils.basic import AnsibleModule\n" in out
    assert f"from {package}.json_config import (  # comment kept\n    JSONConfigError,\n" in out
    assert f"from {package} import nvidia_branches\n" in out
    assert f"    from {package}.text_file import read_text as read_file_text\n" in out
    assert '# Ünïcode before the imports shifts byte offsets: "é"' in out


@pytest.mark.parametrize(
    "statement, message",
    [
        ("import ansible.module_utils.json_config\n", "write 'from ansible.module_utils.json_config import"),
        ("from ansible.module_utils import basic, json_config\n", "in separate statements"),
    ],
)
def test_import_forms_the_build_cannot_rewrite_fail(bc, statement, message):
    with pytest.raises(bc.BuildError, match=re.escape(message)):
        rewrite_python(statement)


def test_module_examples_use_fqcns():
    out = rewrite_python('''\
    DOCUMENTATION = r"""
    module: docker_daemon_config
    """
    EXAMPLES = r"""
    - name: Merge
      docker_daemon_config:
        settings: {a: 1}
    """
    ''')
    examples = ast.literal_eval(out.split("EXAMPLES = ", 1)[1])
    assert yaml.safe_load(examples)[0][f"{PREFIX}docker_daemon_config"] == {"settings": {"a": 1}}
    assert "module: docker_daemon_config\n" in out


def test_filter_names_are_read_without_importing_the_plugin(bc, tmp_path):
    plugin = tmp_path / "f.py"
    plugin.write_text("raise SystemExit('not imported')\nclass FilterModule:\n"
                      "    def filters(self):\n        return {'a': len, 'b': str}\n")
    assert bc.plugin_names_from_class(plugin, "FilterModule", "filters") == {"a", "b"}
    plugin.write_text("class FilterModule:\n    def filters(self):\n        return dict(a=len)\n")
    with pytest.raises(bc.BuildError, match="one dict literal"):
        bc.plugin_names_from_class(plugin, "FilterModule", "filters")


# --- Filter documentation: the form the build and ansible-doc need --------------------

FILTER_PLUGIN = """\
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
\"\"\"Filters of an example project.\"\"\"


def kube_minor(version):
    return ".".join(str(version).lstrip("v").split(".")[:2])


class FilterModule:
    def filters(self):
        return {"example_kube_minor": kube_minor}
"""

# One YAML file per filter, named after the filter, beside the plugin: the form
# docs/COLLECTION.md describes (ansible-core documents its own filters so).
FILTER_DOC = """\
---
DOCUMENTATION:
  name: example_kube_minor
  version_added: "1.0.0"
  short_description: The MAJOR.MINOR of a Kubernetes version
  description:
    - Returns C(MAJOR.MINOR) of a version such as C(v1.29.3+rke2r1).
  positional: _input
  options:
    _input:
      description: The version.
      type: str
      required: true
  author:
    - gpunode maintainers (@gpunode)

EXAMPLES: |
  # "1.29"
  minor: "{{ 'v1.29.3+rke2r1' | example_kube_minor }}"

RETURN:
  _value:
    description: C(MAJOR.MINOR).
    type: str
    sample: "1.29"
"""


def test_a_filter_documented_by_a_yaml_file_beside_it_is_documented_in_the_collection(bc, tmp_path):
    project = tmp_path / "project"
    (project / "collection").mkdir(parents=True)
    (project / "collection" / "galaxy.yml").write_text(
        "namespace: example\nname: docs\nversion: 1.0.0\nreadme: README.md\nauthors: [x]\n")
    (project / "filter_plugins").mkdir()
    (project / "filter_plugins" / "example_filters.py").write_text(FILTER_PLUGIN)
    (project / "filter_plugins" / "example_kube_minor.yml").write_text(FILTER_DOC)
    target, _ = bc.build_tree(project, tmp_path / "tree")
    built_doc = yaml.safe_load((target / "plugins" / "filter" / "example_kube_minor.yml").read_text())
    assert "'v1.29.3+rke2r1' | example.docs.example_kube_minor" in built_doc["EXAMPLES"]
    (tmp_path / "ansible.cfg").write_text("")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "tree"),
               ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"),
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])

    def ansible_doc(*args):
        return subprocess.run(["ansible-doc", "-t", "filter", *args], env=env, cwd=tmp_path,
                              capture_output=True, text=True, check=True).stdout

    listing = ansible_doc("-l", "example.docs")
    assert re.search(r"^example\.docs\.example_kube_minor +The MAJOR\.MINOR of a Kubernetes", listing, re.M)
    assert "UNDOCUMENTED" not in listing
    shown = ansible_doc("example.docs.example_kube_minor")
    assert "Returns `MAJOR.MINOR' of a version such as `v1.29.3+rke2r1'." in shown
    assert "minor: \"{{ 'v1.29.3+rke2r1' | example.docs.example_kube_minor }}\"" in shown


# --- The project itself ---------------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    target, galaxy = load_build_collection().build_tree(ROOT, tmp_path_factory.mktemp("collection"))
    return target, galaxy


def test_the_project_builds_into_the_collection_layout(built):
    target, galaxy = built
    assert target.parts[-3:] == ("ansible_collections", galaxy["namespace"], galaxy["name"])
    sources = {p.stem for pattern in ("library/*.py", "roles/*/library/*.py") for p in ROOT.glob(pattern)}
    assert {p.stem for p in (target / "plugins" / "modules").glob("*.py")} == sources
    assert {p.name for p in (target / "plugins" / "module_utils").glob("*.py")} == {
        p.name for p in ROOT.glob("module_utils/*.py")
    }
    assert {p.name for p in (target / "roles").iterdir()} == {p.name for p in (ROOT / "roles").iterdir()}
    assert not [*(target / "roles").glob("*/library"), *(target / "roles").glob("*/filter_plugins")]
    assert (target / "playbooks" / "site.yml").is_file()
    for name in ("galaxy.yml", "meta/runtime.yml", "LICENSE", "README.md"):
        assert (target / name).is_file(), name


def test_no_plugin_imports_project_module_utils_through_ansible_module_utils(built):
    target, _ = built
    own = {p.stem for p in ROOT.glob("module_utils/*.py")}
    for path in (target / "plugins").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ansible.module_utils"):
                parts = node.module.split(".")
                assert len(parts) == 2 or parts[2] not in own, f"{path}: {node.module}"
                assert len(parts) > 2 or not {a.name for a in node.names} & own, f"{path}: {node.module}"


def _task_actions(tasks):
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        for key, value in task.items():
            if key in ("block", "rescue", "always"):
                yield from _task_actions(value)
            elif key not in load_build_collection().TASK_KEYWORDS and not key.startswith("with_"):
                yield key


def test_every_task_action_of_the_built_roles_and_playbooks_is_an_fqcn(built):
    target, _ = built
    actions = []
    for path in [*target.glob("roles/*/tasks/*.yml"), *target.glob("roles/*/handlers/*.yml")]:
        actions.extend(_task_actions(yaml.safe_load(path.read_text(encoding="utf-8"))))
    for path in target.glob("playbooks/*.yml"):
        for play in yaml.safe_load(path.read_text(encoding="utf-8")):
            actions.extend(_task_actions([play]) if "hosts" not in play else [])
            for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                actions.extend(_task_actions(play.get(section)))
            for role in play.get("roles") or []:
                name = role if isinstance(role, str) else role.get("role") or role.get("name")
                assert name.startswith(PREFIX), f"{path}: role {name}"
    assert actions
    assert [a for a in actions if not re.match(r"^[a-z0-9_]+\.[a-z0-9_]+\.[a-z0-9_]+$", a)] == []


def test_built_yaml_differs_from_the_source_only_in_lines_with_fqcns(built):
    target, _ = built
    compared = 0
    for source in ROOT.glob("roles/*/tasks/*.yml"):
        built_file = target / source.relative_to(ROOT)
        old = source.read_text(encoding="utf-8").split("\n")
        new = built_file.read_text(encoding="utf-8").split("\n")
        assert len(old) == len(new), source
        for before, after in zip(old, new):
            assert before == after or PREFIX in after, f"{source}: {before!r} -> {after!r}"
        compared += 1
    assert compared
