"""gpu_cluster_addons in render mode, through ansible-playbook, as users run it.

One ansible-playbook run renders every mode for Kubernetes 1.18 and 1.25-1.37
(tests/fixtures/addons/render-matrix.yml); a second run over the same
directories must change nothing and leave every byte as it was. Each object
is validated with kubernetes-validate in strict mode (unknown fields fail)
against the schemas of its version, then checked for what users rely on:
apiVersions the version serves, least privilege, the scheduler-extender wiring.
"""

import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml
from conftest import shared_path

try:  # a controller-side dependency Debian does not package: every test here is marked controller
    import kubernetes_validate
except ImportError:
    kubernetes_validate = None

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "tests" / "fixtures" / "addons" / "render-matrix.yml"
MODES = ["nvidia", "gpushare"]
# 1.25 to the newest release kubernetes-validate has schemas for (1.37; 1.38 is due 2026-12-16)
VERSIONS = [f"1.{minor}" for minor in range(25, 38)]
OLD = "1.18"

pytestmark = pytest.mark.controller(reason="renders the role's templates through ansible-playbook")
BINDIR = os.path.dirname(sys.executable)


def ansible_playbook(inventory, *args):
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", PATH=BINDIR + os.pathsep + os.environ["PATH"],
               ANSIBLE_CALLBACK_RESULT_FORMAT="json")  # one line per message
    proc = subprocess.run(["ansible-playbook", "-i", str(inventory), "--forks", "32", str(PLAYBOOK), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise AssertionError(
            f"ansible-playbook failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"
        )
    return proc


T4 = {"present": True, "gpu_count": 1, "models": ["TU104GL [Tesla T4]"],
      "devices": [{"address": "0000:00:1e.0", "kind": "gpu", "name": "TU104GL [Tesla T4]",
                   "vendor_id": "10de", "device_id": "1eb8"}]}


# what the container runtime role reports on a node whose containerd runs nvidia by default
NVIDIA_DEFAULT = {"kubelet_engine": "containerd",
                  "engines": {"containerd": {"nvidia_runtime": True, "default_runtime": "nvidia",
                                             "managed_by": "containerd"}}}


def inventory(path, cases, switch=None):
    """An inventory with one local host per case: name -> role variables."""
    common = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
              "gpu_cluster_addons_gpu_hosts": []}
    groups = {"addons_render": {"hosts": cases, "vars": common},
              "addons_gpu": {"hosts": {"t4-node": {"addons_nvidia_gpu": T4},
                                       "t4-nvidia-default": {"addons_nvidia_gpu": T4,
                                                             "addons_container_runtime": NVIDIA_DEFAULT}},
                             "vars": common}}
    if switch:
        groups["addons_switch"] = {"hosts": {"switch": {"gpu_cluster_addons_kubernetes_version": "1.30",
                                                        "gpu_cluster_addons_output_dir": str(switch)}},
                                   "vars": common}
    path.write_text(json.dumps({"all": {"children": groups}}))
    return path


def recap(stdout):
    """PLAY RECAP counts summed over hosts."""
    totals = {"ok": 0, "changed": 0, "failed": 0}
    line = re.compile(r"^\S+\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)", re.M)
    for match in line.finditer(stdout):
        totals["ok"] += int(match[1])
        totals["changed"] += int(match[2])
        totals["failed"] += int(match[3])
    assert totals["ok"], stdout[-2000:]
    return totals


def snapshot(directory):
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    return {str(p.relative_to(directory)): p.read_bytes() for p in files}


OPTIONS = {
    "nvidia": {
        "gpu_cluster_addons_nvidia_mig_strategy": "mixed",
        "gpu_cluster_addons_nvidia_time_slicing_replicas": 4,
        "gpu_cluster_addons_pod_runtime_class": "always",
        "gpu_cluster_addons_nvidia_device_plugin_image": "registry.example.com/mirror/k8s-device-plugin",
        "gpu_cluster_addons_nvidia_device_plugin_version": "v0.16.2",
    },
    "gpushare": {
        "gpu_cluster_addons_gpushare_memory_unit": "MiB",
        "gpu_cluster_addons_gpushare_query_kubelet": True,
        "gpu_cluster_addons_distribution": "rke",
    },
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """Run 1 renders every case; run 2 (check mode) re-renders a subset and a fresh directory."""
    out = tmp_path_factory.mktemp("addons")
    matrix, switch = out / "matrix", out / "switch"
    switch.mkdir()
    (switch / "kustomization.yaml").write_text("resources: []\n")  # not ours: must survive
    cases = {
        f"{mode}-{version}": {
            "gpu_cluster_addons_mode": mode,
            "gpu_cluster_addons_kubernetes_version": version,
            "gpu_cluster_addons_output_dir": str(matrix / f"{mode}-{version}"),
        }
        for mode in MODES for version in [OLD, *VERSIONS]
    }
    for mode, options in OPTIONS.items():
        cases[f"{mode}-options"] = dict(options, gpu_cluster_addons_mode=mode,
                                        gpu_cluster_addons_kubernetes_version="1.30",
                                        gpu_cluster_addons_output_dir=str(out / "options" / mode),
                                        gpu_cluster_addons_gpu_hosts=["t4-node"])
    cases["nvidia-default-runtime"] = {
        "gpu_cluster_addons_mode": "nvidia",
        "gpu_cluster_addons_kubernetes_version": "1.37",
        "gpu_cluster_addons_output_dir": str(out / "options" / "default-runtime"),
        "gpu_cluster_addons_gpu_hosts": ["t4-nvidia-default"],
    }
    first = ansible_playbook(inventory(out / "inventory-1.json", cases, switch))
    before = snapshot(matrix)
    again = {k: v for k, v in cases.items() if k.endswith(("-" + OLD, "-1.30", "-1.35"))}
    again["fresh"] = dict(cases["nvidia-1.30"], gpu_cluster_addons_output_dir=str(out / "fresh"))
    second = ansible_playbook(inventory(out / "inventory-2.json", again), "--check")
    return {"dir": matrix, "switch": switch, "options": out / "options", "fresh": out / "fresh",
            "first": first.stdout, "second": second.stdout, "before": before, "after": snapshot(matrix)}


def objects(directory):
    """(file name, object) for each YAML file, one object per file."""
    result = []
    for path in sorted(directory.glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert len(docs) == 1, f"{path.name}: {len(docs)} objects, expected one per file"
        result.append((path.name, docs[0]))
    assert result, f"{directory}: nothing rendered"
    return result


def pod_specs(objs):
    for name, obj in objs:
        if obj["kind"] in ("DaemonSet", "Deployment"):
            yield name, obj, obj["spec"]["template"]["spec"]


def affinity_terms(pod_spec):
    required = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return required["nodeSelectorTerms"]


def by_kind(objs, kind):
    return {obj["metadata"]["name"]: obj for _, obj in objs if obj["kind"] == kind}


# --- every version, strict schema ---------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_validates_strictly_for_its_version(rendered, mode, version):
    for name, obj in objects(rendered["dir"] / f"{mode}-{version}"):
        try:
            kubernetes_validate.validate(obj, f"{version}.0", strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{mode} {version} {name}: {exc.message} at {list(exc.path)}")


def test_strict_validation_would_catch_a_misspelt_field(rendered):
    """The validator is not a no-op: a typo in a rendered DaemonSet fails."""
    objs = dict(objects(rendered["dir"] / "nvidia-1.30"))
    ds = objs["50-daemonset-nvidia-device-plugin.yaml"]
    ds["spec"]["template"]["spec"]["tolerationz"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, "1.30.0", strict=True)


def test_each_mode_renders_its_objects_one_per_file(rendered):
    nvidia = {n for n, _ in objects(rendered["dir"] / "nvidia-1.30")}
    gpushare = {n for n, _ in objects(rendered["dir"] / "gpushare-1.30")}
    assert "50-daemonset-nvidia-device-plugin.yaml" in nvidia
    assert not any("gpushare" in n for n in nvidia)
    assert {"50-daemonset-gpushare-device-plugin.yaml", "50-deployment-gpushare-schd-extender.yaml",
            "60-service-gpushare-schd-extender.yaml", "20-clusterrole-gpushare-schd-extender.yaml",
            "20-clusterrole-gpushare-device-plugin.yaml"} <= gpushare
    assert not any("nvidia-device-plugin" in n for n in gpushare)
    for mode in MODES:
        for name, obj in objects(rendered["dir"] / f"{mode}-1.30"):
            # The file name says the kind, so a reviewer finds the object.
            assert name.split("-")[1] == obj["kind"].lower()


# --- determinism, idempotence -----------------------------------------------------


def test_rendering_twice_gives_identical_bytes_and_no_change(rendered):
    assert recap(rendered["first"])["changed"] > 0
    # Run 2 re-renders 1.18, 1.30 and 1.35 in check mode: the module compares
    # the new text with each file byte for byte, so "no change" means identical.
    changed = re.findall(r"^changed: \[(\S+)\]", rendered["second"], re.M)
    assert changed == ["fresh"], rendered["second"][-3000:]
    assert rendered["after"] == rendered["before"]


def test_switching_mode_removes_the_other_plugin_and_keeps_foreign_files(rendered):
    names = {p.name for p in rendered["switch"].iterdir()}
    assert "50-daemonset-gpushare-device-plugin.yaml" in names
    assert "50-daemonset-nvidia-device-plugin.yaml" not in names
    assert "20-configmap-nvidia-device-plugin-config.yaml" not in names
    assert "kustomization.yaml" in names
    assert "40-runtimeclass-nvidia.yaml" in names  # shared by both modes


# --- old clusters -------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_old_cluster_gets_apis_it_serves(rendered, mode):
    objs = objects(rendered["dir"] / f"{mode}-{OLD}")
    served = {"DaemonSet": "apps/v1", "Deployment": "apps/v1", "ClusterRole": "rbac.authorization.k8s.io/v1",
              "ClusterRoleBinding": "rbac.authorization.k8s.io/v1", "RuntimeClass": "node.k8s.io/v1beta1",
              "ServiceAccount": "v1", "ConfigMap": "v1", "Service": "v1"}
    for name, obj in objs:
        assert obj["apiVersion"] == served[obj["kind"]], name
    for name, _, spec in pod_specs(objs):
        # seccompProfile is a 1.19 field: 1.18 gets the annotation instead.
        assert "seccompProfile" not in json.dumps(spec), name
    for _, obj, _ in pod_specs(objs):
        annotations = obj["spec"]["template"]["metadata"].get("annotations", {})
        assert annotations.get("seccomp.security.alpha.kubernetes.io/pod") == "runtime/default"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("version", [OLD, "1.35"])
def test_no_deprecated_critical_pod_annotation_but_priority_classes(rendered, mode, version):
    for name, obj, spec in pod_specs(objects(rendered["dir"] / f"{mode}-{version}")):
        text = json.dumps(obj)
        assert "scheduler.alpha.kubernetes.io/critical-pod" not in text, name
        assert "extensions/v1beta1" not in text
        expected = "system-node-critical" if obj["kind"] == "DaemonSet" else "system-cluster-critical"
        assert spec["priorityClassName"] == expected, name


# --- least privilege ------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_containers_are_unprivileged_and_limited(rendered, mode):
    for name, _, spec in pod_specs(objects(rendered["dir"] / f"{mode}-1.30")):
        assert not spec.get("hostNetwork"), name
        assert not spec.get("hostPID") and not spec.get("hostIPC"), name
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        for ctr in spec["containers"]:
            sc = ctr["securityContext"]
            assert sc.get("privileged") in (None, False), name
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["capabilities"]["drop"] == ["ALL"] and not sc["capabilities"].get("add"), name
            assert sc["readOnlyRootFilesystem"] is True, name
            for kind in ("requests", "limits"):
                assert set(ctr["resources"][kind]) >= {"cpu", "memory"}, f"{name}: {kind}"
        host_paths = [v["hostPath"]["path"] for v in spec.get("volumes", []) if "hostPath" in v]
        assert host_paths in ([], ["/var/lib/kubelet/device-plugins"]), name


def test_extender_runs_as_non_root(rendered):
    objs = objects(rendered["dir"] / "gpushare-1.30")
    spec = by_kind(objs, "Deployment")["gpushare-schd-extender"]["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0


def test_nvidia_device_plugin_has_no_api_access(rendered):
    objs = objects(rendered["dir"] / "nvidia-1.30")
    assert not by_kind(objs, "ClusterRole") and not by_kind(objs, "Role")
    assert by_kind(objs, "ServiceAccount")["nvidia-device-plugin"]["automountServiceAccountToken"] is False
    spec = by_kind(objs, "DaemonSet")["nvidia-device-plugin-daemonset"]["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False


# What each gpushare component calls (see the comments in the ClusterRole
# templates); the rendered rules may not exceed it.
NEEDED = {
    "gpushare-device-plugin": {
        "nodes": {"get"}, "nodes/status": {"patch", "update"}, "pods": {"get", "list", "update", "patch"},
    },
    "gpushare-schd-extender": {
        "nodes": {"list", "watch"}, "pods": {"get", "list", "watch", "update"}, "pods/binding": {"create"},
        "bindings": {"create"}, "events": {"create", "patch"}, "configmaps": {"list", "watch"},
    },
}


def rules_by_resource(role):
    granted = {}
    for rule in role["rules"]:
        assert rule.get("apiGroups") == [""], rule
        assert "resourceNames" not in rule or rule["resourceNames"]
        for resource in rule["resources"]:
            granted.setdefault(resource, set()).update(rule["verbs"])
    return granted


@pytest.mark.parametrize("role", sorted(NEEDED))
def test_rbac_grants_no_more_than_the_component_calls(rendered, role):
    granted = rules_by_resource(by_kind(objects(rendered["dir"] / "gpushare-1.30"), "ClusterRole")[role])
    for resource, verbs in granted.items():
        assert "*" not in verbs and resource != "*", resource
        assert resource in NEEDED[role], f"{role} may not touch {resource}"
        assert verbs <= NEEDED[role][resource], f"{role}: {resource} {sorted(verbs - NEEDED[role][resource])}"
    assert "secrets" not in granted and "nodes/proxy" not in granted


@pytest.mark.parametrize(
    ("role", "upstream"),
    [("gpushare-device-plugin", "gpushare-device-plugin-rbac.yaml"),
     ("gpushare-schd-extender", "gpushare-schd-extender.yaml")],
)
def test_rbac_is_a_subset_of_upstreams(rendered, role, upstream):
    path = shared_path("fixtures", "manifests", upstream)
    theirs = next(d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "ClusterRole")
    ours = rules_by_resource(by_kind(objects(rendered["dir"] / "gpushare-1.30"), "ClusterRole")[role])
    upstream_rules = rules_by_resource(theirs)
    for resource, verbs in ours.items():
        assert verbs <= upstream_rules.get(resource, set()), f"{role}: {resource} wider than upstream"
    assert sum(map(len, ours.values())) < sum(map(len, upstream_rules.values()))


# --- wiring -----------------------------------------------------------------------------


def test_extender_service_matches_the_scheduler_configuration(rendered):
    objs = objects(rendered["dir"] / "gpushare-1.30")
    svc = by_kind(objs, "Service")["gpushare-schd-extender"]
    port = svc["spec"]["ports"][0]
    assert svc["spec"]["type"] == "NodePort"
    assert (port["port"], port["nodePort"]) == (12345, 32766)
    dep = by_kind(objs, "Deployment")["gpushare-schd-extender"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in svc["spec"]["selector"].items())
    ctr = dep["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "PORT", "value": "12345"} in ctr["env"]
    assert ctr["ports"][0]["containerPort"] == 12345 and ctr["ports"][0]["name"] == port["targetPort"]


def test_scheduler_config_fixture_points_at_our_node_port(rendered):
    text = shared_path("fixtures", "kube-scheduler", "gpushare-scheduler-policy-config.json").read_text()
    svc = by_kind(objects(rendered["dir"] / "gpushare-1.30"), "Service")["gpushare-schd-extender"]
    assert f":{svc['spec']['ports'][0]['nodePort']}/gpushare-scheduler" in text


def test_extender_is_not_pinned_to_the_master_label_alone(rendered):
    spec = by_kind(objects(rendered["dir"] / "gpushare-1.30"), "Deployment")["gpushare-schd-extender"]
    spec = spec["spec"]["template"]["spec"]
    assert "nodeSelector" not in spec  # an exact-value selector is what leaves upstream Pending
    terms = affinity_terms(spec)
    keys = {e["key"] for t in terms for e in t["matchExpressions"] if e["operator"] == "Exists"}
    assert "node-role.kubernetes.io/control-plane" in keys
    tolerated = {t["key"] for t in spec["tolerations"]}
    assert {"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"} <= tolerated


@pytest.mark.parametrize(("mode", "label"), [("nvidia", "nvidia.com/gpu.present"), ("gpushare", "gpushare")])
def test_device_plugins_run_on_labelled_gpu_nodes_and_tolerate_the_gpu_taint(rendered, mode, label):
    for _, obj, spec in pod_specs(objects(rendered["dir"] / f"{mode}-1.30")):
        if obj["kind"] != "DaemonSet":
            continue
        assert spec["nodeSelector"] == {label: "true"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
        mounts = {m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
        assert "/var/lib/kubelet/device-plugins" in mounts


def test_config_hash_annotation_follows_the_configmap(rendered):
    objs = objects(rendered["dir"] / "nvidia-1.30")
    config = by_kind(objs, "ConfigMap")["nvidia-device-plugin-config"]["data"]["config.yaml"]
    parsed = yaml.safe_load(config)
    assert parsed["version"] == "v1" and parsed["flags"]["migStrategy"] == "none"
    ds = by_kind(objs, "DaemonSet")["nvidia-device-plugin-daemonset"]
    annotation = ds["spec"]["template"]["metadata"]["annotations"]["gpunode.io/config-sha256"]
    assert annotation == hashlib.sha256(config.encode()).hexdigest()


@pytest.mark.parametrize(
    ("ours", "upstream", "kind"),
    [("nvidia", "nvidia-device-plugin-v0.17.0.yml", "DaemonSet"),
     ("gpushare", "gpushare-device-plugin-ds.yaml", "DaemonSet"),
     ("gpushare", "gpushare-schd-extender.yaml", "Deployment")],
)
def test_selectors_match_upstream_so_an_upstream_install_is_replaced_in_place(rendered, ours, upstream, kind):
    """spec.selector is immutable: a different one would make applying over upstream fail."""
    theirs = next(d for d in yaml.safe_load_all(shared_path("fixtures", "manifests", upstream).read_text())
                  if d and d.get("kind") == kind)
    mine = by_kind(objects(rendered["dir"] / f"{ours}-1.30"), kind)[theirs["metadata"]["name"]]
    assert mine["spec"]["selector"] == theirs["spec"]["selector"]
    assert mine["metadata"]["namespace"] == theirs["metadata"]["namespace"]


def test_default_nvidia_image_is_a_released_upstream_version(rendered):
    upstream = shared_path("fixtures", "manifests", "nvidia-device-plugin-v0.17.0.yml")
    theirs = yaml.safe_load(upstream.read_text())
    mine = by_kind(objects(rendered["dir"] / "nvidia-1.30"), "DaemonSet")["nvidia-device-plugin-daemonset"]
    assert mine["spec"]["template"]["spec"]["containers"][0]["image"] == (
        theirs["spec"]["template"]["spec"]["containers"][0]["image"])


# --- options ------------------------------------------------------------------------------


def test_options_render_valid_objects(rendered):
    for mode in MODES:
        for _, obj in objects(rendered["options"] / mode):
            kubernetes_validate.validate(obj, "1.30.0", strict=True)


def test_nvidia_options_reach_the_plugin(rendered):
    objs = objects(rendered["options"] / "nvidia")
    config = yaml.safe_load(by_kind(objs, "ConfigMap")["nvidia-device-plugin-config"]["data"]["config.yaml"])
    assert config["flags"]["migStrategy"] == "mixed"
    assert config["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    spec = by_kind(objs, "DaemonSet")["nvidia-device-plugin-daemonset"]["spec"]["template"]["spec"]
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["containers"][0]["image"] == "registry.example.com/mirror/k8s-device-plugin:v0.16.2"


def test_pods_ask_for_the_runtime_class_unless_every_kubelet_engine_runs_nvidia(rendered):
    """t4-node has no container-runtime facts (unknown: RuntimeClass); t4-nvidia-default runs nvidia."""
    unknown = by_kind(objects(rendered["options"] / "gpushare"), "DaemonSet")["gpushare-device-plugin-ds"]
    assert unknown["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia"
    default = by_kind(objects(rendered["options"] / "default-runtime"), "DaemonSet")
    assert "runtimeClassName" not in default["nvidia-device-plugin-daemonset"]["spec"]["template"]["spec"]
    assert "Device plugin pods use the default runtime: nvidia is the default runtime of every GPU node" in (
        rendered["first"])


def test_gpushare_options_reach_plugin_rbac_and_extender(rendered):
    objs = objects(rendered["options"] / "gpushare")
    spec = by_kind(objs, "DaemonSet")["gpushare-device-plugin-ds"]["spec"]["template"]["spec"]
    assert "--memory-unit=MiB" in spec["containers"][0]["command"]
    assert spec["hostNetwork"] is True  # asked for: the kubelet's /pods
    granted = rules_by_resource(by_kind(objs, "ClusterRole")["gpushare-device-plugin"])
    assert granted["nodes/proxy"] == {"get"}
    dep = by_kind(objs, "Deployment")["gpushare-schd-extender"]["spec"]["template"]["spec"]
    keys = [e["key"] for t in affinity_terms(dep) for e in t["matchExpressions"]]
    assert keys == ["node-role.kubernetes.io/controlplane"]
    etcd = {"key": "node-role.kubernetes.io/etcd", "operator": "Exists", "effect": "NoExecute"}
    assert etcd in dep["tolerations"]


@pytest.mark.parametrize("mode", MODES)
def test_gpu_node_labels_come_from_the_facts_via_hostvars(rendered, mode):
    """Rendering prints the labels each GPU node needs, from its ansible_facts.nvidia_gpu."""
    lines = re.findall(r'"kubectl label node t4-node --overwrite ([^"]*)"', rendered["first"])
    wanted = {"accelerator=nvidia-tesla-t4", "nvidia.com/gpu.count=1", "nvidia.com/gpu.present=true",
              "nvidia.com/gpu.product=Tesla-T4", "gpushare=true" if mode == "gpushare" else "gpushare-"}
    assert any(wanted <= set(line.split()) for line in lines), lines


def test_check_mode_writes_nothing(rendered):
    assert not rendered["fresh"].exists()
    assert recap(rendered["second"])["changed"] > 0  # the fresh directory would be created


def test_an_inventory_wide_become_does_not_reach_the_add_ons_play(tmp_path):
    """playbooks/cluster_addons.yml runs on the controller as the user, whatever all.vars says.

    The example inventory used to set ansible_become in all.vars, which reached the implicit
    localhost: kubernetes.core ran under sudo with root's kubeconfig (here: as nobody, via a
    sudo this machine does not even have).
    """
    inv = tmp_path / "hosts.yml"
    inv.write_text(json.dumps({"all": {"vars": {"ansible_become": True, "ansible_become_user": "nobody"},
                                       "children": {"gpu_nodes": {"hosts": {}}}}}))
    out = tmp_path / "rendered"
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=BINDIR + os.pathsep + os.environ["PATH"])
    proc = subprocess.run(
        ["ansible-playbook", "-i", str(inv), str(ROOT / "playbooks" / "cluster_addons.yml"),
         "-e", f"gpu_cluster_addons_output_dir={out}", "-e", "gpu_cluster_addons_kubernetes_version=1.37"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-1000:]
    assert (out / "50-daemonset-nvidia-device-plugin.yaml").is_file()
