"""module_utils/containerd_config: drop-in and imports edits over real config.toml files."""

import pytest
import tomllib
from ansible.module_utils.containerd_config import (
    CRI_PLUGIN,
    ContainerdConfigError,
    MiniToml,
    add_import,
    dumps,
    major_version,
    parse,
    plan,
    version_from_output,
)
from conftest import FIXTURES, shared_files
from hypothesis import given, settings
from hypothesis import strategies as st

OWN = FIXTURES / "docker"
DEFAULTS = (OWN / "containerd-config-default-1.6.20-debian.toml").read_text()
REAL = sorted(OWN.glob("containerd-config.toml-*")) + shared_files("docker", "containerd-*.toml")
REAL_1X = [p for p in REAL if "v3" not in p.name]
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"


def _cri(data, version):
    return data.get("plugins", {}).get(CRI_PLUGIN[version], {})


def _runtime(data, version, name="nvidia"):
    return _cri(data, version)["containerd"]["runtimes"][name]


@pytest.mark.parametrize("path", REAL_1X, ids=lambda p: p.name)
def test_containerd_1x_keeps_config_and_adds_import_and_runtime(path):
    text = path.read_text()
    result = plan(text, containerd_version="1.6.20", default_config_text=DEFAULTS)

    before, after = tomllib.loads(text), tomllib.loads(result["config_text"])
    # config.toml: only the import was added, every line of the original is still there
    assert DROPIN in after["imports"]
    after.pop("imports")
    before_imports = before.pop("imports", [])
    assert after == before
    assert set(before_imports) <= set(tomllib.loads(result["config_text"])["imports"])
    added = [line for line in result["config_text"].splitlines() if line not in text.splitlines()]
    assert len(added) == 1 and "imports" in added[0]
    # the drop-in: same schema version, the runtime, and config.toml's own CRI settings
    version = result["schema_version"]
    assert version == before.get("version", 1)
    dropin = tomllib.loads(result["dropin_text"])
    assert dropin.get("version", 1) == version
    runtime = _runtime(dropin, version)
    assert runtime["runtime_type"] == "io.containerd.runc.v2"
    assert runtime["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    _assert_contains(_cri(dropin, version), _cri(before, version), path="cri")
    # containerd 1.x replaces the plugin table: the defaults (runc, CNI...) must be carried too
    assert "runc" in _cri(dropin, version)["containerd"]["runtimes"]
    assert "cni" in _cri(dropin, version)


def _assert_contains(big, small, path):
    for key, value in small.items():
        if path == "cri.containerd.runtimes" and key == "nvidia":
            continue
        if path == "cri.containerd" and key == "default_runtime_name":
            continue
        assert key in big, f"{path}.{key}"
        if isinstance(value, dict):
            _assert_contains(big[key], value, f"{path}.{key}")
        else:
            assert big[key] == value, f"{path}.{key}"


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_second_run_is_converged(path):
    version = "2.0.0" if "v3" in path.name else "1.6.20"
    once = plan(path.read_text(), containerd_version=version, default_config_text=DEFAULTS)
    twice = plan(once["config_text"], containerd_version=version, default_config_text=DEFAULTS)
    assert twice["config_text"] == once["config_text"]
    assert twice["dropin_text"] == once["dropin_text"]


def test_existing_default_runtime_is_kept_unless_asked():
    text = next(p for p in REAL if "v2-runc" in p.name).read_text()
    kept = tomllib.loads(plan(text, containerd_version="1.6.20", default_config_text=DEFAULTS)["dropin_text"])
    assert _cri(kept, 2)["containerd"]["default_runtime_name"] == "runc"
    asked = plan(text, containerd_version="1.6.20", default_config_text=DEFAULTS, set_default=True)
    assert _cri(tomllib.loads(asked["dropin_text"]), 2)["containerd"]["default_runtime_name"] == "nvidia"


def test_containerd_2_gets_a_minimal_v3_dropin():
    text = (OWN / "containerd-config.toml-v3-containerd2.toml").read_text()
    result = plan(text, containerd_version="2.0.2", set_default=True)
    dropin = tomllib.loads(result["dropin_text"])
    assert dropin["version"] == 3
    cri = dropin["plugins"]["io.containerd.cri.v1.runtime"]
    assert cri == {
        "containerd": {
            "default_runtime_name": "nvidia",
            "runtimes": {
                "nvidia": {
                    "runtime_type": "io.containerd.runc.v2",
                    "options": {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True},
                }
            },
        }
    }
    assert not result["full_cri_table"]


def test_v3_file_with_containerd_1_is_refused():
    text = (OWN / "containerd-config.toml-v3-containerd2.toml").read_text()
    with pytest.raises(ContainerdConfigError, match=r"config\.toml: version 3 needs containerd 2\.x"):
        plan(text, containerd_version="1.7.2")


@pytest.mark.parametrize(("containerd", "version"), [("1.6.20", 2), ("2.1.0", 3), (None, 2)])
def test_missing_config_is_created_with_version_and_imports(containerd, version):
    result = plan(None, containerd_version=containerd)
    assert tomllib.loads(result["config_text"]) == {"version": version, "imports": [DROPIN]}
    assert tomllib.loads(result["dropin_text"])["version"] == version


@pytest.mark.parametrize(
    ("runc_value", "pid1", "expected"),
    [(False, True, False), (True, False, True), (None, True, True), (None, False, False)],
)
def test_systemd_cgroup_follows_the_node(runc_value, pid1, expected):
    text = "version = 2\n"
    if runc_value is not None:
        text += '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\n'
        text += f"SystemdCgroup = {str(runc_value).lower()}\n"
    result = plan(text, containerd_version="1.6.20", systemd_pid1=pid1)
    assert result["systemd_cgroup"] is expected
    assert _runtime(tomllib.loads(result["dropin_text"]), 2)["options"]["SystemdCgroup"] is expected


def test_systemd_cgroup_given_wins():
    text = (OWN / "containerd-config.toml-v2-runc-systemdcgroup-false.toml").read_text()
    result = plan(text, containerd_version="1.6.20", systemd_cgroup=True)
    assert _runtime(tomllib.loads(result["dropin_text"]), 2)["options"]["SystemdCgroup"] is True


def test_import_glob_that_matches_counts_as_present():
    text = 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
    assert plan(text, containerd_version="1.6.20")["config_text"] == text


def test_other_imports_are_merged_in_order():
    text = 'version = 2\nimports = ["/etc/containerd/extra.d/*.toml"]\n'
    extra = '[plugins."io.containerd.grpc.v1.cri"]\nsandbox_image = "pause:extra"\n'
    result = plan(text, containerd_version="1.7.0", other_imports=[("/etc/containerd/extra.d/a.toml", extra)])
    assert _cri(tomllib.loads(result["dropin_text"]), 2)["sandbox_image"] == "pause:extra"


def test_cri_disabled_warns():
    disabled = plan('disabled_plugins = ["cri"]\n', containerd_version="1.6.20", default_config_text=DEFAULTS)
    assert any("CRI plugin is disabled" in w for w in disabled["warnings"])
    enabled = plan("version = 2\n", containerd_version="1.6.20", default_config_text=DEFAULTS)
    assert enabled["warnings"] == []


def test_without_defaults_on_containerd_1_warns():
    result = plan("version = 2\n", containerd_version="1.6.20")
    assert any("config default" in w for w in result["warnings"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('imports = []\nversion = 2\n', f'imports = ["{DROPIN}"]\nversion = 2\n'),
        (
            'version = 2\nimports = [\n  "/a.toml",\n]\n',
            f'version = 2\nimports = [\n  "/a.toml", "{DROPIN}"\n]\n',
        ),
        ('# head\nversion = 2', f'# head\nversion = 2\nimports = ["{DROPIN}"]\n'),
        ('root = "/x"\n[grpc]\nimports = 1\n', f'imports = ["{DROPIN}"]\nroot = "/x"\n[grpc]\nimports = 1\n'),
    ],
)
def test_add_import_is_a_minimal_edit(text, expected):
    assert add_import(text, DROPIN, 2) == expected
    assert DROPIN in tomllib.loads(expected)["imports"]


@pytest.mark.parametrize("path", sorted(OWN.glob("MALFORMED-containerd-*")), ids=lambda p: p.name)
def test_malformed_config_names_the_file(path):
    with pytest.raises(ContainerdConfigError, match=r"^/etc/containerd/config\.toml: not valid TOML"):
        plan(path.read_text(), containerd_version="1.6.20")


def test_unknown_version_is_refused():
    with pytest.raises(ContainerdConfigError, match="unsupported config version 7"):
        plan("version = 7\n", containerd_version="1.6.20")


@pytest.mark.parametrize(
    ("output", "version", "major"),
    [
        ("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3", "1.6.20~ds1", 1),
        ("containerd containerd.io v2.0.4 1a43cb6a1035441f9aca8f5666a9b3ef9e70ab20", "2.0.4", 2),
        ("garbage", None, None),
    ],
)
def test_version_detection(output, version, major):
    assert version_from_output(output) == version
    assert major_version(version) == major


@pytest.mark.parametrize("path", [*REAL, OWN / "containerd-config-default-1.6.20-debian.toml"], ids=str)
def test_fallback_reader_agrees_with_tomllib(path):
    text = path.read_text()
    assert MiniToml(text).parse() == tomllib.loads(text)


# --- the writer round-trips what it writes --------------------------------------

KEYS = st.text(alphabet='abc.-_ "\\', min_size=1, max_size=5)
SCALARS = st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=6) | st.floats(allow_nan=False)
ARRAYS = st.lists(SCALARS, max_size=3)
TABLES = st.recursive(
    st.dictionaries(KEYS, SCALARS | ARRAYS, max_size=3),
    lambda inner: st.dictionaries(KEYS, inner | SCALARS | ARRAYS, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(TABLES)
def test_property_dumps_round_trips(data):
    text = dumps(data)
    assert tomllib.loads(text) == data
    assert MiniToml(text).parse() == data


def test_parse_reports_the_path():
    with pytest.raises(ContainerdConfigError, match=r"^/x\.toml: not valid TOML"):
        parse("a = \n", "/x.toml")
