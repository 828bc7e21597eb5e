#!/usr/bin/env python3
"""Run ``ansible-test sanity`` on an installed copy of the collection, with no ignore file.

    python scripts/collection_sanity.py --collection DIR/ansible_collections/NS/NAME
                                        [--allow-missing-pythons] [-- ANSIBLE-TEST OPTIONS...]

scripts/test-collection.sh installs the built tarball into a temporary
directory and calls this with it (``make collection`` runs both). The
directory must not lie inside a git work tree: ansible-test would then take
its file list from git, which ignores build output, and test nothing.

1. ansible-test builds a virtual environment per sanity test and bootstraps pip
   into each with a script it downloads from ci-files.testing.ansible.com,
   which CI cannot reach. It reads that script from its cache
   (~/.ansible/test/cache/get_pip_<version>.py) when present, the place its own
   error message says to save it. scripts/ansible_test_get_pip.py, which does
   the same from the interpreter's own ``ensurepip`` and PyPI, is saved there
   (a file already there that is not ours is left alone). The tests'
   requirements then come from PyPI (or the PIP_* settings) as usual.
2. The multi-version tests (compile, import) run on every Python that
   ansible-test supports for modules (3.8 to 3.13 with ansible-core 2.19). The
   interpreters are taken from PATH and from pyenv's versions; a missing one
   fails the run unless --allow-missing-pythons is given (it is then listed).
3. ``ansible-test sanity --local`` runs in the collection's directory; a
   tests/sanity/ignore-*.txt there fails the run: the collection has none.
"""

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import time
from types import SimpleNamespace

from ansible_test._internal.constants import SUPPORTED_PYTHON_VERSIONS
from ansible_test._internal.python_requirements import get_venv_packages

ROOT = pathlib.Path(__file__).resolve().parent.parent
BOOTSTRAP = ROOT / "scripts" / "ansible_test_get_pip.py"
BOOTSTRAP_MARK = "gpunode-collection-pip-bootstrap"


class SanityError(Exception):
    """The sanity run cannot start; the message says why."""


def check_collection(path):
    if not any((path / name).is_file() for name in ("galaxy.yml", "MANIFEST.json")):
        raise SanityError(f"{path}: not a collection (no galaxy.yml or MANIFEST.json)")
    if path.parent.parent.name != "ansible_collections":
        raise SanityError(f"{path}: ansible-test needs the collection at .../ansible_collections/NS/NAME")
    inside_git = subprocess.run(["git", "-C", str(path), "rev-parse", "--is-inside-work-tree"],
                                capture_output=True, text=True, check=False)
    if inside_git.stdout.strip() == "true":
        raise SanityError(f"{path}: inside a git work tree; install the tarball elsewhere "
                          "(scripts/test-collection.sh does)")
    ignores = sorted((path / "tests" / "sanity").glob("ignore-*.txt"))
    if ignores:
        raise SanityError(f"{ignores[0]}: the collection must pass sanity without an ignore file")


def pip_versions(python_versions):
    """The pip versions ansible-test bootstraps into sanity environments for these Pythons."""
    return sorted({get_venv_packages(SimpleNamespace(version=v))["pip"] for v in python_versions})


def install_pip_bootstrap(versions):
    """Save our bootstrap script where ansible-test looks for get_pip_<version>.py."""
    cache = pathlib.Path.home() / ".ansible" / "test" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    script = BOOTSTRAP.read_text(encoding="utf-8")
    for version in versions:
        target = cache / f"get_pip_{version.replace('.', '_')}.py"
        if target.is_file() and BOOTSTRAP_MARK not in target.read_text(encoding="utf-8", errors="replace"):
            print(f"sanity: keeping {target} (not ours: a get-pip script saved by hand or downloaded)")
            continue
        if not target.is_file() or target.read_text(encoding="utf-8") != script:
            target.write_text(script, encoding="utf-8")
            print(f"sanity: pip {version} bootstrap for ansible-test: {target}")


def pyenv_bin_dirs(versions):
    """bin/ of the newest pyenv interpreter of each wanted X.Y, if pyenv is installed."""
    root = os.environ.get("PYENV_ROOT") or str(pathlib.Path.home() / ".pyenv")
    pyenv = shutil.which("pyenv")
    if pyenv:
        out = subprocess.run([pyenv, "root"], capture_output=True, text=True, check=False)
        if out.returncode == 0 and out.stdout.strip():
            root = out.stdout.strip()
    installed = pathlib.Path(root) / "versions"
    dirs = {}
    if installed.is_dir():
        def numeric(entry):
            return [int(part) if part.isdigit() else 0 for part in entry.name.split(".")]

        for entry in sorted(installed.iterdir(), key=numeric):
            xy = ".".join(entry.name.split(".")[:2])
            if xy in versions and (entry / "bin" / f"python{xy}").is_file():
                dirs[xy] = str(entry / "bin")
    return dirs


def find_pythons(versions, path):
    """X.Y -> interpreter path, for the versions found on ``path``."""
    found = {}
    for version in versions:
        exe = shutil.which(f"python{version}", path=path)
        if exe and ".pyenv/shims" not in exe:
            found[version] = exe
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--collection", type=pathlib.Path, required=True,
                        help="the installed collection: .../ansible_collections/NS/NAME")
    parser.add_argument("--allow-missing-pythons", action="store_true",
                        help="run on the supported Pythons found, list the others (default: fail)")
    parser.add_argument("ansible_test_args", nargs="*", help="more ansible-test sanity options (after --)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        path = args.collection.resolve()
        check_collection(path)
        versions = list(SUPPORTED_PYTHON_VERSIONS)
        extra_dirs = pyenv_bin_dirs(versions)
        search_path = os.pathsep.join([*extra_dirs.values(), os.environ.get("PATH", "")])
        found = find_pythons(versions, search_path)
        missing = [v for v in versions if v not in found]
        if missing and not args.allow_missing_pythons:
            raise SanityError(
                f"Python {', '.join(missing)} not found (PATH, pyenv): ansible-test would skip the "
                "compile and import tests there. Install them, or pass --allow-missing-pythons"
            )
        install_pip_bootstrap(pip_versions(found))
    except SanityError as exc:
        print(f"sanity: {exc}", file=sys.stderr)
        return 2
    print(f"sanity: {path}")
    skipped = f" (not found, skipped: {', '.join(missing)})" if missing else ""
    print(f"sanity: Python {', '.join(found)}{skipped}")
    env = dict(os.environ, PATH=search_path)
    command = ["ansible-test", "sanity", "--local", "--color", "no", *args.ansible_test_args]
    result = subprocess.run(command, cwd=path, env=env, check=False)
    print(f"sanity: ansible-test sanity exited {result.returncode} after {time.monotonic() - started:.0f} s")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
