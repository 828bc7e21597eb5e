#!/usr/bin/env python3
"""Build the gpunode Galaxy collection from the playbook project.

    python scripts/build_collection.py [--tree DIR] [--output-path DIR]

The repository keeps a playbook project's layout. This script assembles from
it the collection that ``collection/galaxy.yml`` describes:

    library/*.py, roles/*/library/*.py            -> plugins/modules/
    module_utils/, roles/*/module_utils/          -> plugins/module_utils/
    filter_plugins/, roles/*/filter_plugins/      -> plugins/filter/ (with the filters' YAML docs)
    the other *_plugins folders, likewise         -> plugins/<type>/
    roles/<role>/ without the folders above       -> roles/<role>/
    site.yml, playbooks/*.yml                     -> playbooks/
    playbooks/tasks/*.yml, playbooks/vars/*.yml   -> playbooks/tasks/, playbooks/vars/
    collection/ (galaxy.yml, meta/, CHANGELOG.md), LICENSE, README.md

and writes every reference to the project's own content as an FQCN:

- task actions and ``module_defaults`` that name a project module;
- ``roles:`` entries, ``include_role``/``import_role`` names, role dependencies;
- ``import_playbook: playbooks/X.yml`` -> ``NS.NAME.X``;
- the project's filters, tests and lookups in Jinja (tasks, vars, templates);
- ``from ansible.module_utils.X import ...`` of a project module_utils ->
  ``from ansible_collections.NS.NAME.plugins.module_utils.X import ...``;
- the tasks in each module's EXAMPLES.

Files are edited where the parsers (``yaml``, ``ast``) locate the references,
so comments and layout stay; each edited file is parsed again and must equal
the original except for the intended references, or the build stops with the
file and line. Every task action in the built roles and playbooks must then be
an FQCN of ansible.builtin, of this collection or of a collection that
galaxy.yml declares. ``ansible-galaxy collection build`` packs the tree.
"""

import argparse
import ast
import os
import pathlib
import re
import shutil
import subprocess
import sys

import jinja2
import yaml
from ansible.playbook.block import Block
from ansible.playbook.handler import Handler
from ansible.playbook.task import Task

ROOT = pathlib.Path(__file__).resolve().parent.parent
METADATA_DIR = "collection"
DEFAULT_TREE = ROOT / "build" / "collection"
DEFAULT_OUTPUT = ROOT / "build"

# Plugin folders of a playbook project (top level or in a role) -> collection plugin type.
PLUGIN_FOLDERS = {
    "library": "modules",
    "module_utils": "module_utils",
    "action_plugins": "action",
    "become_plugins": "become",
    "cache_plugins": "cache",
    "callback_plugins": "callback",
    "connection_plugins": "connection",
    "doc_fragments": "doc_fragments",
    "filter_plugins": "filter",
    "inventory_plugins": "inventory",
    "lookup_plugins": "lookup",
    "strategy_plugins": "strategy",
    "test_plugins": "test",
    "vars_plugins": "vars",
}
ROLE_YAML_KINDS = {"tasks": "tasks", "handlers": "tasks"}
# the playbooks' own task files (include_tasks) and variable files (vars_files)
PLAYBOOK_FOLDERS = {"tasks": "tasks", "vars": "data"}
SKIPPED_NAMES = ("__pycache__",)
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".orig", ".rej", "~")

PLAY_TASK_LISTS = ("pre_tasks", "tasks", "post_tasks", "handlers")
BLOCK_TASK_LISTS = ("block", "rescue", "always")
ROLE_INCLUDES = {
    f"{prefix}{action}"
    for prefix in ("", "ansible.builtin.", "ansible.legacy.")
    for action in ("include_role", "import_role")
}
PLAYBOOK_IMPORTS = {f"{prefix}import_playbook" for prefix in ("", "ansible.builtin.", "ansible.legacy.")}
# Task keywords that are not actions: ansible-core's own list.
TASK_KEYWORDS = frozenset(Task.fattributes) | frozenset(Block.fattributes) | frozenset(Handler.fattributes)
TASK_KEYWORDS |= {"local_action"}
FQCN_RE = re.compile(r"^([a-z0-9_]+)\.([a-z0-9_]+)\.[A-Za-z0-9_.]+$")


class BuildError(Exception):
    """The project cannot be built into a collection; the message names the file."""


# ---------------------------------------------------------------------------
# YAML loading that tolerates Ansible's tags


class _AnsibleYamlLoader(yaml.SafeLoader):
    """SafeLoader that reads Ansible's !unsafe and !vault values as strings."""


def _tagged_string(loader, node):
    return f"{node.tag} {loader.construct_scalar(node)}"


for _tag in ("!unsafe", "!vault", "!vault-encrypted"):
    _AnsibleYamlLoader.add_constructor(_tag, _tagged_string)


def compose_documents(text, path):
    try:
        return list(yaml.compose_all(text, Loader=_AnsibleYamlLoader))
    except yaml.YAMLError as exc:
        raise BuildError(f"{path}: not valid YAML: {exc}") from exc


# ---------------------------------------------------------------------------
# What the project defines


class Content:
    """The project's own content and the collection's names for it."""

    def __init__(self, namespace, name):
        self.namespace = namespace
        self.name = name
        self.prefix = f"{namespace}.{name}."
        self.module_utils_package = f"ansible_collections.{namespace}.{name}.plugins.module_utils"
        self.modules = set()
        self.module_utils = set()
        self.roles = set()
        self.playbooks = {}  # source path (relative to ROOT) -> playbook name
        self.filters = set()
        self.tests = set()
        self.lookups = set()
        self._jinja_patterns = None

    def fqcn(self, short):
        return self.prefix + short

    def jinja_patterns(self):
        """Regular expressions that find the project's plugins in Jinja text."""
        if self._jinja_patterns is None:
            patterns = []

            def names(items):
                return "|".join(re.escape(n) for n in sorted(items, key=lambda n: (-len(n), n)))

            end = r"(?![\w.])"
            quoted_end = r"(?=['\"])"
            if self.filters:
                filters = names(self.filters)
                patterns.append(re.compile(rf"(?P<pre>\|\s*)(?P<name>{filters}){end}"))
                patterns.append(re.compile(rf"(?P<pre>\bmap\(\s*['\"])(?P<name>{filters}){quoted_end}"))
            if self.tests:
                tests = names(self.tests)
                patterns.append(re.compile(rf"(?P<pre>\bis\s+(?:not\s+)?)(?P<name>{tests}){end}"))
                patterns.append(
                    re.compile(rf"(?P<pre>\b(?:select|reject)\(\s*['\"])(?P<name>{tests}){quoted_end}")
                )
                patterns.append(
                    re.compile(
                        rf"(?P<pre>\b(?:selectattr|rejectattr)\(\s*(['\"])[^'\"]*\2\s*,\s*['\"])"
                        rf"(?P<name>{tests}){quoted_end}"
                    )
                )
            if self.lookups:
                lookups = names(self.lookups)
                patterns.append(
                    re.compile(rf"(?P<pre>\b(?:lookup|query|q)\(\s*['\"])(?P<name>{lookups}){quoted_end}")
                )
            self._jinja_patterns = patterns
        return self._jinja_patterns

    def rewrite_jinja(self, text):
        """``text`` with the project's filters, tests and lookups as FQCNs."""
        for pattern in self.jinja_patterns():
            text = pattern.sub(lambda m: m.group("pre") + self.fqcn(m.group("name")), text)
        return text


def plugin_names_from_class(path, class_name, method):
    """Names a FilterModule.filters() / TestModule.tests() returns, read without importing."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    returns = [n for n in ast.walk(item) if isinstance(n, ast.Return)]
                    if len(returns) == 1 and isinstance(returns[0].value, ast.Dict):
                        keys = returns[0].value.keys
                        if all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys):
                            return {k.value for k in keys}
                    raise BuildError(
                        f"{path}: {class_name}.{method}() must return one dict literal with string keys, "
                        "so that the build can see the plugin names"
                    )
    return set()


# ---------------------------------------------------------------------------
# Collecting the project's files


def project_files(root):
    """Paths (relative) of the files git tracks or would track; every file without git."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            check=True,
            capture_output=True,
        ).stdout.decode()
        paths = [p for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        paths = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
    keep = []
    for rel in sorted(set(paths)):
        parts = pathlib.PurePosixPath(rel).parts
        if any(part in SKIPPED_NAMES for part in parts) or rel.endswith(SKIPPED_SUFFIXES):
            continue
        if (root / rel).is_file():
            keep.append(pathlib.PurePosixPath(rel))
    return keep


def plan_layout(root, files):
    """Map each project file that goes into the collection to (destination, kind)."""
    layout = {}

    def add(src, dest, kind):
        if dest in layout.values():
            other = next(s for s, d in layout.items() if d == dest)
            raise BuildError(f"{src} and {other} both become {dest} in the collection")
        layout[src] = (dest, kind)

    for rel in files:
        parts = rel.parts
        if parts[0] in PLUGIN_FOLDERS and len(parts) > 1:
            add(rel, pathlib.PurePosixPath("plugins", PLUGIN_FOLDERS[parts[0]], *parts[1:]), "plugin")
        elif parts[0] == "roles" and len(parts) > 3 and parts[2] in PLUGIN_FOLDERS:
            add(rel, pathlib.PurePosixPath("plugins", PLUGIN_FOLDERS[parts[2]], *parts[3:]), "plugin")
        elif parts[0] == "roles" and len(parts) > 2:
            if parts[2] == "templates":
                kind = "template"
            elif rel.suffix in (".yml", ".yaml") and parts[2] != "files":
                if parts[2] == "meta" and parts[-1] in ("main.yml", "main.yaml"):
                    kind = "role-meta"
                else:
                    kind = ROLE_YAML_KINDS.get(parts[2], "data")
            else:
                kind = "copy"
            add(rel, rel, kind)
        elif len(parts) == 1 and rel.suffix in (".yml", ".yaml") and rel.stem == "site":
            add(rel, pathlib.PurePosixPath("playbooks", rel.name), "playbook")
        elif parts[0] == "playbooks" and len(parts) == 2 and rel.suffix in (".yml", ".yaml"):
            add(rel, rel, "playbook")
        elif parts[0] == "playbooks" and len(parts) == 3 and parts[1] in PLAYBOOK_FOLDERS \
                and rel.suffix in (".yml", ".yaml"):
            add(rel, rel, PLAYBOOK_FOLDERS[parts[1]])
        elif parts[0] == METADATA_DIR and len(parts) > 1:
            add(rel, pathlib.PurePosixPath(*parts[1:]), "copy")
        elif str(rel) in ("LICENSE", "README.md"):
            add(rel, rel, "copy")
    if not any(dest == pathlib.PurePosixPath("galaxy.yml") for dest, _ in layout.values()):
        raise BuildError(f"{root / METADATA_DIR / 'galaxy.yml'}: missing")
    return layout


def read_content(root, layout, namespace, name):
    content = Content(namespace, name)
    for src, (dest, kind) in layout.items():
        if kind == "plugin":
            plugin_type = dest.parts[1]
            if plugin_type in ("modules", "action") and dest.suffix == ".py" and dest.stem != "__init__":
                content.modules.add(dest.stem)
            elif plugin_type == "module_utils" and dest.stem != "__init__":
                content.module_utils.add(dest.parts[2] if len(dest.parts) > 3 else dest.stem)
            elif plugin_type == "filter" and dest.suffix == ".py":
                content.filters |= plugin_names_from_class(root / src, "FilterModule", "filters")
            elif plugin_type == "test" and dest.suffix == ".py":
                content.tests |= plugin_names_from_class(root / src, "TestModule", "tests")
            elif plugin_type == "lookup" and dest.suffix == ".py" and dest.stem != "__init__":
                content.lookups.add(dest.stem)
        elif dest.parts[0] == "roles":
            content.roles.add(dest.parts[1])
        elif kind == "playbook":
            content.playbooks[src] = dest.stem
    return content


# ---------------------------------------------------------------------------
# Editing YAML at the positions the parser reports


class YamlRewrite:
    """Rewrites one YAML file's references to project content as FQCNs."""

    def __init__(self, text, path, content, source=None):
        self.text = text
        self.path = path
        self.source = source or path  # the project file (for relative playbook paths)
        self.content = content
        self.edits = {}  # start index -> (end index, new source text)
        self.expected = {}  # id(old scalar node) -> value after the edit
        self.actions = []  # (line, action) of every task action seen

    # -- edits --------------------------------------------------------------

    def _where(self, node):
        return f"{self.path}:{node.start_mark.line + 1}"

    def _edit(self, node, transform):
        """Apply ``transform`` to the scalar's source text and to its value."""
        start, end = node.start_mark.index, node.end_mark.index
        if id(node) in self.expected:
            raise BuildError(f"{self._where(node)}: two rewrites of one value")
        source = self.text[start:end]
        new_source = transform(source)
        new_value = transform(node.value)
        if new_source == source and new_value == node.value:
            return
        self.edits[start] = (end, new_source)
        self.expected[id(node)] = new_value

    def _rename(self, node, short, new):
        def transform(text):
            return re.sub(rf"(?<![\w.]){re.escape(short)}(?![\w])", lambda _m: new, text, count=1)

        self._edit(node, transform)

    # -- walkers -------------------------------------------------------------

    @staticmethod
    def _pairs(node):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                yield key.value, key, value

    def run(self, kind):
        documents = compose_documents(self.text, self.path)
        for document in documents:
            if document is None:
                continue
            if kind == "playbook":
                self._plays_or_tasks(document)
            elif kind == "tasks":
                self._tasks(document)
            elif kind == "role-meta" and isinstance(document, yaml.MappingNode):
                for key, _key_node, value in self._pairs(document):
                    if key == "dependencies":
                        self._roles(value)
            self._jinja(document)
        new_text = self._apply()
        if self.expected:
            self._verify(documents, new_text)
        return new_text

    def _plays_or_tasks(self, node):
        if not isinstance(node, yaml.SequenceNode):
            return
        for item in node.value:
            if not isinstance(item, yaml.MappingNode):
                continue
            keys = {key for key, _k, _v in self._pairs(item)}
            if "hosts" in keys or keys & PLAYBOOK_IMPORTS:
                self._play(item)
            else:
                self._task(item)

    def _play(self, node):
        for key, _key_node, value in self._pairs(node):
            if key in PLAYBOOK_IMPORTS:
                self._playbook_ref(value)
            elif key in PLAY_TASK_LISTS:
                self._tasks(value)
            elif key == "roles":
                self._roles(value)
            elif key == "module_defaults":
                self._module_defaults(value)

    def _tasks(self, node):
        if isinstance(node, yaml.SequenceNode):
            for item in node.value:
                if isinstance(item, yaml.MappingNode):
                    self._task(item)

    def _task(self, node):
        for key, key_node, value in self._pairs(node):
            if key in BLOCK_TASK_LISTS:
                self._tasks(value)
            elif key == "module_defaults":
                self._module_defaults(value)
            elif key in ("action", "local_action"):
                self._action_keyword(value)
            elif key in TASK_KEYWORDS or key.startswith("with_"):
                continue
            else:
                action = key
                if key in self.content.modules:
                    action = self.content.fqcn(key)
                    self._rename(key_node, key, action)
                elif key in ROLE_INCLUDES:
                    self._role_include(value)
                self.actions.append((key_node.start_mark.line + 1, action))

    def _action_keyword(self, node):
        if isinstance(node, yaml.ScalarNode):
            action = node.value.split(None, 1)[0] if node.value.strip() else ""
            if action in self.content.modules:
                self._rename(node, action, self.content.fqcn(action))
                action = self.content.fqcn(action)
            self.actions.append((node.start_mark.line + 1, action))
        elif isinstance(node, yaml.MappingNode):
            for key, _key_node, value in self._pairs(node):
                if key == "module" and isinstance(value, yaml.ScalarNode):
                    action = value.value
                    if action in self.content.modules:
                        self._rename(value, action, self.content.fqcn(action))
                        action = self.content.fqcn(action)
                    self.actions.append((value.start_mark.line + 1, action))

    def _module_defaults(self, node):
        if isinstance(node, yaml.MappingNode):
            for key, key_node, _value in self._pairs(node):
                if key in self.content.modules:
                    self._rename(key_node, key, self.content.fqcn(key))
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                self._module_defaults(item)

    def _role_name(self, node):
        if isinstance(node, yaml.ScalarNode) and node.value in self.content.roles:
            self._rename(node, node.value, self.content.fqcn(node.value))

    def _roles(self, node):
        if not isinstance(node, yaml.SequenceNode):
            return
        for item in node.value:
            if isinstance(item, yaml.ScalarNode):
                self._role_name(item)
            elif isinstance(item, yaml.MappingNode):
                for key, _key_node, value in self._pairs(item):
                    if key in ("role", "name"):
                        self._role_name(value)

    def _role_include(self, node):
        if isinstance(node, yaml.MappingNode):
            for key, _key_node, value in self._pairs(node):
                if key == "name":
                    self._role_name(value)
        elif isinstance(node, yaml.ScalarNode):
            match = re.search(r"(?:^|\s)name=(\S+)", node.value)
            if match and match.group(1) in self.content.roles:
                self._rename(node, match.group(1), self.content.fqcn(match.group(1)))

    def _playbook_ref(self, node):
        if not isinstance(node, yaml.ScalarNode) or FQCN_RE.match(node.value):
            return
        target = os.path.normpath(os.path.join(os.path.dirname(str(self.source)), node.value))
        name = self.content.playbooks.get(pathlib.PurePosixPath(target))
        if name is None:
            raise BuildError(
                f"{self._where(node)}: import_playbook {node.value!r} is not a playbook of the "
                "project (site.yml, playbooks/*.yml); it would be missing from the collection"
            )
        self._edit(node, lambda text: text.replace(node.value, self.content.fqcn(name), 1))

    def _jinja(self, node):
        if isinstance(node, yaml.ScalarNode):
            if id(node) not in self.expected:
                self._edit(node, self.content.rewrite_jinja)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                self._jinja(item)
        elif isinstance(node, yaml.MappingNode):
            for _key, value in node.value:
                self._jinja(value)

    # -- result ---------------------------------------------------------------

    def _apply(self):
        text = self.text
        previous_start = None
        for start in sorted(self.edits, reverse=True):
            end, new_source = self.edits[start]
            if previous_start is not None and end > previous_start:
                raise BuildError(f"{self.path}: overlapping rewrites at character {start}")
            text = text[:start] + new_source + text[end:]
            previous_start = start
        return text

    def _verify(self, old_documents, new_text):
        """The new text parses to the old documents except for the intended values."""
        new_documents = compose_documents(new_text, self.path)
        if len(new_documents) != len(old_documents):
            raise BuildError(f"{self.path}: the rewrite changed the number of YAML documents")
        for old, new in zip(old_documents, new_documents, strict=True):
            self._same(old, new)

    def _same(self, old, new):
        if old is None or new is None:
            if old is not new:
                raise BuildError(f"{self.path}: the rewrite emptied or filled a document")
            return
        if type(old) is not type(new) or old.tag != new.tag:
            raise BuildError(f"{self._where(old)}: the rewrite changed the type of a value")
        if isinstance(old, yaml.ScalarNode):
            want = self.expected.get(id(old), old.value)
            if new.value != want:
                raise BuildError(
                    f"{self._where(old)}: the rewrite made {new.value!r} where {want!r} was meant"
                )
        elif isinstance(old, yaml.SequenceNode):
            if len(old.value) != len(new.value):
                raise BuildError(f"{self._where(old)}: the rewrite changed a list")
            for old_item, new_item in zip(old.value, new.value, strict=True):
                self._same(old_item, new_item)
        else:
            if len(old.value) != len(new.value):
                raise BuildError(f"{self._where(old)}: the rewrite changed a mapping")
            for (old_key, old_value), (new_key, new_value) in zip(old.value, new.value, strict=True):
                self._same(old_key, new_key)
                self._same(old_value, new_value)


# ---------------------------------------------------------------------------
# Python: imports of the project's module_utils, module EXAMPLES


def _line_starts(text):
    """Index of the first character of each line, as ast numbers lines (split at \\n)."""
    return [0] + [match.end() for match in re.finditer("\n", text)]


def _index(text, starts, lineno, col_offset):
    """Character index of an ast position (col_offset counts UTF-8 bytes)."""
    line_start = starts[lineno - 1]
    line = text[line_start : starts[lineno] if lineno < len(starts) else len(text)]
    return line_start + len(line.encode("utf-8")[:col_offset].decode("utf-8"))


class PythonRewrite:
    """Rewrites a plugin's imports of project module_utils and a module's EXAMPLES."""

    def __init__(self, text, path, content, is_module):
        self.text = text
        self.path = path
        self.content = content
        self.is_module = is_module

    def _new_module_path(self, node):
        """The import's module after the rewrite, or None when it stays."""
        if node.level or not node.module:
            return None
        parts = node.module.split(".")
        if parts[:2] != ["ansible", "module_utils"]:
            return None
        if len(parts) > 2:
            if parts[2] in self.content.module_utils:
                return ".".join([self.content.module_utils_package, *parts[2:]])
            return None
        own = [alias.name in self.content.module_utils for alias in node.names]
        if all(own):
            return self.content.module_utils_package
        if any(own):
            raise BuildError(
                f"{self.path}:{node.lineno}: import the project's module_utils and ansible-core's "
                "in separate statements"
            )
        return None

    def run(self):
        try:
            tree = ast.parse(self.text, self.path)
        except SyntaxError as exc:
            raise BuildError(f"{self.path}:{exc.lineno}: not valid Python: {exc.msg}") from exc
        starts = _line_starts(self.text)
        edits = []
        expected_modules = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[:2] == ["ansible", "module_utils"] and len(parts) > 2 and (
                        parts[2] in self.content.module_utils
                    ):
                        raise BuildError(
                            f"{self.path}:{node.lineno}: write 'from ansible.module_utils.{parts[2]} "
                            f"import ...' (the build rewrites that form), not 'import {alias.name}'"
                        )
            elif isinstance(node, ast.ImportFrom):
                new_module = self._new_module_path(node)
                if new_module is None:
                    continue
                start = _index(self.text, starts, node.lineno, node.col_offset)
                end = _index(self.text, starts, node.end_lineno, node.end_col_offset)
                match = re.match(r"from\s+", self.text[start:end])
                if not match or not self.text.startswith(node.module, start + match.end()):
                    raise BuildError(f"{self.path}:{node.lineno}: cannot locate the module of this import")
                module_start = start + match.end()
                edits.append((module_start, module_start + len(node.module), new_module))
                expected_modules[id(node)] = new_module
        examples = self._examples(tree, starts) if self.is_module else None
        if examples:
            edits.append(examples[:3])
        new_text = self.text
        for start, end, replacement in sorted(edits, reverse=True):
            new_text = new_text[:start] + replacement + new_text[end:]
        if new_text != self.text:
            for node in ast.walk(tree):
                if id(node) in expected_modules:
                    node.module = expected_modules[id(node)]
            if examples:
                examples[3].value = examples[4]
            if ast.dump(tree) != ast.dump(ast.parse(new_text, self.path)):
                raise BuildError(f"{self.path}: the rewrite changed more than the imports and EXAMPLES")
        return new_text

    def _examples(self, tree, starts):
        """(start, end, new literal, constant node, new value) for EXAMPLES, or None."""
        for node in tree.body:
            if not (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "EXAMPLES" for t in node.targets)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                continue
            value = node.value
            start = _index(self.text, starts, value.lineno, value.col_offset)
            end = _index(self.text, starts, value.end_lineno, value.end_col_offset)
            literal = self.text[start:end]
            match = re.fullmatch(r"([rRuU]?)(\"\"\"|''')(.*)\2", literal, re.DOTALL)
            if not match or match.group(3) != value.value:
                # escapes or concatenation: the source is not the YAML text; keep it as it is
                return None
            new_yaml = YamlRewrite(value.value, f"{self.path} (EXAMPLES)", self.content).run("playbook")
            if new_yaml == value.value:
                return None
            new_literal = match.group(1) + match.group(2) + new_yaml + match.group(2)
            return start, end, new_literal, value, new_yaml
        return None


# ---------------------------------------------------------------------------
# Templates


def rewrite_template(text, path, content):
    new_text = content.rewrite_jinja(text)
    if new_text != text:
        environment = jinja2.Environment()
        try:
            environment.parse(text)
        except jinja2.TemplateSyntaxError:
            return new_text  # Ansible-specific syntax the plain environment does not know
        try:
            environment.parse(new_text)
        except jinja2.TemplateSyntaxError as exc:
            raise BuildError(f"{path}:{exc.lineno}: the rewrite broke the template: {exc}") from exc
    return new_text


# ---------------------------------------------------------------------------
# The build


def read_galaxy(root):
    path = root / METADATA_DIR / "galaxy.yml"
    try:
        galaxy = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise BuildError(f"{path}: {exc}") from exc
    for key in ("namespace", "name", "version"):
        if not isinstance(galaxy, dict) or not galaxy.get(key):
            raise BuildError(f"{path}: no {key}")
    return galaxy


def check_actions(actions, content, galaxy):
    """Every task action is an FQCN of ansible.builtin, this collection or a dependency."""
    allowed = {"ansible.builtin", f"{content.namespace}.{content.name}"}
    allowed |= set(galaxy.get("dependencies") or {})
    problems = []
    for path, line, action in actions:
        match = FQCN_RE.match(action)
        if not match:
            problems.append(f"{path}:{line}: {action!r} is not an FQCN")
        elif f"{match.group(1)}.{match.group(2)}" not in allowed:
            problems.append(
                f"{path}:{line}: {action} is from {match.group(1)}.{match.group(2)}, "
                f"which {METADATA_DIR}/galaxy.yml does not list under dependencies"
            )
    if problems:
        raise BuildError("task actions the collection cannot resolve:\n  " + "\n  ".join(problems))


def build_tree(root, tree):
    """Write the collection's files under ``tree``/ansible_collections/NS/NAME; return that path."""
    galaxy = read_galaxy(root)
    layout = plan_layout(root, project_files(root))
    content = read_content(root, layout, galaxy["namespace"], galaxy["name"])
    target = pathlib.Path(tree) / "ansible_collections" / galaxy["namespace"] / galaxy["name"]
    if target.exists():
        shutil.rmtree(target)
    actions = []
    for src, (dest, kind) in sorted(layout.items()):
        source_path = root / src
        out = target / dest
        out.parent.mkdir(parents=True, exist_ok=True)
        if kind == "copy" or (kind == "plugin" and dest.suffix not in (".py", ".yml", ".yaml")):
            shutil.copy2(source_path, out)
            continue
        text = source_path.read_text(encoding="utf-8")
        if kind == "plugin" and dest.suffix == ".py":
            is_module = dest.parts[1] == "modules"
            new_text = PythonRewrite(text, str(src), content, is_module).run()
        elif kind == "template":
            new_text = rewrite_template(text, str(src), content)
        else:  # YAML; a plugin's YAML is its documentation (filters, tests): EXAMPLES get FQCNs
            rewrite = YamlRewrite(text, str(src), content, source=src)
            new_text = rewrite.run("data" if kind == "plugin" else kind)
            actions.extend((src, line, action) for line, action in rewrite.actions)
        out.write_text(new_text, encoding="utf-8")
        shutil.copymode(source_path, out)
    check_actions(actions, content, galaxy)
    return target, galaxy


def build_tarball(collection_dir, output_path):
    output_path.mkdir(parents=True, exist_ok=True)
    command = [
        "ansible-galaxy", "collection", "build", str(collection_dir),
        "--output-path", str(output_path), "--force",
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--tree", type=pathlib.Path, default=DEFAULT_TREE,
                        help="where the collection tree goes (ansible_collections/NS/NAME under it)")
    parser.add_argument("--output-path", type=pathlib.Path, default=DEFAULT_OUTPUT,
                        help="where the tarball goes")
    parser.add_argument("--no-tarball", action="store_true", help="build the tree only")
    args = parser.parse_args(argv)
    try:
        collection_dir, galaxy = build_tree(ROOT, args.tree)
    except BuildError as exc:
        print(f"build_collection: {exc}", file=sys.stderr)
        return 1
    print(f"collection tree: {collection_dir}")
    if not args.no_tarball:
        build_tarball(collection_dir, args.output_path)
        tarball = args.output_path / f"{galaxy['namespace']}-{galaxy['name']}-{galaxy['version']}.tar.gz"
        print(f"collection tarball: {tarball}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
