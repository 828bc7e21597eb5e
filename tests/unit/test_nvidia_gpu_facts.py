"""library/nvidia_gpu_facts.py through main(): facts, check mode, errors, docs."""


import nvidia_gpu_facts
import pytest
import yaml
from ansible.module_utils.common.warnings import get_warning_messages
from ansible.module_utils.gpunode.driver import gpu as gpu_utils
from ansible.module_utils.gpunode.driver.driver import build_request
from conftest import FIXTURES, ROOT, load_file

PCI_IDS = str(FIXTURES / "pci-ids" / "pci.ids")

make_sysfs = load_file(ROOT / "tests" / "simnode" / "make_sysfs.py", "make_sysfs")


@pytest.fixture
def node(tmp_path):
    def _node(spec):
        make_sysfs.make_tree(make_sysfs.load_spec(spec), str(tmp_path))
        return {"sysfs_root": str(tmp_path / "sys"), "proc_root": str(tmp_path / "proc"),
                "pci_ids_path": PCI_IDS}
    return _node


@pytest.mark.parametrize("check_mode", [False, True])
def test_returns_facts_and_never_changes(run_module, node, check_mode, tmp_path):
    args = node("hgx-h100")
    before = make_sysfs.snapshot(str(tmp_path))
    ok, result = run_module(nvidia_gpu_facts, args, check_mode=check_mode)
    assert ok and result["changed"] is False
    facts = result["ansible_facts"]["nvidia_gpu"]
    assert facts["gpu_count"] == 8 and facts["nvswitch_count"] == 4
    assert facts["recommended_branch"] == facts["supported_branches"][0]
    assert make_sysfs.snapshot(str(tmp_path)) == before


@pytest.mark.parametrize("spec, fabric, rdma", [
    ("gb200-tray", "none", 8),  # a board with the GB200 IDs that stands alone
    ("hgx-b200", "nvswitch", 8),  # its SW_MNG management ports stay out of rdma_devices
    ("hgx-h100", "auto", 2),
])
def test_the_inventory_s_fabric_wins_over_what_pci_tells(run_module, node, spec, fabric, rdma):
    ok, result = run_module(nvidia_gpu_facts, dict(node(spec), fabric=fabric))
    facts = result["ansible_facts"]["nvidia_gpu"]
    assert ok and facts["fabric"] == ("nvswitch" if fabric == "auto" else fabric)
    assert len(facts["rdma_devices"]) == rdma
    assert not [w for w in get_warning_messages() if "taking the fabric" in w]


def test_warnings_reach_the_result(run_module, node):
    ok, result = run_module(nvidia_gpu_facts, node("k80-h100-mixed"))
    assert ok and result["ansible_facts"]["nvidia_gpu"]["recommended_branch"] is None
    assert any("no single driver branch" in w for w in get_warning_messages())


def test_a_run_without_warnings_records_none(run_module, node):
    """Warnings are process-wide state: conftest resets it, so no earlier test's warning shows here."""
    ok, result = run_module(nvidia_gpu_facts, node("t4-vm"))
    assert ok and result["ansible_facts"]["nvidia_gpu"]["recommended_branch"]
    assert get_warning_messages() == ()


def test_missing_sysfs_root_fails_naming_it(run_module, tmp_path):
    args = {"sysfs_root": str(tmp_path / "nope"), "proc_root": str(tmp_path)}
    ok, result = run_module(nvidia_gpu_facts, args)
    assert not ok and str(tmp_path / "nope") in result["msg"] and "sysfs_root" in result["msg"]


def test_missing_pci_ids_path_fails_naming_it(run_module, node, tmp_path):
    args = node("t4-vm")
    args["pci_ids_path"] = str(tmp_path / "pci.ids")
    ok, result = run_module(nvidia_gpu_facts, args)
    assert not ok and str(tmp_path / "pci.ids") in result["msg"]


def test_default_pci_ids_is_searched(run_module, node, monkeypatch):
    args = node("t4-vm")
    del args["pci_ids_path"]
    monkeypatch.setattr(gpu_utils, "PCI_IDS_CANDIDATES", ("/nonexistent/pci.ids", PCI_IDS))
    ok, result = run_module(nvidia_gpu_facts, args)
    facts = result["ansible_facts"]["nvidia_gpu"]
    assert ok and facts["pci_ids_path"] == PCI_IDS and facts["models"] == ["Tesla T4"]


def test_without_any_pci_ids_names_fall_back(run_module, node, monkeypatch):
    args = node("workstation-turing")
    del args["pci_ids_path"]
    monkeypatch.setattr(gpu_utils, "PCI_IDS_CANDIDATES", ("/nonexistent/pci.ids",))
    ok, result = run_module(nvidia_gpu_facts, args)
    facts = result["ansible_facts"]["nvidia_gpu"]
    assert ok and facts["pci_ids_path"] is None and facts["models"] == ["NVIDIA GPU 10de:1e87"]


def test_return_documents_every_fact_key(run_module, node):
    ok, result = run_module(nvidia_gpu_facts, node("workstation-geforce"))
    assert ok
    returned = yaml.safe_load(nvidia_gpu_facts.RETURN)
    documented = returned["ansible_facts"]["contains"]["nvidia_gpu"]["contains"]
    facts = result["ansible_facts"]["nvidia_gpu"]
    assert set(facts) == set(documented)
    assert set(facts["devices"][0]) == set(documented["devices"]["contains"])


def _one_gpu(tmp_path, device, machine_spec="one-gpu"):
    spec = tmp_path / f"{machine_spec}.yml"
    spec.write_text(yaml.safe_dump({"description": f"one GPU 10de:{device}", "modules": {}, "devices": [
        {"address": "000f:01:00.0", "vendor": "10de", "device": device, "subsystem_vendor": "10de",
         "subsystem_device": "0000", "class": "030000"}]}))
    make_sysfs.make_tree(make_sysfs.load_spec(str(spec)), str(tmp_path / "node"))
    return {"sysfs_root": str(tmp_path / "node" / "sys"), "proc_root": str(tmp_path / "node" / "proc"),
            "pci_ids_path": PCI_IDS}


def test_a_gpu_newer_than_the_table_is_served_by_the_newest_branch_with_a_warning(run_module, tmp_path):
    ok, result = run_module(nvidia_gpu_facts, _one_gpu(tmp_path, "3041"))  # a Vera Rubin
    facts = result["ansible_facts"]["nvidia_gpu"]
    assert ok and facts["recommended_branch"] == facts["supported_branches"][0] == "620"
    warnings = [w for w in get_warning_messages() if "10de:3041" in w]
    assert len(warnings) == 1 and "assuming the newest branch, 620, drives it" in warnings[0]
    assert facts["warnings"] == warnings


def test_dgx_spark_s_gb10_takes_the_580_dgx_os_ships_with_the_open_modules(run_module, tmp_path):
    ok, result = run_module(nvidia_gpu_facts, _one_gpu(tmp_path, "2e12"))
    facts = result["ansible_facts"]["nvidia_gpu"]
    assert ok and facts["supported_branches"][-1] == "580" and facts["open_kernel_module_required"]
    assert get_warning_messages() == ()
    os_info = {"distribution": "Ubuntu", "distribution_version": "24.04", "architecture": "aarch64",
               "kernel": "6.17.0-1014-nvidia"}
    request = build_request({"branch": "580", "package_source": "cuda", "keyring": "/k.asc"}, facts, os_info)
    assert request["module_type"] == "open" and request["warnings"] == []
