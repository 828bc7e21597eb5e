"""scripts/build_collection.py: the Galaxy collection built from the playbook project.

Controller-side: the build needs ansible-core's controller, PyYAML and Jinja2,
so the script is loaded inside the tests, never at import.
"""

import ast
import functools
import json
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
    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))  # it imports collection_names from beside it
    return load_file(ROOT / "scripts" / "build_collection.py", "build_collection")


@pytest.fixture(name="bc")
def fixture_bc():
    return load_build_collection()


GALAXY = {"namespace": "gpunode", "name": "gpunode", "version": "1.0.0",
          "dependencies": {"kubernetes.core": ">=6.2.0"}}
PROJECT_FILES = {
    "library/docker_daemon_config.py": "",
    "library/nvidia_gpu_facts.py": "",
    "roles/r/library/manifest_files.py": "",
    "module_utils/gpunode/__init__.py": "",
    "module_utils/gpunode/host/files.py": "",
    "filter_plugins/addons.py": "class FilterModule:\n    def filters(self):\n"
                                "        return {'gpu_addons_api': 1, 'gpu_addons_manifest_files': 2}\n",
    "test_plugins/ready.py": "class TestModule:\n    def tests(self):\n        return {'gpu_ready': 1}\n",
    "lookup_plugins/gpu_lookup.py": "",
    "doc_fragments/node_lock.py": "",
    "site.yml": "",
    "playbooks/driver.yml": "",
    "collection/galaxy.yml": yaml.safe_dump(GALAXY),
}


@pytest.fixture(name="own", scope="module")
def fixture_own(tmp_path_factory):
    """The names of a small project: modules, a module_utils package, Jinja plugins, playbooks."""
    bc = load_build_collection()
    root = tmp_path_factory.mktemp("project")
    for rel, text in PROJECT_FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return bc.Project(root, bc.plan_layout(root, bc.project_files(root)), GALAXY)


def test_the_project_names_are_read_from_the_tree(own):
    assert own.modules == {"docker_daemon_config", "nvidia_gpu_facts", "manifest_files"}
    assert own.module_utils == {"gpunode"}
    assert own.doc_fragments == {"node_lock"}
    assert own.playbooks == {pathlib.PurePosixPath("site.yml"): "site",
                             pathlib.PurePosixPath("playbooks/driver.yml"): "driver"}
    assert own.collections == {"ansible.builtin", "gpunode.gpunode", "kubernetes.core"}


def rewrite_yaml(own, text, source="roles/r/tasks/main.yml", **kwargs):
    return load_build_collection().rewrite_yaml(textwrap.dedent(text), source, own, **kwargs)


# --- YAML: what is rewritten, what is kept -----------------------------------


def test_task_actions_keep_their_short_names_module_defaults_keys_get_fqcns(own):
    source = """\
    ---
    # a comment that stays
    - name: Merge   # trailing comment
      docker_daemon_config:
        settings: {default-runtime: nvidia}   # flow mapping kept
      module_defaults:
        docker_daemon_config: {backup: true}
        ansible.builtin.file: {mode: "0644"}
      register: docker_daemon_config
    - name: A block
      module_defaults:
        - nvidia_gpu_facts: {}
      block:
        - name: Inner
          nvidia_gpu_facts:
          vars:
            docker_daemon_config: a variable, kept
    """
    expected = (textwrap.dedent(source)
                .replace("    docker_daemon_config: {backup", f"    {PREFIX}docker_daemon_config: {{backup")
                .replace("- nvidia_gpu_facts: {}", f"- {PREFIX}nvidia_gpu_facts: {{}}"))
    assert rewrite_yaml(own, source) == expected


def test_module_examples_qualify_every_task_action(own):
    out = rewrite_yaml(own, "- name: Merge\n  docker_daemon_config:\n    settings: {a: 1}\n", examples=True)
    assert out == f"- name: Merge\n  {PREFIX}docker_daemon_config:\n    settings: {{a: 1}}\n"


def test_import_playbook_paths_become_the_collection_playbooks(own):
    out = rewrite_yaml(own, """\
    - name: Driver
      ansible.builtin.import_playbook: playbooks/driver.yml
    - name: Already qualified
      ansible.builtin.import_playbook: gpunode.gpunode.driver
    """, source="site.yml", playbook=pathlib.PurePosixPath("site.yml"))
    assert [p["ansible.builtin.import_playbook"] for p in yaml.safe_load(out)] == [f"{PREFIX}driver"] * 2
    out = rewrite_yaml(own, "- name: Other\n  import_playbook: driver.yml\n",
                       playbook=pathlib.PurePosixPath("playbooks/upgrade.yml"))
    assert yaml.safe_load(out)[0]["import_playbook"] == f"{PREFIX}driver"


def test_import_of_a_playbook_outside_the_project_fails_with_file_and_line(bc, own):
    with pytest.raises(bc.BuildError, match=r"^site\.yml:2: import_playbook 'elsewhere/x\.yml'"):
        rewrite_yaml(own, "- name: X\n  ansible.builtin.import_playbook: elsewhere/x.yml\n",
                     source="site.yml", playbook=pathlib.PurePosixPath("site.yml"))


def test_an_action_of_an_undeclared_collection_fails_with_file_and_line(bc, own):
    rewrite_yaml(own, "- name: Declared\n  kubernetes.core.k8s: {}\n")
    message = r"^roles/r/tasks/main\.yml:4: community\.general\.x is from community\.general, which "
    with pytest.raises(bc.BuildError, match=message + r"collection/galaxy\.yml does not list"):
        rewrite_yaml(own, "- name: Ok\n  ansible.builtin.debug: {}\n"
                          "- name: Undeclared\n  community.general.x:\n")


def test_a_module_defaults_key_that_cannot_be_rewritten_in_place_fails(bc, own):
    with pytest.raises(bc.BuildError, match=r"main\.yml:3: cannot rewrite 'nvidia_gpu_facts' in place"):
        rewrite_yaml(own, '- name: X\n  module_defaults:\n    "nvidia_gpu\\x5ffacts": {}\n'
                          '  nvidia_gpu_facts:\n')


@pytest.mark.parametrize(
    "jinja, expected",
    [
        ("{{ v | gpu_addons_api }}", f"{{{{ v | {PREFIX}gpu_addons_api }}}}"),
        ("{{ v|gpu_addons_api(1) }}", f"{{{{ v|{PREFIX}gpu_addons_api(1) }}}}"),
        ("{{ v | map('gpu_addons_api') }}", f"{{{{ v | map('{PREFIX}gpu_addons_api') }}}}"),
        ("{{ v is gpu_ready }}", f"{{{{ v is {PREFIX}gpu_ready }}}}"),
        ("{{ v is not gpu_ready }}", f"{{{{ v is not {PREFIX}gpu_ready }}}}"),
        ("{{ v | select('gpu_ready') }}", f"{{{{ v | select('{PREFIX}gpu_ready') }}}}"),
        ("{{ v | selectattr('a', 'gpu_ready') }}", f"{{{{ v | selectattr('a', '{PREFIX}gpu_ready') }}}}"),
        ("{{ lookup('gpu_lookup', 'x') }}", f"{{{{ lookup('{PREFIX}gpu_lookup', 'x') }}}}"),
        ("{{ q(\"gpu_lookup\") }}", f"{{{{ q(\"{PREFIX}gpu_lookup\") }}}}"),
        # not ours, or already qualified, or not a filter position: unchanged
        ("{{ v | gpu_addons_api_v2 }}", "{{ v | gpu_addons_api_v2 }}"),
        ("{{ v | other.coll.gpu_addons_api }}", "{{ v | other.coll.gpu_addons_api }}"),
        ("{{ gpu_addons_api }}", "{{ gpu_addons_api }}"),
        ("{{ v.gpu_addons_api }}", "{{ v.gpu_addons_api }}"),
    ],
)
def test_project_filters_tests_and_lookups_in_jinja(own, jinja, expected):
    assert own.rewrite_jinja(jinja) == expected


def test_jinja_in_every_scalar_style_is_rewritten_and_verified(own):
    out = rewrite_yaml(own, """\
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


def test_a_rewrite_the_parser_disagrees_with_fails_instead_of_writing_it(bc, own):
    # "\x7c" is "|" once parsed: the value has a filter that the source text does not show,
    # so the rewritten text would not mean what was intended.
    with pytest.raises(bc.BuildError, match=r"roles/r/tasks/main\.yml:3: the rewrite made"):
        rewrite_yaml(own, '- name: Escaped\n  ansible.builtin.debug:\n'
                          '    msg: "{{ a \\x7c gpu_addons_api }}"\n')


def test_ansible_tags_are_kept(own):
    source = ("- name: Unsafe\n  module_defaults:\n    docker_daemon_config:\n"
              "      settings: !unsafe '{{ raw }}'\n")
    expected = source.replace(" docker_daemon_config", f" {PREFIX}docker_daemon_config")
    assert rewrite_yaml(own, source) == expected


# --- Python ----------------------------------------------------------------------


def rewrite_python(own, text, is_module=True):
    return load_build_collection().rewrite_python(textwrap.dedent(text), "library/m.py", own, is_module)


def test_imports_of_project_module_utils_point_into_the_collection(own):
    out = rewrite_python(own, '''\
    #!/usr/bin/python
    # Ünïcode before the imports: "é"
    """Doc."""
    from ansible.module_utils.basic import AnsibleModule
    from ansible.module_utils.gpunode.formats.json_config import (  # comment kept
        JSONConfigError,
        plan,
    )
    from ansible.module_utils.gpunode.formats import values
    try:
        from ansible.module_utils.gpunode.host.files import read_text as read_file_text
    except ImportError:
        read_file_text = None
    ''')
    package = "ansible_collections.gpunode.gpunode.plugins.module_utils.gpunode"
    assert "from ansible.module_utils.basic import AnsibleModule\n" in out
    assert f"from {package}.formats.json_config import (  # comment kept\n    JSONConfigError,\n" in out
    assert f"from {package}.formats import values\n" in out
    assert f"    from {package}.host.files import read_text as read_file_text\n" in out
    assert '# Ünïcode before the imports: "é"' in out


@pytest.mark.parametrize(
    "statement",
    ["import ansible.module_utils.gpunode.formats.json_config\n",
     "from ansible.module_utils import basic, gpunode\n"],
)
def test_import_forms_the_build_cannot_rewrite_fail_with_file_and_line(bc, own, statement):
    message = "library/m.py:2: write 'from ansible.module_utils.gpunode"
    with pytest.raises(bc.BuildError, match=re.escape(message)):
        rewrite_python(own, "import os\n" + statement)


def test_module_examples_use_fqcns(own):
    out = rewrite_python(own, '''\
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


def test_module_documentation_names_the_project_fragments_by_fqcn(own):
    out = rewrite_python(own, '''\
    DOCUMENTATION = r"""
    module: docker_daemon_config
    description: node_lock is kept in text
    extends_documentation_fragment:
      - ansible.builtin.action_common_attributes
      - node_lock
      - node_lock.other
    """
    EXAMPLES = r"""
    - name: Merge
      docker_daemon_config: {}
    """
    ''')
    documentation = yaml.safe_load(ast.literal_eval(out.split("DOCUMENTATION = ")[1].split("\nEXAMPLES")[0]))
    assert documentation["extends_documentation_fragment"] == [
        "ansible.builtin.action_common_attributes", f"{PREFIX}node_lock", f"{PREFIX}node_lock.other"]
    assert documentation["description"] == "node_lock is kept in text"
    assert f"{PREFIX}docker_daemon_config: {{}}" in out


def test_project_fragments_in_one_comma_separated_string_fail_with_file_and_line(bc, own):
    with pytest.raises(bc.BuildError, match=re.escape("library/m.py (DOCUMENTATION):3: write the fragments "
                                                      "'ansible.builtin.files, node_lock' as a YAML list")):
        rewrite_python(own, '''\
        DOCUMENTATION = r"""
        module: m
        extends_documentation_fragment: ansible.builtin.files, node_lock
        """
        ''')


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
    module_utils = target / "plugins" / "module_utils"
    assert {p.relative_to(module_utils) for p in module_utils.rglob("*.py")} == {
        p.relative_to(ROOT / "module_utils") for p in (ROOT / "module_utils").rglob("*.py")
    }
    assert {p.name for p in (target / "roles").iterdir()} == {p.name for p in (ROOT / "roles").iterdir()}
    assert not [*(target / "roles").glob("*/library"), *(target / "roles").glob("*/filter_plugins")]
    assert (target / "playbooks" / "site.yml").is_file()
    for name in ("galaxy.yml", "meta/runtime.yml", "LICENSE", "README.md"):
        assert (target / name).is_file(), name


def test_no_plugin_imports_project_module_utils_through_ansible_module_utils(built):
    target, _ = built
    own = {p.name.removesuffix(".py") for p in (ROOT / "module_utils").iterdir()}
    for path in (target / "plugins").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ansible.module_utils"):
                parts = node.module.split(".")
                assert len(parts) == 2 or parts[2] not in own, f"{path}: {node.module}"
                assert len(parts) > 2 or not {a.name for a in node.names} & own, f"{path}: {node.module}"


def _module_defaults_keys(node):
    if isinstance(node, list):
        for item in node:
            yield from _module_defaults_keys(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "module_defaults":
                for defaults in value if isinstance(value, list) else [value]:
                    yield from defaults
            yield from _module_defaults_keys(value)


def test_ansible_doc_merges_the_project_fragments_into_the_built_modules(built, tmp_path):
    target, galaxy = built
    (tmp_path / "ansible.cfg").write_text("")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(target.parents[2]),
               ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"),
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    users = sorted(p.stem for p in (ROOT / "library").glob("*.py")
                   if re.search(r"^  - node_lock$", p.read_text(encoding="utf-8"), re.M))
    assert len(users) > 1
    prefix = f"{galaxy['namespace']}.{galaxy['name']}."
    shown = json.loads(subprocess.run(["ansible-doc", "-j", *(prefix + name for name in users)], env=env,
                                      cwd=tmp_path, capture_output=True, text=True, check=True).stdout)
    for name in users:
        option = shown[prefix + name]["doc"]["options"]["lock_timeout"]
        assert (option["type"], option["default"]) == ("int", 300), name


def test_every_module_defaults_key_of_the_built_roles_and_playbooks_is_an_fqcn(built):
    # ansible-core reads a short module_defaults key as ansible.legacy.NAME, even in a collection
    target, _ = built
    keys = [key for path in [*target.glob("roles/*/tasks/*.yml"), *target.glob("playbooks/**/*.yml")]
            for key in _module_defaults_keys(yaml.safe_load(path.read_text(encoding="utf-8")))]
    assert keys
    assert [k for k in keys if not re.match(r"^(group/)?[a-z0-9_]+\.[a-z0-9_]+\.[a-z0-9_]+$", k)] == []


def test_built_yaml_differs_from_the_source_only_in_lines_with_fqcns(built):
    target, _ = built
    compared = 0
    for source in [*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("playbooks/*.yml"), ROOT / "site.yml"]:
        rel = source.relative_to(ROOT)
        built_file = target / (rel if rel.parts[0] != "site.yml" else pathlib.Path("playbooks", rel))
        old = source.read_text(encoding="utf-8").split("\n")
        new = built_file.read_text(encoding="utf-8").split("\n")
        assert len(old) == len(new), source
        for before, after in zip(old, new):
            assert before == after or PREFIX in after, f"{source}: {before!r} -> {after!r}"
        compared += 1
    assert compared


# --- Short names inside the collection: what the build relies on ------------------------

SHORT_NAMES_PROJECT = {
    "library/echo.py": "#!/usr/bin/python\nfrom ansible.module_utils.basic import AnsibleModule\n"
                       "from ansible.module_utils.example.words import upper\n"
                       "m = AnsibleModule(argument_spec={'msg': {'type': 'str', 'default': 'none'}})\n"
                       "m.exit_json(changed=False, said=upper(m.params['msg']))\n",
    "module_utils/example/__init__.py": "",
    "module_utils/example/words.py": "def upper(text):\n    return text.upper()\n",
    "roles/outer/meta/main.yml": "dependencies: [{role: inner, inner_from: dependency}]\n",
    "roles/outer/tasks/main.yml": textwrap.dedent("""\
        - name: A module by its short name, with module_defaults
          echo: {}
          module_defaults:
            echo: {msg: outer}
          register: outer
        - name: Show
          ansible.builtin.debug: {msg: "said {{ outer.said }}"}
        - name: A role of the collection by its short name, included
          ansible.builtin.include_role: {name: inner}
          vars: {inner_from: include_role}
        """),
    "roles/inner/tasks/main.yml": "- name: Inner\n  echo: {msg: \"inner {{ inner_from }}\"}\n"
                                  "  register: inner\n- name: Show\n"
                                  "  ansible.builtin.debug: {msg: \"said {{ inner.said }}\"}\n",
    "playbooks/roles.yml": "- name: Roles by short names\n  hosts: all\n  gather_facts: false\n"
                           "  roles: [outer]\n  tasks:\n    - name: Direct\n      echo: {msg: play}\n"
                           "      register: play\n    - name: Show\n"
                           "      ansible.builtin.debug: {msg: \"said {{ play.said }}\"}\n",
    "site.yml": "- name: Import\n  ansible.builtin.import_playbook: playbooks/roles.yml\n",
    "collection/galaxy.yml": "namespace: example\nname: short\nversion: 1.0.0\nreadme: README.md\n"
                             "authors: [x]\n",
    "collection/meta/runtime.yml": "requires_ansible: '>=2.19.0'\n",
}


def test_the_collection_runs_with_short_names_of_its_own_modules_and_roles(bc, tmp_path):
    project = tmp_path / "project"
    for rel, text in SHORT_NAMES_PROJECT.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text)
    target, _ = bc.build_tree(project, tmp_path / "tree")
    assert "  echo: {}\n" in (target / "roles/outer/tasks/main.yml").read_text()  # kept short
    (tmp_path / "ansible.cfg").write_text("")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(tmp_path / "tree"),
               ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"),
               ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"),
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    run = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", "example.short.site"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    said = re.findall(r'"msg": "said (.*)"', run.stdout)
    assert said == ["INNER DEPENDENCY", "OUTER", "INNER INCLUDE_ROLE", "PLAY"]
