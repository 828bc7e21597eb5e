"""module_utils/container_runtime_state: what commands print, the kubelet's engine, the plan."""

import copy
import json

import nvidia_container_runtime_state
import pytest
from ansible.module_utils.gpunode.common.service_health import compile_expectations, unmet_expectations
from ansible.module_utils.gpunode.formats.json_config import plan as json_plan
from ansible.module_utils.gpunode.runtime import engines as cre
from ansible.module_utils.gpunode.runtime import reader as crr
from ansible.module_utils.gpunode.runtime import state as crs
from ansible.module_utils.gpunode.runtime import state_call as crsc
from ansible.module_utils.gpunode.runtime.containerd_config import plan as containerd_plan
from conftest import FIXTURES

OWN = FIXTURES / "docker"
DEBIAN_CONFIG = (OWN / "containerd-config.toml-debian-bookworm-default.toml").read_text()
DEFAULTS_16 = (OWN / "containerd-config-default-1.6.20-debian.toml").read_text()
BINARY = "/usr/bin/nvidia-container-runtime"

# --- parsers -------------------------------------------------------------------------


APT_POLICY = """\
nvidia-container-toolkit:
  Installed: (none)
  Candidate: 1.17.8-1
  Version table:
     1.17.8-1 500
        500 http://127.0.0.1:8371  Packages
     1.17.7-1 500
        500 http://127.0.0.1:8371  Packages
python3-tomli:
  Installed: 2.0.1-2
  Candidate: 2.0.1-2
  Version table:
 *** 2.0.1-2 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
        100 /var/lib/dpkg/status
python3-toml:
  Installed: (none)
  Candidate: (none)
  Version table:
"""


def test_apt_policy_tells_known_packages_and_versions():
    known = cre.parse_apt_policy(APT_POLICY + "N: Unable to locate package nvidia-docker2\n")
    assert known == {
        "nvidia-container-toolkit": {"candidate": "1.17.8-1", "versions": ["1.17.8-1", "1.17.7-1"]},
        "python3-tomli": {"candidate": "2.0.1-2", "versions": ["2.0.1-2"]},
    }


@pytest.mark.parametrize(
    ("debian", "upstream"), [("1.17.8-1", "1.17.8"), ("1:2.0-1ubuntu2", "2.0"), ("1.18.0", "1.18.0")]
)
def test_upstream_version(debian, upstream):
    assert cre.upstream_version(debian) == upstream


def test_docker_info_runtimes_and_default():
    text = (
        '{"ServerVersion":"26.1.5+dfsg1","DefaultRuntime":"nvidia","Runtimes":{"io.containerd.runc.v2":'
        '{"path":"runc","status":{"a":"b"}},"nvidia":{"path":"/usr/bin/nvidia-container-runtime"},"runc":{"path":"runc"}}}'
    )
    info = cre.parse_docker_info(text)
    assert info["default_runtime"] == "nvidia"
    assert info["runtimes"]["nvidia"] == BINARY
    assert cre.release_of(info["server_version"]) == (26, 1)
    assert cre.parse_docker_info("Cannot connect to the Docker daemon") is None


# --- the kubelet's engine ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "engine"),
    [
        (
            ["/usr/bin/kubelet", "--container-runtime-endpoint=unix:///run/containerd/containerd.sock"],
            "containerd",
        ),
        (["/usr/bin/kubelet", "--container-runtime-endpoint", "unix:///var/run/cri-dockerd.sock"], "docker"),
        (["/usr/bin/kubelet", "--container-runtime-endpoint=unix:///var/run/crio/crio.sock"], "cri-o"),
        (["/usr/bin/kubelet", "--container-runtime=docker", "--network-plugin=cni"], "docker"),  # dockershim
        (["/usr/bin/python3", "/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml"], "containerd"),
        (
            [
                "/var/lib/rancher/rke2/data/v1.31/bin/kubelet",
                "--container-runtime-endpoint=unix:///run/k3s/containerd/containerd.sock",
            ],
            "containerd",
        ),
    ],
)
def test_the_running_kubelet_decides(argv, engine):
    args = cre.kubelet_argv([["/sbin/init"], ["sshd: root"], argv])
    assert cre.kubelet_engine({"kubelet_args": args, "sockets": ["/var/run/crio/crio.sock"]}) == engine


@pytest.mark.parametrize(
    "config",
    [
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncontainerRuntimeEndpoint: unix:///var/run/crio/crio.sock\n",
        '{"kind": "KubeletConfiguration", "containerRuntimeEndpoint": "unix:///var/run/crio/crio.sock"}',
    ],
)
def test_the_kubelet_configuration_file_names_the_endpoint(config):
    observed = {
        "kubelet_args": ["--config=/etc/kubernetes/kubelet/config.json"],
        "kubelet_config_text": config,
    }
    assert cre.kubelet_engine(observed) == "cri-o"


def test_an_installed_kubelet_that_does_not_run_yet():
    flags = (
        'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/cri-dockerd.sock '
        '--pod-infra-container-image=x"\n'
    )
    observed = {"kubelet_args": None, "kubelet_installed": True, "kubelet_flag_texts": [flags]}
    assert cre.kubelet_engine(observed) == "docker"
    # no flags: kubeadm's socket detection, and the kubelet's default without one
    bare = {"kubelet_args": None, "kubelet_installed": True, "sockets": ["/var/run/crio/crio.sock"]}
    assert cre.kubelet_engine(bare) == "cri-o"
    assert cre.kubelet_engine(dict(bare, sockets=[])) == "containerd"


def test_rke2_and_k3s_use_their_containerd_unless_told_otherwise():
    assert cre.kubelet_engine({"kubelet_args": None, "rancher": "k3s", "rancher_config": {}}) == "containerd"
    assert (
        cre.kubelet_engine({"kubelet_args": None, "rancher": "k3s", "rancher_config": {"docker": True}})
        == "docker"
    )
    endpoint = {"container-runtime-endpoint": "unix:///var/run/crio/crio.sock"}
    assert (
        cre.kubelet_engine({"kubelet_args": None, "rancher": "rke2", "rancher_config": endpoint}) == "cri-o"
    )


def test_no_kubelet_no_engine():
    assert cre.kubelet_engine({"kubelet_args": None, "kubelet_installed": False}) is None


def test_rancher_config_files_merge_like_rke2():
    merged = cre.rancher_effective(
        [
            {"node-label": ["a=1"], "default-runtime": "runc"},
            {"node-label+": ["b=2"]},
            {"default-runtime": "nvidia"},
        ]
    )
    assert merged == {"node-label": ["a=1", "b=2"], "default-runtime": "nvidia"}


# --- CDI -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("docker", "config", "expected"),
    [
        ("20.10.24", {}, (False, False, [])),
        ("26.1.5", {}, (True, False, ["/etc/cdi", "/var/run/cdi"])),
        ("26.1.5", {"features": {"cdi": True}}, (True, True, ["/etc/cdi", "/var/run/cdi"])),
        ("28.2.0", {}, (True, True, ["/etc/cdi", "/var/run/cdi"])),
        ("28.2.0", {"features": {"cdi": False}, "cdi-spec-dirs": ["/opt/cdi"]}, (True, False, ["/opt/cdi"])),
    ],
)
def test_docker_cdi_by_version(docker, config, expected):
    assert cre.docker_cdi(cre.release_of(docker), config) == expected


@pytest.mark.parametrize(
    ("toolkit", "specs", "driver", "action", "path"),
    [
        ((1, 17), {}, "570.133.20", "generate", "/etc/cdi/nvidia.yaml"),
        (
            (1, 17),
            {"/etc/cdi/nvidia.yaml": "libcuda.so.570.133.20"},
            "570.133.20",
            None,
            "/etc/cdi/nvidia.yaml",
        ),
        (
            (1, 17),
            {"/etc/cdi/nvidia.yaml": "libcuda.so.535.129.03"},
            "570.133.20",
            "generate",
            "/etc/cdi/nvidia.yaml",
        ),
        ((1, 18), {}, "570.133.20", "refresh", "/var/run/cdi/nvidia.yaml"),
        (
            (1, 18),
            {"/var/run/cdi/nvidia.yaml": "x 570.133.20"},
            "570.133.20",
            None,
            "/var/run/cdi/nvidia.yaml",
        ),
        ((1, 17), {}, None, None, "/etc/cdi/nvidia.yaml"),  # no driver loaded yet
    ],
)
def test_cdi_spec_follows_the_loaded_driver(toolkit, specs, driver, action, path):
    spec = cre.cdi_spec_plan(toolkit, specs, driver)
    assert (spec["action"], spec["path"]) == (action, path)


def test_an_image_driver_root_reaches_nvidia_ctk_and_the_refresh_service():
    # an image's driver under /usr/local/nvidia (driver facts' driver_root): the spec names its
    # paths, device nodes stay in /dev
    root, driver = "/usr/local/nvidia", "580.159.04"
    spec = cre.cdi_spec_plan((1, 17), {}, driver, root)
    assert spec["action"] == "generate"
    assert spec["args"] == ["--driver-root=/usr/local/nvidia", "--dev-root=/"]
    made_for_usr = {"/etc/cdi/nvidia.yaml": f"/usr/lib/x86_64-linux-gnu/libcuda.so.{driver}"}
    spec = cre.cdi_spec_plan((1, 17), made_for_usr, driver, root)
    assert spec["action"] == "generate" and spec["why"].endswith("under /usr/local/nvidia")
    made_for_image = {"/etc/cdi/nvidia.yaml": f"{root}/lib64/libcuda.so.{driver}"}
    assert cre.cdi_spec_plan((1, 17), made_for_image, driver, root)["action"] is None
    refresh = cre.cdi_spec_plan((1, 18), {}, driver, root)
    assert refresh["action"] == "refresh"
    assert refresh["environment"] == {"NVIDIA_CTK_DRIVER_ROOT": root, "NVIDIA_CTK_DEV_ROOT": "/"}
    assert cre.cdi_spec_plan((1, 18), {}, driver, "/")["environment"] == {}


# --- the plan ----------------------------------------------------------------------------

WANTED = {
    "package": "nvidia-container-toolkit",
    "version": "1.17.8-1",
    "manage_repo": True,
    "repo_url": "http://127.0.0.1:8371/",
    "repo_key_checksum": "",
    "keyring": "/etc/apt/keyrings/nvidia-container-toolkit.asc",
    "sources_path": "/etc/apt/sources.list.d/nvidia-container-toolkit.sources",
    "engines": "auto",
    "binary": BINARY,
    "docker_default_runtime": True,
    "docker_daemon_json": "/etc/docker/daemon.json",
    "containerd_default_runtime": True,
    "containerd_systemd_cgroup": None,
    "containerd_config": "/etc/containerd/config.toml",
    "containerd_dropin": "/etc/containerd/conf.d/99-nvidia.toml",
    "cdi": True,
    "driver_version": "",
    "driver_root": "/",
    "python": "3.11.2",
    "toml_packages": ["python3-tomli", "python3-toml"],
}
INFO_RUNC = {"server_version": "20.10.24", "default_runtime": "runc", "runtimes": {"runc": "runc"}}
INFO_NVIDIA = {
    "server_version": "20.10.24",
    "default_runtime": "nvidia",
    "runtimes": {"runc": "runc", "nvidia": BINARY},
}


def fresh_node():
    """A bookworm node before the first run: Docker and containerd run, nothing NVIDIA."""
    return {
        "installed": {},
        "apt": {},
        "toml_parser": "tomllib",
        "yaml_available": True,
        "python": "3.11.2",
        "keyring_ok": False,
        "sources_text": None,
        "toolkit_binary": False,
        "driver_version": "535.129.03",
        "cdi_specs": {},
        "engines_found": ["docker", "containerd"],
        "rancher": None,
        "rancher_state": None,
        "docker": {
            "version": "20.10.24",
            "active": True,
            "info": INFO_RUNC,
            "text": '{"log-driver": "json-file"}\n',
            "config": {"log-driver": "json-file"},
            "stale": [],
        },
        "containerd": {
            "version": "1.6.20~ds1",
            "defaults": DEFAULTS_16,
            "active": True,
            "config_text": DEBIAN_CONFIG,
            "dropin_text": None,
            "imports": [],
            "cri_disabled": False,
            "stale": [],
        },
        "kubelet_args": ["--container-runtime-endpoint=unix:///run/containerd/containerd.sock"],
        "kubelet_config_text": None,
        "kubelet_flag_texts": [],
        "kubelet_installed": True,
        "rancher_config": {},
        "sockets": [],
    }


def planners(observed):
    containerd = observed["containerd"]

    def plan_containerd(**args):
        return containerd_plan(
            containerd["config_text"],
            containerd_version=containerd["version"],
            default_config_text=containerd["defaults"],
            other_imports=containerd["imports"],
            **args,
        )

    def plan_docker(text, settings, path):
        return json_plan(text, settings, path, docker=True)

    return plan_docker, plan_containerd


def build(observed, **wanted):
    return crs.Planner(observed, dict(WANTED, **wanted), *planners(observed)).build()


def converge(observed, plan):
    """What the role's apply leaves: the observed node after the plan ran (restarts done)."""
    node = copy.deepcopy(observed)
    node["keyring_ok"] = True
    node["sources_text"] = plan["sources_text"]
    for spec in plan["packages"]:
        name, _, version = spec.partition("=")
        node["installed"][name] = version or "1"
    node["installed"].setdefault(cre.TOOLKIT, node["installed"].get("nvidia-container-toolkit", "1.17.8-1"))
    node["toolkit_binary"] = True
    if plan["docker"]["configure"]:
        _changed, text, config = json_plan(
            node["docker"]["text"], plan["docker"]["settings"], "/etc/docker/daemon.json", docker=True
        )
        node["docker"].update(text=text, config=config)
    if plan["docker"]["restart"]:
        runtimes = {name: value.get("path") for name, value in node["docker"]["config"]["runtimes"].items()}
        node["docker"]["info"] = dict(
            INFO_RUNC,
            default_runtime=node["docker"]["config"].get("default-runtime", "runc"),
            runtimes={"runc": "runc", **runtimes},
        )
        node["docker"]["stale"] = []
    if plan["containerd"]["configure"]:
        result = planners(node)[1](**plan["containerd"]["args"])
        node["containerd"].update(config_text=result["config_text"], dropin_text=result["dropin_text"])
    node["containerd"]["stale"] = []
    if plan["cdi"]["action"]:
        node["cdi_specs"][plan["cdi"]["path"]] = f"nvidia.com/gpu {node['driver_version']}"
    if plan["cdi"]["action"] == "refresh":  # reset-failed, then the path unit restarted
        node["cdi_failed"] = []
    return node


def test_a_fresh_node_gets_everything_and_then_is_converged():
    observed = fresh_node()
    plan, facts = build(observed)

    assert plan["changes"]
    assert plan["repo_key"] and plan["repo_source"] and plan["install"]
    assert plan["packages"] == ["nvidia-container-toolkit=1.17.8-1", "nvidia-container-toolkit-base=1.17.8-1",
                                "libnvidia-container-tools=1.17.8-1", "libnvidia-container1=1.17.8-1"]
    assert plan["update_cache"] and not plan["packages_known"]  # apt does not know the package yet
    assert plan["docker"]["configure"] and plan["docker"]["restart"]
    assert plan["docker"]["settings"]["default-runtime"] == "nvidia"
    assert plan["containerd"]["configure"] and plan["containerd"]["restart"]
    assert plan["containerd"]["args"]["set_default"] is True
    path_active = {"command": ["systemctl", "is-active", "nvidia-cdi-refresh.path"], "expect": []}
    assert plan["cdi"] == {"action": "generate", "path": "/etc/cdi/nvidia.yaml", "args": [],
                           "environment": {}, "checks": [path_active]}
    assert "container toolkit none -> 1.17.8" in plan["summary"]
    assert "containerd: nvidia runtime (default)" in plan["summary"]
    # the facts already describe the node after the run (what check mode predicts)
    assert facts["toolkit_version"] == "1.17.8"
    assert facts["engines"]["docker"] == {
        "nvidia_runtime": True,
        "default_runtime": "nvidia",
        "managed_by": "docker",
    }
    assert facts["engines"]["containerd"] == {
        "nvidia_runtime": True,
        "default_runtime": "nvidia",
        "managed_by": "containerd",
    }
    assert facts["kubelet_engine"] == "containerd"
    assert facts["cdi"] == {"enabled": False, "spec_dirs": []}  # containerd 1.6 has no CDI

    converged = converge(observed, plan)
    again, facts_again = build(converged)
    assert not again["changes"], again["reasons"]
    assert again["summary"] == []
    assert facts_again == facts


def test_a_restart_that_never_happened_is_done_on_the_next_run():
    observed = converge(fresh_node(), build(fresh_node())[0])
    observed["docker"]["info"] = INFO_RUNC  # daemon.json is right, Docker still runs the old one
    observed["containerd"]["stale"] = ["/etc/containerd/conf.d/99-nvidia.toml"]

    plan, _facts = build(observed)

    assert plan["changes"]
    assert not plan["docker"]["configure"] and plan["docker"]["restart"]
    assert not plan["containerd"]["configure"] and plan["containerd"]["restart"]
    assert "docker: restarted to load its configuration" in plan["summary"]
    assert any("docker info" in reason for reason in plan["reasons"])


def test_docker_that_runs_another_binary_for_nvidia_is_restarted():
    observed = converge(fresh_node(), build(fresh_node())[0])
    observed["docker"]["info"] = dict(
        INFO_NVIDIA, runtimes={"runc": "runc", "nvidia": "/usr/local/bin/other"}
    )
    assert build(observed)[0]["docker"]["restart"]


def test_a_stale_package_index_is_refreshed_whatever_its_age():
    observed = converge(fresh_node(), build(fresh_node())[0])
    del observed["installed"]["nvidia-container-toolkit"]  # removed; the lists do not know the source yet
    observed["apt"] = {}

    plan, _facts = build(observed)

    assert plan["install"] and plan["update_cache"] and not plan["repo_source"]
    known = dict(observed, apt=cre.parse_apt_policy(APT_POLICY))
    assert not build(known)[0]["update_cache"]


def test_python_without_a_toml_reader_gets_the_distributions_package():
    observed = fresh_node()
    observed.update(toml_parser=None, python="3.9.2")
    observed["apt"] = {
        "python3-toml": {"candidate": "0.10.1-1", "versions": ["0.10.1-1"]}
    }  # bullseye: no tomli

    plan, facts = build(observed)

    assert "python3-toml" in plan["packages"] and not plan["readers_ready"]
    assert plan["containerd"]["configure"]  # decided once the reader is there
    assert facts["engines"]["containerd"]["default_runtime"] == "nvidia"
    bookworm = dict(observed, apt={"python3-tomli": {"candidate": "2.0.1-2", "versions": ["2.0.1-2"]}})
    assert "python3-tomli" in build(bookworm)[0]["packages"]


def test_docker_s_containerd_with_cri_disabled_is_left_alone():
    observed = fresh_node()
    observed["containerd"]["cri_disabled"] = True

    plan, facts = build(observed)

    assert not plan["containerd"]["configure"] and not plan["containerd"]["restart"]
    assert facts["engines"]["containerd"]["managed_by"] == "docker"
    assert any("serves Docker only" in note for note in plan["notes"])


def verified_restart_unmet(stdout, expect):
    """The ``expect`` patterns verified_restart finds unmet in ``stdout`` (service_health's own)."""
    return unmet_expectations(stdout, compile_expectations(expect))


def crictl_info(default, runtimes):
    """``crictl info`` as it prints the running containerd's CRI configuration: the config's JSON names
    (``json:"containerd"``, ``json:"defaultRuntimeName"``, ``json:"runtimes"`` in containerd 2.1.9's
    binary, as in 1.7), indented."""
    return json.dumps({"status": {"conditions": [{"type": "RuntimeReady", "status": True}]},
                       "config": {"containerd": {"defaultRuntimeName": default, "runtimes": {
                           name: {"runtimeType": "io.containerd.runc.v2",
                                  "options": {"BinaryName": binary}} for name, binary in runtimes.items()}},
                                  "enableCDI": True}}, indent=2)


def test_the_running_containerd_is_asked_what_its_cri_plugin_loaded_where_crictl_is():
    observed = fresh_node()
    observed["containerd"]["crictl"] = "/usr/bin/crictl"
    checks = build(observed)[0]["containerd"]["checks"]
    assert checks[:2] == build(fresh_node())[0]["containerd"]["checks"]  # the files' checks stay
    crictl = checks[2]
    assert crictl["command"] == ["/usr/bin/crictl", "--runtime-endpoint", "unix:///run/containerd/containerd.sock",
                                 "info"]
    loaded = crictl_info("nvidia", {"runc": "", "nvidia": BINARY})
    assert not verified_restart_unmet(loaded, crictl["expect"])
    assert verified_restart_unmet(crictl_info("runc", {"runc": "", "nvidia": BINARY}), crictl["expect"]) == [
        r'"defaultRuntimeName":\s*"nvidia"']
    assert len(verified_restart_unmet(crictl_info("runc", {"runc": ""}), crictl["expect"])) == 2
    not_default = build(observed, containerd_default_runtime=False)[0]["containerd"]["checks"][2]
    runc_default = crictl_info("runc", {"runc": "", "nvidia": BINARY})
    assert not verified_restart_unmet(runc_default, not_default["expect"])


def test_without_crictl_or_with_the_cri_plugin_off_the_files_checks_are_all():
    assert len(build(fresh_node())[0]["containerd"]["checks"]) == 2
    observed = fresh_node()
    observed["containerd"].update(crictl="/usr/bin/crictl", cri_disabled=True)
    plan = build(observed, engines=["containerd", "docker"])[0]
    assert plan["containerd"]["restart"] and len(plan["containerd"]["checks"]) == 2


def test_a_failed_restart_names_the_drop_in_its_version_the_roots_and_containerds():
    plan = build(fresh_node())[0]
    assert plan["containerd"]["reason"] == (
        "/etc/containerd/conf.d/99-nvidia.toml (config version 2, as /etc/containerd/config.toml's; "
        "containerd 1.6.20~ds1) declares the nvidia runtime")


def test_an_engine_asked_for_but_not_installed_is_refused():
    observed = fresh_node()
    observed["engines_found"] = ["docker"]
    with pytest.raises(cre.RuntimeStateError, match="lists containerd, not installed on this host"):
        build(observed, engines=["containerd"])


def test_containerd_1_7_gets_cdi_and_docker_26_the_cdi_feature():
    observed = fresh_node()
    observed["containerd"]["version"] = "1.7.24~ds1"
    observed["docker"]["version"] = "26.1.5+dfsg1"
    observed["docker"]["info"] = dict(INFO_RUNC, server_version="26.1.5+dfsg1")

    plan, facts = build(observed)

    assert plan["docker"]["settings"]["features"] == {"cdi": True}
    assert plan["containerd"]["args"]["enable_cdi"] is True
    assert facts["cdi"] == {"enabled": True, "spec_dirs": ["/etc/cdi", "/var/run/cdi"]}


def rke2_node(dropin_text=None, generated=("runc", {"runc": None}, True), active=True):
    observed = fresh_node()
    observed.update(
        engines_found=[],
        docker=None,
        containerd={},
        rancher="rke2",
        kubelet_args=["--container-runtime-endpoint=unix:///run/k3s/containerd/containerd.sock"],
    )
    observed["rancher_state"] = {
        "unit": "rke2-agent.service",
        "active": active,
        "dropin_path": "/etc/rancher/rke2/config.yaml.d/90-gpunode-nvidia.yaml",
        "dropin_text": dropin_text,
        "config_before": {"token": "x"},
        "config_after": {},
        "generated_path": "/var/lib/rancher/rke2/agent/etc/containerd/config.toml",
        "generated": generated,
        "generated_version": 3,
        "stale": [],
    }
    return observed


def test_rke2_gets_the_default_runtime_option_and_a_restart():
    plan, facts = build(rke2_node())

    rancher = plan["rancher"]
    assert rancher["configure"] and rancher["restart"]
    assert rancher["dropin_text"].endswith("default-runtime: nvidia\n")
    assert rancher["unit"] == "rke2-agent.service"
    assert not plan["containerd"]["configure"]  # the generated file is never edited
    assert facts["engines"]["containerd"] == {
        "nvidia_runtime": True,
        "default_runtime": "nvidia",
        "managed_by": "rke2",
    }
    assert facts["kubelet_engine"] == "containerd"
    assert rancher["checks"][1]["command"] == [
        "cat",
        "/var/lib/rancher/rke2/agent/etc/containerd/config.toml",
    ]


def test_rke2_converged_needs_nothing_and_regenerates_when_it_lags():
    text = cre.rancher_dropin_text("nvidia")
    converged = rke2_node(dropin_text=text, generated=("nvidia", {"runc": None, "nvidia": BINARY}, True))
    converged["installed"] = {"nvidia-container-toolkit": "1.17.8-1"}
    converged.update(keyring_ok=True, sources_text=cre.sources_text(WANTED["repo_url"], WANTED["keyring"]))
    converged["cdi_specs"] = {"/etc/cdi/nvidia.yaml": "535.129.03"}
    assert not build(converged)[0]["changes"]
    lagging = copy.deepcopy(converged)
    lagging["rancher_state"]["generated"] = (
        "runc",
        {"runc": None, "nvidia": BINARY},
        True,
    )  # killed before the restart
    plan = build(lagging)[0]
    assert plan["rancher"]["restart"] and not plan["rancher"]["configure"]


def test_a_later_rke2_file_that_overrides_the_default_is_reported():
    observed = rke2_node()
    observed["rancher_state"]["config_after"] = {"default-runtime": "runc"}
    plan, facts = build(observed)
    assert any("which wins" in warning for warning in plan["warnings"])
    assert facts["engines"]["containerd"]["default_runtime"] == "runc"


# --- the module --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"engines": "podman"}, "engines must be 'auto' or a list"),
        ({"engines": ["docker", "crio"]}, "engines must be 'auto' or a list"),
        ({"repo_key_checksum": "deadbeef"}, "repo_key_checksum must look like sha256:<hex>"),
    ],
)
def test_module_refuses_bad_arguments(run_module, args, message):
    ok, result = run_module(nvidia_container_runtime_state, args)
    assert not ok and message in result["msg"]


def test_module_publishes_the_facts_and_the_plan(run_module, monkeypatch):
    observed = fresh_node()
    monkeypatch.setattr(crr.NodeReader, "read", lambda self: observed)

    ok, result = run_module(nvidia_container_runtime_state, {"version": "1.17.8-1"}, check_mode=True)

    assert ok and not result["changed"]
    assert result["plan"]["changes"]
    facts = result["ansible_facts"]["nvidia_container_runtime"]
    assert set(facts) == {"toolkit_version", "engines", "kubelet_engine", "cdi"}
    assert set(facts["cdi"]) == {"enabled", "spec_dirs"}
    for engine in facts["engines"].values():
        assert set(engine) == {"nvidia_runtime", "default_runtime", "managed_by"}




# --- a host with a container engine and no systemd (an image host's container) ---------------


@pytest.mark.parametrize(("active", "outdated", "changed", "service_manager", "expected"), [
    (True, False, True, True, (True, None)),           # written: restarted through systemd
    (True, True, False, True, (True, None)),           # older than its files: restarted
    (False, False, True, True, (False, None)),         # not running: it reads the file when it starts
    (False, False, True, False, (False, crs.NO_SERVICE_MANAGER)),  # no systemd: owed, never tried
    (False, True, False, False, (False, None)),        # nothing written: nothing to say
])
def test_an_engine_is_restarted_only_through_a_running_systemd(active, outdated, changed, service_manager,
                                                              expected):
    assert crs.engine_restart(active, outdated, changed, service_manager) == expected


def test_without_systemd_the_engines_configs_are_written_and_their_restart_is_only_reported():
    observed = fresh_node()
    observed["service_manager"] = False
    for engine in ("docker", "containerd"):  # systemctl answers nothing: no unit runs
        observed[engine]["active"] = False
    plan, _facts = build(observed)
    assert plan["docker"]["configure"] and plan["containerd"]["configure"]
    assert not plan["docker"]["restart"] and not plan["containerd"]["restart"]
    assert "docker: nvidia runtime (default); restart needed: no service manager" in plan["summary"]
    owed = [line for line in plan["summary"] if line.startswith("containerd: nvidia runtime")]
    assert owed and owed[0].endswith("; restart needed: no service manager")
    # the next run finds the files written: nothing to do, nothing tried
    again, _facts = build(converge(observed, plan))
    assert not again["changes"] and "restart_needed" not in again["docker"]


def refresh_node(spec, failed):
    """A converged node with toolkit 1.18.2 and its nvidia-cdi-refresh units, driver 580 loaded."""
    node = converge(fresh_node(), build(fresh_node())[0])
    node["installed"][cre.TOOLKIT] = "1.18.2-1"
    node.update(driver_version="580.95.05", cdi_specs={cre.CDI_REFRESH_SPEC: spec}, cdi_failed=failed)
    return node


@pytest.mark.parametrize(("spec", "failed", "why"), [
    # the driver changed: the spec names the old one
    ("libcuda.so.535.129.03", [], "does not describe the loaded driver 580.95.05"),
    # the path fired before the driver's userspace, StartLimitBurst hit: the spec stays old for good
    ("libcuda.so.580.95.05", list(cre.CDI_REFRESH_UNITS),
     "nvidia-cdi-refresh.service and nvidia-cdi-refresh.path failed: nothing refreshes"),
    ("libcuda.so.580.95.05", ["nvidia-cdi-refresh.path"], "nvidia-cdi-refresh.path failed"),
])
def test_a_stale_spec_or_failed_refresh_units_are_regenerated_reset_and_rearmed(spec, failed, why):
    observed = refresh_node(spec, failed)
    plan, _facts = build(observed, version="1.18.2-1")
    assert plan["changes"] and plan["cdi"]["action"] == "refresh"
    assert plan["cdi"]["path"] == "/var/run/cdi/nvidia.yaml"
    assert any(reason.startswith("CDI: ") and why in reason for reason in plan["reasons"]), plan["reasons"]
    assert "CDI spec regenerated, nvidia-cdi-refresh reset (/var/run/cdi/nvidia.yaml)" in plan["summary"]
    assert plan["cdi"]["checks"] == [{"command": ["systemctl", "is-active", "nvidia-cdi-refresh.path"],
                                      "expect": []}]
    again, _facts = build(converge(observed, plan), version="1.18.2-1")
    assert not again["changes"], again["reasons"]


def test_failed_refresh_units_wait_for_a_loaded_driver():
    observed = refresh_node(None, list(cre.CDI_REFRESH_UNITS))
    observed["driver_version"] = None
    plan, _facts = build(observed, version="1.18.2-1")
    assert plan["cdi"]["action"] is None and not plan["changes"]
    assert "CDI: no NVIDIA driver loaded: the CDI spec comes with the driver" in plan["notes"]


def test_without_systemd_the_cdi_spec_is_generated_not_refreshed_by_a_unit():
    # toolkit 1.18's nvidia-cdi-refresh is a systemd unit: nothing runs it on a host without systemd
    spec = cre.cdi_spec_plan((1, 18), {}, "570.133.20", service_manager=False)
    assert (spec["action"], spec["path"]) == ("generate", "/etc/cdi/nvidia.yaml")
    assert cre.cdi_spec_plan((1, 18), {}, "570.133.20")["action"] == "refresh"


def test_systemd_runs_the_host_when_it_booted_it():
    from ansible.module_utils.gpunode.host import systemd  # noqa: PLC0415

    assert systemd.booted(lambda path: path == "/run/systemd/system") is True
    assert systemd.booted(lambda path: False) is False


@pytest.mark.parametrize("image_build", [False, True])
def test_an_image_build_writes_the_engines_configs_and_restarts_nothing_nor_reads_the_driver(
        run_module, monkeypatch, image_build):
    # a Packer VM: systemd runs, Docker and containerd too, the build host's driver loaded
    observed = fresh_node()
    for engine in ("docker", "containerd"):
        observed[engine]["active"] = True
    observed["driver_version"] = "570.133.20"
    monkeypatch.setattr(crr.NodeReader, "read", lambda self: copy.deepcopy(observed))
    monkeypatch.setattr(crsc, "booted", lambda: True)
    args = {"version": "1.17.8-1", "image_build": image_build}
    ok, result = run_module(nvidia_container_runtime_state, args, check_mode=True)
    plan = result["plan"]
    assert ok and plan["docker"]["configure"] and plan["containerd"]["configure"]
    assert plan["docker"]["restart"] is plan["containerd"]["restart"] is (not image_build)
    assert plan["containerd"].get("restart_needed") == (crs.IMAGE_BUILD if image_build else None)
    assert (plan["cdi"]["action"] is None) is image_build


def test_an_image_build_plans_containerd_s_files_as_the_writing_module_does(run_module, monkeypatch):
    # molecule/bake: on a booted build VM the bake wrote containerd's files with SystemdCgroup (systemd is
    # PID 1); the check after the writes must find them converged, not plan them without it
    observed = fresh_node()
    containerd = observed["containerd"]
    written = containerd_plan(containerd["config_text"], containerd_version=containerd["version"],
                              default_config_text=containerd["defaults"], systemd_pid1=True,
                              dropin_path="/etc/containerd/conf.d/99-nvidia.toml", set_default=True,
                              enable_cdi=True)
    containerd.update(config_text=written["config_text"], dropin_text=written["dropin_text"])
    monkeypatch.setattr(crr.NodeReader, "read", lambda self: copy.deepcopy(observed))
    monkeypatch.setattr(crsc, "booted", lambda: True)
    ok, result = run_module(nvidia_container_runtime_state, {"version": "1.17.8-1", "image_build": True},
                            check_mode=True)
    assert ok and not result["plan"]["containerd"]["configure"], result["plan"]["reasons"]


@pytest.mark.parametrize(("image_build", "systemd_cgroup"), [(True, True), (False, False)])
def test_a_chroot_bake_plans_systemd_s_cgroup_driver_for_the_image_and_hands_it_to_the_writer(
        run_module, monkeypatch, image_build, systemd_cgroup):
    # a chroot or container build runs no systemd, but the image boots with it: SystemdCgroup = true, and
    # the writing module gets that value rather than deciding again from the build's PID 1; a host
    # without systemd that is not a bake keeps runc's cgroupfs
    observed = fresh_node()
    monkeypatch.setattr(crr.NodeReader, "read", lambda self: copy.deepcopy(observed))
    monkeypatch.setattr(crsc, "booted", lambda: False)
    args = {"version": "1.17.8-1", "image_build": image_build}
    ok, result = run_module(nvidia_container_runtime_state, args, check_mode=True)
    containerd = result["plan"]["containerd"]
    assert ok and containerd["configure"]
    assert containerd["args"]["systemd_cgroup"] is systemd_cgroup
