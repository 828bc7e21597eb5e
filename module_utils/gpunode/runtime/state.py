# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The whole state of a GPU node's container runtime, and the plan to converge it.

The role ``nvidia_container_runtime`` asks one module
(``nvidia_container_runtime_state``) for everything it needs to decide: the
toolkit's repository, key and package, the engines installed and who manages
them, whether daemon.json and containerd's files are converged (computed by
the same code that writes them: ``json_config.plan``, ``containerd_config.plan``),
whether the running daemons run what the files say, the kubelet's engine and
CDI. The answer is a plan (what differs, why) and the facts the cluster
add-ons read. A converged node costs that one call.

This file holds the decisions, free of Ansible: parsers for what commands
print, the kubelet engine, RKE2/k3s configuration, CDI, and ``build_plan``.
``NodeReader`` does the reading through the one host-access class (``host/commands.py``).

Sources of the facts used here:

- kubelet endpoint: ``--container-runtime-endpoint`` or the KubeletConfiguration's
  ``containerRuntimeEndpoint`` (kubelet 1.27+); without either the kubelet
  uses ``unix:///run/containerd/containerd.sock`` (kubernetes
  ``pkg/kubelet/apis/config/v1beta1/defaults.go``; before 1.24 dockershim,
  selected with ``--container-runtime=docker``). kubeadm looks for the sockets
  of containerd, CRI-O and cri-dockerd (``cmd/kubeadm/app/constants/constants_unix.go``:
  ``/var/run/containerd/containerd.sock``, ``/var/run/crio/crio.sock``,
  ``/var/run/cri-dockerd.sock``).
- RKE2 and k3s run their own containerd (socket
  ``/run/k3s/containerd/containerd.sock``) and regenerate its config.toml
  under ``/var/lib/rancher/<rke2|k3s>/agent/etc/containerd/`` at every start;
  they detect ``nvidia-container-runtime`` on the PATH themselves and make it
  the default with the ``default-runtime`` option, read from
  ``/etc/rancher/<rke2|k3s>/config.yaml`` and ``config.yaml.d/*.yaml`` in
  lexical order, the last value winning (docs.rke2.io install/configuration,
  reference/linux_agent_config ``default-runtime``; docs.k3s.io advanced
  "NVIDIA Container Runtime Support"). k3s's ``docker: true`` runs cri-dockerd.
- Docker: CDI is opt-in from Docker 25 (``"features": {"cdi": true}``,
  cncf-tags/container-device-interface#84) and on by default from 28.2.0
  (Docker Engine 28.2.0 release notes); spec dirs ``/etc/cdi``, ``/var/run/cdi``.
- NVIDIA Container Toolkit: from 1.18.0 the packages install
  ``nvidia-cdi-refresh.service`` and ``.path``, which write
  ``/var/run/cdi/nvidia.yaml`` and refresh it on driver changes; before 1.18
  the spec is made with ``nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml``
  (NVIDIA container-toolkit docs, "Support for Container Device Interface").
- CRI-O reads CDI specs from ``/etc/cdi`` and ``/var/run/cdi`` by default
  (crio.conf(5), ``cdi_spec_dirs``; CDI support since CRI-O 1.23).

Standard library only (plus the TOML and YAML readers the modules declare);
Python 3.8+ (this runs on target hosts).
"""

import hashlib
import json
import os
import re

from ansible.module_utils.gpunode.host.packages import Apt
from ansible.module_utils.gpunode.runtime.containerd_config import (
    ContainerdConfigError,
    containerd_release,
    cri_disabled,
    root_version,
    version_from_output,
)
from ansible.module_utils.gpunode.runtime.containerd_config import parse as parse_toml

ENGINE_UNITS = {"docker": "docker.service", "containerd": "containerd.service"}
RANCHER = {
    "rke2": {"units": ("rke2-server.service", "rke2-agent.service"), "binary": "rke2"},
    "k3s": {"units": ("k3s.service", "k3s-agent.service"), "binary": "k3s"},
}
RANCHER_SOCKET = "/run/k3s/containerd/containerd.sock"
RANCHER_DROPIN_NAME = "90-gpunode-nvidia.yaml"
KUBELET_DEFAULT_ENDPOINT = "unix:///run/containerd/containerd.sock"
KUBEADM_SOCKETS = (
    ("/var/run/containerd/containerd.sock", "containerd"),
    ("/var/run/crio/crio.sock", "cri-o"),
    ("/var/run/cri-dockerd.sock", "docker"),
)
KUBELET_FLAG_FILES = ("/var/lib/kubelet/kubeadm-flags.env", "/etc/default/kubelet", "/etc/sysconfig/kubelet")
KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"
CDI_SPEC_DIRS = ["/etc/cdi", "/var/run/cdi"]
CDI_GENERATED_SPEC = "/etc/cdi/nvidia.yaml"
CDI_REFRESH_SPEC = "/var/run/cdi/nvidia.yaml"
CDI_REFRESH_SINCE = (1, 18)
DOCKER_CDI_OPT_IN = (25, 0)
DOCKER_CDI_DEFAULT = (28, 2)
TOOLKIT = "nvidia-container-toolkit"
SOURCES_HEADER = "# Written by gpunode (nvidia_container_runtime): the NVIDIA container toolkit repository.\n"


class RuntimeStateError(Exception):
    """The node cannot be planned for as it is; the message says why."""


# --- what commands print ------------------------------------------------------


def parse_apt_policy(output):
    """``apt-cache policy PKG...`` -> {package: {"candidate": str|None, "versions": [str]}}.

    A package apt does not know is absent from the result.
    """
    known, current, in_table = {}, None, False
    for line in (output or "").splitlines():
        header = re.match(r"^(\S+):$", line)
        if header:
            current, in_table = header.group(1).split(":")[0], False
            known[current] = {"candidate": None, "versions": []}
            continue
        if current is None:
            continue
        stripped = line.strip()
        if stripped.startswith("Candidate:"):
            value = stripped.split(":", 1)[1].strip()
            known[current]["candidate"] = None if value == "(none)" else value
        elif stripped.startswith("Version table:"):
            in_table = True
        elif in_table:
            version = re.match(r"^(?:\*\*\*\s+)?(\S+)\s+-?\d+$", stripped)
            if version:
                known[current]["versions"].append(version.group(1))
    return {name: data for name, data in known.items() if data["candidate"] or data["versions"]}


def upstream_version(debian_version):
    """``'1:1.17.8-1'`` -> ``'1.17.8'`` (no epoch, no Debian revision); None stays None."""
    if not debian_version:
        return None
    version = debian_version.split(":", 1)[-1]
    return version.rsplit("-", 1)[0] if "-" in version else version


def release_of(version_text):
    """``(major, minor)`` of any version text; None when it holds none."""
    return containerd_release(version_text)


def parse_docker_info(text):
    """``docker info --format '{{json .}}'`` -> {server_version, default_runtime, runtimes}."""
    try:
        info = json.loads(text)
    except ValueError:
        return None
    if not isinstance(info, dict):
        return None
    runtimes = info.get("Runtimes") or {}
    return {
        "server_version": info.get("ServerVersion"),
        "default_runtime": info.get("DefaultRuntime"),
        "runtimes": {
            name: (value or {}).get("path") if isinstance(value, dict) else None
            for name, value in runtimes.items()
        },
    }


# --- the kubelet's engine -----------------------------------------------------


def kubelet_argv(cmdlines):
    """The arguments of the running kubelet among ``cmdlines`` (argv lists); None when none runs.

    A kubelet is a process whose program (or script, under an interpreter) is
    named ``kubelet``; k3s runs its kubelet inside ``k3s server|agent``.
    """
    for argv in cmdlines:
        for position in (0, 1):
            if len(argv) > position and os.path.basename(argv[position]) == "kubelet":
                if position == 1 and not os.path.basename(argv[0]).startswith("python"):
                    continue
                return list(argv[position + 1 :])
    return None


def flag_value(args, name):
    """The value of ``--name=value`` or ``--name value`` in ``args`` (the last one wins)."""
    value = None
    for index, arg in enumerate(args):
        if arg.startswith(f"--{name}="):
            value = arg.split("=", 1)[1]
        elif arg == f"--{name}" and index + 1 < len(args):
            value = args[index + 1]
    return value


def flags_in_text(text):
    """The ``--flag=value`` words of a kubelet flags file (kubeadm-flags.env, /etc/default/kubelet)."""
    return re.findall(r"--[A-Za-z0-9-]+(?:=[^\s\"']+)?", text or "")


def config_endpoint(text):
    """``containerRuntimeEndpoint`` of a KubeletConfiguration (JSON, or YAML's top-level key), or None."""
    try:
        data = json.loads(text or "")
    except ValueError:
        data = None
    if isinstance(data, dict):
        value = data.get("containerRuntimeEndpoint")
        return value if isinstance(value, str) and value else None
    key = r"^[\"']?containerRuntimeEndpoint[\"']?[ \t]*:[ \t]*[\"']?([^\"'\s#]+)"
    match = re.search(key, text or "", re.MULTILINE)
    return match.group(1) if match else None


def endpoint_engine(endpoint):
    """The engine behind a CRI endpoint: containerd, docker (cri-dockerd, dockershim), cri-o; else None."""
    name = (endpoint or "").lower()
    if "cri-dockerd" in name or "dockershim" in name:
        return "docker"
    if "crio" in name or "cri-o" in name:
        return "cri-o"
    if "containerd" in name:
        return "containerd"
    return None


def kubelet_engine(observed):
    """Which engine the node's kubelet uses; None without a kubelet.

    ``observed``: kubelet_args (argv of the running kubelet or None),
    kubelet_config_text (its --config file), kubelet_flag_texts (flags files),
    kubelet_installed, rancher (flavor or None), rancher_config (effective
    config.yaml), sockets (existing paths).
    """
    args = observed.get("kubelet_args")
    rancher = observed.get("rancher")
    rancher_config = observed.get("rancher_config") or {}
    if args is None and rancher:
        endpoint = rancher_config.get("container-runtime-endpoint")
        if endpoint:
            return endpoint_engine(endpoint)
        return "docker" if rancher_config.get("docker") is True else "containerd"
    if args is None and not observed.get("kubelet_installed"):
        return None
    if args is None:  # installed, not running: its flags files, its config, then kubeadm's sockets
        args = [flag for text in observed.get("kubelet_flag_texts", []) for flag in flags_in_text(text)]
    endpoint = flag_value(args, "container-runtime-endpoint") or config_endpoint(
        observed.get("kubelet_config_text")
    )
    if endpoint:
        return endpoint_engine(endpoint)
    if flag_value(args, "container-runtime") == "docker":
        return "docker"
    if observed.get("kubelet_args") is None:
        found = [engine for path, engine in KUBEADM_SOCKETS if path in observed.get("sockets", ())]
        if len(found) == 1:
            return found[0]
    return endpoint_engine(KUBELET_DEFAULT_ENDPOINT)


# --- RKE2 and k3s ---------------------------------------------------------------


def rancher_effective(documents):
    """The effective config of RKE2/k3s config files (in load order): later keys win, ``key+`` appends."""
    merged = {}
    for data in documents:
        for key, value in (data or {}).items():
            if isinstance(key, str) and key.endswith("+"):
                base = merged.get(key[:-1])
                items = value if isinstance(value, list) else [value]
                if isinstance(base, list):
                    merged[key[:-1]] = base + items
                elif base is None:
                    merged[key[:-1]] = items
                else:
                    merged[key[:-1]] = f"{base},{','.join(str(i) for i in items)}"
            else:
                merged[key] = value
    return merged


def rancher_dropin_text(name):
    return (
        "# Written by gpunode (nvidia_container_runtime): containerd's default runtime.\n"
        "# RKE2/k3s read it at start and write it into the containerd config they generate.\n"
        f"default-runtime: {name}\n"
    )


def generated_runtimes(config):
    """``(default_runtime, {name: BinaryName})`` of a containerd config.toml that RKE2/k3s generated."""
    plugins = config.get("plugins") if isinstance(config.get("plugins"), dict) else {}
    cri = plugins.get("io.containerd.cri.v1.runtime") or plugins.get("io.containerd.grpc.v1.cri") or {}
    containerd = cri.get("containerd") if isinstance(cri.get("containerd"), dict) else {}
    runtimes = containerd.get("runtimes") if isinstance(containerd.get("runtimes"), dict) else {}
    binaries = {}
    for name, runtime in runtimes.items():
        options = runtime.get("options") if isinstance(runtime, dict) else None
        binaries[name] = options.get("BinaryName") if isinstance(options, dict) else None
    enable_cdi = cri.get("enable_cdi")
    return containerd.get("default_runtime_name", "runc"), binaries, enable_cdi


# --- desired ------------------------------------------------------------------------


def sources_text(repo_url, keyring):
    """The deb822 source of the toolkit's flat repository, signed by ``keyring``."""
    return f"{SOURCES_HEADER}Types: deb\nURIs: {repo_url}\nSuites: /\nSigned-By: {keyring}\n"


def docker_settings(binary, default_runtime, cdi_feature):
    """What daemon.json must hold: the nvidia runtime, the default, CDI where it is opt-in."""
    settings = {"runtimes": {"nvidia": {"path": binary, "runtimeArgs": []}}}
    if default_runtime:
        settings["default-runtime"] = "nvidia"
    if cdi_feature:
        settings["features"] = {"cdi": True}
    return settings


def docker_cdi(release, config):
    """``(supported, enabled, dirs)`` of Docker ``release`` with daemon.json ``config``."""
    if release is None or release < DOCKER_CDI_OPT_IN:
        return False, False, []
    features = config.get("features") if isinstance(config.get("features"), dict) else {}
    enabled = features.get("cdi", release >= DOCKER_CDI_DEFAULT) is True
    dirs = config.get("cdi-spec-dirs") if isinstance(config.get("cdi-spec-dirs"), list) else CDI_SPEC_DIRS
    return True, enabled, list(dirs)


def cdi_spec_plan(toolkit_release, spec_texts, driver_version):
    """What to do for the CDI spec: ``{"action": None|"generate"|"refresh", "path", "why"}``.

    ``spec_texts``: {path: text or None} of the spec files; a spec is current
    when it exists and names the loaded driver's version (its library paths do).
    """
    refresh = toolkit_release is not None and toolkit_release >= CDI_REFRESH_SINCE
    path = CDI_REFRESH_SPEC if refresh else CDI_GENERATED_SPEC
    text = spec_texts.get(path)
    if not driver_version:
        return {
            "action": None,
            "path": path,
            "why": "no NVIDIA driver loaded: the CDI spec comes with the driver",
        }
    if text is None:
        return {"action": "refresh" if refresh else "generate", "path": path, "why": f"{path} is missing"}
    if driver_version not in text:
        return {
            "action": "refresh" if refresh else "generate",
            "path": path,
            "why": f"{path} does not describe the loaded driver {driver_version}",
        }
    return {"action": None, "path": path, "why": None}


# --- the plan ---------------------------------------------------------------------


class Planner:
    """Decides the plan and the facts from what ``read_node`` observed and what is wanted.

    ``docker_plan(text, settings, path)`` and ``containerd_plan(**args)`` are the
    planners of the writing modules (``json_config.plan`` with Docker's rules,
    ``containerd_config.plan`` bound to the node), so "converged" means here what
    it means to them.
    """

    def __init__(self, observed, wanted, docker_plan, containerd_plan):
        self.observed = observed
        self.wanted = wanted
        self.docker_plan = docker_plan
        self.containerd_plan = containerd_plan
        self.reasons = []
        self.warnings = []
        self.notes = []
        self.plan = {
            "repo_key": False,
            "repo_source": False,
            "sources_text": sources_text(wanted["repo_url"], wanted["keyring"]),
            "update_cache": False,
            "install": False,
            "packages": [],
            "docker": {"configure": False, "restart": False, "settings": {}},
            "containerd": {"configure": False, "restart": False, "args": {}},
            "rancher": {"flavor": None, "configure": False, "restart": False},
            "cdi": {"action": None, "path": None},
        }

    # -- packages

    def packages(self):
        observed, wanted, plan = self.observed, self.wanted, self.plan
        installed, apt = observed["installed"], observed["apt"]
        if wanted["manage_repo"]:
            if not observed["keyring_ok"]:
                plan["repo_key"] = True
                self.reasons.append(
                    f"the repository key {wanted['keyring']} is missing or has another checksum"
                )
            if observed["sources_text"] != plan["sources_text"]:
                plan["repo_source"] = True
                self.reasons.append(f"the repository source {wanted['sources_path']} differs")
        package, pinned = wanted["package"], wanted["version"]
        have = installed.get(package)
        wanted_packages = {}
        if have is None or (pinned and have != pinned):
            wanted_packages[package] = pinned or None
            self.reasons.append(
                f"{package} is {'at ' + have if have else 'not installed'}"
                + (f", wanted {pinned}" if pinned else "")
            )
        if observed["toml_parser"] is None and (
            "containerd" in observed["engines_found"] or observed["rancher"]
        ):
            name = next((n for n in wanted["toml_packages"] if n in apt), wanted["toml_packages"][0])
            wanted_packages[name] = None
            self.reasons.append(
                f"Python {observed['python']} reads containerd's TOML with {name}, not installed"
            )
        if observed["rancher"] and not observed["yaml_available"]:
            wanted_packages["python3-yaml"] = None
            self.reasons.append(
                f"{observed['rancher']}'s YAML configuration is read with python3-yaml, not installed"
            )
        plan["install"] = bool(wanted_packages)
        plan["packages"] = [
            f"{name}={version}" if version else name for name, version in wanted_packages.items()
        ]
        unknown = [
            name
            for name, version in wanted_packages.items()
            if name not in apt or (version and version not in apt[name]["versions"])
        ]
        if plan["install"] and (unknown or plan["repo_source"] or plan["repo_key"]):
            plan["update_cache"] = True
            if unknown:
                self.reasons.append(f"the package index does not know {', '.join(unknown)}: refresh it")
        plan["packages_known"] = not unknown
        toolkit = pinned if package == TOOLKIT and plan["install"] and pinned else installed.get(TOOLKIT)
        if toolkit is None and plan["install"]:
            toolkit = (apt.get(TOOLKIT) or {}).get("candidate")
        return upstream_version(toolkit)

    # -- engines

    def engines(self):
        """The engines to configure: the installed ones for ``auto``, else the list (all installed)."""
        observed, wanted = self.observed, self.wanted
        found = list(observed["engines_found"])
        if observed["rancher"]:
            found.append("containerd")
        if wanted["engines"] == "auto":
            chosen = [engine for engine in ("containerd", "docker") if engine in found]
            return [
                e for e in chosen if not (e == "containerd" and observed["containerd"].get("cri_disabled"))
            ]
        missing = [engine for engine in wanted["engines"] if engine not in found]
        if missing:
            raise RuntimeStateError(
                f"nvidia_container_runtime_engines lists {', '.join(missing)}, not installed on this host "
                f"(found: {', '.join(sorted(set(found))) or 'no container engine'})"
            )
        return list(wanted["engines"])

    def docker(self, configure):
        """Plan daemon.json and Docker's restart; returns (facts, (cdi_enabled, cdi_dirs))."""
        docker, wanted, plan = self.observed["docker"], self.wanted, self.plan
        release = release_of(docker["version"])
        supported, enabled, _dirs = docker_cdi(release, docker["config"])
        cdi_feature = configure and wanted["cdi"] and supported and not enabled
        if configure and wanted["cdi"] and not supported:
            self.notes.append(f"Docker {docker['version'] or '?'} has no CDI (Docker 25.0 brought it)")
        settings = docker_settings(wanted["binary"], wanted["docker_default_runtime"], cdi_feature)
        changed, _text, config = self.docker_plan(docker["text"], settings, wanted["docker_daemon_json"])
        if not configure:
            changed, config = False, docker["config"]
        else:
            plan["docker"]["settings"] = settings
            plan["docker"]["configure"] = changed
            if changed:
                self.reasons.append(
                    f"{wanted['docker_daemon_json']} does not declare the nvidia runtime as wanted"
                )
            info = docker["info"]
            running = not docker.get("cli", True) or (  # without the docker CLI: its start time only
                info is not None
                and info["runtimes"].get("nvidia") == wanted["binary"]
                and (not wanted["docker_default_runtime"] or info["default_runtime"] == "nvidia")
            )
            if docker["active"] and (changed or not running or docker["stale"]):
                plan["docker"]["restart"] = True
                if not changed and not running:
                    self.reasons.append("the running Docker does not report the nvidia runtime (docker info)")
                elif not changed:
                    self.reasons.append(f"Docker started before {wanted['docker_daemon_json']} last changed")
        _supported, cdi_enabled, cdi_dirs = docker_cdi(release, config)
        runtimes = config.get("runtimes") if isinstance(config.get("runtimes"), dict) else {}
        facts = {
            "nvidia_runtime": "nvidia" in runtimes,
            "default_runtime": config.get("default-runtime", "runc"),
            "managed_by": "docker",
        }
        return facts, (cdi_enabled, cdi_dirs)

    def containerd(self, configure):
        """Plan containerd's drop-in and restart; returns (facts, (cdi_enabled, cdi_dirs))."""
        containerd, wanted = self.observed["containerd"], self.wanted
        managed_by = "docker" if containerd.get("cri_disabled") else "containerd"
        args = {
            "config_path": wanted["containerd_config"],
            "dropin_path": wanted["containerd_dropin"],
            "binary_name": wanted["binary"],
            "systemd_cgroup": wanted["containerd_systemd_cgroup"],
            "set_default": wanted["containerd_default_runtime"],
            "enable_cdi": wanted["cdi"],
        }
        if managed_by == "docker" and not configure:
            self.notes.append(
                f"{wanted['containerd_config']} disables the CRI plugin: this containerd serves Docker only "
                "and "
                "is left alone (list containerd in nvidia_container_runtime_engines to configure it anyway)"
            )
        if self.observed["toml_parser"] is None:  # config.toml is read once the TOML package is installed
            return self._containerd_unread(configure, args, managed_by)
        try:
            outcome = self.containerd_plan(**args)
        except ContainerdConfigError as exc:
            raise RuntimeStateError(f"{exc}; left unchanged") from exc
        changed = (outcome["config_text"], outcome["dropin_text"]) != (
            containerd["config_text"],
            containerd["dropin_text"],
        )
        if configure:
            self._containerd_configure(args, outcome, changed)
        if configure or not changed:
            effective = outcome["effective"]
        else:  # not ours to configure, and not as we would have it: runc, as containerd defaults
            effective = {
                "default_runtime": "runc",
                "runtimes": ["runc"],
                "cdi_enabled": False,
                "cdi_spec_dirs": [],
            }
        facts = {
            "nvidia_runtime": "nvidia" in effective["runtimes"],
            "default_runtime": effective["default_runtime"],
            "managed_by": managed_by,
        }
        return facts, (effective["cdi_enabled"], effective["cdi_spec_dirs"])

    def _containerd_unread(self, configure, args, managed_by):
        """containerd() before Python has a TOML reader: configure when asked, facts as they will be."""
        containerd, wanted = self.observed["containerd"], self.wanted
        release = release_of(containerd["version"])
        if configure:
            self.plan["containerd"].update(configure=True, restart=containerd["active"], args=args)
            self.reasons.append(f"{args['config_path']}: read once Python has a TOML reader")
        cdi = bool(configure and wanted["cdi"] and release is not None and release >= (1, 7))
        facts = {
            "nvidia_runtime": configure,
            "default_runtime": "nvidia" if configure and wanted["containerd_default_runtime"] else "runc",
            "managed_by": managed_by,
        }
        return facts, (cdi, list(CDI_SPEC_DIRS) if cdi else [])

    def _containerd_configure(self, args, outcome, changed):
        """The containerd part of the plan: write when the files differ, restart when not read."""
        containerd, plan = self.observed["containerd"], self.plan
        self.notes.extend(outcome["warnings"])
        plan["containerd"]["args"] = args
        plan["containerd"]["configure"] = changed
        if changed:
            self.reasons.append(
                f"containerd's files do not declare the nvidia runtime as wanted ({args['dropin_path']})"
            )
        if containerd["active"] and (changed or containerd["stale"]):
            plan["containerd"]["restart"] = True
            if not changed:
                stale = ", ".join(containerd["stale"])
                self.reasons.append(f"containerd started before {stale} last changed")

    def rancher(self):
        """Plan RKE2/k3s: the default-runtime option and a restart; returns (facts, (cdi, dirs))."""
        flavor, rancher, wanted, plan = (
            self.observed["rancher"],
            self.observed["rancher_state"],
            self.wanted,
            self.plan,
        )
        dropin_text = rancher_dropin_text("nvidia") if wanted["containerd_default_runtime"] else None
        plan["rancher"].update(
            flavor=flavor,
            unit=rancher["unit"],
            dropin_path=rancher["dropin_path"],
            dropin_text=dropin_text,
            generated=rancher["generated_path"],
        )
        if rancher["dropin_text"] != dropin_text:
            plan["rancher"]["configure"] = True
            self.reasons.append(f"{rancher['dropin_path']} does not set the default runtime as wanted")
        before, after = rancher["config_before"], rancher["config_after"]
        wanted_default = before.get("default-runtime") or "runc"
        if dropin_text:
            wanted_default = "nvidia"
        if after.get("default-runtime") and after["default-runtime"] != wanted_default:
            self.warnings.append(
                f"a {flavor} config file after {rancher['dropin_path']} sets default-runtime: "
                f"{after['default-runtime']}, which wins"
            )
            wanted_default = after["default-runtime"]
        generated = rancher["generated"]
        default_now, runtimes_now, cdi_now = generated if generated else ("runc", {}, None)
        nvidia_now = runtimes_now.get("nvidia") is not None
        running_ok = generated is not None and nvidia_now and default_now == wanted_default
        if rancher["active"] and (plan["rancher"]["configure"] or not running_ok or rancher["stale"]):
            plan["rancher"]["restart"] = True
            if not plan["rancher"]["configure"]:
                self.reasons.append(
                    f"{flavor} has not generated {rancher['generated_path']} with nvidia as wanted: "
                    f"restart {rancher['unit']} (it regenerates it at start)"
                )
        cdi_enabled = cdi_now if isinstance(cdi_now, bool) else (rancher["generated_version"] or 2) >= 3
        facts = {
            "nvidia_runtime": nvidia_now or self.observed["toolkit_binary"] or plan["install"],
            "default_runtime": wanted_default,
            "managed_by": flavor,
        }
        return facts, (cdi_enabled, list(CDI_SPEC_DIRS) if cdi_enabled else [])

    def checks(self):
        """The health checks of each engine's restart (verified_restart's ``checks``)."""
        wanted, plan = self.wanted, self.plan
        binary = re.escape(wanted["binary"])
        declared = r"runtimes\.[\"']?nvidia[\"']?\]"
        default = r"default_runtime_name = [\"']nvidia[\"']"
        docker_expect = [r'"nvidia":\{"path":"' + binary + '"']
        if wanted["docker_default_runtime"]:
            docker_expect.append(r"\|nvidia$")
        plan["docker"]["checks"] = [
            {
                "command": ["docker", "info", "--format", "{{json .Runtimes}}|{{.DefaultRuntime}}"],
                "expect": docker_expect,
            }
        ]
        if not (self.observed["docker"] or {}).get("cli", True):
            # dockerd without its CLI (Debian 13's docker.io only recommends docker-cli)
            plan["docker"]["checks"] = [
                {"command": ["systemctl", "is-active", "docker.service"], "expect": []}
            ]
        containerd_expect = [declared] + ([default] if wanted["containerd_default_runtime"] else [])
        plan["containerd"]["checks"] = [
            {"command": ["ctr", "version"], "expect": []},
            {
                "command": ["containerd", "--config", wanted["containerd_config"], "config", "dump"],
                "expect": containerd_expect,
            },
        ]
        if plan["rancher"]["flavor"]:
            plan["rancher"]["checks"] = [
                {"command": ["test", "-S", RANCHER_SOCKET], "expect": []},
                {
                    "command": ["cat", plan["rancher"]["generated"]],
                    "expect": [declared, r"BinaryName = [\"']" + binary, *containerd_expect[1:]],
                },
            ]

    def summary(self, toolkit_version):
        """One short line per change, for the host's ``gpunode_changes``."""
        plan, wanted, lines = self.plan, self.wanted, []
        if plan["repo_source"] and self.observed["sources_text"] is None:
            lines.append("container toolkit repository added")
        if any(spec.split("=")[0] == wanted["package"] for spec in plan["packages"]):
            before = upstream_version(self.observed["installed"].get(TOOLKIT)) or "none"
            lines.append(f"container toolkit {before} -> {toolkit_version or 'newest'}")
        for engine, default in (
            ("docker", "docker_default_runtime"),
            ("containerd", "containerd_default_runtime"),
        ):
            if plan[engine]["configure"]:
                lines.append(f"{engine}: nvidia runtime{' (default)' if wanted[default] else ''}")
            elif plan[engine]["restart"]:
                lines.append(f"{engine}: restarted to load its configuration")
        if plan["rancher"]["configure"]:
            default = "nvidia" if plan["rancher"]["dropin_text"] else "runc"
            lines.append(f"{plan['rancher']['flavor']}: default runtime {default}")
        elif plan["rancher"]["restart"]:
            lines.append(f"{plan['rancher']['flavor']}: restarted to regenerate containerd's config")
        if plan["cdi"]["action"]:
            lines.append(f"CDI spec {plan['cdi']['action']}d ({plan['cdi']['path']})")
        return lines

    # -- all of it

    def build(self):
        """``(plan, facts)``; raises RuntimeStateError."""
        observed, wanted, plan = self.observed, self.wanted, self.plan
        toolkit_version = self.packages()
        engines = self.engines()
        facts_engines, cdi_engines = {}, {}
        if "docker" in observed["engines_found"]:
            facts_engines["docker"], cdi_engines["docker"] = self.docker("docker" in engines)
        if observed["rancher"]:
            facts_engines["containerd"], cdi_engines["containerd"] = self.rancher()
        elif "containerd" in observed["engines_found"]:
            facts_engines["containerd"], cdi_engines["containerd"] = self.containerd("containerd" in engines)
        kubelet = kubelet_engine(observed)
        if kubelet == "cri-o":
            cdi_enabled, cdi_dirs = True, list(CDI_SPEC_DIRS)
        elif kubelet in cdi_engines:
            cdi_enabled, cdi_dirs = cdi_engines[kubelet]
        elif cdi_engines:
            cdi_enabled, cdi_dirs = cdi_engines.get("containerd") or cdi_engines["docker"]
        else:
            cdi_enabled, cdi_dirs = False, []
        if wanted["cdi"] and (observed["installed"].get(TOOLKIT) or plan["install"]):
            spec = cdi_spec_plan(
                release_of(toolkit_version), observed["cdi_specs"], observed["driver_version"]
            )
            plan["cdi"] = {"action": spec["action"], "path": spec["path"]}
            if spec["why"]:
                (self.reasons if spec["action"] else self.notes).append(f"CDI: {spec['why']}")
        steps = ("docker", "containerd", "rancher")
        plan["changes"] = bool(
            plan["repo_key"]
            or plan["repo_source"]
            or plan["install"]
            or any(plan[step]["configure"] or plan[step]["restart"] for step in steps)
            or plan["cdi"]["action"]
        )
        plan["reasons"] = self.reasons
        plan["warnings"] = self.warnings
        plan["notes"] = self.notes
        plan["summary"] = self.summary(toolkit_version)
        plan["readers_ready"] = observed["toml_parser"] is not None and (
            not observed["rancher"] or observed["yaml_available"]
        )
        self.checks()
        facts = {
            "toolkit_version": toolkit_version,
            "engines": facts_engines,
            "kubelet_engine": kubelet,
            "cdi": {"enabled": bool(cdi_enabled), "spec_dirs": list(cdi_dirs) if cdi_enabled else []},
        }
        return plan, facts


# --- reading the node ---------------------------------------------------------------


class NodeReader:
    """Reads what ``Planner`` needs: a few commands through a ``host/commands.py`` Host, the rest from files.

    ``tools`` holds the helpers shared with the writing modules: read_text,
    units_state, process_start, stale_files, containerd_facts, other_imports,
    parse_json (daemon.json), toml_parser (name or None), yaml_load (or None).
    """

    def __init__(self, host, wanted, tools, proc_root="/proc", sys_root="/sys"):
        self.host = host
        self.wanted = wanted
        self.tools = tools
        self.proc_root = proc_root
        self.sys_root = sys_root

    def text(self, path):
        return self.tools["read_text"](path, RuntimeStateError)

    def started(self, unit):
        if not unit["active"] or not unit["pid"]:
            return None
        return self.tools["process_start"](unit["pid"])

    def read(self):
        wanted, tools = self.wanted, self.tools
        if not self.host.which("dpkg-query") or not self.host.which("apt-get"):
            raise RuntimeStateError(
                "nvidia_container_runtime supports apt-based hosts (Debian, Ubuntu): "
                "dpkg-query or apt-get not found"
            )
        watched = [wanted["package"], TOOLKIT, *wanted["toml_packages"], "python3-yaml"]
        units = tools["units_state"](
            self.host,
            [*ENGINE_UNITS.values(), *(unit for flavor in RANCHER.values() for unit in flavor["units"])],
        )
        observed = {
            "installed": Apt(self.host).installed_versions(watched),
            "toml_parser": tools["toml_parser"],
            "yaml_available": tools["yaml_load"] is not None,
            "python": wanted["python"],
            "keyring_ok": self.keyring_ok(),
            "sources_text": self.text(wanted["sources_path"]),
            "toolkit_binary": os.access(wanted["binary"], os.X_OK),
            "driver_version": wanted["driver_version"] or self.loaded_driver(),
            "cdi_specs": {path: self.text(path) for path in (CDI_GENERATED_SPEC, CDI_REFRESH_SPEC)},
        }
        found = []
        if self.host.which("dockerd") or units["docker.service"]["loaded"]:
            found.append("docker")
        if self.host.which("containerd") or units["containerd.service"]["loaded"]:
            found.append("containerd")
        observed["engines_found"] = found
        observed["rancher"], observed["rancher_state"] = self.rancher(units)
        observed["docker"] = self.docker(units["docker.service"]) if "docker" in found else None
        observed["containerd"] = (
            self.containerd(units["containerd.service"])
            if "containerd" in found and not observed["rancher"]
            else {}
        )
        observed.update(self.kubelet(observed["rancher_state"]))
        observed["apt"] = self.apt(observed)
        return observed

    def keyring_ok(self):
        path, checksum = self.wanted["keyring"], self.wanted["repo_key_checksum"]
        if not os.path.isfile(path):
            return False
        if not checksum:
            return True
        algorithm, _sep, digest = checksum.partition(":")
        try:
            with open(path, "rb") as handle:
                return hashlib.new(algorithm, handle.read()).hexdigest() == digest.lower()
        except (OSError, ValueError):
            return False

    def loaded_driver(self):
        try:
            with open(os.path.join(self.sys_root, "module", "nvidia", "version"), encoding="ascii") as handle:
                return handle.read().strip() or None
        except OSError:
            return None

    def apt(self, observed):
        """apt's view of the packages the plan may install (only when one may be)."""
        wanted, installed = self.wanted, observed["installed"]
        have = installed.get(wanted["package"])
        needs = have is None or (wanted["version"] and have != wanted["version"])
        needs = (
            needs
            or observed["toml_parser"] is None
            or (observed["rancher"] and not observed["yaml_available"])
        )
        if not needs:
            return {}
        apt_cache = self.host.which("apt-cache")
        if not apt_cache:
            return {}
        _rc, out, _err = self.host.run(
            [apt_cache, "policy", wanted["package"], TOOLKIT, *wanted["toml_packages"], "python3-yaml"]
        )
        return parse_apt_policy(out)

    def docker(self, unit):
        path = self.wanted["docker_daemon_json"]
        text = self.text(path)
        config = self.tools["parse_json"](text or "", path)
        info = None
        version = None
        docker = self.host.which("docker")
        if unit["active"] and docker:
            rc, out, _err = self.host.run([docker, "info", "--format", "{{json .}}"])
            info = parse_docker_info(out) if rc == 0 else None
            version = info["server_version"] if info else None
        if version is None and self.host.which("dockerd"):
            rc, out, _err = self.host.run([self.host.which("dockerd"), "--version"])
            version = version_from_output(out.replace(",", " ")) if rc == 0 else None
        return {
            "version": version,
            "active": unit["active"],
            "info": info,
            "cli": docker is not None,
            "text": text,
            "config": config,
            "stale": self.tools["stale_files"](self.started(unit), [path]),
        }

    def containerd(self, unit):
        wanted, tools = self.wanted, self.tools
        config_path, dropin_path = wanted["containerd_config"], wanted["containerd_dropin"]
        version, defaults = tools["containerd_facts"](self.host.module, None)
        config_text = self.text(config_path)
        state = {
            "version": version,
            "defaults": defaults,
            "active": unit["active"],
            "config_text": config_text,
            "dropin_text": self.text(dropin_path),
            "imports": [],
            "cri_disabled": False,
            "stale": [],
        }
        if tools["toml_parser"] is not None:
            try:
                state["imports"] = tools["other_imports"](
                    config_text, config_path, dropin_path, tools["read_text"]
                )
                config = parse_toml(config_text, config_path) if config_text and config_text.strip() else {}
                state["cri_disabled"] = cri_disabled(config, root_version(config, config_path))
            except ContainerdConfigError as exc:
                raise RuntimeStateError(f"{exc}; left unchanged") from exc
        read = [config_path, dropin_path, *(path for path, _text in state["imports"])]
        state["stale"] = tools["stale_files"](self.started(unit), read)
        return state

    def rancher(self, units):
        """(flavor or None, its state): RKE2 or k3s, whichever has a unit (the running one first)."""
        candidates = [
            (flavor, unit)
            for flavor, spec in RANCHER.items()
            for unit in spec["units"]
            if units[unit]["loaded"]
        ]
        if not candidates:
            return None, None
        flavor, unit = next(((f, u) for f, u in candidates if units[u]["active"]), candidates[0])
        etc = f"/etc/rancher/{flavor}"
        dropin_path = f"{etc}/config.yaml.d/{RANCHER_DROPIN_NAME}"
        files = [f"{etc}/config.yaml"]
        if os.path.isdir(f"{etc}/config.yaml.d"):
            names = sorted(n for n in os.listdir(f"{etc}/config.yaml.d") if n.endswith((".yaml", ".yml")))
            files += [f"{etc}/config.yaml.d/{name}" for name in names]
        before, after = [], []
        for path in files:
            if path == dropin_path:
                continue
            text = self.text(path)
            if text is None or self.tools["yaml_load"] is None:
                continue
            try:
                data = self.tools["yaml_load"](text)
            except Exception as exc:  # yaml.YAMLError and its kin
                raise RuntimeStateError(f"{path}: not valid YAML: {exc}; left unchanged") from exc
            if data is not None and not isinstance(data, dict):
                raise RuntimeStateError(f"{path}: not a mapping of options; left unchanged")
            (after if path > dropin_path else before).append(data or {})
        generated_path = f"/var/lib/rancher/{flavor}/agent/etc/containerd/config.toml"
        generated_text = self.text(generated_path)
        generated, generated_version = None, None
        if generated_text is not None and self.tools["toml_parser"] is not None:
            try:
                config = parse_toml(generated_text, generated_path)
            except ContainerdConfigError as exc:
                raise RuntimeStateError(str(exc)) from exc
            generated, generated_version = generated_runtimes(config), config.get("version", 1)
        state = units[unit]
        return flavor, {
            "unit": unit,
            "active": state["active"],
            "dropin_path": dropin_path,
            "dropin_text": self.text(dropin_path),
            "config_before": rancher_effective(before),
            "config_after": rancher_effective(after),
            "generated_path": generated_path,
            "generated": generated,
            "generated_version": generated_version,
            "stale": self.tools["stale_files"](self.started(state), [dropin_path, self.wanted["binary"]]),
        }

    def kubelet(self, rancher_state):
        args = kubelet_argv(self.cmdlines())
        config_path = flag_value(args or [], "config") or KUBELET_CONFIG
        config = dict(rancher_state["config_before"]) if rancher_state else {}
        if rancher_state:
            config.update(rancher_state["config_after"])
        return {
            "kubelet_args": args,
            "kubelet_config_text": self.text(config_path),
            "kubelet_flag_texts": [text for text in map(self.text, KUBELET_FLAG_FILES) if text],
            "kubelet_installed": bool(self.host.which("kubelet")),
            "rancher_config": config,
            "sockets": [path for path, _engine in KUBEADM_SOCKETS if os.path.exists(path)],
        }

    def cmdlines(self):
        found = []
        try:
            pids = [name for name in os.listdir(self.proc_root) if name.isdigit()]
        except OSError:
            return found
        for pid in pids:
            try:
                with open(os.path.join(self.proc_root, pid, "cmdline"), "rb") as handle:
                    raw = handle.read()
            except OSError:
                continue
            argv = [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]
            if argv:
                found.append(argv)
        return found
