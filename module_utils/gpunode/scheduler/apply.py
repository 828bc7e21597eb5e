# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One call of the module ``kube_scheduler_extender`` on a host: look, decide, write.

The module builds a ``Node`` (the host side: files, processes, commands) and
asks ``decide(node)`` for a ``Decision``: the module's result (files, restart,
facts, diff) and the warnings, computed in this order:

1. ``survey``: which flavor runs kube-scheduler here, the running schedulers,
   the kubeadm manifest and ConfigMap, the Kubernetes version (``kubernetes_version``);
2. ``config.plan``: what each file should become;
3. ``running_plan``: whether the running scheduler carries what the files say
   (``node.restart_plan``, the health check, an earlier unverified change to
   roll back from the journal);
4. ``kubeadm_record``: the kubeadm-config ConfigMap, once the scheduler runs the change.

Outside check mode the module then calls ``write(node, decision)``: backups,
the journal of the unverified change, the files (the configuration before the
manifest for ``state=present``, after it for ``absent``), the ConfigMap.

Errors raise ``KubeSchedulerError`` naming the file and the problem; only the
module calls ``fail_json``. Standard library and PyYAML only; Python 3.8+.
"""

import json
import os

from ansible.module_utils.gpunode.common.service_health import probe_url
from ansible.module_utils.gpunode.host.backups import backup_stamp, copy_backup
from ansible.module_utils.gpunode.host.commands import Host
from ansible.module_utils.gpunode.host.edits import headers
from ansible.module_utils.gpunode.host.files import (
    FileError,
    exists,
    listdir,
    make_folders,
    mtime,
    realpath,
    remove,
    resolved_path,
    rke2_files,
    write_text,
)
from ansible.module_utils.gpunode.scheduler.api import KubeSchedulerError
from ansible.module_utils.gpunode.scheduler.config import plan, resolve_params
from ansible.module_utils.gpunode.scheduler.config_file import load_yaml, read_file
from ansible.module_utils.gpunode.scheduler.kubeadm_config import (
    CONFIGMAP,
    KEY,
    plan_record,
    read_configmap,
    write_configmap,
)
from ansible.module_utils.gpunode.scheduler.manifest import parse_manifest
from ansible.module_utils.gpunode.scheduler.node import (
    RKE2_BINARIES,
    binary_version,
    change_lines,
    detect_flavor,
    detect_version,
    digest,
    journal_entries,
    processes,
    restart_plan,
    scheduler_facts,
    tag_version,
)
from ansible.module_utils.gpunode.scheduler.rke import rke_state_path, rke_up_pending

# The change written but not yet seen running and healthy, kept in the backup directory.
JOURNAL = "gpunode-scheduler-unverified.json"


def inside(path, directory):
    """Whether ``path`` is ``directory`` or below it (links resolved)."""
    path, directory = realpath(path), realpath(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def backup_dir_for(params):
    if params["backup_dir"]:
        return params["backup_dir"]
    if params["flavor"] == "rke2":
        return "/etc/rancher/rke2/gpunode-backups"
    if params["flavor"] == "rke" and params["cluster_yml"]:
        return os.path.dirname(os.path.abspath(params["cluster_yml"]))
    return "/etc/kubernetes/gpunode-backups"


def make_backup(path, directory):
    """``path`` copied into ``directory`` under its name and backup_local's suffix (``backup_stamp``);
    ``.2~``, ``.3~``... where that name is taken."""
    make_folders(directory, 0o700)
    base, stamp = os.path.join(directory, os.path.basename(path)), backup_stamp()
    target = base + stamp
    n = 1
    while exists(target):
        n += 1
        target = f"{base}{stamp[:-1]}.{n}~"
    return copy_backup(path, target)  # a link: its target's content; no partial copy left


class Node:
    """The scheduler's side of the node: files, processes, commands (through ``host/``)."""

    def __init__(self, module, read=read_file):
        self.module = module
        self.host = Host(module)
        self.params = module.params
        self.read = read

    def run(self, argv, data=None):
        return self.host.run(argv, data=data)

    def schedulers(self):
        return processes("kube-scheduler", self.params["proc_root"])

    def rke2_server(self):
        servers = [p for p in processes("rke2", self.params["proc_root"]) if p.argv[1:2] == ["server"]]
        return servers[0] if servers else None

    def rke2_version(self):
        binary = self.host.which("rke2", opt_dirs=[os.path.dirname(b) for b in RKE2_BINARIES])
        if not binary:
            return None
        rc, out, _err = self.run([binary, "--version"])
        return out if rc == 0 else None

    def kubectl(self):
        return self.params["kubectl"] or self.host.which("kubectl")

    def get_kubeadm_config(self):
        """((configmap, ClusterConfiguration text), None), or (None, why it cannot be read)."""
        kubectl, admin = self.kubectl(), self.params["admin_kubeconfig"]
        if not kubectl:
            return None, "kubectl is not installed"
        if not exists(admin):
            return None, f"{admin} does not exist"
        rc, out, err = self.run([kubectl, "--kubeconfig", admin, "--namespace", "kube-system",
                                 "get", "configmap", "kubeadm-config", "--output", "json"])
        if rc != 0:
            return None, f"kubectl get configmap kubeadm-config: {(err or out).strip()}"
        try:
            return read_configmap(out), None
        except KubeSchedulerError as exc:
            return None, str(exc)

    def replace_kubeadm_config(self, configmap, text):
        kubectl, admin = self.kubectl(), self.params["admin_kubeconfig"]
        body = write_configmap(configmap, text)
        rc, out, err = self.run([kubectl, "--kubeconfig", admin, "replace", "--filename", "-"], data=body)
        if rc != 0:
            raise KubeSchedulerError(f"{CONFIGMAP}: kubectl replace failed: "
                                     f"{(err or out).strip()}")


# ---------------------------------------------------------------- what is there

def flavor_of(params):
    """``flavor``, or what ``auto`` finds; raises when nothing is there."""
    if params["flavor"] != "auto":
        return params["flavor"]
    flavor = detect_flavor(exists, params["manifest_path"], params["rke2_config"], params["cluster_yml"])
    if flavor is None:
        raise KubeSchedulerError(f"cannot tell how kube-scheduler runs here: no {params['manifest_path']} "
                                 f"(kubeadm), no {os.path.dirname(params['rke2_config'])} (RKE2), no RKE "
                                 "scheduler kubeconfig (RKE1); set flavor")
    return flavor


def _kubeadm_candidates(node, manifest, running, cluster_configuration):
    """The image tag, the running binary, the ConfigMap, kubespray's record: best first."""
    params = node.params
    data, ci = manifest
    image = str(data["spec"]["containers"][ci].get("image") or "")
    candidates = [(tag_version(image), f"the image tag in {params['manifest_path']} ({image})")]
    candidates += running
    if cluster_configuration:
        recorded = load_yaml(CONFIGMAP, cluster_configuration) or {}
        version = recorded.get("kubernetesVersion") if isinstance(recorded, dict) else None
        candidates.append((version, f"{CONFIGMAP} ClusterConfiguration.kubernetesVersion"))
    # kubespray keeps the configuration it gave kubeadm next to the manifests' folder
    kube_dir = os.path.dirname(os.path.dirname(params["manifest_path"]))
    records_path = os.path.join(kube_dir, "kubeadm-config.yaml")
    for document in (node.read(records_path) or "").split("\n---"):
        record = load_yaml(records_path, document) or {}
        if isinstance(record, dict) and record.get("kubernetesVersion"):
            candidates.append((record["kubernetesVersion"], records_path))
    return candidates


def _cluster_yml_candidates(node):
    path = node.params["cluster_yml"]
    text = node.read(path)
    version = (load_yaml(path, text) or {}).get("kubernetes_version") if text else None
    return [(version, f"kubernetes_version in {path}")]


def kubernetes_version(node, flavor, manifest, schedulers, cluster_configuration):
    """(version, source, warnings) from what this host has, best source first."""
    params = node.params
    if params["kubernetes_version"]:
        return params["kubernetes_version"], "kubernetes_version", []
    running = [binary_version(p, node.run, params["proc_root"]) or (None, f"kube-scheduler PID {p.pid}")
               for p in schedulers[-1:]]
    if flavor == "kubeadm" and manifest:
        candidates = _kubeadm_candidates(node, manifest, running, cluster_configuration)
    elif flavor == "rke2":
        candidates = [(node.rke2_version(), "rke2 --version"), *running]
    elif params["cluster_yml"]:
        candidates = _cluster_yml_candidates(node)
    else:
        candidates = running
    version, source, warnings = detect_version(candidates)
    if version is None:
        tried = "; ".join(s for _v, s in candidates) or "no kube-scheduler process, no file that records it"
        raise KubeSchedulerError(f"cannot tell the Kubernetes version ({flavor}); looked at: {tried}; "
                                 "set kubernetes_version")
    return version, source, warnings


def survey(node):
    """What this host has: flavor, directories, running schedulers, manifest, kubeadm-config, version."""
    flavor = flavor_of(node.params)
    params = dict(node.params, flavor=flavor)
    static_dir = os.path.dirname(params["manifest_path"])
    backup_dir = backup_dir_for(params)
    if flavor == "kubeadm" and inside(backup_dir, static_dir):
        raise KubeSchedulerError(f"backup_dir {backup_dir}: inside the static pod directory {static_dir}; "
                                 "the kubelet would run a backup as a pod")
    admin = flavor == "rke" and bool(params["cluster_yml"])
    schedulers = [] if admin else node.schedulers()
    manifest = None
    if flavor == "kubeadm":
        text = node.read(params["manifest_path"])
        manifest = parse_manifest(params["manifest_path"], text) if text is not None else None
    kubeadm_cm = (None, "not a kubeadm control plane")
    if flavor == "kubeadm" and params["kubeadm_config"] != "skip":
        kubeadm_cm = node.get_kubeadm_config()
    cluster_configuration = kubeadm_cm[0][1] if kubeadm_cm[0] else None
    version, source, warnings = kubernetes_version(node, flavor, manifest, schedulers, cluster_configuration)
    return {"flavor": flavor, "params": params, "static_dir": static_dir, "backup_dir": backup_dir,
            "admin": admin, "schedulers": schedulers, "kubeadm_cm": kubeadm_cm,
            "cluster_configuration": cluster_configuration, "version": version, "source": source,
            "warnings": warnings}


# ---------------------------------------------------------------- the running scheduler

def journal_path(params, flavor):
    return os.path.join(backup_dir_for(dict(params, flavor=flavor)), JOURNAL)


def read_journal(read, path):
    text = read(path)
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def _manifest_argv(node, params, files):
    """The command line the manifest (as this run leaves it) gives kube-scheduler, or None."""
    path = params["manifest_path"]
    text = files[path][1] if path in files else node.read(path)
    if not text:
        return None
    data, ci = parse_manifest(path, text)
    container = data["spec"]["containers"][ci]
    return [str(a) for a in list(container.get("command") or []) + list(container.get("args") or [])]


def _files_plan(node, flavor, params, result, schedulers):
    """restart_plan for the files against the running scheduler (RKE flag, mtimes, manifest argv)."""
    files = result["files"]
    manifest_argv, config_flag = None, None
    if flavor == "kubeadm":
        manifest_argv = _manifest_argv(node, params, files)
    elif params["state"] == "present" and result["api_version"]:
        flag = "policy-config-file" if result["api_version"] == "Policy" else "config"
        config_flag = f"--{flag}={result['config_path']}"
    rke2_paths = rke2_files(params["rke2_config"]) if flavor == "rke2" else []
    source = result["config_path"]
    mtimes = {path: mtime(path) for path in [params["manifest_path"], source, *rke2_paths]}
    return restart_plan(flavor, changed=files, manifest_path=params["manifest_path"],
                        manifest_argv=manifest_argv, config_source=source, config_flag=config_flag,
                        schedulers=schedulers, rke2_server=node.rke2_server() if flavor == "rke2" else None,
                        rke2_files=rke2_paths, mtimes=mtimes)


def running_plan(node, flavor, params, result, *, schedulers):
    """The restart plan, with what to roll back, and the health check when nothing else is due."""
    files = result["files"]
    plan_ = _files_plan(node, flavor, params, result, schedulers)
    journal_file = journal_path(params, flavor)
    if plan_ is None and not files and params["health_url"] and (schedulers or params["state"] == "present"):
        problem = probe_url(params["health_url"], params["health_validate_certs"])
        if problem:
            plan_ = restart_plan(flavor, changed={}, health_problem=problem)
        elif not node.module.check_mode and exists(journal_file):
            remove(journal_file)  # the last change runs and is healthy: nothing left to roll back
    if plan_ is None or plan_["pending"]:
        return plan_
    journal = read_journal(node.read, journal_file) if not files else None
    current = {path: digest(node.read(path)) for path in (journal or {}).get("files", {})}
    plan_["restore"] = journal_entries(journal, current)
    return plan_


# ---------------------------------------------------------------- the decision

class Decision:
    """The module's result (``out``), its warnings, and what ``write`` does outside check mode."""

    def __init__(self, survey_, result, kubeadm_new, out):
        self.params = survey_["params"]
        self.flavor = survey_["flavor"]
        self.backup_dir = survey_["backup_dir"]
        self.static_dir = survey_["static_dir"]
        self.configmap = survey_["kubeadm_cm"][0][0] if kubeadm_new is not None else None
        self.files = result["files"]
        self.warnings = result["warnings"]
        self.kubeadm_new = kubeadm_new
        self.out = out


def kubeadm_record(node, survey_, result, restart):
    """(new ClusterConfiguration or None, facts): only once the scheduler runs the change."""
    params = survey_["params"]
    verified = node.module.check_mode or (restart is None and params["manifest_path"] not in result["files"])
    kubeadm_new, facts = plan_record(
        params["kubeadm_config"], params["state"], survey_["cluster_configuration"], survey_["kubeadm_cm"][1],
        wiring=result["wiring"], config_path=result["config_path"], verified=verified,
        rewrite=params["allow_rewrite"], warnings=result["warnings"])
    if facts["state"] == "unknown" and params["state"] == "present":
        result["warnings"].append(f"{CONFIGMAP} not checked ({facts['reason']}): "
                                  "kubeadm upgrade would drop the kube-scheduler change")
    return kubeadm_new, facts


def _result(survey_, result, restart, kubeadm_new):
    params, files = survey_["params"], result["files"]
    return {"changed": bool(files) or kubeadm_new is not None, "api_version": result["api_version"],
            "files": sorted(files), "config_path": result["config_path"], "backup_files": {},
            "flavor": survey_["flavor"], "kubernetes_version": survey_["version"],
            "version_source": survey_["source"], "restart": restart,
            "restart_required": bool(restart) and not restart.get("pending"),
            "changes": change_lines(params, result, kubeadm_new, restart)}


def _rke_up_pending(node, params, files):
    state_path = rke_state_path(params["cluster_yml"])
    cluster_text = files[params["cluster_yml"]][1] if params["cluster_yml"] in files \
        else node.read(params["cluster_yml"])
    return rke_up_pending(params["cluster_yml"], cluster_text, node.read(state_path))


def diff(files, shown, cluster_configuration, kubeadm_new):
    """Before and after, one entry per file (and the ConfigMap's ClusterConfiguration)."""
    entries = [{"before_header": shown[path], "after_header": shown[path], "before": old or "",
                "after": new or ""} for path, (old, new) in files.items()]
    if kubeadm_new is not None:
        where = f"{CONFIGMAP} ({KEY})"
        entries.append({"before_header": where, "after_header": where,
                        "before": cluster_configuration, "after": kubeadm_new})
    return entries


def decide(node):
    """Everything this call does, as a Decision; writes nothing but a verified change's journal."""
    survey_ = survey(node)
    params, flavor = survey_["params"], survey_["flavor"]
    result = plan(dict(params, kubernetes_version=survey_["version"]), node.read, listdir)
    result["warnings"] = survey_["warnings"] + result["warnings"]
    shown = headers(result["files"], KubeSchedulerError)
    restart = None
    if not survey_["admin"]:
        restart = running_plan(node, flavor, resolve_params(params), result, schedulers=survey_["schedulers"])
    kubeadm_new, kubeadm_facts = None, None
    if flavor == "kubeadm":
        kubeadm_new, kubeadm_facts = kubeadm_record(node, survey_, result, restart)
    out = _result(survey_, result, restart, kubeadm_new)
    if kubeadm_facts is not None:
        out["kubeadm_config"] = kubeadm_facts
    if survey_["admin"]:
        out["rke_up_pending"] = _rke_up_pending(node, params, result["files"])
    if node.module._diff:
        out["diff"] = diff(result["files"], shown, survey_["cluster_configuration"], kubeadm_new)
    out["ansible_facts"] = {"gpushare_scheduler": scheduler_facts(params, out)}
    return Decision(survey_, result, kubeadm_new, out)


# ---------------------------------------------------------------- writing

def _backups_and_journal(decision, order):
    """Back up each file (with ``backup``) and record the change as unverified; returns the journal."""
    params, out = decision.params, decision.out
    journal = {"files": {}}
    for path in order:
        old, new = decision.files[path]
        backup = make_backup(path, decision.backup_dir) if params["backup"] and old is not None else None
        if backup:
            out["backup_files"][path] = backup
        journal["files"][path] = {"backup": backup, "sha256": digest(new)}
    if params["backup"] and not (decision.flavor == "rke" and params["cluster_yml"]):
        make_folders(decision.backup_dir, 0o700)
        write_text(os.path.join(decision.backup_dir, JOURNAL), json.dumps(journal, indent=2) + "\n",
                   new_file_mode=0o600)
    if out["restart"] is not None and params["backup"]:
        # put back in the reverse order of the writes: the manifest before the file it points at
        out["restart"]["restore"] = [{"path": path, "backup": journal["files"][path]["backup"]}
                                     for path in reversed(order)]
    return journal


def _write_file(path, new, static_dir, replace):
    if new is None:
        remove(path)
        return
    tmp_dir, target = None, resolved_path(path)  # a link: its target is written, the link kept
    if inside(os.path.dirname(target), static_dir):
        # never a temp file inside the static pod directory: make it one level up
        tmp_dir = os.path.dirname(os.path.dirname(os.path.abspath(target)))
    write_text(path, new, new_file_mode=0o600, tmp_dir=tmp_dir, replace=replace)


def write(node, decision):
    """Back up, record the change as unverified, write: config before manifest (present) or after;
    then the kubeadm-config ConfigMap."""
    files, params = decision.files, decision.params
    if files:
        manifest = params["manifest_path"]
        # present: the config exists before the scheduler is pointed at it; absent: the reverse
        order = sorted(files, key=lambda p: (p == manifest) == (params["state"] == "present"))
        try:
            _backups_and_journal(decision, order)
            for path in order:
                _write_file(path, files[path][1], decision.static_dir, node.module.atomic_move)
        except FileError as exc:  # host/files and host/backups name the file and the cause
            raise KubeSchedulerError(str(exc)) from exc
        except OSError as exc:
            raise KubeSchedulerError(f"{exc.filename or 'a scheduler file'}: {exc.strerror or exc}") from exc
    if decision.kubeadm_new is not None:
        node.replace_kubeadm_config(decision.configmap, decision.kubeadm_new)
