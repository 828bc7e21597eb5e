"""kube_scheduler: plans over real kubeadm manifests, scheduler configs, RKE1/RKE2 files."""

import json
import pathlib
import re

import pytest
from ansible.module_utils.gpunode.formats.yaml_load import safe_load
from ansible.module_utils.gpunode.scheduler import api as ka
from ansible.module_utils.gpunode.scheduler import config as ks
from ansible.module_utils.gpunode.scheduler import config_file as kf
from ansible.module_utils.gpunode.scheduler import manifest as km
from ansible.module_utils.gpunode.scheduler import rke as kr
from conftest import FIXTURES, shared_files

OWN = FIXTURES / "kube-scheduler"
MANIFEST = ka.DEFAULT_MANIFEST
CONFIG = ka.DEFAULT_CONFIG_PATH["kubeadm"]
GPUSHARE = {
    "url_prefix": "http://127.0.0.1:32766/gpushare-scheduler", "filter_verb": "filter", "bind_verb": "bind",
    "enable_https": False, "node_cache_capable": True, "ignorable": False,
    "managed_resources": [{"name": "aliyun.com/gpu-mem", "ignored_by_scheduler": False}],
}
NO_BIND = {**GPUSHARE, "bind_verb": ""}

# The test's own reading of what kube-scheduler serves, independent of the module's table.
SERVED = {"v1beta1": (19, 22), "v1beta2": (22, 27), "v1beta3": (23, 28), "v1": (25, 99)}
KSC_FIELDS = {"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "enableProfiling",
              "enableContentionProfiling", "percentageOfNodesToScore", "podInitialBackoffSeconds",
              "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive"}
INSECURE = {"healthzBindAddress", "metricsBindAddress"}
EXTENDER_FIELDS = {"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb",
                   "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources",
                   "ignorable"}


def check_ksc(data, minor):
    """Structural schema of a KubeSchedulerConfiguration as kube-scheduler 1.<minor> decodes it (strict)."""
    group, _, api = data["apiVersion"].partition("/")
    assert group == "kubescheduler.config.k8s.io"
    low, high = SERVED[api]
    assert low <= minor <= high, f"{api} is not served by 1.{minor}"
    assert data["kind"] == "KubeSchedulerConfiguration"
    allowed = KSC_FIELDS | (INSECURE if api in ("v1beta1", "v1beta2") else set())
    assert set(data) <= allowed, set(data) - allowed
    assert isinstance(data["clientConnection"]["kubeconfig"], str)
    assert data["clientConnection"]["kubeconfig"]
    for field in INSECURE & set(data):
        assert re.match(r"^[\d.]*:\d+$", data[field])
    binders = 0
    for extender in data.get("extenders") or []:
        assert set(extender) <= EXTENDER_FIELDS, set(extender) - EXTENDER_FIELDS
        assert isinstance(extender["urlPrefix"], str)
        for key in ("enableHTTPS", "nodeCacheCapable", "ignorable"):
            assert isinstance(extender.get(key, False), bool)
        for resource in extender.get("managedResources") or []:
            assert set(resource) <= {"name", "ignoredByScheduler"} and isinstance(resource["name"], str)
        binders += bool(extender.get("bindVerb"))
    assert binders <= 1


def validate_pod(data, minor):
    """The edited manifest against the Kubernetes OpenAPI Pod schema (strict; schemas from 1.25)."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    data = {k: v for k, v in data.items() if k != "status"}
    kubernetes_validate.validate(data, f"1.{max(minor, 25)}.0", strict=True)


def ours(data):
    return [e for e in data.get("extenders") or [] if e.get("urlPrefix") == GPUSHARE["url_prefix"]]


class FS(dict):
    """An in-memory file system for plan(): path -> text."""

    def read(self, path):
        return self.get(path)

    def apply(self, files):
        for path, (_, new) in files.items():
            if new is None:
                self.pop(path, None)
            else:
                self[path] = new


def params(version, state="present", **extra):
    base = {"flavor": "kubeadm", "kubernetes_version": version, "extender": GPUSHARE, "config_path": None,
            "kubeconfig": None, "manifest_path": None, "cluster_yml": None, "rke2_config": None,
            "state": state}
    base.update(extra)
    return base


def run(fs, version, **extra):
    result = ks.plan(params(version, **extra), fs.read)
    fs.apply(result["files"])
    return result


def minor_of(path, text):
    match = re.search(r"v1\.(\d+)", path.name) or re.search(r"kube-scheduler[-\w]*:v1\.(\d+)", text)
    return int(match.group(1))


def comments(text):
    return [line.strip() for line in text.splitlines() if line.strip().startswith("#")]


def args_of(text):
    data = safe_load(text)
    container = next(c for c in data["spec"]["containers"] if c["name"] == "kube-scheduler")
    return data, container, container.get("command", []) + container.get("args", [])


# ---------------------------------------------------------------- versions

@pytest.mark.parametrize(("version", "api"), [
    ("1.11.2", "Policy"), ("v1.18.16", "Policy"), ("1.19.0", "v1beta1"), ("1.21.14", "v1beta1"),
    ("1.22.17", "v1beta2"), ("1.23.0", "v1beta3"), ("v1.24.3", "v1beta3"), ("1.25.0", "v1"),
    ("v1.28.9+rke2r1", "v1"), ("v1.26.8-rancher1-1", "v1"), ("1.32", "v1"),
])
def test_preferred_api_is_served_by_that_version(version, api):
    assert ka.preferred_api(ka.parse_version(version)) == api
    if api != "Policy":
        minor = ka.parse_version(version)[1]
        assert SERVED[api][0] <= minor <= SERVED[api][1]


@pytest.mark.parametrize("bad", ["", "latest", "2.0.1", "one.two"])
def test_bad_version_is_refused(bad):
    with pytest.raises(ka.KubeSchedulerError, match="kubernetes_version"):
        ka.parse_version(bad)


# ---------------------------------------------------------------- kubeadm over real manifests

def paired_config(container_path, minor):
    """A real config file for a manifest already started with its own config."""
    shared = {p.name: p for p in shared_files("kube-scheduler")}
    if container_path.endswith(".json"):
        name = "gpushare-scheduler-policy-config.json" if minor < 23 else None
        if name is None:
            # tkestack points --config at a .json name; give it a served KSC
            name = "ksc-v1beta2-profiles-noderesources-scheduler-plugins.yaml"
    else:
        name = next(n for n, (lo, hi) in (
            ("ksc-v1beta1-extender-onuryilmaz.yaml", (19, 22)),
            ("gpushare-scheduler-policy-config.yaml", (22, 27)),
            ("ksc-v1beta3-profiles-nrt-scheduler-plugins.yaml", (23, 28)),
            ("ksc-v1-extender-zhengyansheng.yaml", (25, 99))) if lo <= minor <= hi)
    return shared[name].read_text(encoding="utf-8")


KUBEADM = [p for p in shared_files("kube-scheduler", "*.yaml")
           if p.name.startswith(("kubeadm-", "gpushare-config-", "MALFORMED-"))] + \
    sorted(OWN.glob("kubeadm-*.yaml"))


def make_fs(path):
    text = path.read_text(encoding="utf-8")
    fs = FS({MANIFEST: text})
    if path.name.startswith("MALFORMED"):
        return fs, text, None
    minor = minor_of(path, text)
    data, _container, args = args_of(text)
    for flag in ("--config", "--policy-config-file"):
        for arg in args:
            if arg.startswith(flag + "="):
                container_path = arg.split("=", 1)[1]
                source = km.host_path(data, 0, container_path)
                if source:
                    fs[source] = paired_config(container_path, minor) if path.parent != OWN else \
                        (OWN / "policy-v1-other-extender.json").read_text()
    return fs, text, minor


@pytest.mark.parametrize("path", KUBEADM, ids=lambda p: p.name)
def test_kubeadm_manifest_present_idempotent_absent(path):
    fs, original, minor = make_fs(path)
    before = dict(fs)
    if path.name.startswith("MALFORMED"):
        with pytest.raises(ka.KubeSchedulerError) as err:
            run(fs, "1.16.2")
        assert MANIFEST in str(err.value) and "not valid YAML" in str(err.value)
        assert fs == before
        return
    try:
        result = run(fs, f"1.{minor}.0")
    except ka.KubeSchedulerError as exc:
        # the only refusal in the corpus: --config whose mount has a relative mountPath
        assert "zhengyansheng" in path.name, exc
        assert "--config=/etc/kubernetes/scheduler-extender-config.yaml" in str(exc)
        assert "not an absolute path" in str(exc)
        assert fs == before
        return
    data, container, args = args_of(fs[MANIFEST])
    # every flag that was there is still there, in order, and exactly one config flag
    _, _, old_args = args_of(original)
    assert [a for a in args if a in old_args] == old_args
    config_flags = [a for a in args if a.startswith(("--config=", "--policy-config-file="))]
    assert len(config_flags) == 1
    container_path = config_flags[0].split("=", 1)[1]
    source = km.host_path(data, 0, container_path)
    assert source in fs, "the config file is mounted from the host and exists"
    old_data = safe_load(original)
    old_container = old_data["spec"]["containers"][0]
    for key in ("volumeMounts",):
        for mount in old_container.get(key) or []:
            assert mount in container[key]
    for volume in old_data["spec"].get("volumes") or []:
        assert volume in data["spec"]["volumes"]
    for key in ("livenessProbe", "startupProbe", "readinessProbe", "resources", "image"):
        assert container.get(key) == old_container.get(key)
    assert comments(original) == comments(fs[MANIFEST])
    validate_pod(data, minor)
    config = safe_load(fs[source])
    assert len(ours(config)) == 1
    if config["kind"] == "Policy":
        assert minor <= 22 and config_flags[0].startswith("--policy-config-file=")
        assert result["api_version"] == "Policy"
        assert ours(config)[0]["enableHttps"] is False
    else:
        check_ksc(config, minor)
        assert result["api_version"] == config["apiVersion"]
        assert config_flags[0].startswith("--config=")
    # idempotent
    assert ks.plan(params(f"1.{minor}.0"), fs.read)["files"] == {}
    # absent: the manifest is back byte for byte; a file we created is gone. A JSON file
    # whose layout an edit cannot keep is refused unless the operator allows a rewrite.
    before_absent = dict(fs)
    try:
        run(fs, f"1.{minor}.0", state="absent")
    except ka.KubeSchedulerError as exc:
        assert source.endswith(".json") and str(exc).startswith(source) and "allow_rewrite" in str(exc)
        assert fs == before_absent
        result = run(fs, f"1.{minor}.0", state="absent", allow_rewrite=True)
        assert any("re-written as a whole" in w for w in result["warnings"])
    assert fs[MANIFEST] == original
    if CONFIG not in before:
        assert CONFIG not in fs
    for other, _text in before.items():
        assert other in fs
        if other != MANIFEST:
            assert not ours(safe_load(fs[other]))
    assert ks.plan(params(f"1.{minor}.0", state="absent"), fs.read)["files"] == {}


def test_new_manifest_gets_flag_volume_and_mount_with_free_names():
    text = (OWN / "kubeadm-v1.29.2-commented.yaml").read_text()
    text = text.replace("name: localtime", "name: gpunode-scheduler-extender")  # a user volume took our name
    fs = FS({MANIFEST: text})
    run(fs, "1.29.2")
    data, container, args = args_of(fs[MANIFEST])
    assert args.count(f"--config={CONFIG}") == 1
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == CONFIG)
    volume = next(v for v in data["spec"]["volumes"] if v["name"] == mount["name"])
    assert mount["readOnly"] is True and mount["name"] == "gpunode-scheduler-extender-2"
    assert volume["hostPath"] == {"path": CONFIG, "type": "File"}
    assert "# only the local apiserver talks to us" in fs[MANIFEST]
    assert km.host_path(data, 0, CONFIG) == CONFIG


def test_port0_and_deprecated_flags_are_carried_into_a_new_config():
    fs = FS({MANIFEST: (OWN / "kubeadm-v1.21.14-port0.yaml").read_text()})
    result = run(fs, "1.21.14")
    config = safe_load(fs[CONFIG])
    check_ksc(config, 21)
    assert result["api_version"] == "kubescheduler.config.k8s.io/v1beta1"
    # kubernetes #96345: with --config, --port=0 alone no longer closes the insecure port
    assert config["healthzBindAddress"].endswith(":0")
    assert config["metricsBindAddress"].endswith(":0")
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["enableProfiling"] is False
    assert config["clientConnection"]["kubeconfig"] == "/etc/kubernetes/scheduler.conf"


def test_kubeconfig_flag_wins_over_default():
    text = (OWN / "kubeadm-v1.29.2-commented.yaml").read_text().replace(
        "--kubeconfig=/etc/kubernetes/scheduler.conf", "--kubeconfig=/etc/kubernetes/custom.conf")
    fs = FS({MANIFEST: text})
    run(fs, "1.29.2", kubeconfig="/somewhere/else.conf")
    assert safe_load(fs[CONFIG])["clientConnection"]["kubeconfig"] == "/etc/kubernetes/custom.conf"


def test_policy_in_a_mounted_directory_is_merged_on_the_host_path():
    policy = (OWN / "policy-v1-other-extender.json").read_text()
    fs = FS({MANIFEST: (OWN / "kubeadm-v1.16.15-policy-json.yaml").read_text(),
             "/srv/scheduler-policy/scheduler-policy.json": policy})
    manifest = fs[MANIFEST]
    result = run(fs, "1.16.15")
    assert result["api_version"] == "Policy"
    assert fs[MANIFEST] == manifest  # the scheduler's own flag is kept, nothing added
    policy = safe_load(fs["/srv/scheduler-policy/scheduler-policy.json"])
    assert [e["urlPrefix"] for e in policy["extenders"]] == ["http://127.0.0.1:10262/scheduler",
                                                             GPUSHARE["url_prefix"]]
    assert fs["/srv/scheduler-policy/scheduler-policy.json"].startswith("{\n  \"kind\"")


def test_policy_flag_on_123_is_refused_naming_it():
    text = (OWN / "kubeadm-v1.16.15-policy-json.yaml").read_text().replace("v1.16.15", "v1.23.17")
    fs = FS({MANIFEST: text, "/srv/scheduler-policy/scheduler-policy.json": "{}"})
    with pytest.raises(ka.KubeSchedulerError, match="--policy-config-file=/etc/kubernetes/policy"):
        run(fs, "1.23.17")
    assert fs[MANIFEST] == text


def test_foreign_file_at_config_path_is_not_taken_over():
    fs = FS({MANIFEST: (OWN / "kubeadm-v1.29.2-commented.yaml").read_text(), CONFIG: "something: else\n"})
    with pytest.raises(ka.KubeSchedulerError, match=f"{CONFIG}: exists"):
        run(fs, "1.29.2")


def test_config_in_static_pod_dir_is_refused():
    with pytest.raises(ka.KubeSchedulerError, match="static pod"):
        ks.plan(params("1.29.2", config_path="/etc/kubernetes/manifests/extender.yaml"), FS().read)


def test_settings_change_updates_our_entry_in_place():
    fs = FS({MANIFEST: (OWN / "kubeadm-v1.29.2-commented.yaml").read_text()})
    run(fs, "1.29.2")
    changed = {**GPUSHARE, "ignorable": True, "managed_resources": [
        {"name": "aliyun.com/gpu-mem", "ignored_by_scheduler": True}]}
    result = run(fs, "1.29.2", extender=changed)
    assert list(result["files"]) == [CONFIG]
    config = safe_load(fs[CONFIG])
    assert len(config["extenders"]) == 1
    assert config["extenders"][0]["ignorable"] is True
    assert config["extenders"][0]["managedResources"][0]["ignoredByScheduler"] is True


def test_kubernetes_upgrade_moves_our_file_to_a_served_api():
    fs = FS({MANIFEST: (OWN / "kubeadm-v1.21.14-port0.yaml").read_text()})
    run(fs, "1.21.14")
    fs[MANIFEST] = fs[MANIFEST].replace("v1.21.14", "v1.25.16")
    result = run(fs, "1.25.16")
    config = safe_load(fs[CONFIG])
    check_ksc(config, 25)
    assert result["api_version"] == "kubescheduler.config.k8s.io/v1"
    assert "healthzBindAddress" not in config


# ---------------------------------------------------------------- existing configuration files

CONFIGS = [p for p in shared_files("kube-scheduler") if p.name.startswith(("ksc-", "gpushare-scheduler-pol"))]
CONFIGS += [OWN / "ksc-v1beta2-portable-commented.yaml", OWN / "policy-v1-other-extender.json"]


@pytest.mark.parametrize("minor", [19, 22, 23, 25, 28, 32])
@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_merge_into_existing_config(path, minor):
    text = path.read_bytes().decode("utf-8")
    warnings = []
    try:
        new, api = kf.merge_config(str(path), text, version=(1, minor), extender=GPUSHARE,
                                   kubeconfig="/etc/kubernetes/scheduler.conf", warnings=warnings)
    except ka.KubeSchedulerError as exc:
        message = str(exc)
        assert message.startswith(str(path)) and message.endswith("left unchanged")
        data = safe_load(text)
        api_short = str(data.get("apiVersion")).rpartition("/")[2]
        assert (data["kind"] == "Policy" and minor >= 23) or api_short not in SERVED \
            or not SERVED[api_short][0] <= minor <= SERVED[api_short][1] or \
            any(e.get("bindVerb") for e in data.get("extenders") or [])
        return
    data = safe_load(new)
    old = safe_load(text)
    assert len(ours(data)) == 1
    others = [e for e in old.get("extenders") or [] if e.get("urlPrefix") != GPUSHARE["url_prefix"]]
    assert [e for e in data["extenders"] if e.get("urlPrefix") != GPUSHARE["url_prefix"]] == others
    for key in set(old) - {"extenders", "apiVersion", "clientConnection", *INSECURE}:
        assert data[key] == old[key], key
    if data["kind"] == "Policy":
        assert api == "Policy" and minor <= 22
    else:
        check_ksc(data, minor)
        assert api == data["apiVersion"]
        if old["clientConnection"].get("kubeconfig"):
            assert data["clientConnection"]["kubeconfig"] == old["clientConnection"]["kubeconfig"]
    if not path.name.endswith(".json"):
        assert comments(text) == comments(new)
        assert ("\r\n" in text) == ("\r\n" in new)
        assert not warnings
    again, _ = kf.merge_config(str(path), new, version=(1, minor), extender=GPUSHARE,
                               kubeconfig="/etc/kubernetes/scheduler.conf", warnings=[])
    assert again == new


def test_unknown_api_version_is_refused():
    path = next((p for p in shared_files("kube-scheduler") if "XVERSIONX" in p.name), None)
    text = path.read_text() if path else "apiVersion: kubescheduler.config.k8s.io/XVERSIONX\n" \
        "kind: KubeSchedulerConfiguration\n"
    with pytest.raises(ka.KubeSchedulerError, match="XVERSIONX"):
        kf.merge_config("/etc/x.yaml", text, version=(1, 29), extender=GPUSHARE, kubeconfig="k", warnings=[])


def crlf_two_extenders():
    path = next((p for p in shared_files("kube-scheduler") if "XVERSIONX" in p.name), None)
    if path:
        return path.read_bytes().decode().replace("XVERSIONX", "v1")
    return ("apiVersion: kubescheduler.config.k8s.io/v1\r\nkind: KubeSchedulerConfiguration\r\n"
            "clientConnection:\r\n  kubeconfig: /etc/kubernetes/scheduler.conf\r\nextenders:\r\n"
            "  - urlPrefix: \"https://gas:9001\"\r\n    filterVerb: \"scheduler/filter\"\r\n"
            "    bindVerb: \"scheduler/bind\"\r\n    weight: 1\r\n")


def test_a_second_binding_extender_is_refused():
    with pytest.raises(ka.KubeSchedulerError, match="only one binding extender"):
        kf.merge_config("/etc/x.yaml", crlf_two_extenders(), version=(1, 29), extender=GPUSHARE,
                        kubeconfig="k", warnings=[])


def test_crlf_file_keeps_crlf_and_other_extenders():
    text = crlf_two_extenders()
    new, _ = kf.merge_config("/etc/x.yaml", text, version=(1, 29), extender=NO_BIND, kubeconfig="k",
                             warnings=[])
    assert new.count("\n") == new.count("\r\n")
    data = safe_load(new)
    assert data["extenders"][:-1] == safe_load(text)["extenders"]
    assert "bindVerb" not in data["extenders"][-1]
    check_ksc(data, 29)
    back = kf.strip_config("/etc/x.yaml", new, NO_BIND, warnings=[])
    assert back == text


def test_unserved_api_with_plugins_is_refused_portable_one_is_converted():
    plugins = next((p for p in shared_files("kube-scheduler") if "v1beta2-profiles" in p.name), None)
    if plugins:
        with pytest.raises(ka.KubeSchedulerError, match="profiles"):
            kf.merge_config(str(plugins), plugins.read_text(), version=(1, 29), extender=GPUSHARE,
                            kubeconfig="k", warnings=[])
    text = (OWN / "ksc-v1beta2-portable-commented.yaml").read_text()
    new, api = kf.merge_config("/etc/x.yaml", text, version=(1, 29), extender=GPUSHARE, kubeconfig="k",
                               warnings=[])
    assert api == "kubescheduler.config.k8s.io/v1"
    check_ksc(safe_load(new), 29)
    assert comments(new) == comments(text)


def test_ksc_refused_before_119():
    text = (OWN / "ksc-v1beta2-portable-commented.yaml").read_text()
    with pytest.raises(ka.KubeSchedulerError, match=r"needs Kubernetes 1\.19"):
        kf.merge_config("/etc/x.yaml", text, version=(1, 18), extender=GPUSHARE, kubeconfig="k", warnings=[])


def test_open_insecure_port_blocks_conversion():
    text = "apiVersion: kubescheduler.config.k8s.io/v1beta1\nkind: KubeSchedulerConfiguration\n" \
        "clientConnection:\n  kubeconfig: /k\nhealthzBindAddress: 0.0.0.0:10251\n"
    with pytest.raises(ka.KubeSchedulerError, match="healthzBindAddress"):
        kf.merge_config("/etc/x.yaml", text, version=(1, 25), extender=GPUSHARE, kubeconfig="k", warnings=[])


# ---------------------------------------------------------------- RKE1

RKE1 = [p for p in shared_files("rke", "rke1-*")] + [OWN / "rke1-cluster-commented.yml"]


@pytest.mark.parametrize("path", RKE1, ids=lambda p: p.name)
def test_rke1_cluster_yml(path):
    text = path.read_text()
    fs = FS({"/rke/cluster.yml": text})
    result = run(fs, "1.26.8", flavor="rke", cluster_yml="/rke/cluster.yml")
    assert result["config_path"] == CONFIG
    assert result["api_version"] == "kubescheduler.config.k8s.io/v1"
    new = safe_load(fs["/rke/cluster.yml"])
    old = safe_load(text)
    assert new["services"]["scheduler"]["extra_args"]["config"] == CONFIG
    old_args = ((old.get("services") or {}).get("scheduler") or {}).get("extra_args") or {}
    assert {k: v for k, v in new["services"]["scheduler"]["extra_args"].items() if k != "config"} == old_args
    new.pop("services"), old.pop("services", None)
    assert new == old
    assert comments(text) == comments(fs["/rke/cluster.yml"])
    assert not result["warnings"]
    assert ks.plan(params("1.26.8", flavor="rke", cluster_yml="/rke/cluster.yml"), fs.read)["files"] == {}
    run(fs, "1.26.8", flavor="rke", cluster_yml="/rke/cluster.yml", state="absent")
    if path.name.startswith("rke1-cluster.yml-") or path.parent == OWN:
        assert safe_load(fs["/rke/cluster.yml"]) == safe_load(text) or \
            "services" not in safe_load(text)


def test_rke1_keeps_layout_and_absent_restores_bytes():
    text = (OWN / "rke1-cluster-commented.yml").read_text()
    fs = FS({"/rke/cluster.yml": text})
    run(fs, "v1.26.8-rancher1-1", flavor="rke", cluster_yml="/rke/cluster.yml")
    expected = "      v: 2\n      config: /etc/kubernetes/scheduler-extender-config.yaml\n"
    assert expected in fs["/rke/cluster.yml"]
    run(fs, "v1.26.8-rancher1-1", flavor="rke", cluster_yml="/rke/cluster.yml", state="absent")
    assert fs["/rke/cluster.yml"] == text


def test_rke1_old_version_uses_policy_flag_and_node_file():
    fs = FS({"/rke/cluster.yml": (OWN / "rke1-cluster-commented.yml").read_text()})
    run(fs, "1.17.17", flavor="rke", cluster_yml="/rke/cluster.yml")
    extra = safe_load(fs["/rke/cluster.yml"])["services"]["scheduler"]["extra_args"]
    assert extra["policy-config-file"] == CONFIG
    node = FS()
    result = run(node, "1.17.17", flavor="rke")
    assert result["api_version"] == "Policy"
    assert safe_load(node[CONFIG])["kind"] == "Policy"


def test_rke1_node_writes_config_with_rke_kubeconfig():
    node = FS()
    run(node, "1.26.8", flavor="rke")
    config = safe_load(node[CONFIG])
    check_ksc(config, 26)
    assert config["clientConnection"]["kubeconfig"] == "/etc/kubernetes/ssl/kubecfg-kube-scheduler.yaml"
    assert config["enableProfiling"] is False
    run(node, "1.26.8", flavor="rke", state="absent")
    assert CONFIG not in node


# ---------------------------------------------------------------- RKE2

RKE2 = [p for p in shared_files("rke", "rke2-*")] + [OWN / "rke2-config-commented.yaml"]
RKE2_CONFIG = "/etc/rancher/rke2/config.yaml"
RKE2_FILE = ka.DEFAULT_CONFIG_PATH["rke2"]


@pytest.mark.parametrize("path", RKE2, ids=lambda p: p.name)
def test_rke2_config(path):
    text = path.read_text()
    fs = FS({RKE2_CONFIG: text})
    result = run(fs, "v1.28.9+rke2r1", flavor="rke2")
    new = safe_load(fs[RKE2_CONFIG])
    old = safe_load(text)
    old_args = old.get("kube-scheduler-arg") or []
    assert new["kube-scheduler-arg"] == [*old_args, f"config={RKE2_FILE}"]
    assert new["kube-scheduler-extra-mount"] == [f"{RKE2_FILE}:{RKE2_FILE}:ro"]
    assert {k: v for k, v in new.items() if not k.startswith("kube-scheduler")} == \
        {k: v for k, v in old.items() if not k.startswith("kube-scheduler")}
    assert comments(text) == comments(fs[RKE2_CONFIG])
    config = safe_load(fs[RKE2_FILE])
    check_ksc(config, 28)
    assert config["clientConnection"]["kubeconfig"] == ka.DEFAULT_KUBECONFIG["rke2"]
    assert result["api_version"] == config["apiVersion"]
    assert ks.plan(params("1.28.9", flavor="rke2"), fs.read)["files"] == {}
    run(fs, "1.28.9", flavor="rke2", state="absent")
    assert fs[RKE2_CONFIG] == text
    assert RKE2_FILE not in fs


def test_rke2_without_config_file_creates_it():
    fs = FS()
    run(fs, "1.30.1", flavor="rke2")
    assert safe_load(fs[RKE2_CONFIG])["kube-scheduler-arg"] == [f"config={RKE2_FILE}"]


# ---------------------------------------------------------------- misc

def test_new_config_text_starts_with_marker_and_validates():
    text = kf.new_config("v1", (1, 29), GPUSHARE, "/etc/kubernetes/scheduler.conf")
    assert text.splitlines()[0] == ka.MARKER
    check_ksc(safe_load(text), 29)


def test_own_fixture_files_parse():
    for path in pathlib.Path(OWN).iterdir():
        assert safe_load(path.read_text()) is not None


def test_four_space_indented_manifest_keeps_its_style():
    path = next((p for p in shared_files("kube-scheduler") if "reindented" in p.name), None)
    if path is None:
        pytest.skip("../shared not present")
    lines = path.read_text().splitlines(keepends=True)
    # drop the user's own --config (its mount is broken); what is left is a 4-space manifest
    text = "".join(line for line in lines if "--config=" not in line)
    fs = FS({MANIFEST: text})
    run(fs, "1.25.0")
    new = fs[MANIFEST]
    assert f"        - --config={CONFIG}\n" in new
    assert f"        - mountPath: {CONFIG}\n          name: gpunode-scheduler-extender\n" in new
    assert f"    - hostPath:\n        path: {CONFIG}\n" in new
    assert comments(text) == comments(new)
    assert not new.endswith("\n") and not text.endswith("\n")
    run(fs, "1.25.0", state="absent")
    assert fs[MANIFEST] == text


def test_an_edit_that_cannot_keep_the_layout_is_refused_unless_rewrite_is_allowed():
    # a nested block sequence: yaml_edit cannot take one item out without touching its neighbour
    text = "# keep me\nouter:\n- - a\n  - b\n"
    ops = [("remove", ["outer", 0, 0])]
    with pytest.raises(ka.KubeSchedulerError, match=r"^/etc/x.yaml: cannot be edited exactly .*rewrite"):
        kf.edit_text("/etc/x.yaml", text, ops, warnings=[])
    warnings = []
    new = kf.edit_text("/etc/x.yaml", text, ops, rewrite=True, warnings=warnings)
    assert safe_load(new) == {"outer": [["b"]]}
    assert warnings == [
        "/etc/x.yaml: re-written as a whole (allow_rewrite): comments and layout were not kept"]


def test_rke_generated_empty_extra_args_stays_flow_and_comes_back():
    text = "services:\n  scheduler:\n    image: \"\"\n    extra_args: {}\n  kubelet: {}\n"
    fs = FS({"/rke/cluster.yml": text})
    run(fs, "1.26.8", flavor="rke", cluster_yml="/rke/cluster.yml")
    assert f"    extra_args: {{config: {CONFIG}}}\n" in fs["/rke/cluster.yml"]
    run(fs, "1.26.8", flavor="rke", cluster_yml="/rke/cluster.yml", state="absent")
    assert fs["/rke/cluster.yml"] == text


# ---------------------------------------------------------------- the version table's edges


@pytest.mark.parametrize("minor", range(29, 39))
def test_only_v1_is_served_from_129_through_the_tables_last_version(minor):
    assert ka.served_list((1, minor)) == "kubescheduler.config.k8s.io/v1"
    assert ka.version_warnings((1, minor)) == []


def test_a_version_newer_than_the_table_gets_v1_and_a_warning_naming_the_tables_last_version():
    fs = FS({MANIFEST: (OWN / "kubeadm-v1.29.2-commented.yaml").read_text()})
    result = run(fs, "1.39.0")
    assert result["api_version"] == "kubescheduler.config.k8s.io/v1"
    assert result["warnings"] == [
        "Kubernetes 1.39 is newer than gpunode's table of scheduler configuration versions (checked through "
        "1.38): writing kubescheduler.config.k8s.io/v1, the newest apiVersion known to be served"]


def test_rke_up_pending_compares_cluster_yml_with_the_last_applied_state():
    cluster = (OWN / "rke1-cluster-commented.yml").read_text()
    applied = {"currentState": {"rkeConfig": {"services": {"scheduler": {"extraArgs": {"v": "2"}}}}}}
    assert kr.rke_up_pending("/rke/cluster.yml", cluster, None) is None
    assert kr.rke_up_pending("/rke/cluster.yml", cluster, json.dumps(applied)) == []
    gated = cluster.replace("    fail_swap_on: false\n", "    fail_swap_on: false\n    extra_args:\n"
                            "      feature-gates: DynamicResourceAllocation=true\n")
    assert kr.rke_up_pending("/rke/cluster.yml", gated, json.dumps(applied)) == [
        "services.kubelet.extra_args.feature-gates is 'DynamicResourceAllocation=true' in /rke/cluster.yml, "
        "None in what the last rke up applied (/rke/cluster.rkestate)"]
    with pytest.raises(ka.KubeSchedulerError, match=r"^/rke/cluster.rkestate: not valid JSON"):
        kr.rke_up_pending("/rke/cluster.yml", cluster, "{")


def test_rke2_dropin_that_replaces_the_list_gets_the_flag_and_absent_takes_it_back():
    base = (OWN / "rke2-config-commented.yaml").read_text()
    dropin = "kube-scheduler-arg:\n  - v=4\n"
    extra = "kube-scheduler-arg+:\n  - profiling=false\n"
    fs = FS({RKE2_CONFIG: base, RKE2_CONFIG + ".d/50-a.yaml": dropin, RKE2_CONFIG + ".d/60-b.yml": extra})

    def listdir(path):
        return ["60-b.yml", "50-a.yaml", "notes.txt"] if path == RKE2_CONFIG + ".d" else []

    result = ks.plan(params("1.30.1", flavor="rke2"), fs.read, listdir)
    fs.apply(result["files"])
    dropped = safe_load(fs[RKE2_CONFIG + ".d/50-a.yaml"])
    assert dropped["kube-scheduler-arg"] == ["v=4", f"config={RKE2_FILE}"]
    assert fs[RKE2_CONFIG + ".d/60-b.yml"] == extra
    assert safe_load(fs[RKE2_CONFIG])["kube-scheduler-extra-mount"] == [f"{RKE2_FILE}:{RKE2_FILE}:ro"]
    assert ks.plan(params("1.30.1", flavor="rke2"), fs.read, listdir)["files"] == {}
    fs.apply(ks.plan(params("1.30.1", flavor="rke2", state="absent"), fs.read, listdir)["files"])
    assert fs[RKE2_CONFIG] == base and fs[RKE2_CONFIG + ".d/50-a.yaml"] == dropin and RKE2_FILE not in fs


# --- a GPU-sharing mode switch: HAMi's extender replaces gpushare's (and back) -------------------

HAMI = {
    "url_prefix": "http://127.0.0.1:31998", "filter_verb": "filter", "bind_verb": "bind",
    "enable_https": False, "node_cache_capable": True, "ignorable": False,
    "managed_resources": [{"name": "nvidia.com/gpu", "ignored_by_scheduler": True},
                          {"name": "nvidia.com/gpumem", "ignored_by_scheduler": True}],
    "replaces": [GPUSHARE["url_prefix"]],
}


@pytest.mark.parametrize("minor", [18, 29])
def test_switching_to_hami_takes_gpushares_extender_out_in_the_same_edit(minor):
    fmt = ka.preferred_api((1, minor))
    gpushare_only = kf.new_config(fmt, (1, minor), GPUSHARE, "/etc/kubernetes/scheduler.conf")
    new, _ = kf.merge_config("/etc/x.yaml", gpushare_only, version=(1, minor), extender=HAMI,
                             kubeconfig="k", warnings=[])
    data = safe_load(new)
    assert [e["urlPrefix"] for e in data["extenders"]] == [HAMI["url_prefix"]]
    assert ka.MARKER in new  # still gpunode's file: state=absent removes it
    again, _ = kf.merge_config("/etc/x.yaml", new, version=(1, minor), extender=HAMI, kubeconfig="k",
                               warnings=[])
    assert again == new  # converged
    back, _ = kf.merge_config("/etc/x.yaml", new, version=(1, minor),
                              extender=dict(GPUSHARE, replaces=[HAMI["url_prefix"]]), kubeconfig="k",
                              warnings=[])
    assert [e["urlPrefix"] for e in safe_load(back)["extenders"]] == [GPUSHARE["url_prefix"]]


def test_replacing_keeps_foreign_extenders():
    text = ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            "clientConnection:\n  kubeconfig: /etc/kubernetes/scheduler.conf\nextenders:\n"
            "  # telemetry-aware scheduling, not ours\n"
            "  - urlPrefix: \"https://tas:9001\"\n"
            "    prioritizeVerb: \"scheduler/prioritize\"\n    weight: 1\n")
    with_gpushare, _ = kf.merge_config("/etc/x.yaml", text, version=(1, 29), extender=GPUSHARE,
                                       kubeconfig="k", warnings=[])
    new, _ = kf.merge_config("/etc/x.yaml", with_gpushare, version=(1, 29), extender=HAMI, kubeconfig="k",
                             warnings=[])
    urls = [e["urlPrefix"] for e in safe_load(new)["extenders"]]
    assert GPUSHARE["url_prefix"] not in urls and HAMI["url_prefix"] in urls
    assert urls[:-1] == [e["urlPrefix"] for e in safe_load(text)["extenders"]]
    check_ksc(safe_load(new), 29)


def test_without_replaces_the_second_binding_extender_is_still_refused():
    gpushare_only = kf.new_config("v1", (1, 29), GPUSHARE, "k")
    with pytest.raises(ka.KubeSchedulerError, match="only one binding extender"):
        kf.merge_config("/etc/x.yaml", gpushare_only, version=(1, 29), extender=dict(HAMI, replaces=[]),
                        kubeconfig="k", warnings=[])


def test_absent_takes_out_the_replaced_extenders_too():
    """A mode without an extender in kube-scheduler (nvidia, HAMi's own scheduler) removes either one."""
    hami_only = kf.new_config("v1", (1, 29), HAMI, "k")
    none = dict(GPUSHARE, replaces=[HAMI["url_prefix"]])
    assert kf.strip_config("/etc/x.yaml", hami_only, none, warnings=[]) is None  # ours: the file goes
    gpushare_only = kf.new_config("v1", (1, 29), GPUSHARE, "k")
    assert kf.strip_config("/etc/x.yaml", gpushare_only, none, warnings=[]) is None


# --- HAMi's extender over HTTPS: it serves HAMi's admission webhook (issue 32) -----------------

# ExtenderTLSConfig's fields (k8s.io/kube-scheduler config/v1 types.go; the Policy API's
# ExtenderConfig spelled it tlsConfig too)
TLS_FIELDS = {"insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData"}
HAMI_HTTPS = {**HAMI, "url_prefix": "https://127.0.0.1:31998", "enable_https": True, "tls_insecure": True}


@pytest.mark.parametrize("minor", [18, 22, 29])
def test_hamis_https_extender_is_called_without_checking_its_certificate_as_its_chart_does(minor):
    """HAMi's chart (scheduler/configmap.yaml @ v2.10.0, commit 4707fb02c91c) calls the extender that
    serves its webhook with enableHTTPS true and tlsConfig insecure, in a Policy and a
    KubeSchedulerConfiguration alike."""
    fmt = ka.preferred_api((1, minor))
    new = safe_load(kf.new_config(fmt, (1, minor), HAMI_HTTPS, "/etc/kubernetes/scheduler.conf"))
    (entry,) = new["extenders"]
    assert entry["urlPrefix"] == "https://127.0.0.1:31998"
    assert entry["enableHttps" if fmt == ka.POLICY else "enableHTTPS"] is True
    assert entry["tlsConfig"] == {"insecure": True} and set(entry["tlsConfig"]) <= TLS_FIELDS
    if fmt != ka.POLICY:
        check_ksc(new, minor)


def test_the_earlier_http_hami_extender_becomes_the_https_one_in_place():
    """A file with HAMi's plain-HTTP extender (gpunode before the webhook came to the extender
    placement) gets the HTTPS one in its place (same managed resources), and then converges."""
    before = kf.new_config("v1", (1, 29), HAMI, "k")
    new, _ = kf.merge_config("/etc/x.yaml", before, version=(1, 29), extender=HAMI_HTTPS, kubeconfig="k",
                             warnings=[])
    data = safe_load(new)
    assert [(e["urlPrefix"], e.get("tlsConfig")) for e in data["extenders"]] == [
        ("https://127.0.0.1:31998", {"insecure": True})]
    check_ksc(data, 29)
    again, _ = kf.merge_config("/etc/x.yaml", new, version=(1, 29), extender=HAMI_HTTPS, kubeconfig="k",
                               warnings=[])
    assert again == new
    # and gpushare's, with the earlier URL among those it replaces, takes it out
    gpushare = dict(GPUSHARE, replaces=[HAMI_HTTPS["url_prefix"], HAMI["url_prefix"]])
    back, _ = kf.merge_config("/etc/x.yaml", before, version=(1, 29), kubeconfig="k", warnings=[],
                              extender=gpushare)
    assert [e["urlPrefix"] for e in safe_load(back)["extenders"]] == [GPUSHARE["url_prefix"]]


def test_tls_insecure_means_nothing_without_https():
    entry = ka.extender_entry(dict(GPUSHARE, tls_insecure=True), "v1")
    assert "tlsConfig" not in entry and entry["enableHTTPS"] is False
