# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What runs on a control-plane node, compared with what kube-scheduler's files say.

The module ``kube_scheduler_extender`` asks this module, in the same call that
plans the files:

- which flavor runs kube-scheduler here (``detect_flavor``);
- which Kubernetes version it is (``detect_version``): from what is really there,
  and it says what it used (a digest-pinned image has no tag to read);
- whether the running scheduler carries the configuration on disk, and if not,
  what brings it there (``restart_plan``): the kubelet replaces a static pod whose
  manifest changed; a scheduler whose ``--config`` file changed under it is
  stopped and started again by what runs it (the kubelet, rke2's kubelet, or
  Docker's ``restart: always`` on RKE1); rke2-server regenerates its static pods
  from config.yaml only when it restarts.

Processes are read under ``proc_root`` (tests give a fake tree) by ``host/processes.py``; commands run
through ``run(argv) -> (rc, stdout, stderr)``. Standard library only; Python 3.8+.
"""

import hashlib
import os
import time

from ansible.module_utils.gpunode.formats.kube_version import KubeVersionError
from ansible.module_utils.gpunode.formats.kube_version import minor as kube_minor
from ansible.module_utils.gpunode.formats.kube_version import parse as parse_kube_version
from ansible.module_utils.gpunode.formats.kube_version import text as kube_text
from ansible.module_utils.gpunode.host.processes import scan, since_boot
from ansible.module_utils.gpunode.scheduler.kubeadm_config import CONFIGMAP

RKE2_BINARIES = ("/usr/local/bin/rke2", "/usr/bin/rke2", "/opt/rke2/bin/rke2")
RKE1_NODE_MARKER = "/etc/kubernetes/ssl/kubecfg-kube-scheduler.yaml"
# Share of a static pod's flags a process must carry to be taken for an older copy of it
# (and not for another scheduler, e.g. a second profile-specific one, on the same node).
SAME_SCHEDULER = 0.5


class Process:
    """A running process: pid, argv, start time (seconds since the epoch)."""

    def __init__(self, pid, argv, started):
        self.pid, self.argv, self.started = pid, argv, started

    def __repr__(self):
        return f"Process({self.pid}, {self.argv!r}, {self.started})"


# ---------------------------------------------------------------- processes

def processes(name, proc_root="/proc"):
    """The processes whose command name is ``name``, oldest first, started at wall-clock times."""
    found = scan(name, proc_root)
    if not found:
        return []
    booted = time.time() - since_boot(proc_root)
    return [Process(p.pid, p.argv, booted + p.started_after_boot) for p in found]


def same_scheduler(process, argv):
    """Whether ``process`` runs (a version of) the scheduler started with ``argv``."""
    flags = [a for a in argv[1:] if a.startswith("--")]
    if not flags:
        return True
    return sum(flag in process.argv for flag in flags) / len(flags) >= SAME_SCHEDULER


def binary_version(process, run, proc_root="/proc"):
    """``(version, source)`` from the running binary (``/proc/PID/exe --version``), or None.

    ``/proc/PID/exe`` is the binary the process was started from, also for a
    container's process; kube-scheduler prints ``Kubernetes v1.29.2``.
    """
    exe = os.path.join(proc_root, str(process.pid), "exe")
    try:
        rc, out, _err = run([exe, "--version"])
    except OSError:
        return None
    if rc != 0 or "Kubernetes" not in (out or ""):
        return None
    try:
        version = parse_kube_version(out)
    except KubeVersionError:
        return None
    return kube_text(version), f"{exe} --version (kube-scheduler PID {process.pid})"


def image_tag(image):
    """The tag of an image reference, or None (``repo@sha256:...`` pins a digest, not a tag)."""
    name = str(image or "").split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def tag_version(image):
    tag = image_tag(image)
    if tag is None:
        return None
    try:
        return kube_text(parse_kube_version(tag))
    except KubeVersionError:
        return None


# ---------------------------------------------------------------- flavor and version

def detect_flavor(exists, manifest_path, rke2_config, cluster_yml):
    """kubeadm (static pod manifest), RKE2 (its config directory), RKE1 (cluster.yml on the
    admin host, or RKE's scheduler kubeconfig on a node); None when none is there."""
    if cluster_yml:
        return "rke"
    if exists(manifest_path):
        return "kubeadm"
    if exists(os.path.dirname(rke2_config)):
        return "rke2"
    if exists(RKE1_NODE_MARKER):
        return "rke"
    return None


def detect_version(candidates):
    """``(version, source, warnings)`` from ``candidates``: (version text or None, source), best first.

    The first candidate that holds a version wins; a later one that disagrees on
    the minor version is reported (an upgrade half done, or a stale record).
    """
    found = [(v, s) for v, s in candidates if v]
    if not found:
        return None, None, []
    version, source = found[0]
    warnings = []
    chosen = kube_minor(version)
    for other, other_source in found[1:]:
        if kube_minor(other) != chosen:
            warnings.append(f"Kubernetes version {version} ({source}) differs from {other} ({other_source}); "
                            f"using {version}")
    return version, source, warnings


# ---------------------------------------------------------------- running state

def digest(text):
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


def _stale_reasons(process, files, mtimes):
    return [f"{path} changed after it started" for path in files
            if mtimes.get(path) is not None and mtimes[path] > process.started]


def _pids(processes_):
    return [p.pid for p in processes_]


def _kubeadm_restart(plan, ours, seen):
    """The kubelet replaces a static pod whose manifest changed; a changed --config file needs a stop."""
    pids, manifest_path, config_source = _pids(ours), seen["manifest_path"], seen["config_source"]
    if manifest_path in seen["changed"]:
        return dict(plan, reason=f"{manifest_path} changed; the kubelet replaces kube-scheduler",
                    wait_for_exit=pids)
    if config_source in seen["changed"]:
        return dict(plan, reason=f"{config_source} changed", stop=pids, wait_for_exit=pids)
    current = [p for p in ours if p.argv == seen["manifest_argv"]]
    if ours and not current:
        return dict(plan, wait_for_exit=pids,
                    reason=f"kube-scheduler (PID {', '.join(map(str, pids))}) runs with other flags than "
                           f"{manifest_path}: the kubelet has not replaced it yet")
    stale = [r for p in current for r in _stale_reasons(p, [manifest_path], seen["mtimes"])]
    if stale:
        return dict(plan, wait_for_exit=pids,
                    reason=f"kube-scheduler is older than its manifest: {stale[0]}")
    stale = [r for p in current for r in _stale_reasons(p, [config_source], seen["mtimes"])]
    if stale:
        return dict(plan, stop=pids, wait_for_exit=pids, reason=f"kube-scheduler runs an older "
                    f"configuration: {stale[0]}")
    return None


def _rke2_restart(plan, ours, seen):
    """rke2-server regenerates kube-scheduler from config.yaml only when it restarts."""
    pids, config_source, config_flag = _pids(ours), seen["config_source"], seen["config_flag"]
    config_files = [path for path in seen["rke2_files"] if path in seen["changed"]]
    if config_files:
        return dict(plan, unit="rke2-server", wait_for_exit=pids,
                    reason=f"{', '.join(config_files)} changed; rke2-server regenerates kube-scheduler")
    if config_source in seen["changed"]:
        return dict(plan, reason=f"{config_source} changed", stop=pids, wait_for_exit=pids)
    server = seen["rke2_server"]
    stale = _stale_reasons(server, seen["rke2_files"], seen["mtimes"]) if server else []
    if stale or (config_flag and ours and not any(config_flag in p.argv for p in ours)):
        why = stale[0] if stale else f"kube-scheduler runs without {config_flag}"
        return dict(plan, unit="rke2-server", wait_for_exit=pids, reason=f"rke2-server runs an older "
                    f"configuration: {why}")
    stale = [r for p in ours for r in _stale_reasons(p, [config_source], seen["mtimes"])]
    if stale:
        return dict(plan, stop=pids, wait_for_exit=pids, reason=f"kube-scheduler runs an older "
                    f"configuration: {stale[0]}")
    return None


def _rke_restart(plan, _ours, seen):
    """RKE1: cluster.yml reaches the scheduler through `rke up`; Docker restarts a stopped one."""
    config_source, config_flag = seen["config_source"], seen["config_flag"]
    flagged = [p for p in seen["schedulers"] if config_flag and config_flag in p.argv]
    if config_flag and not flagged:
        return dict(plan, pending="rke up", reason=f"kube-scheduler runs without {config_flag}: "
                    "cluster.yml is applied by `rke up`")
    flagged_pids = _pids(flagged)
    if config_source in seen["changed"]:
        return dict(plan, reason=f"{config_source} changed", stop=flagged_pids,
                    wait_for_exit=flagged_pids)
    stale = [r for p in flagged for r in _stale_reasons(p, [config_source], seen["mtimes"])]
    if stale:
        return dict(plan, stop=flagged_pids, wait_for_exit=flagged_pids,
                    reason=f"kube-scheduler runs an older configuration: {stale[0]}")
    return None


RESTART_STEPS = {"kubeadm": _kubeadm_restart, "rke2": _rke2_restart, "rke": _rke_restart}


def restart_plan(flavor, *, changed, manifest_path=None, manifest_argv=None, config_source=None,
                 config_flag=None, schedulers=(), rke2_server=None, rke2_files=(), mtimes=None,
                 health_problem=None):
    """What must happen for kube-scheduler to run what its files say.

    ``changed`` are the files this run writes (or would write); ``mtimes`` the
    files' modification times; ``schedulers`` the kube-scheduler processes;
    ``config_flag`` the ``--config=...`` argument kube-scheduler must carry.
    Returns None (nothing to do) or dict(reason, unit (a systemd unit to
    restart or None), stop (PIDs to stop: what runs them starts them again),
    wait_for_exit (PIDs that must be gone before health counts), pending (a
    change that waits for someone else: ``rke up``)). The flavor's step
    (``RESTART_STEPS``) decides first; the health problem counts only when it
    finds nothing.
    """
    seen = {"changed": changed, "manifest_path": manifest_path, "manifest_argv": manifest_argv,
            "config_source": config_source, "config_flag": config_flag, "schedulers": schedulers,
            "rke2_server": rke2_server, "rke2_files": rke2_files, "mtimes": mtimes or {}}
    ours = [p for p in schedulers if manifest_argv is None or same_scheduler(p, manifest_argv)]
    plan = {"reason": None, "unit": None, "stop": [], "wait_for_exit": [], "pending": None}
    step = RESTART_STEPS.get(flavor)
    found = step(plan, ours, seen) if step else None
    if found is not None:
        return found
    if health_problem:
        return dict(plan, reason=f"kube-scheduler is not healthy: {health_problem}")
    return None


def journal_entries(journal, current):
    """The files of an unverified change that still hold what it wrote: [{path, backup}].

    ``journal`` is what the module recorded when it wrote ({path: {backup,
    sha256}}); ``current`` maps each path to the digest of its text now (None:
    absent). A file changed since by someone else is not rolled back.
    """
    return [{"path": path, "backup": entry.get("backup")}
            for path, entry in sorted((journal or {}).get("files", {}).items())
            if current.get(path) == entry.get("sha256")]


# ---------------------------------------------------------------- what the call reports

def change_lines(params, result, kubeadm_new, restart):
    """The lines this call adds to ``gpunode_changes``."""
    lines = []
    if result["files"]:
        api = result["api_version"] or "its own configuration file"
        what = "extender removed" if params["state"] == "absent" else \
            f"extender {params['extender']['url_prefix']} ({api})"
        lines.append(f"kube-scheduler: {what}: {', '.join(sorted(result['files']))}")
    if kubeadm_new is not None:
        lines.append(f"{CONFIGMAP}: scheduler flag and volume recorded for kubeadm upgrade")
    if restart and not result["files"] and not restart.get("pending"):
        lines.append(f"kube-scheduler: restart ({restart['reason']})")
    return lines


def scheduler_facts(params, out):
    """``ansible_facts.gpushare_scheduler`` from the module's result."""
    restart = out["restart"]
    state = params["state"]
    if state == "present" and restart and any(restart.get(key) for key in ("pending", "unit", "stop",
                                                                           "wait_for_exit")):
        state = "pending"
    facts = {"flavor": out["flavor"], "kubernetes_version": out["kubernetes_version"],
             "version_source": out["version_source"], "api_version": out["api_version"],
             "config_path": out["config_path"], "state": state,
             "waiting_for": restart.get("pending") if restart else None}
    if "rke_up_pending" in out:
        facts["rke_up_pending"] = out["rke_up_pending"]
    return facts
