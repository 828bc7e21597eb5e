"""nvidia_gpu_validate's fabric check over the real nvidia-smi -q -x of 8x B200, 4x GB200 and 4x GB300
(../shared/fixtures/fabric/smi-qx-k8s-test-infra, NVIDIA/k8s-test-infra) on the simulated PCI bus the
fabric kind is read from; failed states as copies changed here, after the real fragments in
smi-q-fragments/ (GB200 Unhealthy; Insufficient Resources with a zero ClusterUUID)."""

import subprocess

import pytest
import yaml
from ansible.module_utils.gpunode.validate import run
from conftest import ROOT, load_file, shared_path

make_sysfs = load_file(ROOT / "tests" / "simnode" / "make_sysfs.py", "make_sysfs")
ZERO = "00000000-0000-0000-0000-000000000000"


class Host:
    def __init__(self, xml):
        self.xml = xml

    def which(self, name):
        return f"/usr/bin/{name}"

    def run(self, argv):
        assert argv[1:] == ["-q", "-x"], argv
        return 0, self.xml, ""


def capture(name):
    return shared_path("fixtures", "fabric", "smi-qx-k8s-test-infra", f"qx-{name}.xml").read_text()


def node(tmp_path, spec):
    if isinstance(spec, str):
        spec = yaml.safe_load((ROOT / "tests" / "simnode" / "specs" / f"{spec}.yml").read_text())
    make_sysfs.make_tree(make_sysfs.validate_spec(spec), str(tmp_path))
    return str(tmp_path / "sys")


def fabric(xml, sysfs_root):
    outcome = run.validate(Host(xml), {"nvidia_smi": "/usr/bin/nvidia-smi", "sysfs_root": sysfs_root,
                                       "checks": ["fabric"]})
    return [(r["gpu"], r["passed"], r["message"]) for r in outcome["results"]]


def changed(xml, gpu, old, new):
    """``xml`` with ``old`` replaced by ``new`` in the GPU of index ``gpu`` only."""
    head, *gpus = xml.split("\t<gpu id=")
    assert old in gpus[gpu], old
    gpus[gpu] = gpus[gpu].replace(old, new, 1)
    return "\t<gpu id=".join([head, *gpus])


def gb300_tray():
    spec = yaml.safe_load((ROOT / "tests" / "simnode" / "specs" / "gb200-tray.yml").read_text())
    for dev in spec["devices"]:
        if dev["device"] == "2941":
            dev.update(device="31c2", subsystem_device="21f1")
    return spec


# ---------------------------------------------------------------- the real readings pass


@pytest.mark.parametrize("name, spec, count, shown", [
    ("b200", "hgx-b200", 8, "status Success, health Healthy (nvlink5)"),
    ("gb200", "gb200-tray", 4, "cliqueId 2, clusterUuid 00000001-0000-0000-0000-000000000001 (mnnvl)"),
    ("gb300", gb300_tray(), 4, "cliqueId 32766, clusterUuid 00000001-0000-0000-0000-000000000001 (mnnvl)"),
])
def test_the_real_readings_pass(tmp_path, name, spec, count, shown):
    results = fabric(capture(name), node(tmp_path, spec))
    assert len(results) == count
    assert all(passed for _gpu, passed, _message in results), results
    assert all(message.startswith("fabric state Completed") and message.endswith(shown)
               for _gpu, _passed, message in results)


def test_b200_clique_0_and_a_zero_cluster_are_normal(tmp_path):
    xml = capture("b200")
    assert xml.count(f"<clusterUuid>{ZERO}</clusterUuid>") == 8 and xml.count("<cliqueId>0<") == 8
    assert all(passed for _gpu, passed, _m in fabric(xml, node(tmp_path, "hgx-b200")))


# ---------------------------------------------------------------- modified copies fail: GPU, field, value


def test_nvlink5_in_progress_names_what_it_needs(tmp_path):
    xml = capture("b200").replace("<state>Completed</state>", "<state>In Progress</state>")
    results = fabric(xml, node(tmp_path, "hgx-b200"))
    assert [passed for _g, passed, _m in results] == [False] * 8
    gpu, _passed, message = results[0]
    assert gpu.startswith("GPU 0 (0000:8f:00.0, ")
    assert message.startswith("fabric state In Progress, wanted Completed")
    assert all(word in message for word in ("NVLSM", "nvidia-fabricmanager", "ib_umad", "mlx5_ib"))


def test_in_progress_on_a_bridge_nvswitch_node_does_not_ask_for_nvlsm(tmp_path):
    xml = changed(capture("b200"), 0, "<state>Completed</state>", "<state>In Progress</state>")
    [first, *others] = fabric(xml, node(tmp_path, "hgx-h100"))
    assert first[1:] == (False, "fabric state In Progress, wanted Completed")
    assert all(passed for _g, passed, _m in others)


@pytest.mark.parametrize("old, new, field", [
    ("<status>Success</status>", "<status>Failure</status>", "fabric status Failure, wanted Success"),
    ("<status>Success</status>", "<status>Insufficient Resources</status>",
     "fabric status Insufficient Resources, wanted Success"),
    ("<summary>Healthy</summary>", "<summary>Unhealthy</summary>",
     "fabric health summary Unhealthy, wanted Healthy"),
    ("<clusterUuid>00000001-0000-0000-0000-000000000001</clusterUuid>", f"<clusterUuid>{ZERO}</clusterUuid>",
     f"clusterUuid {ZERO}: not in a multi-node NVLink domain"),
])
def test_a_gb200_gpu_in_a_failed_state_fails_alone(tmp_path, old, new, field):
    results = fabric(changed(capture("gb200"), 1, old, new), node(tmp_path, "gb200-tray"))
    failed = [(gpu, message) for gpu, passed, message in results if not passed]
    assert len(failed) == 1, results
    gpu, message = failed[0]
    assert gpu.startswith("GPU 1 (0000:3f:00.0, ") and field in message


def test_a_zero_cluster_on_every_gb200_gpu_fails_each(tmp_path):
    xml = capture("gb200").replace("00000001-0000-0000-0000-000000000001", ZERO)
    results = fabric(xml, node(tmp_path, "gb200-tray"))
    assert [passed for _g, passed, _m in results] == [False] * 4
    assert all(f"clusterUuid {ZERO}" in message for _g, _p, message in results)


def test_mismatched_cliques_fail_the_gpu_that_differs(tmp_path):
    xml = changed(capture("gb200"), 3, "<cliqueId>2</cliqueId>", "<cliqueId>3</cliqueId>")
    results = fabric(xml, node(tmp_path, "gb200-tray"))
    assert [passed for _g, passed, _m in results] == [True, True, True, False]
    gpu, _passed, message = results[3]
    assert gpu.startswith("GPU 3 (0000:b2:00.0, ")
    cluster = "clusterUuid 00000001-0000-0000-0000-000000000001"
    assert message == (f"cliqueId 3 of {cluster}, while the node's other GPUs have cliqueId 2 of {cluster} "
                       "(one per node)")


def test_a_fabric_n_a_is_not_read_nor_failed(tmp_path):
    xml = capture("b200").replace("<state>Completed</state>", "<state>N/A</state>")
    results = fabric(xml, str(tmp_path / "no-such-sysfs"))
    assert {(passed, message) for _g, passed, message in results} == {
        (None, "not an NVSwitch system (fabric state N/A)")}


# ---------------------------------------------------------------- the state the closing table shows


def state(xml, sysfs_root, checks=("fabric",)):
    return run.validate(Host(xml), {"nvidia_smi": "/usr/bin/nvidia-smi", "sysfs_root": sysfs_root,
                                    "checks": list(checks)})["fabric"]


@pytest.mark.parametrize("name, spec, xml, shown", [
    ("b200", "hgx-b200", lambda xml: xml, "Completed"),
    ("b200", "hgx-b200",
     lambda xml: changed(xml, 0, "<state>Completed</state>", "<state>In Progress</state>"), "In Progress"),
    ("gb200", "gb200-tray", lambda xml: changed(xml, 1, "<status>Success</status>",
                                                "<status>Insufficient Resources</status>"),
     "Completed (Insufficient Resources)"),
    ("b200", "hgx-b200", lambda xml: xml.replace("<state>Completed</state>", "<state>N/A</state>"), None),
])
def test_the_validation_tells_the_fabrics_state_the_gpus_report(tmp_path, name, spec, xml, shown):
    assert state(xml(capture(name)), node(tmp_path, spec)) == shown


def test_no_fabric_state_without_the_fabric_check(tmp_path):
    assert state(capture("b200"), node(tmp_path, "hgx-b200"), checks=("persistence",)) is None


# ------------------------------------------------------- the clique gpu_validate labels the Node with


def clique(xml, sysfs_root):
    return run.validate(Host(xml), {"nvidia_smi": "/usr/bin/nvidia-smi", "sysfs_root": sysfs_root,
                                    "checks": ["fabric"]})["clique"]


def test_a_trays_clique_is_its_cluster_and_clique_as_gpu_feature_discovery_writes_it(tmp_path):
    # NVIDIA/k8s-device-plugin internal/lm/imex.go: "<clusterUUID>.<cliqueID>" over the attached GPUs
    assert clique(capture("gb200"), node(tmp_path / "gb200", "gb200-tray")) == \
        "00000001-0000-0000-0000-000000000001.2"
    assert clique(capture("gb300"), node(tmp_path / "gb300", gb300_tray())) == \
        "00000001-0000-0000-0000-000000000001.32766"


def test_no_clique_for_an_hgx_a_fabric_not_completed_or_gpus_that_disagree(tmp_path):
    root = node(tmp_path / "b200", "hgx-b200")
    assert clique(capture("b200"), root) is None  # the zero cluster UUID of an HGX: not attached
    tray, xml = node(tmp_path / "tray", "gb200-tray"), capture("gb200")
    # one GPU not attached (its fabric still in progress): the others still name the clique
    assert clique(changed(xml, 1, "<state>Completed</state>", "<state>In Progress</state>"), tray) == \
        "00000001-0000-0000-0000-000000000001.2"
    assert clique(changed(xml, 1, "<cliqueId>2</cliqueId>", "<cliqueId>3</cliqueId>"), tray) is None
    every = xml.replace("<state>Completed</state>", "<state>In Progress</state>")
    assert clique(every, tray) is None


# ------------------------------------------------------- the simulated nodes answer as the readings do

STUB_SMI = ROOT / "tests" / "simnode" / "fakes" / "driver" / "bin" / "nvidia-smi"


def simulated_smi(tmp_path, spec, fabric_manager_active):
    """-q -x of the simulated node's nvidia-smi (the driver loaded), its systemctl answering whether the
    fabric manager stand-in runs."""
    sim, bin_dir = tmp_path / "sim", tmp_path / "bin"
    node(sim, spec)
    (sim / "sys/module/nvidia").mkdir(parents=True)
    (sim / "sys/module/nvidia/version").write_text("590.48.01\n")
    (sim / "proc/driver/nvidia").mkdir(parents=True)
    (sim / "proc/driver/nvidia/version").write_text("NVRM version: 590.48.01\n")
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(f"#!/bin/sh\nexit {0 if fabric_manager_active else 3}\n")
    smi = bin_dir / "nvidia-smi"
    smi.write_text(STUB_SMI.read_text().replace("@VERSION@", "590.48.01").replace(
        ". /etc/gpunode-sim/driver-fakes.conf", f"SIM_ROOT={sim}"))
    for program in (smi, bin_dir / "systemctl"):
        program.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    xml = subprocess.run([str(smi), "-q", "-x"], env=env, check=True, capture_output=True, text=True).stdout
    return xml, str(sim / "sys")


def test_the_simulated_b200_reaches_completed_only_once_its_fabric_manager_runs(tmp_path):
    xml, sysfs = simulated_smi(tmp_path / "before", "hgx-b200", fabric_manager_active=False)
    assert all(not passed and "In Progress" in message and "NVLSM" in message
               for _, passed, message in fabric(xml, sysfs)), fabric(xml, sysfs)
    xml, sysfs = simulated_smi(tmp_path / "after", "hgx-b200", fabric_manager_active=True)
    assert all(passed for _, passed, _ in fabric(xml, sysfs)), fabric(xml, sysfs)
    assert f"<clusterUuid>{ZERO}</clusterUuid>" in xml and "<cliqueId>0</cliqueId>" in xml


def test_the_simulated_tray_reports_the_switch_sides_fabric_from_its_spec(tmp_path):
    spec = yaml.safe_load((ROOT / "tests" / "simnode" / "specs" / "gb200-tray.yml").read_text())
    xml, sysfs = simulated_smi(tmp_path, spec, fabric_manager_active=False)
    assert all(passed for _, passed, _ in fabric(xml, sysfs)), fabric(xml, sysfs)
    outcome = run.validate(Host(xml), {"nvidia_smi": "/usr/bin/nvidia-smi", "sysfs_root": sysfs,
                                       "checks": ["fabric"]})
    assert outcome["clique"] == f"{spec['fabric']['cluster_uuid']}.{spec['fabric']['clique_id']}"
    spec["fabric"].update(status="Insufficient Resources", cluster_uuid=ZERO, clique_id="0")
    xml, sysfs = simulated_smi(tmp_path / "broken", spec, fabric_manager_active=False)
    assert not any(passed for _, passed, _ in fabric(xml, sysfs))
