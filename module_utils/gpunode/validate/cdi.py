# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The cdi check: each CDI spec of kind ``nvidia.com/gpu`` lists ``all`` and every GPU of the node.

How ``nvidia-ctk cdi generate`` names devices (NVIDIA/nvidia-container-toolkit):

- kind ``nvidia.com/gpu`` (``pkg/nvcdi/options.go``), a device ``all`` merging every other
  (``pkg/nvcdi/transform/merged-device.go``);
- one device per GPU and name strategy, ``index`` and ``uuid`` by default since 1.15
  (``cmd/nvidia-ctk/cdi/generate/generate.go``): ``0`` and ``GPU-<uuid>``; a MIG device
  ``<gpu>:<mig>`` and ``MIG-<uuid>`` (``pkg/nvcdi/namer.go``; ``<mig>`` its index on its GPU, as
  ``nvidia-smi -L`` numbers it). A spec that uses one strategy only is judged by that one;
- from 1.18 a GPU in MIG mode is listed by its MIG devices only (``pkg/nvcdi/lib-nvml.go``).

containerd, CRI-O and Docker read ``*.yaml`` and ``*.json`` specs from ``/etc/cdi`` and
``/var/run/cdi``. The check applies where CDI is in use: a spec of that kind is there, or the
toolkit's ``nvidia-cdi-refresh.path`` (1.18+) is enabled to keep one. Standard library (PyYAML for
a YAML spec, through ``formats/yaml_load.py``); Python 3.8+ (runs on managed nodes).
"""

import json
import re

from ansible.module_utils.gpunode.formats import yaml_load
from ansible.module_utils.gpunode.host.files import listdir, read_text
from ansible.module_utils.gpunode.host.systemd import services_state
from ansible.module_utils.gpunode.validate.checks import HOST, result, skipped
from ansible.module_utils.gpunode.validate.smi import parse_migs

KIND = "nvidia.com/gpu"
SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
REFRESH_PATH = "nvidia-cdi-refresh.path"
_INDEX_NAME = re.compile(r"\d+(:\d+)?$")


def spec_files(dirs):
    """The spec files of ``dirs`` (``*.yaml``, ``*.json``), by folder then name."""
    found = []
    for folder in dirs:
        try:
            names = sorted(listdir(folder))
        except OSError:
            continue
        found.extend(f"{folder}/{name}" for name in names if name.endswith((".yaml", ".json")))
    return found


def load_spec(path):
    """The spec at ``path`` as data (None: PyYAML missing); raises ValueError naming the problem."""
    text = read_text(path, ValueError)
    if text is None:  # a dangling link, or removed since it was listed
        raise ValueError(f"{path}: cannot read: No such file or directory")
    if not path.endswith(".json") and yaml_load.yaml is None:
        return None
    try:
        data = json.loads(text) if path.endswith(".json") else yaml_load.safe_load(text)
    except Exception as exc:  # json's ValueError, yaml.YAMLError
        raise ValueError(f"{path}: not a CDI spec: {' '.join(str(exc).split())[:200]}") from None
    if not isinstance(data, dict) or not isinstance(data.get("devices", []), list):
        raise ValueError(f"{path}: not a CDI spec (a mapping with a devices list)")
    return data


def wanted_names(gpus, migs, names):
    """The device names a spec whose devices are ``names`` must hold for ``gpus`` (-q -x reading)
    and ``migs`` (:func:`smi.parse_migs`), in the strategies the spec uses (both where it shows none)."""
    by_uuid = any(name.startswith(("GPU-", "MIG-")) for name in names)
    by_index = any(_INDEX_NAME.match(name) for name in names)
    if not (by_uuid or by_index):
        by_uuid = by_index = True
    wanted = ["all"]
    for gpu in gpus:
        index = gpu["index"]
        devices = migs.get(index) or ([] if gpu.get("mig_mode") == "Enabled" else [(None, gpu["uuid"])])
        for mig, uuid in devices:
            wanted.extend(([str(index) if mig is None else f"{index}:{mig}"] if by_index else [])
                          + ([uuid] if by_uuid else []))
    return wanted


def judge(path, spec, gpus, migs):
    names = {str(device.get("name")) for device in spec.get("devices") or [] if isinstance(device, dict)}
    missing = [name for name in wanted_names(gpus, migs, names) if name not in names]
    if missing:
        return result("cdi", HOST, False, f"{path}: no device {', '.join(missing)} of kind {KIND} "
                                          f"(pods asking for them fail; it lists {len(names)} devices)")
    return result("cdi", HOST, True, f"{path}: lists all and every GPU of the node ({len(names)} devices)")


def no_spec(host, dirs):
    unit = services_state(host, [REFRESH_PATH]).get(REFRESH_PATH) or {}
    where = f"no CDI spec of kind {KIND} in {', '.join(dirs)}"
    if unit.get("enabled") == "enabled":
        return [result("cdi", HOST, False, f"{where}, while {REFRESH_PATH} is enabled to keep one "
                                           f"(it is {unit.get('active')})")]
    return [skipped("cdi", HOST, f"{where}, and no enabled {REFRESH_PATH}: CDI is not in use")]


def cdi(host, params, reading):
    """Results of the cdi check: one per spec file of kind ``nvidia.com/gpu`` in :data:`SPEC_DIRS`
    (``nvidia-smi -L`` read for the MIG devices where a GPU is in MIG mode)."""
    dirs, migs = SPEC_DIRS, {}
    if any(gpu.get("mig_mode") == "Enabled" for gpu in reading["gpus"]):
        rc, out, _err = host.run([params["nvidia_smi"], "-L"])
        migs = parse_migs(out) if rc == 0 else {}
    results = []
    for path in spec_files(dirs):
        try:
            spec = load_spec(path)
        except ValueError as exc:
            results.append(result("cdi", HOST, False, str(exc)))
            continue
        if spec is None:
            results.append(skipped("cdi", HOST, f"{path}: not read: PyYAML (python3-yaml) is not installed"))
        elif spec.get("kind") == KIND:
            results.append(judge(path, spec, reading["gpus"], migs))
    return results or no_spec(host, dirs)
