#!/usr/bin/env python3
"""Run ``ansible-test sanity`` on an installed copy of the collection, with no ignore entry but one.

    python scripts/collection_sanity.py --collection DIR/ansible_collections/NS/NAME
                                        [--allow-missing-pythons | --controller-python-only]
                                        [-- ANSIBLE-TEST OPTIONS...]

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
   interpreters are those ``make unit`` uses (scripts/unit-tests.py
   ``find_interpreter``: pyenv's newest of each X.Y, else pythonX.Y on PATH);
   a missing one fails the run unless --allow-missing-pythons is given (it is
   then listed). With --controller-python-only they run on this interpreter's
   Python only (``ansible-test sanity --python X.Y``): ``make ci`` runs them on
   every Python with the oldest ansible-core (the ``collection`` step) and on
   the controller's with the newest (``collection:newest``), whose other Pythons
   that run proves nothing new about our files (the same compile, the same
   imports: 4 of its 5 interpreters' import tests cost 32 of their 43 CPU
   seconds); the unit tests run the code on every target Python, 3.14 included.
3. ``ansible-test sanity --local`` runs in the collection's directory; an entry of its
   tests/sanity/ignore-*.txt other than ALLOWED_IGNORES (gpu_node_condition's ``message``,
   below) fails the run.
"""

import argparse
import importlib.util
import os
import pathlib
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


#: The one entry the collection's ignore files may hold, twice: gpu_node_condition's option
#: ``message`` is DESIGN.md's contract (the Node condition's own field). validate-modules reserves
#: the name from when a module's ``message`` clashed with the journal's MESSAGE field;
#: AnsibleModule.log has escaped that field (``_MESSAGE``) since, so the module logs and runs as
#: any other. The second code follows from the first (validate-modules skips the option).
ALLOWED_IGNORES = {
    ("plugins/modules/gpu_node_condition.py", "validate-modules:invalid-argument-name"),
    ("plugins/modules/gpu_node_condition.py", "validate-modules:nonexistent-parameter-documented"),
}


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
    for ignore in sorted((path / "tests" / "sanity").glob("ignore-*.txt")):
        for number, line in enumerate(ignore.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip() and tuple(line.split()) not in ALLOWED_IGNORES:
                raise SanityError(f"{ignore}:{number}: {line!r}: the collection passes sanity with no ignore "
                                  "entry but those of ALLOWED_IGNORES (scripts/collection_sanity.py)")


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


def load_unit_tests():
    """scripts/unit-tests.py, whose find_interpreter() also finds the target Pythons for make unit."""
    spec = importlib.util.spec_from_file_location("unit_tests", ROOT / "scripts" / "unit-tests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def find_pythons(versions):
    """(X.Y -> interpreter, missing X.Y): pyenv's newest of each, else pythonX.Y on PATH."""
    unit_tests = load_unit_tests()
    found, missing = {}, []
    for version in versions:
        try:
            found[version] = unit_tests.find_interpreter(version)
        except SystemExit:  # it has said which one it did not find, and where it looked
            missing.append(version)
    return found, missing


def controller_python():
    """({X.Y: this interpreter}, []) for --controller-python-only."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    if version not in SUPPORTED_PYTHON_VERSIONS:
        raise SanityError(f"Python {version} (this interpreter) is not one ansible-test supports")
    return {version: pathlib.Path(sys.executable)}, []


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--collection", type=pathlib.Path, required=True,
                        help="the installed collection: .../ansible_collections/NS/NAME")
    parser.add_argument("--allow-missing-pythons", action="store_true",
                        help="run on the supported Pythons found, list the others (default: fail)")
    parser.add_argument("--controller-python-only", action="store_true",
                        help="run the compile and import tests on this interpreter's Python only")
    parser.add_argument("ansible_test_args", nargs="*", help="more ansible-test sanity options (after --)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        path = args.collection.resolve()
        check_collection(path)
        if args.controller_python_only:
            found, missing = controller_python()
        else:
            found, missing = find_pythons(list(SUPPORTED_PYTHON_VERSIONS))
        if missing and not args.allow_missing_pythons:
            raise SanityError(
                f"Python {', '.join(missing)} not found (pyenv, PATH): ansible-test would skip the "
                "compile and import tests there. Install them, or pass --allow-missing-pythons"
            )
        # ansible-test looks for pythonX.Y on PATH
        path_dirs = os.environ.get("PATH", "").split(os.pathsep)
        extra_dirs = [str(exe.parent) for exe in found.values() if str(exe.parent) not in path_dirs]
        search_path = os.pathsep.join([*dict.fromkeys(extra_dirs), *path_dirs])
        install_pip_bootstrap(pip_versions(found))
    except SanityError as exc:
        print(f"sanity: {exc}", file=sys.stderr)
        return 2
    print(f"sanity: {path}")
    skipped = f" (not found, skipped: {', '.join(missing)})" if missing else ""
    print(f"sanity: Python {', '.join(found)}{skipped}")
    env = dict(os.environ, PATH=search_path)
    # this virtualenv's ansible-test, whatever the interpreter directories put first on PATH hold
    ansible_test = pathlib.Path(sys.executable).parent / "ansible-test"
    command = [str(ansible_test), "sanity", "--local", "--color", "no"]
    if args.controller_python_only:  # the multi-version tests on this one (ansible-test uses sys.executable)
        command += ["--python", next(iter(found))]
    command += args.ansible_test_args
    result = subprocess.run(command, cwd=path, env=env, check=False)
    print(f"sanity: ansible-test sanity exited {result.returncode} after {time.monotonic() - started:.0f} s")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
