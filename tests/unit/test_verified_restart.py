"""verified_restart and module_utils/service_health: restart, check, roll back."""

import http.server
import os
import threading

import docker_daemon_config
import pytest
import verified_restart
from ansible.module_utils import basic
from ansible.module_utils.gpunode.common.service_health import (
    HealthCheckError,
    command_problem,
    compile_expectations,
    failure_message,
    probe_url,
    wait_until,
)
from symlinks import LAYOUTS, Link

# ---------------------------------------------------------------- pure helpers


def test_expectations_must_all_match():
    compiled = compile_expectations([r'"nvidia":', r"\|nvidia$"])
    out = '{"nvidia":{"path":"/usr/bin/nvidia-container-runtime"},"runc":{"path":"runc"}}|nvidia\n'
    assert command_problem(["docker", "info"], 0, out, "", compiled) is None
    problem = command_problem(["docker", "info"], 0, out.replace("|nvidia", "|runc"), "", compiled)
    assert problem == "docker info does not report '\\\\|nvidia$'"


def test_a_failing_command_reports_its_last_error_line():
    problem = command_problem(["containerd", "config", "dump"], 1, "", "line 1\nfailed to load TOML\n", [])
    assert problem == "containerd config dump exited 1: failed to load TOML"


def test_a_bad_regular_expression_is_named():
    with pytest.raises(HealthCheckError, match=r"expect '\(': not a regular expression"):
        compile_expectations(["("])


def test_wait_until_stops_at_the_timeout_with_the_last_problem():
    now = [0.0]
    answers = iter(["starting", "still starting", "refused", "refused"])
    healthy, problem, attempts = wait_until(
        lambda: next(answers), timeout=5, interval=2, clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
    )
    assert (healthy, problem, attempts) == (False, "refused", 3)


def test_wait_until_returns_at_the_first_healthy_probe():
    answers = iter(["starting", None])
    assert wait_until(lambda: next(answers), 10, 0, sleep=lambda s: None) == (True, None, 2)


@pytest.fixture
def http_server():
    status = {"code": 200}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status["code"])
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/healthz", status
    server.shutdown()
    server.server_close()


def test_probe_url_wants_200(http_server):
    url, status = http_server
    assert probe_url(url) is None
    status["code"] = 500
    assert probe_url(url) == f"{url} answered 500"


def test_probe_url_reports_a_refused_connection(http_server):
    url, _ = http_server
    closed = url.replace("/healthz", "").rsplit(":", 1)[0] + ":9/healthz"
    assert probe_url(closed, timeout=1).startswith(closed + ": ")


def test_failure_message_says_what_happened():
    msg = failure_message(service="docker.service", reason="/etc/docker/daemon.json changed", timeout=30,
                          problem="docker info exited 1", restored=["/etc/docker/daemon.json"],
                          healthy_after=True, journal="unknown runtime nvidia\n")
    assert msg == (
        "docker.service was not healthy within 30 s after /etc/docker/daemon.json changed: docker info "
        "exited 1. Restored /etc/docker/daemon.json from the backups; docker.service is healthy again. "
        "Last log lines of docker.service:\nunknown runtime nvidia"
    )
    assert "Nothing was restored" in failure_message(
        service=None, reason="x", timeout=1, problem="p", restored=[], healthy_after=False, journal=""
    )


# ---------------------------------------------------------------- the module


class FakeNode:
    """Scripted run_command: systemctl succeeds; the check command answers from ``health``."""

    def __init__(self, health):
        self.health = list(health)
        self.calls = []

    def run_command(self, argv):
        self.calls.append(list(argv))
        if argv[0].endswith("systemctl"):
            return 0, "", ""
        if argv[0].endswith("journalctl"):
            return 0, "level=error msg=bad config\n", ""
        answer = self.health.pop(0) if len(self.health) > 1 else self.health[0]
        return answer


@pytest.fixture
def node(monkeypatch):
    def make(health):
        fake = FakeNode(health)

        def run_command(module, argv, **kwargs):
            return fake.run_command(argv)

        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                            lambda self, name, required=False, opt_dirs=None: f"/usr/bin/{name}")
        return fake

    return make


CHECK = [{"command": ["docker", "info"], "expect": ["nvidia"]}]


def test_check_mode_restarts_nothing(run_module, node):
    fake = node([(0, "nvidia", "")])
    ok, result = run_module(verified_restart, {"name": "docker.service", "checks": CHECK}, check_mode=True)
    assert ok and result["changed"] and result["healthy"] is None
    assert fake.calls == []


def test_a_healthy_restart(run_module, node):
    fake = node([(1, "", "Cannot connect"), (0, "runc nvidia", "")])
    ok, result = run_module(verified_restart, {"name": "docker.service", "checks": CHECK, "interval": 0})
    assert ok and result["changed"] and result["healthy"] and result["attempts"] == 2
    assert fake.calls[0] == ["/usr/bin/systemctl", "restart", "docker.service"]


def test_failed_units_are_reset_before_the_restart(run_module, node):
    # nvidia-cdi-refresh after StartLimitBurst: both units stay failed until reset-failed
    fake = node([(0, "active", "")])
    units = ["nvidia-cdi-refresh.service", "nvidia-cdi-refresh.path"]
    args = {"name": "nvidia-cdi-refresh.path", "reset_failed": units,
            "checks": [{"command": ["systemctl", "is-active", "nvidia-cdi-refresh.path"]}]}
    ok, result = run_module(verified_restart, args, check_mode=True)
    assert ok and result["changed"] and fake.calls == []
    ok, result = run_module(verified_restart, args)
    assert ok and result["healthy"]
    assert fake.calls[:2] == [["/usr/bin/systemctl", "reset-failed", *units],
                              ["/usr/bin/systemctl", "restart", "nvidia-cdi-refresh.path"]]


def test_an_unhealthy_restart_is_rolled_back(run_module, node, tmp_path):
    daemon_json = tmp_path / "daemon.json"
    daemon_json.write_text('{"default-runtime": "nvidia"}\n')
    backup = tmp_path / "daemon.json.1234.bak~"
    backup.write_text('{"log-driver": "json-file"}\n')
    created = tmp_path / "99-nvidia.toml"
    created.write_text("version = 2\n")
    fake = node([(0, "runc", "")])
    ok, result = run_module(verified_restart, {
        "name": "docker.service",
        "checks": CHECK,
        "timeout": 0,
        "interval": 0,
        "restore": [{"path": str(daemon_json), "backup": str(backup)}, {"path": str(created)}],
        "reason": f"{daemon_json} changed",
    })
    assert not ok
    assert daemon_json.read_text() == '{"log-driver": "json-file"}\n'
    assert not created.exists()
    assert result["restored"] == [str(daemon_json), f"{created} (removed: it did not exist before)"]
    assert [c for c in fake.calls if c[0].endswith("systemctl")] == [
        ["/usr/bin/systemctl", "restart", "docker.service"],
        ["/usr/bin/systemctl", "reset-failed", "docker.service"],
        ["/usr/bin/systemctl", "restart", "docker.service"],
    ]
    assert result["msg"].startswith(
        f"docker.service was not healthy within 0 s after {daemon_json} changed: "
        "docker info does not report 'nvidia'."
    )
    assert "STILL NOT HEALTHY" in result["msg"] and "level=error msg=bad config" in result["msg"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_rollback_writes_a_links_target_and_keeps_the_link(run_module, node, tmp_path, layout):
    old = '{"log-driver": "json-file"}\n'
    link = Link.make(tmp_path / "etc" / "docker" / "daemon.json", layout, old, root=tmp_path)
    ok, written = run_module(docker_daemon_config, {"path": str(link.path), "settings": {"debug": True},
                                                    "backup": True})
    assert ok and written["changed"] and link.kept() and link.text() != old
    created = Link.make(tmp_path / "etc" / "containerd" / "conf.d" / "99-nvidia.toml", "absolute", None,
                        root=tmp_path)
    created.target.write_text("version = 2\n")  # what a module created through a dangling link
    node([(0, "runc", "")])
    ok, result = run_module(verified_restart, {
        "name": "docker.service", "checks": CHECK, "timeout": 0, "interval": 0,
        "restore": [*written["restore"], {"path": str(created.path)}],
    })
    assert not ok
    assert link.kept() and link.text() == old
    assert os.path.islink(created.path) and os.readlink(created.path) == created.value
    assert not created.target.exists()  # the target it created is gone, the operator's link stays
    assert result["restored"] == [
        f"{link.path} -> {link.target.resolve()}",
        f"{created.path} -> {created.target.resolve()} (removed: it did not exist before)",
    ]


def test_without_a_unit_it_only_waits_for_the_url(run_module, node, http_server):
    url, _ = http_server
    fake = node([(0, "", "")])
    ok, result = run_module(verified_restart, {"checks": [{"url": url}]})
    assert ok and not result["changed"] and result["healthy"]
    assert fake.calls == []


def test_a_check_needs_a_url_or_a_command(run_module, node):
    node([(0, "", "")])
    ok, result = run_module(verified_restart, {"checks": [{"expect": ["x"]}]})
    assert not ok and "url" in result["msg"] and "command" in result["msg"]
