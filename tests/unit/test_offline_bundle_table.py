"""The offline bundle lists what the nvidia_driver role installs: a table of nodes, each
against the role's own plan (issue 27).

Each row is a node (distribution and release, GPUs, kernel, Secure Boot) and its inventory
values. The oracle is the role's own plan call (``nvidia_driver_state``'s
``stages.evaluate``) on that node without a driver: a sysfs tree with its GPUs, dpkg with
nothing installed, no kernel module, an empty apt index, the role's defaults
(roles/nvidia_driver/defaults/main.yml) under the row's values. What that plan installs
(prerequisites, the driver's apt requests, the signed modules that follow the kernel, the
fabric manager, the runfile) must be exactly what the bundle lists for the node, and the
driver it names the one the bundle names. ``expect`` pins what the issue's rows say a user
gets, read from the role's plan too.

``preinstalled`` rows are nodes whose image brings the driver (``image_driver``: loaded, owned
by no package): the role adopts it and installs nothing, so the bundle carries nothing for them
and names the driver as the inventory asks it (the image's version is the node's to tell).
A method added later adds its rows here. The RHEL family's rows are ``BareNode``s with rpm and
dnf instead of dpkg and apt (its os-release says Rocky); for them the dnf module stream the
role enables first (EL 9) and the version lock it adds first (EL 10) are the ones the bundle
resolves the node's RPMs under.
"""

import pathlib

import pytest
import yaml
from ansible.module_utils.gpunode.bundle import plan as ob
from ansible.module_utils.gpunode.driver import host as driver_host
from ansible.module_utils.gpunode.driver import state_call
from ansible.module_utils.gpunode.driver.driver import SECURE_BOOT_EFIVAR
from ansible.module_utils.gpunode.driver.gpu import gather
from ansible.module_utils.gpunode.driver.stages import evaluate
from ansible.module_utils.gpunode.host import packages_rpm
from ansible.module_utils.gpunode.host.commands import Host

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLE_DEFAULTS = yaml.safe_load((ROOT / "roles/nvidia_driver/defaults/main.yml").read_text())
TOOLKIT = "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)"
CHECKSUM = "sha256:" + "ab" * 32
#: PCI class of each kind of device the rows name (KIND_BY_CLASS in driver/gpu.py)
GPU_CLASS, NVSWITCH_CLASS, MELLANOX_CLASS = "0x030200", "0x068000", "0x020700"
T4, V100, A100, H100, B200, K80 = "1eb8", "1db1", "20b2", "2330", "2901", "102d"
NOBLE = {"distribution": "Ubuntu", "distribution_version": "24.04", "kernel": "6.8.0-60-generic"}
JAMMY = {"distribution": "Ubuntu", "distribution_version": "22.04", "kernel": "5.15.0-139-generic"}
BOOKWORM = {"distribution": "Debian", "distribution_version": "12", "kernel": "6.1.0-37-amd64"}
TRIXIE = {"distribution": "Debian", "distribution_version": "13", "kernel": "6.12.48+deb13-amd64"}
ROCKY9 = {"distribution": "Rocky", "distribution_version": "9.5", "kernel": "5.14.0-503.14.1.el9_5.x86_64"}
RHEL10 = {"distribution": "RedHat", "distribution_version": "10.0", "kernel": "6.12.0-55.9.1.el10_0.x86_64"}

# (id, node, inventory values, expect: (method, branch, version, module type) or None)
ROWS = [
    # the three rows
    ("noble-t4-version-570", dict(NOBLE, gpus=[T4]), {"version": "570.133.20"},
     ("packages", "570", "570.133.20", "open")),
    ("noble-t4-branch-580", dict(NOBLE, gpus=[T4]), {"branch": "580"}, ("packages", "580", None, "open")),
    ("jammy-v100-version-570", dict(JAMMY, gpus=[V100]), {"version": "570.172.08"},
     ("packages", "570", "570.172.08", "proprietary")),
    # packages from the distribution
    ("noble-t4-defaults", dict(NOBLE, gpus=[T4]), {}, None),
    ("noble-t4-proprietary", dict(NOBLE, gpus=[T4]), {"branch": "580", "module_type": "proprietary"},
     ("packages", "580", None, "proprietary")),
    ("noble-v100-recommended", dict(NOBLE, gpus=[V100]), {}, ("packages", "580", None, "proprietary")),
    ("noble-k80-legacy", dict(NOBLE, gpus=[K80]), {}, ("packages", "470", None, "proprietary")),
    ("noble-t4-no-prerequisites", dict(NOBLE, gpus=[T4]), {"branch": "570", "install_prerequisites": False},
     None),
    ("noble-h100-nvswitch", dict(NOBLE, gpus=[H100] * 8, nvswitches=4), {"branch": "580"}, None),
    ("noble-a100-fabricmanager-never", dict(NOBLE, gpus=[A100] * 8, nvswitches=6),
     {"branch": "580", "fabricmanager": "never"}, None),
    ("bookworm-t4-535", dict(BOOKWORM, gpus=[T4]), {"branch": "535"},
     ("packages", "535", None, "proprietary")),
    ("bookworm-t4-535-open", dict(BOOKWORM, gpus=[T4]), {"branch": "535", "module_type": "open"}, None),
    ("trixie-t4-550", dict(TRIXIE, gpus=[T4]), {"version": "550.163.01"}, None),
    # NVIDIA's CUDA repository
    ("noble-t4-cuda-580", dict(NOBLE, gpus=[T4]), {"package_source": "cuda", "branch": "580"}, None),
    ("noble-t4-cuda-version", dict(NOBLE, gpus=[T4]), {"package_source": "cuda", "version": "580.95.05"},
     ("packages", "580", "580.95.05", "open")),
    ("noble-b200-cuda-595", dict(NOBLE, gpus=[B200] * 8, mellanox_unread=2), {"package_source": "cuda",
                                                                             "branch": "595"}, None),
    ("bookworm-v100-cuda-570", dict(BOOKWORM, gpus=[V100]), {"package_source": "cuda", "branch": "570"},
     None),
    ("jammy-h100-cuda-570-nvswitch", dict(JAMMY, gpus=[H100] * 8, nvswitches=4),
     {"package_source": "cuda", "version": "570.172.08"}, None),
    # Ubuntu's signed modules: chosen, and the role's switch to them under Secure Boot
    ("noble-t4-ubuntu-signed", dict(NOBLE, gpus=[T4]), {"method": "ubuntu-signed", "branch": "580"},
     ("ubuntu-signed", "580", None, "open")),
    ("jammy-v100-ubuntu-signed-version", dict(JAMMY, gpus=[V100]),
     {"method": "ubuntu-signed", "version": "570.172.08"},
     ("ubuntu-signed", "570", "570.172.08", "proprietary")),
    ("noble-t4-secure-boot", dict(NOBLE, gpus=[T4], secure_boot=True), {"branch": "580"},
     ("ubuntu-signed", "580", None, "open")),
    ("noble-t4-secure-boot-own-key", dict(NOBLE, gpus=[T4], secure_boot=True),
     {"branch": "580", "signing_key": "/root/mok.key", "signing_cert": "/root/mok.der"},
     ("packages", "580", None, "open")),
    # NVIDIA's installer
    ("bookworm-t4-runfile", dict(BOOKWORM, gpus=[T4]), {"method": "runfile", "version": "580.95.05",
                                                         "runfile_checksum": CHECKSUM},
     ("runfile", "580", "580.95.05", "open")),
    ("jammy-v100-runfile-url", dict(JAMMY, gpus=[V100]),
     {"method": "runfile", "version": "570.172.08", "runfile_checksum": CHECKSUM,
      "runfile_url": "http://mirror.local/NVIDIA-Linux-x86_64-570.172.08.run"}, None),
    # the RHEL family: NVIDIA's CUDA repository through dnf (EL 9's module streams, EL 10's version lock)
    ("rocky9-t4-cuda-580", dict(ROCKY9, gpus=[T4]), {"package_source": "cuda", "branch": "580"},
     ("packages", "580", None, "open")),
    ("rocky9-v100-cuda-version", dict(ROCKY9, gpus=[V100]),
     {"package_source": "cuda", "version": "580.95.05"}, ("packages", "580", "580.95.05", "proprietary")),
    ("rocky9-h100-cuda-nvswitch", dict(ROCKY9, gpus=[H100] * 8, nvswitches=4),
     {"package_source": "cuda", "version": "570.172.08"}, ("packages", "570", "570.172.08", "open")),
    ("rhel10-b200-cuda-595", dict(RHEL10, gpus=[B200] * 8, mellanox_unread=2), {"package_source": "cuda",
                                                                               "branch": "595"}, None),
    ("rhel10-t4-runfile", dict(RHEL10, gpus=[T4]), {"method": "runfile", "version": "580.95.05",
                                                     "runfile_checksum": CHECKSUM},
     ("runfile", "580", "580.95.05", "open")),
    ("rocky9-v100-cuda-570", dict(ROCKY9, gpus=[V100]), {"package_source": "cuda", "branch": "570"},
     ("packages", "570", None, "proprietary")),
    ("rocky9-t4-cuda-proprietary", dict(ROCKY9, gpus=[T4]),
     {"package_source": "cuda", "branch": "580", "module_type": "proprietary"},
     ("packages", "580", None, "proprietary")),
    ("rocky9-a100-fabricmanager-never", dict(ROCKY9, gpus=[A100] * 8, nvswitches=6),
     {"package_source": "cuda", "branch": "580", "fabricmanager": "never"}, None),
    ("rocky9-t4-no-prerequisites", dict(ROCKY9, gpus=[T4]),
     {"package_source": "cuda", "branch": "580", "install_prerequisites": False}, None),
    ("rhel10-t4-cuda-version", dict(RHEL10, gpus=[T4]), {"package_source": "cuda", "version": "580.95.05"},
     ("packages", "580", "580.95.05", "open")),
    ("rhel10-h100-cuda-570-nvswitch", dict(RHEL10, gpus=[H100] * 8, nvswitches=4),
     {"package_source": "cuda", "branch": "570"}, ("packages", "570", None, "open")),
    ("rhel10-v100-cuda-proprietary", dict(RHEL10, gpus=[V100]), {"package_source": "cuda"},
     ("packages", "580", None, "proprietary")),
    ("rocky9-h100-preinstalled", dict(ROCKY9, gpus=[H100], image_driver="580.95.05"),
     {"method": "preinstalled"}, ("preinstalled", "580", "580.95.05", "open")),
    # the image's driver, adopted: nothing to carry
    ("noble-h100-preinstalled", dict(NOBLE, gpus=[H100], image_driver="580.159.04"),
     {"method": "preinstalled"}, ("preinstalled", "580", "580.159.04", "open")),
    ("jammy-t4-preinstalled-branch", dict(JAMMY, gpus=[T4], image_driver="570.172.08"),
     {"method": "preinstalled", "branch": "570"}, ("preinstalled", "570", "570.172.08", "open")),
    # no GPU: the role does nothing
    ("noble-no-gpu", dict(NOBLE, gpus=[]), {}, None),
]


class BareNode:
    """A node without the NVIDIA driver, as the module reads it: its GPUs in a sysfs tree,
    dpkg with nothing installed, no module for the kernel, an apt index that knows nothing
    yet, no unit; Secure Boot from the EFI variable (BIOS boot without it). ``image_driver``:
    the open module of that version loaded, as an image brings it (procfs only, no package)."""

    def __init__(self, root, node):
        self.root = root
        self.sys, self.proc = root / "sys", root / "proc"
        for path in (self.sys, self.proc, root / "lib", root / "modules", root / "dpkg" / "updates"):
            path.mkdir(parents=True)
        (self.proc / "modules").write_text("nvidia 1 0 - Live 0x0\n" if node.get("image_driver") else "")
        if node.get("image_driver"):
            (self.proc / "driver" / "nvidia").mkdir(parents=True)
            (self.proc / "driver" / "nvidia" / "version").write_text(
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
                f"{node['image_driver']}  Release Build\n")
        devices = [("0x10de", g, GPU_CLASS) for g in node["gpus"]]
        devices += [("0x10de", "1af1", NVSWITCH_CLASS)] * node.get("nvswitches", 0)
        # an HGX B200's ConnectX-7 management functions, their VPD not readable (the bundle cannot read
        # it either: both take the nvlink5 side)
        devices += [("0x15b3", "1021", MELLANOX_CLASS)] * node.get("mellanox_unread", 0)
        for index, (vendor, device, pci_class) in enumerate(devices):
            folder = self.sys / "bus" / "pci" / "devices" / f"0000:{index + 16:02x}:00.0"
            folder.mkdir(parents=True)
            for name, value in (("vendor", vendor), ("device", "0x" + device), ("class", pci_class)):
                (folder / name).write_text(value + "\n")
            if vendor == "0x15b3":
                (folder / "vpd").write_bytes(b"\x00not a VPD")
        if node.get("secure_boot"):
            (self.sys / "firmware" / "efi" / "efivars").mkdir(parents=True)
            (self.sys / "firmware" / "efi" / "efivars" / SECURE_BOOT_EFIVAR).write_bytes(b"\x06\0\0\0\x01")
        self.warnings = []
        # the RHEL family: rpm (nothing installed) and dnf, its os-release saying so
        el = node["distribution"] in ("Rocky", "RedHat")
        self.programs = ("modinfo", "rpm", "dnf", "systemctl") if el else \
            ("modinfo", "dpkg-query", "apt-cache", "systemctl")
        os_release = 'ID="rocky"\nID_LIKE="rhel centos fedora"\n' if el else "ID=debian\n"
        (root / "os-release").write_text(os_release)

    def get_bin_path(self, name, opt_dirs=None):
        return f"/usr/bin/{name}" if name in self.programs else None

    def run_command(self, argv, environ_update=None):
        if argv[0].endswith("modinfo"):
            return 1, "", "modinfo: ERROR: Module nvidia not found."
        return 0, "", ""

    def warn(self, message):
        self.warnings.append(message)


def role_plan(tmp_path, monkeypatch, node, values):
    """``(request, plan)`` of the role's plan call on a bare ``node``, its defaults under ``values``."""
    bare = BareNode(tmp_path, node)
    monkeypatch.setattr(driver_host, "ADMINDIR", str(tmp_path / "dpkg"))
    monkeypatch.setattr(driver_host, "LIB_DIRS", [str(tmp_path / "lib")])
    monkeypatch.setattr(driver_host, "MODULES_DIR", str(tmp_path / "modules"))
    monkeypatch.setattr(packages_rpm, "OS_RELEASE", str(tmp_path / "os-release"))
    monkeypatch.setattr(packages_rpm, "VERSIONLOCK_LIST", str(tmp_path / "versionlock.list"))
    params = {name: spec.get("default") for name, spec in state_call.ARGUMENT_SPEC.items()}
    params.update((name, ROLE_DEFAULTS[f"nvidia_driver_{name}"]) for name in params
                  if f"nvidia_driver_{name}" in ROLE_DEFAULTS and name not in ("sysfs_root", "proc_root"))
    params.update(values)
    for name in ("signing_key", "signing_cert"):  # the node has the files the inventory names
        if values.get(name):
            params[name] = str(tmp_path / pathlib.PurePath(values[name]).name)
            pathlib.Path(params[name]).write_text("")
    params.update(sysfs_root=str(bare.sys), proc_root=str(bare.proc),
                  blacklist_path=str(tmp_path / "blacklist-nouveau.conf"))
    params.update(stage="plan", ran=None, before=None)
    gpu = gather(str(bare.sys), str(bare.proc), None, "x86_64")[0]
    if not gpu["present"]:
        return None, None  # nvidia_driver_state: "no NVIDIA GPU: nothing to do"
    os_info = {key: node[key] for key in ("distribution", "distribution_version", "kernel")}
    os_info["architecture"] = "x86_64"
    result = evaluate(Host(bare), params, gpu, os_info)
    return result["request"], result["plan"]


def installed_by(request, steps):
    """What the role's tasks install from its plan: prerequisites.yml, install_packages.yml
    (install_packages_dnf.yml on EL), converge.yml (the signed modules of the next kernels),
    fabric.yml (``package=VERSION-*`` at the driver's version, dnf's ``package-VERSION``; the others as
    named), install_runfile.yml."""
    if steps is None:
        return set(), [], set()
    packages = set(steps["prerequisites"]) | set(steps["install_packages"]) | set(steps["kernel_modules"])
    fabric = steps["fabric"] or {"install": [], "packages": []}
    version, dnf = fabric.get("version"), request["package_manager"] == "dnf"
    packages |= {(f"{name}-{version}" if dnf else f"{name}={version}-*") if version else name
                 for name in fabric["install"]} | set(fabric["packages"])
    runfiles = [{k: request["runfile"][k] for k in ("name", "url")}] if request["runfile"] else []
    # EL: the stream the role enables (dnf module enable, EL 9) and the lock it adds (EL 10) first
    chosen = {f"module {steps['module_stream']['stream']}"} if steps.get("module_stream") else set()
    chosen |= {f"lock {steps['version_lock']}"} if steps.get("version_lock") else set()
    return packages, runfiles, chosen


def bundled(host, node, values):
    """What the bundle lists for one node: ``(driver, packages, runfiles, streams and locks)`` without
    the toolkit."""
    given = dict({k: v for k, v in node.items() if k not in ("image_driver", "mellanox_unread")}, host=host,
                 architecture="x86_64",
                 **values)
    result = ob.plan([ob.node_input(host, {}, given)], TOOLKIT, mode="none")
    packages = {name for repository in result["repositories"] if not repository["name"].startswith("toolkit-")
                for name in repository["packages"]}
    packages |= {name for names in result["distro_packages"].values() for name in names}
    runfiles = [{k: r[k] for k in ("name", "url")} for r in result["runfiles"]]
    requests = [r for repository in result["repositories"] if repository["format"] == "rpm"
                for r in repository["requests"]]
    kinds = (("module", "module_streams"), ("lock", "version_locks"))
    chosen = {f"{kind} {value}" for request in requests for kind, key in kinds for value in request[key]}
    return result["nodes"][0], packages, runfiles, chosen


@pytest.mark.parametrize(("node", "values", "expect"), [row[1:] for row in ROWS],
                         ids=[row[0] for row in ROWS])
def test_the_bundle_lists_what_the_roles_own_plan_installs(tmp_path, monkeypatch, node, values, expect):
    request, steps = role_plan(tmp_path, monkeypatch, node, values)
    driver, packages, runfiles, chosen = bundled("gpu-01", node, values)
    assert (packages, runfiles, chosen) == installed_by(request, steps)
    if request is not None and request["package_manager"] == "dnf" and request["method"] == "packages":
        assert chosen, "an EL install chooses its branch by a module stream (EL 9) or a version lock (EL 10)"
    if request is not None and request["method"] == "preinstalled":
        assert not steps["install"] and packages == set() and runfiles == []
        assert driver == {"method": "preinstalled", "branch": values.get("branch"),
                          "version": values.get("version"), "module_type": None, "host": "gpu-01"}
    elif request is not None:
        assert steps["install"], "a node without the driver installs it"
        assert driver == dict({k: request[k] for k in ("method", "branch", "version", "module_type")},
                              host="gpu-01")
    if expect:
        assert (request["method"], request["branch"], request["version"], request["module_type"]) == expect


def test_the_table_covers_every_method_source_and_module_type_the_role_takes():
    spec = state_call.ARGUMENT_SPEC
    rows = [dict(ROLE_DEFAULTS_VALUES, **values) for _id, _node, values, _expect in ROWS]
    # el-signed's module is chosen on the node from its repository's metadata: the bundle refuses it
    # (tests/unit/test_el_signed.py)
    assert {row["method"] for row in rows} == set(spec["method"]["choices"]) - {"el-signed"}
    assert {row["package_source"] for row in rows} == set(spec["package_source"]["choices"])
    assert {row["module_type"] for row in rows} == set(spec["module_type"]["choices"])
    assert {row["fabricmanager"] for row in rows} >= {"auto", "never"}
    assert any(row.get("version") for row in rows) and any(row.get("branch") for row in rows)


ROLE_DEFAULTS_VALUES = {name: ROLE_DEFAULTS[f"nvidia_driver_{name}"] for name in ob.ROLE_VALUES}
