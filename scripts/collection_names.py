"""How scripts/build_collection.py qualifies the project's names in what it copies into the collection.

Tasks keep short names, which a collection's roles and playbooks look up in their own collection
first; what does not resolve so (module_defaults keys, a module's EXAMPLES, import_playbook, the
project's filters, tests and lookups in Jinja, documentation fragments, imports of the project's
module_utils) is rewritten inside its line (rewrite_python, rewrite_yaml), and what cannot be fails
the build with file and line. docs/COLLECTION.md has the details.
"""

import ast
import pathlib
import posixpath
import re

import yaml

METADATA_DIR = "collection"
IMPORT_PLAYBOOK = {f"{prefix}import_playbook" for prefix in ("", "ansible.builtin.", "ansible.legacy.")}
FQCN_RE = re.compile(r"^([a-z0-9_]+)\.([a-z0-9_]+)\.[A-Za-z0-9_.]+$")


class BuildError(Exception):
    """The project cannot be built into a collection; the message names the file."""


def compose(text, path):
    """The YAML documents' nodes (Ansible's tags such as !unsafe need no constructor at this stage)."""
    try:
        return list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise BuildError(f"{path}: not valid YAML: {exc}") from exc


def plugin_names_from_class(path, class_name, method):
    """Names a FilterModule.filters() / TestModule.tests() returns, read without importing."""
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    returns = [n.value for n in ast.walk(item) if isinstance(n, ast.Return)]
                    one_dict = len(returns) == 1 and isinstance(returns[0], ast.Dict)
                    keys = returns[0].keys if one_dict else [None]
                    if all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys):
                        return {k.value for k in keys}
                    raise BuildError(f"{path}: {class_name}.{method}() must return one dict literal with "
                                     "string keys, so that the build can see the plugin names")
    return set()


class Project:
    """The names the build qualifies, read from the layout; the collections actions may come from."""

    def __init__(self, root, layout, galaxy):
        self.prefix = f"{galaxy['namespace']}.{galaxy['name']}."
        self.package = f"ansible_collections.{self.prefix}plugins.module_utils"
        self.collections = {"ansible.builtin", self.prefix[:-1], *(galaxy.get("dependencies") or {})}
        plugins = [(dest.parts[1], src, dest) for src, (dest, kind) in layout.items()
                   if kind == "plugin" and dest.suffix == ".py" and dest.name != "__init__.py"]
        self.modules = {dest.stem for kind, _, dest in plugins if kind == "modules"}
        self.doc_fragments = {dest.stem for kind, _, dest in plugins if kind == "doc_fragments"}
        self.module_utils = {d.parts[2].removesuffix(".py") for k, _, d in plugins if k == "module_utils"}
        self.playbooks = {src: dest.stem for src, (dest, kind) in layout.items() if kind == "playbook"}
        names = {"filter": set(), "test": set(), "lookup": {d.stem for k, _, d in plugins if k == "lookup"}}
        for kind, src, _ in plugins:
            if kind in ("filter", "test"):
                names[kind] |= plugin_names_from_class(root / src, f"{kind.title()}Module", f"{kind}s")
        alternatives = {kind: "|".join(sorted(map(re.escape, found), key=len, reverse=True))
                        for kind, found in names.items()}
        self.jinja = [re.compile(rf"({pre})({alternatives[kind]})(?![\w.])") for kind, pre in (
            ("filter", r"\|\s*|\bmap\(\s*['\"]"),
            ("test", r"\bis\s+(?:not\s+)?|\b(?:select|reject)\(\s*['\"]"
                     r"|\b(?:selectattr|rejectattr)\(\s*['\"][^'\"]*['\"]\s*,\s*['\"]"),
            ("lookup", r"\b(?:lookup|query|q)\(\s*['\"]")) if names[kind]]

    def rewrite_jinja(self, text):
        """``text`` with the project's filters, tests and lookups as FQCNs."""
        for pattern in self.jinja:
            text = pattern.sub(lambda m: m.group(1) + self.prefix + m.group(2), text)
        return text


def action_keys(node, parent=None):
    """(key, value, parent key) of the mapping keys that may name an action: list items, module_defaults."""
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from action_keys(item, "module_defaults" if parent == "module_defaults" else "-")
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                if parent in ("-", "module_defaults"):
                    yield key, value, parent
                yield from action_keys(value, key.value)


def scalars(node):
    """The scalar nodes of ``node`` (itself included), keys and values, in document order."""
    if isinstance(node, yaml.ScalarNode):
        return [node]
    children = node.value if isinstance(node, yaml.SequenceNode) else [n for pair in node.value for n in pair]
    return [scalar for child in children for scalar in scalars(child)]


def own_fragments(document, project, where):
    """The scalars of a DOCUMENTATION's extends_documentation_fragment that name a project fragment.

    ansible-core looks a fragment's short name up on its configured paths only, never in the
    collection of the module, so these need the collection's name (NAME or NAME.VARIABLE).
    """
    for key, value in document.value if isinstance(document, yaml.MappingNode) else []:
        items = value.value if isinstance(value, yaml.SequenceNode) else [value]
        for item in items if key.value == "extends_documentation_fragment" else []:
            names = [n.strip() for n in item.value.split(",")] if isinstance(item, yaml.ScalarNode) else []
            own = [n for n in names if n.split(".", 1)[0] in project.doc_fragments]
            if own and len(names) > 1:
                raise BuildError(f"{where(item)}: write the fragments {item.value!r} as a YAML list, one per "
                                 f"item, so that the build can qualify {', '.join(own)}")
            if own:
                yield item


def rewrite_yaml(text, path, project, *, playbook=None, examples=False, fragments=False, first_line=0):
    """``text`` with FQCNs: module_defaults keys (all action keys if ``examples``), import_playbook, Jinja.

    With ``fragments`` (a module's DOCUMENTATION), only its project documentation fragments. The
    result must parse to the same values but the intended ones, or the build fails.
    """
    documents, edits = compose(text, path), {}

    def where(node):
        return f"{path}:{first_line + node.start_mark.line + 1}"

    def edit(node, new_value, new_source=None):
        start, end = node.start_mark.index, node.end_mark.index
        if new_source is None and text[start:end].strip("'\"") != node.value:
            raise BuildError(f"{where(node)}: cannot rewrite {node.value!r} in place; write it on one "
                             "line, without escapes")
        edits[start] = (end, new_source or text[start:end].replace(node.value, new_value, 1), node, new_value)

    for document in documents:
        for node in own_fragments(document, project, where) if fragments else []:
            edit(node, project.prefix + node.value)
        for key, value, parent in [] if fragments else action_keys(document):
            if key.value in IMPORT_PLAYBOOK and isinstance(value, yaml.ScalarNode) and playbook is not None \
                    and not FQCN_RE.match(value.value):
                target = pathlib.PurePosixPath(posixpath.normpath(playbook.parent / value.value))
                if target not in project.playbooks:
                    raise BuildError(f"{where(value)}: import_playbook {value.value!r} is not a playbook of "
                                     "the project (site.yml, playbooks/*.yml), so not in the collection")
                fqcn = project.prefix + project.playbooks[target]
                edit(value, fqcn, fqcn)
            elif key.value in project.modules and (examples or parent == "module_defaults"):
                edit(key, project.prefix + key.value)
            elif (match := FQCN_RE.match(key.value)) and f"{match[1]}.{match[2]}" not in project.collections:
                raise BuildError(f"{where(key)}: {key.value} is from {match[1]}.{match[2]}, which "
                                 f"{METADATA_DIR}/galaxy.yml does not list under dependencies")
        for node in scalars(document) if project.jinja and not fragments else []:
            new = project.rewrite_jinja(node.value)
            if node.start_mark.index not in edits and new != node.value:
                edit(node, new, project.rewrite_jinja(text[node.start_mark.index:node.end_mark.index]))
    if not edits:
        return text
    new_text, expected = text, {id(node): value for _, _, node, value in edits.values()}
    for start, (end, new_source, _, _) in sorted(edits.items(), reverse=True):
        new_text = new_text[:start] + new_source + new_text[end:]
    meant = [(old, expected.get(id(old), old.value)) for d in documents for old in scalars(d)]
    made = [new.value for d in compose(new_text, path) for new in scalars(d)]
    for (old, value), new in zip(meant, made, strict=False):
        if new != value:
            raise BuildError(f"{where(old)}: the rewrite made {new!r} where {value!r} was meant")
    if len(meant) != len(made):
        raise BuildError(f"{path}: the rewrite changed the structure of the file")
    return new_text


def rewrite_python(text, path, project, is_module):
    """Imports of the project's module_utils point into the collection; a module's EXAMPLES use FQCNs."""
    own = "|".join(map(re.escape, sorted(project.module_utils)))
    if own:
        text = re.sub(rf"^(\s*from\s+)ansible\.module_utils\.(?=(?:{own})[.\s])", rf"\g<1>{project.package}.",
                      text, flags=re.M)
    try:
        tree = ast.parse(text, path)
    except SyntaxError as exc:
        raise BuildError(f"{path}:{exc.lineno}: not valid Python: {exc.msg}") from exc
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0):
            for alias in node.names:
                name = f"{node.module}.{alias.name}" if isinstance(node, ast.ImportFrom) else alias.name
                parts = name.split(".")
                if parts[:2] == ["ansible", "module_utils"] and set(parts[2:3]) & project.module_utils:
                    raise BuildError(f"{path}:{node.lineno}: write 'from ansible.module_utils.{parts[2]}... "
                                     "import NAME', the form the build rewrites")
    for variable in ("DOCUMENTATION", "EXAMPLES") if is_module else ():
        values = [n.value.value for n in tree.body
                  if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                  and [t.id for t in n.targets if isinstance(t, ast.Name)] == [variable]]
        match = re.search(rf"^{variable} = r?(\"\"\"|''')(.*?)\1", text, re.M | re.S)
        if match and values == [match.group(2)]:  # else escapes or concatenation: kept as written
            new = rewrite_yaml(match.group(2), f"{path} ({variable})", project,
                               examples=variable == "EXAMPLES", fragments=variable == "DOCUMENTATION",
                               first_line=text.count("\n", 0, match.start(2)))
            text = text[:match.start(2)] + new + text[match.end(2):]
    return text
