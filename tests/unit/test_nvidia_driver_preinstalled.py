"""Image hosts: nvidia_driver_state adopts the driver the host runs (method preinstalled), and the
install methods refuse one no package and no .run install owns; read as the real H100 VM printed it
(../shared/fixtures/real-hosts/h100-sxm5-80gb-vm: pci.txt, proc-driver-nvidia-version.txt,
smi-driver.csv), without kmod and without systemd."""

import re

import nvidia_driver_state
import pytest
from ansible.module_utils.gpunode.driver import roots
from ansible.module_utils.gpunode.driver.preinstalled import describe
from ansible.module_utils.gpunode.driver.roots import location, origin
from ansible.module_utils.gpunode.host.packages import parse_dpkg_search
from conftest import ROOT, load_file, shared_files
from test_nvidia_driver_modules import SMI, FakeHost, converged, owners_query

H100_VM = "real-hosts/h100-sxm5-80gb-vm"
GPU_H100 = {"present": True, "devices": [{"device_id": "2330", "kind": "gpu"}], "nvswitch_count": 0,
            "supported_branches": ["620", "595", "580", "570", "535"], "recommended_branch": "620"}


def h100_image_host(fake, reading, tmp_path, monkeypatch):
    """The real H100 VM: its PCI devices and module version as read, its nvidia-smi and
    libnvidia-ml under an image prefix (/usr/local/nvidia here under tmp_path), no kmod, no
    systemd, dpkg without a driver package."""
    proc_version = (reading / "proc-driver-nvidia-version.txt").read_text()
    version = re.search(r"  (\d+\.\d+\.\d+)  ", proc_version).group(1)
    (fake.proc / "modules").write_text("nvidia 1 0 - Live 0x0\n")
    (fake.proc / "driver" / "nvidia").mkdir(parents=True)
    (fake.proc / "driver" / "nvidia" / "version").write_text(proc_version)  # no sysfs version: proc alone
    prefix = tmp_path / "usr-local-nvidia"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "nvidia-smi").write_text("")
    (prefix / "lib64").mkdir()
    (prefix / "lib64" / f"libnvidia-ml.so.{version}").write_text("")
    monkeypatch.setattr(roots, "TOOL_PREFIXES", (str(prefix), "/usr"))
    monkeypatch.setattr(roots, "RUNFILE_TRACES", ())
    monkeypatch.setattr(roots, "RUNFILE_RECORD", str(tmp_path / "no-record"))
    fake.bins = {"dpkg-query", "apt-cache"}  # no modinfo, no systemctl, nvidia-smi not on PATH
    fake.commands[owners_query(fake)] = (1, "", "dpkg-query: no path found matching pattern\n")
    fake.commands[SMI] = (0, (reading / "smi-driver.csv").read_text(), "")
    return version, str(prefix)


@pytest.fixture(params=shared_files(H100_VM, "proc-driver-nvidia-version.txt"))
def image(request, tmp_path, monkeypatch):
    (tmp_path / "node").mkdir()
    fake = FakeHost(tmp_path / "node")
    fake.install(monkeypatch)
    version, prefix = h100_image_host(fake, request.param.parent, tmp_path, monkeypatch)
    return fake, version, prefix


def adopting(fake):
    return fake.args(method="preinstalled", gpu=GPU_H100)


def test_preinstalled_adopts_the_image_driver_and_plans_nothing(image, run_module):
    fake, version, prefix = image
    ok, result = run_module(nvidia_driver_state, adopting(fake), check_mode=True)
    assert ok, result
    assert version == "580.159.04"
    assert result["plan"]["converged"]
    facts = result["ansible_facts"]["nvidia_driver"]
    assert (facts["method"], facts["loaded_version"]) == ("preinstalled", version)
    assert facts["module_type"] == "open"
    assert (facts["origin"], facts["tools_prefix"], facts["driver_root"]) == ("image", prefix, prefix)
    assert facts["installed_version"] == version and facts["reboot_required"] is False
    # persistence is on (smi-driver.csv says Enabled): nothing to skip even without systemd
    assert facts["skipped"] == []
    ran = sorted(call[0].rsplit("/", 1)[-1] for call in fake.calls)
    assert ran == ["dpkg-query", "dpkg-query", "nvidia-smi"]  # the packages, who owns the files, the query
    assert [call[0] for call in fake.calls if call[0].endswith("nvidia-smi")] == [f"{prefix}/bin/nvidia-smi"]


def test_preinstalled_refuses_a_version_or_branch_other_than_asked_naming_both(image, run_module):
    fake, _version, _prefix = image
    for asked, setting in (({"version": "580.95.05"}, "nvidia_driver_version asks for 580.95.05"),
                           ({"branch": "590"}, "nvidia_driver_branch asks for 590")):
        ok, result = run_module(nvidia_driver_state, fake.args(method="preinstalled", gpu=GPU_H100, **asked))
        assert not ok
        assert result["msg"].startswith("the preinstalled driver is 580.159.04 (open), brought by the image, "
                                        "owned by no package and no .run install, under ")
        assert setting in result["msg"]
    ok, result = run_module(nvidia_driver_state, fake.args(method="preinstalled", gpu=GPU_H100, branch="580"))
    assert ok, result


def test_preinstalled_refuses_a_branch_that_does_not_drive_the_gpus(image, run_module):
    fake, _version, _prefix = image
    gpu = dict(GPU_H100, supported_branches=["470"])
    ok, result = run_module(nvidia_driver_state, fake.args(method="preinstalled", gpu=gpu))
    assert not ok and "cannot drive every GPU on this host; branches that can: 470" in result["msg"]


def test_preinstalled_without_systemd_skips_persistence_when_it_is_off(image, run_module):
    fake, version, _prefix = image
    fake.commands[SMI] = (0, f"{version}, Disabled\n", "")
    ok, result = run_module(nvidia_driver_state, adopting(fake), check_mode=True)
    assert ok, result
    assert result["plan"]["converged"]
    assert result["ansible_facts"]["nvidia_driver"]["skipped"] == [
        "nvidia-persistenced: no systemd on this host to run it"]


@pytest.mark.parametrize("method", ["packages", "runfile"])
def test_the_install_methods_refuse_the_image_driver_before_any_change(image, run_module, method):
    fake, _version, prefix = image
    fake.os_info.update(distribution="Ubuntu", distribution_version="24.04")
    args = fake.args(method=method, gpu=GPU_H100, version="580.95.05", runfile_checksum="sha256:" + "0" * 64)
    ok, result = run_module(nvidia_driver_state, args, check_mode=True)
    assert not ok
    assert result["msg"] == (
        f"nvidia_driver_method: {method} would install a second driver over the loaded NVIDIA driver "
        f"580.159.04 (open), brought by the image, owned by no package and no .run install, under {prefix}. "
        "Set nvidia_driver_method: preinstalled to adopt it (gpunode then verifies it and never replaces "
        "it), or remove it first. Nothing was changed.")


def test_a_driver_a_package_owns_is_the_packages_methods_to_replace(image, run_module):
    fake, _version, _prefix = image
    fake.commands[owners_query(fake)] = (0, "nvidia-utils-580-server: /usr/local/nvidia/bin/nvidia-smi\n", "")
    fake.commands["apt-cache madison*"] = (0, "", "")
    fake.os_info.update(distribution="Ubuntu", distribution_version="24.04")
    args = fake.args(method="packages", gpu=GPU_H100, branch="580")
    ok, result = run_module(nvidia_driver_state, args, check_mode=True)
    assert ok, result
    assert result["state"]["origin"]["kind"] == "package"
    assert result["state"]["origin"]["packages"] == ["nvidia-utils-580-server"]


def test_preinstalled_holds_the_packages_that_own_the_driver(image, run_module):
    fake, _version, _prefix = image
    owned = "libnvidia-compute-580: /usr/lib/libnvidia-ml.so.580.159.04\n"
    fake.commands[owners_query(fake)] = (0, owned, "")
    ok, result = run_module(nvidia_driver_state, adopting(fake), check_mode=True)
    assert ok, result
    assert result["plan"]["hold"] == ["libnvidia-compute-580"] and not result["plan"]["install"]
    changes = load_file(ROOT / "filter_plugins" / "nvidia_driver.py", "driver_filters").nvidia_driver_changes
    predicted = changes(result["plan"], result["before"], result["ansible_facts"]["nvidia_driver"])
    assert predicted == ["driver packages held: libnvidia-compute-580"]


def test_a_driver_of_the_gpu_operator_is_refused_by_every_method():
    place = location("/run/nvidia/driver/usr/bin/nvidia-smi")
    assert place == {"smi": "/run/nvidia/driver/usr/bin/nvidia-smi", "tools_prefix": "/run/nvidia/driver/usr",
                     "driver_root": "/run/nvidia/driver", "operator": True}
    state = {"loaded": {"version": "580.159.04", "module_type": "open"}, "location": place,
             "origin": origin(place, [], [])}
    assert describe(state["loaded"], state) == ("580.159.04 (open), managed by the NVIDIA GPU Operator, "
                                                "under /run/nvidia/driver/usr")


def test_driver_roots_where_images_put_the_driver():
    assert location("/usr/bin/nvidia-smi")["driver_root"] == "/"
    gke = location("/home/kubernetes/bin/nvidia/bin/nvidia-smi")
    assert (gke["tools_prefix"], gke["driver_root"]) == ("/home/kubernetes/bin/nvidia",) * 2
    # a wrapper on PATH (the real-host check's guard): the driver is where the image put it
    wrapped = location("/tmp/guard/bin/nvidia-smi", lambda path: path == "/usr/local/nvidia/bin/nvidia-smi")
    assert (wrapped["smi"], wrapped["driver_root"]) == ("/tmp/guard/bin/nvidia-smi", "/usr/local/nvidia")


def test_runfile_traces_make_a_runfile_origin():
    place = location("/usr/bin/nvidia-smi")
    assert origin(place, [], ["/usr/bin/nvidia-uninstall"])["kind"] == "runfile"
    assert origin(place, [], [])["kind"] == "image"


def test_dpkg_search_output():
    text = ("nvidia-utils-580: /usr/bin/nvidia-smi\nlibnvidia-compute-580:amd64, libx: /usr/lib/x\n"
            "diversion by foo from: /usr/bin/bar\n")
    assert parse_dpkg_search(text) == ["libnvidia-compute-580", "libx", "nvidia-utils-580"]


def test_the_refusal_comes_before_what_the_package_data_says_of_the_branch(image, run_module):
    # Debian 12 packages no 620 (the H100's recommended branch): the user hears of the image's driver
    fake, _version, _prefix = image
    ok, result = run_module(nvidia_driver_state, fake.args(method="packages", gpu=GPU_H100), check_mode=True)
    assert not ok
    assert result["msg"].startswith("nvidia_driver_method: packages would install a second driver over the "
                                    "loaded NVIDIA driver 580.159.04 (open), brought by the image")


def test_without_systemd_the_packages_method_skips_the_daemons_and_says_why(tmp_path, monkeypatch,
                                                                            run_module):
    fake = FakeHost(tmp_path)
    fake.install(monkeypatch)
    converged(fake)
    fake.bins.discard("systemctl")
    fake.commands[SMI] = (0, "535.129.03, Disabled\n", "")
    ok, result = run_module(nvidia_driver_state, fake.args(version="535.129.03", module_type="proprietary"),
                            check_mode=True)
    assert ok, result
    assert result["plan"]["persistence"] == [] and result["plan"]["converged"]
    assert result["ansible_facts"]["nvidia_driver"]["skipped"] == [
        "nvidia-persistenced: no systemd on this host to run it"]
