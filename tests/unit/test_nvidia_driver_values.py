"""nvidia_driver_state: values that land in DKMS's shell-sourced config, installer flags or apt sources.

``mok_signing_key="{{ key }}"`` is sourced by a shell: a quote, ``$`` or a
backtick in the path would run code; a newline in the source line would add
a second source. A hostile value fails naming the option, before the node is read.
"""

import nvidia_driver_state as module
import pytest
from ansible.module_utils.gpunode.driver import state_call
from test_k8s_names import HYPHEN, assert_refused, injected

HOSTILE = {
    "signing_key": [*injected("/var/lib/dkms/mok.key"), "mok.key", "/var/lib/dkms/$(reboot).key",
                    f"/var/lib/dkms/mok{HYPHEN}1.key"],
    "signing_cert": [*injected("/var/lib/dkms/mok.pub"), "/var/lib/dkms/`id`.pub"],
    "keyring": [*injected("/etc/apt/keyrings/gpunode-nvidia-driver.asc"), "nvidia.asc"],
    "apt_repository": ["deb https://example.com/nvidia /\ndeb https://evil.example.com/ /", " ", "deb x\x00"],
    "blacklist_path": ["/etc/modprobe.d/blacklist\n.conf", "blacklist.conf"],
}
CASES = [(option, value) for option, items in HOSTILE.items() for value in items]


@pytest.fixture
def looked(monkeypatch):
    seen = []

    def read_node(*_args, **_kwargs):
        seen.append("run")
        raise AssertionError("the node was read")

    monkeypatch.setattr(state_call, "detect", read_node)  # the GPUs (no gpu given)
    monkeypatch.setattr(state_call, "evaluate", read_node)  # the driver
    return seen


@pytest.mark.parametrize(("option", "value"), CASES, ids=[f"{o}-{v!r}"[:70] for o, v in CASES])
def test_a_hostile_value_fails_naming_it_before_the_node_is_read(run_module, looked, option, value):
    ok, result = run_module(module, {option: value})
    assert not ok
    assert_refused(result, f"{option}: {value!r} is not ", value)
    assert looked == []


@pytest.mark.parametrize(("option", "value"), [
    ("signing_key", ""), ("signing_key", "/var/lib/shim-signed/mok/MOK.priv"),
    ("signing_cert", "/var/lib/shim-signed/mok/MOK.der"), ("apt_repository", ""),
    ("apt_repository", "deb [signed-by=/etc/apt/keyrings/x.asc arch=amd64] https://example.com/cuda /"),
])
def test_valid_values_go_on(run_module, looked, option, value):
    with pytest.raises(AssertionError, match="the node was read"):
        run_module(module, {option: value})
    assert looked == ["run"]
