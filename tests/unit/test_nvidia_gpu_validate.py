"""nvidia_gpu_validate: the real H100 reading from ../shared passes; one fault injected at a time
fails the node naming the check and the GPU; main() in check mode and on its error paths."""

import json
import subprocess
import sys

import nvidia_gpu_validate
import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.gpunode.validate import cdi, checks, dcgm, run, smi, xid
from conftest import ROOT, shared_path

SYSFS_ROOT = "/nonexistent"  # the sysfs fixture points it at its tree
H100 = ("fixtures", "real-hosts", "h100-sxm5-80gb-vm")
GPU0 = "GPU 0 (0000:00:06.0, GPU-00000000-1111-2222-3333-444444444444)"
SMI = "/usr/local/nvidia/bin/nvidia-smi"
NVLINK_NONE = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-1111-2222-3333-444444444444)\n"
MISMATCH = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95\n"
XID_79 = ("[  812.331] NVRM: GPU at PCI:0000:00:06: GPU-00000000-1111-2222-3333-444444444444\n"
          "[  812.331] NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, "
          "GPU has fallen off the bus.\n")
XID_APP = "[  90.1] NVRM: Xid (PCI:0000:00:06): 13, pid=4242, name=python3, Graphics SM Warp Exception\n"


def real(name):
    return shared_path(*H100, name).read_text()


def dcgm_report(status, warning=""):
    result = {"entity_group": "GPU", "entity_id": 0, "status": status}
    if warning:
        result["warnings"] = [{"warning": warning, "error_id": 12}]
    tests = [{"name": "software", "results": [{"entity_group": "GPU", "entity_id": 0, "status": "Pass"}]},
             {"name": "memory", "results": [result]}]
    return json.dumps({"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": tests}]}})


class FakeHost:
    """Answers commands by their first words; records what ran."""

    def __init__(self, answers, programs=("nvidia-smi", "dmesg"), check_mode=False):
        self.answers, self.programs, self.check_mode, self.ran = answers, programs, check_mode, []

    def which(self, name):
        return f"/usr/bin/{name}" if name in self.programs else None

    def run(self, argv):
        self.ran.append(argv)
        words = [argv[0].rsplit("/", 1)[-1], *argv[1:]]
        for prefix, answer in self.answers.items():
            if words[:len(prefix.split())] == prefix.split():
                return answer
        raise AssertionError(f"unexpected command {argv}")


@pytest.fixture
def sysfs(tmp_path, monkeypatch):
    """A sysfs with the H100 at 0000:00:06.0 (pci.txt of the real host)."""
    device = tmp_path / "bus" / "pci" / "devices" / "0000:00:06.0"
    device.mkdir(parents=True)
    for name, value in {"vendor": "0x10de", "device": "0x2330", "class": "0x030200"}.items():
        (device / name).write_text(value + "\n")
    monkeypatch.setattr(sys.modules[__name__], "SYSFS_ROOT", str(tmp_path))
    monkeypatch.setattr(cdi, "SPEC_DIRS", (str(tmp_path / "etc-cdi"),))  # none: CDI not in use
    return device


def answers(xml=None, kernel=None, nvlink=NVLINK_NONE, smi_answer=None, diag=None):
    found = {"nvidia-smi -q -x": smi_answer or (0, xml if xml is not None else real("smi-q.xml"), ""),
             "nvidia-smi nvlink -s": (0, nvlink, ""),
             "dmesg": (0, kernel if kernel is not None else "[ 1.0] Linux version 6.18\n", "")}
    if diag is not None:
        found["dcgmi diag"] = diag
    return found


def validate(host, **params):
    params.setdefault("sysfs_root", SYSFS_ROOT)
    params.setdefault("nvidia_smi", SMI)
    params.setdefault("driver_version", "580.159.04")
    return run.validate(host, params)


def by_check(outcome, check):
    return [r for r in outcome["results"] if r["check"] == check]


# ---------------------------------------------------------------- the real reading


def test_real_h100_xml_is_read_as_printed():
    reading = smi.parse_query_xml(real("smi-q.xml"))
    assert reading["driver_version"] == "580.159.04"
    [gpu] = reading["gpus"]
    assert (gpu["bus_id"], gpu["uuid"], gpu["name"]) == (
        "0000:00:06.0", "GPU-00000000-1111-2222-3333-444444444444", "NVIDIA H100 80GB HBM3")
    assert gpu["pcie"] == {"max_gen": 5, "current_gen": 5, "max_width": 16, "current_width": 16}
    assert (gpu["persistence_mode"], gpu["ecc_mode"]) == ("Enabled", "Enabled")
    assert gpu["performance_state"] == "P0"
    assert sum(smi.uncorrectable(gpu["ecc_volatile"]).values()) == 0
    assert set(smi.uncorrectable(gpu["ecc_volatile"])) == {
        "sram_uncorrectable_parity", "sram_uncorrectable_secded", "dram_uncorrectable"}
    assert (gpu["remap_pending"], gpu["remap_failure"], gpu["fabric_state"]) == ("No", "No", "N/A")
    assert gpu["processes"] == []


def test_real_h100_list_matches_xml():
    assert smi.parse_list(real("smi-L.txt")) == ["GPU-00000000-1111-2222-3333-444444444444"]


def test_clean_real_reading_passes_every_check_that_applies(sysfs):
    outcome = validate(FakeHost(answers()))
    assert outcome["passed"], outcome["failed"]
    verdicts = {r["check"]: r["passed"] for r in outcome["results"]}
    assert verdicts == {"nvml": True, "driver_version": True, "persistence": True, "ecc": True,
                        "remapped_rows": True, "pcie_link": True, "nvlink": None, "fabric": None,
                        "xid": True, "dcgm_diag": None, "cdi": None, "container": None, "imex": None,
                        "peermem": None}
    assert by_check(outcome, "fabric")[0]["message"] == "not an NVSwitch system (fabric state N/A)"
    assert by_check(outcome, "dcgm_diag")[0]["message"] == "DCGM is not installed (no dcgmi)"
    assert "no container image set" in by_check(outcome, "container")[0]["message"]
    assert by_check(outcome, "imex")[0]["message"] == "no imex_mode given"
    assert by_check(outcome, "peermem")[0]["message"] == "nvidia_peermem not chosen (peermem false)"


# ---------------------------------------------------------------- one fault at a time


def inject(old, new, count=1):
    text = real("smi-q.xml")
    assert old in text, old
    return text.replace(old, new, count)


@pytest.mark.parametrize("xml_fault, check, value", [
    (("<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>2</dram_uncorrectable>"),
     "ecc", "volatile uncorrectable ECC errors since boot: dram_uncorrectable=2"),
    (("<remapped_row_pending>No", "<remapped_row_pending>Yes"), "remapped_rows", "row remap pending"),
    (("<remapped_row_failure>No", "<remapped_row_failure>Yes"), "remapped_rows", "row remapping failure"),
    (("<current_link_width>16x", "<current_link_width>8x"), "pcie_link", "PCIe link x8, its maximum is x16"),
    (("<current_link_gen>5", "<current_link_gen>3"), "pcie_link", "gen 3 (max gen 5) in P0"),
    (("<persistence_mode>Enabled", "<persistence_mode>Disabled"), "persistence", "persistence mode Disabled"),
    (("<current_ecc>Enabled", "<current_ecc>Disabled"), "ecc", "ECC mode Disabled"),
    (("<state>N/A</state>", "<state>In Progress</state>"), "fabric", "fabric state In Progress"),
])
def test_one_xml_fault_fails_naming_check_gpu_and_value(sysfs, xml_fault, check, value):
    outcome = validate(FakeHost(answers(xml=inject(*xml_fault))))
    assert not outcome["passed"]
    assert [(r["check"], r["gpu"]) for r in outcome["failed"]] == [(check, GPU0)]
    assert value in outcome["failed"][0]["message"]
    assert f"{check} on {GPU0}: " in run.failure_message(outcome["failed"])


def test_aggregate_ecc_is_reported_not_failed(sysfs):
    text = real("smi-q.xml")
    head, tail = text.split("<aggregate>", 1)
    xml = head + "<aggregate>" + tail.replace("<dram_uncorrectable>0", "<dram_uncorrectable>5", 1)
    [ecc] = by_check(validate(FakeHost(answers(xml=xml))), "ecc")
    assert ecc["passed"] is True
    assert "lifetime uncorrectable 5 (aggregate, reported)" in ecc["message"]


def test_link_generation_is_not_judged_below_p0(sysfs):
    xml = inject("<current_link_gen>5", "<current_link_gen>1").replace(
        "<performance_state>P0", "<performance_state>P8")
    [link] = by_check(validate(FakeHost(answers(xml=xml))), "pcie_link")
    assert link["passed"] is True
    assert "generation not judged in P8" in link["message"]


def test_xid_79_in_the_kernel_log_fails_the_gpu(sysfs, tmp_path):
    log = tmp_path / "kern.log"
    log.write_text(XID_APP + XID_79)
    outcome = validate(FakeHost(answers()), kernel_log=str(log))
    assert [(r["check"], r["gpu"]) for r in outcome["failed"]] == [("xid", GPU0)]
    message = outcome["failed"][0]["message"]
    assert "Xid 79 (GPU has fallen off the bus)" in message
    assert "reported, not faults: Xid 13" in message


@pytest.mark.parametrize("code", [94, 13, 31, 43])
def test_contained_and_application_xids_are_reported_not_failed(sysfs, code):
    kernel = f"NVRM: Xid (PCI:0000:00:06): {code}, pid=77, name=train\n"
    [found] = by_check(validate(FakeHost(answers(kernel=kernel))), "xid")
    assert found["passed"] is True
    assert f"Xid {code}" in found["message"]


def test_xid_of_another_gpu_is_not_this_gpus():
    events = xid.parse_xids(XID_79.replace("0000:00:06", "0000:3b:00"))
    assert xid.events_of(events, "0000:00:06.0") == []
    assert [e["xid"] for e in xid.events_of(events, "0000:3b:00.0")] == [79]


def test_no_kernel_log_skips_xid_saying_why(sysfs):
    host = FakeHost(answers(), programs=("nvidia-smi",))
    [found] = by_check(validate(host), "xid")
    assert found["passed"] is None
    assert found["message"] == ("could not read the kernel log "
                                "(journalctl: not installed; dmesg: not installed)")


def test_nvml_mismatch_fails_every_gpu_on_the_bus(sysfs):
    outcome = validate(FakeHost(answers(smi_answer=(18, MISMATCH, ""))))
    assert [(r["check"], r["gpu"]) for r in outcome["failed"]] == [("nvml", "0000:00:06.0")]
    assert "Driver/library version mismatch" in outcome["failed"][0]["message"]
    assert {r["check"]: r["passed"] for r in outcome["results"]}["ecc"] is None


def test_gpu_on_the_bus_that_nvml_does_not_list_fails(sysfs):
    other = sysfs.parent / "0000:3b:00.0"
    other.mkdir()
    for name, value in {"vendor": "0x10de", "device": "0x2330", "class": "0x030200"}.items():
        (other / name).write_text(value)
    outcome = validate(FakeHost(answers()), checks=["nvml"])
    assert [(r["check"], r["gpu"]) for r in outcome["failed"]] == [("nvml", "0000:3b:00.0")]


def test_wrong_driver_version_fails(sysfs):
    outcome = validate(FakeHost(answers()), driver_version="570.195.03", checks=["driver_version"])
    assert outcome["failed"][0]["message"] == "driver 580.159.04, wanted 570.195.03"
    assert validate(FakeHost(answers()), driver_version="580", checks=["driver_version"])["passed"]


def test_dcgm_diag_failure_fails_the_gpu_naming_the_test(sysfs):
    diag = (226, dcgm_report("Fail", "Uncorrectable ECC memory error detected"), "")
    host = FakeHost(answers(diag=diag), programs=("nvidia-smi", "dmesg", "dcgmi"))
    outcome = validate(host, checks=["dcgm_diag"])
    assert [(r["check"], r["gpu"]) for r in outcome["failed"]] == [("dcgm_diag", GPU0)]
    assert "memory: Uncorrectable ECC memory error detected" in outcome["failed"][0]["message"]
    assert host.ran[-1][1:] == ["diag", "-r", "1", "-j", "-i", "0"]


def test_dcgm_diag_pass_and_level(sysfs):
    host = FakeHost(answers(diag=(0, dcgm_report("Pass"), "")), programs=("nvidia-smi", "dcgmi"))
    outcome = validate(host, checks=["dcgm_diag"], dcgm_diag_level=2)
    assert outcome["results"][0]["message"] == "dcgmi diag -r 2: 2 tests passed, none failed"


def test_dcgm_diag_refuses_a_gpu_with_compute_processes(sysfs):
    xml = inject("<processes>\n\t\t</processes>",
                 "<processes><process_info><pid>4242</pid><type>C</type>"
                 "<process_name>python3</process_name></process_info></processes>")
    host = FakeHost(answers(xml=xml), programs=("nvidia-smi", "dcgmi"))
    [found] = validate(host, checks=["dcgm_diag"])["results"]
    assert found["passed"] is None
    assert "refused: compute processes run on it (PID 4242 (python3))" in found["message"]
    assert not any(argv[0].endswith("dcgmi") for argv in host.ran)


def test_dcgm_older_report_shape():
    text = json.dumps({"DCGM GPU Diagnostic": {"tests": [
        {"name": "PCIe", "results": [{"gpu_ids": "0,1", "status": "Fail",
                                      "warnings": [{"warning": "AER"}]}]}]}})
    assert dcgm.parse_diag("Some banner\n" + text) == {
        0: [{"test": "PCIe", "status": "Fail", "message": "AER"}],
        1: [{"test": "PCIe", "status": "Fail", "message": "AER"}]}


def test_nvlink_partly_down_fails_and_absent_is_skipped():
    gpus = smi.parse_query_xml(real("smi-q.xml"))["gpus"]
    text = NVLINK_NONE + "\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"
    [down] = checks.nvlink(gpus, smi.parse_nvlink_status(text))
    assert (down["passed"], down["message"]) == (False, "links down: 1 of 2")
    [none] = checks.nvlink(gpus, smi.parse_nvlink_status(NVLINK_NONE))
    assert none["passed"] is None
    # what the lent H100 (no NVLink, a passed-through VM) printed on 2026-11-27: nothing, exit 0
    [empty] = checks.nvlink(gpus, smi.parse_nvlink_status(""))
    assert (empty["passed"], empty["message"]) == (None, "the GPU has no NVLink")


# ---------------------------------------------------------------- the container check


def test_container_check_through_docker_sees_every_gpu(sysfs):
    image = "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04"
    found = answers()
    found.update({"docker info": (0, "28.0.1\n", ""), "docker image inspect": (0, "sha256:ab\n", ""),
                  "docker run": (0, real("smi-L.txt"), "")})
    host = FakeHost(found, programs=("nvidia-smi", "docker"))
    [result] = validate(host, checks=["container"], container_image=image)["results"]
    assert (result["passed"], result["message"]) == (True, "docker (default runtime): sees all 1 GPUs")
    found["docker run"] = (0, "", "")
    [result] = validate(host, checks=["container"], container_image=image)["results"]
    assert result["passed"] is False
    assert "sees 0 of 1 GPUs; missing GPU-00000000-1111-2222-3333-444444444444" in result["message"]


def test_container_check_in_check_mode_pulls_nothing(sysfs):
    found = answers()
    found.update({"docker info": (0, "28.0.1\n", ""), "docker image inspect": (1, "", "No such image")})
    host = FakeHost(found, programs=("nvidia-smi", "docker"), check_mode=True)
    [result] = validate(host, checks=["container"], container_image="cuda:12")["results"]
    assert result["passed"] is None
    assert "check mode pulls nothing" in result["message"]
    assert not any("pull" in argv for argv in host.ran)


# ---------------------------------------------------------------- main()


@pytest.fixture
def node(monkeypatch, sysfs):
    """main() against FakeHost's answers (run_command, get_bin_path patched)."""
    state = {"answers": answers(), "programs": ("nvidia-smi", "dmesg")}

    def run_command(self, argv, environ_update=None, **_kwargs):
        assert environ_update == {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
        return FakeHost(state["answers"]).run(argv)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    def get_bin_path(self, name, required=False, opt_dirs=None):
        return FakeHost({}, state["programs"]).which(name)

    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", get_bin_path)
    return state


def test_main_check_mode_passes_and_changes_nothing(run_module, node):
    ok, result = run_module(nvidia_gpu_validate, {"driver_version": "580.159.04", "sysfs_root": SYSFS_ROOT},
                            check_mode=True)
    assert ok, result.get("msg")
    assert (result["changed"], result["passed"], result["failed_checks"]) == (False, True, [])
    assert result["nvidia_smi"] == "/usr/bin/nvidia-smi"
    assert result["marker"] == {"passed": True, "failed_checks": [], "driver_version": "580.159.04"}
    facts = result["ansible_facts"]["gpu_validate"]
    assert (facts["passed"], facts["failed_checks"], facts["ran"], facts["fabric"]) == (True, [], True, None)


def test_main_fails_the_host_naming_check_gpu_and_value(run_module, node):
    node["answers"] = answers(xml=inject("<persistence_mode>Enabled", "<persistence_mode>Disabled"))
    ok, result = run_module(nvidia_gpu_validate, {"sysfs_root": SYSFS_ROOT}, check_mode=True)
    assert not ok
    assert result["failed_checks"] == ["persistence"]
    assert result["marker"]["passed"] is False
    assert result["msg"] == (f"GPU validation failed: persistence on {GPU0}: persistence mode Disabled "
                             "(wanted Enabled: nvidia-persistenced)")


def test_the_condition_to_publish_is_the_verdict_and_a_pass_waits_for_a_pod_that_follows(run_module, node):
    args = {"driver_version": "580.159.04", "sysfs_root": SYSFS_ROOT}
    ok, passed = run_module(nvidia_gpu_validate, args, check_mode=True)
    ok_too, waiting = run_module(nvidia_gpu_validate, dict(args, pod_follows=True), check_mode=True)
    assert ok and ok_too
    assert passed["condition"] == {"status": "True", "reason": "Passed",
                                   "message": "the GPU validation passed"}
    assert waiting["condition"] == {"status": "False", "reason": "ValidationPodPending",
                                    "message": "the GPU validation passed; its CUDA validation pod runs next"}
    node["answers"] = answers(xml=inject("<persistence_mode>Enabled", "<persistence_mode>Disabled"))
    _, failed = run_module(nvidia_gpu_validate, dict(args, pod_follows=True), check_mode=True)
    assert failed["condition"] == {"status": "False", "reason": "ValidationFailed", "message": failed["msg"]}
    node["answers"] = {}
    _, refused = run_module(nvidia_gpu_validate, {"container_image": "cuda:12 ; reboot"})
    assert refused["condition"] == {"status": "False", "reason": "ValidationFailed",
                                    "message": refused["msg"]}


def test_an_empty_option_is_the_option_left_out_as_the_role_passes_its_variables(run_module, node):
    args = {"sysfs_root": SYSFS_ROOT}
    empty = dict(args, checks=[], driver_version="", container_image="", image_registry="", nvidia_smi="",
                 kernel_log="")
    ok, omitted = run_module(nvidia_gpu_validate, args, check_mode=True)
    ok_too, given = run_module(nvidia_gpu_validate, empty, check_mode=True)
    assert ok and ok_too, given.get("msg")
    assert [(r["check"], r["passed"]) for r in given["results"]] == [
        (r["check"], r["passed"]) for r in omitted["results"]]
    assert given["nvidia_smi"] == omitted["nvidia_smi"] == "/usr/bin/nvidia-smi"


def test_main_refuses_a_bad_value_before_running_anything(run_module, node):
    node["answers"] = {}
    ok, result = run_module(nvidia_gpu_validate, {"container_image": "cuda:12 ; reboot"})
    assert not ok
    assert result["msg"].startswith("container_image: 'cuda:12 ; reboot' is not an image reference")
    assert result["msg"].endswith("; nothing was run")


def test_main_runs_the_container_image_from_the_mirror(run_module, node, monkeypatch):
    node["programs"] = ("nvidia-smi", "docker")
    node["answers"].update({"docker info": (0, "28.0.1", ""), "docker image inspect": (0, "sha256:ab", ""),
                            "docker run": (0, real("smi-L.txt"), "")})
    ran = []
    original = FakeHost.run
    monkeypatch.setattr(FakeHost, "run", lambda self, argv: ran.append(argv) or original(self, argv))
    ok, result = run_module(nvidia_gpu_validate, {
        "checks": ["container"], "container_image": "nvcr.io/nvidia/cuda:12.9.1-base-ubuntu24.04",
        "image_registry": "registry.local:5000/mirror"})
    assert ok, result.get("msg")
    assert "registry.local:5000/mirror/nvidia/cuda:12.9.1-base-ubuntu24.04" in ran[-1]


def test_main_unreadable_kernel_log_names_the_file(run_module, node, tmp_path):
    missing = tmp_path / "absent.log"
    ok, result = run_module(nvidia_gpu_validate, {"kernel_log": str(missing), "checks": ["xid"]})
    assert not ok
    assert result["msg"] == f"kernel_log {missing}: cannot read it: No such file or directory"


def test_main_without_nvidia_smi_fails_nvml(run_module, node, monkeypatch):
    node["programs"] = ()
    monkeypatch.setattr(run, "DRIVER_ROOTS", ())
    ok, result = run_module(nvidia_gpu_validate, {"checks": ["nvml", "ecc"], "sysfs_root": SYSFS_ROOT})
    assert not ok
    assert result["failed_checks"] == ["nvml"]
    assert "nvidia-smi not found on PATH" in result["msg"]


def test_documentation_options_equal_the_argument_spec():
    doc = yaml.safe_load(nvidia_gpu_validate.DOCUMENTATION)
    assert set(doc["options"]) == set(nvidia_gpu_validate.ARGUMENT_SPEC)
    assert doc["options"]["checks"]["choices"] == list(run.ALL_CHECKS)


# ---------------------------------------------------------------- the simulated node's stand-in


FAKE_SMI = ROOT / "tests" / "simnode" / "fakes" / "driver" / "bin" / "nvidia-smi"


@pytest.fixture
def fake_smi(tmp_path):
    """The simulated node's nvidia-smi (driver 580.95.05 loaded, persistence on) over a fake tree."""
    sim = tmp_path / "sim"
    device = sim / "sys" / "bus" / "pci" / "devices" / "0000:00:1e.0"
    device.mkdir(parents=True)
    for name, value in {"vendor": "0x10de", "device": "0x1eb8", "class": "0x030200"}.items():
        (device / name).write_text(value)
    (sim / "sys" / "module" / "nvidia").mkdir(parents=True)
    (sim / "sys" / "module" / "nvidia" / "version").write_text("580.95.05\n")
    (sim / "proc" / "driver" / "nvidia").mkdir(parents=True)
    (sim / "proc" / "driver" / "nvidia" / "version").write_text("NVRM version: 580.95.05\n")
    (sim / "run").mkdir()
    (sim / "run" / "nvidia-persistence").write_text("")
    script = FAKE_SMI.read_text().replace("@VERSION@", "580.95.05").replace(
        ". /etc/gpunode-sim/driver-fakes.conf", f"SIM_ROOT={sim}")
    path = tmp_path / "nvidia-smi"
    path.write_text(script)
    path.chmod(0o755)
    return path, sim


def stand_in(path, *args):
    proc = subprocess.run([str(path), *args], capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def test_the_stand_in_answers_every_field_the_real_h100_did(fake_smi):
    path, _sim = fake_smi
    [fake] = smi.parse_query_xml(stand_in(path, "-q", "-x")[1])["gpus"]
    [real_gpu] = smi.parse_query_xml(real("smi-q.xml"))["gpus"]
    assert set(fake) == set(real_gpu)
    missing = [key for key, value in real_gpu.items() if value is not None and fake[key] is None]
    assert missing == []
    assert set(fake["ecc_volatile"]) == set(real_gpu["ecc_volatile"])
    assert fake["bus_id"] == "0000:00:1e.0"
    assert smi.parse_list(stand_in(path, "-L")[1]) == [fake["uuid"]]


@pytest.mark.parametrize("fault, check", [("ecc", "ecc"), ("remap-pending", "remapped_rows"),
                                          ("link-x8", "pcie_link")])
def test_the_stand_in_injects_one_fault(fake_smi, fault, check):
    path, sim = fake_smi
    (sim / "run" / "gpunode-gpu-faults").write_text(fault + "\n")
    host = FakeHost({})
    host.run = lambda argv: stand_in(path, *argv[1:])
    checks_run = ["nvml", "persistence", "ecc", "remapped_rows", "pcie_link", "nvlink"]
    params = {"nvidia_smi": str(path), "sysfs_root": str(sim / "sys"), "checks": checks_run}
    outcome = run.validate(host, params)
    assert [r["check"] for r in outcome["failed"]] == [check]
