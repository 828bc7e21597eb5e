"""kubeadm_config: gpunode's scheduler flag and volume in kubeadm's ClusterConfiguration."""

import json

import pytest
from ansible.module_utils.gpunode.formats.yaml_load import safe_load
from ansible.module_utils.gpunode.scheduler import kubeadm_config as kc
from ansible.module_utils.gpunode.scheduler.api import KubeSchedulerError
from conftest import FIXTURES

CONFIGMAPS = sorted((FIXTURES / "kubeadm-config").glob("configmap-*.json"))
# clusters whose kube-scheduler has no --config of its own (kubespray's has one: theirs to record)
PLAIN = [p for p in CONFIGMAPS if "kubespray" not in p.name]
CONFIG = "/etc/kubernetes/scheduler-extender-config.yaml"
OURS = {
    "flag": "config",
    "path": CONFIG,
    "source": CONFIG,
    "volume": {
        "name": "gpunode-scheduler-extender",
        "hostPath": CONFIG,
        "mountPath": CONFIG,
        "readOnly": True,
        "pathType": "File",
    },
}


def cluster_configuration(path):
    return kc.read_configmap(path.read_text())


def scheduler_as_kubeadm_writes_it(text):
    """The test's own reading of what `kubeadm upgrade` makes of ClusterConfiguration.scheduler.

    kubeadm's defaults for kube-scheduler, overridden and extended by extraArgs (a map, or a
    list of {name, value} from v1beta4 on), and each extraVolume as a hostPath volume with its
    mount (kubernetes/kubernetes cmd/kubeadm/app/phases/controlplane/manifests.go
    getSchedulerCommand, volumes.go getHostPathVolumesForTheControlPlane).
    """
    data = safe_load(text)
    scheduler = data.get("scheduler") or {}
    args = {
        "authentication-kubeconfig": "/etc/kubernetes/scheduler.conf",
        "authorization-kubeconfig": "/etc/kubernetes/scheduler.conf",
        "bind-address": "127.0.0.1",
        "kubeconfig": "/etc/kubernetes/scheduler.conf",
        "leader-elect": "true",
    }
    extra = scheduler.get("extraArgs") or {}
    pairs = [(a["name"], a["value"]) for a in extra] if isinstance(extra, list) else list(extra.items())
    args.update({name: str(value) for name, value in pairs})
    command = ["kube-scheduler"] + [f"--{name}={value}" for name, value in sorted(args.items())]
    mounts = {
        v["mountPath"]: (v["hostPath"], v.get("readOnly", False)) for v in scheduler.get("extraVolumes") or []
    }
    return command, mounts


@pytest.mark.parametrize("path", PLAIN, ids=lambda p: p.name)
def test_the_change_is_recorded_so_that_kubeadm_upgrade_writes_it_again(path):
    _configmap, text = cluster_configuration(path)
    ops, api = kc.record_ops(kc.CONFIGMAP, text, OURS, CONFIG)
    new = kc.edit(kc.CONFIGMAP, text, ops, warnings=[])
    command, mounts = scheduler_as_kubeadm_writes_it(new)
    assert f"--config={CONFIG}" in command
    assert mounts[CONFIG] == (CONFIG, True)
    # everything else is as it was, and a second look changes nothing
    old, data = safe_load(text), safe_load(new)
    assert {k: v for k, v in data.items() if k != "scheduler"} == {
        k: v for k, v in old.items() if k != "scheduler"
    }
    assert kc.record_ops(kc.CONFIGMAP, new, OURS, CONFIG) == ([], api)
    # state=absent gives the document back byte for byte
    back = kc.edit(kc.CONFIGMAP, new, kc.forget_ops(kc.CONFIGMAP, new, CONFIG)[0], warnings=[])
    assert back == text


@pytest.mark.parametrize("path", PLAIN, ids=lambda p: p.name)
def test_the_documents_own_extra_args_shape_is_kept(path):
    _configmap, text = cluster_configuration(path)
    ops, api = kc.record_ops(kc.CONFIGMAP, text, OURS, CONFIG)
    new = safe_load(kc.edit(kc.CONFIGMAP, text, ops, warnings=[]))
    args = new["scheduler"]["extraArgs"]
    if api.endswith(("v1beta4", "/v1")):
        assert {"name": "config", "value": CONFIG} in args
    else:
        assert args["config"] == CONFIG


def test_v1_is_written_like_v1beta4():
    _configmap, text = cluster_configuration(
        FIXTURES / "kubeadm-config" / "configmap-v1beta4-kubeadm-dryrun.json"
    )
    text = text.replace("kubeadm.k8s.io/v1beta4", "kubeadm.k8s.io/v1")
    ops, api = kc.record_ops(kc.CONFIGMAP, text, OURS, CONFIG)
    assert api == "kubeadm.k8s.io/v1"
    assert ("append", ["scheduler", "extraArgs"], {"name": "config", "value": CONFIG}) in ops


def test_an_operators_own_config_flag_is_theirs_to_record():
    _configmap, text = cluster_configuration(FIXTURES / "kubeadm-config" / "configmap-v1beta4-kubespray.json")
    theirs = {
        "flag": "config",
        "path": "/etc/kubernetes/kubescheduler-config.yaml",
        "source": "/etc/kubernetes/kubescheduler-config.yaml",
        "volume": None,
    }
    assert kc.record_ops(kc.CONFIGMAP, text, theirs, CONFIG)[0] == []


def test_another_recorded_config_flag_is_refused():
    _configmap, text = cluster_configuration(FIXTURES / "kubeadm-config" / "configmap-v1beta4-kubespray.json")
    ours_at_kubespray_path = dict(OURS, path="/etc/kubernetes/other.yaml")
    with pytest.raises(
        KubeSchedulerError,
        match=r"^kube-system/kubeadm-config \(ClusterConfiguration\): "
        r"scheduler.extraArgs has config=/etc/kubernetes/kubescheduler",
    ):
        kc.record_ops(kc.CONFIGMAP, text, ours_at_kubespray_path, "/etc/kubernetes/other.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("apiVersion: kubeadm.k8s.io/v1beta2\nkind: InitConfiguration\n", "kind 'InitConfiguration' is not"),
        (
            "apiVersion: kubeadm.k8s.io/v1alpha3\nkind: ClusterConfiguration\n",
            "apiVersion 'kubeadm.k8s.io/v1alpha3'",
        ),
        (
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n"
            "scheduler:\n  extraArgs:\n    config: x\n",
            "scheduler.extraArgs is not a list of {name, value}",
        ),
    ],
)
def test_what_kubeadm_would_not_read_is_refused(text, message):
    with pytest.raises(KubeSchedulerError, match=message):
        kc.record_ops(kc.CONFIGMAP, text, OURS, CONFIG)


def test_the_configmap_keeps_its_resource_version_for_a_safe_replace():
    configmap, text = cluster_configuration(CONFIGMAPS[0])
    body = json.loads(kc.write_configmap(configmap, text + "# x\n"))
    assert body["metadata"]["resourceVersion"] == configmap["metadata"]["resourceVersion"]
    assert body["data"]["ClusterConfiguration"].endswith("# x\n")
    assert configmap["data"]["ClusterConfiguration"] == text  # the original is not changed
    with pytest.raises(KubeSchedulerError, match="has no ClusterConfiguration key"):
        kc.read_configmap(json.dumps({"data": {}}))


@pytest.mark.parametrize("path", PLAIN, ids=lambda p: p.name)
def test_the_record_waits_until_the_scheduler_runs_the_change(path):
    """plan_record: nothing is written to kubeadm-config before the change is verified, then once."""
    _configmap, text = cluster_configuration(path)
    common = {"wiring": OURS, "config_path": CONFIG, "rewrite": False, "warnings": []}
    new, facts = kc.plan_record("record", "present", text, None, verified=False, **common)
    assert new is None and facts["state"] == "deferred"
    new, facts = kc.plan_record("record", "present", text, None, verified=True, **common)
    assert facts == {"state": "changed", "reason": None}
    assert f"--config={CONFIG}" in scheduler_as_kubeadm_writes_it(new)[0]
    assert kc.plan_record("record", "present", new, None, verified=True, **common) == (
        None, {"state": "recorded", "reason": None})
    back, facts = kc.plan_record("record", "absent", new, None, verified=True, **common)
    assert back == text and facts["state"] == "changed"


def test_an_unreadable_configmap_is_a_warning_unless_required():
    common = {"wiring": OURS, "config_path": CONFIG, "verified": True, "rewrite": False, "warnings": []}
    assert kc.plan_record("record", "present", None, "kubectl is not installed", **common) == (
        None, {"state": "unknown", "reason": "kubectl is not installed"})
    with pytest.raises(KubeSchedulerError, match="cannot be read: kubectl is not installed"):
        kc.plan_record("required", "present", None, "kubectl is not installed", **common)
    assert kc.plan_record("skip", "present", None, "not read", **common)[1]["state"] == "skipped"
