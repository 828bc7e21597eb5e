# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reading a GPU node's container runtime for ``runtime/state.py``'s ``Planner``: a few
commands through a ``host/commands.py`` Host (the package manager through
``host/packages.py``, units through ``host/systemd.py``), the rest from files.

Standard library only (plus the TOML and YAML readers the modules declare);
Python 3.8+ (this runs on target hosts).
"""

import hashlib
import os

from ansible.module_utils.gpunode.host import processes
from ansible.module_utils.gpunode.host.files import exists, is_executable, is_file, read_file, rke2_files
from ansible.module_utils.gpunode.host.packages import manager
from ansible.module_utils.gpunode.runtime.containerd_config import (
    ContainerdConfigError,
    cri_disabled,
    root_version,
    version_from_output,
)
from ansible.module_utils.gpunode.runtime.containerd_config import parse as parse_toml
from ansible.module_utils.gpunode.runtime.engines import (
    CDI_GENERATED_SPEC,
    CDI_REFRESH_SPEC,
    CDI_REFRESH_UNITS,
    ENGINE_UNITS,
    KUBEADM_SOCKETS,
    KUBELET_CONFIG,
    KUBELET_FLAG_FILES,
    RANCHER,
    RANCHER_DROPIN_NAME,
    TOOLKIT,
    RuntimeStateError,
    flag_value,
    generated_runtimes,
    kubelet_argv,
    parse_apt_policy,
    parse_docker_info,
    rancher_effective,
)
from ansible.module_utils.gpunode.runtime.toolkit_source import (
    REPOQUERY_FORMAT,
    YAML_PACKAGE,
    parse_repoquery,
    source,
)

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
        self.backend = None  # the package manager (host/packages.py), once read() found it
        self.source = None  # the toolkit's repository for it (toolkit_source.source)

    def text(self, path):
        return self.tools["read_text"](path, RuntimeStateError)

    def started(self, unit):
        if not unit["active"] or not unit["pid"]:
            return None
        return self.tools["process_start"](unit["pid"])

    def read(self):
        wanted, tools = self.wanted, self.tools
        backend = manager(self.host)
        if backend is None or (backend.name == "apt" and not self.host.which("apt-get")):
            raise RuntimeStateError(
                "nvidia_container_runtime supports apt-based hosts (Debian, Ubuntu) and dnf-based ones "
                "(RHEL, Rocky, AlmaLinux 9 and 10): neither dpkg-query and apt-get nor rpm and dnf "
                "on a RHEL-family os-release found"
            )
        self.backend = backend
        self.source = source(backend.name, wanted)
        watched = [wanted["package"], TOOLKIT, *wanted["toml_packages"], YAML_PACKAGE[backend.name]]
        units = tools["units_state"](
            self.host,
            [*ENGINE_UNITS.values(), *(unit for flavor in RANCHER.values() for unit in flavor["units"]),
             *CDI_REFRESH_UNITS],
        )
        observed = {
            "package_manager": backend.name,
            "installed": backend.installed_versions(watched),
            "toml_parser": tools["toml_parser"],
            "yaml_available": tools["yaml_load"] is not None,
            "python": wanted["python"],
            "keyring_ok": self.keyring_ok(),
            "sources_text": self.text(self.source["path"]),
            "toolkit_binary": is_executable(wanted["binary"]),
            "driver_version": wanted["driver_version"] or self.loaded_driver(),
            "cdi_specs": {path: self.text(path) for path in (CDI_GENERATED_SPEC, CDI_REFRESH_SPEC)},
            "cdi_failed": [unit for unit in CDI_REFRESH_UNITS if units[unit].get("failed")],
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
        path, checksum = self.source["keyring"], self.wanted["repo_key_checksum"]
        if not is_file(path):
            return False
        if not checksum:
            return True
        algorithm, _sep, digest = checksum.partition(":")
        try:
            return hashlib.new(algorithm, read_file(path)).hexdigest() == digest.lower()
        except (OSError, ValueError):
            return False

    def loaded_driver(self):
        try:
            version = read_file(os.path.join(self.sys_root, "module", "nvidia", "version"), "ascii")
            return version.strip() or None
        except OSError:
            return None

    def apt(self, observed):
        """The package index's view of the packages the plan may install (only when one may be):
        ``apt-cache policy``, or ``dnf repoquery`` (:meth:`dnf_known`)."""
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
        names = [wanted["package"], TOOLKIT, *wanted["toml_packages"], YAML_PACKAGE[self.backend.name]]
        if self.backend.name == "dnf":
            return self.dnf_known(names)
        apt_cache = self.host.which("apt-cache")
        if not apt_cache:
            return {}
        _rc, out, _err = self.host.run([apt_cache, "policy", *names])
        return parse_apt_policy(out)

    def dnf_known(self, names):
        """What the enabled repositories offer of ``names``, from dnf's metadata cache (``dnf -C
        repoquery``: no download, no key import; a read answers no to any prompt). Nothing when dnf
        fails (a repository with no cache yet): the plan then refreshes the metadata before installing,
        and check mode does not try the install."""
        rc, out, _err = self.host.run(
            [self.host.which("dnf"), "-q", "-C", "--assumeno", "repoquery", "--queryformat", REPOQUERY_FORMAT,
             *names]
        )
        return parse_repoquery(out) if rc == 0 else {}

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
        version, defaults = tools["containerd_facts"](self.host, None)
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
            # asks the running daemon what its CRI plugin loaded (kubeadm's cri-tools ships it)
            "crictl": self.host.which("crictl"),
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
        before, after = [], []
        for path in rke2_files(f"{etc}/config.yaml"):
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
            "sockets": [path for path, _engine in KUBEADM_SOCKETS if exists(path)],
        }

    def cmdlines(self):
        return processes.command_lines(self.proc_root)
