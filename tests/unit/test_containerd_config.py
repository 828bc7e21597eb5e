"""module_utils/containerd_config: drop-in and imports edits over real config.toml files."""

import pytest
from ansible.module_utils.gpunode.formats import toml_reader
from ansible.module_utils.gpunode.runtime.containerd_config import (
    CRI_PLUGIN,
    ContainerdConfigError,
    add_import,
    containerd_release,
    dumps,
    highest_config_version,
    parse,
    plan,
    version_from_output,
)
from conftest import FIXTURES, examples, shared_files
from hypothesis import given, settings
from hypothesis import strategies as st

OWN = FIXTURES / "docker"
DEFAULTS = {
    "1.4.13": (OWN / "containerd-config-default-1.4.13-debian.toml").read_text(),
    "1.6.20": (OWN / "containerd-config-default-1.6.20-debian.toml").read_text(),
    "1.7.24": (OWN / "containerd-config-default-1.7.24-debian.toml").read_text(),
}
REAL = sorted(OWN.glob("containerd-config.toml-*")) + shared_files("docker", "containerd-*.toml")
REAL_V12 = [p for p in REAL if parse(p.read_text(), str(p)).get("version", 1) in (1, 2)]
DROPIN = "/etc/containerd/conf.d/99-nvidia.toml"


def load(text):
    return toml_reader.loads(text, "test", AssertionError)


def _cri(data, version):
    return data.get("plugins", {}).get(CRI_PLUGIN[version], {})


def _runtime(data, version, name="nvidia"):
    return _cri(data, version)["containerd"]["runtimes"][name]


def _containerd_for(path):
    """A containerd release that reads the file (its version decides)."""
    version = parse(path.read_text(), str(path)).get("version", 1)
    return {1: "1.6.20", 2: "1.6.20", 3: "2.1.9", 4: "2.3.0"}[version]


@pytest.mark.parametrize("containerd", ["1.4.13", "1.6.20", "1.7.24"])
@pytest.mark.parametrize("path", REAL_V12, ids=lambda p: p.name)
def test_containerd_1x_keeps_config_and_adds_import_and_runtime(path, containerd):
    text = path.read_text()
    result = plan(text, containerd_version=containerd, default_config_text=DEFAULTS[containerd])

    before, after = load(text), load(result["config_text"])
    # config.toml: only the import was added, every line of the original is still there
    assert DROPIN in after["imports"]
    after.pop("imports")
    before_imports = before.pop("imports", [])
    assert after == before
    assert set(before_imports) <= set(load(result["config_text"])["imports"])
    added = [line for line in result["config_text"].splitlines() if line not in text.splitlines()]
    assert len(added) == 1 and "imports" in added[0]
    # the drop-in: same schema version, the runtime, and config.toml's own CRI settings
    version = result["schema_version"]
    assert version == before.get("version", 1)
    dropin = load(result["dropin_text"])
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
    containerd = _containerd_for(path)
    defaults = DEFAULTS.get(containerd)
    once = plan(
        path.read_text(), containerd_version=containerd, default_config_text=defaults, set_default=True
    )
    twice = plan(
        once["config_text"], containerd_version=containerd, default_config_text=defaults, set_default=True
    )
    assert twice["config_text"] == once["config_text"]
    assert twice["dropin_text"] == once["dropin_text"]


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_dropin_never_carries_a_higher_version_than_config_toml(path):
    containerd = _containerd_for(path)
    result = plan(
        path.read_text(), containerd_version=containerd, default_config_text=DEFAULTS.get(containerd)
    )
    root = load(path.read_text()).get("version", 1)
    assert load(result["dropin_text"]).get("version", 1) == root


def test_existing_default_runtime_is_kept_unless_asked():
    text = (OWN / "containerd-config.toml-v2-runc-systemdcgroup-false.toml").read_text()
    kept = plan(text, containerd_version="1.6.20", default_config_text=DEFAULTS["1.6.20"])
    assert _cri(load(kept["dropin_text"]), 2)["containerd"]["default_runtime_name"] == "runc"
    assert kept["effective"]["default_runtime"] == "runc"
    asked = plan(text, containerd_version="1.6.20", default_config_text=DEFAULTS["1.6.20"], set_default=True)
    assert _cri(load(asked["dropin_text"]), 2)["containerd"]["default_runtime_name"] == "nvidia"
    assert asked["effective"]["default_runtime"] == "nvidia"
    assert "nvidia" in asked["effective"]["runtimes"]


@pytest.mark.parametrize(
    ("fixture", "containerd", "version"),
    [
        ("containerd-config.toml-v3-containerd2.toml", "2.0.2", 3),
        ("containerd-config.toml-v3-containerd2.toml", "2.3.0", 3),
        ("containerd-config.toml-v4-containerd2.3-server-plugins.toml", "2.3.0", 4),
    ],
)
def test_containerd_2_gets_a_minimal_dropin_of_the_root_version(fixture, containerd, version):
    text = (OWN / fixture).read_text()
    result = plan(text, containerd_version=containerd, set_default=True)
    dropin = load(result["dropin_text"])
    assert dropin["version"] == version
    assert dropin["plugins"] == {
        "io.containerd.cri.v1.runtime": {
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
    }
    assert not result["full_cri_table"]


def test_version_4_with_its_conf_d_glob_keeps_config_toml_as_is():
    text = (OWN / "containerd-config.toml-v4-containerd2.3-server-plugins.toml").read_text()
    result = plan(text, containerd_version="2.3.1")
    assert result["config_text"] == text


@pytest.mark.parametrize(
    ("fixture", "containerd", "message"),
    [
        (
            "containerd-config.toml-v3-containerd2.toml",
            "1.7.24",
            r"config version 3 needs containerd 2\.0 or newer",
        ),
        (
            "containerd-config.toml-v4-containerd2.3-server-plugins.toml",
            "1.7.24",
            r"version 4 needs containerd 2\.3",
        ),
        (
            "containerd-config.toml-v4-containerd2.3-server-plugins.toml",
            "2.1.9",
            r"version 4 needs containerd 2\.3",
        ),
        (
            "containerd-config.toml-v1-no-version-line.toml",
            "2.1.9",
            r"has no `version` line.*containerd config migrate",
        ),
    ],
)
def test_a_config_this_containerd_cannot_use_is_refused(fixture, containerd, message):
    with pytest.raises(ContainerdConfigError, match=r"^/etc/containerd/config\.toml: .*" + message):
        plan(
            (OWN / fixture).read_text(), containerd_version=containerd, default_config_text=DEFAULTS["1.7.24"]
        )


@pytest.mark.parametrize("containerd", ["1.6.20", "2.3.0"])
def test_no_version_line_is_version_1_where_containerd_reads_it(containerd):
    text = (OWN / "containerd-config.toml-v1-no-version-line.toml").read_text()
    result = plan(text, containerd_version=containerd, default_config_text=DEFAULTS["1.6.20"])
    dropin = load(result["dropin_text"])
    assert result["schema_version"] == 1 and "version" not in dropin
    assert _runtime(dropin, 1)["options"]["SystemdCgroup"] is True


@pytest.mark.parametrize(
    ("containerd", "version"),
    [("1.4.13", 2), ("1.6.20", 2), ("2.1.9", 3), ("2.2.0", 3), ("2.3.0", 4), (None, 2)],
)
@pytest.mark.parametrize("existing", [None, "", "# nothing set here yet\n"])
def test_missing_or_empty_config_is_created_with_the_newest_version(containerd, version, existing):
    result = plan(existing, containerd_version=containerd)
    assert load(result["config_text"]) == {"version": version, "imports": [DROPIN]}
    assert result["config_text"].startswith(existing or "")
    assert load(result["dropin_text"])["version"] == version


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
    assert _runtime(load(result["dropin_text"]), 2)["options"]["SystemdCgroup"] is expected


def test_systemd_cgroup_given_wins():
    text = (OWN / "containerd-config.toml-v2-runc-systemdcgroup-false.toml").read_text()
    result = plan(text, containerd_version="1.6.20", systemd_cgroup=True)
    assert _runtime(load(result["dropin_text"]), 2)["options"]["SystemdCgroup"] is True


@pytest.mark.parametrize("glob", ["/etc/containerd/conf.d/*.toml", "/etc/containerd/conf.d/*"])
def test_import_glob_that_matches_counts_as_present(glob):
    text = f'version = 2\nimports = ["{glob}"]\n'
    assert plan(text, containerd_version="1.6.20")["config_text"] == text


def test_other_imports_are_merged_in_order():
    text = 'version = 2\nimports = ["/etc/containerd/extra.d/*.toml"]\n'
    extra = '[plugins."io.containerd.grpc.v1.cri"]\nsandbox_image = "pause:extra"\n'
    result = plan(text, containerd_version="1.7.0", other_imports=[("/etc/containerd/extra.d/a.toml", extra)])
    assert _cri(load(result["dropin_text"]), 2)["sandbox_image"] == "pause:extra"


@pytest.mark.parametrize(
    ("containerd", "root_cdi", "written", "enabled"),
    [
        ("1.7.24", None, True, True),  # 1.7 has CDI off by default: turned on
        ("2.1.9", None, False, True),  # 2.x has it on: nothing to write
        ("2.1.9", False, True, True),  # switched off in config.toml: turned back on
        ("1.6.20", None, False, False),  # no CDI before 1.7
    ],
)
def test_cdi_is_turned_on_where_it_is_off(containerd, root_cdi, written, enabled):
    version = 3 if containerd.startswith("2.") else 2
    text = f"version = {version}\n"
    if root_cdi is not None:
        text += f'[plugins."{CRI_PLUGIN[version]}"]\nenable_cdi = {str(root_cdi).lower()}\n'
    defaults = DEFAULTS.get(containerd)
    result = plan(text, containerd_version=containerd, default_config_text=defaults, enable_cdi=True)
    cri = _cri(load(result["dropin_text"]), version)
    assert (cri.get("enable_cdi") is True) is written
    assert result["effective"]["cdi_enabled"] is enabled
    if enabled:
        assert result["effective"]["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert any("no CDI support" in w for w in result["warnings"]) is (containerd == "1.6.20")


def test_cri_disabled_warns():
    disabled = plan(
        'disabled_plugins = ["cri"]\n', containerd_version="1.6.20", default_config_text=DEFAULTS["1.6.20"]
    )
    assert any("CRI plugin is disabled" in w for w in disabled["warnings"])
    enabled = plan("version = 2\n", containerd_version="1.6.20", default_config_text=DEFAULTS["1.6.20"])
    assert enabled["warnings"] == []


def test_without_defaults_on_containerd_1_warns():
    result = plan("version = 2\n", containerd_version="1.6.20")
    assert any("config default" in w for w in result["warnings"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("imports = []\nversion = 2\n", f'imports = ["{DROPIN}"]\nversion = 2\n'),
        (
            'version = 2\nimports = [\n  "/a.toml",\n]\n',
            f'version = 2\nimports = [\n  "/a.toml", "{DROPIN}"\n]\n',
        ),
        ("# head\nversion = 2", f'# head\nversion = 2\nimports = ["{DROPIN}"]\n'),
        ('root = "/x"\n[grpc]\nimports = 1\n', f'imports = ["{DROPIN}"]\nroot = "/x"\n[grpc]\nimports = 1\n'),
    ],
)
def test_add_import_is_a_minimal_edit(text, expected):
    assert add_import(text, DROPIN, 2) == expected
    assert DROPIN in load(expected)["imports"]


@pytest.mark.parametrize("path", sorted(OWN.glob("MALFORMED-containerd-*")), ids=lambda p: p.name)
def test_malformed_config_names_the_file(path):
    with pytest.raises(ContainerdConfigError, match=r"^/etc/containerd/config\.toml: not valid TOML"):
        plan(path.read_text(), containerd_version="1.6.20")


@pytest.mark.parametrize("version", ["7", "0.5", '"2"', "true"])
def test_unknown_version_is_refused(version):
    with pytest.raises(ContainerdConfigError, match="unsupported config version"):
        plan(f"version = {version}\n", containerd_version="1.6.20")


@pytest.mark.parametrize(
    ("output", "version", "release", "highest"),
    [
        (
            "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3",
            "1.6.20~ds1",
            (1, 6),
            2,
        ),
        ("containerd containerd.io v2.0.4 1a43cb6a1035441f9aca8f5666a9b3ef9e70ab20", "2.0.4", (2, 0), 3),
        ("containerd github.com/containerd/containerd/v2 2.1.9+unknown ", "2.1.9+unknown", (2, 1), 3),
        ("containerd github.com/containerd/containerd/v2 v2.3.1 0cbbc6d", "2.3.1", (2, 3), 4),
        ("garbage", None, None, None),
    ],
)
def test_version_detection(output, version, release, highest):
    assert version_from_output(output) == version
    assert containerd_release(version) == release
    assert highest_config_version(release) == highest


# --- every target Python computes the same bytes ----------------------------------

PARSERS = ["tomllib", "tomli", "toml"]
CORPUS = [*REAL, *sorted(OWN.glob("containerd-config-default-*.toml"))]


def _parser(name):
    return pytest.importorskip(name)  # tomllib on 3.11+; tomli and toml from requirements-dev.txt


@pytest.mark.parametrize("name", PARSERS)
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_every_parser_gives_the_same_bytes(monkeypatch, path, name):
    """tomllib (3.11+), tomli (Debian 12/13, Ubuntu 22.04) and toml 0.10 (Debian 11) agree."""
    text = path.read_text()
    containerd = _containerd_for(path)
    args = {
        "containerd_version": containerd,
        "default_config_text": DEFAULTS.get(containerd),
        "set_default": True,
        "enable_cdi": True,
    }
    reference = plan(text, **args)
    monkeypatch.setattr(toml_reader, "_parser", _parser(name))
    assert toml_reader.loads(text, "x") == load(text)
    assert plan(text, **args) == reference


@pytest.mark.parametrize("name", PARSERS)
def test_every_parser_refuses_malformed_files(monkeypatch, name):
    monkeypatch.setattr(toml_reader, "_parser", _parser(name))
    for path in OWN.glob("MALFORMED-containerd-*"):
        with pytest.raises(ContainerdConfigError, match="not valid TOML"):
            plan(path.read_text(), containerd_version="1.6.20")


def test_without_a_parser_the_error_names_the_packages(monkeypatch):
    monkeypatch.setattr(toml_reader, "_parser", None)
    with pytest.raises(ContainerdConfigError, match=r"python3-tomli.*python3-toml"):
        plan("version = 2\n", containerd_version="1.6.20")


# --- the writer round-trips what it writes --------------------------------------

KEYS = st.text(alphabet='abc.-_ "\\', min_size=1, max_size=5)
SCALARS = st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=6) | st.floats(allow_nan=False)
ARRAYS = st.lists(SCALARS, max_size=3)
TABLES = st.recursive(
    st.dictionaries(KEYS, SCALARS | ARRAYS, max_size=3),
    lambda inner: st.dictionaries(KEYS, inner | SCALARS | ARRAYS, max_size=3),
    max_leaves=10,
)


@settings(max_examples=examples(200), deadline=None)
@given(TABLES)
def test_property_dumps_round_trips(data):
    assert load(dumps(data)) == data


def test_parse_reports_the_path():
    with pytest.raises(ContainerdConfigError, match=r"^/x\.toml: not valid TOML"):
        parse("a = \n", "/x.toml")
