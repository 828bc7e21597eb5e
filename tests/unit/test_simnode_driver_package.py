"""tests/simnode/driver_package.py: the simulated nodes' loaded driver is owned by a package,
as on the hosts their specs describe; only the image host's is not."""

import os
import shutil
import subprocess
import unittest.mock

import pytest
from ansible.module_utils.gpunode.driver import host as driver_host
from ansible.module_utils.gpunode.host.packages import parse_dpkg_query
from conftest import ROOT, load_file

SIMNODE = ROOT / "tests" / "simnode"
driver_package = load_file(SIMNODE / "driver_package.py", "driver_package")
make_sysfs = load_file(SIMNODE / "make_sysfs.py", "make_sysfs_for_packages")

#: The specs whose loaded driver the scenarios and the demo upgrade or detect.
PACKAGED_SPECS = ["t4-vm", "hgx-h100"]
#: The image host: a driver no package owns, on purpose (molecule/image-host).
IMAGE_SPEC = "h100-vm-image"


def _origin(spec_name, dpkg_lines):
    """The origin gpunode's driver read gives the loaded driver of a spec, dpkg listing ``dpkg_lines``."""
    spec = make_sysfs.load_spec(spec_name)
    loaded = spec["modules"]["nvidia"]
    place = {"smi": None, "tools_prefix": None, "driver_root": None, "operator": False}
    library = f"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.{loaded}"
    host = unittest.mock.Mock()
    host.which.return_value = "/usr/bin/dpkg-query"
    host.run.return_value = (1, "", f"dpkg-query: no path found matching pattern {library}")
    with unittest.mock.patch.object(driver_host, "runfile_traces", return_value=[]):
        return driver_host.read_origin(host, place, [library], parse_dpkg_query(dpkg_lines), loaded)


@pytest.mark.parametrize("name", PACKAGED_SPECS)
def test_a_simulated_535_node_s_driver_is_owned_by_the_package_its_spec_names(name):
    package = make_sysfs.load_spec(name)["driver_package"]
    line = f"{package['name']}\t{package['version']}\tinstall ok installed\n"
    found = _origin(name, line)
    assert found["kind"] == "package"
    assert found["packages"] == [package["name"]]


@pytest.mark.parametrize("name", PACKAGED_SPECS)
def test_the_stub_is_replaced_by_any_other_branch_s_library_package(name):
    package = make_sysfs.load_spec(name)["driver_package"]
    control = driver_package.control_text(package, "amd64")
    # the fakes' libnvidia-compute-<b>-server (make-packages.sh) conflict with this virtual name
    assert "Provides: libnvidia-compute\n" in control
    assert "Conflicts: libnvidia-compute\n" in control
    assert "Replaces: libnvidia-compute\n" in control


def test_the_image_host_s_driver_is_owned_by_no_package():
    assert make_sysfs.load_spec(IMAGE_SPEC)["driver_package"] is None
    assert _origin(IMAGE_SPEC, "")["kind"] is None  # no files found here: smi and library absent


@pytest.mark.parametrize(("entry", "message"), [
    ({"name": "libnvidia-compute-535", "version": "550.54.15-0ubuntu1"}, "not a package of the loaded"),
    ({"name": "LibNvidia", "version": "535.129.03-0ubuntu1"}, "not a Debian package name"),
    ({"name": "libnvidia-compute-535", "version": "535.129.03"}, "not a Debian version"),
    ({"name": "libnvidia-compute-535", "version": "535.129.03-1", "files": []}, "unknown keys"),
    ({"name": "libnvidia-compute-535", "version": "535.129.03-1", "provides": "x"}, "must be a list"),
])
def test_a_bad_driver_package_entry_is_refused_naming_the_key(entry, message):
    data = {"modules": {"nvidia": "535.129.03"}, "driver_package": entry}
    with pytest.raises(make_sysfs.SpecError, match=message) as raised:
        make_sysfs.validate_spec(data, "bad.yml")
    assert "bad.yml: driver_package" in str(raised.value)


def test_a_package_without_a_loaded_module_is_refused():
    data = {"driver_package": {"name": "libnvidia-compute-535", "version": "535.129.03-1"}}
    with pytest.raises(make_sysfs.SpecError, match="none loaded"):
        make_sysfs.validate_spec(data, "bad.yml")


@pytest.mark.skipif(not shutil.which("dpkg-deb"), reason="dpkg-deb is not installed (dpkg)")
def test_the_stub_built_by_dpkg_deb_ships_the_nvml_library_where_ubuntu_puts_it(tmp_path):
    package = make_sysfs.load_spec("hgx-h100")["driver_package"]
    tree = tmp_path / "tree"
    driver_package.write_tree(package, "amd64", str(tree))
    deb = tmp_path / "stub.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(tree), str(deb)], check=True,
                   capture_output=True)
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], check=True, capture_output=True, text=True).stdout
    fields = subprocess.run(["dpkg-deb", "-f", str(deb), "Package", "Version"], check=True,
                            capture_output=True, text=True).stdout
    assert fields.splitlines() == ["Package: libnvidia-compute-535", "Version: 535.183.01-0ubuntu0.22.04.1"]
    assert "./usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.183.01\n" in listing
    assert "./usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 -> libnvidia-ml.so.535.183.01" in listing


def test_an_unknown_architecture_is_refused_naming_it():
    package = make_sysfs.load_spec("t4-vm")["driver_package"]
    with pytest.raises(driver_package.SpecError, match="'riscv64'"):
        driver_package.package_files(package, "riscv64")


def test_a_spec_without_a_package_installs_nothing(capsys):
    with unittest.mock.patch.object(driver_package, "install") as install:
        assert driver_package.main([os.path.join(str(SIMNODE), "specs", IMAGE_SPEC + ".yml")]) == 0
    install.assert_not_called()
    assert "(unchanged)" in capsys.readouterr().out
