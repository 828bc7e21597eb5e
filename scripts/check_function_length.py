#!/usr/bin/env python3
"""Fail any function over 60 lines in the code that ships (STYLE.md: "no function over 60 lines").

    python scripts/check_function_length.py [--max N] [PATH...]

PATH: files or folders (default: library/, module_utils/, action_plugins/, filter_plugins/). A
function's length runs from its ``def`` line to its last line, docstring and
comments included (decorators not); nested functions count on their own and
inside the function that holds them. Ruff has no line-count rule (``PLR0915``
counts statements), so ``make lint`` and the lint step of scripts/run-tests.py
run this. Prints ``PATH:LINE: NAME is N lines (most MAX)`` per finding; exit 1
when there is one.
"""

import argparse
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_PATHS = ("library", "module_utils", "action_plugins", "filter_plugins")
MAX_LINES = 60


def python_files(paths):
    for given in paths:
        path = pathlib.Path(given)
        if path.is_dir():
            yield from sorted(path.rglob("*.py"))
        elif path.suffix == ".py":
            yield path


def long_functions(source, max_lines=MAX_LINES):
    """``(line, name, length)`` of each function of ``source`` longer than ``max_lines``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > max_lines:
                found.append((node.lineno, node.name, length))
    return sorted(found)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=MAX_LINES, help="most lines a function may have")
    parser.add_argument("paths", nargs="*", default=[str(ROOT / p) for p in DEFAULT_PATHS])
    args = parser.parse_args(argv)
    findings = 0
    for path in python_files(args.paths):
        for line, name, length in long_functions(path.read_text(encoding="utf-8"), args.max):
            print(f"{path}:{line}: {name} is {length} lines (most {args.max})")
            findings += 1
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
