# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The processes running on the node, read from /proc (proc(5)).

- :func:`scan` finds the processes of one command name (``comm``) with their
  command line (``cmdline``, NUL-separated), their systemd service (the last
  ``*.service`` component of the cgroup path, cgroup v1 or v2) and their start
  (``stat`` field 22, clock ticks after boot), oldest first;
- :func:`command_lines` lists every process's command line (for a match on
  more than ``comm``);
- :func:`start_time` is when one process started, in wall-clock seconds;
- :func:`gpu_holders` lists the processes holding a GPU device open (GPU work), with the Kubernetes
  pod each runs in (:func:`pod_of_cgroup`) and, under containerd, the pod's namespace and name
  (:func:`pod_name`).

Times: ``starttime`` counts from boot, so a wall-clock time needs the time since
boot now. For this kernel's ``/proc`` that is ``CLOCK_BOOTTIME`` (the clock
``starttime`` is counted on, at nanosecond resolution) rather than ``btime`` of
``/proc/stat``, which is whole seconds and would make a file written half a
second before a restart look newer than the daemon; for another tree (a fake
one in tests) it is that tree's ``uptime``.

Standard library only; Python 3.8+ (this runs on target hosts).
"""

import json
import os
import re
import time
from collections import namedtuple

PROC = "/proc"

Process = namedtuple("Process", "pid argv unit started_after_boot")
Holder = namedtuple("Holder", "pid argv unit pod pod_name")
# A GPU's own device (DESIGN.md: a process holding /dev/nvidia[0-9]*). A CUDA context opens the
# device of each GPU it uses; /dev/nvidiactl, nvidia-uvm and nvidia-caps are also opened by
# tools that only look (nvidia-smi, monitoring), so they alone are no work.
GPU_DEVICE = re.compile(r"/dev/nvidia[0-9]+\Z")
# a pod's cgroup as the kubelet names it: ``kubepods-<qos>-pod<uid, "_" for "-">.slice`` with the systemd
# cgroup driver, ``kubepods/<qos>/pod<uid>`` with cgroupfs (pkg/kubelet/cm/cgroup_manager_linux.go)
POD_SLICE = re.compile(r"\Akubepods(?:-[a-z]+)?-pod([0-9a-f_]+)\.slice\Z")
POD_FOLDER = re.compile(r"\Apod([0-9a-f-]+)\Z")
# a container's cgroup under its pod's: ``cri-containerd-<id>.scope`` (systemd driver), ``<id>`` (cgroupfs)
CONTAINER = re.compile(r"\A(?:cri-containerd-)?([0-9a-f]{64})(?:\.scope)?\Z")
#: where containerd keeps a running container's bundle, its OCI spec (config.json) among it: the
#: system's containerd and RKE2/k3s' (runtime v2's state folder, CRI namespace k8s.io)
CONTAINERD_BUNDLES = ("/run/containerd/io.containerd.runtime.v2.task/k8s.io",
                      "/run/k3s/containerd/io.containerd.runtime.v2.task/k8s.io")
#: the CRI plugin's annotations of a container's spec (containerd's pkg/cri annotations; in 2.1.9's binary)
POD_NAMESPACE, POD_NAME = "io.kubernetes.cri.sandbox-namespace", "io.kubernetes.cri.sandbox-name"


def unit_of_cgroup(text):
    """The systemd service a process belongs to, from /proc/PID/cgroup; None when none."""
    unit = None
    for line in (text or "").splitlines():
        path = line.split(":", 2)[-1]
        for part in reversed(path.split("/")):
            if part.endswith(".service"):
                if unit is None or line.startswith("0::") or ":name=systemd:" in line:
                    unit = part
                break
    return unit


def pod_of_cgroup(text):
    """The uid of the Kubernetes pod a process runs in, from /proc/PID/cgroup; None when none."""
    for line in (text or "").splitlines():
        parts = line.split(":", 2)[-1].split("/")
        for index, part in enumerate(parts):
            found = POD_SLICE.match(part)
            if found:
                return found.group(1).replace("_", "-")
            found = POD_FOLDER.match(part)
            if found and "kubepods" in parts[:index]:
                return found.group(1)
    return None


def pod_name(cgroup_text, read=None, bundles=None):
    """``namespace/name`` of the pod a process runs in, from its container's spec where containerd keeps
    it (:data:`CONTAINERD_BUNDLES`); None elsewhere (another runtime, a spec that cannot be read)."""
    read = read or _read
    ids = [found.group(1) for found in (CONTAINER.match(line.rsplit("/", 1)[-1])
                                        for line in (cgroup_text or "").splitlines()) if found]
    if not ids:
        return None
    for root in bundles or CONTAINERD_BUNDLES:
        try:
            annotations = json.loads(read(os.path.join(root, ids[0], "config.json"))).get("annotations") or {}
        except (OSError, ValueError, AttributeError):
            continue
        if annotations.get(POD_NAMESPACE) and annotations.get(POD_NAME):
            return f"{annotations[POD_NAMESPACE]}/{annotations[POD_NAME]}"
    return None


def start_ticks(stat_text):
    """Field 22 of /proc/PID/stat (start time, clock ticks after boot).

    The command name (field 2) may hold spaces and parentheses: fields are
    counted after its last closing parenthesis.
    """
    rest = stat_text[stat_text.rindex(")") + 2 :].split()
    return int(rest[19])


def _read(path):
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _cgroup(read, base):
    try:
        return read(os.path.join(base, "cgroup"))
    except OSError:
        return None  # a tree without cgroups (a fake one in tests)


def _pids(proc_root, listdir):
    """The process ids under ``proc_root`` (none when it cannot be listed)."""
    try:
        return [name for name in listdir(proc_root) if name.isdigit()]
    except OSError:
        return []


def command_lines(proc_root=PROC, listdir=os.listdir):
    """Every process's command line (argv, empty arguments dropped), for a match on more than the
    command name (a kubelet script under an interpreter); kernel threads (no command line) left out."""
    found = []
    for pid in _pids(proc_root, listdir):
        try:
            with open(os.path.join(proc_root, pid, "cmdline"), "rb") as handle:
                raw = handle.read()
        except OSError:
            continue  # gone meanwhile, or not readable
        argv = [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]
        if argv:
            found.append(argv)
    return found


def scan(comm, proc_root=PROC, listdir=os.listdir, read=None, ticks_per_second=None):
    """The processes whose command name is ``comm``, as :class:`Process` tuples, oldest first."""
    read = read or _read
    hertz = ticks_per_second or os.sysconf("SC_CLK_TCK")
    found = []
    for pid in _pids(proc_root, listdir):
        base = os.path.join(proc_root, pid)
        try:
            if read(os.path.join(base, "comm")).strip() != comm:
                continue
            argv = [arg for arg in read(os.path.join(base, "cmdline")).split("\0") if arg]
            started = start_ticks(read(os.path.join(base, "stat"))) / float(hertz)
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not readable
        found.append(Process(int(pid), argv, unit_of_cgroup(_cgroup(read, base)), started))
    return sorted(found, key=lambda p: (p.started_after_boot, p.pid))


def since_boot(proc_root=PROC):
    """Seconds since boot now: ``CLOCK_BOOTTIME`` for ``/proc``, else ``uptime`` of that tree."""
    if os.path.normpath(proc_root) == PROC:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    return float(_read(os.path.join(proc_root, "uptime")).split()[0])


def wall_time(started_after_boot, boot_now, wall_now):
    """The wall-clock time a process started, from its start after boot and the two clocks now."""
    return wall_now - (boot_now - started_after_boot)


def start_time(pid, proc_root=PROC, now=None, boottime=None):
    """Wall-clock start time (epoch seconds) of process ``pid``; None when it is gone."""
    try:
        ticks = start_ticks(_read(os.path.join(proc_root, str(pid), "stat")))
    except (OSError, ValueError, IndexError):
        return None
    now = time.time() if now is None else now
    boottime = since_boot(proc_root) if boottime is None else boottime
    return wall_time(ticks / float(os.sysconf("SC_CLK_TCK")), boottime, now)


def stale_files(started, paths):
    """The files of ``paths`` modified after ``started`` (epoch seconds); [] when ``started`` is None."""
    if started is None:
        return []
    stale = []
    for path in paths:
        try:
            if os.stat(path).st_mtime > started:
                stale.append(path)
        except OSError:
            continue
    return stale


def _holds_gpu(fd_dir, listdir, readlink):
    try:
        names = listdir(fd_dir)
    except OSError:
        return False  # another user's process (no permission), or gone meanwhile
    for name in names:
        try:
            if GPU_DEVICE.match(readlink(os.path.join(fd_dir, name))):
                return True
        except OSError:
            continue  # closed meanwhile
    return False


def gpu_holders(proc_root=PROC, listdir=os.listdir, readlink=os.readlink):
    """The processes with a GPU device open (a link of ``/proc/PID/fd/*`` to ``/dev/nvidiaN``), as
    :class:`Holder` tuples (pid, argv, systemd service or None, pod uid or None, the pod's
    ``namespace/name`` or None), by pid; a process whose fds or command line cannot be read is left out."""
    found = []
    for pid in _pids(proc_root, listdir):
        base = os.path.join(proc_root, pid)
        if not _holds_gpu(os.path.join(base, "fd"), listdir, readlink):
            continue
        try:
            argv = [arg for arg in _read(os.path.join(base, "cmdline")).split("\0") if arg]
        except OSError:
            continue  # gone meanwhile
        cgroup = _cgroup(_read, base)
        pod = pod_of_cgroup(cgroup)
        found.append(Holder(int(pid), argv, unit_of_cgroup(cgroup), pod, pod and pod_name(cgroup)))
    return sorted(found)
