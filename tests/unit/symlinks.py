"""Symbolic links in place of the files gpunode edits, for the editing modules' tests.

``Link.make(path, layout, text)`` turns ``path`` into a link of one layout and
gives its target ``text`` (None: the target does not exist, a dangling link):

- ``absolute``: an absolute link into another folder (a managed tree);
- ``relative``: a relative link (``../../managed/...``) into another folder;
- ``chain``: an absolute link to a link, itself relative, to the file;
- ``sibling``: a relative link to a file beside it (only where nothing reads
  the folder by glob: a conf.d would load the target as well).

Every target lives under ``managed/`` next to the folder tree the test
builds (``tmp_path``), never in a folder a module reads by glob.
``snapshot(root)`` records a tree (links, contents, modes) to prove check
mode wrote nothing.
"""

import os
import pathlib
import stat

ELSEWHERE = ["absolute", "relative", "chain"]
LAYOUTS = [*ELSEWHERE, "sibling"]


class Link:
    """A link made by ``make``: ``path``, ``target`` (the real file) and ``value`` (readlink)."""

    def __init__(self, path, target, value):
        self.path, self.target, self.value = path, target, value

    @classmethod
    def make(cls, path, layout, text, root=None):
        path = pathlib.Path(path)
        root = pathlib.Path(root) if root else path.parent
        managed = root / "managed" / layout
        path.parent.mkdir(parents=True, exist_ok=True)
        if layout == "sibling":
            target = path.parent / (path.name + ".real")
            value = target.name
        elif layout == "chain":
            target = managed / "real" / path.name
            middle = managed / "middle" / path.name
            middle.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.path.join("..", "real", path.name), middle)
            value = str(middle)
        else:
            target = managed / path.name
            value = str(target) if layout == "absolute" else os.path.relpath(target, path.parent)
        target.parent.mkdir(parents=True, exist_ok=True)
        if text is not None:
            target.write_text(text)
            os.chmod(target, 0o640)
        if path.exists() or path.is_symlink():
            path.unlink()
        os.symlink(value, path)
        return cls(path, target, value)

    def kept(self):
        """The link is still a link, to the same place, and resolves to the target."""
        return (self.path.is_symlink() and os.readlink(self.path) == self.value
                and self.path.resolve() == self.target.resolve())

    def text(self):
        return self.target.read_text()


def backup_text(path):
    """A backup's text; fails when it is not a regular file (a link, say)."""
    assert stat.S_ISREG(os.lstat(path).st_mode), f"{path}: not a regular file"
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def snapshot(root):
    """Every entry under ``root``: links as their value, files as (bytes, mode, mtime), folders."""
    seen = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                seen[path] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                seen[path] = ("dir",)
            else:
                with open(path, "rb") as handle:
                    seen[path] = ("file", handle.read(), info.st_mode, info.st_mtime_ns)
    return seen
