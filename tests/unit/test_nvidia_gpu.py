"""module_utils/gpunode/driver/gpu.py over simulated trees, hand-built edge cases and real-world outputs."""

import gzip
import json
import os
import re

import pytest
import yaml
from ansible.module_utils.gpunode.driver import branches as nvidia_branches
from ansible.module_utils.gpunode.driver.gpu import (
    FALLBACK_LABEL,
    GpuDetectError,
    branches_for,
    classify,
    device_name,
    find_pci_ids,
    gather,
    is_turing_or_newer,
    load_pci_ids,
    needs_open_module,
    parse_driver_version,
    parse_pci_ids_vendor,
    parse_proc_modules,
    product_name,
    read_loaded,
    summary_line,
)
from conftest import FIXTURES, ROOT, load_file, shared_files, shared_path

PCI_IDS = str(FIXTURES / "pci-ids" / "pci.ids")
SPECS_DIR = ROOT / "tests" / "simnode" / "specs"
SPECS = sorted(SPECS_DIR.glob("*.yml"))

make_sysfs = load_file(ROOT / "tests" / "simnode" / "make_sysfs.py", "make_sysfs")


def build(tmp_path, spec):
    """Build a tree from a spec name or dict; returns (sysfs_root, proc_root)."""
    data = make_sysfs.load_spec(spec) if isinstance(spec, str) else make_sysfs.validate_spec(spec)
    make_sysfs.make_tree(data, str(tmp_path))
    return str(tmp_path / "sys"), str(tmp_path / "proc")


def facts_for(tmp_path, spec, pci_ids=PCI_IDS, machine="x86_64"):
    sysfs, proc = build(tmp_path, spec)
    return gather(sysfs, proc, pci_ids, machine)


# --------------------------------------------------------------------------
# Every spec: the facts say what the spec describes
# --------------------------------------------------------------------------


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda p: p.stem)
def test_facts_describe_the_spec(spec_path, tmp_path):
    raw = yaml.safe_load(spec_path.read_text())
    facts, warnings = facts_for(tmp_path, str(spec_path))
    nvidia = sorted((d for d in raw.get("devices") or [] if d["vendor"] == "10de"),
                    key=lambda d: d["address"])
    assert [d["address"] for d in facts["devices"]] == [d["address"] for d in nvidia]
    gpus = [d for d in nvidia if d["class"][:4] in ("0300", "0302")]
    assert facts["gpu_count"] == len(gpus)
    assert facts["present"] is bool(gpus)
    assert facts["nvswitch_count"] == sum(1 for d in nvidia if d["class"][:4] == "0680")
    assert len(nvidia) == len(facts["devices"])
    for want, got in zip(nvidia, facts["devices"]):
        assert got["vendor_id"] == "10de" and got["device_id"] == want["device"]
        assert got["subsystem_vendor_id"] == want["subsystem_vendor"]
        assert got["subsystem_device_id"] == want["subsystem_device"]
        assert got["class_id"] == want["class"][:4]
        assert got["bound_driver"] == want.get("driver")
        numa = want.get("numa_node", -1)
        assert got["numa_node"] == (None if numa == -1 else numa)
        assert got["name"]
        assert got["kind"] in ("gpu", "nvswitch", "audio", "usb", "serial", "other")
    modules = raw.get("modules") or {}
    assert facts["loaded_driver_version"] == modules.get("nvidia")
    assert facts["nouveau_loaded"] is ("nouveau" in modules)
    assert facts["nvidia_loaded"] is ("nvidia" in modules)
    assert sorted(facts["models"]) == sorted({d["name"] for d in facts["devices"] if d["kind"] == "gpu"})
    assert sum(facts["model_counts"].values()) == facts["gpu_count"]
    # the branch contract: each supported branch drives every GPU; the first is recommended
    supported = facts["supported_branches"]
    assert supported == [b for b in nvidia_branches.BRANCHES if b in supported]
    assert facts["recommended_branch"] == (facts["supported_branches"] or [None])[0]
    if gpus and not facts["supported_branches"]:
        assert any("no single driver branch" in w for w in warnings)
    assert facts["warnings"] == warnings


def test_hgx_h100_eight_gpus_four_nvswitches_on_two_numa_nodes(tmp_path):
    facts, warnings = facts_for(tmp_path, "hgx-h100")
    assert (facts["gpu_count"], facts["nvswitch_count"]) == (8, 4)
    assert facts["models"] == ["H100 SXM5 80GB"]
    assert {d["numa_node"] for d in facts["devices"]} == {0, 1}
    assert {d["bound_driver"] for d in facts["devices"] if d["kind"] == "nvswitch"} == {"nvidia-nvswitch"}
    # the Matrox BMC VGA (class 0300, vendor 102b) is not an NVIDIA GPU
    assert all(d["vendor_id"] == "10de" for d in facts["devices"])
    # H100 needs 535 or newer; Kepler's 470 cannot drive it
    assert "535" in facts["supported_branches"] and "470" not in facts["supported_branches"]
    assert facts["loaded_driver_version"] == "535.183.01" and facts["loaded_module_type"] == "proprietary"
    assert warnings == []


def test_hgx_h100_nvswitch_is_named_even_though_pci_ids_lacks_it(tmp_path):
    facts, _ = facts_for(tmp_path, "hgx-h100")
    assert "22a3" not in load_pci_ids(PCI_IDS)
    names = {d["name"] for d in facts["devices"] if d["kind"] == "nvswitch"}
    assert len(names) == 1 and "NVSwitch" in names.pop()


def test_k80_held_by_nouveau_needs_the_kepler_legacy_branch(tmp_path):
    facts, _ = facts_for(tmp_path, "k80-nouveau")
    assert facts["nouveau_loaded"] is True and facts["loaded_driver_version"] is None
    assert facts["recommended_branch"] == "470"
    assert "535" not in facts["supported_branches"]
    assert {d["bound_driver"] for d in facts["devices"]} == {"nouveau"}
    assert facts["models"] == ["Tesla K80"] and facts["gpu_count"] == 2


def test_workstation_keeps_the_intel_igpu_out_and_the_audio_function_in(tmp_path):
    facts, _ = facts_for(tmp_path, "workstation-geforce")
    kinds = {d["address"]: d["kind"] for d in facts["devices"]}
    assert kinds == {"0000:01:00.0": "gpu", "0000:01:00.1": "audio"}
    assert facts["gpu_count"] == 1 and facts["models"] == ["GeForce GTX 1080"]
    # Pascal: 580 is the last branch that drives it
    assert facts["recommended_branch"] == "580"
    assert facts["open_kernel_module_capable"] is False


def test_turing_card_exposes_usb_and_serial_functions(tmp_path):
    facts, _ = facts_for(tmp_path, "workstation-turing")
    assert [d["kind"] for d in facts["devices"]] == ["gpu", "audio", "usb", "serial"]
    assert facts["gpu_count"] == 1 and facts["open_kernel_module_capable"] is True


def test_no_nvidia_host(tmp_path):
    facts, warnings = facts_for(tmp_path, "no-nvidia")
    assert facts["present"] is False and facts["devices"] == [] and facts["models"] == []
    assert facts["recommended_branch"] is None and facts["supported_branches"] == []
    assert warnings == []


def test_k80_beside_h100_has_no_common_branch_and_says_why(tmp_path):
    facts, warnings = facts_for(tmp_path, "k80-h100-mixed")
    assert facts["recommended_branch"] is None and facts["supported_branches"] == []
    assert any("102d" in w and "2331" in w for w in warnings)


def test_k80_beside_t4_gets_the_newest_branch_both_share(tmp_path):
    facts, _ = facts_for(tmp_path, "k80-t4-mixed")
    assert facts["recommended_branch"] == "470"


def test_h200_is_in_the_data_and_gets_no_warning(tmp_path):
    """10de:2335 (H200) is in nvidia-detect 550.163.01's list (it came after 535.261.03's, which
    warned on every run of a real H200 host); a real H200 runs the R580 LTS open module
    (580.159.04, probed on an H200 SXM 141GB), so 580 must not be refused."""
    facts, warnings = facts_for(tmp_path, "hgx-h200")
    assert not any("2335" in w for w in warnings)
    assert "580" in facts["supported_branches"] and "595" in facts["supported_branches"]
    assert "550" in facts["supported_branches"] and "535" not in facts["supported_branches"]  # 535's own list
    assert facts["recommended_branch"] == nvidia_branches.NEWEST_BRANCH
    assert facts["loaded_module_type"] == "open" and facts["loaded_driver_version"] == "565.57.01"


def test_pre_340_gpu_gets_no_branch_and_a_reason(tmp_path):
    facts, warnings = facts_for(tmp_path, "geforce-fx-legacy")
    assert facts["present"] is True and facts["recommended_branch"] is None
    assert any("legacy 173" in w for w in warnings)


def test_without_pci_ids_names_still_say_what_the_device_is(tmp_path):
    facts, _ = facts_for(tmp_path, "workstation-turing", pci_ids=None)
    names = [d["name"] for d in facts["devices"]]
    assert names == ["NVIDIA GPU 10de:1e87", "NVIDIA audio controller 10de:10f8",
                     "NVIDIA USB controller 10de:1ad8", "NVIDIA serial bus controller 10de:1ad9"]


def test_gz_pci_ids_is_read(tmp_path):
    gz = tmp_path / "pci.ids.gz"
    with open(PCI_IDS, "rb") as src, gzip.open(gz, "wb") as dst:
        dst.write(src.read())
    assert load_pci_ids(str(gz)) == load_pci_ids(PCI_IDS)


# --------------------------------------------------------------------------
# Hand-built edge cases
# --------------------------------------------------------------------------


def _device(root, address, files):
    path = root / "sys" / "bus" / "pci" / "devices" / address
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text)
    return path


GPU_FILES = {"vendor": "0x10de\n", "device": "0x1eb8\n", "class": "0x030200\n"}


def _gather(root):
    (root / "proc").mkdir(exist_ok=True)
    return gather(str(root / "sys"), str(root / "proc"), PCI_IDS)


def test_missing_optional_files_give_nulls(tmp_path):
    _device(tmp_path, "0000:00:1e.0", GPU_FILES)
    facts, _ = _gather(tmp_path)
    (dev,) = facts["devices"]
    assert dev["numa_node"] is None and dev["bound_driver"] is None
    assert dev["subsystem_vendor_id"] is None and dev["subsystem_device_id"] is None
    assert dev["kind"] == "gpu" and dev["name"] == "Tesla T4"
    assert facts["loaded_driver_version"] is None and facts["nouveau_loaded"] is False


@pytest.mark.parametrize(("text", "expected"), [("-1\n", None), ("1\n", 1), ("0", 0), ("garbage", None)])
def test_numa_node_values(tmp_path, text, expected):
    _device(tmp_path, "0000:00:1e.0", {**GPU_FILES, "numa_node": text})
    facts, _ = _gather(tmp_path)
    assert facts["devices"][0]["numa_node"] == expected


def test_driver_that_is_not_a_link_reads_as_none(tmp_path):
    dev = _device(tmp_path, "0000:00:1e.0", GPU_FILES)
    (dev / "driver").write_text("not a link")
    facts, _ = _gather(tmp_path)
    assert facts["devices"][0]["bound_driver"] is None


def test_dangling_driver_link_still_names_the_driver(tmp_path):
    dev = _device(tmp_path, "0000:00:1e.0", GPU_FILES)
    os.symlink("../../../bus/pci/drivers/nvidia", dev / "driver")
    facts, _ = _gather(tmp_path)
    assert facts["devices"][0]["bound_driver"] == "nvidia"


def test_missing_class_is_other_and_not_counted(tmp_path):
    _device(tmp_path, "0000:00:1e.0", {"vendor": "0x10de\n", "device": "0x1eb8\n"})
    facts, _ = _gather(tmp_path)
    assert facts["devices"][0]["kind"] == "other" and facts["gpu_count"] == 0
    assert facts["devices"][0]["class_id"] is None


def test_unreadable_vendor_is_skipped_with_a_warning(tmp_path):
    _device(tmp_path, "0000:00:1e.0", {"device": "0x1eb8\n"})
    _device(tmp_path, "0000:00:1f.0", GPU_FILES)
    facts, warnings = _gather(tmp_path)
    assert [d["address"] for d in facts["devices"]] == ["0000:00:1f.0"]
    assert any("0000:00:1e.0/vendor" in w for w in warnings)


def test_sysfs_without_a_pci_bus_is_no_gpu_with_a_warning(tmp_path):
    (tmp_path / "sys").mkdir()
    facts, warnings = _gather(tmp_path)
    assert facts["present"] is False and any("bus/pci/devices" in w for w in warnings)


@pytest.mark.parametrize("missing", ["sys", "proc"])
def test_missing_root_is_an_error_naming_it(tmp_path, missing):
    (tmp_path / "sys").mkdir()
    (tmp_path / "proc").mkdir()
    os.rmdir(tmp_path / missing)
    with pytest.raises(GpuDetectError, match=re.escape(str(tmp_path / missing))):
        gather(str(tmp_path / "sys"), str(tmp_path / "proc"))


def test_sys_module_version_wins_over_proc(tmp_path):
    (tmp_path / "sys" / "module" / "nvidia").mkdir(parents=True)
    (tmp_path / "sys" / "module" / "nvidia" / "version").write_text("550.54.15\n")
    (tmp_path / "proc" / "driver" / "nvidia").mkdir(parents=True)
    (tmp_path / "proc" / "driver" / "nvidia" / "version").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023\n")
    (tmp_path / "proc" / "modules").write_text("nvidia 56287232 0 - Live 0xffffffffc0a00000 (POE)\n")
    loaded = read_loaded(str(tmp_path / "sys"), str(tmp_path / "proc"))
    assert (loaded["version"], loaded["module_type"]) == ("550.54.15", "proprietary")
    os.remove(tmp_path / "sys" / "module" / "nvidia" / "version")
    loaded = read_loaded(str(tmp_path / "sys"), str(tmp_path / "proc"))
    assert (loaded["version"], loaded["module_type"]) == ("535.129.03", "proprietary")


def test_a_version_file_left_behind_without_the_module_is_not_a_loaded_driver(tmp_path):
    (tmp_path / "proc" / "driver" / "nvidia").mkdir(parents=True)
    (tmp_path / "proc" / "driver" / "nvidia" / "version").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023\n")
    (tmp_path / "proc" / "modules").write_text("ext4 1 0 - Live 0x0\n")
    (tmp_path / "sys").mkdir()
    assert read_loaded(str(tmp_path / "sys"), str(tmp_path / "proc")) == {
        "modules": ["ext4"], "version": None, "module_type": None}


def test_modules_fall_back_to_sysfs_initstate_without_proc_modules(tmp_path):
    (tmp_path / "sys" / "module" / "nouveau").mkdir(parents=True)
    (tmp_path / "sys" / "module" / "nouveau" / "initstate").write_text("live\n")
    (tmp_path / "proc").mkdir()
    assert read_loaded(str(tmp_path / "sys"), str(tmp_path / "proc"))["modules"] == ["nouveau"]


def test_proc_modules_parser():
    text = ("nvidia_uvm 1531904 0 - Live 0xffffffffc1200000 (POE)\n"
            "nvidia 56287232 1 nvidia_uvm, Live 0xffffffffc0a00000 (POE)\n\n")
    assert parse_proc_modules(text) == ["nvidia_uvm", "nvidia"]


def test_a_real_h200_host_whose_kernel_cannot_unload_modules(tmp_path):
    """What a real H200 host (Ubuntu 24.04 guest, 2026-11) showed: an open 580 module built by
    nixbld, /proc/modules with "-" reference counts (a kernel without module unloading) and no
    sys/module/nvidia/refcnt; the GPU 10de:2335, subsystem 10de:18bf, bound to nvidia."""
    (tmp_path / "proc" / "driver" / "nvidia").mkdir(parents=True)
    (tmp_path / "proc" / "driver" / "nvidia" / "version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \n"
        "GCC version:  gcc version 15.3.0 (GCC) \n")
    (tmp_path / "proc" / "modules").write_text(
        "nvidia_uvm 1830912 - - Live 0xffffffffc080c000 (O)\n"
        "nvidia 14299136 - - Live 0xffffffffc0400000 (O)\n")
    (tmp_path / "sys" / "module" / "nvidia").mkdir(parents=True)
    (tmp_path / "sys" / "module" / "nvidia" / "version").write_text("580.159.04\n")
    make_sysfs.make_tree(make_sysfs.validate_spec({"devices": [{
        "address": "0000:00:06.0", "vendor": "10de", "device": "2335", "subsystem_vendor": "10de",
        "subsystem_device": "18bf", "class": "030200", "numa_node": -1, "driver": "nvidia"}]}),
        str(tmp_path / "tree"))
    facts, _ = gather(str(tmp_path / "tree" / "sys"), str(tmp_path / "proc"), None)
    assert facts["loaded_driver_version"] == "580.159.04" and facts["loaded_module_type"] == "open"
    assert facts["models"] == ["H200 SXM 141GB"] and facts["devices"][0]["bound_driver"] == "nvidia"
    assert not facts["open_kernel_module_required"] and facts["open_kernel_module_capable"]
    assert facts["summary"] == ("H200 SXM 141GB x 1 | NVSwitch: 0 | driver: nvidia 580.159.04 (open) | "
                                f"recommended branch: {nvidia_branches.NEWEST_BRANCH}")


# --------------------------------------------------------------------------
# Real-world outputs (../shared/fixtures)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("path", shared_files("nvidia", "proc-driver-nvidia-version-*"), ids=lambda p: p.name)
def test_proc_driver_version_samples(path):
    """The file names say which version and kind of module wrote them."""
    want_version = re.search(r"-(\d+(?:\.\d+)+)(?:-|\.txt$)", path.name).group(1)
    want_type = "open" if "-open-" in path.name else "proprietary"
    text = path.read_bytes().decode("utf-8", errors="replace")
    assert parse_driver_version(text) == (want_version, want_type)


@pytest.mark.parametrize("text", ["", "GCC version:  gcc version 12.2.0\n", "NVRM version: garbage\n"])
def test_proc_driver_version_without_a_version(text):
    assert parse_driver_version(text) == (None, None)


LSPCI_NN = re.compile(
    r"^(?P<addr>(?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) (?P<cls>.+?) \[(?P<cid>[0-9a-f]{4})\]: "
    r"(?P<name>.*) \[(?P<ven>[0-9a-f]{4}):(?P<dev>[0-9a-f]{4})\]")


def _spec_from_lspci_nn(text):
    devices = []
    for line in text.splitlines():
        match = LSPCI_NN.match(line)
        if match:
            addr = match["addr"] if match["addr"].count(":") == 2 else "0000:" + match["addr"]
            devices.append({"address": addr, "vendor": match["ven"], "device": match["dev"],
                            "class": match["cid"] + "00", "lspci_name": match["name"]})
    return devices


@pytest.mark.parametrize("path", shared_files("pci", "lspci-nn-*"), ids=lambda p: p.name)
def test_trees_built_from_real_lspci_nn(path, tmp_path):
    """Kinds and names agree with what lspci printed for the same IDs."""
    devices = _spec_from_lspci_nn(path.read_text())
    assert devices
    facts, _ = facts_for(tmp_path, {"devices": [{k: v for k, v in d.items() if k != "lspci_name"}
                                                for d in devices]})
    nvidia = [d for d in devices if d["vendor"] == "10de"]
    assert [d["address"] for d in facts["devices"]] == sorted(d["address"] for d in nvidia)
    by_addr = {d["address"]: d for d in nvidia}
    for dev in facts["devices"]:
        seen = by_addr[dev["address"]]
        assert dev["kind"] == classify(seen["class"][:4])
        named = re.sub(r"^NVIDIA Corporation | \(rev a1\)$", "", seen["lspci_name"])
        if named and named != "Device":
            assert dev["name"] == product_name(named)
        else:
            assert dev["name"]
    assert facts["gpu_count"] == sum(1 for d in nvidia if d["class"][:4] in ("0300", "0302"))


def test_azure_a100_hgx_from_lspci(tmp_path):
    path = shared_path("fixtures", "pci", "lspci-nn-hgx-a100-8gpu-nvswitch-azure.txt")
    devices = [{k: v for k, v in d.items() if k != "lspci_name"}
               for d in _spec_from_lspci_nn(path.read_text())]
    facts, _ = facts_for(tmp_path, {"devices": devices})
    assert (facts["gpu_count"], facts["nvswitch_count"]) == (8, 6)
    assert facts["models"] == ["A100 SXM4 80GB"]
    assert facts["recommended_branch"] == nvidia_branches.NEWEST_BRANCH


def _spec_from_lspci_vvv(text):
    classes = {"3D controller": "030200", "VGA compatible controller": "030000", "Bridge": "068000",
               "Audio device": "040300"}
    devices = []
    for block in text.split("\n\n"):
        head = re.match(r"^([0-9a-f:.]+) ([^:]+): NVIDIA Corporation Device ([0-9a-f]{4})", block)
        if not head or head.group(2) not in classes:
            continue
        numa = re.search(r"\n\tNUMA node: (\d+)", block)
        driver = re.search(r"\n\tKernel driver in use: (\S+)", block)
        sub = re.search(r"\n\tSubsystem: NVIDIA Corporation Device ([0-9a-f]{4})", block)
        devices.append({
            "address": "0000:" + head.group(1), "vendor": "10de", "device": head.group(3),
            "subsystem_vendor": "10de", "subsystem_device": sub.group(1) if sub else "0000",
            "class": classes[head.group(2)], "numa_node": int(numa.group(1)) if numa else -1,
            "driver": driver.group(1) if driver else None,
        })
    return devices


def test_tree_from_the_real_dell_hgx_h100_lspci_vvv(tmp_path):
    text = shared_path("fixtures", "pci", "lspci-vvv-dell-hgx-h100-8gpu-nvswitch.txt").read_text()
    devices = _spec_from_lspci_vvv(text)
    facts, _ = facts_for(tmp_path, {"devices": devices})
    assert (facts["gpu_count"], facts["nvswitch_count"]) == (8, 4)
    got = {d["address"]: (d["numa_node"], d["bound_driver"]) for d in facts["devices"]}
    assert got == {d["address"]: (d["numa_node"], d["driver"]) for d in devices}
    assert "535" in facts["supported_branches"]


def test_nvidia_smi_q_agrees_with_facts_from_the_same_machine(tmp_path):
    """Build the tree nvidia-smi -q describes; the facts report its GPU count and driver."""
    text = shared_path("fixtures", "nvidia", "nvidia-smi-q-535.183.01-8xH100.txt").read_text()
    version = re.search(r"Driver Version\s+: (\S+)", text).group(1)
    attached = int(re.search(r"Attached GPUs\s+: (\d+)", text).group(1))
    devices = []
    for dev_id, bus, sub in re.findall(
            r"Device Id\s+: 0x([0-9A-F]{4})10DE\s+Bus Id\s+: [0-9A-F]{4}"
            r"([0-9A-F]{4}:[0-9A-F]{2}:[0-9A-F]{2}\.\d)\s+Sub System Id\s+: 0x([0-9A-F]{4})10DE", text):
        devices.append({"address": bus.lower(), "vendor": "10de", "device": dev_id.lower(),
                        "subsystem_vendor": "10de", "subsystem_device": sub.lower(), "class": "030200",
                        "driver": "nvidia"})
    facts, _ = facts_for(tmp_path, {"devices": devices, "modules": {"nvidia": version}})
    assert facts["gpu_count"] == attached and facts["loaded_driver_version"] == version


def test_open_module_modaliases_are_all_turing_or_newer():
    """The 525 open driver's modaliases: every ID it drives counts as open-capable and is served by 590+."""
    text = shared_path("fixtures", "nvidia", "modaliases-nvidia-driver-525-open-ubuntu-focal.txt").read_text()
    ids = [m.lower() for m in re.findall(r"d0000([0-9A-F]{4})", text)]
    assert ids
    for device_id in ids:
        assert int(device_id, 16) >= 0x1E00
        assert nvidia_branches.NEWEST_BRANCH in branches_for(device_id)[0]


def test_branch_table_agrees_with_nvidia_s_supported_gpus_json():
    """NVIDIA's own list (driver 525) names each GPU's legacy branch; the table must agree.

    340/390/470: the newest branch offered is that legacy branch. Older legacy
    lines (and 367, GRID): nothing newer than it is offered. Current GPUs get 535.
    """
    chips = json.loads(shared_path("fixtures", "nvidia", "supported-gpus.json-driver-525-ubuntu-focal.json")
                       .read_text())["chips"]
    for chip in chips:
        device_id = chip["devid"][2:].lower()
        legacy = (chip.get("legacybranch") or "").split(".")[0]
        branches, _ = branches_for(device_id)
        if legacy in ("340", "390", "470"):
            assert branches and branches[0] == legacy, chip
        elif legacy:
            assert all(int(b) <= int(legacy) for b in branches), chip
        else:
            assert "535" in branches or branches == [nvidia_branches.NEWEST_BRANCH], chip


def test_names_from_nvidia_s_supported_gpus_json_match_pci_ids_products():
    """Where both name a GPU, pci.ids' product name is NVIDIA's (punctuation and prefix aside)."""
    chips = json.loads(shared_path("fixtures", "nvidia", "supported-gpus.json-driver-525-ubuntu-focal.json")
                       .read_text())["chips"]
    nvidia_names = {c["devid"][2:].lower(): c["name"] for c in chips if "subdevid" not in c}
    ours = load_pci_ids(PCI_IDS)
    checked = 0
    for device_id in ("1eb8", "102d", "1db1", "2236", "1b80"):
        if device_id in nvidia_names and device_id in ours:
            ours_name = device_name(device_id, "gpu", pci_ids=ours)
            theirs = re.sub(r"^NVIDIA ", "", nvidia_names[device_id])
            assert re.sub(r"[-\s]+", " ", ours_name) == re.sub(r"[-\s]+", " ", theirs)
            checked += 1
    assert checked >= 3


# --------------------------------------------------------------------------
# pci.ids and names
# --------------------------------------------------------------------------


def test_pci_ids_section_stops_at_the_next_vendor():
    ids = load_pci_ids(PCI_IDS)
    assert "1eb8" in ids and "1ae5" not in ids and "3e92" not in ids and "zzzz" not in ids
    assert ids["05e7"][1][("10de", "0714")] == "Tesla M1060"


def test_pci_ids_vendor_on_the_first_line_and_at_the_end():
    assert parse_pci_ids_vendor("10de  NVIDIA\n\t1eb8  TU104GL [Tesla T4]")["1eb8"][0] == "TU104GL [Tesla T4]"
    assert "1eb8" in parse_pci_ids_vendor(b"8086  Intel\n10de  NVIDIA\n\t1eb8  TU104GL [Tesla T4]\n")


def test_pci_ids_other_vendor_and_missing_vendor():
    with open(PCI_IDS, encoding="utf-8") as handle:
        text = handle.read()
    assert "3e92" in parse_pci_ids_vendor(text, "8086")
    assert parse_pci_ids_vendor("# empty\n") == {}


def test_real_system_pci_ids_if_any():
    path = find_pci_ids()
    if path is None:
        pytest.skip("no system pci.ids on this machine")
    ids = load_pci_ids(path)
    assert product_name(ids["1eb8"][0]) == "Tesla T4"


def test_find_pci_ids_takes_the_first_existing(tmp_path):
    second = tmp_path / "b"
    second.write_text("")
    assert find_pci_ids([str(tmp_path / "a"), str(second)]) == str(second)
    assert find_pci_ids([str(tmp_path / "a")]) is None


@pytest.mark.parametrize(("pci_name", "product"), [
    ("TU104GL [Tesla T4]", "Tesla T4"),
    ("GH100[H100 SXM5 80GB]", "H100 SXM5 80GB"),
    ("GP104 High Definition Audio Controller", "GP104 High Definition Audio Controller"),
    ("GT200GL [Tesla C1060 / M1060]", "Tesla C1060 / M1060"),
])
def test_product_name(pci_name, product):
    assert product_name(pci_name) == product


@pytest.mark.parametrize(("device_id", "turing", "open_only"), [
    ("1db1", False, False),  # V100 (Volta)
    ("1eb8", True, False),   # T4 (Turing)
    ("2330", True, False),   # H100
    ("2342", True, True),    # GH200 (Grace Hopper)
    ("2901", True, True),    # B200 (Blackwell GB100)
    ("2b85", True, True),    # GeForce RTX 5090 (Blackwell GB202)
    ("2e12", True, True),    # GB10 (DGX Spark): outside the chip ranges, in the table (issue 41)
])
def test_architecture_thresholds(device_id, turing, open_only):
    assert is_turing_or_newer(device_id) is turing
    assert needs_open_module(device_id) is open_only


def test_summary_of_a_host_without_a_branch_says_why(tmp_path):
    facts, _ = facts_for(tmp_path, "k80-h100-mixed")
    assert summary_line(facts).endswith("recommended branch: none: " + facts["warnings"][-1])
    facts["present"], facts["model_counts"], facts["recommended_branch"] = False, {}, None
    assert summary_line(facts).startswith("no NVIDIA GPU | NVSwitch:")


def test_subsystem_name_for_nvidia_boards_device_name_for_others():
    ids = load_pci_ids(PCI_IDS)
    assert device_name("05e7", "gpu", "10de", "0714", ids) == "Tesla M1060"
    assert device_name("0322", "gpu", "1462", "9171", ids) == "GeForce FX 5200"
    assert device_name("05e7", "gpu", "10de", "ffff", ids) == "Tesla C1060 / M1060"


@pytest.mark.parametrize("kind", sorted(FALLBACK_LABEL))
def test_fallback_names_say_what_and_which(kind):
    name = device_name("ffff", kind)
    assert name.startswith("NVIDIA ") and "10de:ffff" in name and FALLBACK_LABEL[kind] in name


def test_table_names_used_when_pci_ids_lacks_the_id():
    assert device_name("2335", "gpu", pci_ids=load_pci_ids(PCI_IDS)) == nvidia_branches.NAMES["2335"]


@pytest.mark.parametrize(("class_id", "kind"), [
    ("0300", "gpu"), ("0302", "gpu"), ("0680", "nvswitch"), ("0403", "audio"), ("0c03", "usb"),
    ("0c80", "serial"), ("0604", "other"), ("0301", "other"), (None, "other"),
])
def test_classify(class_id, kind):
    assert classify(class_id) == kind


def test_gather_of_the_real_host_does_not_fail():
    """On whatever machine runs the tests, the real /sys and /proc read without an error."""
    if not os.path.isdir("/sys/bus/pci/devices"):
        pytest.skip("no PCI bus visible here")
    facts, _ = gather("/sys", "/proc", find_pci_ids())
    assert facts["gpu_count"] == len([d for d in facts["devices"] if d["kind"] == "gpu"])
