"""containerd_runtime: every value that lands in config.toml or the drop-in is checked before any read.

A hostile runtime name, binary, shim type or drop-in path fails naming the
option, the value and the rule; nothing is read (no file, no containerd
binary run) and nothing is written. Valid edge values are written as given.
"""

import os

import containerd_runtime
import pytest
from ansible.module_utils.gpunode.formats import toml_reader
from conftest import FIXTURES
from test_k8s_names import BREAKERS, CYRILLIC_A, HYPHEN, assert_refused, injected

DEBIAN = FIXTURES / "docker" / "containerd-config.toml-debian-bookworm-default.toml"
OLD = 1_500_000_000
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"

HOSTILE = {
    "name": [*injected("nvidia"), "", "nvidia/cdi", "nvidia:cdi", "nvidia]", f"nvidi{CYRILLIC_A}",
             f"nvidia{HYPHEN}cdi"],
    "binary_name": [*injected("/usr/bin/nvidia-container-runtime"), "", "-nvidia", "bin/nvidia",
                    "/usr/bin/nvidia-container-runtime --debug", f"/usr/bin/nvidia{HYPHEN}container-runtime"],
    "runtime_type": [*injected("io.containerd.runc.v2"), "", "runc", "io.containerd.runc",
                     "io.containerd.RUNC.v2"],
    "dropin_path": [*injected(DROPIN), "", "conf.d/99-nvidia.toml", "/etc/containerd/conf.d/*.toml",
                    "/etc/containerd/conf.d/99-nvidia[1].toml"],
    "config_path": ["/etc/containerd/config.toml\n", '/etc/"config".toml', "config.toml", "/etc/c\x00"],
    "backup_dir": ["/var/backups\n/x", "backups"],
}
CASES = [(option, value) for option, items in HOSTILE.items() for value in items]


@pytest.fixture
def node(tmp_path, monkeypatch):
    """config.toml (Debian's) and the drop-in's folder under tmp_path; every read is recorded."""
    config = tmp_path / "config.toml"
    config.write_bytes(DEBIAN.read_bytes())
    os.utime(config, (OLD, OLD))
    reads = []
    real_read = containerd_runtime.read_text

    def read_text(path, error):
        reads.append(path)
        return real_read(path, error)

    def containerd_facts(module, wanted):
        reads.append("containerd --version")
        return "2.1.9", None

    monkeypatch.setattr(containerd_runtime, "read_text", read_text)
    monkeypatch.setattr(containerd_runtime, "containerd_facts", containerd_facts)
    return {"config": config, "dropin": tmp_path / "conf.d" / "99-nvidia.toml", "reads": reads}


def args(node, **extra):
    return {"config_path": str(node["config"]), "dropin_path": str(node["dropin"]), "service": "",
            "containerd_version": "2.1.9", **extra}


@pytest.mark.parametrize(("option", "value"), CASES, ids=[f"{o}-{v!r}"[:70] for o, v in CASES])
def test_a_hostile_value_fails_naming_it_and_nothing_is_read_or_written(run_module, node, option, value):
    ok, result = run_module(containerd_runtime, args(node, **{option: value}))

    assert not ok
    assert_refused(result, f"{option}: {value!r} is not ", value)
    assert node["reads"] == []
    assert node["config"].read_bytes() == DEBIAN.read_bytes() and node["config"].stat().st_mtime == OLD
    assert not node["dropin"].parent.exists()
    assert not result.get("changed") and not result.get("files")


def test_every_breaker_is_refused_in_a_runtime_name():
    for value in injected("nvidia", BREAKERS):
        with pytest.raises(ValueError, match="name"):
            containerd_runtime.values.containerd_runtime_name("name", value)


@pytest.mark.parametrize(("name", "binary"), [
    ("nvidia-cdi", "/usr/bin/nvidia-container-runtime.cdi"),
    ("nvidia.legacy", "nvidia-container-runtime"),
    ("Kata_2", "/opt/kata/bin/kata-runtime"),
])
def test_valid_edge_values_are_written_as_given(run_module, node, name, binary):
    ok, result = run_module(containerd_runtime, args(node, name=name, binary_name=binary,
                                                     runtime_type="io.containerd.kata-qemu.v2"))

    assert ok, result
    dropin = toml_reader.loads(node["dropin"].read_text(), "dropin", AssertionError)
    runtime = dropin["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"][name]
    assert runtime["options"]["BinaryName"] == binary
    assert runtime["runtime_type"] == "io.containerd.kata-qemu.v2"
