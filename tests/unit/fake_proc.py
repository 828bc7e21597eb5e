"""A fake /proc tree for tests of what runs on a node (kube-scheduler, rke2-server).

``FakeProc(tmp_path).add(pid, "kube-scheduler", argv, age=30, version="v1.29.2")``
writes ``comm``, ``cmdline``, ``stat`` (start time ``age`` seconds ago) and an
``exe`` that answers ``--version`` the way kube-scheduler does.
"""

import os
import time

HERTZ = os.sysconf("SC_CLK_TCK")
# kube-scheduler's command line as kubeadm writes it (the static pod's command)
KUBEADM_SCHEDULER_ARGV = [
    "kube-scheduler",
    "--authentication-kubeconfig=/etc/kubernetes/scheduler.conf",
    "--authorization-kubeconfig=/etc/kubernetes/scheduler.conf",
    "--bind-address=127.0.0.1",
    "--kubeconfig=/etc/kubernetes/scheduler.conf",
    "--leader-elect=true",
]
UPTIME = 100000.0


class FakeProc:
    def __init__(self, root):
        self.root = root / "proc"
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "uptime").write_text(f"{UPTIME:.2f} 12345.67\n")
        self.booted = time.time() - UPTIME

    def add(self, pid, comm, argv, age=30.0, version=None):
        base = self.root / str(pid)
        base.mkdir()
        (base / "comm").write_text(comm + "\n")
        (base / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        ticks = int((UPTIME - age) * HERTZ)
        # field 2 may hold spaces and parentheses: the reader counts fields after the last ')'
        fields = ["S"] + ["0"] * 18 + [str(ticks)] + ["0"] * 10
        (base / "stat").write_text(f"{pid} ({comm}) " + " ".join(fields) + "\n")
        binary = base / "binary"
        if version:
            binary.write_text(
                f'#!/bin/sh\n[ "$1" = --version ] && echo "Kubernetes {version}" && exit 0\nexit 1\n'
            )
        else:
            binary.write_text("#!/bin/sh\necho 'Python 3.11.2'\n")
        binary.chmod(0o755)
        os.symlink(binary, base / "exe")
        return pid

    def started(self, age):
        return time.time() - age

    def open_files(self, pid, *targets, unit=None, cgroup=None):
        """``fd/0``... of process ``pid`` as links to ``targets`` (only the links are read: the targets
        need not exist), and its cgroup: ``cgroup`` (the file's text) or the systemd service ``unit``,
        when one is given."""
        fds = self.root / str(pid) / "fd"
        fds.mkdir()
        for number, target in enumerate(targets):
            os.symlink(target, fds / str(number))
        if unit or cgroup:
            (self.root / str(pid) / "cgroup").write_text(cgroup or f"0::/system.slice/{unit}\n")
