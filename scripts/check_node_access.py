#!/usr/bin/env python3
"""Fail any code outside module_utils/gpunode/host/ that touches the node's files or processes itself.

    python scripts/check_node_access.py [PATH...]

PATH: files or folders (default: library/, module_utils/); files under
``module_utils/gpunode/host/`` (the host layer, DESIGN.md) are left out. Decided from
each file's AST: the imports give each name its qualified name (``import os.path as p``,
``from os import path``, ``from glob import glob as g``), and every use of a name or an
attribute chain (a call, or a function passed on: ``exists=os.path.exists``) is resolved
to one. Refused: ``open`` (also ``io``/``codecs``/``gzip``/``bz2``/``lzma.open``), anything
of ``glob``, ``shutil``, ``subprocess``, ``tempfile`` and ``pathlib.Path``, the file and
process calls of ``os`` (:data:`OS_CALLS`, ``exec*``, ``spawn*``), and every ``os.path``
function but the pure string ones (:data:`PURE_PATH`). Prints ``PATH:LINE: NAME`` per
finding; exit 1 when there is one.
"""

import argparse
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_PATHS = ("library", "module_utils")
HOST_LAYER = ("module_utils", "gpunode", "host")
OPENERS = {"open", "builtins.open", "io.open", "codecs.open", "gzip.open", "bz2.open", "lzma.open"}
MODULES = ("glob", "shutil", "subprocess", "tempfile")
CLASSES = {"pathlib.Path", "pathlib.PosixPath"}
OS_CALLS = {
    "access", "chdir", "chmod", "chown", "chroot", "close", "dup", "dup2", "fchmod", "fchown", "fdatasync",
    "fdopen", "fork", "forkpty", "fstat", "fsync", "ftruncate", "fwalk", "getxattr", "kill", "killpg",
    "lchmod", "lchown", "link", "listdir", "listxattr", "lseek", "lstat", "makedirs", "mkdir", "mkfifo",
    "mknod", "open", "pipe", "popen", "posix_spawn", "posix_spawnp", "pread", "pwrite", "read", "readlink",
    "remove", "removedirs", "removexattr", "rename", "renames", "replace", "rmdir", "scandir", "sendfile",
    "setxattr", "stat", "statvfs", "symlink", "system", "truncate", "unlink", "utime", "wait", "wait3",
    "wait4", "waitid", "waitpid", "walk", "write",
}
#: os.path's functions that only compute on the string (abspath: with the working directory), and
#: its constants
PURE_PATH = {"abspath", "basename", "commonpath", "commonprefix", "dirname", "isabs", "join", "normcase",
             "normpath", "relpath", "split", "splitdrive", "splitext",
             "altsep", "curdir", "defpath", "devnull", "extsep", "pardir", "pathsep", "sep"}
SAME_AS = {"posixpath": "os.path", "ntpath": "os.path"}


def python_files(paths):
    for given in paths:
        path = pathlib.Path(given)
        if path.is_dir():
            yield from sorted(path.rglob("*.py"))
        elif path.suffix == ".py":
            yield path


def in_host_layer(path):
    parts = pathlib.Path(path).resolve().parts
    return any(parts[i:i + len(HOST_LAYER)] == HOST_LAYER for i in range(len(parts)))


def _canonical(name):
    head, dot, rest = name.partition(".")
    return SAME_AS.get(head, head) + dot + rest


def imported_names(tree):
    """``{local name: qualified name}`` of the module's imports (a later import wins)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = _canonical(alias.name)
                else:
                    top = alias.name.split(".")[0]
                    names[top] = _canonical(top)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = _canonical(f"{node.module}.{alias.name}")
    return names


def qualified(node, names):
    """The qualified name of a name or attribute chain (``os.path.exists``), or None."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    base = names.get(node.id, node.id if node.id == "open" else None)
    if base is None:
        return None
    return ".".join([base, *reversed(attrs)])


def refused(name):
    """Whether the qualified ``name`` reads or changes the node's files or processes."""
    module, _dot, func = name.rpartition(".")
    if name in OPENERS or name in CLASSES or name.split(".")[0] in MODULES:
        return True
    if module == "os":
        return func in OS_CALLS or func.startswith(("exec", "spawn"))
    if module == "os.path":
        return func not in PURE_PATH
    return False


def node_access(source):
    """``(line, name)`` of each use of a refused function in ``source``."""
    tree = ast.parse(source)
    names = imported_names(tree)
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in inner:
            continue  # a chain (os.path.exists) is judged whole, at its outermost attribute
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
            name = qualified(node, names)
            if name and refused(name):
                found.add((node.lineno, name))
    return sorted(found)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=[str(ROOT / p) for p in DEFAULT_PATHS])
    args = parser.parse_args(argv)
    findings = 0
    for path in python_files(args.paths):
        if in_host_layer(path):
            continue
        for line, name in node_access(path.read_text(encoding="utf-8")):
            print(f"{path}:{line}: {name} touches the node: go through module_utils/gpunode/host/")
            findings += 1
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
