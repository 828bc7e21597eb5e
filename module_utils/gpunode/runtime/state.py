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

This file holds the plan (``Planner``), free of Ansible; ``runtime/engines.py`` the
parsers for what commands print, the kubelet engine, RKE2/k3s configuration and CDI,
with the sources of those facts; ``runtime/reader.py`` the reading (``NodeReader``).
"""


import re

from ansible.module_utils.gpunode.runtime.containerd_config import ContainerdConfigError
from ansible.module_utils.gpunode.runtime.engines import (
    CDI_REFRESH_UNITS,
    CDI_SPEC_DIRS,
    KUBELET_DEFAULT_ENDPOINT,
    RANCHER_SOCKET,
    TOOLKIT,
    RuntimeStateError,
    cdi_spec_plan,
    docker_cdi,
    docker_settings,
    kubelet_engine,
    rancher_dropin_text,
    release_of,
    upstream_version,
)
from ansible.module_utils.gpunode.runtime.toolkit_source import (
    YAML_PACKAGE,
    package_specs,
    repo_file_converged,
    source,
    spec_name,
)

# --- the plan ---------------------------------------------------------------------


#: What the run's table says of an engine whose configuration changed on a host where systemd does
#: not run: the file is written, and its daemon must be restarted by whatever runs it there.
NO_SERVICE_MANAGER = "restart needed: no service manager"
#: ... and in an image build (docs/ROLES.md, "Image bake mode"), where systemd may run but nothing restarts
IMAGE_BUILD = "started at boot with these files (image build)"


def engine_restart(active, outdated, changed, service_manager, owed=NO_SERVICE_MANAGER):
    """``(restart, needed)`` of a container engine after its files were planned.

    ``restart``: restart it through systemd now (it runs and its files changed, or what runs is
    ``outdated``: older than its files, or not reporting them). ``needed``: a restart owed that
    nothing here can do (:data:`NO_SERVICE_MANAGER`: systemd does not run this host, e.g. an
    image host's container), or None. Without systemd no restart is tried, never through systemctl.
    """
    if not service_manager:
        return False, (owed if changed else None)
    return bool(active and (changed or outdated)), None


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
        self.source = source(observed.get("package_manager", "apt"), wanted)
        self.plan = {
            "package_manager": self.source["manager"],
            "keyring": self.source["keyring"],
            "repo_key": False,
            "repo_source": False,
            "sources_text": self.source["sources_text"],
            "rpm_repository": self.source["repository"],
            "update_cache": False,
            "install": False,
            "packages": [],
            "docker": {"configure": False, "restart": False, "settings": {}},
            "containerd": {"configure": False, "restart": False, "args": {}, "reason": None},
            "rancher": {"flavor": None, "configure": False, "restart": False},
            "cdi": {"action": None, "path": None, "args": [], "environment": {}},
        }

    # -- packages

    def packages(self):
        observed, wanted, plan = self.observed, self.wanted, self.plan
        installed, apt = observed["installed"], observed["apt"]
        if wanted["manage_repo"]:
            if not observed["keyring_ok"]:
                plan["repo_key"] = True
                self.reasons.append(
                    f"the repository key {self.source['keyring']} is missing or has another checksum"
                )
            if not self.repo_converged():
                plan["repo_source"] = True
                self.reasons.append(f"the repository source {self.source['path']} differs")
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
            name = YAML_PACKAGE[plan["package_manager"]]
            wanted_packages[name] = None
            self.reasons.append(
                f"{observed['rancher']}'s YAML configuration is read with {name}, not installed"
            )
        plan["install"] = bool(wanted_packages)
        plan["packages"] = package_specs(plan["package_manager"], wanted_packages)
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

    def repo_converged(self):
        """Whether the toolkit's source file (apt's deb822 source, dnf's ``.repo``) is as wanted."""
        text = self.observed["sources_text"]
        if self.source["repository"] is None:
            return text == self.source["sources_text"]
        return repo_file_converged(text, self.source["repository"], self.source["path"])

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
            restart, needed = engine_restart(docker["active"], not running or bool(docker["stale"]), changed,
                                             self.observed.get("service_manager", True), self.owed)
            if needed:
                plan["docker"]["restart_needed"] = needed
            if restart:
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

    @property
    def owed(self):
        """What the run's table says of an engine restart owed (:func:`engine_restart`)."""
        return IMAGE_BUILD if self.observed.get("image_build") else NO_SERVICE_MANAGER

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
        args["systemd_cgroup"] = outcome["systemd_cgroup"]  # the writing module writes what was planned
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
            self.plan["containerd"].update(configure=True, restart=containerd["active"], args=args,
                                           reason=f"{args['dropin_path']} declares the nvidia runtime")
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
        # what a failed restart names: a drop-in whose version the root's does not match is refused, or
        # not, by the containerd patch level (containerd PR 13939 removed that check)
        plan["containerd"]["reason"] = (
            f"{args['dropin_path']} (config version {outcome['schema_version']}, as {args['config_path']}'s; "
            f"containerd {containerd['version'] or 'of unknown version'}) declares the nvidia runtime")
        if changed:
            self.reasons.append(
                f"containerd's files do not declare the nvidia runtime as wanted ({args['dropin_path']})"
            )
        restart, needed = engine_restart(containerd["active"], bool(containerd["stale"]), changed,
                                         self.observed.get("service_manager", True), self.owed)
        if needed:
            plan["containerd"]["restart_needed"] = needed
        if restart:
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
        containerd = self.observed.get("containerd") or {}
        if containerd.get("crictl") and not containerd.get("cri_disabled"):
            # what the running daemon loaded, not what the files say: its CRI runtime handlers
            # (crictl info: config.containerd.runtimes and defaultRuntimeName, containerd 1.7 and 2.x)
            plan["containerd"]["checks"].append({
                "command": [containerd["crictl"], "--runtime-endpoint", KUBELET_DEFAULT_ENDPOINT, "info"],
                "expect": [r'"nvidia":\s*\{'] + (
                    [r'"defaultRuntimeName":\s*"nvidia"'] if wanted["containerd_default_runtime"] else []),
            })
        # after a refresh: the path unit watches again (it runs, not failed)
        plan["cdi"]["checks"] = [{"command": ["systemctl", "is-active", CDI_REFRESH_UNITS[1]], "expect": []}]
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
        if any(spec_name(spec, plan["package_manager"]) == wanted["package"] for spec in plan["packages"]):
            before = upstream_version(self.observed["installed"].get(TOOLKIT)) or "none"
            lines.append(f"container toolkit {before} -> {toolkit_version or 'newest'}")
        for engine, default in (
            ("docker", "docker_default_runtime"),
            ("containerd", "containerd_default_runtime"),
        ):
            if plan[engine]["configure"]:
                needed = f"; {plan[engine]['restart_needed']}" if plan[engine].get("restart_needed") else ""
                lines.append(f"{engine}: nvidia runtime{' (default)' if wanted[default] else ''}{needed}")
            elif plan[engine]["restart"]:
                lines.append(f"{engine}: restarted to load its configuration")
        if plan["rancher"]["configure"]:
            default = "nvidia" if plan["rancher"]["dropin_text"] else "runc"
            lines.append(f"{plan['rancher']['flavor']}: default runtime {default}")
        elif plan["rancher"]["restart"]:
            lines.append(f"{plan['rancher']['flavor']}: restarted to regenerate containerd's config")
        if plan["cdi"]["action"]:
            done = {"generate": "generated", "refresh": "regenerated, nvidia-cdi-refresh reset"}
            lines.append(f"CDI spec {done[plan['cdi']['action']]} ({plan['cdi']['path']})")
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
                release_of(toolkit_version), observed["cdi_specs"], observed["driver_version"],
                wanted["driver_root"], observed.get("service_manager", True),
                failed=observed.get("cdi_failed", ()),
            )
            plan["cdi"] = {key: spec[key] for key in ("action", "path", "args", "environment")}
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
