"""What an NVLink fabric needs beside the driver (driver/fabric_plan.py): the request and the plan's step
``fabric``, planned for the simulated HGX B200 and GB200 tray (tests/simnode/specs/hgx-b200.yml,
gb200-tray.yml) from the facts their PCI trees give, and read by nvidia_driver_state on a scripted host."""

import nvidia_driver_state
import pytest
from ansible.module_utils.gpunode.driver import fabric_plan
from ansible.module_utils.gpunode.driver.driver import DriverError, build_request
from ansible.module_utils.gpunode.driver.fabric_plan import with_fabric
from ansible.module_utils.gpunode.driver.gpu import gather
from ansible.module_utils.gpunode.driver.plan import plan
from ansible.module_utils.gpunode.driver.state_call import VALUE_RULES
from ansible.module_utils.gpunode.formats import values
from ansible.module_utils.gpunode.host.packages import parse_dpkg_query
from conftest import ROOT, load_file

make_sysfs = load_file(ROOT / "tests" / "simnode" / "make_sysfs.py", "make_sysfs")
FILTERS = load_file(ROOT / "filter_plugins" / "nvidia_driver.py", "nvidia_driver_filters")
KERNEL = "6.8.0-1024-aws"
UBUNTU = {"distribution": "Ubuntu", "distribution_version": "24.04", "architecture": "x86_64",
          "kernel": KERNEL}
UBUNTU_ARM = dict(UBUNTU, architecture="aarch64", kernel="6.8.0-1024-nvidia-64k")
ROCKY9 = {"distribution": "Rocky", "distribution_version": "9.5", "architecture": "x86_64",
          "kernel": "5.14.0-503.14.1.el9_5.x86_64"}
DEBIAN12 = {"distribution": "Debian", "distribution_version": "12.7", "architecture": "x86_64",
            "kernel": "6.1.0-18-amd64"}
FM, IMEX = "nvidia-fabricmanager", "nvidia-imex"
RUNNING = {"load": "loaded", "active": "active", "enabled": "enabled"}
B200_SET = ["nvidia-fabricmanager", "libnvidia-nscq", "libnvsdm"]


@pytest.fixture(scope="module", name="facts")
def simulated_facts(tmp_path_factory):
    """The nvidia_gpu facts of the simulated HGX B200 (x86_64), GB200 tray (aarch64) and T4 VM (PCIe)."""
    found = {}
    for spec, machine in (("hgx-b200", "x86_64"), ("gb200-tray", "aarch64"), ("t4-vm", "x86_64")):
        root = tmp_path_factory.mktemp(spec)
        make_sysfs.make_tree(make_sysfs.load_spec(spec), str(root))
        found[spec] = gather(str(root / "sys"), str(root / "proc"), None, machine)[0]
    return found


def request(gpu, os_info=UBUNTU, **params):
    params = {"keyring": "/k.asc", "package_source": "cuda", "version": "580.95.05", **params}
    return with_fabric(build_request(params, gpu, dict(os_info)), params, gpu, dict(os_info))


def dpkg(*lines):
    return parse_dpkg_query("".join(f"{name}\t{version}\t{want} ok installed\n"
                                    for name, version, want in (line.split() for line in lines)))


def node(version=None, packages=(), services=None, **fabric):
    """A node with ``version`` installed and loaded (None: bare), its fabric read as ``fabric`` says."""
    have = {"loaded": ["mlx5_core"], "files": {}, "nvidia_params": None, "kernels_without_ib": [KERNEL]}
    have.update(fabric)
    on_disk = {"version": version, "flavor": "open"} if version else None
    base = ("dkms 3.0.10-8 install", "gcc 4:13.2.0-7 install", "make 4.3-4.1 install")
    loaded = {"modules": ["nvidia"] if version else [], "version": version,
              "module_type": "open" if version else None}
    return {"kernel": KERNEL, "headers_present": True, "userspace_version": version,
            "module_on_disk": on_disk, "loaded": loaded,
            "dkms": [], "packages": dpkg(*base, *packages),
            "dpkg_interrupted": [], "services": services or {}, "persistenced_unit": True,
            "blacklist_complete": True, "secure_boot": False, "signing_files_missing": [], "index": None,
            "fabric": have}


def converged_b200(version="580.95.05"):
    """The B200 once the role ran: every package held at the driver's version, the modules loaded."""
    held = [f"{name} {version}-1 hold" for name in ["nvidia-open-580", *B200_SET]]
    boot = {fabric_plan.MODULES_LOAD: fabric_plan.HEADER + "mlx5_core\nmlx5_ib\nib_umad\n"}
    return node(version, [*held, "nvlsm 2025.06.5-1 install", "infiniband-diags 50.0-2 install",
                          f"linux-modules-extra-{KERNEL} {KERNEL}.1 install"],
                {"nvidia-persistenced": RUNNING, FM: RUNNING}, loaded=list(fabric_plan.IB_MODULES),
                files=boot, kernels_without_ib=[])


# ---------------------------------------------------------------- HGX B200 (nvlink5)


def test_a_bare_b200_gets_the_fabric_manager_set_at_the_drivers_version_nvlsm_and_the_ib_modules(facts):
    assert facts["hgx-b200"]["fabric"] == "nvlink5" and facts["hgx-b200"]["nvswitch_count"] == 0
    req = request(facts["hgx-b200"])
    assert req["fabricmanager"] and req["fabric"]["pinned"] == B200_SET
    steps = plan(node(), req)
    assert steps["fabric"] == {
        "kind": "nvlink5", "version": "580.95.05", "install": B200_SET,
        "packages": ["nvlsm", "infiniband-diags", f"linux-modules-extra-{KERNEL}"],
        "boot_files": [{"path": fabric_plan.MODULES_LOAD,
                        "content": fabric_plan.HEADER + "mlx5_core\nmlx5_ib\nib_umad\n"}],
        "disable": [], "remove": [], "modules": ["mlx5_ib", "ib_umad"], "files": [], "imex_config": [],
        "stop": [], "mask": [], "enable": [FM], "start": [FM], "restart": []}
    assert set(B200_SET) <= set(steps["hold"])


def test_a_converged_b200_plans_nothing_and_a_stopped_fabric_manager_only_a_start(facts):
    req = request(facts["hgx-b200"])
    assert plan(converged_b200(), req)["converged"]
    stopped = converged_b200()
    stopped["services"] = {**stopped["services"], FM: {**RUNNING, "active": "failed"}}
    stopped["fabric"]["loaded"] = ["mlx5_core"]
    steps = plan(stopped, req)
    assert (steps["fabric"]["start"], steps["fabric"]["modules"]) == ([FM], ["mlx5_ib", "ib_umad"])
    assert not steps["disruptive"] and steps["reasons"] == [
        "fabric nvlink5: modules mlx5_ib, ib_umad; start nvidia-fabricmanager"]


def test_an_upgrade_moves_the_fabric_managers_set_with_the_driver_in_one_transaction(facts):
    req = request(facts["hgx-b200"], version="580.105.08")
    steps = plan(converged_b200(), req)
    assert steps["install"] and set(B200_SET) <= set(steps["unhold"]) and set(B200_SET) <= set(steps["hold"])
    assert {f"{name}=580.105.08-*" for name in B200_SET} <= set(steps["install_packages"])
    assert steps["fabric"]["install"] == B200_SET and steps["fabric"]["version"] == "580.105.08"


def test_a_fabric_package_left_at_another_version_is_moved_to_the_drivers(facts):
    host = converged_b200()
    host["packages"]["libnvsdm"]["version"] = "580.82.07-1"
    steps = plan(host, request(facts["hgx-b200"]))
    assert steps["fabric"]["install"] == ["libnvsdm"] and not steps["install"]


@pytest.mark.parametrize(("os_info", "source", "version", "pinned"), [
    (UBUNTU, "distro", "580.95.05", ["nvidia-fabricmanager-580", "libnvidia-nscq-580", "libnvsdm-580"]),
    (UBUNTU, "cuda", "570.172.08", ["nvidia-fabricmanager-570", "libnvidia-nscq-570", "libnvsdm-570"]),
    (UBUNTU, "cuda", "590.48.01", B200_SET),
    (UBUNTU_ARM, "cuda", "580.95.05", ["nvidia-fabricmanager", "libnvidia-nscq"]),  # NVSDM: amd64 only
    (ROCKY9, "cuda", "580.95.05", ["nvidia-fabric-manager", "libnvidia-nscq", "libnvsdm"]),
    (ROCKY9, "cuda", "570.172.08", ["nvidia-fabric-manager", "libnvidia-nscq-570", "libnvsdm-570"]),
    (DEBIAN12, "cuda", "580.95.05", B200_SET),
])
def test_the_fabric_managers_set_is_named_per_distribution_source_and_branch(facts, os_info, source, version,
                                                                              pinned):
    req = request(facts["hgx-b200"], os_info, package_source=source, version=version)
    assert req["fabric"]["pinned"] == pinned
    assert req["fabric"]["modules_extra"] == (os_info["distribution"] == "Ubuntu")


def test_debians_archive_has_no_fabric_manager_and_never_leaves_the_fabric_alone(facts):
    with pytest.raises(DriverError, match="Debian does not package the NVIDIA fabric manager"):
        request(facts["hgx-b200"], DEBIAN12, package_source="distro")
    assert request(facts["hgx-b200"], fabricmanager="never")["fabric"] is None


# ---------------------------------------------------------------- GB200 tray (mnnvl)

TRAY_OPTIONS = "options nvidia NVreg_CreateImexChannel0=1 NVreg_CoherentGPUMemoryMode=driver\n"
NODES = ["10.0.0.11", "10.0.0.12"]
TRAY_HELD = ["nvidia-imex 580.95.05-1 hold", "nvidia-open-580 580.95.05-1 hold"]


def test_a_bare_tray_in_dra_mode_gets_imex_masked_and_the_module_options_no_fabric_manager(facts):
    assert facts["gb200-tray"]["fabric"] == "mnnvl"
    req = request(facts["gb200-tray"], UBUNTU_ARM)
    assert not req["fabricmanager"] and req["fabric"]["pinned"] == [IMEX]
    steps = plan(node(), req)
    fabric = steps["fabric"]
    assert (fabric["install"], fabric["mask"], fabric["stop"], fabric["enable"]) == ([IMEX], [IMEX], [], [])
    assert fabric["boot_files"] == [{"path": fabric_plan.MODPROBE,
                                     "content": fabric_plan.HEADER + TRAY_OPTIONS}]
    assert IMEX in steps["hold"] and not fabric["packages"] and not fabric["modules"]


def test_a_tray_masks_an_images_fabric_manager_and_a_running_imex_in_dra_mode(facts):
    req = request(facts["gb200-tray"], UBUNTU_ARM)
    services = {"nvidia-persistenced": RUNNING, FM: RUNNING, IMEX: RUNNING,
                "nvlsm": {"load": "not-found", "active": "inactive", "enabled": ""}}
    steps = plan(node("580.95.05", TRAY_HELD, services), req)
    assert steps["fabric"]["stop"] == [FM, IMEX] and steps["fabric"]["mask"] == [FM, IMEX]
    masked = {unit: {"load": "masked", "active": "inactive", "enabled": "masked"} for unit in (FM, IMEX)}
    files = {fabric_plan.MODPROBE: fabric_plan.HEADER + TRAY_OPTIONS}
    params = {"CreateImexChannel0": "1", "CoherentGPUMemoryMode": "driver"}
    done = node("580.95.05", TRAY_HELD, {**services, **masked}, files=files, nvidia_params=params)
    assert plan(done, req)["converged"]


def test_a_loaded_module_without_the_imex_channel_is_reloaded_with_it(facts):
    req = request(facts["gb200-tray"], UBUNTU_ARM)
    masked = {IMEX: {"load": "masked", "active": "inactive", "enabled": "masked"}}
    host = node("580.95.05", TRAY_HELD, masked,
                nvidia_params={"CreateImexChannel0": "0", "CoherentGPUMemoryMode": "driver"})
    steps = plan(host, req)
    assert steps["unload"] and steps["load"] and steps["disruptive"]
    assert "the loaded nvidia module runs without NVreg_CreateImexChannel0=1" in steps["reasons"]


def test_host_mode_writes_the_nodes_file_and_settings_then_runs_imex_restarting_it_on_a_change(facts):
    req = request(facts["gb200-tray"], UBUNTU_ARM, imex_mode="host", imex_nodes=NODES,
                  imex_config={"IMEX_CMD_PORT": 50005})
    fabric = plan(node(), req)["fabric"]
    assert fabric["files"] == [{"path": fabric_plan.IMEX_NODES, "content": "10.0.0.11\n10.0.0.12\n"}]
    assert fabric["imex_config"] == [{"key": "IMEX_CMD_ENABLED", "value": "1"},
                                     {"key": "IMEX_CMD_PORT", "value": "50005"},
                                     {"key": "IMEX_NODE_CONFIG_FILE", "value": fabric_plan.IMEX_NODES}]
    assert (fabric["mask"], fabric["enable"], fabric["start"]) == ([], [IMEX], [IMEX])
    config = ("# IMEX\nIMEX_CMD_ENABLED=1\nIMEX_CMD_PORT=50005\n"
              f"IMEX_NODE_CONFIG_FILE={fabric_plan.IMEX_NODES}\n")
    files = {fabric_plan.MODPROBE: fabric_plan.HEADER + TRAY_OPTIONS, fabric_plan.IMEX_CONFIG: config,
             fabric_plan.IMEX_NODES: "10.0.0.11\n"}
    params = {"CreateImexChannel0": "1", "CoherentGPUMemoryMode": "driver"}
    running = node("580.95.05", TRAY_HELD, {"nvidia-persistenced": RUNNING, IMEX: RUNNING}, files=files,
                   nvidia_params=params)
    steps = plan(running, req)
    assert steps["fabric"]["restart"] == [IMEX] and steps["fabric"]["start"] == [] and steps["disruptive"]
    running["fabric"]["files"][fabric_plan.IMEX_NODES] = "10.0.0.11\n10.0.0.12\n"
    assert plan(running, req)["converged"]


def test_from_dra_to_host_mode_the_masked_imex_is_enabled_and_started(facts):
    req = request(facts["gb200-tray"], UBUNTU_ARM, imex_mode="host", imex_nodes=NODES)
    masked = {IMEX: {"load": "masked", "active": "inactive", "enabled": "masked"}}
    fabric = plan(node("580.95.05", TRAY_HELD, masked), req)["fabric"]
    assert (fabric["enable"], fabric["start"], fabric["mask"], fabric["stop"]) == ([IMEX], [IMEX], [], [])


def test_host_mode_needs_the_domains_nodes_and_570_has_no_cdmm(facts):
    with pytest.raises(DriverError, match="nvidia_driver_imex_nodes_group"):
        request(facts["gb200-tray"], UBUNTU_ARM, imex_mode="host")
    req = request(facts["gb200-tray"], UBUNTU_ARM, version="570.172.08")
    assert req["fabric"]["pinned"] == ["nvidia-imex-570"] and plan(node(), req)["fabric"]["mask"] == [IMEX]
    assert req["fabric"]["boot_files"][fabric_plan.MODPROBE].endswith("NVreg_CreateImexChannel0=1\n")


@pytest.mark.parametrize(("params", "message"), [
    ({"imex_nodes": ["10.0.0.1", "tray-2"]}, r"imex_nodes\[1\]: 'tray-2' is not an IP address"),
    ({"imex_config": {"BIND_INTERFACE_IP": "10.0.0.1\nDAEMONIZE=0"}}, "imex_config.BIND_INTERFACE_IP"),
    ({"imex_config": {"bad key": "1"}}, "imex_config key: 'bad key' is not a variable name"),
])
def test_imex_values_that_would_break_its_files_are_refused(params, message):
    with pytest.raises(values.ValueSyntaxError, match=message):
        values.check(params, VALUE_RULES)


# ---------------------------------------------------------------- nvidia_peermem (GPUDirect RDMA)

PEERMEM_FILE = {"path": fabric_plan.PEERMEM_UNIT, "content": fabric_plan.PEERMEM_UNIT_TEXT}


@pytest.mark.parametrize("method", ["packages", "runfile"])
def test_peermem_on_a_pcie_node_is_loaded_and_listed_for_boot_by_either_install_method(facts, method):
    assert facts["t4-vm"]["fabric"] == "none"
    assert request(facts["t4-vm"], method=method, runfile_checksum="a" * 64)["fabric"] is None
    req = request(facts["t4-vm"], method=method, runfile_checksum="a" * 64, peermem=True)
    assert (req["fabric"]["kind"], req["fabric"]["modules"], req["fabric"]["pinned"]) == (
        "none", ["nvidia_peermem"], [])
    steps = plan(node("580.95.05", ["nvidia-open-580 580.95.05-1 hold"]), req)
    assert (steps["fabric"]["modules"], steps["fabric"]["boot_files"]) == (["nvidia_peermem"], [PEERMEM_FILE])
    assert not steps["disruptive"] and not steps["converged"]
    assert steps["reasons"][-1] == (f"fabric none: boot_files {fabric_plan.PEERMEM_UNIT}; "
                                    "modules nvidia_peermem; enable gpunode-nvidia-peermem; "
                                    "start gpunode-nvidia-peermem")
    done = node("580.95.05", ["nvidia-open-580 580.95.05-1 hold"], loaded=["nvidia_peermem"],
                files={PEERMEM_FILE["path"]: PEERMEM_FILE["content"]},
                services={"nvidia-persistenced": RUNNING, fabric_plan.PEERMEM_SERVICE: RUNNING})
    assert plan(done, req)["fabric"] is None


def test_peermem_or_a_fabric_turned_off_takes_gpunodes_boot_files_away_and_leaves_an_operators(facts):
    held = ["nvidia-open-580 580.95.05-1 hold"]
    was = node("580.95.05", held, loaded=["nvidia_peermem"],
               files={PEERMEM_FILE["path"]: PEERMEM_FILE["content"]},
               services={fabric_plan.PEERMEM_SERVICE: RUNNING})
    steps = plan(was, request(facts["t4-vm"]))
    assert (steps["fabric"]["disable"], steps["fabric"]["remove"]) == (
        [fabric_plan.PEERMEM_SERVICE], [fabric_plan.PEERMEM_UNIT])
    others = [key for key in fabric_plan.FABRIC_STEPS if key not in ("disable", "remove")]
    assert not any(steps["fabric"][key] for key in others)
    assert not steps["disruptive"] and not steps["converged"]
    assert steps["reasons"][-1] == (f"fabric off: disable {fabric_plan.PEERMEM_SERVICE}; "
                                    f"remove {fabric_plan.PEERMEM_UNIT}")
    # a B200 that keeps its fabric but no longer wants peermem: only peermem's unit goes
    b200 = converged_b200()
    b200["fabric"]["files"][fabric_plan.PEERMEM_UNIT] = PEERMEM_FILE["content"]
    assert plan(b200, request(facts["hgx-b200"]))["fabric"]["remove"] == [fabric_plan.PEERMEM_UNIT]
    assert plan(converged_b200(), request(facts["hgx-b200"]))["fabric"] is None
    # a file of the same name that gpunode did not write is the operator's: left alone
    theirs = node("580.95.05", held, files={fabric_plan.PEERMEM_UNIT: "[Service]\nExecStart=modprobe x\n"})
    assert plan(theirs, request(facts["t4-vm"]))["fabric"] is None


def test_a_node_converged_by_an_older_gpunode_trades_peermems_modules_load_entry_for_the_unit(facts):
    old = {fabric_plan.PEERMEM_LOAD: fabric_plan.PEERMEM_HEADER + "nvidia_peermem\n"}
    was = node("580.95.05", ["nvidia-open-580 580.95.05-1 hold"], loaded=["nvidia_peermem"], files=old)
    fabric = plan(was, request(facts["t4-vm"], peermem=True))["fabric"]
    assert (fabric["boot_files"], fabric["remove"], fabric["disable"]) == (
        [PEERMEM_FILE], [fabric_plan.PEERMEM_LOAD], [])
    assert (fabric["enable"], fabric["start"], fabric["modules"]) == (
        [fabric_plan.PEERMEM_SERVICE], [fabric_plan.PEERMEM_SERVICE], [])
    # the unit orders the load after DOCA-OFED's openibd, which cannot replace IB modules peermem holds
    assert "After=systemd-modules-load.service openibd.service\n" in fabric_plan.PEERMEM_UNIT_TEXT


def test_peermem_loads_after_the_b200s_ib_modules_and_never_while_nouveau_waits_for_a_reboot(facts):
    req = request(facts["hgx-b200"], peermem=True)
    assert req["fabric"]["modules"] == [*fabric_plan.IB_MODULES, "nvidia_peermem"]
    steps = plan(converged_b200(), req)
    assert (steps["fabric"]["modules"], steps["fabric"]["boot_files"]) == (["nvidia_peermem"], [PEERMEM_FILE])
    bare = node()
    bare["loaded"]["modules"] = ["nouveau"]
    steps = plan(bare, request(facts["t4-vm"], peermem=True))
    assert steps["reboot_required"] and steps["fabric"]["modules"] == []
    assert steps["fabric"]["boot_files"] == [PEERMEM_FILE]


# ---------------------------------------------------------------- the summary, the module's read


def test_the_summary_says_what_the_fabric_step_did(facts):
    steps = plan(node(), request(facts["gb200-tray"], UBUNTU_ARM))
    lines = FILTERS.FilterModule().filters()["nvidia_driver_changes"](steps, {}, {})
    assert fabric_plan.describe(steps["fabric"]) in lines
    assert fabric_plan.describe(steps["fabric"]) == (
        f"fabric mnnvl: install nvidia-imex; boot_files {fabric_plan.MODPROBE}; mask nvidia-imex")


def test_the_module_reads_the_ib_modules_the_kernels_without_mlx5_ib_and_the_fabric_files(
        facts, tmp_path, monkeypatch, run_module):
    modules_tests = load_file(ROOT / "tests" / "unit" / "test_nvidia_driver_modules.py", "driver_modules")
    fake = modules_tests.FakeHost(tmp_path)
    fake.install(monkeypatch)
    fake.os_info = dict(UBUNTU, kernel=fake.os_info["kernel"])
    (fake.proc / "modules").write_text("mlx5_core 1 0 - Live 0x0\nib_umad 1 0 - Live 0x0\n")
    boot = tmp_path / "gpunode-nvidia-fabric.conf"
    boot.write_text("mlx5_core\n")
    monkeypatch.setattr(fabric_plan, "MODULES_LOAD", str(boot))
    peermem = tmp_path / "gpunode-nvidia-peermem.conf"
    monkeypatch.setattr(fabric_plan, "PEERMEM_LOAD", str(peermem))
    monkeypatch.setattr(fabric_plan, "MODPROBE", str(tmp_path / "modprobe.conf"))
    monkeypatch.setattr(fabric_plan, "PEERMEM_UNIT", str(tmp_path / "peermem.service"))
    fake.commands[f"modinfo -k {fake.os_info['kernel']} mlx5_ib"] = (1, "", "modinfo: ERROR: not found")
    fake.commands["apt-cache madison *"] = (0, "", "")
    ok, result = run_module(nvidia_driver_state, fake.args(gpu=dict(facts["hgx-b200"], present=True),
                                                           peermem=True), check_mode=True)
    assert ok, result
    kernel = fake.os_info["kernel"]
    assert result["state"]["fabric"] == {"loaded": ["mlx5_core", "ib_umad"], "nvidia_params": None,
                                         "files": {str(boot): "mlx5_core\n", str(peermem): None,
                                                   str(tmp_path / "peermem.service"): None,
                                                   str(tmp_path / "modprobe.conf"): None},
                                         "kernels_without_ib": [kernel]}
    fabric = result["plan"]["fabric"]
    assert fabric["modules"] == ["mlx5_ib", "nvidia_peermem"]
    assert f"linux-modules-extra-{kernel}" in fabric["packages"]
