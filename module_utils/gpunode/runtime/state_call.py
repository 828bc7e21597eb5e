# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One call of ``nvidia_container_runtime_state``: its arguments and what it returns.

The module (``library/nvidia_container_runtime_state.py``) and the one read of every
concern (``gpunode_node_state``) both call :func:`read`; it raises one of :data:`ERRORS`.
"""

import platform

from ansible.module_utils.gpunode.formats import values
from ansible.module_utils.gpunode.formats.json_config import JSONConfigError
from ansible.module_utils.gpunode.formats.json_config import parse as parse_json
from ansible.module_utils.gpunode.formats.json_config import plan as json_plan
from ansible.module_utils.gpunode.formats.toml_reader import TOML_PACKAGES, TOML_PARSER
from ansible.module_utils.gpunode.formats.yaml_load import safe_load
from ansible.module_utils.gpunode.host.commands import Host
from ansible.module_utils.gpunode.host.files import read_text
from ansible.module_utils.gpunode.host.processes import stale_files
from ansible.module_utils.gpunode.host.systemd import booted, process_start, units_state
from ansible.module_utils.gpunode.runtime.containerd_config import (
    DEFAULT_CONFIG,
    DEFAULT_DROPIN,
    containerd_facts,
    other_imports,
)
from ansible.module_utils.gpunode.runtime.containerd_dropin import plan_node
from ansible.module_utils.gpunode.runtime.engines import RuntimeStateError
from ansible.module_utils.gpunode.runtime.reader import NodeReader
from ansible.module_utils.gpunode.runtime.state import Planner
from ansible.module_utils.gpunode.runtime.toolkit_source import (
    RPM_KEYRING,
    RPM_REPO_PATH,
    RPM_REPO_URL,
    rpm_baseurl,
)

try:
    import yaml
except ImportError:  # python3-yaml: needed on RKE2/k3s nodes only; the plan installs it there
    yaml = None

ARGUMENT_SPEC = {
    "package": {
        "type": "str",
        "choices": ["nvidia-container-toolkit", "nvidia-docker2"],
        "default": "nvidia-container-toolkit",
    },
    "version": {"type": "str", "default": ""},
    "manage_repo": {"type": "bool", "default": True},
    "repo_url": {"type": "str", "default": "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"},
    "repo_key_checksum": {"type": "str", "default": "", "no_log": False},
    "keyring": {"type": "path", "default": "/etc/apt/keyrings/nvidia-container-toolkit.asc"},
    "sources_path": {"type": "path", "default": "/etc/apt/sources.list.d/nvidia-container-toolkit.sources"},
    "rpm_repo_url": {"type": "str", "default": RPM_REPO_URL},
    "rpm_gpgcheck": {"type": "bool", "default": True},
    "rpm_keyring": {"type": "path", "default": RPM_KEYRING},
    "rpm_repo_path": {"type": "path", "default": RPM_REPO_PATH},
    "engines": {"type": "raw", "default": "auto"},
    "binary": {"type": "path", "default": "/usr/bin/nvidia-container-runtime"},
    "docker_default_runtime": {"type": "bool", "default": True},
    "docker_daemon_json": {"type": "path", "default": "/etc/docker/daemon.json"},
    "containerd_default_runtime": {"type": "bool", "default": True},
    "containerd_systemd_cgroup": {"type": "bool"},
    "containerd_config": {"type": "path", "default": DEFAULT_CONFIG},
    "containerd_dropin": {"type": "path", "default": DEFAULT_DROPIN},
    "cdi": {"type": "bool", "default": True},
    "driver_version": {"type": "str", "default": ""},
    "driver_root": {"type": "path", "default": "/"},
    "image_build": {"type": "bool", "default": False},
}
ENGINES = ("docker", "containerd")
ERRORS = (RuntimeStateError, JSONConfigError, values.ValueSyntaxError)
# The syntax of each value that lands in a file or on a command line, checked before anything is
# read: the deb822 source's URIs and Signed-By words, the .repo file's baseurl and gpgkey, the
# package version of `name=version` (apt) and `name-version` (dnf), the
# runtime binary in daemon.json and config.toml, the drop-in in config.toml's imports.
VALUE_RULES = {
    "version": values.optional(values.debian_version),
    "repo_url": values.apt_uri,
    "keyring": values.word_path,
    "sources_path": values.path,
    "rpm_repo_url": rpm_baseurl,
    "rpm_keyring": values.word_path,
    "rpm_repo_path": values.path,
    "binary": values.command,
    "docker_daemon_json": values.path,
    "containerd_config": values.path,
    "containerd_dropin": values.word_path,
    "driver_root": values.word_path,
}


def wanted_from(params):
    """The module's arguments, checked, as the Planner wants them; raises RuntimeStateError."""
    engines = params["engines"]
    if isinstance(engines, str) and engines != "auto":
        engines = [item.strip() for item in engines.split(",") if item.strip()]
    if engines != "auto" and (
        not isinstance(engines, list) or not all(isinstance(e, str) and e in ENGINES for e in engines)
    ):
        raise RuntimeStateError(f"engines must be 'auto' or a list of docker, containerd; got {engines!r}")
    checksum = params["repo_key_checksum"]
    if checksum and (":" not in checksum or not checksum.split(":", 1)[1].isalnum()):
        raise RuntimeStateError(f"repo_key_checksum must look like sha256:<hex>; got {checksum!r}")
    return dict(
        params,
        engines=engines,
        python=platform.python_version(),
        toml_packages=list(TOML_PACKAGES),
    )


def read(module):
    """The module's result for ``module.params`` (the plan, the facts); raises one of :data:`ERRORS`."""
    values.check(module.params, VALUE_RULES)
    wanted = wanted_from(module.params)
    tools = {
        "read_text": read_text,
        "units_state": units_state,
        "process_start": process_start,
        "stale_files": stale_files,
        "containerd_facts": containerd_facts,
        "other_imports": other_imports,
        "parse_json": parse_json,
        "toml_parser": TOML_PARSER,
        "yaml_load": safe_load if yaml is not None else None,
    }
    observed = NodeReader(Host(module, RuntimeStateError), wanted, tools).read()
    # an image build (docs/ROLES.md, "Image bake mode") restarts nothing and reads no driver: the boot does;
    # the image boots with systemd (a chroot or container build runs none): containerd's cgroup driver
    # follows it, and the writing module is handed the SystemdCgroup planned here (state.py)
    image_build, systemd_pid1 = module.params["image_build"], booted()
    observed["service_manager"], observed["image_build"] = systemd_pid1 and not image_build, image_build
    boots_with_systemd = systemd_pid1 or image_build
    observed["driver_version"] = None if image_build else observed["driver_version"]
    containerd = observed["containerd"]

    def plan_docker(text, settings, path):
        return json_plan(text, settings, path, docker=True)

    def plan_containerd(**args):  # the writing module's own plan (runtime/containerd_dropin.py)
        return plan_node(containerd, boots_with_systemd, **args)

    plan, facts = Planner(observed, wanted, plan_docker, plan_containerd).build()
    for warning in plan["warnings"]:
        module.warn(warning)
    return {"changed": False, "plan": plan, "ansible_facts": {"nvidia_container_runtime": facts}}


def converged(result):
    """Whether the plan leaves nothing to do."""
    return not result["plan"]["changes"]
