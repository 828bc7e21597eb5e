"""nvidia_mig: the config, nvidia-smi's answers (real captures from ../shared), and main() against the
stand-in nvidia-smi of tests/simnode/fakes/mig (MIG state in a JSON file under tmp_path)."""

import contextlib
import csv
import importlib.machinery
import io
import json
import os
import subprocess
import sys
import types

import nvidia_mig
import pytest
import yaml
from ansible.module_utils import basic
from ansible.module_utils.gpunode.driver import mig
from conftest import ROOT, shared_path

STAND_IN = ROOT / "tests" / "simnode" / "fakes" / "mig" / "nvidia-smi"
H100 = "0x233010DE"
MIXED = {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}
CONFIG = {
    "version": "v1",
    "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "mixed": [
            {"devices": [0], "device-filter": H100, "mig-enabled": True, "mig-devices": MIXED},
            {"devices": [1], "device-filter": [H100], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        ],
        "all-2g.20gb": [{"devices": "all", "device-filter": H100, "mig-enabled": True,
                         "mig-devices": {"2g.20gb": 3}}],
        "all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
        "all-1g.5gb": [{"devices": "all", "device-filter": H100, "mig-enabled": True,
                        "mig-devices": {"1g.5gb": 7}}],
        "too-many": [{"devices": [0], "mig-enabled": True, "mig-devices": {"4g.40gb": 1, "3g.40gb": 2}}],
    },
}


# ---------------------------------------------------------------- the config


@pytest.mark.parametrize("doc, selected, message", [
    ({"version": "v2", "mig-configs": {}}, "x", "config.version: must be 'v1'"),
    ({"version": "v1", "mig-configs": {"a": []}, "extra": 1}, "a", "config: unknown key extra"),
    (CONFIG, "nope", "no config named 'nope' (there: all-1g.10gb, all-1g.5gb, all-2g.20gb, all-disabled, "
                     "mixed"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all"}]}}, "a",
     "config.mig-configs.a[0]: missing required key mig-enabled"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "some", "mig-enabled": False}]}}, "a",
     "config.mig-configs.a[0].devices: must be 'all' or a list"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": True, "mig-devices": {},
                                              "device-filter": ["0x2330"]}]}}, "a",
     "config.mig-configs.a[0].device-filter[0]: '0x2330' is not a PCI device id as 0xDEVICEVENDOR"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": True,
                                              "mig-devices": {"1g.10gb": -1}}]}}, "a",
     "config.mig-configs.a[0].mig-devices.1g.10gb: count must be a positive integer, got -1"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": True,
                                              "mig-devices": {"1g.10gb": True}}]}}, "a",
     "count must be a positive integer, got True"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": False,
                                              "mig-devices": {"1g.10gb": 1}}]}}, "a",
     "MIG devices given while mig-enabled is false"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": True}]}}, "a",
     "mig-devices: required when mig-enabled is true"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": True, "mig": 1}]}}, "a",
     "config.mig-configs.a[0]: unknown key mig"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": True,
                                              "mig-devices": {"1c.2g.20gb": 1}}]}}, "a",
     "compute-instance profiles are not supported"),
])
def test_config_refused_with_key_path(doc, selected, message):
    with pytest.raises(mig.MigError) as info:
        mig.parse_config(doc, selected)
    assert message in str(info.value)


def test_config_entries_and_matching():
    entries = mig.parse_config(CONFIG, "mixed")
    assert entries[0]["filters"] == ["233010DE"] and entries[0]["instances"] == MIXED
    gpu = {"index": 1, "device_id": "233010DE"}
    assert mig.match_entry(entries, gpu) is entries[1]
    assert mig.match_entry(entries, dict(gpu, device_id="1EB810DE")) is None
    assert mig.match_entry(entries, dict(gpu, index=5)) is None
    zero = {"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": True,
                                                     "mig-devices": {"1g.10gb": 0, "2g.20gb": 1}}]}}
    assert mig.parse_config(zero, "a")[0]["instances"] == {"2g.20gb": 1}


# ---------------------------------------------------------------- real captures


def query_row(path, fields):
    """The fields of a real ``--query-gpu=<all> --format=csv`` capture, as QUERY_GPU asks them."""
    rows = list(csv.reader(path.read_text().splitlines(), skipinitialspace=True))
    header = [h.split(" [")[0] for h in rows[0]]
    return ", ".join(rows[1][header.index(f)] for f in fields.split(","))


@pytest.mark.parametrize("name, device_id, mig_mode", [
    ("nvidia-smi-query-gpu-csv-590.48.01-H200.csv", "233510DE", False),
    ("nvidia-smi-query-gpu-csv-595.71.05-RTX4080SUPER.csv", "270210DE", None),
])
def test_query_gpu_of_real_captures(name, device_id, mig_mode):
    line = query_row(shared_path("fixtures", "nvidia", name), mig.QUERY_GPU)
    (gpu,) = mig.parse_query_gpu(line + "\n")
    got = (gpu["index"], gpu["device_id"], gpu["mig_current"], gpu["mig_pending"])
    assert got == (0, device_id, mig_mode, mig_mode)
    assert gpu["name"].startswith("NVIDIA ")


def test_list_of_real_capture_counts_mig_devices_not_gpus():
    text = shared_path("fixtures", "nvidia", "nvidia-smi-L-590.48.01-H100-MIG.txt").read_text()
    assert mig.parse_list(text) == {0: MIXED}


def test_uuids_of_real_capture():
    text = shared_path("fixtures", "nvidia", "nvidia-smi-L-590.48.01-H100-MIG.txt").read_text()
    assert mig.parse_uuids(text) == {"GPU-00000000-0000-0000-0000-000000000000": 0}


def test_instances_and_placements():
    gis = [{"gi": 2, "name": "3g.40gb"}, {"gi": 9, "name": "1g.10gb+me"}]
    cis = [{"gi": 2, "ci": 0, "name": "3g.40gb"}, {"gi": 9, "ci": 0, "name": "1g.10gb"}]
    assert mig.instance_counts(gis, cis) == ({"3g.40gb": 1, "1g.10gb+me": 1}, True)
    assert mig.instance_counts(gis, cis[:1])[1] is False
    assert mig.instance_counts(gis[:1], [{"gi": 2, "ci": 0, "name": "1c.3g.40gb"}])[1] is False
    profiles = {"1g.10gb": {"id": 19, "slices": 1}, "3g.40gb": {"id": 9, "slices": 3},
                "2g.20gb": {"id": 14, "slices": 2}}
    assert mig.create_order(MIXED, profiles) == ["9", "14", "19", "19"]


# ---------------------------------------------------------------- main() against the stand-in


def load_stand_in(state):
    """The stand-in as a module of this process, keeping its MIG state in ``state``."""
    loader = importlib.machinery.SourceFileLoader("gpunode_sim_nvidia_smi", str(STAND_IN))
    fake = types.ModuleType(loader.name)
    loader.exec_module(fake)
    fake.STATE = str(state)
    return fake


def call_stand_in(fake, argv):
    """``(rc, stdout, stderr)`` of the stand-in run with ``argv``, in this process: what the
    executable prints and exits with (a process per call made this file the unit run's slowest)."""
    out = io.StringIO()
    rc = 0
    with contextlib.redirect_stdout(out):
        try:
            fake.main([str(arg) for arg in argv])
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
    return rc, out.getvalue(), ""


@pytest.fixture
def node(tmp_path, monkeypatch):
    """Two H100 and a T4 with MIG off; returns a function running the stand-in's test hooks.

    Modules run in the test call the stand-in in this process (AnsibleModule.run_command of its
    path); processes the test starts itself (the boot script) run the executable, on the same
    state file."""
    state = tmp_path / "nvidia-smi.json"
    monkeypatch.setenv("GPUNODE_SIM_NVIDIA_SMI_STATE", str(state))
    fake = load_stand_in(state)
    run_command = basic.AnsibleModule.run_command

    def run_stand_in(module, args, *more, **options):
        if isinstance(args, (list, tuple)) and args and str(args[0]) == str(STAND_IN):
            return call_stand_in(fake, args[1:])
        return run_command(module, args, *more, **options)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_stand_in)

    def sim(*args):
        return call_stand_in(fake, args)[1]

    sim("gpunode-sim", "init", "h100", "h100", "t4")
    sim.state = state
    sim.fake = fake
    return sim


def apply(run_module, selected, check_mode=False, diff=False, **args):
    args = dict({"config": CONFIG, "selected": selected, "nvidia_smi": str(STAND_IN)}, **args)
    return run_module(nvidia_mig, args, check_mode=check_mode, diff=diff)


def test_converges_from_mig_off_to_a_mixed_layout_then_changes_nothing(node, run_module):
    ok, result = apply(run_module, "mixed")
    assert ok, result
    assert result["changed"] and not result["reset_required"] and not result["reboot_required"]
    assert result["gpus"] == {
        "0": {"before": {"mig_enabled": False, "instances": {}},
              "after": {"mig_enabled": True, "instances": MIXED}},
        "1": {"before": {"mig_enabled": False, "instances": {}},
              "after": {"mig_enabled": True, "instances": {"1g.10gb": 7}}},
    }
    assert "nvidia-smi mig -i 0 -cgi 9,14,19,19 -C" in result["commands"]
    assert "nvidia-smi --gpu-reset -i 0" in result["commands"]
    assert mig.parse_list(node("-L")) == {0: MIXED, 1: {"1g.10gb": 7}, 2: {}}
    ok, again = apply(run_module, "mixed")
    assert ok and not again["changed"] and again["commands"] == []
    assert again["gpus"]["0"]["before"] == again["gpus"]["0"]["after"]


def test_check_mode_changes_nothing_and_diff_shows_each_gpu(node, run_module):
    before = node.state.read_bytes()
    ok, result = apply(run_module, "mixed", check_mode=True, diff=True)
    assert ok and result["changed"] and result["reset_required"]
    assert node.state.read_bytes() == before
    assert result["gpus"]["1"]["after"] == {"mig_enabled": True, "instances": {"1g.10gb": 7}}
    assert result["diff"]["before"] == ("GPU 0: MIG disabled; instances: none\n"
                                        "GPU 1: MIG disabled; instances: none\n")
    assert result["diff"]["after"] == ("GPU 0: MIG enabled; instances: 2x1g.10gb, 1x2g.20gb, 1x3g.40gb\n"
                                       "GPU 1: MIG enabled; instances: 7x1g.10gb\n")
    apply(run_module, "mixed")
    ok, converged = apply(run_module, "mixed", check_mode=True, diff=True)
    assert ok and not converged["changed"] and converged["diff"]["before"] == converged["diff"]["after"]


def test_switches_layouts_without_a_reset_and_disables(node, run_module):
    apply(run_module, "mixed")
    ok, result = apply(run_module, "all-2g.20gb")
    assert ok and result["changed"]
    assert not any("gpu-reset" in c for c in result["commands"])
    assert result["gpus"]["0"]["after"] == {"mig_enabled": True, "instances": {"2g.20gb": 3}}
    assert mig.parse_list(node("-L"))[1] == {"2g.20gb": 3}
    ok, result = apply(run_module, "all-disabled")
    assert ok and result["changed"], result
    assert result["gpus"]["0"]["after"] == {"mig_enabled": False, "instances": {}}
    assert "2" not in result["gpus"]  # the T4 has no MIG, and none was asked for
    modes = node("--query-gpu=mig.mode.current,mig.mode.pending", "--format=csv,noheader")
    assert modes.splitlines()[0] == "Disabled, Disabled"


def test_refuses_a_gpu_without_mig_naming_it(node, run_module):
    before = node.state.read_bytes()
    ok, result = apply(run_module, "all-1g.10gb")
    assert not ok and not result["changed"]
    assert result["msg"].startswith("GPU 2 (Tesla T4, 0x1EB810DE) does not support MIG")
    assert node.state.read_bytes() == before


def test_refuses_an_unknown_profile_listing_the_ones_there(node, run_module):
    ok, result = apply(run_module, "all-1g.5gb", check_mode=True)
    assert not ok
    assert result["msg"] == ("GPU 0 (NVIDIA H100 80GB HBM3, 0x233010DE): MIG profile 1g.5gb does not exist "
                             "there; its profiles: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, "
                             "7g.80gb")


def test_refuses_more_slices_than_the_gpu_has(node, run_module):
    ok, result = apply(run_module, "too-many")
    assert not ok and "needs 10 compute slices, the GPU has 7" in result["msg"]


def test_refuses_a_busy_gpu_naming_the_process(node, run_module):
    node("gpunode-sim", "run", 0, 4242, "/usr/bin/python3")
    before = node.state.read_bytes()
    ok, result = apply(run_module, "mixed", drain=True)
    assert not ok and not result["changed"]
    assert "GPU 0 (NVIDIA H100 80GB HBM3, 0x233010DE) is in use by PID 4242 (/usr/bin/python3)" in \
        result["msg"]
    assert node.state.read_bytes() == before


def test_blocked_reset_reports_reboot_and_not_the_layout(node, run_module):
    node("gpunode-sim", "hold", 0, "nvidia-persistenced.service")
    ok, result = apply(run_module, "mixed")
    assert ok and result["changed"] and result["reset_required"] and result["reboot_required"]
    assert result["gpus"]["0"]["after"] == {"mig_enabled": False, "mig_pending": True, "instances": {}}
    assert result["gpus"]["1"]["after"] == {"mig_enabled": True, "instances": {"1g.10gb": 7}}
    assert result["reasons"][0].startswith("GPU 0 (NVIDIA H100 80GB HBM3, 0x233010DE): the GPU reset for "
                                           "the MIG mode failed")
    node("gpunode-sim", "reboot")
    ok, result = apply(run_module, "mixed")
    assert ok and not result["reboot_required"]
    assert result["gpus"]["0"]["after"] == {"mig_enabled": True, "instances": MIXED}


def test_drain_stops_the_holding_service_around_the_reset(node, run_module, tmp_path, monkeypatch):
    node("gpunode-sim", "hold", 0, "nvidia-persistenced.service")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "systemctl.log"
    systemctl = bin_dir / "systemctl"
    systemctl.write_text(f"""#!/bin/sh
echo "$*" >> {log}
case "$1" in
  is-active) [ "$3" = nvidia-persistenced.service ] ;;
  stop) {sys.executable} {STAND_IN} gpunode-sim release "$2" ;;
esac
""")
    systemctl.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    ok, result = apply(run_module, "mixed", drain=True)
    assert ok and not result["reboot_required"], result
    assert result["gpus"]["0"]["after"] == {"mig_enabled": True, "instances": MIXED}
    calls = log.read_text().splitlines()
    assert "stop nvidia-persistenced.service" in calls and calls[-1] == "start nvidia-persistenced.service"
    assert "stop nvidia-dcgm.service" not in calls  # not active: left alone


def test_config_file_yaml_and_its_errors(node, run_module, tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    ok, result = run_module(nvidia_mig, {"config_file": str(path), "selected": "mixed",
                                         "nvidia_smi": str(STAND_IN)}, check_mode=True)
    assert ok and result["changed"]
    path.write_text(json.dumps({"version": "v1", "mig-configs": {"a": [{"devices": "all"}]}}))
    args = {"config_file": str(path), "selected": "a", "nvidia_smi": str(STAND_IN)}
    ok, result = run_module(nvidia_mig, args)
    assert not ok and result["msg"] == f"{path}.mig-configs.a[0]: missing required key mig-enabled"
    ok, result = run_module(nvidia_mig, {"config_file": str(tmp_path / "none.yaml"), "selected": "a"})
    assert not ok and result["msg"].endswith("none.yaml: no such file")


def test_boot_script_applies_the_layout_again_after_a_reboot(node, tmp_path):
    """roles/nvidia_mig/files/gpunode-mig-apply with mig.py beside it, as the role installs them."""
    for source in (ROOT / "roles" / "nvidia_mig" / "files" / "gpunode-mig-apply",
                   ROOT / "module_utils" / "gpunode" / "driver" / "mig.py"):
        (tmp_path / source.name).write_text(source.read_text())
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))

    def boot(selected):
        return subprocess.run([sys.executable, str(tmp_path / "gpunode-mig-apply"), f"--config={config}",
                               f"--selected={selected}", f"--nvidia-smi={STAND_IN}"],
                              capture_output=True, text=True, check=False)

    assert boot("mixed").returncode == 0
    node("gpunode-sim", "reboot")
    assert mig.parse_list(node("-L"))[0] == {}
    done = boot("mixed")
    assert done.returncode == 0, done.stderr
    assert "ran nvidia-smi mig -i 0 -cgi 9,14,19,19 -C" in done.stdout and "gpu-reset" not in done.stdout
    assert mig.parse_list(node("-L")) == {0: MIXED, 1: {"1g.10gb": 7}, 2: {}}
    refused = boot("all-1g.10gb")
    assert refused.returncode == 1 and "GPU 2 (Tesla T4, 0x1EB810DE) does not support MIG" in refused.stderr


def test_a_converged_host_costs_three_reads(node):
    calls = []

    def run(argv):
        calls.append(argv[1:])
        return call_stand_in(node.fake, argv[1:])

    entries = mig.parse_config(CONFIG, "mixed")
    mig.converge(mig.Smi(run, str(STAND_IN)), entries, "mixed")
    gis, cis = mig.Smi(run, str(STAND_IN)).listing()
    assert {gi["gpu"] for gi in gis} == {0, 1} and len(cis) == len(gis) == 11
    del calls[:]
    result = mig.converge(mig.Smi(run, str(STAND_IN)), entries, "mixed")
    assert not result["changed"]
    query = [f"--query-gpu={mig.QUERY_GPU}", "--format=csv,noheader"]
    assert calls == [query, ["mig", "-lgi"], ["mig", "-lci"]]


@pytest.mark.parametrize("option, value", [
    ("selected", 'mixed" --drain'), ("selected", "mixed\nExecStartPre=/bin/false"), ("selected", "a b"),
    ("selected", "x" * 64), ("selected", "-mixed"),
    ("nvidia_smi", "/usr/bin/nvidia-smi --debug"), ("nvidia_smi", "-nvidia-smi"),
    ("drain_services", ["dcgm.service; rm"]), ("drain_services", ["nvidia-dcgm\n"]),
])
def test_values_that_would_break_the_boot_unit_or_a_command_are_refused_before_anything_runs(
        node, run_module, option, value):
    """selected lands in gpunode-mig.service's ExecStart= and mig-manager's node label; nvidia_smi and
    the services are run: refused naming the option, with nvidia-smi never asked anything."""
    before = node.state.read_bytes()
    args = dict({"config": CONFIG, "selected": "mixed", "nvidia_smi": str(STAND_IN)}, **{option: value})
    ok, result = run_module(nvidia_mig, args)
    assert not ok
    assert result["msg"].startswith(f"{option}") and "nothing was run" in result["msg"], result["msg"]
    assert result["commands"] == [] and node.state.read_bytes() == before


def test_a_changed_layout_is_one_line_of_the_runs_summary(node, run_module):
    ok, result = apply(run_module, "mixed")
    assert ok, result
    assert result["changes"] == [f"MIG mixed: GPU 0 -> {mig.format_instances(MIXED)}; GPU 1 -> 7x1g.10gb"]
    ok, again = apply(run_module, "mixed")
    assert ok and again["changes"] == []
    assert mig.change_lines("x", {str(i): {"before": {"mig_enabled": False, "instances": {}},
                                           "after": {"mig_enabled": True, "instances": {"1g.10gb": 7}}}
                                  for i in (0, 1, 2, 5)}) == ["MIG x: GPU 0,1,2,5 -> 7x1g.10gb"]


# ---------------------------------------------------------------- the real H100 VM (../shared/fixtures)


def real_mig_sections():
    """``nvidia-smi mig -lgip`` ... as the real H100 printed them: {option: (text, rc)}."""
    text = shared_path("fixtures", "real-hosts", "h100-sxm5-80gb-vm", "smi-mig.txt").read_text()
    sections = {}
    for block in text.split("### nvidia-smi mig ")[1:]:
        head, _, body = block.partition("\n")
        body, _, rc = body.rpartition("rc=")
        sections[head.split()[0]] = (body, int(rc.strip()))
    return sections


def test_the_real_h100s_profiles_are_read_while_mig_is_off():
    sections = real_mig_sections()
    profiles = mig.parse_lgip(sections["-lgip"][0])[0]
    assert list(profiles) == ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
    assert profiles["1g.10gb"] == {"id": 19, "free": 7, "total": 7, "slices": 1}
    assert profiles["7g.80gb"]["id"] == 0 and profiles["7g.80gb"]["slices"] == 7
    # MIG off: no instances, said on stdout with rc 0
    for option in ("-lgi", "-lci"):
        body, rc = sections[option]
        assert (body.strip(), rc) == ("No MIG-enabled devices found.", 0)
        assert mig.parse_lgi(body) == [] and mig.parse_lci(body) == []


def test_the_stand_in_answers_the_listings_as_the_real_one_with_mig_off(node):
    sections = real_mig_sections()
    for option in ("-lgi", "-lci"):
        out = subprocess.run([sys.executable, str(STAND_IN), "mig", option], capture_output=True, text=True,
                             check=False)
        assert (out.stdout, out.returncode) == (sections[option][0].lstrip("\n"), sections[option][1])
    out = subprocess.run([sys.executable, str(STAND_IN), "mig", "-lgip"], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0
    assert mig.parse_lgip(out.stdout)[0] == mig.parse_lgip(sections["-lgip"][0])[0]
