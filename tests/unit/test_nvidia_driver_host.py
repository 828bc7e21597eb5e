"""gpunode.driver.host and .stages: what nvidia_driver_state reads from a node, through a Host
over a scripted module, and the checks after an install; errors raise, nothing fails the module."""

import pytest
from ansible.module_utils.gpunode.driver import host as driver_host
from ansible.module_utils.gpunode.driver.driver import SECURE_BOOT_EFIVAR, DriverError
from ansible.module_utils.gpunode.driver.stages import VerifyError, public, verify
from ansible.module_utils.gpunode.host.commands import C_LOCALE, Host

SMI_ARGS = ["--query-gpu=driver_version,persistence_mode", "--format=csv,noheader"]


class ScriptedModule:
    """The three methods of AnsibleModule a Host uses; commands answer from ``commands``."""

    def __init__(self, bins=(), commands=None):
        self.bins = set(bins)
        self.commands = commands or {}
        self.calls = []
        self.warnings = []

    def get_bin_path(self, name, opt_dirs=None):
        return f"/usr/bin/{name}" if name in self.bins else None

    def run_command(self, argv, environ_update=None):
        assert environ_update == C_LOCALE
        self.calls.append(argv)
        return self.commands.get(" ".join([argv[0].rsplit("/", 1)[-1], *argv[1:]]), (1, "", "not scripted"))

    def warn(self, message):
        self.warnings.append(message)


def node(bins=(), commands=None):
    module = ScriptedModule(bins, commands)
    return Host(module), module


def test_without_kmod_the_module_on_disk_is_unknown_and_nothing_fails():
    # images without kmod (the real H100 host): the loaded module is read from sysfs/procfs
    host, module = node()
    assert driver_host.read_module_on_disk(host, "6.1.0-18-amd64") is None
    assert module.calls == []


def test_a_missing_module_is_none_and_a_broken_modinfo_names_the_command():
    host, _module = node(["modinfo"])
    assert driver_host.read_module_on_disk(host, "6.1.0-18-amd64") is None
    host, _module = node(["modinfo"], {"modinfo -k 6.1.0-18-amd64 nvidia": (0, "license: NVIDIA\n", "")})
    with pytest.raises(DriverError, match=r"^modinfo -k 6.1.0-18-amd64 nvidia: "):
        driver_host.read_module_on_disk(host, "6.1.0-18-amd64")


def test_dkms_is_read_under_every_name_nvidias_packages_register():
    # EL's kmod-nvidia-open-dkms registers nvidia-open (NVIDIA/yum-packaging-dkms-nvidia,
    # dkms-open-nvidia.spec: dkms_name nvidia-open); everything else NVIDIA ships registers nvidia
    status = ("nvidia-open/580.95.05, 5.14.0-570.el9.x86_64, x86_64: installed\n"
              "zfs/2.1.15, 5.14.0-570.el9.x86_64, x86_64: installed\n"
              "nvidia/570.172.08: added\n")
    host, module = node(["dkms"], {"dkms status": (0, status, "")})
    assert [(e["module"], e["version"], e["status"]) for e in driver_host.read_dkms(host)] == [
        ("nvidia-open", "580.95.05", "installed"), ("nvidia", "570.172.08", "added")]
    assert module.calls == [["/usr/bin/dkms", "status"]]


def test_dkms_and_dpkg_failures_raise_with_their_output(tmp_path):
    host, _module = node(["dkms", "dpkg-query"], {"dkms status": (3, "", "broken tree\n")})
    with pytest.raises(DriverError, match=r"^dkms status failed: broken tree$"):
        driver_host.read_dkms(host)
    with pytest.raises(DriverError, match=r"^dpkg-query -W failed \(rc 1\): not scripted$"):
        driver_host.read_packages(host, str(tmp_path))
    host, _module = node()
    assert driver_host.read_dkms(host) == [] and driver_host.read_packages(host, str(tmp_path)) == (None, [])


def test_secure_boot_from_the_efi_variable_else_mokutil_else_bios(tmp_path):
    efivars = tmp_path / "firmware" / "efi" / "efivars"
    host, module = node(["mokutil"], {"mokutil --sb-state": (0, "SecureBoot enabled\n", "")})
    assert driver_host.read_secure_boot(host, str(tmp_path)) is False and module.calls == []  # BIOS
    efivars.mkdir(parents=True)
    assert driver_host.read_secure_boot(host, str(tmp_path)) is True  # mokutil
    (efivars / SECURE_BOOT_EFIVAR).write_bytes(b"\x06\x00\x00\x00\x00")
    assert driver_host.read_secure_boot(host, str(tmp_path)) is False
    (efivars / SECURE_BOOT_EFIVAR).write_bytes(b"\x06\x00")
    with pytest.raises(DriverError, match=f"/efivars/{SECURE_BOOT_EFIVAR}: SecureBoot EFI variable is "):
        driver_host.read_secure_boot(host, str(tmp_path))
    host, _module = node()
    assert driver_host.read_secure_boot(host, str(tmp_path / "none")) is False


@pytest.mark.parametrize(("bins", "answer", "expected"), [
    ((), None, {"error": "nvidia-smi not found", "driver_versions": [], "persistence_mode": []}),
    (("nvidia-smi",), (9, "", ""), {"error": "rc 9", "driver_versions": [], "persistence_mode": []}),
    (("nvidia-smi",), (0, "535.129.03, Enabled\n", ""),
     {"error": None, "driver_versions": ["535.129.03"], "persistence_mode": ["Enabled"]}),
])
def test_smi_answers_or_says_why_not(bins, answer, expected):
    module = ScriptedModule(bins, {" ".join(["nvidia-smi", *SMI_ARGS]): answer} if answer else {})
    assert driver_host.read_smi(Host(module)) == expected


def test_initramfs_tool_is_the_first_found():
    assert driver_host.initramfs_command(node(["dracut"])[0]) == ["/usr/bin/dracut", "--force"]
    assert driver_host.initramfs_command(node(["dracut", "update-initramfs"])[0]) == [
        "/usr/bin/update-initramfs", "-u"]
    assert driver_host.initramfs_command(node()[0]) is None


def test_the_index_is_read_only_with_apt_and_names():
    host, module = node(["apt-cache"], {"apt-cache madison dkms": (0, "dkms | 3.0.10-8 | x Packages\n", "")})
    assert driver_host.read_index(host, []) is None and module.calls == []
    assert "dkms" in driver_host.read_index(host, ["dkms"])
    assert driver_host.read_index(node()[0], ["dkms"]) is None


STATE = {"kernel": "6.1.0-18-amd64", "module_on_disk": {"version": "535.129.03"}, "packages": {}, "index": {},
         "userspace_version": "535.129.03", "loaded": {"version": "535.129.03", "modules": ["nvidia"]},
         "smi": {"error": None, "driver_versions": ["535.129.03"]}}
GPUS = {"devices": [{"kind": "gpu"}, {"kind": "audio"}]}


def test_verify_raises_with_the_public_state():
    verify(STATE, {"wanted": "535"}, GPUS)
    with pytest.raises(VerifyError, match=r"is 535.129.03 .userspace 535.129.03., wanted 550$") as raised:
        verify(STATE, {"wanted": "550"}, GPUS)
    assert raised.value.result == {"state": public(STATE)} and "packages" not in raised.value.result["state"]
    with pytest.raises(VerifyError, match=r"^nvidia-smi: \['535.129.03'\]; wanted 535.129.03 on 2 GPU"):
        verify(STATE, {"wanted": "535"}, {"devices": [{"kind": "gpu"}] * 2})
