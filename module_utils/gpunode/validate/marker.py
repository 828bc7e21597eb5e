# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The record of a node's last validation (``/var/lib/gpunode/validated.json``).

The gpu_validate role writes what ``nvidia_gpu_validate`` returns as ``marker``
(``{"passed", "failed_checks", "driver_version"}``, and ``fabric`` where the GPUs report one:
no time, so that the same verdict writes the same bytes and a second validation changes nothing; the
time is the file's modification time). ``gpunode_node_state`` reads it as the
concern ``validated``: converged when the last validation passed, with the
driver that is loaded now, and nothing before it changes in this run; site.yml's
validation play then leaves the host out (no round trip).

Standard library only; Python 3.8+ (runs on managed nodes).
"""

import json
import time

from ansible.module_utils.gpunode.host import systemd
from ansible.module_utils.gpunode.host.files import exists, file_stat, is_dir, read_file

MARKER = "/var/lib/gpunode/validated.json"

ARGUMENT_SPEC = {
    "marker": {"type": "path", "default": MARKER},
    "driver_version": {"type": "str", "default": ""},
    # the boot unit's file, when the role installs one (gpu_validate_boot_unit, where systemd runs)
    "boot_unit": {"type": "path", "default": ""},
}


def content(outcome, driver_version, fabric=None):
    """What the role writes after a validation (``outcome`` as nvidia_gpu_validate returns it; ``fabric``:
    the GPUs' fabric state, kept only where there is one, so a node without a fabric writes what it did)."""
    return {"passed": bool(outcome["passed"]), "failed_checks": list(outcome["failed_checks"]),
            "driver_version": driver_version or "", **({"fabric": fabric} if fabric else {})}


def read(path, loaded_driver="", boot_unit=""):
    """(converged, facts, why not): facts ``{"gpu_validate": {passed, failed_checks, validated_at}}``.
    Not converged either where systemd runs and ``boot_unit`` is wanted but not installed yet (the
    role installs it when it validates: a node validated before it existed gets it)."""
    try:
        record = json.loads(read_file(path, "utf-8"))
        stamp = file_stat(path).st_mtime
    except FileNotFoundError:
        return False, {}, f"{path}: not validated yet"
    except (OSError, ValueError) as exc:
        return False, {}, f"{path}: unreadable ({exc})"
    if not isinstance(record, dict):
        return False, {}, f"{path}: not a JSON object"
    facts = {"gpu_validate": {
        "passed": record.get("passed") is True,
        "failed_checks": record.get("failed_checks") or [],
        "validated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp)),
        "ran": False,
        "fabric": record.get("fabric"),
    }}
    if record.get("passed") is not True:
        return False, facts, f"{path}: the last validation failed"
    wanted = record.get("driver_version") or ""
    if loaded_driver and wanted and wanted != loaded_driver:
        return False, facts, f"{path}: validated with driver {wanted}, {loaded_driver} is loaded now"
    if boot_unit and systemd.booted(is_dir) and not exists(boot_unit):
        return False, facts, f"{boot_unit}: the boot unit is not installed yet"
    return True, facts, None
