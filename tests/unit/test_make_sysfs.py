"""tests/simnode/make_sysfs.py: the simulated node's sysfs tree, as the kernel shapes it."""

import os
import pathlib
import re

import pytest
import yaml
from conftest import ROOT, load_file, shared_path

SPECS_DIR = ROOT / "tests" / "simnode" / "specs"
SPECS = sorted(SPECS_DIR.glob("*.yml"))


def _load_make_sysfs():
    return load_file(ROOT / "tests" / "simnode" / "make_sysfs.py", "make_sysfs")


make_sysfs = _load_make_sysfs()


def _tree(root):
    return make_sysfs.snapshot(str(root))


def test_the_issue_s_five_nodes_have_specs():
    names = {p.stem for p in SPECS}
    assert {"t4-vm", "hgx-h100", "k80-nouveau", "workstation-geforce", "no-nvidia"} <= names


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda p: p.stem)
def test_spec_builds_a_tree_shaped_like_sysfs(spec_path, tmp_path):
    raw = yaml.safe_load(spec_path.read_text())
    spec = make_sysfs.load_spec(str(spec_path))
    assert make_sysfs.make_tree(spec, str(tmp_path)) is True
    sys_dir = tmp_path / "sys"
    bus = sys_dir / "bus" / "pci" / "devices"
    assert sorted(os.listdir(bus)) == sorted(str(d["address"]) for d in raw.get("devices") or [])
    for dev in raw.get("devices") or []:
        link = bus / dev["address"]
        # bus/pci/devices/<address> is a relative link into sys/devices/<parent>/<address>
        assert link.is_symlink() and not os.readlink(link).startswith("/")
        real = pathlib.Path(os.path.realpath(link))
        assert real.parent.parent != real and str(real).startswith(str((sys_dir / "devices").resolve()))
        assert real.name == dev["address"]
        if dev.get("parent"):
            assert real.parent == (sys_dir / "devices" / dev["parent"]).resolve()
        assert (real / "vendor").read_text() == f"0x{dev['vendor']}\n"
        assert (real / "device").read_text() == f"0x{dev['device']}\n"
        assert (real / "class").read_text() == f"0x{dev['class']}\n"
        assert int((real / "numa_node").read_text()) == dev.get("numa_node", -1)
        modalias = (real / "modalias").read_text().strip()
        assert modalias.startswith(f"pci:v0000{dev['vendor'].upper()}d0000{dev['device'].upper()}")
        if dev.get("driver"):
            driver_link = real / "driver"
            assert driver_link.is_symlink() and not os.readlink(driver_link).startswith("/")
            assert os.path.basename(os.readlink(driver_link)) == dev["driver"]
            back = sys_dir / "bus" / "pci" / "drivers" / dev["driver"] / dev["address"]
            assert os.path.realpath(back) == str(real)
        else:
            assert not (real / "driver").exists()
    modules = raw.get("modules") or {}
    listed = [line.split()[0] for line in (tmp_path / "proc" / "modules").read_text().splitlines()]
    assert sorted(listed) == sorted(modules)
    for name, version in modules.items():
        assert (sys_dir / "module" / name / "initstate").read_text() == "live\n"
        version_file = sys_dir / "module" / name / "version"
        assert version_file.read_text() == f"{version}\n" if version else not version_file.exists()
    proc_version = tmp_path / "proc" / "driver" / "nvidia" / "version"
    if modules.get("nvidia"):
        assert f"  {modules['nvidia']}  " in proc_version.read_text()
    else:
        assert not proc_version.exists()


def test_modalias_matches_the_kernel_s_for_a_real_t4(tmp_path):
    """ubuntu-drivers printed the sysfs modalias of a g4dn's T4; ours is the same string."""
    text = shared_path("fixtures", "pci", "ubuntu-drivers-devices-aws-t4-modalias.txt").read_text()
    real = re.search(r"modalias : (\S+)", text).group(1)
    make_sysfs.make_tree(make_sysfs.load_spec("t4-vm"), str(tmp_path))
    ours = (tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:00:1e.0" / "modalias").read_text().strip()
    assert ours == real


def test_second_run_changes_nothing_and_a_new_spec_rebuilds(tmp_path):
    spec = make_sysfs.load_spec("hgx-h100")
    assert make_sysfs.make_tree(spec, str(tmp_path)) is True
    before = _tree(tmp_path)
    version = tmp_path / "sys" / "module" / "nvidia" / "version"
    mtime = version.stat().st_mtime_ns
    assert make_sysfs.make_tree(spec, str(tmp_path)) is False
    assert _tree(tmp_path) == before and version.stat().st_mtime_ns == mtime
    # another shape replaces the whole tree: nothing of the HGX stays behind
    assert make_sysfs.make_tree(make_sysfs.load_spec("t4-vm"), str(tmp_path)) is True
    assert not (tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:19:00.0").exists()
    assert not any(name.startswith(".make_sysfs.") for name in os.listdir(tmp_path))


def test_rebuild_drops_files_other_fakes_wrote(tmp_path):
    spec = make_sysfs.load_spec("k80-nouveau")
    make_sysfs.make_tree(spec, str(tmp_path))
    stray = tmp_path / "sys" / "module" / "nvidia" / "version"
    stray.parent.mkdir(parents=True)
    stray.write_text("550.54.15\n")
    assert make_sysfs.make_tree(spec, str(tmp_path)) is True
    assert not stray.exists()


def test_cli_reports_changed_then_unchanged(tmp_path, capsys):
    assert make_sysfs.main(["t4-vm", str(tmp_path)]) == 0
    assert "(changed)" in capsys.readouterr().out
    assert make_sysfs.main([str(SPECS_DIR / "t4-vm.yml"), str(tmp_path)]) == 0
    assert "(unchanged)" in capsys.readouterr().out


BAD_SPECS = [
    ("devices: [{vendor: '10de', device: '1eb8', class: '030200'}]", "address is required"),
    ("devices: [{address: '00:1e.0', vendor: '10de', device: '1eb8', class: '030200'}]", "is not like"),
    ("devices: [{address: '0000:00:1e.0', vendor: 'nvidia', device: '1eb8', class: '030200'}]",
     "not 4 hex digits"),
    ("devices: [{address: '0000:00:1e.0', vendor: '10de', device: '1eb8', class: '03'}]", "class"),
    ("devices: [{address: '0000:00:1e.0', vendor: '10de', device: '1eb8', class: '030200', numa_node: x}]",
     "numa_node"),
    ("devices: [{address: '0000:00:1e.0', vendor: '10de', device: '1eb8', class: '030200', colour: red}]",
     "unknown keys"),
    ("devices: [{address: '0000:1b:00.0', vendor: '15b3', device: '1021', class: '0207', vpd: x}]",
     "vpd: must be a mapping"),
    ("devices: [{address: '0000:1b:00.0', vendor: '15b3', device: '1021', class: '0207',"
     " vpd: {read_only: {VENDOR: SW_MNG}}}]", "not a PCI VPD keyword"),
    ("devices: [{address: '0000:1b:00.2', vendor: '15b3', device: '101e', class: '0207',"
     " physfn: '0000:1b:00.0'}]", "physfn 0000:1b:00.0 is not a device of the spec"),
    ("modules: {nvidia: 'latest'}", "not a version"),
    ("modules: [nvidia]", "modules must be a mapping"),
    ("gpus: []", "unknown keys"),
    ("devices: [", "not valid YAML"),
    ("- just a list", "top level must be a mapping"),
]


@pytest.mark.parametrize(("text", "message"), BAD_SPECS)
def test_bad_spec_fails_naming_the_file_and_leaves_the_tree(text, message, tmp_path, capsys):
    root = tmp_path / "root"
    make_sysfs.make_tree(make_sysfs.load_spec("t4-vm"), str(root))
    before = _tree(root)
    bad = tmp_path / "bad.yml"
    bad.write_text(text)
    assert make_sysfs.main([str(bad), str(root)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and message in err
    assert _tree(root) == before


def test_duplicate_address_is_refused():
    dev = {"address": "0000:01:00.0", "vendor": "10de", "device": "1eb8", "class": "030200"}
    data = {"devices": [dev, dev]}
    with pytest.raises(make_sysfs.SpecError, match="appears twice"):
        make_sysfs.validate_spec(data, "dup.yml")


def test_missing_spec_file_is_a_clear_error(tmp_path):
    with pytest.raises(make_sysfs.SpecError, match="cannot read"):
        make_sysfs.load_spec(str(tmp_path / "nope.yml"))


def test_refuses_to_write_over_the_real_root():
    with pytest.raises(make_sysfs.SpecError, match="refusing"):
        make_sysfs.make_tree(make_sysfs.load_spec("no-nvidia"), "/")


def test_open_module_type_writes_the_open_proc_format(tmp_path):
    spec = make_sysfs.validate_spec({"nvidia_module_type": "open", "modules": {"nvidia": "565.57.01"}})
    make_sysfs.make_tree(spec, str(tmp_path))
    text = (tmp_path / "proc" / "driver" / "nvidia" / "version").read_text()
    assert "Open Kernel Module for x86_64  565.57.01" in text
