"""The modules nvidia_driver_state and nvidia_kernel_modules through main()."""

import nvidia_driver_state
import nvidia_kernel_modules
import pytest
import yaml
from ansible.module_utils import basic
from conftest import shared_files

KERNEL = "6.1.0-18-amd64"
MODINFO_535 = f"""filename:       /lib/modules/{KERNEL}/updates/dkms/nvidia.ko
version:        535.129.03
license:        NVIDIA
name:           nvidia
vermagic:       {KERNEL} SMP preempt mod_unload modversions
"""


def spec_options(module):
    return yaml.safe_load(module.DOCUMENTATION)["options"]


@pytest.mark.parametrize("module", [nvidia_driver_state, nvidia_kernel_modules])
def test_documentation_matches_argument_spec(module, monkeypatch):
    captured = {}

    def fake_init(self, argument_spec, **kwargs):
        captured.update(argument_spec)
        raise RuntimeError("stop")

    monkeypatch.setattr(basic.AnsibleModule, "__init__", fake_init)
    with pytest.raises(RuntimeError):
        module.build_module()
    documented = spec_options(module)
    assert set(documented) == set(captured)
    for name, spec in captured.items():
        assert documented[name]["type"] == spec["type"], name
        assert documented[name].get("default") == spec.get("default"), name
        assert documented[name].get("choices") == spec.get("choices"), name


class FakeHost:
    """A host under tmp_path: sysfs/proc trees plus scripted commands."""

    def __init__(self, root):
        self.root = root
        self.sys = root / "sys"
        self.proc = root / "proc"
        self.lib = root / "lib"
        self.modules_dir = root / "modules"
        for path in (self.sys, self.proc, self.lib, self.modules_dir):
            path.mkdir()
        (self.proc / "modules").write_text("")
        self.commands = {}
        self.calls = []
        self.bins = {"modinfo", "dkms", "nvidia-smi", "modprobe"}

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

    def args(self, **extra):
        args = {"sysfs_root": str(self.sys), "proc_root": str(self.proc), "kernel": KERNEL,
                "modules_dir": str(self.modules_dir), "lib_dirs": [str(self.lib)]}
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
            result = host.commands.get(key, (1, "", f"{key}: not scripted"))
            return result(argv) if callable(result) else result

        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    host = FakeHost(tmp_path)
    host.install(monkeypatch)
    return host


def test_state_of_a_bare_host(fake, run_module):
    fake.commands["dkms status nvidia"] = (0, "", "")
    ok, result = run_module(nvidia_driver_state, fake.args(wanted="535"))
    assert ok, result
    assert result["changed"] is False
    assert result["module_on_disk"] is None and result["loaded"] is None
    assert result["userspace_version"] is None and result["dkms"] == []
    assert result["headers_present"] is False
    assert result["secure_boot"] is False  # no EFI directory: BIOS boot
    assert result["smi"] is None
    assert result["plan"]["install"] and result["plan"]["load"]


def test_state_of_a_converged_host(fake, run_module):
    (fake.modules_dir / KERNEL / "build").mkdir(parents=True)
    fake.load("535.129.03", "nvidia_uvm", "nvidia")
    fake.userspace("535.129.03")
    fake.commands[f"modinfo -k {KERNEL} nvidia"] = (0, MODINFO_535, "")
    fake.commands["dkms status nvidia"] = (0, f"nvidia/535.129.03, {KERNEL}, x86_64: installed\n", "")
    fake.commands["nvidia-smi --query-gpu=driver_version,persistence_mode --format=csv,noheader"] = (
        0, "535.129.03, Enabled\n", "")
    ok, result = run_module(nvidia_driver_state, fake.args(wanted="535.129.03"), check_mode=True)
    assert ok, result
    assert result["headers_present"]
    assert result["module_on_disk"]["version"] == "535.129.03"
    assert result["module_on_disk"]["flavor"] == "proprietary"
    assert result["loaded"] == {"version": "535.129.03", "flavor": "proprietary"}
    assert result["loaded_modules"] == ["nvidia_uvm", "nvidia"]
    assert result["smi"]["driver_versions"] == ["535.129.03"]
    assert result["plan"]["up_to_date"]


@pytest.mark.parametrize("path", shared_files("nvidia", "modinfo-nvidia-*"), ids=lambda p: p.name)
def test_state_reads_real_modinfo_output(fake, run_module, path):
    fake.commands[f"modinfo -k {KERNEL} nvidia"] = (0, path.read_text(), "")
    fake.commands["dkms status nvidia"] = (0, "", "")
    ok, result = run_module(nvidia_driver_state, fake.args())
    assert ok, result
    assert result["module_on_disk"]["version"] in path.name
    assert "plan" not in result


def test_state_reports_a_driver_library_mismatch(fake, run_module):
    fake.load("535.129.03")
    fake.userspace("550.54.15")
    fake.commands["dkms status nvidia"] = (0, "", "")
    fake.commands["nvidia-smi --query-gpu=driver_version,persistence_mode --format=csv,noheader"] = (
        18, "Failed to initialize NVML: Driver/library version mismatch\n", "")
    ok, result = run_module(nvidia_driver_state, fake.args(wanted="550.54.15"))
    assert ok, result
    assert "mismatch" in result["smi"]["error"]
    assert result["plan"]["unload"]


@pytest.mark.parametrize(("byte", "expected"), [(1, True), (0, False)])
def test_secure_boot_from_the_efi_variable(fake, run_module, byte, expected):
    efivars = fake.sys / "firmware" / "efi" / "efivars"
    efivars.mkdir(parents=True)
    (efivars / "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c").write_bytes(bytes([6, 0, 0, 0, byte]))
    fake.commands["dkms status nvidia"] = (0, "", "")
    ok, result = run_module(nvidia_driver_state, fake.args())
    assert ok and result["secure_boot"] is expected


def test_secure_boot_from_mokutil_when_efivars_unreadable(fake, run_module):
    (fake.sys / "firmware" / "efi").mkdir(parents=True)
    fake.bins.add("mokutil")
    fake.commands["mokutil --sb-state"] = (0, "SecureBoot enabled\n", "")
    fake.commands["dkms status nvidia"] = (0, "", "")
    ok, result = run_module(nvidia_driver_state, fake.args())
    assert ok and result["secure_boot"] is True


def test_state_fails_clearly(fake, run_module):
    fake.commands["dkms status nvidia"] = (3, "", "dkms exploded")
    ok, result = run_module(nvidia_driver_state, fake.args())
    assert not ok and "dkms exploded" in result["msg"]
    fake.commands["dkms status nvidia"] = (0, "", "")
    ok, result = run_module(nvidia_driver_state, fake.args(wanted="latest"))
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
    assert ok and result["unloaded"] == ["nvidia_uvm"]
    assert "in use" in result["busy"]["nvidia"]
    ok, result = run_module(nvidia_kernel_modules, {"state": "absent", "proc_root": str(fake.proc),
                                                    "fail_on_busy": True})
    assert not ok and "cannot unload nvidia" in result["msg"]


def test_load_goes_in_reverse_and_is_idempotent(fake, run_module):
    scripted_modprobe(fake)
    args = {"names": ["nvidia_uvm", "nvidia"], "state": "present", "proc_root": str(fake.proc)}
    ok, result = run_module(nvidia_kernel_modules, args)
    assert ok and result["loaded"] == ["nvidia", "nvidia_uvm"]
    ok, result = run_module(nvidia_kernel_modules, args)
    assert ok and not result["changed"]


def test_load_failure_names_the_module(fake, run_module):
    fake.commands["modprobe nvidia"] = (1, "", "modprobe: FATAL: Module nvidia not found in directory")
    ok, result = run_module(nvidia_kernel_modules, {"names": ["nvidia"], "proc_root": str(fake.proc)})
    assert not ok and "modprobe nvidia failed" in result["msg"] and "not found" in result["msg"]


def test_request_is_decided_and_checked_before_anything_is_read(fake, run_module):
    fake.commands["dkms status nvidia"] = (0, "", "")
    args = fake.args(version="570.133.20", supported_branches=["595", "570", "535"], gpu_device_ids=["1eb8"])
    ok, result = run_module(nvidia_driver_state, args)
    assert ok, result
    assert result["request"]["wanted"] == "570.133.20"
    assert result["request"]["module_type"] == "open"
    assert "--kernel-module-type=open" in result["request"]["runfile_flags"]
    assert result["plan"]["install"]

    fake.calls.clear()
    args = fake.args(branch="550", supported_branches=["470"], recommended_branch="470",
                     gpu_device_ids=["102d"])
    ok, result = run_module(nvidia_driver_state, args)
    assert not ok and "branch 550 cannot drive every GPU" in result["msg"]
    assert fake.calls == []  # refused before running anything

    args = fake.args(supported_branches=["470"], recommended_branch="470", gpu_device_ids=["102d"])
    ok, result = run_module(nvidia_driver_state, args)
    assert ok and result["request"] == {"branch": "470", "version": None, "wanted": "470",
                                        "module_type": "proprietary", "runfile_flags": None}
