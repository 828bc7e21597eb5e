"""GPU sharing: the NVIDIA device plugin's config (module_utils/gpunode/addons/device_plugin_config.py),
per-node configs and MIG reports through gpu_cluster_addons_plan, and HAMi's scheduler configuration
(module_utils/gpunode/addons/hami.py)."""

import copy
import pathlib

import gpu_cluster_addons_plan
import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.gpunode.addons import device_plugin_config as dpc
from ansible.module_utils.gpunode.addons import hami
from ansible.module_utils.gpunode.addons.cluster import GpuAddonsError
from ansible.module_utils.gpunode.formats.yaml_load import safe_load

V = "gpu_cluster_addons_device_plugin_config"
NAMED = "gpu_cluster_addons_device_plugin_configs.a100-ts"

TIME_SLICING = {
    "version": "v1",
    "flags": {"migStrategy": "none", "failOnInitError": True,
              "plugin": {"passDeviceSpecs": False, "deviceListStrategy": ["envvar", "cdi-annotations"],
                         "deviceIDStrategy": "uuid"}},
    "sharing": {"timeSlicing": {"renameByDefault": False, "failRequestsGreaterThanOne": True,
                                "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
}
MPS = {"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 10}]}}}
MIG_MIXED = {"version": "v1", "flags": {"migStrategy": "mixed"}}
UUID = "8e5ae5d1-7c1e-4d8c-b0a3-4e7d3e8b2f11"
# the examples of the plugin's README (v0.20.0), as users copy them
README_EXAMPLES = [
    TIME_SLICING,
    MPS,
    {"version": "v1", "sharing": {"timeSlicing": {"renameByDefault": True, "resources": [
        {"name": "nvidia.com/gpu", "replicas": 10, "devices": [0, 1, "GPU-" + UUID]},
        {"name": "nvidia.com/mig-1g.5gb", "replicas": 2, "devices": ["0:1", "MIG-" + UUID]},
        {"name": "nvidia.com/mig-2g.10gb", "rename": "gpu-2g", "replicas": 3, "devices": 2},
    ]}}},
    {"version": "v1", "flags": {"migStrategy": "single", "gfd": {"oneshot": False, "sleepInterval": "60s"}},
     "resources": {"gpus": [{"pattern": "*A100*", "name": "a100"}]}, "imex": {"channelIDs": [0]}},
]


def ts(**resource):
    config = copy.deepcopy(TIME_SLICING)
    config["sharing"]["timeSlicing"]["resources"][0].update(resource)
    return config


def with_key(path, value):
    config = copy.deepcopy(TIME_SLICING)
    *parents, last = path
    node = config
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return config


# (config, where the error points, what it says)
BAD = [
    (ts(replicas=1), "sharing.timeSlicing.resources[0].replicas", "must be >= 2"),
    (ts(replicas=0), "sharing.timeSlicing.resources[0].replicas", "must be >= 2"),
    (ts(replicas="4"), "sharing.timeSlicing.resources[0].replicas", "must be an integer"),
    (ts(replicas=True), "sharing.timeSlicing.resources[0].replicas", "must be an integer"),
    (ts(devices="some"), "sharing.timeSlicing.resources[0].devices", "only string it takes is 'all'"),
    (ts(devices=0), "sharing.timeSlicing.resources[0].devices", "must be > 0"),
    (ts(devices=["gpu0"]), "sharing.timeSlicing.resources[0].devices[0]", "is not a GPU index"),
    (ts(devices=[-1]), "sharing.timeSlicing.resources[0].devices[0]", "is not a GPU index"),
    (ts(name="nvidia.com/GPU"), "sharing.timeSlicing.resources[0].name", "lower-case"),
    (ts(name="x" * 60), "sharing.timeSlicing.resources[0].name", "longer than 63"),
    (ts(rename="Shared GPU"), "sharing.timeSlicing.resources[0].rename", "lower-case"),
    (ts(replica=4), "sharing.timeSlicing.resources[0].replica", "unknown key"),
    (with_key(["sharing", "timeSlicing", "resources"], []), "sharing.timeSlicing.resources",
     "non-empty list"),
    (with_key(["sharing", "timeSlicing", "resources"], [{"replicas": 2}]),
     "sharing.timeSlicing.resources[0]", "no name"),
    (with_key(["sharing", "timeSlicing", "resources"], [{"name": "gpu"}]), "sharing.timeSlicing.resources[0]",
     "no replicas"),
    (with_key(["sharing", "timeSlicing", "resources"], [{"name": "gpu", "replicas": 2},
                                                        {"name": "nvidia.com/gpu", "replicas": 3}]),
     "sharing.timeSlicing.resources", "more than once"),
    (with_key(["sharing", "timeSlicing", "renameByDefault"], "yes"), "sharing.timeSlicing.renameByDefault",
     "true or false"),
    (with_key(["sharing", "mps"], MPS["sharing"]["mps"]), "sharing", "one sharing method per config"),
    (with_key(["sharing", "timeslicing"], {}), "sharing.timeslicing", "unknown key"),
    (dict(MPS, flags={"migStrategy": "single"}), "flags.migStrategy", "MPS works with migStrategy none only"),
    (dict(MPS, flags={"migStrategy": "mixed"}), "flags.migStrategy", "MPS works with migStrategy none only"),
    (with_key(["flags", "migStrategy"], "all"), "flags.migStrategy",
     "'all' is not one of none, single, mixed"),
    (with_key(["flags", "failOnInitError"], "true"), "flags.failOnInitError", "true or false"),
    (with_key(["flags", "plugin", "deviceListStrategy"], "cdi"), "flags.plugin.deviceListStrategy",
     "'cdi' is not one of"),
    (with_key(["flags", "plugin", "deviceIDStrategy"], "serial"), "flags.plugin.deviceIDStrategy",
     "not one of"),
    (with_key(["flags", "plugin", "passDeviceSpec"], True), "flags.plugin.passDeviceSpec", "unknown key"),
    (with_key(["flags", "mig-strategy"], "none"), "flags.mig-strategy", "unknown key"),
    (with_key(["version"], "v2"), "version", "version v1 only"),
    (with_key(["sharing"], []), "sharing", "must be a mapping"),
    (with_key(["imex", "channelIDs"], [1]), "imex.channelIDs", "[] or [0]"),
    (with_key(["resources", "gpus"], [{"name": "a100"}]), "resources.gpus[0]", "pattern"),
    (with_key(["migStrategy"], "none"), "migStrategy", "unknown key"),
]


@pytest.mark.parametrize(("config", "where", "says"), BAD, ids=[f"{w}:{s}" for _, w, s in BAD])
def test_a_config_against_the_plugins_rules_fails_naming_the_key_path(config, where, says):
    with pytest.raises(GpuAddonsError) as err:
        dpc.plugin_configs({}, {"a100-ts": config})
    message = str(err.value)
    assert message.startswith(f"{NAMED}.{where}: ") or message.startswith(f"{NAMED}: "), message
    assert says in message
    with pytest.raises(GpuAddonsError, match=f"^{V}"):
        dpc.plugin_configs(config)


def test_the_briefs_example_error():
    with pytest.raises(GpuAddonsError) as err:
        dpc.plugin_configs({}, {"a100-ts": ts(replicas=1)})
    assert str(err.value) == f"{NAMED}.sharing.timeSlicing.resources[0].replicas: must be >= 2"


@pytest.mark.parametrize("config", README_EXAMPLES)
def test_the_plugins_own_examples_pass(config):
    resolved = dpc.plugin_configs(config)
    assert resolved["configs"]["default"] == config
    assert not resolved["named"]


def test_version_may_be_left_out_as_the_plugin_allows():
    assert dpc.plugin_configs({"sharing": MPS["sharing"]})["configs"]["default"]["version"] == "v1"


def test_named_configs_keep_the_default_and_refuse_bad_names():
    resolved = dpc.plugin_configs(MIG_MIXED, {"ts": TIME_SLICING, "mps": MPS})
    assert resolved["named"] and resolved["default"] == "default"
    assert list(resolved["configs"]) == ["default", "mps", "ts"]
    with pytest.raises(GpuAddonsError, match="valid label value"):
        dpc.plugin_configs({}, {"a100 ts": MPS})


# The device plugin chart's own shape: NVIDIA/k8s-device-plugin
# deployments/helm/nvidia-device-plugin/values.yaml @ v0.20.0 (commit 1b826acc6af3, the pinned
# version), its commented example of config.map (lines 6-19): entries are the config files' text,
# the one called default is the main config; config.default names another one.
CHART_CONFIG_MAP = {
    "default": "version: v1\nflags:\n  migStrategy: none",
    "mig-single": "version: v1\nflags:\n  migStrategy: single",
    "mig-mixed": "version: v1\nflags:\n  migStrategy: mixed",
}


def test_the_charts_config_map_with_a_default_entry_is_taken_as_it_is():
    resolved = dpc.plugin_configs({}, CHART_CONFIG_MAP)
    assert resolved["default"] == "default" and resolved["named"]
    assert sorted(resolved["configs"]) == ["default", "mig-mixed", "mig-single"]
    assert dpc.mig_strategy(resolved["configs"]["mig-single"]) == "single"
    assert resolved["configs"]["default"] == {"version": "v1", "flags": {"migStrategy": "none"}}
    assert dpc.host_config("gpu-01", "", resolved) == "default"


def test_the_charts_config_default_names_the_main_entry():
    configs = {k: v for k, v in CHART_CONFIG_MAP.items() if k != "default"}
    resolved = dpc.plugin_configs({}, configs, default_name="mig-single")
    assert resolved["default"] == "mig-single"
    assert sorted(resolved["configs"]) == ["mig-mixed", "mig-single"]  # no invented default entry
    assert dpc.host_config("gpu-01", "", resolved) == "mig-single"
    with pytest.raises(GpuAddonsError, match=r"^gpu_cluster_addons_device_plugin_config_default: 'mig-none' "
                                             r"is not an entry .*mig-mixed, mig-single"):
        dpc.plugin_configs({}, configs, default_name="mig-none")


def test_a_main_config_and_a_default_entry_are_refused_naming_both():
    with pytest.raises(GpuAddonsError, match=r"^gpu_cluster_addons_device_plugin_config and "
                                             r"gpu_cluster_addons_device_plugin_configs\.default both"):
        dpc.plugin_configs(MPS, CHART_CONFIG_MAP)
    with pytest.raises(GpuAddonsError, match=r"^gpu_cluster_addons_device_plugin_config and "
                                             r"gpu_cluster_addons_device_plugin_config_default \(mig-mixed\) "
                                             r"both"):
        dpc.plugin_configs(MPS, CHART_CONFIG_MAP, default_name="mig-mixed")
    with pytest.raises(GpuAddonsError, match=r"configs\.default is the main config: the shorthand"):
        dpc.plugin_configs({}, CHART_CONFIG_MAP, short={"replicas": 4})


def test_a_text_entry_that_is_not_yaml_names_its_entry():
    with pytest.raises(GpuAddonsError, match=r"^gpu_cluster_addons_device_plugin_configs\.bad: its text is"):
        dpc.plugin_configs({}, {"bad": "version: v1\nflags: [unclosed"})
    with pytest.raises(GpuAddonsError, match=r"configs\.ts\.sharing\.timeSlicing\.resources\[0\]\.replicas"):
        dpc.plugin_configs({}, {"ts": yaml.safe_dump({"sharing": {"timeSlicing": {"resources": [
            {"name": "nvidia.com/gpu", "replicas": 1}]}}})})


def test_config_and_shorthand_are_one_or_the_other():
    assert dpc.plugin_configs({}, short={"replicas": 4})["configs"]["default"] == dpc.shorthand(replicas=4)
    assert dpc.plugin_configs(MPS, short={"mig": "none", "replicas": 0})["configs"]["default"] == MPS
    with pytest.raises(GpuAddonsError, match="shorthand variables"):
        dpc.plugin_configs(MPS, short={"replicas": 4})


def test_a_host_naming_an_unknown_config_fails_naming_the_host():
    resolved = dpc.plugin_configs({}, {"ts": TIME_SLICING})
    assert dpc.host_config("gpu-01", "", resolved) == "default"
    assert dpc.host_config("gpu-01", "ts", resolved) == "ts"
    with pytest.raises(GpuAddonsError, match=r"^gpu-01: gpu_cluster_addons_device_plugin_config_name 'mps'.*"
                                             r"known: default, ts"):
        dpc.host_config("gpu-01", "mps", resolved)


def gpus(*mig):
    return {"devices": [{"address": f"0000:{i:02x}:00.0", "kind": "gpu", "mig_enabled": m}
                        for i, m in enumerate(mig)]}


@pytest.mark.parametrize(("facts", "strategy", "says"), [
    (gpus(True, True), "none", "advertised whole"),
    (gpus(True, False), "single", "plugin will refuse to start"),
    (gpus(False, False), "mixed", "enabled on no GPU"),
    (gpus(True, False), "mixed", None),
    (gpus(True, True), "single", None),
    (gpus(False), "none", None),
    ({"devices": [{"kind": "gpu"}]}, "single", None),  # the fact is optional: nothing to compare
])
def test_mig_state_against_the_strategy(facts, strategy, says):
    warnings = dpc.mig_report("hgx-1", facts, strategy)
    if says is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warnings[0].startswith("hgx-1: ") and says in warnings[0]


# --- through the plan module ------------------------------------------------------------

T4 = {"present": True, "gpu_count": 1, "devices": [{"address": "0000:00:1e.0", "kind": "gpu",
                                                     "name": "TU104GL [Tesla T4]"}]}
H100 = {"present": True, "gpu_count": 2, "devices": [
    {"address": f"0000:{i}:00.0", "kind": "gpu", "name": "GH100 [H100 SXM5 80GB]", "mig_enabled": True}
    for i in (18, 42)]}


def plan(run_module, **args):
    base = {"mode": "nvidia", "kubernetes_version": "1.33", "gpu_hosts": ["t4", "hgx"],
            "host_facts": {"t4": {"nvidia_gpu": T4}, "hgx": {"nvidia_gpu": H100}}}
    base.update(args)
    return run_module(gpu_cluster_addons_plan, base)


def test_per_host_config_becomes_the_node_label(run_module):
    ok, result = plan(run_module, device_plugin_configs={"ts": TIME_SLICING, "mig": MIG_MIXED, "mps": MPS},
                      device_plugin_config_names={"t4": "ts", "hgx": "mig"})
    assert ok, result
    labels = {n["node"]: n["labels"] for n in result["gpu_nodes"]}
    assert labels["t4"]["nvidia.com/device-plugin.config"] == "ts"
    assert labels["hgx"]["nvidia.com/device-plugin.config"] == "mig"
    assert labels["t4"]["nvidia.com/mps.capable"] is None
    assert result["nvidia_device_plugin"]["named"] and result["nvidia_device_plugin"]["mps"]
    files = {m["file"] for m in result["manifests"]["present"]}
    assert {"20-clusterrole-nvidia-device-plugin.yaml",
            "50-daemonset-nvidia-mps-control-daemon.yaml"} <= files


def test_the_charts_config_default_through_the_module_is_what_the_config_manager_falls_back_to(run_module):
    configs = {k: v for k, v in CHART_CONFIG_MAP.items() if k != "default"}
    ok, result = plan(run_module, device_plugin_configs=configs, device_plugin_config_default="mig-mixed",
                      device_plugin_config_names={"t4": "mig-single"})
    assert ok, result
    assert result["nvidia_device_plugin"]["default"] == "mig-mixed"
    assert result["nvidia_device_plugin_config"]["flags"]["migStrategy"] == "mixed"
    labels = {n["node"]: n["labels"] for n in result["gpu_nodes"]}
    assert labels["t4"]["nvidia.com/device-plugin.config"] == "mig-single"
    assert labels["hgx"]["nvidia.com/device-plugin.config"] is None  # the config-manager's DEFAULT_CONFIG


def test_mps_host_is_labelled_for_the_mps_daemon_and_default_hosts_drop_the_label(run_module):
    ok, result = plan(run_module, device_plugin_configs={"mps": MPS},
                      device_plugin_config_names={"t4": "mps"},
                      host_facts={"t4": {"nvidia_gpu": T4}, "hgx": {"nvidia_gpu": dict(H100, devices=[])}})
    assert ok, result
    labels = {n["node"]: n["labels"] for n in result["gpu_nodes"]}
    assert labels["t4"]["nvidia.com/mps.capable"] == "true"
    assert labels["hgx"]["nvidia.com/device-plugin.config"] is None  # the default: no label


def test_unknown_config_name_fails_before_anything_is_rendered(run_module):
    ok, result = plan(run_module, device_plugin_config_names={"hgx": "a100-ts"})
    assert not ok and result["msg"].startswith("hgx: gpu_cluster_addons_device_plugin_config_name 'a100-ts'")


def test_bad_config_fails_the_plan_with_the_key_path(run_module):
    ok, result = plan(run_module, device_plugin_configs={"a100-ts": ts(replicas=1)})
    assert not ok
    assert result["msg"] == f"{NAMED}.sharing.timeSlicing.resources[0].replicas: must be >= 2"


def test_mig_state_contradicting_the_strategy_is_a_warning(run_module, monkeypatch):
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: warned.append(msg))
    ok, _ = plan(run_module)  # default config: migStrategy none, the HGX has MIG on
    assert ok
    assert any(w.startswith("hgx: MIG is enabled on 0000:18:00.0, 0000:42:00.0") for w in warned), warned
    warned.clear()
    ok, _ = plan(run_module, nvidia_mig_strategy="mixed", host_facts={"hgx": {"nvidia_gpu": H100}},
                 gpu_hosts=["hgx"])
    assert ok and not warned


@pytest.mark.parametrize("mode", ["gpushare", "hami"])
def test_other_modes_remove_the_nvidia_config_labels(run_module, mode):
    ok, result = plan(run_module, mode=mode, device_plugin_configs={"ts": TIME_SLICING},
                      device_plugin_config_names={"t4": "ts"})
    assert ok
    labels = {n["node"]: n["labels"] for n in result["gpu_nodes"]}["t4"]
    assert labels["nvidia.com/device-plugin.config"] is None
    assert labels["gpu"] == ("on" if mode == "hami" else None)
    assert labels["gpushare"] == ("true" if mode == "gpushare" else None)


# --- HAMi -------------------------------------------------------------------------------


@pytest.mark.parametrize(("minor", "api"), [((1, 30), "kubescheduler.config.k8s.io/v1"),
                                             ((1, 23), "kubescheduler.config.k8s.io/v1beta3"),
                                             ((1, 20), "kubescheduler.config.k8s.io/v1beta1")])
def test_hami_extender_configuration_for_the_clusters_scheduler(minor, api):
    data = safe_load(hami.scheduler_config(minor, "http://127.0.0.1:31998"))
    assert data["apiVersion"] == api and data["kind"] == "KubeSchedulerConfiguration"
    assert "profiles" not in data  # the cluster's default profile
    (ext,) = data["extenders"]
    assert (ext["urlPrefix"], ext["filterVerb"], ext["bindVerb"]) == (
        "http://127.0.0.1:31998", "filter", "bind")
    assert ext["nodeCacheCapable"] is True and ext["enableHTTPS"] is False
    names = [r["name"] for r in ext["managedResources"]]
    assert names[:3] == ["nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"]
    assert all(r["ignoredByScheduler"] for r in ext["managedResources"])


def test_hami_own_scheduler_has_its_profile_and_a_policy_before_1_19():
    data = safe_load(hami.scheduler_config((1, 30), "http://127.0.0.1:8080", profile="hami-scheduler"))
    assert data["profiles"] == [{"schedulerName": "hami-scheduler"}]
    policy = safe_load(hami.scheduler_config((1, 18), "http://127.0.0.1:8080"))
    assert policy["kind"] == "Policy" and policy["extenders"][0]["enableHttps"] is False


def test_hami_extender_settings_suit_the_scheduler_module():
    settings = hami.extender("https://127.0.0.1:31998")
    assert set(settings) == {"url_prefix", "filter_verb", "bind_verb", "enable_https", "tls_insecure",
                             "node_cache_capable", "ignorable", "managed_resources"}
    assert settings["enable_https"] is settings["tls_insecure"] is True
    assert {"name": "nvidia.com/gpumem", "ignored_by_scheduler": True} in settings["managed_resources"]


def test_hami_plan_returns_both_placements(run_module):
    ok, result = plan(run_module, mode="hami", hami={"scheduler": "extender", "node_port": 31000})
    assert ok, result
    assert result["hami"]["scheduler"] == "extender" and result["hami"]["url_prefix"] == "https://127.0.0.1:31000"
    files = {m["file"] for m in result["manifests"]["present"]}
    assert "20-configmap-hami-kube-scheduler-extender.yaml" in files
    assert "20-configmap-hami-scheduler.yaml" in {m["file"] for m in result["manifests"]["absent"]}
    assert result["workloads"] == [{"kind": "Deployment", "name": "hami-scheduler"},
                                   {"kind": "DaemonSet", "name": "hami-device-plugin"}]
    ok, result = plan(run_module, mode="hami", hami={"scheduler": "sidecar"})
    assert not ok and "gpu_cluster_addons_hami_scheduler" in result["msg"]


WEBHOOK_FILE = "60-mutatingwebhookconfiguration-hami-webhook.yaml"
CERTGEN_FILES = {"50-job-hami-admission-create.yaml", "70-job-hami-admission-patch.yaml",
                 "20-role-hami-admission.yaml", "20-clusterrole-hami-admission.yaml"}


@pytest.mark.parametrize(
    ("scheduler", "certificate", "scheduler_name", "jobs"),
    [("deployment", "controller", "hami-scheduler", False), ("deployment", "job", "hami-scheduler", True),
     ("extender", "job", "default-scheduler", True), ("extender", "controller", "default-scheduler", False)],
)
def test_hami_webhook_files_follow_where_its_certificate_comes_from_in_both_placements(
        run_module, scheduler, certificate, scheduler_name, jobs):
    """HAMi's chart (scheduler/webhook.yaml @ v2.10.0) renders the webhook whatever
    scheduler.kubeScheduler.enabled says; the extender then serves HTTPS (deployment.yaml) and
    kube-scheduler calls it with tlsConfig insecure (configmap.yaml)."""
    ok, result = plan(run_module, mode="hami", hami={"scheduler": scheduler, "certificate": certificate})
    assert ok, result
    present = {m["file"] for m in result["manifests"]["present"]}
    absent = {m["file"] for m in result["manifests"]["absent"]}
    assert WEBHOOK_FILE in present and WEBHOOK_FILE not in absent
    assert (present >= CERTGEN_FILES, absent >= CERTGEN_FILES) == (jobs, not jobs)
    assert result["hami"]["webhook"] is True and result["hami"]["tls_secret"] == "hami-scheduler-tls"
    # the name the webhook writes into pods is that of a scheduler which calls HAMi's extender
    assert result["hami"]["scheduler_name"] == scheduler_name
    key = "own_scheduler_config" if scheduler == "deployment" else "kube_scheduler_config"
    entry = safe_load(result["hami"][key])["extenders"][0]
    assert entry["urlPrefix"].startswith("https://") and entry["enableHTTPS"] is True
    assert entry["tlsConfig"] == {"insecure": True}
    # leaving the mode takes every webhook file away
    ok, result = plan(run_module, mode="nvidia", hami={"scheduler": scheduler, "certificate": certificate})
    assert {WEBHOOK_FILE} | CERTGEN_FILES <= {m["file"] for m in result["manifests"]["absent"]}
    ok, result = plan(run_module, mode="hami", hami={"certificate": "vault"})
    assert not ok and "controller or job" in result["msg"]


@pytest.mark.controller(reason="renders the role's variables with Jinja2, which targets lack")
def test_the_scheduler_roles_hami_extender_is_the_rendered_one():
    """roles/gpushare_scheduler wires the same extender that gpu_cluster_addons renders for HAMi."""
    jinja2 = pytest.importorskip("jinja2")
    roles = pathlib.Path(__file__).resolve().parents[2] / "roles"
    variables = safe_load((roles / "gpushare_scheduler" / "vars" / "main.yml").read_text())
    defaults = safe_load((roles / "gpushare_scheduler" / "defaults" / "main.yml").read_text())
    addons = safe_load((roles / "gpu_cluster_addons" / "defaults" / "main.yml").read_text())
    url = defaults["gpushare_scheduler_hami_url_prefix"]
    assert url == f"https://127.0.0.1:{addons['gpu_cluster_addons_hami_node_port']}"
    assert addons["gpu_cluster_addons_hami_node_port"] == hami.NODE_PORT
    for prefix in (url, url.replace("https://", "http://")):
        role = {key: jinja2.Template(value).render(gpushare_scheduler_hami_url_prefix=prefix)
                if isinstance(value, str) else value
                for key, value in variables["__gpushare_scheduler_hami"].items()}
        wanted = hami.extender(prefix)
        for key in ("filter_verb", "bind_verb", "enable_https", "tls_insecure", "node_cache_capable",
                    "ignorable", "managed_resources"):
            assert str(role[key]) == str(wanted[key]), key
    # the plain-HTTP extender gpunode wrote before is taken out when gpushare's (or none) goes in
    assert f"http://127.0.0.1:{hami.NODE_PORT}" in variables["__gpushare_scheduler_hami_earlier_urls"]


@pytest.mark.parametrize(("config", "words"), [
    (TIME_SLICING, "time-slicing x4"), (MPS, "mps x10"), (MIG_MIXED, "mig mixed"), ({}, "whole GPUs"),
    ({"flags": {"migStrategy": "single"}, "sharing": TIME_SLICING["sharing"]}, "time-slicing x4, mig single"),
])
def test_what_a_node_offers_in_words(config, words):
    assert dpc.describe(config) == words


def test_plan_says_per_node_which_sharing_it_offers(run_module):
    ok, result = plan(run_module, device_plugin_configs={"ts": TIME_SLICING},
                      device_plugin_config_names={"t4": "ts"}, nvidia_mig_strategy="mixed")
    assert ok, result
    offers = {n["node"]: n["sharing"] for n in result["gpu_nodes"]}
    assert offers == {"t4": "time-slicing x4", "hgx": "mig mixed"}
    ok, result = plan(run_module, mode="hami")
    assert {n["sharing"] for n in result["gpu_nodes"]} == {"hami"}


def test_a_name_that_is_no_label_value_is_refused_even_when_yaml_made_it_a_number():
    with pytest.raises(GpuAddonsError, match=r"configs\.123: a name must be a valid label value"):
        dpc.plugin_configs({}, {123: MPS, "ts": TIME_SLICING})
