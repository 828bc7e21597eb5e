"""What a ``kubeadm join`` does to the kubelet settings gpunode wrote, and what the next run says.

The join's kubelet-start phase writes /var/lib/kubelet/config.yaml from the cluster's kubelet-config
ConfigMap and /var/lib/kubelet/kubeadm-flags.env from the JoinConfiguration's nodeRegistration,
then (re)starts the kubelet
(https://kubernetes.io/docs/reference/setup-tools/kubeadm/generated/kubeadm_join_phase_kubelet-start);
/etc/default/kubelet (KUBELET_EXTRA_ARGS) and a ``--config-dir`` drop-in are not kubeadm's
(https://kubernetes.io/docs/setup/independent/kubelet-integration/). Each test converges a node's
gates, registration taint and label, does to kubeadm's two files what the join does, and runs the
module again in check mode: what gpunode wrote lives on, or the run says it writes it again, naming
the file; never a silent loss (docs/ROLES.md, "Join flows").
"""

import os
import pathlib

import kubelet_feature_gates
import pytest
import yaml
from test_kubelet_plan import kubeadm_node

TAINT = "readiness.k8s.io/gpunode-gpu-unvalidated:NoSchedule"
OURS = {"key": "readiness.k8s.io/gpunode-gpu-unvalidated", "effect": "NoSchedule"}
LABELS = {"nvidia.com/gpu.present": "true"}
GATES = {"DRAConsumableCapacity": True}
CONFIG = "/var/lib/kubelet/config.yaml"
FLAGS = "/var/lib/kubelet/kubeadm-flags.env"
EXTRA = "/etc/default/kubelet"
CONFIG_DIR = "/etc/kubernetes/kubelet.conf.d"
DROPIN = CONFIG_DIR + "/90-gpunode-feature-gates.conf"
# the kubelet-config ConfigMap's KubeletConfiguration, as the join writes it: no gpunode key
CONFIGMAP = (
    "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n"
    "clusterDNS:\n- 10.96.0.10\nclusterDomain: cluster.local\nfailCgroupV1: false\n"
)
# the command line of a kubelet with a --config-dir
DIR_ARGS = ["--config=@" + CONFIG, "--node-ip=10.0.0.7", "--config-dir=@" + CONFIG_DIR]


def config_dir_node(tmp_path):
    """kubeadm's layout, the kubelet's --config-dir given in /etc/default/kubelet (not kubeadm's)."""
    node = kubeadm_node(tmp_path, kubeadm_flags="--node-ip=10.0.0.7")
    node.write(EXTRA, f"KUBELET_EXTRA_ARGS=--config-dir={node.path(CONFIG_DIR)}\n")
    os.makedirs(node.path(CONFIG_DIR))
    return node


def join(node, kubeadm_args, kubelet_args):
    """What ``kubeadm join`` does to the files it owns, then the kubelet it (re)starts."""
    node.write(CONFIG, CONFIGMAP)
    node.write(FLAGS, f'KUBELET_KUBEADM_ARGS="{kubeadm_args}"\n')
    node.run(kubelet_args, started="after")


def converge(run_module, node, args, kubelet_args):
    """Write the settings, then the kubelet restarted on them; a second run changes nothing."""
    ok, first = run_module(kubelet_feature_gates, args)
    assert ok and first["changed"], first
    node.run(kubelet_args, started="after")
    ok, again = run_module(kubelet_feature_gates, args)
    assert ok and not again["changed"] and not again["restart_required"], again
    return first


@pytest.mark.parametrize(
    ("kubeadm_args", "label_file"),
    [("--node-ip=10.0.0.7", EXTRA), ("--node-ip=10.0.0.7 --node-labels=example.com/pool=gpu-a", FLAGS)],
    ids=["label-in-etc-default-kubelet", "label-merged-into-kubeadm-flags"],
)
def test_a_join_that_rewrites_kubeadms_files_is_named_by_the_next_check_run(run_module, tmp_path,
                                                                              kubeadm_args, label_file):
    """Gates and taint in config.yaml, the label in kubeadm's --node-labels when there is one: the
    join loses them, and the next check run says it writes them again, in the files the join wrote."""
    node = kubeadm_node(tmp_path, kubeadm_flags=kubeadm_args)
    kubelet_args = ["--config=@" + CONFIG, *kubeadm_args.split()]
    node.run(kubelet_args, started="before")
    args = node.args(gates=GATES, registration_taint=TAINT, registration_labels=LABELS,
                     validation_record=node.path("/var/lib/gpunode/validated.json"))
    first = converge(run_module, node, args, kubelet_args)
    assert first["registration_taint"]["where"] == node.path(CONFIG) + " registerWithTaints"
    assert first["registration_labels"]["where"].startswith(node.path(label_file) + " ")

    join(node, kubeadm_args, kubelet_args)
    ok, check = run_module(kubelet_feature_gates, args, check_mode=True, diff=True)
    assert ok and check["changed"] and check["restart_required"], check
    lost = sorted(node.path(path) for path in {CONFIG, label_file} - {EXTRA})  # the join kept EXTRA
    assert check["files"] == lost
    assert check["gates"] == GATES and check["location"] == node.path(CONFIG) + " featureGates"
    assert check["registration_taint"]["present"] and check["registration_labels"]["present"]
    assert node.read(CONFIG) == CONFIGMAP  # check mode: named, not written

    ok, rerun = run_module(kubelet_feature_gates, args)  # the node plays after the join: back again
    assert ok and rerun["files"] == lost, rerun
    config = yaml.safe_load(node.read(CONFIG))
    assert config["featureGates"] == GATES and config["registerWithTaints"] == [OURS]
    assert config["clusterDNS"] == ["10.96.0.10"]  # merged into the ConfigMap's, which stay
    assert "nvidia.com/gpu.present=true" in node.read(label_file)


def test_a_config_dir_dropin_and_the_extra_args_outlive_the_join(run_module, tmp_path):
    """A kubelet whose --config-dir comes from /etc/default/kubelet: gates and taint in gpunode's
    drop-in, the label in KUBELET_EXTRA_ARGS; the join writes neither, and nothing is left to do."""
    node = config_dir_node(tmp_path)
    node.run(DIR_ARGS, started="before")
    args = node.args(gates=GATES, registration_taint=TAINT, registration_labels=LABELS,
                     validation_record=node.path("/var/lib/gpunode/validated.json"))
    first = converge(run_module, node, args, DIR_ARGS)
    assert first["target"] == "config_dir" and node.path(CONFIG) not in first["files"], first
    assert first["registration_labels"]["where"] == node.path(EXTRA) + " KUBELET_EXTRA_ARGS --node-labels"
    kept = {path: node.read(path) for path in (DROPIN, EXTRA)}
    assert yaml.safe_load(kept[DROPIN])["registerWithTaints"] == [OURS]

    join(node, "--node-ip=10.0.0.7", DIR_ARGS)
    ok, check = run_module(kubelet_feature_gates, args, check_mode=True)
    assert ok and not check["changed"] and not check["restart_required"], check
    assert check["gates"] == GATES and check["registration_taint"]["present"]
    assert check["registration_labels"]["present"]
    assert {path: node.read(path) for path in kept} == kept


def test_settings_put_in_the_dropin_before_the_join_are_there_when_it_registers(run_module, tmp_path):
    """An image or a node before its join: kubeadm's unit installed, no config.yaml, no kubelet
    running, --config-dir in /etc/default/kubelet. The run writes the drop-in and the label; the
    join then starts the kubelet on them, and the check run after it finds nothing to do."""
    node = config_dir_node(tmp_path)
    os.remove(node.path(CONFIG))
    os.remove(node.path(FLAGS))
    args = node.args(gates=GATES, registration_taint=TAINT, registration_labels=LABELS,
                     validation_record=node.path("/var/lib/gpunode/validated.json"))
    ok, before = run_module(kubelet_feature_gates, args)
    assert ok and before["target"] == "config_dir", before
    assert before["files"] == sorted([node.path(EXTRA), node.path(DROPIN)])
    assert not os.path.exists(node.path(CONFIG))  # kubeadm's file is the join's to write

    join(node, "--node-ip=10.0.0.7", DIR_ARGS)
    ok, check = run_module(kubelet_feature_gates, args, check_mode=True)
    assert ok and not check["changed"] and not check["restart_required"], check
    assert check["gates"] == GATES and check["registration_taint"]["present"]
    assert check["registration_labels"]["present"]


@pytest.mark.parametrize("image_build", [True, False])
def test_a_bake_before_the_join_leaves_kubeadms_default_layout_alone_a_run_fails_naming_the_file(
        run_module, tmp_path, image_build):
    """kubeadm's unit installed in an image, no --config-dir, no config.yaml yet (the join writes it):
    an image build skips the kubelet with the reason and writes nothing; a run that is not a bake
    fails naming the file, as before."""
    node = kubeadm_node(tmp_path, kubeadm_flags="--node-ip=10.0.0.7")
    os.remove(node.path(CONFIG))
    before = {path: pathlib.Path(node.path(path)).read_text() for path in (EXTRA, FLAGS)}
    args = node.args(gates=GATES, registration_taint=TAINT, registration_labels=LABELS,
                     validation_record=node.path("/var/lib/gpunode/validated.json"), image_build=image_build)
    ok, result = run_module(kubelet_feature_gates, args)
    if not image_build:
        assert not ok and f"{node.path(CONFIG)}: does not exist" in result["msg"], result
        return
    assert ok and not result["changed"] and not result["restart_required"], result
    skipped = result["ansible_facts"]["kubelet_gpu"]["skipped"]
    assert skipped and "an image build before the join" in skipped[0] and node.path(CONFIG) in skipped[0]
    assert not os.path.exists(node.path(CONFIG))
    assert {path: pathlib.Path(node.path(path)).read_text() for path in before} == before
