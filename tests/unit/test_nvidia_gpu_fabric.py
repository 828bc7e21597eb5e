"""driver/fabric.py through gpu.gather: the fabric kind and the RDMA functions from PCI and VPD alone.

The simulated HGX B200 (tests/simnode/specs/hgx-b200.yml) takes its GPUs from the real qx-b200.xml
capture, the GB200 tray (gb200-tray.yml) its functions from a real GB200 lspci; their VPD files are
synthetic, written by make_sysfs.py in the PCI VPD format (no VPD capture of these boards is public).
"""

import copy
import re

import pytest
import yaml
from ansible.module_utils.gpunode.driver import fabric
from ansible.module_utils.gpunode.driver.gpu import gather
from conftest import ROOT, load_file, shared_path

make_sysfs = load_file(ROOT / "tests" / "simnode" / "make_sysfs.py", "make_sysfs")
SPECS = ROOT / "tests" / "simnode" / "specs"
B200_NICS = ["0000:18:00.0", "0000:40:00.0", "0000:4f:00.0", "0000:5e:00.0",
             "0000:9a:00.0", "0000:c0:00.0", "0000:ce:00.0", "0000:dc:00.0"]
MANAGEMENT = ["0000:1b:00.0", "0000:1b:00.1", "0000:1b:00.2", "0000:1b:00.3"]
NIC_VPD = {"id": "ConnectX-7", "read_only": {"PN": "MCX75310AAS-NEAT", "VA": "MLX:MN=MLNX:MODL=CX75310A"}}
MANAGEMENT_VPD = {"id": "bridge", "read_only": {"VA": "MLX:MN=MLNX:SMDL=SW_MNG"}}


def raw_spec(name):
    return yaml.safe_load((SPECS / f"{name}.yml").read_text())


def facts(tmp_path, spec, machine="x86_64"):
    data = make_sysfs.load_spec(spec) if isinstance(spec, str) else make_sysfs.validate_spec(spec)
    make_sysfs.make_tree(data, str(tmp_path))
    return gather(str(tmp_path / "sys"), str(tmp_path / "proc"), None, machine)


def mellanox(address, vpd=None, klass="020700", **extra):
    dev = {"address": address, "vendor": "15b3", "device": "1021", "class": klass, **extra}
    return dict(dev, vpd=vpd) if vpd else dev


def gpu(address, device):
    return {"address": address, "vendor": "10de", "device": device, "class": "030200"}


def vpd_path(tmp_path, address):
    return tmp_path / "sys" / "bus" / "pci" / "devices" / address / "vpd"


# ---------------------------------------------------------------- every kind


def test_hgx_b200_is_nvlink5_with_its_nics_as_rdma_devices(tmp_path):
    found, warnings = facts(tmp_path, "hgx-b200")
    assert (found["fabric"], found["rdma_devices"], warnings) == ("nvlink5", B200_NICS, [])
    assert found["gpu_count"] == 8 and found["nvswitch_count"] == 0


def test_b200_without_mlx5_ib_or_any_bound_driver_is_still_nvlink5(tmp_path):
    """gpu-operator issue 2781: no mlx5_ib, no /sys/class/infiniband; PCI still tells."""
    spec = raw_spec("hgx-b200")
    assert "mlx5_ib" not in spec["modules"]
    spec["modules"] = {}
    for dev in spec["devices"]:
        dev.pop("driver", None)
    found, _ = facts(tmp_path, spec)
    assert found["fabric"] == "nvlink5"
    assert not (tmp_path / "sys" / "class" / "infiniband").exists()


def test_the_b200_spec_s_gpus_are_those_of_the_real_capture():
    xml = shared_path("fixtures", "fabric", "smi-qx-k8s-test-infra", "qx-b200.xml").read_text()
    assert set(re.findall(r"<pci_device_id>(\w+)</pci_device_id>", xml)) == {"290110DE"}
    captured = {f"0000:{bus.lower()}:00.0" for bus in re.findall(r"<pci_bus_id>00000000:(\w\w):00.0<", xml)}
    gpus = [d for d in raw_spec("hgx-b200")["devices"] if d["vendor"] == "10de"]
    assert {d["address"] for d in gpus} == captured
    assert {(d["device"], d["subsystem_device"]) for d in gpus} == {("2901", "1999")}


@pytest.mark.parametrize("machine, warned", [("aarch64", False), ("x86_64", True)])
def test_gb200_tray_is_mnnvl_and_the_architecture_only_confirms(tmp_path, machine, warned):
    found, warnings = facts(tmp_path, "gb200-tray", machine)
    assert found["fabric"] == "mnnvl"
    # ConnectX-7 InfiniBand and BlueField-3 Ethernet functions; not the BlueField DMA function (0801)
    assert found["rdma_devices"] == ["0000:03:00.0", "0002:03:00.0", "0006:03:00.0", "0006:03:00.1",
                                     "0010:03:00.0", "0012:03:00.0", "0016:03:00.0", "0016:03:00.1"]
    assert bool(warnings) is warned
    if warned:
        assert warnings == ["Grace-Blackwell GPU 10de:2941 on a x86_64 host, not a Grace (aarch64) one; "
                            "taking the fabric as mnnvl from the GPU"]


def test_the_gb200_spec_s_functions_are_those_of_the_real_lspci():
    text = shared_path("fixtures", "pci", "lspci-plain-gb200-grace-arm64.txt").read_text()
    real = dict(re.findall(r"^(\S+) (3D controller|Infiniband controller|Ethernet controller|DMA controller)"
                           r": (?:NVIDIA|Mellanox)", text, re.MULTILINE))
    spec = {d["address"] for d in raw_spec("gb200-tray")["devices"] if d["vendor"] in ("10de", "15b3")}
    assert spec == set(real)


def test_gb300_is_mnnvl(tmp_path):
    found, _ = facts(tmp_path, {"devices": [gpu("0008:06:00.0", "31c2")]}, "aarch64")
    assert found["fabric"] == "mnnvl"


def test_hgx_h100_is_nvswitch_from_its_bridges(tmp_path):
    found, warnings = facts(tmp_path, "hgx-h100")
    assert (found["fabric"], warnings) == ("nvswitch", [])
    assert found["rdma_devices"] == ["0000:1a:00.0", "0000:9c:00.0"]


def test_pcie_gpu_is_none(tmp_path):
    assert facts(tmp_path, "t4-vm")[0]["fabric"] == "none"


def test_an_aarch64_blackwell_that_is_no_nvl72_tray_is_none(tmp_path):
    """A DGX Spark: Grace and a Blackwell GPU (GB10, 10de:2e12 by pci.ids; not verified here) on one
    aarch64 package, two ConnectX-7 ports, no NVLink domain."""
    spec = {"devices": [gpu("000f:01:00.0", "2e12"), mellanox("0000:01:00.0", NIC_VPD, "020000"),
                        mellanox("0000:01:00.1", NIC_VPD, "020000")]}
    found, warnings = facts(tmp_path, spec, "aarch64")
    assert (found["fabric"], warnings) == ("none", [])
    assert found["rdma_devices"] == ["0000:01:00.0", "0000:01:00.1"]


# ---------------------------------------------------------------- RDMA functions


def test_virtual_functions_and_other_classes_are_no_rdma_devices(tmp_path):
    spec = {"devices": [mellanox("0000:5e:00.0", NIC_VPD), mellanox("0000:5e:00.2", physfn="0000:5e:00.0"),
                        mellanox("0000:5e:00.3", physfn="0000:5e:00.0"),
                        mellanox("0000:5f:00.0", klass="080100")]}
    found, _ = facts(tmp_path, spec)
    assert found["rdma_devices"] == ["0000:5e:00.0"]
    assert (tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:5e:00.2" / "physfn").resolve() == \
        (tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:5e:00.0").resolve()


def test_rdma_devices_are_sorted_across_domains(tmp_path):
    addresses = ["0012:03:00.0", "0002:03:00.0", "0000:c0:00.0", "0000:1a:00.1", "0000:1a:00.0"]
    found, _ = facts(tmp_path, {"devices": [mellanox(a) for a in addresses]})
    assert found["rdma_devices"] == sorted(addresses) == [
        "0000:1a:00.0", "0000:1a:00.1", "0000:c0:00.0", "0002:03:00.0", "0012:03:00.0"]


# ---------------------------------------------------------------- VPD


def test_the_synthetic_vpd_parses_by_the_pci_format():
    image = make_sysfs.vpd_image({"id": "ConnectX-7", "read_only": {"PN": "MCX75310AAS-NEAT", "V0": "x"}})
    assert image[0] == fabric.VPD_ID and image[-1] == fabric.VPD_END
    assert sum(image[:-1]) % 256 == 0  # RV: every byte up to its checksum sums to zero
    fields = fabric.parse_vpd(image + b"\xff" * 64)  # what follows the end tag is not read
    assert [key for key, _ in fields] == ["ID", "PN", "V0", "RV"]
    assert dict(fields)["PN"] == b"MCX75310AAS-NEAT" and not fabric.manages_nvswitch(fields)


def test_sw_mng_counts_in_a_vendor_keyword_of_either_resource_only():
    def image(tag, keyword):
        body = keyword + bytes([6]) + b"SW_MNG"
        return bytes([0x82, 1, 0]) + b"X" + bytes([tag, len(body), 0]) + body + bytes([0x78])
    assert fabric.manages_nvswitch(fabric.parse_vpd(image(fabric.VPD_R, b"VA")))
    assert fabric.manages_nvswitch(fabric.parse_vpd(image(fabric.VPD_W, b"V1")))
    assert not fabric.manages_nvswitch(fabric.parse_vpd(image(fabric.VPD_R, b"PN")))


@pytest.mark.parametrize("cut, message", [
    (lambda image: image[:-1], "no end tag (0x78)"),
    (lambda image: image[:40], "runs past the end"),
    (lambda image: image[:1], "header cut short"),
    (lambda image: b"", "no end tag (0x78) in 0 bytes"),
    (lambda image: b"\xff" * 32, "runs past the end"),
    (lambda image: b"\x82\x01\x00X\x90\x05\x00PN\x09ab\x78", "byte 7: keyword b'PN' of 9 bytes runs past"),
])
def test_a_malformed_vpd_raises_saying_what(cut, message):
    with pytest.raises(fabric.VpdError, match=re.escape(message)):
        fabric.parse_vpd(cut(make_sysfs.vpd_image(MANAGEMENT_VPD)))


def test_a_nic_without_sw_mng_is_no_management_port(tmp_path):
    found, _ = facts(tmp_path, {"devices": [gpu("0000:8f:00.0", "2901"), mellanox("0000:18:00.0", NIC_VPD)]})
    assert (found["fabric"], found["rdma_devices"]) == ("none", ["0000:18:00.0"])


def _broken(tmp_path, spec, addresses, how):
    data = make_sysfs.validate_spec(spec)
    make_sysfs.make_tree(data, str(tmp_path))
    for address in addresses:
        path = vpd_path(tmp_path, address)
        if how == "truncated":
            path.write_bytes(path.read_bytes()[:20])
        else:  # unreadable: what stands there cannot be read as a file
            path.unlink()
            path.mkdir()
    return gather(str(tmp_path / "sys"), str(tmp_path / "proc"), None, "x86_64")


@pytest.mark.parametrize("how, why", [("truncated", "runs past the end"), ("unreadable", "is a directory")])
def test_b200_whose_management_vpd_cannot_be_read_is_still_nvlink5(tmp_path, how, why):
    found, warnings = _broken(tmp_path, raw_spec("hgx-b200"), MANAGEMENT, how)
    assert (found["fabric"], found["rdma_devices"]) == ("nvlink5", B200_NICS)
    for address in MANAGEMENT:
        assert any(w.startswith(f"{vpd_path(tmp_path, address)}: ") and why in w for w in warnings), warnings
    assert "could not be read: taking the fabric as nvlink5" in warnings[-1]


def test_an_unreadable_nic_vpd_on_b200_with_a_management_port_keeps_nvlink5(tmp_path):
    found, warnings = _broken(tmp_path, raw_spec("hgx-b200"), ["0000:18:00.0"], "unreadable")
    assert found["fabric"] == "nvlink5"
    assert found["rdma_devices"] == B200_NICS[1:]  # uncertain on an NVLink5 host: left out, warned
    assert len(warnings) == 1 and "0000:18:00.0/vpd" in warnings[0]


def test_an_unreadable_vpd_beside_other_gpus_warns_and_decides_nothing(tmp_path):
    spec = raw_spec("hgx-h100")
    for dev in spec["devices"]:
        if dev["vendor"] == "15b3":
            dev["vpd"] = copy.deepcopy(NIC_VPD)
    found, warnings = _broken(tmp_path, spec, ["0000:1a:00.0"], "truncated")
    assert (found["fabric"], found["rdma_devices"]) == ("nvswitch", ["0000:1a:00.0", "0000:9c:00.0"])
    assert len(warnings) == 1 and warnings[0].startswith(f"{vpd_path(tmp_path, '0000:1a:00.0')}: ")
    assert "whether this 15b3 function is an NVLink management port is unknown" in warnings[0]
