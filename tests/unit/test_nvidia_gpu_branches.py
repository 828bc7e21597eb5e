"""The committed branch table (module_utils/gpunode/driver/branches.py) and branch choice."""


import pytest
from ansible.module_utils.gpunode.driver import branches as nvidia_branches
from ansible.module_utils.gpunode.driver.gpu import (
    blackwell_chip,
    branches_for,
    choose_branches,
    ended_branch,
    needs_open_module,
)
from conftest import ROOT, load_file

gen = load_file(ROOT / "scripts" / "gen-branch-table.py", "gen_branch_table")
# Debian nvidia-detect 550.163.01-5.1 (sid), committed with its source (data/nvidia-detect-ids/README.md)
DATA = ROOT / "data" / "nvidia-detect-ids"


def test_committed_table_is_what_the_generator_makes_from_the_data(tmp_path):
    data = DATA
    table = ROOT / "module_utils" / "gpunode" / "driver" / "branches.py"
    assert gen.main(["--data", str(data), "--output", str(table), "--check"]) == 0


def test_generator_writes_then_reports_unchanged(tmp_path, capsys):
    data = DATA
    out = tmp_path / "table.py"
    assert gen.main(["--data", str(data), "--output", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert gen.main(["--data", str(data), "--output", str(out)]) == 0
    assert "unchanged" in capsys.readouterr().out
    assert gen.main(["--data", str(data), "--output", str(out), "--check"]) == 0


def test_generator_rejects_a_malformed_list_naming_file_and_line(tmp_path, capsys):
    data = DATA
    bad = tmp_path / "data"
    bad.mkdir()
    for path in data.glob("*.ids"):
        (bad / path.name).write_bytes(path.read_bytes())
    (bad / "nvidia-tesla-470.ids").write_text("10DE102D\nnot-an-id\n")
    out = tmp_path / "table.py"
    assert gen.main(["--data", str(bad), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "nvidia-tesla-470.ids: line 2" in err and not out.exists()


def test_check_fails_on_a_stale_table(tmp_path):
    data = DATA
    stale = tmp_path / "table.py"
    stale.write_text("# old\n")
    assert gen.main(["--data", str(data), "--output", str(stale), "--check"]) == 1
    assert stale.read_text() == "# old\n"


def test_table_shape():
    assert list(nvidia_branches.BRANCHES) == sorted(nvidia_branches.BRANCHES, key=int, reverse=True)
    assert nvidia_branches.BRANCHES[0] == nvidia_branches.NEWEST_BRANCH
    seen = set()
    for key, ids in nvidia_branches.SUPPORT.items():
        branches = key.split()
        assert branches == [b for b in nvidia_branches.BRANCHES if b in branches]
        for device_id in ids.split():
            assert len(device_id) == 4 and device_id == device_id.lower() and device_id not in seen
            seen.add(device_id)


@pytest.mark.parametrize(("device_id", "newest", "gpu"), [
    ("102d", "470", "Tesla K80 (Kepler)"),
    ("1091", "390", "Tesla M2090 (Fermi)"),
    ("05e7", "340", "Tesla C1060 (Tesla architecture)"),
    ("1b80", "580", "GeForce GTX 1080 (Pascal)"),
    ("13c2", "580", "GeForce GTX 970 (Maxwell)"),
    ("1eb8", nvidia_branches.NEWEST_BRANCH, "Tesla T4 (Turing)"),
    ("2330", nvidia_branches.NEWEST_BRANCH, "H100 SXM5 (Hopper)"),
])
def test_legacy_branches_named_in_the_issue(device_id, newest, gpu):
    branches, note = branches_for(device_id)
    assert branches[0] == newest, gpu
    assert note is None


def test_volta_gets_390_only_on_x86_64():
    assert "390" in branches_for("1db1", "x86_64")[0]
    assert "390" not in branches_for("1db1", "aarch64")[0]
    assert branches_for("1db1", "aarch64")[0][0] == "580"


@pytest.mark.parametrize("device_id", ["3300", "3041"])  # 3041: a Vera Rubin, outside every known range
def test_gpu_newer_than_the_data_gets_the_newest_branch_and_a_note_naming_id_and_branch(device_id):
    branches, note = branches_for(device_id)
    assert branches == [nvidia_branches.NEWEST_BRANCH]
    assert f"10de:{device_id} is newer than the branch table" in note
    assert f"the newest branch, {nvidia_branches.NEWEST_BRANCH}" in note
    _supported, recommended, warnings = choose_branches([device_id])
    assert recommended == nvidia_branches.NEWEST_BRANCH and warnings == [note]


def test_gb10_of_dgx_spark_is_driven_from_580_on_by_the_open_modules_only():
    """10de:2e12 (lspci -nn on the Gentoo Wiki's DGX Spark page): outside the Blackwell chip ranges."""
    branches, note = branches_for("2e12")
    assert note is None and branches == [b for b in nvidia_branches.BRANCHES if int(b) >= 580]
    assert needs_open_module("2e12") and blackwell_chip("2e12") == "Blackwell GB10 (DGX Spark)"
    assert nvidia_branches.NAMES["2e12"] == "GB10"
    assert not needs_open_module("2e13")  # one ID, not a range


@pytest.mark.parametrize(("branch", "kind", "end"), [
    ("620", "long-term support", "2029-09"), ("595", "production", "2027-03"),
    ("580", "long-term support", "2028-06"), ("610", "new feature", "2026-08"),
    ("535", "long-term support", "2026-06"),
])
def test_branch_kinds_and_ends_as_nvidia_s_620_and_615_pages_say(branch, kind, end):
    assert kind in nvidia_branches.BRANCH_NOTES[branch] and end in nvidia_branches.BRANCH_NOTES[branch]
    assert nvidia_branches.BRANCH_ENDS[branch] == end
    assert "newer than the production" not in " ".join(nvidia_branches.BRANCH_NOTES.values())


def test_an_ended_branch_is_told_after_its_last_month_only():
    assert ended_branch("610", "2026-08-31") is None
    assert "branch 610 has reached its end of life (new feature branch until 2026-08" in ended_branch(
        "610", "2026-09-01")
    assert ended_branch("535", "2026-11-28") and not ended_branch("620", "2026-11-28")
    assert ended_branch("590", "2040-01") is None  # no end date known: nothing said


@pytest.mark.parametrize("device_id", ["2901", "2941", "2b85", "2c02", "2d04", "2f04", "3182"])
def test_blackwell_is_driven_from_570_on(device_id):
    """NVIDIA's Blackwell chip ranges: every branch from 570 (the first for Blackwell) drives them."""
    branches, note = branches_for(device_id)
    assert note is None and branches == [b for b in nvidia_branches.BRANCHES if int(b) >= 570]


def test_the_branches_issue_12_names():
    """R580 the LTS branch and the last for Maxwell, Pascal and Volta; R595 production; R610/R620 newer
    (issue 41: R620 a long-term branch, R610 a new feature branch)."""
    notes = nvidia_branches.BRANCH_NOTES
    assert "long-term support" in notes["580"] and "2028-06" in notes["580"]
    assert "production" in notes["595"]
    assert {"610", "620"} <= set(nvidia_branches.BRANCHES)
    assert nvidia_branches.NEWEST_BRANCH == "620"
    for device_id in ("13c2", "1b80", "1db1"):  # GTX 970 (Maxwell), GTX 1080 (Pascal), V100 (Volta)
        assert branches_for(device_id)[0][0] == "580"
    for device_id in ("1eb8", "20b0", "2330", "26b9"):  # Turing, Ampere, Hopper, Ada
        assert {"580", "590", "595", "610", "620"} <= set(branches_for(device_id)[0])


def test_the_table_names_its_sources_and_each_branch_note_has_one():
    assert any("nvidia-detect" in s for s in nvidia_branches.SOURCES)
    assert set(gen.SUPPORT_PAGES) <= set(nvidia_branches.SOURCES)
    assert gen.OPEN_MODULES_BLOG in nvidia_branches.SOURCES and gen.GB10_SOURCE in nvidia_branches.SOURCES
    assert any("gpu-admin-tools" in s for s in nvidia_branches.SOURCES)
    for branch, _only, note, source in gen.POST_DATA:
        assert not note or source, branch
    for branch, (note, source) in gen.DATA_BRANCH_NOTES.items():
        assert note and source, branch


def test_unknown_id_inside_the_data_s_range_gets_its_neighbours_branches_after_the_data_s():
    """IDs are allocated in chip order: an unlisted ID is of its neighbours' generation."""
    branches, note = branches_for("1e00")  # between Volta 1df6 and Turing 1e02
    assert branches == ["580", "570"] and "1e00" in note and "neighbouring" in note
    branches, note = branches_for("2336")  # between two H100 boards
    assert branches == [b for b in branches_for("2330")[0] if int(b) > int(nvidia_branches.DATA_BRANCH)]
    assert "2336" in note


def test_unknown_id_among_legacy_gpus_gets_no_branch_and_a_reason():
    """The legacy branches' ID lists are final: an ID between GPUs only 470 or older drive is refused."""
    branches, note = branches_for("1000")
    assert branches == [] and "no branch after 550" in note


def test_choose_intersects_and_keeps_newest_first():
    supported, recommended, warnings = choose_branches(["102d", "1eb8"])
    assert supported == ["470"] and recommended == "470" and warnings == []
    supported, recommended, warnings = choose_branches(["1b80", "1eb8"])
    assert recommended == "580" and supported[0] == "580"


def test_choose_with_no_gpu():
    assert choose_branches([]) == ([], None, [])


def test_choose_without_a_common_branch_warns_with_each_gpu_s_branches():
    supported, recommended, warnings = choose_branches(["05e7", "2330"])
    assert supported == [] and recommended is None
    assert len(warnings) == 1 and "05e7: 340" in warnings[0] and "2330: " in warnings[0]
