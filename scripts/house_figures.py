#!/usr/bin/env python3
"""Print the size of the house: product code lines, statements and public module options.

    python scripts/house_figures.py [--per-package] [ROOT]

- code lines: lines holding Python tokens in library/, module_utils/ and the plugin
  folders (``*_plugins/``), without comments, docstrings and the
  DOCUMENTATION/EXAMPLES/RETURN strings (issue 39's measure; joining lines changes
  the count, so statements are printed too);
- statements: Python statements in the same files, the same strings left out;
- module options: the top-level options of every module in library/, its own and
  those of the gpunode doc fragments (doc_fragments/) it extends; suboptions and
  ansible-core's own fragments not counted.

``make lint`` prints them; it fails on nothing (the figures are for the closing
notes and reviews, docs/DEVELOPING.md "The size of the house").
"""

import argparse
import ast
import io
import pathlib
import sys
import tokenize

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC_STRINGS = ("DOCUMENTATION", "EXAMPLES", "RETURN")


def product_files(root):
    """The Python files that ship: library/, module_utils/ and every ``*_plugins`` folder."""
    files = set(root.glob("library/*.py")) | set(root.glob("module_utils/**/*.py"))
    for folder in root.glob("*_plugins"):
        files |= set(folder.rglob("*.py"))
    return sorted(files)


def documentation_lines(tree):
    """The line numbers of docstrings and module documentation strings in ``tree``."""
    ranges = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                ranges.append((first.lineno, first.end_lineno))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") in DOC_STRINGS for t in node.targets):
            ranges.append((node.lineno, node.end_lineno))
    return {line for start, end in ranges for line in range(start, end + 1)}


def file_figures(source):
    """``(code lines, statements)`` of one file's source."""
    tree = ast.parse(source)
    skip = documentation_lines(tree)
    statements = sum(1 for node in ast.walk(tree) if isinstance(node, ast.stmt) and node.lineno not in skip)
    ignored = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
               tokenize.ENDMARKER}
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in ignored:
            lines.update(line for line in range(token.start[0], token.end[0] + 1) if line not in skip)
    return len(lines), statements


def documentation(source, name="DOCUMENTATION"):
    """The YAML of a module's (or fragment's) ``name`` string, parsed; {} without one."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == name for t in node.targets) \
                and isinstance(node.value, ast.Constant):
            return yaml.safe_load(node.value.value) or {}
    return {}


def module_options(root):
    """The number of top-level options of every module in library/, fragments' included."""
    fragments = {path.stem: documentation(path.read_text(encoding="utf-8")).get("options") or {}
                 for path in root.glob("doc_fragments/*.py")}
    count = 0
    for path in root.glob("library/*.py"):
        doc = documentation(path.read_text(encoding="utf-8"))
        options = set(doc.get("options") or {})
        extends = doc.get("extends_documentation_fragment") or []
        for fragment in [extends] if isinstance(extends, str) else extends:
            options |= set(fragments.get(fragment.split(".")[-1], {}))
        count += len(options)
    return count


def figures(root):
    """``{"code lines": n, "statements": n, "module options": n, "per package": {...}}``."""
    per_package = {}
    lines_total = statements_total = 0
    for path in product_files(root):
        lines, statements = file_figures(path.read_text(encoding="utf-8"))
        lines_total += lines
        statements_total += statements
        parts = path.relative_to(root).parts
        package = "/".join(parts[:3]) if parts[0] == "module_utils" and len(parts) > 3 else parts[0]
        per_package[package] = per_package.get(package, 0) + lines
    return {"code lines": lines_total, "statements": statements_total,
            "module options": module_options(root), "per package": per_package}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-package", action="store_true", help="code lines per package too")
    parser.add_argument("root", nargs="?", default=str(ROOT))
    args = parser.parse_args(argv)
    found = figures(pathlib.Path(args.root))
    if args.per_package:
        for package, lines in sorted(found["per package"].items(), key=lambda item: -item[1]):
            print(f"  {package}: {lines}")
    print("house: {} code lines, {} statements, {} public module options".format(
        found["code lines"], found["statements"], found["module options"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
