"""host/systemd.py and host/processes.py (is the running daemon older than its files) and host/backups.py."""

import os
import time

from ansible.module_utils.gpunode.host import processes, systemd
from ansible.module_utils.gpunode.host.backups import backup_copy
from ansible.module_utils.gpunode.host.commands import Host

SHOW = """\
Id=docker.service
LoadState=loaded
ActiveState=active
MainPID=812

Id=containerd.service
LoadState=loaded
ActiveState=inactive
MainPID=0

Id=rke2-agent.service
LoadState=not-found
ActiveState=inactive
MainPID=0
"""


class FakeModule:
    def __init__(self, rc=0, out=SHOW, systemctl="/usr/bin/systemctl"):
        self.rc, self.out, self.systemctl = rc, out, systemctl
        self.calls = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return self.systemctl if name == "systemctl" else None

    def run_command(self, argv, environ_update=None):
        self.calls.append(argv)
        return self.rc, self.out, ""


def test_units_state_reads_every_unit_in_one_call():
    module = FakeModule()
    states = systemd.units_state(Host(module), ["docker.service", "containerd.service", "rke2-agent.service"])
    assert states == {
        "docker.service": {"active": True, "pid": 812, "loaded": True, "failed": False},
        "containerd.service": {"active": False, "pid": None, "loaded": True, "failed": False},
        "rke2-agent.service": {"active": False, "pid": None, "loaded": False, "failed": False},
    }
    assert len(module.calls) == 1


def test_a_unit_that_hit_its_start_limit_reads_failed():
    out = "Id=nvidia-cdi-refresh.path\nLoadState=loaded\nActiveState=failed\nMainPID=0\n"
    states = systemd.units_state(Host(FakeModule(out=out)), ["nvidia-cdi-refresh.path"])
    assert states["nvidia-cdi-refresh.path"] == {"active": False, "pid": None, "loaded": True, "failed": True}


def test_without_systemd_nothing_is_loaded():
    states = systemd.units_state(Host(FakeModule(systemctl=None)), ["docker.service"])
    assert states == {"docker.service": {"active": False, "pid": None, "loaded": False, "failed": False}}
    assert systemd.units_state(Host(FakeModule(rc=1)), ["x.service"])["x.service"]["loaded"] is False


def test_process_start_uses_ticks_since_boot(tmp_path):
    ticks = os.sysconf("SC_CLK_TCK")
    (tmp_path / "42").mkdir()
    # the command name may hold spaces and parentheses
    fields = ["S"] + ["0"] * 18 + [str(250 * ticks)] + ["0"] * 10
    (tmp_path / "42" / "stat").write_text("42 (contain (er) d) " + " ".join(fields) + "\n")
    started = processes.start_time(42, proc_root=str(tmp_path), now=10_000.0, boottime=300.0)
    assert started == 10_000.0 - 300.0 + 250.0
    assert processes.start_time(43, proc_root=str(tmp_path)) is None


def test_the_running_process_started_now(tmp_path):
    """Our own process: started before now, after boot (the real /proc)."""
    started = systemd.process_start(os.getpid())
    assert started is not None and started <= time.time()


def test_command_lines_are_every_processes_argv_kernel_threads_and_vanished_ones_left_out(tmp_path):
    for pid, raw in (("1", b"/sbin/init\0splash\0"), ("77", b"/usr/bin/python3\0/usr/local/bin/kubelet\0"
                                                             b"--config=/var/lib/kubelet/config.yaml\0"),
                     ("2", b""), ("self", b"ignored\0")):
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "cmdline").write_bytes(raw)
    (tmp_path / "99").mkdir()  # gone between the listing and the read: no cmdline
    assert sorted(processes.command_lines(str(tmp_path))) == [
        ["/sbin/init", "splash"],
        ["/usr/bin/python3", "/usr/local/bin/kubelet", "--config=/var/lib/kubelet/config.yaml"]]
    assert processes.command_lines(str(tmp_path / "absent")) == []


def test_stale_files_are_those_changed_after_the_start(tmp_path):
    old, new = tmp_path / "old.toml", tmp_path / "new.toml"
    old.write_text("a")
    new.write_text("b")
    os.utime(old, (1000, 1000))
    os.utime(new, (3000, 3000))
    assert processes.stale_files(2000.0, [str(old), str(new), str(tmp_path / "absent")]) == [str(new)]
    assert processes.stale_files(None, [str(new)]) == []


def test_running_state_of_a_stopped_or_unknown_service():
    assert systemd.running_state(Host(FakeModule()), "", ["/x"]) == (None, [])
    unknown = FakeModule(out=SHOW.split("\n\n")[2])
    assert systemd.running_state(Host(unknown), "rke2-agent.service", ["/x"]) == (None, [])
    stopped = FakeModule(out=SHOW.split("\n\n")[1])
    state, stale = systemd.running_state(Host(stopped), "containerd.service", ["/x"])
    assert state == {"active": False, "pid": None, "loaded": True, "failed": False} and stale == []


def test_backups_go_under_the_backup_dir_at_the_file_s_path(tmp_path):
    source = tmp_path / "etc" / "containerd" / "conf.d" / "99-nvidia.toml"
    source.parent.mkdir(parents=True)
    source.write_text("version = 2\n")
    os.chmod(source, 0o640)

    copy = backup_copy(str(source), str(tmp_path / "backups"))

    assert copy.startswith(str(tmp_path / "backups") + str(source) + ".")
    assert copy.endswith("~")
    with open(copy) as handle:
        assert handle.read() == "version = 2\n"
    assert os.stat(copy).st_mode & 0o777 == 0o640
    assert os.listdir(source.parent) == ["99-nvidia.toml"]
    assert backup_copy(str(tmp_path / "absent"), str(tmp_path / "backups")) is None
