#!/usr/bin/env python3
"""Run the unit tests on every Python that runs gpunode's code (`make unit`).

Two kinds of code, two kinds of runs:

- Target code (library/, module_utils/, role-level library/, the simulated
  node's scripts) runs on managed nodes under Python 3.8 to 3.14: 3.8 to 3.13
  with the pinned (oldest) ansible-core of the supported range (read from its
  ansible-test constants), 3.14 with the newest. Each of 3.8 to 3.13 (pyenv's)
  gets a virtualenv under .cache/unit/ with the test dependencies
  pinned in requirements-unit/py3.X.txt, and `ansible.module_utils` alone on
  PYTHONPATH: an empty `ansible` package whose module_utils is the pinned
  ansible-core's, the code AnsiballZ ships to a node. ansible-test does the same
  for target unit tests (get_units_ansible_python_path in
  test/lib/ansible_test/_internal/commands/units/__init__.py). The controller
  (ansible-core >= 2.17 needs Python >= 3.11 there) is never importable in
  these runs; tests marked `controller` are skipped there, with the reason.
  3.14, which pyenv lacks, runs as Debian sid's python3 in a container
  (CONTAINER_PYTHONS; tests/simnode/build-unit-image.sh builds the image), with
  Debian's packages of the test dependencies and the newest ansible-core's
  module_utils (.venv-newest).
- Controller-side tests (marked `controller`: filter plugins, templates,
  ansible-playbook) run once, on the controller's Python (this interpreter,
  the project's .venv; --controller-only in .venv-newest for the newest).

The Hypothesis properties draw all their examples on the range's ends (3.8, 3.14)
and a quarter of them on the Pythons between (GPUNODE_HYPOTHESIS_SHARE, read by
tests/unit/conftest.py's ``examples``): the same code paths, new examples each run.

Every run takes the tests in a random order (pytest-random-order: modules
shuffled, tests shuffled in each), with one seed per invocation, printed first
and last; UNIT_SEED=N (or --seed N) repeats an order.

Environments are reused while their lock file and interpreter are unchanged:
they live outside the checkout, under ~/.cache/gpunode/unit-venvs/ (UNIT_VENV_CACHE
overrides), one per Python and SHA-256 of the lock file, the interpreter's path
and its exact version, so that every clone and worktree of the machine (CI's
fresh clone included) uses the one built for the same inputs, and a changed lock
file gets a new one. A lock file per environment makes concurrent runs build it
once; one unused for 14 days is removed. uv makes and fills them (``uv venv``,
``uv pip install --python``; scripts/bootstrap.sh installs it from requirements-tools.txt):
pip and ensurepip cost 21 CPU seconds each, uv under 2.
Runs go side by side (--jobs, default: the CPU count). Each run's pytest output
is printed whole when it ends, then one table: per interpreter, how many tests
ran, passed, failed, were skipped (and why), and how long it took. The exit
status is non-zero when any run failed, errored or collected nothing.

Usage:
  scripts/unit-tests.py [--python 3.8 ...] [--jobs N] [-- PYTEST_ARGS...]
  scripts/unit-tests.py --lock        regenerate requirements-unit/py3.X.txt
  scripts/unit-tests.py --controller-only   the controller-side tests only
  scripts/unit-tests.py --interpreter 3.12  print the interpreter used for 3.12
  UNIT_PYTHONS="3.8 3.13" make unit   only these interpreters (and the controller)
"""

import argparse
import concurrent.futures
import contextlib
import fcntl
import hashlib
import importlib
import importlib.util
import json
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "unit"
UV = ROOT / ".cache" / "tools" / "bin" / "uv"  # scripts/bootstrap.sh installs it (requirements-tools.txt)
LOCK_INPUT = ROOT / "requirements-unit.in"
LOCK_DIR = ROOT / "requirements-unit"
TESTS = ["tests/unit"]
PYTEST_BASE = ["-p", "no:cacheprovider", "-q", "-rfEs", "--continue-on-collection-errors"]
# Target Pythons that no pyenv interpreter serves: Debian's own python3 in a container
# of the suite's image (tests/simnode/build-unit-image.sh: python3 with Debian's
# pytest, PyYAML, hypothesis, TOML parsers; kubernetes-validate is not packaged, the
# tests that need it skip saying so). Their module_utils are the newest ansible-core's
# (NEWEST_VENV), the one of the supported range that serves these Pythons.
CONTAINER_PYTHONS = {"3.14": "sid"}
#: the target Pythons' virtualenvs, shared by every checkout of this machine (keyed by their inputs)
VENV_CACHE = pathlib.Path(os.environ.get("UNIT_VENV_CACHE")
                          or pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
                          / "gpunode" / "unit-venvs")
#: an environment of VENV_CACHE unused this long is removed when another of its Python is made
VENV_MAX_IDLE = 14 * 24 * 3600
NEWEST_VENV = ROOT / os.environ.get("UNIT_NEWEST_VENV", ".venv-newest")


def fail(msg):
    print(f"unit-tests: {msg}", file=sys.stderr)
    sys.exit(2)


def controller_modules():
    """The controller's ansible-core: its module_utils path, version and target Pythons."""
    try:  # the controller's ansible-core (the project's .venv); imported here, so that
        # --interpreter works on any Python (scripts/bootstrap.sh asks it for .venv-newest's)
        module_utils = importlib.import_module("ansible.module_utils")
        release = importlib.import_module("ansible.release")
        constants = importlib.import_module("ansible_test._util.target.common.constants")
    except ImportError as exc:
        sys.exit(f"unit-tests: ansible-core is not importable by {sys.executable} ({exc}); "
                 "run it through `make unit`, which uses the project's .venv")
    targets = tuple(constants.REMOTE_ONLY_PYTHON_VERSIONS) + tuple(constants.CONTROLLER_PYTHON_VERSIONS)
    return pathlib.Path(module_utils.__file__).parent, release.__version__, targets


def venv_module_utils(venv):
    """``(module_utils path, ansible-core version)`` of another virtualenv's ansible-core, or None."""
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    proc = subprocess.run([str(python), "-c", "import ansible.module_utils, ansible.release; "
                           "print(ansible.module_utils.__path__[0]); print(ansible.release.__version__)"],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return None
    path, version = proc.stdout.split()
    return pathlib.Path(path), version


def version_key(text):
    return tuple(int(part) for part in re.findall(r"\d+", text))


def pyenv_root():
    if shutil.which("pyenv"):
        proc = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            return pathlib.Path(proc.stdout.strip())
    return pathlib.Path(os.environ.get("PYENV_ROOT", pathlib.Path.home() / ".pyenv"))


def find_interpreter(minor):
    """The newest pyenv interpreter of this X.Y, else pythonX.Y on PATH; exits when there is none."""
    exe = local_interpreter(minor)
    if exe is None:
        fail(f"no Python {minor}: looked in {pyenv_root() / 'versions'}/{minor}.* and for python{minor} "
             f"on PATH (install it with pyenv, or choose interpreters with UNIT_PYTHONS)")
    return exe


def local_interpreter(minor):
    """The newest pyenv interpreter of this X.Y, else pythonX.Y on PATH, else None."""
    versions = pyenv_root() / "versions"
    candidates = sorted(
        (p for p in versions.glob(f"{minor}.*") if re.fullmatch(rf"{re.escape(minor)}\.\d+", p.name)),
        key=lambda p: version_key(p.name),
    )
    for home in reversed(candidates):
        exe = home / "bin" / f"python{minor}"
        if os.access(exe, os.X_OK):
            return exe
    found = shutil.which(f"python{minor}")
    return pathlib.Path(found) if found else None


def interpreter_version(exe):
    proc = subprocess.run([str(exe), "-c", "import platform; print(platform.python_version())"],
                          capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def lock_file(minor):
    return LOCK_DIR / f"py{minor}.txt"


def ensure_env(minor, exe, log):
    """The virtualenv of this Python with its locked test dependencies; reused when unchanged.

    It lives in VENV_CACHE under a name of its inputs (the lock file, the interpreter's path and
    version): any checkout asking for the same gets the same, a changed input a new one. Built under
    a file lock, its stamp written last: a folder without it is half made and made again."""
    lock = lock_file(minor)
    if not lock.is_file():
        raise RuntimeError(f"{lock} is missing: run `make unit-lock`")
    want = hashlib.sha256(lock.read_bytes() + f"\n{exe}\n{interpreter_version(exe)}".encode()).hexdigest()
    VENV_CACHE.mkdir(parents=True, exist_ok=True)
    env = VENV_CACHE / f"py{minor}-{want[:16]}"
    stamp = env / ".gpunode-lock.sha256"
    python = env / "bin" / "python"
    with open(VENV_CACHE / f"{env.name}.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if python.exists() and stamp.is_file() and stamp.read_text().strip() == want:
            os.utime(stamp)
            return python, False
        shutil.rmtree(env, ignore_errors=True)
        if not UV.is_file():
            raise RuntimeError(f"{UV} is missing: run `make bootstrap` (requirements-tools.txt)")
        uv = str(UV)
        for argv in ([uv, "venv", "--quiet", "--clear", "--python", str(exe), str(env)],
                     [uv, "pip", "install", "--quiet", "--python", str(python), "--no-deps", "-r", str(lock)],
                     [uv, "pip", "check", "--python", str(python)]):
            log.write(f"$ {' '.join(argv)}\n")
            log.flush()
            proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False)
            if proc.returncode != 0:
                raise RuntimeError(f"{' '.join(argv)} failed (rc {proc.returncode})")
        stamp.write_text(want + "\n")
    prune_envs(minor, keep=env)
    return python, True


def prune_envs(minor, keep):
    """Remove this Python's environments of VENV_CACHE that no run has used for VENV_MAX_IDLE."""
    for old in VENV_CACHE.glob(f"py{minor}-*"):
        if old == keep or not old.is_dir():
            continue
        with open(VENV_CACHE / f"{old.name}.lock", "w") as held, contextlib.suppress(OSError):
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # in use (being built): leave it
            stamp = old / ".gpunode-lock.sha256"
            used = stamp.stat().st_mtime if stamp.is_file() else old.stat().st_mtime
            if time.time() - used > VENV_MAX_IDLE:
                shutil.rmtree(old, ignore_errors=True)
                (VENV_CACHE / f"{old.name}.lock").unlink()


def target_path(module_utils, name="target"):
    """A PYTHONPATH entry holding only ansible.module_utils (ansible-test's layout for target tests)."""
    path = CACHE / name
    package = path / "ansible"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    link = package / "module_utils"
    if not (link.is_symlink() and os.readlink(link) == str(module_utils)):
        tmp = package / ".module_utils.tmp"
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(module_utils, target_is_directory=True)
        tmp.replace(link)
    return path


def parse_junit(path):
    """Counts from pytest's junit XML, and why tests were skipped (reason -> count)."""
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    reasons = {}
    if not path.is_file():
        return counts, reasons
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    for suite in suites:
        for key in counts:
            counts[key] += int(suite.get(key, 0))
        for case in suite.iter("testcase"):
            skipped = case.find("skipped")
            if skipped is not None:
                reason = re.sub(r"^Skipped: ", "", skipped.get("message", ""))
                reasons[reason] = reasons.get(reason, 0) + 1
    return counts, reasons


class Run:
    """One pytest run: a target Python in its env, or the controller's Python."""

    def __init__(self, name, context, exe, image=None):
        self.name = name
        self.context = context
        self.exe = exe
        self.image = image  # the container image whose python3 runs the tests (exe: None)
        self.version = ""
        self.log = CACHE / "logs" / f"{name}.log"
        self.junit = CACHE / "results" / f"{name}.xml"
        self.rc = None
        self.seconds = 0.0
        self.error = None
        self.counts = {}
        self.reasons = {}
        self.note = ""
        self.hypothesis_share = 1  # GPUNODE_HYPOTHESIS_SHARE (tests/unit/conftest.py)


def ensure_image(run, log):
    """Build (or reuse) the run's container image; its python3's version."""
    suite = run.image.split(":")[0].removeprefix("gpunode-").removesuffix("-unit")
    proc = subprocess.run(["bash", str(ROOT / "tests" / "simnode" / "build-unit-image.sh"), suite],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    log.write(proc.stdout)
    if proc.returncode != 0:
        raise RuntimeError(f"tests/simnode/build-unit-image.sh {suite} failed (rc {proc.returncode})")
    return proc.stdout.split()[-1]


def container_argv(run, module_utils, pythonpath):
    """``docker run`` of the run's image: the checkout, ../shared and module_utils at their own
    paths, read-only; only the junit folder writable; no network."""
    mounts = [ROOT, module_utils] + ([ROOT.parent / "shared"] if (ROOT.parent / "shared").is_dir() else [])
    argv = ["docker", "run", "--rm", "--network", "none", "-w", str(ROOT)]
    for path in mounts:
        argv += ["-v", f"{path}:{path}:ro"]
    argv += ["-v", f"{run.junit.parent}:{run.junit.parent}"]
    env = {"PYTHONPATH": str(pythonpath), "PYTHONDONTWRITEBYTECODE": "1", "PY_COLORS": "0", "NO_COLOR": "1",
           "HYPOTHESIS_STORAGE_DIRECTORY": "/tmp/hypothesis",
           "GPUNODE_HYPOTHESIS_SHARE": str(run.hypothesis_share)}
    if os.environ.get("GPUNODE_TESTS_WITHOUT_SHARED"):
        env["GPUNODE_TESTS_WITHOUT_SHARED"] = os.environ["GPUNODE_TESTS_WITHOUT_SHARED"]
    for key, value in env.items():
        argv += ["-e", f"{key}={value}"]
    return [*argv, run.image, "python3"]


def run_one(run, pytest_args, target_pythonpath, order_args=(), container=None):
    start = time.monotonic()
    run.log.parent.mkdir(parents=True, exist_ok=True)
    run.junit.parent.mkdir(parents=True, exist_ok=True)
    if run.junit.exists():
        run.junit.unlink()
    with run.log.open("w") as log:
        try:
            env = dict(os.environ, PYTHONPYCACHEPREFIX=str(CACHE / "pycache" / run.name),
                       PY_COLORS="0", NO_COLOR="1", GPUNODE_HYPOTHESIS_SHARE=str(run.hypothesis_share))
            env.pop("PYTHONPATH", None)
            select = []
            if run.image:
                run.version = ensure_image(run, log)
                python = container_argv(run, container[0], container[1])
                suite = run.image.split("-")[1]
                run.note = f"Debian {suite} container, ansible-core {container[2]}'s module_utils"
            elif run.context == "target":
                run.version = interpreter_version(run.exe)
                python, created = ensure_env(run.name.removeprefix("py"), run.exe, log)
                python = [str(python)]
                run.note = "new env" if created else ""
                env["PYTHONPATH"] = str(target_pythonpath)
            else:
                run.version = interpreter_version(run.exe)
                python = [str(run.exe)]
                select = ["-m", "controller"]
                if importlib.util.find_spec("random_order") is None:  # a .venv from before the plugin
                    order_args = ()
                    run.note = "file order: pytest-random-order is not installed here (make bootstrap)"
            argv = [*python, "-m", "pytest", *PYTEST_BASE, *order_args, f"--junitxml={run.junit}", *select,
                    *(pytest_args or TESTS)]
            log.write(f"$ {' '.join(argv)}\n")
            log.flush()
            run.rc = subprocess.run(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    check=False).returncode
        except (OSError, RuntimeError, subprocess.CalledProcessError) as exc:
            run.error = str(exc)
            log.write(f"unit-tests: {exc}\n")
    run.seconds = time.monotonic() - start
    run.counts, run.reasons = parse_junit(run.junit)
    return run


def failed(run):
    if run.error or run.rc not in (0,):
        return True
    return run.counts["failures"] or run.counts["errors"] or not run.counts["tests"]


def report(runs, ansible_version):
    print("\n=== unit tests per interpreter (ran = passed + failed; skipped tests did not run)")
    header = f"{'python':<10} {'context':<11} {'ran':>5} {'passed':>6} {'failed':>6} {'errors':>6} " \
             f"{'skipped':>7} {'time':>6}  note"
    print(header)
    for run in runs:
        c = run.counts
        ran = c.get("tests", 0) - c.get("skipped", 0) - c.get("errors", 0)
        passed = ran - c.get("failures", 0)
        controller_skips = sum(n for reason, n in run.reasons.items() if reason.startswith("controller-side"))
        notes = [run.note] if run.note else []
        if run.context == "controller":
            venv = pathlib.Path(sys.prefix).name
            notes.append(f"{venv}, ansible-core {ansible_version}, tests marked controller")
        if controller_skips:
            notes.append(f"{controller_skips} controller-side skipped")
        if run.hypothesis_share > 1:
            notes.append(f"Hypothesis examples 1/{run.hypothesis_share}")
        if run.error:
            notes.append(f"ERROR: {run.error}")
        elif run.rc not in (0,):
            notes.append(f"pytest rc {run.rc}")
        if not c.get("tests") and not run.error:
            notes.append("no test collected")
        print(f"{run.version or run.name:<10} {run.context:<11} {ran:>5} {passed:>6} "
              f"{c.get('failures', 0):>6} {c.get('errors', 0):>6} {c.get('skipped', 0):>7} "
              f"{run.seconds:>5.0f}s  {'; '.join(notes)}")
    other = {}
    for run in runs:
        for reason, n in run.reasons.items():
            if not reason.startswith("controller-side"):
                other.setdefault(reason, []).append(f"{run.version or run.name}: {n}")
    if other:
        print("skipped for other reasons:")
        for reason, where in sorted(other.items()):
            print(f"  {reason} ({', '.join(where)})")
    bad = [run for run in runs if failed(run)]
    failed_names = ", ".join(r.version or r.name for r in bad)
    print(f"unit: {len(runs) - len(bad)} of {len(runs)} runs passed"
          + (f"; FAILED: {failed_names} (logs: {CACHE / 'logs'})" if bad else ""))
    return not bad


def lock(minors):
    """Write requirements-unit/py3.X.txt: requirements-unit.in resolved by each Python's pip."""
    LOCK_DIR.mkdir(exist_ok=True)
    for minor in minors:
        exe = find_interpreter(minor)
        proc = subprocess.run(
            [str(exe), "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--no-input",
             "--disable-pip-version-check", "--report", "-", "-r", str(LOCK_INPUT)],
            capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            fail(f"pip could not resolve {LOCK_INPUT.name} for Python {minor}:\n{proc.stderr}")
        report = json.loads(proc.stdout)
        pins = sorted((item["metadata"]["name"], item["metadata"]["version"]) for item in report["install"])
        lines = [f"# Generated by `make unit-lock` (scripts/unit-tests.py --lock) from {LOCK_INPUT.name}",
                 f"# for Python {minor} ({interpreter_version(exe)}). Do not edit: edit {LOCK_INPUT.name}."]
        lines += [f"{name}=={version}" for name, version in sorted(pins, key=lambda p: p[0].lower())]
        lock_file(minor).write_text("\n".join(lines) + "\n")
        print(f"unit-tests: {lock_file(minor).relative_to(ROOT)}: {len(pins)} packages")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", metavar="X.Y",
                        help="a target Python to run (default: every one ansible-core supports on targets)")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("UNIT_JOBS") or os.cpu_count() or 1))
    parser.add_argument("--no-controller", action="store_true", help="skip the controller-side run")
    parser.add_argument("--controller-only", action="store_true",
                        help="only the controller-side run (another controller environment: .venv-newest)")
    seed = int(os.environ.get("UNIT_SEED") or random.randrange(10**6))
    parser.add_argument("--seed", type=int, default=seed,
                        help="the random order's seed (default: UNIT_SEED, else a new one; printed)")
    parser.add_argument("--lock", action="store_true", help="regenerate the lock files and exit")
    parser.add_argument("--interpreter", metavar="X.Y",
                        help="print the interpreter this script would use for X.Y and exit")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (default: tests/unit)")
    return parser.parse_args(argv)


def container_context(minors):
    """``(module_utils, PYTHONPATH entry, ansible-core version)`` for the container runs, or None."""
    if not any(minor in CONTAINER_PYTHONS for minor in minors):
        return None
    newest = venv_module_utils(NEWEST_VENV)
    if newest is None:
        wanted = ", ".join(m for m in minors if m in CONTAINER_PYTHONS)
        fail(f"Python {wanted} needs the newest ansible-core's module_utils: {NEWEST_VENV} has none "
             "(make bootstrap-newest builds it)")
    return newest[0], target_path(newest[0], "target-newest"), newest[1]


def main(argv=None):
    args = parse_args(argv)
    if args.interpreter:
        exe = local_interpreter(args.interpreter)
        print(exe or "")
        return 0 if exe else 1
    module_utils, ansible_version, supported = controller_modules()
    supported = sorted(set(supported) | set(CONTAINER_PYTHONS), key=version_key)
    minors = args.python or os.environ.get("UNIT_PYTHONS", "").split() or list(supported)
    if args.controller_only:
        minors = []
    unknown = [m for m in minors if m not in supported]
    if unknown:
        fail(f"Python {', '.join(unknown)} is not a target of ansible-core {ansible_version} "
             f"({', '.join(supported)})")
    if args.lock:
        lock([m for m in minors if m not in CONTAINER_PYTHONS])
        return 0

    runs = []
    if not args.no_controller:
        # named by ansible-core version: make ci runs the oldest's and the newest's side by side
        runs.append(Run(f"controller-{ansible_version}", "controller", pathlib.Path(sys.executable)))
    for minor in minors:
        if minor in CONTAINER_PYTHONS:
            image = f"gpunode-{CONTAINER_PYTHONS[minor]}-unit:latest"
            runs.append(Run(f"py{minor}", "target", None, image=image))
        else:
            runs.append(Run(f"py{minor}", "target", find_interpreter(minor)))
    for run in runs:  # the Hypothesis properties' examples: all on the range's ends, a quarter between
        if run.context == "target" and run.name.removeprefix("py") not in (supported[0], supported[-1]):
            run.hypothesis_share = 4
    container = container_context(minors)
    pythonpath = target_path(module_utils, f"target-{ansible_version}")
    order_args = ["--random-order-bucket=module", f"--random-order-seed={args.seed}"]
    print(f"unit: {len(runs)} runs, {args.jobs} at a time: controller {platform_version()} and target "
          f"Pythons {' '.join(minors) or 'none'} with ansible-core {ansible_version}'s module_utils only"
          + (f" ({', '.join(m for m in minors if m in CONTAINER_PYTHONS)}: in a container, with "
             f"ansible-core {container[2]}'s)" if container else "")
          + f"; random order, seed {args.seed}")
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run_one, run, args.pytest_args, pythonpath, order_args, container)
                   for run in runs]
        for future in concurrent.futures.as_completed(futures):
            run = future.result()
            print(f"\n=== {run.context} Python {run.version or run.name}: pytest output ({run.log})")
            sys.stdout.write(run.log.read_text())
            sys.stdout.flush()
    ok = report(runs, ansible_version)
    print(f"unit: tests ran in a random order, seed {args.seed} (that order again: UNIT_SEED={args.seed})")
    return 0 if ok else 1


def platform_version():
    return ".".join(str(part) for part in sys.version_info[:3])


if __name__ == "__main__":
    sys.exit(main())
