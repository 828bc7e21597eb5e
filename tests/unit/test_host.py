"""host/: the one host-access class, the one ``systemctl show`` parser, the one /proc scan."""

import os
import time

import pytest
from ansible.module_utils.gpunode.host import packages, processes, systemd
from ansible.module_utils.gpunode.host.commands import C_LOCALE, Host


class Module:
    def __init__(self):
        self.calls, self.warnings = [], []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        self.calls.append(("which", name, opt_dirs))
        return f"/usr/bin/{name}"

    def run_command(self, argv, **kwargs):
        self.calls.append(("run", argv, kwargs))
        return 0, "Id=kubelet.service\nLoadState=loaded\n", ""

    def warn(self, message):
        self.warnings.append(message)


def test_every_command_runs_in_the_c_locale_and_stdin_goes_as_bytes():
    module = Module()
    host = Host(module)
    host.run(["dpkg-query", "-W"])
    host.run(["kubectl", "replace", "-f", "-"], data=b"kind: ConfigMap\n")
    assert module.calls[0] == ("run", ["dpkg-query", "-W"], {"environ_update": C_LOCALE})
    stdin = {"data": b"kind: ConfigMap\n", "binary_data": True}
    assert module.calls[1][2] == dict(stdin, environ_update=C_LOCALE)
    assert host.which("rke2", opt_dirs=["/opt/rke2/bin"]) == "/usr/bin/rke2"
    assert module.calls[-1] == ("which", "rke2", ["/opt/rke2/bin"])
    host.warn("careful")
    assert module.warnings == ["careful"]


def test_a_file_that_cannot_be_read_raises_the_concern_s_error(tmp_path):
    class ConcernError(Exception):
        pass

    host = Host(Module(), ConcernError)
    assert host.read_text(str(tmp_path / "absent")) is None
    try:
        host.read_text(str(tmp_path))
    except ConcernError as exc:
        assert str(tmp_path) in str(exc)
    else:
        raise AssertionError("a directory read as a file")
    assert host.mtime(str(tmp_path / "absent")) is None


SHOW = """\
Id=nvidia-persistenced.service
LoadState=loaded
ActiveState=active
UnitFileState=enabled

Id=nvidia-fabricmanager.service
LoadState=not-found
ActiveState=inactive
UnitFileState=
"""


def test_the_one_parser_keys_the_driver_s_services_by_name():
    assert systemd.by_service(systemd.parse_show(SHOW)) == {
        "nvidia-persistenced": {"load": "loaded", "active": "active", "enabled": "enabled"},
        "nvidia-fabricmanager": {"load": "not-found", "active": "inactive", "enabled": ""}}


def test_show_asks_once_for_every_unit_and_nothing_without_systemctl():
    module = Module()
    blocks = systemd.show(Host(module), ["kubelet.service", "rke2-agent.service"], ("Id", "LoadState"))
    runs = [call for call in module.calls if call[0] == "run"]
    assert len(runs) == 1 and runs[0][1][-3:] == ["--", "kubelet.service", "rke2-agent.service"]
    assert blocks == [{"Id": "kubelet.service", "LoadState": "loaded"}]
    assert systemd.show(Host(module), [], ("Id",)) is None


class Systemctl(Module):
    """A node whose systemctl answers ``answers[verb]`` (rc, out, err); ``has``: whether it has one."""

    def __init__(self, answers, has=True):
        super().__init__()
        self.answers, self.has = answers, has

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return "/usr/bin/systemctl" if self.has and name == "systemctl" else None

    def run_command(self, argv, **kwargs):
        self.calls.append(("run", argv, kwargs))
        return self.answers[argv[1]]


def test_units_start_stop_and_answer_through_systemctl_and_say_why_not():
    module = Systemctl({"is-active": (3, "", ""), "stop": (0, "", ""),
                        "start": (1, "", "Job for nvidia-dcgm.service failed.\n")})
    host = Host(module)
    assert systemd.available(host) and not systemd.is_active(host, "nvidia-dcgm.service")
    assert systemd.control(host, "stop", "nvidia-dcgm.service") == ""
    assert systemd.control(host, "start", "nvidia-dcgm.service") == "Job for nvidia-dcgm.service failed."
    assert [call[1] for call in module.calls] == [
        ["/usr/bin/systemctl", "is-active", "--quiet", "nvidia-dcgm.service"],
        ["/usr/bin/systemctl", "stop", "nvidia-dcgm.service"],
        ["/usr/bin/systemctl", "start", "nvidia-dcgm.service"]]
    assert all(call[2]["environ_update"] == C_LOCALE for call in module.calls)


def test_without_systemd_nothing_runs_and_nothing_is_active():
    module = Systemctl({}, has=False)
    host = Host(module)
    assert not systemd.available(host) and not systemd.is_active(host, "nvidia-persistenced.service")
    assert systemd.services_state(host, ["nvidia-persistenced.service"]) == {}
    assert systemd.control(host, "start", "nvidia-persistenced.service") == "no systemctl on this host"
    assert module.calls == []


def test_services_state_keys_the_units_asked_by_service_name():
    module = Systemctl({"show": (0, SHOW, "")})
    units = ["nvidia-persistenced.service", "nvidia-fabricmanager.service"]
    states = systemd.services_state(Host(module), units)
    assert states["nvidia-persistenced"]["active"] == "active"
    assert states["nvidia-fabricmanager"]["load"] == "not-found"
    assert module.calls[0][1][-2:] == ["nvidia-persistenced.service", "nvidia-fabricmanager.service"]


def test_extra_environment_goes_over_the_c_locale():
    module = Module()
    Host(module).run(["dpkg", "--set-selections"], data="x hold\n",
                     environ={"DEBIAN_FRONTEND": "noninteractive"})
    assert module.calls[0][2]["environ_update"] == dict(C_LOCALE, DEBIAN_FRONTEND="noninteractive")


def _process(root, pid, comm, age, uptime=1000.0):
    base = root / str(pid)
    base.mkdir(parents=True)
    (base / "comm").write_text(comm + "\n")
    (base / "cmdline").write_bytes(f"{comm}\0--v=2\0".encode())
    ticks = int((uptime - age) * os.sysconf("SC_CLK_TCK"))
    (base / "stat").write_text(f"{pid} ({comm}) S " + " ".join(["0"] * 18 + [str(ticks)] + ["0"] * 5) + "\n")


def test_scan_finds_a_command_oldest_first_without_cgroups(tmp_path):
    (tmp_path / "uptime").write_text("1000.00 5.00\n")
    _process(tmp_path, 30, "kubelet", age=10)
    _process(tmp_path, 20, "kubelet", age=500)
    _process(tmp_path, 10, "containerd", age=900)
    found = processes.scan("kubelet", str(tmp_path))
    assert [(p.pid, p.argv, p.unit) for p in found] == [(20, ["kubelet", "--v=2"], None),
                                                         (30, ["kubelet", "--v=2"], None)]
    assert abs(processes.since_boot(str(tmp_path)) - 1000.0) < 1e-6
    started = processes.start_time(30, str(tmp_path))
    assert abs(started - (time.time() - 10)) < 1


def test_the_start_of_a_process_of_this_kernel_is_on_the_boot_clock():
    started = processes.start_time(os.getpid())
    assert started is not None and time.time() - 3600 * 24 * 365 < started <= time.time()


class ScriptedHost:
    """A node with dpkg: answers dpkg-query the way dpkg does."""

    def __init__(self, answers, programs=("dpkg-query",)):
        self.answers, self.programs, self.ran = answers, programs, []

    def which(self, name, opt_dirs=None):
        return f"/usr/bin/{name}" if name in self.programs else None

    def run(self, argv, data=None):
        self.ran.append(argv)
        return self.answers.get(argv[2], (1, "", "not scripted"))


DPKG = (
    "nvidia-container-toolkit\t1.17.8-1\tinstall ok installed\n"
    "python3-toml\t0.10.1-1\tdeinstall ok config-files\n"
    "python3-yaml:amd64\t5.3.1-5\thold ok installed\n"
    "nvidia-utils-570-server\t570.133.20-0ubuntu1\thold ok half-configured\n"
)


def test_the_package_manager_tells_installed_and_held_packages():
    apt = packages.manager(ScriptedHost({"-W": (1, DPKG, "dpkg-query: no packages found matching x\n")}))
    assert apt.name == "apt"
    assert apt.installed_versions(["nvidia-container-toolkit", "python3-toml", "python3-yaml", "x"]) == {
        "nvidia-container-toolkit": "1.17.8-1", "python3-yaml": "5.3.1-5"}
    held = apt.held(["python3-yaml", "nvidia-utils-570-server"])
    assert held == ["nvidia-utils-570-server", "python3-yaml"]


def test_a_database_dpkg_query_cannot_read_is_an_error_naming_the_command():
    apt = packages.Apt(ScriptedHost({"-W": (2, "", "cannot open status\n")}))
    with pytest.raises(packages.DpkgError, match=r"^dpkg-query -W failed \(rc 2\): cannot open status$"):
        apt.packages()


def test_the_owner_of_a_path_is_the_package_dpkg_names():
    host = ScriptedHost({"-S": (0, "diversion by x from: /usr/bin/nvidia-smi\n"
                                   "nvidia-utils-570-server:amd64: /usr/bin/nvidia-smi\n", "")})
    assert packages.Apt(host).owner("/usr/bin/nvidia-smi") == "nvidia-utils-570-server"
    assert packages.Apt(ScriptedHost({})).owner("/usr/local/bin/nvidia-smi") is None


def test_a_node_without_a_known_package_manager_has_none():
    assert packages.manager(ScriptedHost({}, programs=())) is None
