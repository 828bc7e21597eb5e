"""nvidia_container_runtime_state: values that land in the apt source, daemon.json, config.toml or apt's argv.

The repository URI and keyring become words of a deb822 source, the version
half of apt's ``name=version``, the binary a path in daemon.json and
config.toml, the drop-in an entry of config.toml's imports. A hostile value
fails naming the option, the value and the rule, before the node is read.
"""

import nvidia_container_runtime_state as module
import pytest
from ansible.module_utils.gpunode.runtime import state_call
from test_k8s_names import CYRILLIC_A, HYPHEN, URL_BREAKERS, assert_refused, injected

HOSTILE = {
    "repo_url": [*injected("https://nvidia.github.io/libnvidia-container/stable/deb/", URL_BREAKERS), "",
                 "nvidia.github.io/libnvidia-container", "https://", f"https://nvidi{CYRILLIC_A}.github.io/x"],
    "keyring": [*injected("/etc/apt/keyrings/nvidia.asc"), "nvidia.asc", "/etc/apt/keyrings/a:b.asc"],
    "version": [*injected("1.17.8-1"), "v1.17.8", "latest", "1.17.*", f"1.17.8{HYPHEN}1"],
    "binary": [*injected("/usr/bin/nvidia-container-runtime"), "", "-nvidia", "bin/nvidia-container-runtime",
               f"/usr/bin/nvidia{HYPHEN}container-runtime"],
    "containerd_dropin": [*injected("/etc/containerd/conf.d/99-nvidia.toml"),
                          "/etc/containerd/conf.d/*.toml"],
    "docker_daemon_json": ["/etc/docker/daemon.json\n", "daemon.json"],
    "containerd_config": ['/etc/containerd/"config".toml', "config.toml"],
    "sources_path": ["/etc/apt/sources.list.d/x\x00.sources"],
}
CASES = [(option, value) for option, items in HOSTILE.items() for value in items]


@pytest.fixture
def looked(monkeypatch):
    """Every look at the node (NodeReader) is recorded."""
    seen = []

    class Reader:
        def __init__(self, *args):
            seen.append("NodeReader")

        def read(self):
            raise AssertionError("the node was read")

    monkeypatch.setattr(state_call, "NodeReader", Reader)
    return seen


@pytest.mark.parametrize(("option", "value"), CASES, ids=[f"{o}-{v!r}"[:70] for o, v in CASES])
def test_a_hostile_value_fails_naming_it_before_the_node_is_read(run_module, looked, option, value):
    ok, result = run_module(module, {option: value})

    assert not ok
    assert_refused(result, f"{option}: {value!r} is not ", value)
    assert looked == []


@pytest.mark.parametrize(("option", "value"), [
    ("repo_url", "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"),
    ("repo_url", "http://127.0.0.1:8371/"),
    ("repo_url", "file:///srv/mirror/libnvidia-container"),
    ("version", ""),
    ("version", "1:1.17.8-1+deb12u1"),
    ("binary", "nvidia-container-runtime"),
    ("keyring", "/etc/apt/keyrings/nvidia-container-toolkit.asc"),
])
def test_valid_edge_values_go_on_to_read_the_node(run_module, looked, option, value):
    with pytest.raises(AssertionError, match="the node was read"):
        run_module(module, {option: value})
    assert looked == ["NodeReader"]
