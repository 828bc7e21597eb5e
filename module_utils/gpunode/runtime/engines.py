# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The container engines of a GPU node as gpunode reads them, free of Ansible: the paths
and versions that matter, parsers for what commands print, the kubelet's engine, RKE2/k3s
configuration, and the settings and CDI spec wanted (part of the runtime concern:
``runtime/state.py`` plans, ``runtime/reader.py`` reads).

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
  The path unit fires when ``modules.dep`` or ``nvidia-ctk`` changes, often before the driver's
  userspace is there; the service then fails (``Restart=on-failure``, ``StartLimitBurst=5`` in
  10 s from 1.18.2, systemd's default burst before), and after the burst both units stay failed
  until ``systemctl reset-failed`` (``deployments/systemd/`` of NVIDIA/nvidia-container-toolkit;
  its issues 1611 and 1982, Azure/AgentBaker PRs 8736 and 9150).
- CRI-O reads CDI specs from ``/etc/cdi`` and ``/var/run/cdi`` by default
  (crio.conf(5), ``cdi_spec_dirs``; CDI support since CRI-O 1.23).
- A driver outside ``/`` (an image's ``/usr/local/nvidia``, GKE's
  ``/home/kubernetes/bin/nvidia``: ``gpunode.driver.roots``) reaches the spec as
  ``nvidia-ctk cdi generate --driver-root=ROOT --dev-root=/`` (the device nodes
  stay in ``/dev``: without ``--dev-root`` nvidia-ctk looks for them under the
  driver root too); ``nvidia-cdi-refresh.service`` reads the same settings as
  ``NVIDIA_CTK_DRIVER_ROOT`` and ``NVIDIA_CTK_DEV_ROOT`` from its
  ``EnvironmentFile=-/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env``
  (the unit shipped with the toolkit; Ray's sandbox documentation, "GPU
  access", gives the same two lines for GKE nodes).

Standard library only (plus the TOML and YAML readers the modules declare);
Python 3.8+ (this runs on target hosts).

Standard library only; Python 3.8+ (this runs on target hosts).
"""

import json
import os
import re

from ansible.module_utils.gpunode.runtime.containerd_config import containerd_release

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
#: The toolkit's units that keep CDI_REFRESH_SPEC (toolkit 1.18+): the service, then its path unit.
CDI_REFRESH_UNITS = ("nvidia-cdi-refresh.service", "nvidia-cdi-refresh.path")
#: The environment file nvidia-cdi-refresh.service reads (toolkit 1.18+).
CDI_REFRESH_ENV = "/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env"
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


def cdi_driver_settings(driver_root):
    """``(args, environment)`` that make nvidia-ctk's spec of a driver under ``driver_root``:
    none for ``/``; else ``--driver-root``/``--dev-root=/`` for ``nvidia-ctk cdi generate`` and
    the same as the variables of :data:`CDI_REFRESH_ENV`."""
    if not driver_root or driver_root == "/":
        return [], {}
    return ([f"--driver-root={driver_root}", "--dev-root=/"],
            {"NVIDIA_CTK_DRIVER_ROOT": driver_root, "NVIDIA_CTK_DEV_ROOT": "/"})


def cdi_spec_plan(toolkit_release, spec_texts, driver_version, driver_root="/", service_manager=True, *,
                  failed=()):
    """What to do for the CDI spec: ``{"action": None|"generate"|"refresh", "path", "why",
    "args", "environment"}`` (``args``/``environment``: :func:`cdi_driver_settings`).

    Both actions run ``nvidia-ctk cdi generate --output=PATH ARGS`` (what the toolkit's unit runs);
    ``refresh`` (toolkit 1.18+, where systemd runs: ``service_manager``) then resets the failed state
    of :data:`CDI_REFRESH_UNITS` and restarts the path unit, also when only they have ``failed``
    (the units of them in that state) and the spec is current.

    ``spec_texts``: {path: text or None} of the spec files; a spec is current
    when it exists and names the loaded driver's version (its library paths do)
    and, for a driver outside ``/``, its driver root (the paths under it).
    """
    refresh = service_manager and toolkit_release is not None and toolkit_release >= CDI_REFRESH_SINCE
    path = CDI_REFRESH_SPEC if refresh else CDI_GENERATED_SPEC
    args, environment = cdi_driver_settings(driver_root)
    result = {"action": None, "path": path, "why": None, "args": args, "environment": environment}
    text = spec_texts.get(path)
    if not driver_version:
        result["why"] = "no NVIDIA driver loaded: the CDI spec comes with the driver"
        return result
    if text is None:
        why = f"{path} is missing"
    elif driver_version not in text:
        why = f"{path} does not describe the loaded driver {driver_version}"
    elif environment and driver_root not in text:
        why = f"{path} does not describe the driver under {driver_root}"
    elif refresh and failed:
        why = f"{' and '.join(failed)} failed: nothing refreshes {path} on the next driver change"
    else:
        return result
    return dict(result, action="refresh" if refresh else "generate", why=why)
