"""The modules nvidia_driver_state, nvidia_kernel_modules and dpkg_database through main()."""

import os
import platform
import subprocess
import sys

import dpkg_database
import nvidia_driver_state
import nvidia_driver_verify
import nvidia_gpu_facts
import nvidia_kernel_modules
import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.common.warnings import get_warning_messages
from ansible.module_utils.gpunode.driver import host as driver_host
from ansible.module_utils.gpunode.driver import state_call as driver_state_call
from ansible.module_utils.gpunode.host import packages as dpkg_utils
from conftest import FIXTURES, ROOT, load_file, shared_files

PCI_IDS = str(FIXTURES / "pci-ids" / "pci.ids")
make_sysfs = load_file(ROOT / "tests" / "simnode" / "make_sysfs.py", "make_sysfs")

KERNEL = "6.1.0-18-amd64"
MODINFO_535 = f"""filename:       /lib/modules/{KERNEL}/updates/dkms/nvidia.ko
version:        535.129.03
license:        NVIDIA
name:           nvidia
vermagic:       {KERNEL} SMP preempt mod_unload modversions
"""


GPU_T4 = {"present": True, "devices": [{"device_id": "1eb8", "kind": "gpu"}], "nvswitch_count": 0,
          "supported_branches": ["620", "595", "580", "570", "535"], "recommended_branch": "620"}
SMI = "nvidia-smi --query-gpu=driver_version,persistence_mode --format=csv,noheader"


def owners_query(fake):
    """The command key of ``dpkg-query -S PATH...`` on ``fake``'s database (who owns the driver's files)."""
    return f"dpkg-query --admindir={fake.admindir} -S *"


class FakeHost:
    """A host under tmp_path: sysfs/proc trees plus scripted commands."""

    def __init__(self, root):
        self.root = root
        self.sys = root / "sys"
        self.proc = root / "proc"
        self.lib = root / "lib"
        self.modules_dir = root / "modules"
        # what the module reads of the node's system (state_call.os_info): no option gives it
        self.os_info = {"distribution": "Debian", "distribution_version": "12.7", "architecture": "x86_64",
                        "kernel": KERNEL}
        for path in (self.sys, self.proc, self.lib, self.modules_dir):
            path.mkdir()
        (self.proc / "modules").write_text("")
        self.admindir = root / "dpkg"
        (self.admindir / "updates").mkdir(parents=True)
        self.commands = {}
        self.calls = []
        self.bins = {"modinfo", "dkms", "nvidia-smi", "modprobe", "dpkg-query", "systemctl", "apt-cache"}
        self.packages("dkms 3.0.10-8", "gcc 4:12.2.0-3", "make 4.3-4.1")
        self.services()
        # the driver's files belong to a package (an image's driver is tested apart)
        self.commands[owners_query(self)] = (0, "nvidia-driver: /usr/bin/nvidia-smi\n", "")

    def load(self, version, *names, open_module=False):
        (self.proc / "modules").write_text(
            "".join(f"{n} 1 0 - Live 0x0\n" for n in names or ("nvidia",)))
        if "nvidia" in (names or ("nvidia",)):
            (self.sys / "module" / "nvidia").mkdir(parents=True, exist_ok=True)
            (self.sys / "module" / "nvidia" / "version").write_text(version + "\n")
            kind = "Open Kernel Module for x86_64" if open_module else "x86_64 Kernel Module"
            (self.proc / "driver" / "nvidia").mkdir(parents=True, exist_ok=True)
            (self.proc / "driver" / "nvidia" / "version").write_text(
                f"NVRM version: NVIDIA UNIX {kind}  {version}  Release Build\n")

    def userspace(self, version):
        (self.lib / f"libnvidia-ml.so.{version}").write_text("")

    def packages(self, *lines):
        text = ""
        for line in lines:
            name, version, *rest = line.split()
            want, status = (rest + ["install", "installed"][len(rest):])[:2]
            text += f"{name}\t{version}\t{want} ok {status}\n"
        fields = "${Package}\t${Version}\t${Status}\n"
        self.commands[f"dpkg-query --admindir={self.admindir} -W -f {fields}"] = (0, text, "")

    def services(self, persistenced="active"):
        text = (f"Id=nvidia-persistenced.service\nLoadState=loaded\nActiveState={persistenced}\n"
                f"UnitFileState=enabled\n\nId=nvidia-fabricmanager.service\nLoadState=not-found\n"
                "ActiveState=inactive\nUnitFileState=\n")
        self.commands["systemctl show --no-pager -p Id,LoadState,ActiveState,UnitFileState -- "
                      "nvidia-persistenced.service nvidia-fabricmanager.service"] = (0, text, "")

    def blacklist(self):
        path = self.root / "blacklist-nouveau.conf"
        path.write_text("blacklist nouveau\noptions nouveau modeset=0\n")
        return path

    def args(self, **extra):
        args = {"sysfs_root": str(self.sys), "proc_root": str(self.proc),
                "blacklist_path": str(self.root / "blacklist-nouveau.conf"), "gpu": GPU_T4}
        args.update(extra)
        return args

    def install(self, monkeypatch):
        host = self

        def get_bin_path(self, name, required=False, opt_dirs=None):
            if name in host.bins:
                return f"/usr/bin/{name}"
            if required:
                self.fail_json(msg=f"{name} not found")
            return None

        def run_command(self, argv, **kwargs):
            host.calls.append(list(argv))
            key = " ".join([argv[0].rsplit("/", 1)[-1], *argv[1:]])
            # a key ending in "*" answers every command that starts with what comes before it
            prefixed = (v for k, v in host.commands.items() if k.endswith("*") and key.startswith(k[:-1]))
            result = host.commands.get(key) or next(prefixed, (1, "", f"{key}: not scripted"))
            return result(argv) if callable(result) else result

        # where the node keeps dpkg's database and the userspace libraries: this host's tree
        monkeypatch.setattr(driver_host, "ADMINDIR", str(self.admindir))
        monkeypatch.setattr(driver_host, "LIB_DIRS", [str(self.lib)])
        monkeypatch.setattr(driver_host, "MODULES_DIR", str(self.modules_dir))
        monkeypatch.setattr(driver_state_call, "os_info", lambda: dict(host.os_info))
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    host = FakeHost(tmp_path)
    host.install(monkeypatch)
    return host


def converged(fake):
    (fake.modules_dir / KERNEL / "build").mkdir(parents=True)
    fake.load("535.129.03", "nvidia_uvm", "nvidia")
    fake.userspace("535.129.03")
    fake.blacklist()
    fake.packages("dkms 3.0.10-8", "gcc 4:12.2.0-3", "make 4.3-4.1", "nvidia-driver 535.129.03-1 hold")
    fake.commands[f"modinfo -k {KERNEL} nvidia"] = (0, MODINFO_535, "")
    fake.commands[SMI] = (0, "535.129.03, Enabled\n", "")


def test_state_of_a_bare_host_plans_everything_and_predicts_the_facts(fake, run_module):
    fake.commands["apt-cache madison nvidia-driver linux-headers-" + KERNEL] = (0, "", "")
    ok, result = run_module(nvidia_driver_state, fake.args(version="535.129.03", module_type="proprietary"),
                            check_mode=True)
    assert ok, result
    assert result["changed"] is False
    state = result["state"]
    assert state["module_on_disk"] is None and state["loaded"]["version"] is None
    assert state["userspace_version"] is None and state["dkms"] is None  # dkms status is not needed
    assert state["headers_present"] is False and state["secure_boot"] is False  # BIOS boot
    steps = result["plan"]
    assert steps["install"] and steps["load"] and steps["refresh_index"] and steps["blacklist_nouveau"]
    assert steps["prerequisites"] == [f"linux-headers-{KERNEL}"]
    facts = result["ansible_facts"]["nvidia_driver"]
    assert facts["installed_version"] == facts["loaded_version"] == "535.129.03" and facts["held"] is True
    assert result["before"]["installed_version"] is None and result["cache_updated"] is False


def test_a_converged_host_costs_four_commands_and_plans_nothing(fake, run_module):
    converged(fake)
    ok, result = run_module(nvidia_driver_state, fake.args(version="535.129.03", module_type="proprietary"))
    assert ok, result
    assert result["plan"]["converged"]
    assert result["state"]["smi"]["driver_versions"] == ["535.129.03"]
    assert result["ansible_facts"]["nvidia_driver"] == result["before"]
    assert result["before"] == {"method": "packages", "branch": "535", "wanted": "535.129.03",
                                "installed_version": "535.129.03", "loaded_version": "535.129.03",
                                "module_type": "proprietary", "held": True, "reboot_required": False,
                                "origin": "package", "driver_root": "/", "tools_prefix": "/usr",
                                "skipped": []}
    ran = sorted(call[0].rsplit("/", 1)[-1] for call in fake.calls)
    assert ran == ["dpkg-query", "modinfo", "nvidia-smi", "systemctl"]


def test_without_gpu_facts_the_module_detects_and_publishes_them(fake, run_module, tmp_path):
    ok, result = run_module(nvidia_driver_state, fake.args(gpu=None))
    assert ok, result
    assert result["ansible_facts"]["nvidia_gpu"]["present"] is False
    assert result["plan"]["converged"] and "nvidia_driver" not in result["ansible_facts"]


@pytest.mark.parametrize("fabric", ["auto", "nvlink5"])
def test_detection_in_the_plan_call_equals_the_detection_module(fake, run_module, tmp_path, fabric):
    # site.yml's driver play detects in its one state call: same facts as nvidia_gpu_facts, the
    # inventory's fabric (nvidia_driver_fabric) over the PCI bus's in both
    make_sysfs.make_tree(make_sysfs.load_spec("hgx-h100"), str(tmp_path / "node"))
    roots = {"sysfs_root": str(tmp_path / "node" / "sys"), "proc_root": str(tmp_path / "node" / "proc"),
             "pci_ids_path": PCI_IDS, "fabric": fabric}
    ok, detected = run_module(nvidia_gpu_facts, roots)
    assert ok, detected
    ok, result = run_module(nvidia_driver_state, fake.args(gpu=None, package_source="cuda", **roots),
                            check_mode=True)
    assert ok, result
    assert result["ansible_facts"]["nvidia_gpu"] == detected["ansible_facts"]["nvidia_gpu"]
    assert result["ansible_facts"]["nvidia_gpu"]["gpu_count"] == 8
    assert result["ansible_facts"]["nvidia_gpu"]["fabric"] == ("nvswitch" if fabric == "auto" else fabric)
    assert result["ansible_facts"]["nvidia_driver"]["branch"] == detected["ansible_facts"]["nvidia_gpu"][
        "recommended_branch"]


def stanza(name, version, *depends):
    """One package of an ``apt-cache show`` answer, its dependencies at exactly its own version."""
    deb = f"{version}-0ubuntu1"
    lines = [f"Package: {name}", f"Version: {deb}"]
    lines += [f"Depends: {', '.join(f'{d} (= {deb})' for d in depends)}"] if depends else []
    return "\n".join(lines) + "\n\n"


def test_a_first_install_of_an_older_point_release_asks_for_every_package_it_takes(fake, run_module):
    """The repository holds 570.133.20 and 570.124.06: each package of 570.124.06's set is asked for at
    it, as the repository's exact dependencies say (apt-cache show, down to the leaves)."""
    fake.os_info.update(distribution="Ubuntu", distribution_version="24.04")
    top = ("nvidia-headless-570-server-open", "nvidia-utils-570-server")
    leaves = ("libnvidia-compute-570-server", "nvidia-compute-utils-570-server",
              "nvidia-dkms-570-server-open")
    fake.commands["apt-cache show nvidia-open-570"] = (0, stanza("nvidia-open-570", "570.133.20", *top)
                                                       + stanza("nvidia-open-570", "570.124.06", *top), "")
    fake.commands["apt-cache show " + " ".join(top)] = (0, stanza(top[0], "570.124.06", *leaves[1:])
                                                        + stanza(top[1], "570.124.06", leaves[0]), "")
    fake.commands["apt-cache show " + " ".join(leaves)] = (0, "".join(stanza(n, "570.124.06")
                                                                      for n in leaves), "")
    ok, result = run_module(nvidia_driver_state, fake.args(version="570.124.06", package_source="cuda"),
                            check_mode=True)
    assert ok, result
    wanted = ["nvidia-open-570", *top, *leaves]
    assert result["plan"]["install_packages"] == [f"{name}=570.124.06-*" for name in wanted]
    assert "version_set" not in result["state"]


def test_dnf_s_set_is_what_provides_the_requirements_at_the_version():
    class Host:
        def __init__(self):
            self.calls = []

        def which(self, name):
            return f"/usr/bin/{name}"

        def run(self, argv):
            self.calls.append(argv)
            answers = {"nvidia-open-580.95.05": "nvidia-driver 580.95.05\nnvidia-driver 580.105.08\n"
                                                "kmod-nvidia-open-dkms 580.95.05\n",
                       "kmod-nvidia-open-dkms-580.95.05": "dkms 3.2.1\nnvidia-driver 580.95.05\n"}
            return 0, answers.get(" ".join(argv[7:]), ""), ""

    host = Host()
    found = driver_host.read_version_set(host, ["nvidia-open"], "580.95.05", "dnf")
    assert found == ["nvidia-open", "kmod-nvidia-open-dkms", "nvidia-driver"]
    assert host.calls[0][:6] == ["/usr/bin/dnf", "repoquery", "--quiet", "--requires", "--resolve", "--qf"]


VERA_RUBIN = {"description": "a GPU newer than the branch table", "modules": {}, "devices": [
    {"address": "0000:01:00.0", "vendor": "10de", "device": "3041", "subsystem_vendor": "10de",
     "subsystem_device": "0000", "class": "030200"}]}


@pytest.mark.parametrize("pin", [{}, {"branch": "620"}, {"version": "620.10.01"}])
def test_a_gpu_newer_than_the_table_is_told_once_and_not_again_under_a_pinned_branch(
        fake, run_module, tmp_path, pin):
    spec = tmp_path / "vera-rubin.yml"
    spec.write_text(yaml.safe_dump(VERA_RUBIN))
    make_sysfs.make_tree(make_sysfs.load_spec(str(spec)), str(tmp_path / "node"))
    roots = {"sysfs_root": str(tmp_path / "node" / "sys"), "proc_root": str(tmp_path / "node" / "proc"),
             "pci_ids_path": PCI_IDS}
    ok, result = run_module(nvidia_driver_state, fake.args(gpu=None, package_source="cuda", **roots, **pin),
                            check_mode=True)
    assert ok, result
    assert result["ansible_facts"]["nvidia_gpu"]["recommended_branch"] == "620"
    told = [w for w in get_warning_messages() if "10de:3041 is newer than the branch table" in w]
    assert len(told) == (0 if pin else 1) and all("the newest branch, 620" in w for w in told)


def test_a_pinned_branch_past_its_end_of_life_is_warned_about(fake, run_module):
    ok, result = run_module(nvidia_driver_state, fake.args(branch="535", package_source="cuda"),
                            check_mode=True)
    assert ok, result
    assert any("driver branch 535 has reached its end of life" in w for w in get_warning_messages())
    assert any("branch 535 has reached its end" in w for w in result["request"]["warnings"])


@pytest.mark.parametrize("extra, message", [
    ({"require_gpu": True}, "no NVIDIA GPU under "),
    ({"pci_ids_path": "pci.ids"}, "pci_ids_path pci.ids: not an absolute path"),
])
def test_detection_in_the_plan_call_keeps_the_detection_checks(fake, run_module, extra, message):
    ok, result = run_module(nvidia_driver_state, fake.args(gpu=None, **extra))
    assert not ok and message in result["msg"]
    assert fake.calls == []  # refused before anything on the host is read


def test_the_node_is_read_as_fact_gathering_reads_it(monkeypatch):
    # no fact gathering before the driver play: the module asks Ansible's own helpers
    monkeypatch.setattr(driver_state_call, "get_distribution", lambda: "Ubuntu")
    monkeypatch.setattr(driver_state_call, "get_distribution_version", lambda: "24.04")
    assert driver_state_call.os_info() == {"distribution": "Ubuntu", "distribution_version": "24.04",
                                           "architecture": platform.machine(), "kernel": os.uname().release}


def test_the_plan_follows_the_distribution_the_node_runs(fake, run_module):
    for distribution, version, folder in (("Ubuntu", "24.04", "/ubuntu2404/"),
                                          ("Debian", "12.7", "/debian12/")):
        fake.os_info.update(distribution=distribution, distribution_version=version)
        args = fake.args(branch="580", package_source="cuda")
        ok, result = run_module(nvidia_driver_state, args, check_mode=True)
        assert ok, result
        assert folder in result["request"]["repository"]["line"]
        state = result["state"]
        assert (state["distribution"], state["distribution_version"]) == (distribution, version)


@pytest.mark.parametrize("option", ["distribution", "distribution_version", "architecture", "kernel",
                                    "modules_dir"])
def test_what_the_node_tells_is_no_option(fake, run_module, option):
    ok, result = run_module(nvidia_driver_state, fake.args(**{option: "x"}), check_mode=True)
    assert not ok and "Unsupported parameters for " in result["msg"]
    assert f" module: {option}. Supported parameters include: " in result["msg"]


@pytest.mark.parametrize("path", shared_files("nvidia", "modinfo-nvidia-*"), ids=lambda p: p.name)
def test_state_reads_real_modinfo_output(fake, run_module, path):
    fake.commands[f"modinfo -k {KERNEL} nvidia"] = (0, path.read_text(), "")
    args = fake.args(branch="580", package_source="cuda")
    ok, result = run_module(nvidia_driver_state, args, check_mode=True)
    assert ok, result
    assert result["state"]["module_on_disk"]["version"] in path.name


def test_an_interrupted_dpkg_is_seen(fake, run_module):
    converged(fake)
    (fake.admindir / "updates" / "0001").write_text(
        "Package: nvidia-driver\nStatus: install ok half-configured\n")
    ok, result = run_module(nvidia_driver_state, fake.args(version="535.129.03", module_type="proprietary"))
    assert ok, result
    assert result["plan"]["repair_dpkg"] and not result["plan"]["converged"]
    assert "dpkg was interrupted (1 journal entry" in result["plan"]["reasons"][0]


def test_strings_from_the_command_line_are_booleans(fake, run_module):
    converged(fake)
    ok, result = run_module(nvidia_driver_state, fake.args(version="535.129.03", module_type="proprietary",
                                                            hold="false", persistence="no"))
    assert ok, result
    assert result["plan"]["unhold"] == ["nvidia-driver"] and result["request"]["persistence"] is False


def test_verify_reads_the_same_request_and_fails_on_what_the_run_did_not_leave(fake, run_module):
    converged(fake)
    args = fake.args(version="535.129.03", module_type="proprietary")
    ok, result = run_module(nvidia_driver_verify, args)
    assert ok, result
    assert result["ansible_facts"]["nvidia_driver"]["loaded_version"] == "535.129.03"
    assert "changes" not in result  # told on the controller (filter_plugins/nvidia_driver.py)
    fake.commands[SMI] = (18, "Failed to initialize NVML: Driver/library version mismatch\n", "")
    ok, result = run_module(nvidia_driver_verify, args)
    assert not ok and "nvidia-smi: Failed to initialize NVML" in result["msg"]
    ok, result = run_module(nvidia_driver_verify, dict(args, version="535.261.03"))
    assert not ok and "after installing, the driver for kernel" in result["msg"]
    # the arguments are those of nvidia_driver_state, checked as it checks them
    ok, result = run_module(nvidia_driver_verify, dict(args, method="apt"))
    assert not ok and "value of method must be one of" in result["msg"]


@pytest.mark.parametrize("option", ["stage", "driver", "before", "ran", "update_cache"])
def test_verify_takes_no_protocol_from_the_role(fake, run_module, option):
    ok, result = run_module(nvidia_driver_verify, fake.args(**{option: {}}))
    assert not ok and "Unsupported parameters" in result["msg"] and option in result["msg"]


@pytest.mark.parametrize("option", ["stage", "refreshed", "ran", "before"])
def test_the_plan_call_takes_no_protocol_from_the_role(fake, run_module, option):
    ok, result = run_module(nvidia_driver_state, fake.args(**{option: True}))
    assert not ok and "Unsupported parameters" in result["msg"] and option in result["msg"]


@pytest.mark.parametrize(("byte", "expected"), [(1, True), (0, False)])
def test_secure_boot_from_the_efi_variable(fake, run_module, byte, expected):
    efivars = fake.sys / "firmware" / "efi" / "efivars"
    efivars.mkdir(parents=True)
    (efivars / "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c").write_bytes(bytes([6, 0, 0, 0, byte]))
    converged(fake)
    ok, result = run_module(nvidia_driver_state, fake.args(version="535.129.03", module_type="proprietary"))
    assert ok and result["state"]["secure_boot"] is expected


def test_secure_boot_from_mokutil_refuses_an_unsigned_build(fake, run_module):
    (fake.sys / "firmware" / "efi").mkdir(parents=True)
    fake.bins.add("mokutil")
    fake.commands["mokutil --sb-state"] = (0, "SecureBoot enabled\n", "")
    ok, result = run_module(nvidia_driver_state, fake.args(branch="535"))
    assert not ok and "Secure Boot is on" in result["msg"] and "Nothing was changed" in result["msg"]


def test_refusals_come_before_anything_is_read(fake, run_module):
    k80 = {"present": True, "devices": [{"device_id": "102d", "kind": "gpu"}], "nvswitch_count": 0,
           "supported_branches": ["470"], "recommended_branch": "470"}
    ok, result = run_module(nvidia_driver_state, fake.args(branch="550", gpu=k80))
    assert not ok
    assert "branch 550 cannot drive every GPU on this host; branches that can: 470" in result["msg"]
    assert fake.calls == []
    ok, result = run_module(nvidia_driver_state, fake.args(version="latest"))
    assert not ok and "'latest' is not an NVIDIA driver version" in result["msg"]


# ------------------------------------------------------------------ nvidia_kernel_modules


def scripted_modprobe(fake, busy=()):
    def modprobe(argv):
        loaded = (fake.proc / "modules").read_text().splitlines()
        if argv[1] == "-r":
            name = argv[2]
            if name in busy:
                return 1, "", f"modprobe: FATAL: Module {name} is in use."
            (fake.proc / "modules").write_text("".join(f"{line}\n" for line in loaded
                                                        if line.split()[0] != name))
            return 0, "", ""
        (fake.proc / "modules").write_text("".join(f"{line}\n" for line in [*loaded, f"{argv[1]} 1 0"]))
        return 0, "", ""

    for name in ("nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia_peermem", "nvidia"):
        fake.commands[f"modprobe -r {name}"] = modprobe
        fake.commands[f"modprobe {name}"] = modprobe


def test_unload_in_order_and_only_what_is_loaded(fake, run_module):
    fake.load("535.129.03", "nvidia_uvm", "nvidia_modeset", "nvidia")
    scripted_modprobe(fake)
    ok, result = run_module(nvidia_kernel_modules, {"state": "absent", "proc_root": str(fake.proc)})
    assert ok and result["changed"]
    assert result["unloaded"] == ["nvidia_uvm", "nvidia_modeset", "nvidia"]
    assert (fake.proc / "modules").read_text() == ""
    ok, result = run_module(nvidia_kernel_modules, {"state": "absent", "proc_root": str(fake.proc)})
    assert ok and not result["changed"]


def test_unload_check_mode_changes_nothing(fake, run_module):
    fake.load("535.129.03", "nvidia")
    scripted_modprobe(fake)
    ok, result = run_module(nvidia_kernel_modules, {"state": "absent", "proc_root": str(fake.proc)},
                            check_mode=True)
    assert ok and result["changed"] and result["unloaded"] == ["nvidia"]
    assert fake.calls == []


def test_busy_module_is_reported_or_fails(fake, run_module):
    fake.load("535.129.03", "nvidia_uvm", "nvidia")
    scripted_modprobe(fake, busy=("nvidia",))
    ok, result = run_module(nvidia_kernel_modules, {"state": "absent", "proc_root": str(fake.proc)})
    assert ok and result["unloaded"] == [] and "in use" in result["busy"]["nvidia"]
    fake.load("535.129.03", "nvidia_uvm", "nvidia")
    ok, result = run_module(nvidia_kernel_modules, {"state": "absent", "proc_root": str(fake.proc),
                                                    "fail_on_busy": True})
    assert not ok and "cannot unload nvidia" in result["msg"] and "put back" in result["msg"]
    assert [line.split()[0] for line in (fake.proc / "modules").read_text().splitlines()] == [
        "nvidia", "nvidia_uvm"]  # what was unloaded is loaded again


def test_load_goes_in_reverse_and_is_idempotent(fake, run_module):
    scripted_modprobe(fake)
    args = {"names": ["nvidia_uvm", "nvidia"], "state": "present", "proc_root": str(fake.proc)}
    ok, result = run_module(nvidia_kernel_modules, args)
    assert ok and result["loaded"] == ["nvidia", "nvidia_uvm"]
    ok, result = run_module(nvidia_kernel_modules, args)
    assert ok and not result["changed"]


@pytest.mark.parametrize("case", [
    ((0, MODINFO_535, ""), "570", "is 535.129.03, wanted 570"),
    ((1, "", "modinfo: ERROR: Module nvidia not found."), "535.129.03", "is absent, wanted 535.129.03"),
])
def test_a_reload_refuses_a_module_on_disk_that_is_not_the_wanted_driver(fake, run_module, monkeypatch, case):
    modinfo, wanted, problem = case
    # the driver role's one guard between the install and the unload: the running driver stays
    monkeypatch.setattr(nvidia_kernel_modules, "running_kernel", lambda: KERNEL)
    fake.load("535.129.03", "nvidia_uvm", "nvidia")
    scripted_modprobe(fake)
    fake.commands[f"modinfo -k {KERNEL} nvidia"] = modinfo
    args = {"state": "reloaded", "version": wanted, "stop_services": ["nvidia-persistenced"],
            "proc_root": str(fake.proc)}
    ok, result = run_module(nvidia_kernel_modules, args)
    assert not ok
    assert result["msg"] == (f"the nvidia module on disk for kernel {KERNEL} {problem}: nothing was stopped, "
                             "unloaded or loaded")
    assert [call[0].rsplit("/", 1)[-1] for call in fake.calls] == ["modinfo"]
    ok, result = run_module(nvidia_kernel_modules, args, check_mode=True)  # a simulated install: not checked
    assert ok and result["unloaded"] == ["nvidia_uvm", "nvidia"] and "on_disk_version" not in result


def test_a_reload_of_the_wanted_driver_on_disk_says_its_version(fake, run_module, monkeypatch):
    monkeypatch.setattr(nvidia_kernel_modules, "running_kernel", lambda: KERNEL)
    fake.load("535.104.05", "nvidia")
    scripted_modprobe(fake)
    fake.commands[f"modinfo -k {KERNEL} nvidia"] = (0, MODINFO_535, "")
    ok, result = run_module(nvidia_kernel_modules, {"state": "reloaded", "version": "535",
                                                    "proc_root": str(fake.proc)})
    assert ok and result["on_disk_version"] == "535.129.03"  # what the fabric manager is pinned to
    assert result["unloaded"] == ["nvidia"] and result["loaded"] == ["nvidia", "nvidia_uvm"]


def test_load_failure_names_the_module(fake, run_module):
    fake.commands["modprobe nvidia"] = (1, "", "modprobe: FATAL: Module nvidia not found in directory")
    ok, result = run_module(nvidia_kernel_modules, {"names": ["nvidia"], "proc_root": str(fake.proc)})
    assert not ok and "modprobe nvidia failed" in result["msg"] and "not found" in result["msg"]


def scripted_systemctl(fake, running):
    def systemctl(argv):
        verb, name = argv[-2], argv[-1]
        if verb == "--quiet":
            verb, name = "is-active", argv[-1]
        if verb == "is-active":
            return (0 if name in running else 3), "", ""
        if verb == "stop":
            running.discard(name)
        elif verb == "start":
            running.add(name)
        return 0, "", ""

    for name in ("nvidia-persistenced", "nvidia-fabricmanager", "dcgm"):
        for verb in ("stop", "start"):
            fake.commands[f"systemctl {verb} {name}"] = systemctl
        fake.commands[f"systemctl is-active --quiet {name}"] = systemctl


def test_reload_stops_what_holds_the_gpu_and_starts_it_again(fake, run_module):
    fake.load("535.129.03", "nvidia_uvm", "nvidia")
    scripted_modprobe(fake)
    running = {"nvidia-persistenced"}
    scripted_systemctl(fake, running)
    args = {"state": "reloaded", "stop_services": ["nvidia-persistenced", "dcgm"],
            "proc_root": str(fake.proc)}
    ok, result = run_module(nvidia_kernel_modules, args)
    assert ok and result["unloaded"] == ["nvidia_uvm", "nvidia"]
    assert result["loaded"] == ["nvidia", "nvidia_uvm"]
    assert result["stopped"] == [] and running == {"nvidia-persistenced"} and result["nvidia_loaded"]
    stops = [c for c in fake.calls if c[-2:] == ["stop", "nvidia-persistenced"]]
    assert len(stops) == 1 and not any("dcgm" in c and "stop" in c for c in fake.calls)


RDMA_NODE = ("nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia_peermem", "nvidia")


def modprobe_loads(fake):
    """The modules ``fake`` was asked to load, in order."""
    return [call[1] for call in fake.calls if call[0].endswith("modprobe") and call[1] != "-r"]


def test_reload_puts_back_every_module_it_unloaded_the_last_unloaded_first(fake, run_module):
    # a GPUDirect RDMA node: a driver change kept nvidia_peermem (and the display modules) away until a reboot
    fake.load("535.129.03", *RDMA_NODE)
    scripted_modprobe(fake)
    running = {"nvidia-persistenced"}
    scripted_systemctl(fake, running)
    args = {"state": "reloaded", "stop_services": ["nvidia-persistenced"], "proc_root": str(fake.proc)}
    ok, result = run_module(nvidia_kernel_modules, args)
    assert ok, result
    assert result["unloaded"] == list(RDMA_NODE)
    assert result["loaded"] == result["restored"] == list(reversed(RDMA_NODE)) == modprobe_loads(fake)
    assert running == {"nvidia-persistenced"} and result["stopped"] == []
    ok, result = run_module(nvidia_kernel_modules, args, check_mode=True)
    assert ok and result["unloaded"] == list(RDMA_NODE) and result["restored"] == []


def test_modules_an_earlier_unload_took_go_back_when_asked_for(fake, run_module):
    # the .run install: state=absent before the installer, then this load, given what it unloaded
    fake.load("535.129.03", "nvidia_peermem", "nvidia")
    scripted_modprobe(fake)
    ok, result = run_module(nvidia_kernel_modules, {"state": "absent", "proc_root": str(fake.proc)})
    assert ok and result["unloaded"] == ["nvidia_peermem", "nvidia"]
    ok, result = run_module(nvidia_kernel_modules, {"state": "reloaded", "proc_root": str(fake.proc),
                                                    "load": ["nvidia_uvm", "nvidia", *result["unloaded"]]})
    assert ok and result["loaded"] == ["nvidia", "nvidia_peermem", "nvidia_uvm"] and result["restored"] == []


def test_a_module_that_does_not_come_back_fails_the_reload_after_the_driver_and_services_are_back(
        fake, run_module):
    fake.load("535.129.03", "nvidia_uvm", "nvidia_peermem", "nvidia")
    scripted_modprobe(fake)
    fake.commands["modprobe nvidia_peermem"] = (1, "", "modprobe: ERROR: could not insert 'nvidia_peermem': "
                                                       "Invalid argument")
    running = {"nvidia-persistenced"}
    scripted_systemctl(fake, running)
    args = {"state": "reloaded", "stop_services": ["nvidia-persistenced"], "proc_root": str(fake.proc)}
    ok, result = run_module(nvidia_kernel_modules, args)
    assert not ok
    assert result["msg"] == ("modprobe nvidia_peermem failed: modprobe: ERROR: could not insert "
                             "'nvidia_peermem': Invalid argument (it needs ib_core (the InfiniBand stack, "
                             "inbox or DOCA-OFED) loaded first; GPUDirect RDMA is off until it loads)")
    assert result["loaded"] == result["restored"] == ["nvidia", "nvidia_uvm"]
    assert running == {"nvidia-persistenced"} and result["stopped"] == []


def test_reload_over_a_busy_module_puts_everything_back(fake, run_module):
    fake.load("535.129.03", "nvidia_uvm", "nvidia")
    scripted_modprobe(fake, busy=("nvidia",))
    running = {"nvidia-persistenced"}
    scripted_systemctl(fake, running)
    args = {"state": "reloaded", "stop_services": ["nvidia-persistenced"], "proc_root": str(fake.proc)}
    ok, result = run_module(nvidia_kernel_modules, args)
    assert ok and "nvidia" in result["busy"] and result["loaded"] == [] and result["unloaded"] == []
    assert running == {"nvidia-persistenced"} and result["stopped"] == []
    assert "nvidia_uvm" in (fake.proc / "modules").read_text()




# ------------------------------------------------------------------ dpkg_database on a real dpkg


def dpkg_admindir(tmp_path, *packages):
    admindir = tmp_path / "dpkg"
    (admindir / "updates").mkdir(parents=True)
    (admindir / "info").mkdir()
    (admindir / "available").write_text("")
    (admindir / "status").write_text("".join(
        f"Package: {name}\nStatus: {want} ok {status}\nPriority: optional\nSection: misc\n"
        f"Maintainer: gpunode tests <t@example.invalid>\nArchitecture: all\nVersion: {version}\n"
        "Description: test package\n\n" for name, version, want, status in packages))
    return admindir


def selections(admindir):
    out = subprocess.run(["dpkg-query", f"--admindir={admindir}", "-W", "-f", "${Package} ${Status}\n"],
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split(" ", 1) for line in out.splitlines())


needs_dpkg = pytest.mark.skipif(not os.path.exists("/usr/bin/dpkg"), reason="dpkg not on this machine")


@needs_dpkg
def test_holds_and_releases_with_the_real_dpkg(tmp_path, run_module):
    admindir = dpkg_admindir(tmp_path, ("nvidia-driver", "535.129.03-1", "install", "installed"),
                             ("nvidia-utils-535-server", "535.129.03-1", "hold", "installed"))
    args = {"hold": ["nvidia-driver"], "unhold": ["nvidia-utils-535-server"], "admindir": str(admindir)}
    ok, result = run_module(dpkg_database, args, check_mode=True, diff=True)
    assert ok and result["changed"]
    assert result["diff"]["after"] == "nvidia-driver hold\nnvidia-utils-535-server install\n"
    assert selections(admindir)["nvidia-driver"] == "install ok installed"
    ok, result = run_module(dpkg_database, args)
    assert ok and result["held"] == ["nvidia-driver"] and result["released"] == ["nvidia-utils-535-server"]
    assert selections(admindir) == {"nvidia-driver": "hold ok installed",
                                    "nvidia-utils-535-server": "install ok installed"}
    ok, result = run_module(dpkg_database, args)
    assert ok and not result["changed"]


@needs_dpkg
def test_holding_a_package_that_is_not_installed_fails_except_in_check_mode(tmp_path, run_module):
    admindir = dpkg_admindir(tmp_path, ("dkms", "3.0.10-8", "install", "installed"))
    args = {"hold": ["cuda-drivers-570"], "admindir": str(admindir)}
    ok, result = run_module(dpkg_database, args)
    assert not ok and result["msg"] == "cannot hold cuda-drivers-570: not installed; nothing was changed"
    ok, result = run_module(dpkg_database, args, check_mode=True)
    assert ok and result["held"] == ["cuda-drivers-570"]


@needs_dpkg
def test_an_interrupted_run_is_finished_before_the_holds(tmp_path, run_module):
    admindir = dpkg_admindir(tmp_path, ("nvidia-driver", "535.129.03-1", "install", "half-configured"))
    args = {"configure_pending": True, "hold": ["nvidia-driver"], "admindir": str(admindir)}
    ok, result = run_module(dpkg_database, args)
    assert ok, result
    assert result["configured"] == ["packages left unfinished: nvidia-driver (half-configured)"]
    assert selections(admindir)["nvidia-driver"] == "hold ok installed"


HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def test_the_frontend_lock_is_waited_for_then_taken(tmp_path):
    """Another process (as apt would) holds lock-frontend; the lock waits, polling, until it is free."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp_path / "lock-frontend")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "locked\n"
    polls = []

    def release_on_first_poll(_seconds):
        polls.append(_seconds)
        holder.stdin.close()
        holder.wait()

    with dpkg_utils.FrontendLock(str(tmp_path), timeout=60, sleep=release_on_first_poll):
        fd = os.open(tmp_path / "lock-frontend", os.O_RDWR)
        assert polls == [0.5]
        # the lock is ours now: a lock from another process would be refused
        try_lock = ("import fcntl,os,sys; fd=os.open(sys.argv[1], os.O_RDWR); "
                    "fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)")
        probe = subprocess.run([sys.executable, "-c", try_lock, str(tmp_path / "lock-frontend")],
                               capture_output=True, check=False)
        assert probe.returncode != 0
        os.close(fd)


def test_the_frontend_lock_gives_up_after_the_timeout_saying_so(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(tmp_path / "lock-frontend")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "locked\n"
    clock = iter(range(0, 1000, 100))
    try:
        lock = dpkg_utils.FrontendLock(str(tmp_path), timeout=300, clock=lambda: next(clock),
                                       sleep=lambda _s: None)
        refused = pytest.raises(dpkg_utils.DpkgError, match="still locked by another apt or dpkg after 300 s")
        with refused, lock:
            pass
    finally:
        holder.stdin.close()
        holder.wait()


def test_the_plan_request_and_state_return_what_return_documents(fake, run_module):
    """RETURN's contains: is the plan's contract (ansible-doc shows it): every key is documented, and
    every documented key is returned."""
    fake.commands["apt-cache madison nvidia-driver linux-headers-" + KERNEL] = (0, "", "")
    ok, result = run_module(nvidia_driver_state, fake.args(version="535.129.03", module_type="proprietary"),
                            check_mode=True)
    assert ok, result
    documented = yaml.safe_load(nvidia_driver_state.RETURN)
    for name in ("request", "plan", "state"):
        contains = documented[name]["contains"]
        assert set(result[name]) <= set(contains), name
        always = {key for key, entry in contains.items() if entry.get("returned") == "always"}
        assert always <= set(result[name]), name


SIGNED_EXACT = f"linux-modules-nvidia-570-server-open-{KERNEL}"


def ubuntu_secure_boot(fake):
    (fake.sys / "firmware" / "efi").mkdir(parents=True)
    fake.bins.add("mokutil")
    fake.commands["mokutil --sb-state"] = (0, "SecureBoot enabled\n", "")
    fake.os_info.update(distribution="Ubuntu", distribution_version="24.04")
    return fake.args(branch="570")


def test_secure_boot_on_ubuntu_plans_the_signed_modules_the_archive_has(fake, run_module):
    args = ubuntu_secure_boot(fake)
    fake.commands["apt-cache pkgnames linux-modules-nvidia-"] = (
        0, f"{SIGNED_EXACT}\nlinux-modules-nvidia-570-server-open-amd64\n", "")
    fake.commands[f"apt-cache show --no-all-versions {SIGNED_EXACT} *"] = (
        0, f"Package: {SIGNED_EXACT}\nVersion: 6.1.0-18.1+1\n"
           "Depends: nvidia-kernel-common-570-server (<= 570.133.20-1), nvidia-kernel-common-570-server "
           "(>= 570.133.20)\n", "")
    ok, result = run_module(nvidia_driver_state, args, check_mode=True)
    assert ok, result
    assert result["request"]["method"] == "ubuntu-signed" and result["request"]["wanted"] == "570.133.20"
    assert result["plan"]["install_packages"] == ["nvidia-headless-no-dkms-570-server-open=570.133.20-*",
                                                  "nvidia-utils-570-server=570.133.20-*", SIGNED_EXACT]
    assert result["plan"]["kernel_modules"] == ["linux-modules-nvidia-570-server-open-amd64"]
    assert result["plan"]["prerequisites"] == [] and result["plan"]["disruptive"]
    assert any("Canonical's signed NVIDIA modules" in reason for reason in result["plan"]["reasons"])


def commands_run(fake):
    """The commands ``fake`` ran, as their keys (the program's name, then its arguments)."""
    return [" ".join([argv[0].rsplit("/", 1)[-1], *argv[1:]]) for argv in fake.calls]


def test_a_refreshed_index_without_a_signed_module_for_the_kernel_is_refused(fake, run_module):
    args = ubuntu_secure_boot(fake)
    fake.bins.add("apt-get")
    fake.commands["apt-get update -q"] = (0, "Reading package lists...\n", "")
    fake.commands["apt-cache pkgnames linux-modules-nvidia-"] = (
        0, "linux-modules-nvidia-570-server-open-6.1.0-17-amd64\n", "")
    # in check mode the index is read as it is: a name it lacks may only be unknown yet
    ok, result = run_module(nvidia_driver_state, dict(args, update_cache=True), check_mode=True)
    assert ok and result["cache_updated"] is False and result["plan"]["refresh_index"], result
    assert "apt-get update -q" not in commands_run(fake)
    ok, result = run_module(nvidia_driver_state, dict(args, update_cache=True))
    run = commands_run(fake)
    refreshed_at = run.index("apt-get update -q")  # before the archive is read
    assert "apt-cache pkgnames linux-modules-nvidia-" in run[refreshed_at:]
    assert not ok
    assert f"no NVIDIA open kernel module of branch 570 signed for kernel {KERNEL}" in result["msg"]
    assert "built for kernels: 6.1.0-17-amd64" in result["msg"]


def test_an_index_refresh_that_fails_says_so_and_plans_nothing(fake, run_module):
    args = ubuntu_secure_boot(fake)
    fake.bins.add("apt-get")
    fake.commands["apt-get update -q"] = (100, "", "E: The repository 'http://x noble' has no Release file")
    ok, result = run_module(nvidia_driver_state, dict(args, update_cache=True))
    assert not ok and result["msg"].startswith("apt-get update failed (rc 100): E: The repository")
    assert "plan" not in result


NEXT_KERNEL = "6.1.0-30-amd64"


def dkms_status(*kernels):
    return (0, "".join(f"nvidia/535.129.03, {k}, x86_64: installed\n" for k in kernels), "")


def test_a_kernel_installed_after_the_driver_gets_its_module_before_it_boots(fake, run_module):
    # unattended-upgrades installed 6.1.0-30 with its headers; DKMS's own hook did not build for it
    converged(fake)
    (fake.modules_dir / NEXT_KERNEL / "build").mkdir(parents=True)
    (fake.modules_dir / "5.10.0-28-amd64" / "build").mkdir(parents=True)  # older: never boots next
    (fake.modules_dir / "6.1.0-31-amd64").mkdir()  # no headers: DKMS cannot build for it
    fake.commands["dkms status"] = dkms_status(KERNEL)
    ok, result = run_module(nvidia_driver_state, fake.args(version="535.129.03", module_type="proprietary"))
    assert ok, result
    steps = result["plan"]
    assert result["state"]["boot_kernels"] == [NEXT_KERNEL]
    assert steps["dkms_kernels"] == [NEXT_KERNEL] and not steps["converged"]
    assert (steps["dkms_module"], steps["dkms_version"]) == ("nvidia", "535.129.03")
    assert not (steps["dkms_build"] or steps["install"] or steps["unload"] or steps["disruptive"])
    assert f"not built for kernel {NEXT_KERNEL}, which boots next" in " ".join(steps["reasons"])


def test_a_kernel_that_boots_next_with_its_module_built_changes_nothing(fake, run_module):
    converged(fake)
    (fake.modules_dir / NEXT_KERNEL / "build").mkdir(parents=True)
    fake.commands["dkms status"] = dkms_status(KERNEL, NEXT_KERNEL)
    ok, result = run_module(nvidia_driver_state, fake.args(version="535.129.03", module_type="proprietary"))
    assert ok, result
    assert result["plan"]["converged"] and result["plan"]["dkms_kernels"] == []
