# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kubelet's configuration files: KubeletConfiguration (YAML or JSON) and its drop-ins.

- A KubeletConfiguration file (``--config``: kubeadm's
  ``/var/lib/kubelet/config.yaml``, kubespray's
  ``/etc/kubernetes/kubelet-config.yaml``, EKS's
  ``/etc/kubernetes/kubelet/config.json``) sets ``featureGates``. A file whose
  content is JSON is edited as JSON and stays JSON (key order and indentation
  kept, through json_config); a YAML file is edited through yaml_edit, so
  comments and layout survive.
- The drop-in directory (``--config-dir``, kubelet_compat): files ending in
  ``.conf``, merged over the main file in lexical order as JSON merge
  patches, featureGates key by key. gpunode owns one drop-in there
  (DROPIN_NAME) and never touches the main file.

Standard library, and PyYAML for YAML files (yaml_edit guards the import:
callers check ``YAML_IMPORT_ERROR`` first). Python 3.8+ (this runs on target hosts).
"""

import json
import os

from ansible.module_utils.gpunode.formats.json_config import JSONConfigError, detect_indent
from ansible.module_utils.gpunode.formats.json_config import parse as parse_json
from ansible.module_utils.gpunode.formats.yaml_edit import (
    YAML_IMPORT_ERROR,
    YamlEditError,
    get,
    remove_key,
    set_scalar,
)
from ansible.module_utils.gpunode.host.files import is_dir, listdir
from ansible.module_utils.gpunode.kubelet.compat import DROPIN_EXTENSION
from ansible.module_utils.gpunode.kubelet.gates import GateError

KIND = "KubeletConfiguration"
DEFAULT_API_VERSION = "kubelet.config.k8s.io/v1beta1"
DROPIN_NAME = "90-gpunode-feature-gates.conf"
DROPIN_HEADER = (
    "# Written by gpunode (roles/kubelet_gpu): the feature gates of this GPU node\n"
    "# (and the taints it registers with while it has not passed its validation).\n"
    "# The kubelet merges this file over its main configuration (--config-dir);\n"
    "# change the role's variables rather than this file.\n"
)


class ConfigError(GateError):
    """A configuration file that cannot be used; the message names the problem (the caller adds the path)."""


class MissingYaml(ConfigError):
    """A YAML file to read on a node without PyYAML."""


def is_json(text):
    """True when the file's content is JSON (an object), whatever its name."""
    return text.lstrip().startswith("{")


def load(text):
    """The document of a KubeletConfiguration text (JSON or YAML) as plain data; {} when empty."""
    if not text.strip():
        return {}
    if is_json(text):
        try:
            return parse_json(text, "the file")
        except JSONConfigError as exc:
            raise ConfigError(str(exc).replace("the file: ", "", 1)) from None
    if YAML_IMPORT_ERROR is not None:
        raise MissingYaml("a YAML file, and PyYAML (python3-yaml) is not installed")
    try:
        data = get(text, [], None)
    except YamlEditError as exc:
        raise ConfigError(str(exc)) from None
    return {} if data is None else data


def read(text):
    """(data, featureGates) of a KubeletConfiguration text; ConfigError when it is not one."""
    data = load(text)
    if not isinstance(data, dict):
        raise ConfigError("not a KubeletConfiguration: the document is not a mapping")
    kind = data.get("kind")
    if kind not in (None, KIND):
        raise ConfigError(f"not a KubeletConfiguration (kind: {kind})")
    gates = data.get("featureGates") or {}
    if not isinstance(gates, dict):
        raise ConfigError("featureGates is not a mapping")
    for name, value in gates.items():
        if not isinstance(value, bool):
            raise ConfigError(f"featureGates.{name}: {value!r} is not true or false")
    return data, dict(gates)


def write_gates(text, current, merged):
    """``text`` with featureGates changed from ``current`` to ``merged`` (other gates and keys kept)."""
    if merged == current and list(merged) == list(current):
        return text
    if is_json(text):
        return _write_json_gates(text, merged)
    try:
        for name in current:
            if name not in merged:
                text = remove_key(text, ["featureGates", name])
        for name, value in merged.items():
            if current.get(name) is not value:
                text = set_scalar(text, ["featureGates", name], value)
    except YamlEditError as exc:
        raise ConfigError(str(exc)) from None
    return text


def _write_json_gates(text, merged):
    data = parse_json(text, "the file")
    if merged:
        data["featureGates"] = dict(merged)
    else:
        data.pop("featureGates", None)
    body = text.strip()
    if "\n" not in body:
        return json.dumps(data, ensure_ascii=False) + ("\n" if text.endswith("\n") else "")
    return json.dumps(data, indent=detect_indent(text), ensure_ascii=False) + "\n"


def render_dropin(gates, api_version=None, taints=None):
    """The text of gpunode's drop-in: apiVersion, kind, featureGates and registerWithTaints (YAML,
    written without PyYAML: strings as JSON strings, which YAML reads as they are); None when it
    would set nothing."""
    if not gates and not taints:
        return None
    lines = [DROPIN_HEADER, f"apiVersion: {api_version or DEFAULT_API_VERSION}\n", f"kind: {KIND}\n"]
    if gates:
        lines.append("featureGates:\n")
        lines += [f"  {name}: {'true' if value else 'false'}\n" for name, value in gates.items()]
    if taints:
        lines.append("registerWithTaints:\n")
        for taint in taints:
            fields = [name for name in ("key", "value", "effect") if taint.get(name)]
            for index, name in enumerate(fields):
                lines.append(f"{'  ' if index else '- '}{name}: {json.dumps(taint[name])}\n")
    return "".join(lines)


def dropin_files(directory, listdir=listdir, isdir=is_dir):
    """The drop-ins the kubelet reads from ``directory``, in its order (a lexical walk, subfolders too)."""
    found = []
    try:
        names = sorted(listdir(directory))
    except FileNotFoundError:
        return found
    for name in names:
        path = os.path.join(directory, name)
        if isdir(path):
            found += dropin_files(path, listdir, isdir)
        elif name.endswith(DROPIN_EXTENSION):
            found.append(path)
    return found


def effective(documents):
    """featureGates and failCgroupV1 after merging ``documents`` (data, in the kubelet's order).

    JSON merge patch semantics: a later document's gate wins per gate; a
    null value removes the key.
    """
    gates = {}
    fail_cgroup_v1 = None
    for data in documents:
        if "featureGates" in data:
            value = data["featureGates"]
            if value is None:
                gates = {}
            else:
                for name, flag in value.items():
                    if flag is None:
                        gates.pop(name, None)
                    else:
                        gates[name] = flag
        if "failCgroupV1" in data:
            fail_cgroup_v1 = data["failCgroupV1"]
    return gates, fail_cgroup_v1
