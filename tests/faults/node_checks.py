#!/usr/bin/python3
"""What an operator checks on a GPU node after a run: what runs, not only what the files say.

    node_checks.py EXPECT_JSON

Runs on the node (Python 3.8+, standard library; PyYAML and tomllib when there).
EXPECT_JSON: {"driver_version": "570.133.20", "docker_default_runtime": "nvidia",
"kubelet_gates": {"DynamicResourceAllocation": true}, "toolkit_package":
"nvidia-container-toolkit"}. Prints one JSON object:

    {"checks": {NAME: {"ok": bool, "detail": str}}, "state": {...}}

checks (independent of how the roles do their work):
  dpkg        `dpkg --audit` is empty, no dpkg journal is left in /var/lib/dpkg/updates
              (apt's "dpkg was interrupted"), `apt-get check` passes
  holds       some packages are held and every held package is installed
  driver      nvidia-smi reports the wanted driver on every GPU
  toolkit     the container toolkit package is installed
  docker      `docker info`: the nvidia runtime is there and the default is the wanted one
  containerd  `containerd config dump` declares the nvidia runtime, and the running
              daemon started after every file of its configuration last changed
  kubelet     the running kubelet's gates (what it printed when it started) hold the
              wanted gates and those of its config file, and it started after every file
              it reads (config, environment files, unit and drop-ins) last changed
state: what the checks read (held packages, package versions, runtimes, gates), which
tests/faults/report.py compares with a node that was never interrupted.
"""

import ast
import json
import os
import re
import subprocess
import sys
import time

try:
    import tomllib
except ImportError:  # Python < 3.11: the runtimes are read with a pattern instead
    tomllib = None

try:
    import yaml
except ImportError:  # python3-yaml missing: the config file's gates are not compared
    yaml = None

ENV = dict(os.environ, LC_ALL="C", LANG="C")
GATES_LINE = re.compile(r"feature gates: (\{.*\})\s*$")
# a runtime table of a CRI plugin: [plugins.<id>.containerd.runtimes.<name>], ids and names bare or quoted
RUNTIME_TABLE = re.compile(
    r"^\s*\[plugins\.(?:\"[^\"]+\"|'[^']+'|[A-Za-z0-9_-]+)\.containerd\.runtimes\."
    r"(?:\"([^\"]+)\"|'([^']+)'|([A-Za-z0-9_-]+))\]\s*$",
    re.M,
)
DEFAULT_RUNTIME = re.compile(r"^\s*default_runtime_name\s*=\s*[\"']([^\"']*)[\"']", re.M)
IMPORTS = re.compile(r"^\s*imports\s*=\s*\[(.*?)\]", re.M | re.S)


def run(argv):
    """(rc, stdout, stderr) of argv; rc 127 when the program is missing."""
    try:
        proc = subprocess.run(argv, capture_output=True, env=ENV, check=False)
    except OSError as exc:
        return 127, "", str(exc)
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


def result(ok, detail):
    return {"ok": bool(ok), "detail": detail}


# -- parsers (pure; tests/faults/test_node_checks.py) ----------------------------------------


def parse_dpkg_status(text):
    """dpkg-query -W -f '${Package}\\t${Version}\\t${Status}\\n' -> {package: (version, status)}."""
    packages = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 3:
            packages[parts[0]] = (parts[1], parts[2])
    return packages


def installed(status):
    """Whether a dpkg status ("install ok installed", "hold ok installed") is a configured package."""
    parts = status.split()
    return len(parts) == 3 and parts[2] == "installed"


def audit_packages(text):
    """The packages `dpkg --audit` lists (its indented lines), by name."""
    return [line.split()[0] for line in text.splitlines() if line.startswith(" ") and line.strip()]


def parse_showhold(text):
    return sorted(line.strip() for line in text.splitlines() if line.strip())


def containerd_runtimes(dump):
    """(runtime names, default runtime name, imported files) from `containerd config dump`."""
    if tomllib is not None:
        data = tomllib.loads(dump)
        names, default = set(), None
        for plugin in (data.get("plugins") or {}).values():
            section = plugin.get("containerd") if isinstance(plugin, dict) else None
            if isinstance(section, dict) and isinstance(section.get("runtimes"), dict):
                names.update(section["runtimes"])
                default = section.get("default_runtime_name", default)
        return sorted(names), default, list(data.get("imports") or [])
    names = sorted({"".join(groups) for groups in RUNTIME_TABLE.findall(dump)})
    default = DEFAULT_RUNTIME.search(dump)
    imports = IMPORTS.search(dump)
    files = re.findall(r"[\"']([^\"']+)[\"']", imports.group(1)) if imports else []
    return names, default.group(1) if default else None, files


def kubelet_gates_from_journal(text):
    """The gates the stand-in kubelet printed when it started (its last start line), or None."""
    gates = None
    for line in text.splitlines():
        match = GATES_LINE.search(line)
        if match:
            gates = ast.literal_eval(match.group(1))
    return gates


def kubelet_config_path(argv):
    for index, arg in enumerate(argv):
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
        if arg == "--config" and index + 1 < len(argv):
            return argv[index + 1]
    return None


def gate_differences(wanted, effect):
    """Gates of wanted that effect lacks or holds with another value: ["Name=true (running: none)"]."""
    missing = []
    for name, value in sorted(wanted.items()):
        if effect.get(name) is not value:
            running = effect.get(name)
            missing.append(
                "{}={} (running: {})".format(
                    name, str(value).lower(), "none" if running is None else str(running).lower()
                )
            )
    return missing


def newer_than_start(files, started):
    """Files (path -> mtime, None when absent) changed after the daemon started."""
    return sorted(path for path, mtime in files.items() if mtime is not None and mtime > started)


# -- node readers ------------------------------------------------------------------------------


def mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def parse_unit_show(text):
    """`systemctl show` output -> {property: [values]} (EnvironmentFiles= comes once per file)."""
    props = {}
    for line in text.splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            props.setdefault(key, []).append(value)
    return props


def unit_files(props):
    """The files a unit reads: its unit file, drop-ins and environment files."""
    env_files = [
        entry.rsplit(" (ignore_errors=", 1)[0] for entry in props.get("EnvironmentFiles", []) if entry
    ]
    drop_ins = [path for value in props.get("DropInPaths", []) for path in value.split()]
    return [path for path in props.get("FragmentPath", []) + drop_ins + env_files if path]


def unit(name):
    """systemctl show for a unit: main PID, start time (epoch seconds), files it reads."""
    _rc, out, _ = run(
        [
            "systemctl",
            "show",
            name,
            "--property=ActiveState,MainPID,ExecMainStartTimestampMonotonic,FragmentPath,DropInPaths,EnvironmentFiles",
        ]
    )
    props = parse_unit_show(out)

    def first(key):
        return (props.get(key) or [""])[0]

    started = None
    monotonic_us = int(first("ExecMainStartTimestampMonotonic") or 0)
    if monotonic_us:
        started = time.time() - (time.monotonic() - monotonic_us / 1e6)
    return {
        "active": first("ActiveState"),
        "pid": int(first("MainPID") or 0),
        "started": started,
        "files": unit_files(props),
    }


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return [part.decode("utf-8", "replace") for part in handle.read().split(b"\0") if part]
    except OSError:
        return []


def check_dpkg(state):
    rc, audit, err = run(["dpkg", "--audit"])
    try:
        journal = sorted(os.listdir("/var/lib/dpkg/updates"))
    except OSError:
        journal = []
    check_rc, check_out, check_err = run(["apt-get", "check"])
    state["dpkg_audit"] = audit_packages(audit)
    problems = []
    if rc != 0 or audit.strip():
        listed = audit_packages(audit)
        problems.append(
            "dpkg --audit lists " + ", ".join(listed) if listed else "dpkg --audit: " + (audit or err).strip()
        )
    if journal:
        problems.append(
            "dpkg journal left in /var/lib/dpkg/updates ({}): dpkg was interrupted".format(", ".join(journal))
        )
    if check_rc != 0:
        problems.append("apt-get check: %s" % (check_err.strip() or check_out.strip()))
    return result(
        not problems, "; ".join(problems) or "dpkg --audit empty, no dpkg journal, apt-get check passes"
    )


def check_holds(state, packages):
    _, out, err = run(["apt-mark", "showhold"])
    held = parse_showhold(out)
    state["held"] = held
    missing = [name for name in held if not installed(packages.get(name, ("", ""))[1])]
    if not held:
        return result(False, f"no package is held (apt-mark showhold is empty) {err.strip()}")
    if missing:
        return result(False, "held but not installed: {}".format(", ".join(missing)))
    return result(True, "held: {}".format(", ".join(held)))


def check_driver(state, expect):
    rc, out, err = run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    versions = [line.strip() for line in out.splitlines() if line.strip()]
    state["nvidia_smi"] = versions if rc == 0 else f"rc {rc}: {(err or out).strip()}"
    wanted = expect.get("driver_version")
    if rc != 0:
        return result(False, f"nvidia-smi failed (rc {rc}): {(err or out).strip()}")
    if not versions or (wanted and any(v != wanted for v in versions)):
        return result(False, f"nvidia-smi reports {versions}, wanted {wanted}")
    return result(True, "nvidia-smi reports {}".format(", ".join(versions)))


def check_toolkit(state, expect, packages):
    name = expect.get("toolkit_package", "nvidia-container-toolkit")
    version, status = packages.get(name, (None, "not installed"))
    state["toolkit"] = {"version": version, "status": status}
    return result(installed(status), f"{name}: {status} {version or ''}".strip())


def check_docker(state, expect):
    rc, out, err = run(["docker", "info", "--format", "{{json .}}"])
    if rc != 0:
        state["docker"] = None
        return result(False, f"docker info failed: {(err or out).strip()}")
    info = json.loads(out)
    runtimes = sorted(info.get("Runtimes") or {})
    default = info.get("DefaultRuntime")
    state["docker"] = {"default_runtime": default, "runtimes": runtimes}
    wanted = expect.get("docker_default_runtime", "nvidia")
    ok = "nvidia" in runtimes and default == wanted
    return result(
        ok, f"docker info: DefaultRuntime {default}, runtimes {runtimes} (wanted nvidia, default {wanted})"
    )


def check_containerd(state):
    service = unit("containerd.service")
    argv = cmdline(service["pid"]) if service["pid"] else []
    config = "/etc/containerd/config.toml"
    for index, arg in enumerate(argv):
        if arg in ("--config", "-c") and index + 1 < len(argv):
            config = argv[index + 1]
        elif arg.startswith("--config="):
            config = arg.split("=", 1)[1]
    rc, dump, err = run(["containerd", "--config", config, "config", "dump"])
    if rc != 0:
        state["containerd"] = None
        return result(False, f"containerd config dump failed: {err.strip()}")
    names, default, imports = containerd_runtimes(dump)
    state["containerd"] = {"runtimes": names, "default_runtime": default}
    if service["active"] != "active" or service["started"] is None:
        return result(False, "containerd.service is {}".format(service["active"]))
    files = {path: mtime(path) for path in [config, *imports]}
    stale = newer_than_start(files, service["started"])
    problems = []
    if "nvidia" not in names:
        problems.append(f"config dump declares runtimes {names}, no nvidia")
    if stale:
        problems.append(
            "the running containerd started before {} changed: it runs an older configuration".format(
                ", ".join(stale)
            )
        )
    detail = "runtimes {}, default {}; containerd started after {}".format(
        names, default, ", ".join(sorted(files))
    )
    return result(not problems, "; ".join(problems) or detail)


def check_kubelet(state, expect):
    service = unit("kubelet.service")
    if service["active"] != "active" or not service["pid"]:
        state["kubelet_gates"] = None
        return result(False, "kubelet.service is {}".format(service["active"]))
    argv = cmdline(service["pid"])
    _, journal, _ = run(["journalctl", "--no-pager", "-o", "cat", f"_PID={service['pid']}"])
    effect = kubelet_gates_from_journal(journal)
    state["kubelet_gates"] = effect
    if effect is None:
        return result(False, f"the running kubelet (pid {service['pid']}) logged no feature gates")
    problems = []
    wanted = gate_differences(expect.get("kubelet_gates") or {}, effect)
    if wanted:
        problems.append("wanted gates not in effect: {}".format(", ".join(wanted)))
    config = kubelet_config_path(argv)
    files = {path: mtime(path) for path in service["files"] + ([config] if config else [])}
    if config and yaml is not None and files[config] is not None:
        with open(config, encoding="utf-8") as handle:
            on_disk = (yaml.safe_load(handle) or {}).get("featureGates") or {}
        differ = gate_differences(on_disk, effect)
        if differ:
            problems.append(
                "{} sets gates the running kubelet does not have: {}".format(config, ", ".join(differ))
            )
    stale = newer_than_start(files, service["started"])
    if stale:
        problems.append("the running kubelet started before {} changed".format(", ".join(stale)))
    detail = "gates in effect {}; kubelet started after {}".format(
        json.dumps(effect, sort_keys=True), ", ".join(sorted(files))
    )
    return result(not problems, "; ".join(problems) or detail)


def main(argv):
    expect = json.loads(argv[1]) if len(argv) > 1 else {}
    state = {}
    _, out, _ = run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${Status}\n"])
    packages = parse_dpkg_status(out)
    state["packages"] = {
        name: f"{version} {status}"
        for name, (version, status) in sorted(packages.items())
        # what is on the node: not the leftovers of removed packages (an upgrade leaves config-files)
        if re.match(r"(lib)?nvidia|cuda-drivers", name)
        and status.split()[-1] not in ("not-installed", "config-files")
    }
    checks = {
        "dpkg": check_dpkg(state),
        "holds": check_holds(state, packages),
        "driver": check_driver(state, expect),
        "toolkit": check_toolkit(state, expect, packages),
        "docker": check_docker(state, expect),
        "containerd": check_containerd(state),
        "kubelet": check_kubelet(state, expect),
    }
    print(json.dumps({"checks": checks, "state": state}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
