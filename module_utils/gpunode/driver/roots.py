# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where the loaded driver lives and who put it there.

Images put the driver's userspace outside the distribution's paths: cloud and
vendor images under ``/usr/local/nvidia`` (``bin/nvidia-smi``, ``lib64/``), GKE
under ``/home/kubernetes/bin/nvidia``, the GPU Operator's driver container under
``/run/nvidia/driver`` (its root file system). Two things follow from where
``nvidia-smi`` is found:

- the tools' prefix (``<prefix>/bin/nvidia-smi``, ``<prefix>/lib64``), and
- the driver root, the directory the driver's files hang from, which
  ``nvidia-ctk cdi generate --driver-root`` and the DRA driver's
  ``nvidiaDriverRoot`` take: ``/`` for a driver in ``/usr``, the prefix itself
  for an image's (GKE's guides pass ``--driver-root=/home/kubernetes/bin/nvidia``,
  NVIDIA/nvidia-container-toolkit issue 209), ``/run/nvidia/driver`` for the
  Operator's.

The origin of the loaded driver: a package (dpkg or rpm owns its files), a ``.run``
install (the installer's own traces, or the record gpunode writes after its own
installs), the GPU Operator, or the image (nothing else claims it). Pure Python.
"""

import os

from ansible.module_utils.gpunode.host import files

#: Where images and installers put nvidia-smi's prefix, searched after PATH.
TOOL_PREFIXES = ("/usr/local/nvidia", "/home/kubernetes/bin/nvidia", "/run/nvidia/driver/usr", "/usr")
#: The GPU Operator's driver container mounts its root file system here; the Operator upgrades it.
OPERATOR_ROOT = "/run/nvidia/driver"
#: The distribution's prefixes: the driver root of a driver under them is ``/``.
SYSTEM_PREFIXES = ("/usr", "/", "/usr/local")
#: What NVIDIA's installer leaves behind (its uninstaller and its log).
RUNFILE_TRACES = ("/usr/bin/nvidia-uninstall", "/var/log/nvidia-installer.log")
#: The record gpunode writes after each of its own ``.run`` installs (tasks/install_runfile.yml).
RUNFILE_RECORD = "/var/lib/gpunode/nvidia-driver-runfile"
#: The kernel packages gpunode holds (nvidia_driver_kernel_hold), one a line (tasks/converge.yml).
KERNEL_HOLD_RECORD = "/var/lib/gpunode/kernel-holds"
#: The library directories under an image's prefix.
PREFIX_LIB_DIRS = ("lib64", "lib", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu")


def find_smi(which, is_file=files.is_file):
    """The path of ``nvidia-smi``: on PATH (``which``), else under :data:`TOOL_PREFIXES`; or None."""
    found = which("nvidia-smi")
    if found:
        return found
    for prefix in TOOL_PREFIXES:
        candidate = os.path.join(prefix, "bin", "nvidia-smi")
        if is_file(candidate):
            return candidate
    return None


def location(smi_path, is_file=files.is_file):
    """``{"smi", "tools_prefix", "driver_root", "operator"}`` from nvidia-smi's path (None: no tools).

    An nvidia-smi on PATH outside every known prefix (a wrapper: a shim, the read-only guard of
    scripts/real-host-check.sh) is run as found, but the driver lives in the first of
    :data:`TOOL_PREFIXES` that has one.
    """
    if not smi_path:
        return {"smi": None, "tools_prefix": None, "driver_root": None, "operator": False}
    prefix = os.path.dirname(os.path.dirname(os.path.normpath(smi_path))) or "/"
    if prefix not in (*TOOL_PREFIXES, *SYSTEM_PREFIXES) and not prefix.startswith(OPERATOR_ROOT + "/"):
        prefix = next((p for p in TOOL_PREFIXES if is_file(os.path.join(p, "bin", "nvidia-smi"))), prefix)
    operator = prefix == OPERATOR_ROOT or prefix.startswith(OPERATOR_ROOT + "/")
    if operator:
        root = OPERATOR_ROOT
    elif prefix in SYSTEM_PREFIXES:
        root = "/"
    else:
        root = prefix
    return {"smi": smi_path, "tools_prefix": prefix, "driver_root": root, "operator": operator}


def lib_dirs(place):
    """The library directories of an image's prefix (none for the system's, read anyway)."""
    prefix = place.get("tools_prefix")
    if not prefix or place.get("driver_root") == "/":
        return []
    return [os.path.join(prefix, sub) for sub in PREFIX_LIB_DIRS]


def runfile_traces(exists, root="/"):
    """The traces of a ``.run`` install found on the host (paths), gpunode's record first."""
    paths = (RUNFILE_RECORD, *RUNFILE_TRACES)
    return [path for path in paths if exists(os.path.join(root, path.lstrip("/")))]


def origin(place, owners, traces):
    """``{"kind", "where", "packages"}`` of the loaded driver.

    ``kind``: ``operator`` (under :data:`OPERATOR_ROOT`), ``package`` (dpkg or rpm owns
    its files: ``owners``), ``runfile`` (``traces`` of the installer), ``image`` (its files
    are there and nothing claims them) or None (no driver files to judge by).
    ``where``: the tools' prefix.
    """
    where = place.get("tools_prefix")
    if place.get("operator"):
        kind = "operator"
    elif owners:
        kind = "package"
    elif traces:
        kind = "runfile"
    elif place.get("smi"):
        kind = "image"
    else:
        kind = None
    return {"kind": kind, "where": where, "packages": sorted(set(owners)), "traces": list(traces)}
