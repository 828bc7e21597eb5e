"""gpu_cluster_addons_wait against a stand-in Kubernetes API server (the one thing a test cannot have).

The stand-in answers the reads the module makes with the JSON a real API
server returns for them; the kubernetes client, the kubeconfig handling and
the module run for real.
"""

import http.server
import json
import threading
import urllib.parse

import gpu_cluster_addons_wait
import pytest

# the kubernetes client is a controller dependency (requirements.txt), like kubernetes.core's
pytestmark = pytest.mark.controller(reason="needs the kubernetes client, a controller dependency")

DS_PATH = "/apis/apps/v1/namespaces/kube-system/daemonsets/nvidia-device-plugin-daemonset"


def daemonset(ready):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "kube-system",
                         "generation": 1},
            "spec": {"selector": {"matchLabels": {"name": "nvidia-device-plugin-ds"}},
                     "template": {"metadata": {"labels": {"name": "nvidia-device-plugin-ds"}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}},
            "status": {"observedGeneration": 1, "desiredNumberScheduled": 2, "numberReady": ready,
                       "updatedNumberScheduled": 2, "currentNumberScheduled": 2, "numberMisscheduled": 0}}


def node(name, gpus):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}},
            "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": str(gpus)}}}


class FakeApiServer:
    """Serves a DaemonSet and the GPU nodes; ``state`` may change between polls."""

    def __init__(self):
        self.state = {"ready": 1, "gpus": {"gpu-a": 1, "gpu-b": 0}}
        self.requests = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                server.requests.append(self.path)
                if url.path == DS_PATH:
                    body = daemonset(server.state["ready"])
                elif url.path == "/api/v1/nodes":
                    selector = urllib.parse.parse_qs(url.query)["labelSelector"]
                    assert selector == ["nvidia.com/gpu.present=true"]
                    body = {"apiVersion": "v1", "kind": "NodeList", "metadata": {},
                            "items": [node(n, g) for n, g in server.state["gpus"].items()]}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"


@pytest.fixture
def api(tmp_path):
    server = FakeApiServer()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "c", "cluster": {"server": server.url}}],
        "contexts": [{"name": "test", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }))
    yield server, str(kubeconfig)
    server.httpd.shutdown()
    server.httpd.server_close()


def test_waits_until_every_pod_and_gpu_node_is_ready(run_module, api, monkeypatch):
    server, kubeconfig = api
    polls = []

    def sleep(seconds):  # the cluster catches up while the module waits
        polls.append(seconds)
        server.state = {"ready": 2, "gpus": {"gpu-a": 1, "gpu-b": 8}}

    monkeypatch.setattr(gpu_cluster_addons_wait.time, "sleep", sleep)
    ok, result = run_module(gpu_cluster_addons_wait, {"mode": "nvidia", "nodes": ["gpu-a", "gpu-b"],
                                                      "kubeconfig": kubeconfig, "timeout": 60, "delay": 5})
    assert ok, result
    assert result["ready"] and polls == [5]
    assert result["messages"] == ["DaemonSet nvidia-device-plugin-daemonset: 2/2 pods ready",
                                  "all 2 GPU node(s) advertise nvidia.com/gpu"]


def test_fails_naming_what_is_not_ready(run_module, api):
    _, kubeconfig = api
    ok, result = run_module(gpu_cluster_addons_wait, {"mode": "nvidia", "nodes": ["gpu-a", "gpu-b", "gpu-c"],
                                                      "kubeconfig": kubeconfig, "timeout": 0, "delay": 1})
    assert not ok
    assert result["missing_nodes"] == ["gpu-b", "gpu-c"]
    assert result["msg"].startswith(
        "not ready after 0 s: DaemonSet nvidia-device-plugin-daemonset: 1/2 pods ready")
    assert "gpu-b: nvidia.com/gpu is 0 in allocatable" in result["msg"]
    assert "gpu-c: no such node in the cluster" in result["msg"]


def test_a_missing_workload_is_reported_not_a_crash(run_module, api):
    server, kubeconfig = api
    ok, result = run_module(gpu_cluster_addons_wait, {"mode": "gpushare", "nodes": ["gpu-a"],
                                                      "kubeconfig": kubeconfig, "timeout": 0})
    assert not ok
    assert "Deployment gpushare-schd-extender does not exist" in result["msg"]
    assert any("gpushare-schd-extender" in r for r in server.requests)


def test_check_mode_reads_nothing(run_module, api):
    server, kubeconfig = api
    ok, result = run_module(gpu_cluster_addons_wait, {"mode": "nvidia", "nodes": ["gpu-a"],
                                                      "kubeconfig": kubeconfig}, check_mode=True)
    assert ok and result["ready"] is None and server.requests == []


def test_an_unreachable_cluster_says_so(run_module, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "contexts": [{"name": "test", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {}}],
    }))
    ok, result = run_module(gpu_cluster_addons_wait, {"mode": "nvidia", "nodes": ["gpu-a"],
                                                      "kubeconfig": str(kubeconfig), "timeout": 0})
    assert not ok and result["msg"].startswith("cannot read the cluster")
