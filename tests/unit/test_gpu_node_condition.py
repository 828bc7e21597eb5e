"""gpu_node_condition against the API stand-in of tests/fixtures/drain/api_standin.py, served in a
thread over HTTPS that asks for a client certificate, as a kubelet's kubeconfig holds one
(module_utils/gpunode/kubelet/identity.py, readiness/condition.py).

The certificates are made with the openssl program (api_standin.make_pki: the targets' unit virtualenvs
have no cryptography); a test that needs them is skipped, saying so, where it is missing.
"""

import base64
import copy
import json
import shutil
import socket
import threading

import gpu_node_condition
import pytest
from ansible.module_utils.gpunode.kubelet import identity
from conftest import FIXTURES, load_file

api_standin = load_file(FIXTURES / "drain" / "api_standin.py", "api_standin")

NOW = "2026-11-28T12:00:00Z"
EARLIER = "2026-11-01T08:00:00Z"
TYPE = "gpunode.io/GPUValidated"
NODE = "gpu-1"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """The stand-in's throwaway CA, the API server's certificate (127.0.0.1) and the kubelet's
    (system:node:gpu-1)."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl program is not installed: it makes the test certificates")
    folder = tmp_path_factory.mktemp("pki")
    api_standin.make_pki(folder, NODE)
    # what kubelet-client-current.pem holds: certificate and key in one file
    (folder / "kubelet-client-current.pem").write_text(
        (folder / "client.crt").read_text() + (folder / "client.key").read_text())
    return folder


def _node(conditions):
    return {"kind": "Node", "apiVersion": "v1", "metadata": {"name": NODE},
            "status": {"conditions": conditions}}


OTHERS = [
    {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "ok",
     "lastHeartbeatTime": EARLIER, "lastTransitionTime": EARLIER},
    {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet posts ready status",
     "lastHeartbeatTime": EARLIER, "lastTransitionTime": EARLIER},
]


@pytest.fixture
def server(pki, tmp_path):
    """The stand-in with a Node that has the kubelet's conditions; ``received`` holds each request and
    the client certificate's CN."""
    api = api_standin.StandIn(NODE, str(tmp_path / "api.json"), on_evict="")
    api.node = _node(copy.deepcopy(OTHERS))
    api_standin.serve_tls(api, pki)
    thread = threading.Thread(target=api.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield api
    api.shutdown()
    api.server_close()


def kubeconfig(folder, pki, server_url, data=False):
    """A kubelet's kubeconfig: files as kubeadm writes them, or the -data form."""
    pem = str(pki / "kubelet-client-current.pem")
    if data:
        def encoded(name):
            return base64.b64encode((pki / name).read_bytes()).decode()
        cluster = {"server": server_url, "certificate-authority-data": encoded("ca.crt")}
        user = {"client-certificate-data": encoded("client.crt"), "client-key-data": encoded("client.key")}
    else:
        cluster = {"server": server_url, "certificate-authority": str(pki / "ca.crt")}
        user = {"client-certificate": pem, "client-key": pem}
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "system:node:gpu-1@kubernetes",
              "clusters": [{"name": "kubernetes", "cluster": cluster}],
              "contexts": [{"name": "system:node:gpu-1@kubernetes",
                            "context": {"cluster": "kubernetes", "user": "system:node:gpu-1"}}],
              "users": [{"name": "system:node:gpu-1", "user": user}]}
    path = folder / "kubelet.conf"
    path.write_text(json.dumps(config))  # JSON is YAML
    return str(path)


@pytest.fixture
def call(run_module, server, pki, tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_node_condition, "now", lambda: NOW)
    url = f"https://127.0.0.1:{server.server_address[1]}"

    def _call(check_mode=False, diff=False, data=False, **args):
        args = dict({"kubeconfig": kubeconfig(tmp_path, pki, url, data), "type": TYPE, "status": "True",
                     "reason": "Passed", "message": "all checks passed"}, **args)
        return run_module(gpu_node_condition, args, check_mode=check_mode, diff=diff)

    return _call


def _ours(server):
    return [c for c in server.node["status"]["conditions"] if c["type"] == TYPE]


def test_a_new_condition_is_one_strategic_merge_patch_and_keeps_the_other_conditions(call, server):
    ok, result = call()
    assert ok and result["changed"], result
    expected = {"type": TYPE, "status": "True", "reason": "Passed", "message": "all checks passed",
                "lastHeartbeatTime": NOW, "lastTransitionTime": NOW}
    assert [(r["method"], r["path"]) for r in server.received] == [
        ("GET", f"/api/v1/nodes/{NODE}"), ("PATCH", f"/api/v1/nodes/{NODE}/status")]
    patch = server.received[1]
    assert patch["body"] == {"status": {"conditions": [expected]}}
    assert patch["content_type"] == "application/strategic-merge-patch+json"
    assert {r["client"] for r in server.received} == {f"system:node:{NODE}"}
    assert server.node["status"]["conditions"] == [*OTHERS, expected]
    assert result["condition"] == expected
    assert (result["node_name"], result["named_by"]) == (NODE, "client certificate")


def test_nothing_is_sent_when_the_condition_already_holds(call, server):
    call()
    server.received.clear()
    ok, result = call()
    assert ok and not result["changed"]
    assert [r["method"] for r in server.received] == ["GET"]


def test_check_mode_only_reads_and_diff_shows_before_and_after(call, server):
    ok, result = call(check_mode=True, diff=True)
    assert ok and result["changed"]
    assert [r["method"] for r in server.received] == ["GET"]
    assert _ours(server) == []
    assert result["diff"]["before"] == ""
    assert json.loads(result["diff"]["after"])["status"] == "True"
    assert result["diff"]["before_header"] == f"node {NODE} condition {TYPE}"


def test_a_new_message_keeps_the_transition_time_and_a_new_status_moves_it(call, server):
    server.node["status"]["conditions"].append(
        {"type": TYPE, "status": "True", "reason": "Passed", "message": "old", "lastHeartbeatTime": EARLIER,
         "lastTransitionTime": EARLIER})
    ok, result = call(diff=True)
    assert ok and result["changed"]
    assert server.received[-1]["body"]["status"]["conditions"][0]["lastTransitionTime"] == EARLIER
    assert _ours(server)[0]["lastHeartbeatTime"] == NOW
    assert json.loads(result["diff"]["before"])["message"] == "old"
    ok, result = call(status="False", reason="NotValidatedSinceBoot")
    assert ok and result["changed"]
    assert _ours(server) == [{"type": TYPE, "status": "False", "reason": "NotValidatedSinceBoot",
                              "message": "all checks passed", "lastHeartbeatTime": NOW,
                              "lastTransitionTime": NOW}]
    assert len(server.node["status"]["conditions"]) == 3


def test_credentials_held_as_data_in_the_kubeconfig_work_too(call, server):
    ok, result = call(data=True)
    assert ok and result["changed"], result
    assert server.received[-1]["client"] == f"system:node:{NODE}"


def test_an_unknown_node_and_a_forbidden_patch_name_the_server_and_the_node(call, server):
    url = f"https://127.0.0.1:{server.server_address[1]}"
    ok, result = call(node_name="gpu-2")
    assert not ok
    assert f"GET /api/v1/nodes/gpu-2: not found (404) for node gpu-2 at {url}" in result["msg"]
    assert "the Node was not changed" in result["msg"]
    server.forbid_patch = True
    ok, result = call()
    assert not ok
    assert f"forbidden (403) for node {NODE} at {url}" in result["msg"]
    assert "is not allowed to modify node" in result["msg"]


def test_an_unreachable_server_is_named(run_module, pki, tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = kubeconfig(tmp_path, pki, f"https://127.0.0.1:{port}")
    ok, result = run_module(gpu_node_condition, {"kubeconfig": path, "type": TYPE, "status": "True",
                                                 "reason": "Passed"})
    assert not ok
    assert f"cannot reach the API server for node {NODE} at https://127.0.0.1:{port}" in result["msg"]
    assert path in result["msg"]


def test_a_reason_that_is_not_camel_case_is_refused_before_any_request(call, server):
    ok, result = call(reason="not validated")
    assert not ok and "reason: 'not validated' is not a CamelCase reason" in result["msg"]
    assert server.received == []


def test_the_node_name_is_the_certificate_cn_then_the_override_then_the_hostname(pki):
    pem = (pki / "kubelet-client-current.pem").read_text()
    assert identity.subject_common_name(pem) == f"system:node:{NODE}"
    assert identity.node_name_of(pem, [], "host") == (NODE, "client certificate")
    server_pem = (pki / "server.crt").read_text()
    argv = ["/usr/bin/kubelet", "--hostname-override", "GPU-9"]
    assert identity.node_name_of(server_pem, argv, "host") == ("gpu-9", "--hostname-override")
    assert identity.node_name_of("", ["/usr/bin/kubelet"], "Host.Example\n") == ("host.example", "hostname")
    garbage = "-----BEGIN CERTIFICATE-----\nbm90IERFUg==\n-----END CERTIFICATE-----"
    assert identity.subject_common_name(garbage) is None


CLIQUE = "nvidia.com/gpu.clique"
TRAY_CLIQUE = "7f8e4b2c-53f0-4b8a-9c4e-2b1d4c6e8a10.32766"


def test_a_label_no_one_owns_is_set_by_gpunode_and_a_second_run_sends_nothing(call, server):
    ok, result = call(labels={CLIQUE: TRAY_CLIQUE})
    assert ok and result["changed"] and result["labels"] == {CLIQUE: "set"}, result
    patch = server.received[-1]
    assert (patch["method"], patch["path"]) == ("PATCH", f"/api/v1/nodes/{NODE}?fieldManager=gpunode")
    assert patch["body"] == {"metadata": {"labels": {CLIQUE: TRAY_CLIQUE}}}
    assert server.node["metadata"]["labels"] == {CLIQUE: TRAY_CLIQUE}
    sent = len(server.received)
    ok, again = call(labels={CLIQUE: TRAY_CLIQUE})
    assert ok and not again["changed"] and again["labels"] == {CLIQUE: "unchanged"}
    assert [r["method"] for r in server.received[sent:]] == ["GET"]


def test_a_label_gpu_feature_discovery_owns_is_left_to_it_whatever_gpunode_reads(call, server):
    node = server.node["metadata"]
    node["labels"] = {CLIQUE: "other-cluster.1"}
    node["managedFields"] = [api_standin.managed("gpu-feature-discovery", CLIQUE)]
    for wanted in (TRAY_CLIQUE, None):
        ok, result = call(labels={CLIQUE: wanted})
        assert ok and result["labels"] == {CLIQUE: "left to gpu-feature-discovery"}, result
    assert [r["method"] for r in server.received] == ["GET", "PATCH", "GET"]  # the condition, once
    assert node["labels"] == {CLIQUE: "other-cluster.1"}


def test_a_label_gpunode_set_follows_the_fabric_and_goes_when_it_has_no_clique(call, server):
    assert call(labels={CLIQUE: TRAY_CLIQUE})[0]
    ok, result = call(labels={CLIQUE: "7f8e4b2c-53f0-4b8a-9c4e-2b1d4c6e8a10.4"})
    assert ok and result["labels"] == {CLIQUE: "set"}
    ok, result = call(labels={CLIQUE: None})
    assert ok and result["changed"] and result["labels"] == {CLIQUE: "removed"}
    assert CLIQUE not in server.node["metadata"]["labels"]
    # a label someone set with no field manager recorded is never taken over, nor removed
    server.node["metadata"]["labels"] = {CLIQUE: "theirs.0"}
    for wanted in (TRAY_CLIQUE, None):
        ok, result = call(labels={CLIQUE: wanted})
        assert ok and result["labels"][CLIQUE].startswith("left to whoever set it"), result
    assert server.node["metadata"]["labels"] == {CLIQUE: "theirs.0"}


def test_check_mode_sends_no_label_and_diff_shows_it(call, server):
    ok, result = call(check_mode=True, diff=True, labels={CLIQUE: TRAY_CLIQUE})
    assert ok and result["changed"] and [r["method"] for r in server.received] == ["GET"]
    assert f'"{CLIQUE}": null' in result["diff"]["before"]
    assert f'"{CLIQUE}": "{TRAY_CLIQUE}"' in result["diff"]["after"]


def test_a_label_value_that_is_not_one_is_refused_before_any_request(call, server):
    ok, result = call(labels={CLIQUE: "not a value/"})
    assert not ok and "labels['nvidia.com/gpu.clique']" in result["msg"] and server.received == []
