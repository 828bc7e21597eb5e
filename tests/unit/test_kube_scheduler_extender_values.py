"""kube_scheduler_extender: every value that lands in kube-scheduler's files or flags is checked first.

The extender's URL, its verbs (URL path segments), its managed resources
(extended resource names), the configuration path (a --config flag value and
half of RKE2's "src:dst:ro" mount) and the kubeconfig: a hostile value fails
naming the option, the value and the rule, before the manifest is read or the
scheduler's processes are looked at, and no file changes.
"""

import kube_scheduler_extender as module
import pytest
import yaml
from conftest import FIXTURES
from test_k8s_names import CYRILLIC_A, HYPHEN, URL_BREAKERS, assert_refused, injected

MANIFEST = FIXTURES / "kube-scheduler" / "kubeadm-v1.29.2-commented.yaml"
URL = "http://127.0.0.1:32766/gpushare-scheduler"
CONFIG = "/etc/kubernetes/scheduler-extender-config.yaml"

HOSTILE = {
    "extender.url_prefix": [*injected(URL, URL_BREAKERS), "", "127.0.0.1:32766/gpushare-scheduler",
                            "ftp://127.0.0.1/x", "http://", "http:///gpushare", "http://h:99999/x",
                            "http://h:port/x", f"http://h{CYRILLIC_A}st/x"],
    "extender.filter_verb": [*injected("filter"), "", "filter/x", "filter?x=1", "..", f"filt{CYRILLIC_A}r"],
    "extender.bind_verb": [*injected("bind"), "bind/x", " "],
    "extender.managed_resources[0].name": [*injected("aliyun.com/gpu-mem"), "gpu-mem", "kubernetes.io/gpu",
                                           "aliyun.com/", f"aliyun.com/gpu{HYPHEN}mem", "Aliyun.com/gpu-mem",
                                           "aliyun.com/" + "m" * 64],
    "config_path": [*injected(CONFIG), "scheduler-extender-config.yaml", "/etc/kubernetes/a:b.yaml",
                    f"/etc/kubernetes/scheduler{HYPHEN}extender.yaml"],
    "kubeconfig": [*injected("/etc/kubernetes/scheduler.conf"), "scheduler.conf"],
    "health_url": ["https://127.0.0.1:10259/healthz\n", "127.0.0.1:10259"],
    "manifest_path": ["/etc/kubernetes/manifests/kube-scheduler.yaml\n", "kube-scheduler.yaml"],
}
CASES = [(option, value) for option, items in HOSTILE.items() for value in items]


def with_value(args, option, value):
    """``args`` with ``option`` (``a.b``, ``a.list[0].c``) set to ``value``."""
    args = yaml.safe_load(yaml.safe_dump(args))
    *parents, leaf = option.replace("[0]", ".0").split(".")
    node = args
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    node[leaf] = value
    return args


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A kubeadm manifest under tmp_path; every file read and every look at the node is recorded."""
    manifest = tmp_path / "manifests" / "kube-scheduler.yaml"
    manifest.parent.mkdir()
    manifest.write_bytes(MANIFEST.read_bytes())
    looked = []
    real_read = module.read_file

    def read_file(path):
        looked.append(path)
        return real_read(path)

    monkeypatch.setattr(module, "read_file", read_file)
    monkeypatch.setattr(module.Node, "schedulers", lambda self: looked.append("processes") or [])
    args = {"flavor": "kubeadm", "kubernetes_version": "1.29.2", "manifest_path": str(manifest),
            "config_path": str(tmp_path / "scheduler-extender-config.yaml"),
            "backup_dir": str(tmp_path / "backups"), "kubeadm_config": "skip", "health_url": "",
            "extender": {"url_prefix": URL, "managed_resources": [{"name": "aliyun.com/gpu-mem"}]}}
    return {"manifest": manifest, "looked": looked, "args": args, "dir": tmp_path}


@pytest.mark.parametrize(("option", "value"), CASES, ids=[f"{o}-{v!r}"[:70] for o, v in CASES])
def test_a_hostile_value_fails_naming_it_before_anything_is_read(run_module, node, option, value):
    ok, result = run_module(module, with_value(node["args"], option, value))

    assert not ok
    assert_refused(result, f"{option}: {value!r} is not ", value)
    assert node["looked"] == []
    assert node["manifest"].read_bytes() == MANIFEST.read_bytes()
    assert sorted(p.name for p in node["dir"].iterdir()) == ["manifests"]


def test_valid_edge_values_reach_the_configuration_as_given(run_module, node):
    extender = {"url_prefix": "https://gpushare-schd-extender.kube-system.svc:12345/a,b=c$d",
                "filter_verb": "filter.v2", "bind_verb": "", "enable_https": True,
                "managed_resources": [{"name": "aliyun.com/gpu-mem"}, {"name": "example.com/a_b-c.d"},
                                      {"name": "nvidia.com/mig-1g.10gb"}]}
    args = dict(node["args"], extender=extender, kubeconfig="/etc/kubernetes/scheduler+gpu@1.conf")
    ok, result = run_module(module, args)

    assert ok, result
    config = yaml.safe_load((node["dir"] / "scheduler-extender-config.yaml").read_text())
    entry = config["extenders"][0]
    assert entry["urlPrefix"] == extender["url_prefix"] and entry["filterVerb"] == "filter.v2"
    assert "bindVerb" not in entry
    wanted = [r["name"] for r in extender["managed_resources"]]
    assert [r["name"] for r in entry["managedResources"]] == wanted
    # the manifest's own --kubeconfig wins over the option (a valid value, accepted)
    assert config["clientConnection"]["kubeconfig"] == "/etc/kubernetes/scheduler.conf"
