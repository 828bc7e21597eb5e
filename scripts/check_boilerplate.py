#!/usr/bin/env python3
"""Check the boilerplate that the Galaxy collection's sanity tests require, in the sources.

    python scripts/check_boilerplate.py [FILE...]

Runs in a second on the playbook project's own files (what
scripts/build_collection.py puts into the collection: library/,
roles/*/library/, module_utils/, filter_plugins/ ...), with no build and no
ansible-test environments, and says for each file what to change. It checks
what ``ansible-test sanity`` (validate-modules, ansible-doc, yamllint) checks
and what a licence needs, with the same rules:

- licence-header: every Python file shipped as a plugin or module_utils has,
  in its first 20 lines, the short GPLv3 header (validate-modules looks for
  "GNU General Public License" and "v3.0"/"version 3")::

      # Copyright: (c) 2026, gpunode maintainers
      # GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
      # SPDX-License-Identifier: GPL-3.0-or-later

- imports-after-docs (modules): DOCUMENTATION, EXAMPLES and RETURN come
  before every import (``from __future__`` aside);
- doc-yaml (modules): DOCUMENTATION, EXAMPLES and RETURN are valid YAML;
- author (modules): each author reads ``Name (@github-handle)``;
- attribute-description (modules): each attribute has a description, after
  the documentation fragments are merged; ``ansible.builtin.action_common_attributes``
  describes check_mode, diff_mode and platform, ``...action_common_attributes.facts``
  describes facts;
- role-licence: each role's meta/main.yml says ``license: GPL-3.0-or-later``,
  the collection's licence (it ships the roles);
- filter-docs: every filter a FilterModule returns is documented, by a YAML
  file named after the filter beside the plugin (DOCUMENTATION, EXAMPLES,
  RETURN, as ansible-core's own filters), or by DOCUMENTATION in a plugin file
  named after the filter.

Exit status 1 when something is wrong; each problem is one line
``FILE:LINE: CHECK: what to do``.
"""

import ast
import pathlib
import re
import sys

import yaml
from ansible.plugins.loader import fragment_loader, init_plugin_loader
from ansible.utils.plugin_docs import get_docstring
from build_collection import ROOT, BuildError, plan_layout, plugin_names_from_class, project_files

HEADER_LINES = 20
# validate-modules' rule for DOCUMENTATION.author (schema.py: author_line)
AUTHOR_RE = re.compile(r"^\w.*(\(@([\w-]+)\)|!UNKNOWN)(?![\w.])")
DOC_VARIABLES = ("DOCUMENTATION", "EXAMPLES", "RETURN")
HEADER_TEXT = (
    "# Copyright: (c) 2026, gpunode maintainers / "
    "# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt) / "
    "# SPDX-License-Identifier: GPL-3.0-or-later"
)


def check_header(path, text):
    header = "\n".join(text.split("\n")[:HEADER_LINES])
    if "GNU General Public License" not in header or ("version 3" not in header and "v3.0" not in header):
        return [f"{path}:1: licence-header: add the GPLv3 header in the first {HEADER_LINES} lines "
                f"(after the shebang): {HEADER_TEXT}"]
    return []


def doc_assignments(tree):
    """DOCUMENTATION/EXAMPLES/RETURN -> their top-level Assign nodes."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in DOC_VARIABLES:
                    found[target.id] = node
    return found


def top_level_imports(tree):
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if not (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
                yield node
        elif isinstance(node, ast.Try):
            for child in [*node.body, *(h for handler in node.handlers for h in handler.body)]:
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    yield node
                    break


def check_module(path, text, tree):
    """``path`` relative to ROOT (for messages), its text and its ast."""
    problems = []
    docs = doc_assignments(tree)
    for name in DOC_VARIABLES:
        if name not in docs:
            problems.append(f"{path}:1: doc-yaml: no {name}")
    if docs:
        last_doc = max(docs.values(), key=lambda n: n.end_lineno)
        early = [node for node in top_level_imports(tree) if node.lineno < last_doc.end_lineno]
        if early:
            problems.append(
                f"{path}:{early[0].lineno}: imports-after-docs: move the imports of lines "
                f"{early[0].lineno}-{early[-1].end_lineno} below {last_doc.targets[0].id} "
                f"(ends line {last_doc.end_lineno})"
            )
    parsed = {}
    for name, node in docs.items():
        if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            problems.append(f"{path}:{node.lineno}: doc-yaml: {name} must be a string literal")
            continue
        try:
            parsed[name] = yaml.safe_load(node.value.value)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = node.value.lineno + mark.line if mark else node.lineno
            problem = getattr(exc, "problem", None) or str(exc)
            problems.append(f"{path}:{line}: doc-yaml: {name} is not valid YAML: {problem} "
                            "(quote the text, or avoid ': ' in plain text)")
    if "DOCUMENTATION" not in parsed or not isinstance(parsed["DOCUMENTATION"], dict):
        return problems
    doc_line = docs["DOCUMENTATION"].lineno
    authors = parsed["DOCUMENTATION"].get("author")
    for author in authors if isinstance(authors, list) else [authors]:
        if not isinstance(author, str) or not AUTHOR_RE.search(author):
            problems.append(f"{path}:{doc_line}: author: {author!r} must read 'Name (@github-handle)', "
                            "e.g. 'gpunode maintainers (@gpunode)'")
    try:
        merged = get_docstring(str(ROOT / path), fragment_loader, is_module=True)[0] or {}
    except Exception as exc:  # ansible reports unknown fragments and bad YAML with many types
        problems.append(f"{path}:{doc_line}: doc-yaml: ansible cannot read the documentation: {exc}")
        return problems
    for name, attribute in sorted((merged.get("attributes") or {}).items()):
        if not isinstance(attribute, dict) or not attribute.get("description"):
            fragment = ("ansible.builtin.action_common_attributes.facts" if name == "facts"
                        else "ansible.builtin.action_common_attributes")
            problems.append(f"{path}:{doc_line}: attribute-description: attribute {name} has no "
                            f"description: add {fragment} to extends_documentation_fragment, or write one")
    return problems


def check_filters(path, names):
    """``path`` relative to ROOT: the filter plugin; ``names``: the filters it defines."""
    problems = []
    for name in sorted(names):
        doc_file = next((p for p in (path.with_name(f"{name}.yml"), path.with_name(f"{name}.yaml"))
                         if (ROOT / p).is_file()), None)
        if doc_file is None and path.stem == name:
            continue  # a plugin file named after its one filter carries DOCUMENTATION itself
        if doc_file is None:
            problems.append(f"{path}:1: filter-docs: filter {name} is undocumented: add "
                            f"{path.with_name(name + '.yml')} (DOCUMENTATION, EXAMPLES, RETURN, "
                            "as ansible-core's own filters and docs/COLLECTION.md show)")
            continue
        try:
            doc = yaml.safe_load((ROOT / doc_file).read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            problems.append(f"{doc_file}:1: filter-docs: not valid YAML: {exc}")
            continue
        documented = (doc.get("DOCUMENTATION") or {}).get("name") if isinstance(doc, dict) else None
        if documented != name:
            problems.append(f"{doc_file}:1: filter-docs: DOCUMENTATION.name must be {name!r}, "
                            f"not {documented!r}")
    return problems


def check_role_licences():
    problems = []
    for meta in sorted(ROOT.glob("roles/*/meta/main.yml")):
        galaxy_info = (yaml.safe_load(meta.read_text(encoding="utf-8")) or {}).get("galaxy_info") or {}
        licence = galaxy_info.get("license")
        if licence != "GPL-3.0-or-later":
            problems.append(f"{meta.relative_to(ROOT)}:1: role-licence: galaxy_info.license is {licence!r}; "
                            "the collection and its roles are GPL-3.0-or-later")
    return problems


def shipped_python_files():
    """(path relative to ROOT, collection plugin type) of every Python file the build ships."""
    layout = plan_layout(ROOT, project_files(ROOT))
    for src, (dest, kind) in sorted(layout.items()):
        if kind == "plugin" and dest.suffix == ".py":
            yield src, dest.parts[1]


def main(argv):
    init_plugin_loader()  # resolves documentation fragments such as ansible.builtin.files
    wanted = {pathlib.PurePosixPath(p) for p in argv} if argv else None
    problems = []
    try:
        files = list(shipped_python_files())
    except BuildError as exc:
        print(f"check_boilerplate: {exc}", file=sys.stderr)
        return 1
    checked = 0
    for src, plugin_type in files:
        if wanted is not None and src not in wanted:
            continue
        path = ROOT / src
        text = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(text, str(src))
        except SyntaxError as exc:
            problems.append(f"{src}:{exc.lineno}: syntax: {exc.msg}")
            continue
        checked += 1
        if path.name != "__init__.py" or text.strip():
            problems.extend(check_header(src, text))
        if plugin_type == "modules":
            problems.extend(check_module(src, text, tree))
        elif plugin_type == "filter":
            names = plugin_names_from_class(path, "FilterModule", "filters")
            problems.extend(check_filters(src, names))
    if wanted is None:
        problems.extend(check_role_licences())
    for problem in problems:
        print(problem)
    print(f"check_boilerplate: {checked} files, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
