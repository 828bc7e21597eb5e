"""nvidia_gpu_validate's imex and peermem checks, and the inventory's fabric over the PCI bus's.

imex reads the real ``nvidia-imex-ctl -N`` of an 18-node GB200 domain (AWS ParallelCluster's guide,
../shared/fixtures/fabric/imex-ctl) and copies of it changed here into the failures its legend
names; the older GH200 output (jpsnips-nv) parses too. The node is the simulated GB200 tray
(tests/simnode/specs/gb200-tray.yml) with the real 4x GB200 nvidia-smi -q -x; peermem reads the
proc and sys trees make_sysfs.py writes."""

import pytest
import yaml
from ansible.module_utils.gpunode.driver.driver import MODULE_NEEDS
from ansible.module_utils.gpunode.validate import imex, run
from conftest import ROOT, load_file, shared_path

make_sysfs = load_file(ROOT / "tests" / "simnode" / "make_sysfs.py", "make_sysfs")
DOMAIN = "Nodes From\\To"


def fixture(name):
    return shared_path("fixtures", "fabric", *name).read_text()


def eighteen():
    return fixture(("imex-ctl", "aws-pcluster-p6e-gb200-imex-ctl-N-18nodes.txt"))


class Host:
    """nvidia-smi -q -x answers the real GB200 reading; nvidia-imex-ctl what each test gives."""

    def __init__(self, query=(0, "READY\n", ""), domain=None, programs=("nvidia-smi", "nvidia-imex-ctl")):
        self.answers = {"-q": query, "-N": domain or (0, eighteen(), "")}
        self.programs, self.ran = programs, []

    def which(self, name):
        return f"/usr/bin/{name}" if name in self.programs else None

    def run(self, argv):
        self.ran.append(argv[1:])
        if argv[0].endswith("nvidia-smi"):
            return 0, fixture(("smi-qx-k8s-test-infra", "qx-gb200.xml")), ""
        return self.answers[argv[1]]


def tray(tmp_path, modules=None):
    spec = yaml.safe_load((ROOT / "tests" / "simnode" / "specs" / "gb200-tray.yml").read_text())
    spec["modules"] = dict(spec["modules"], nvidia="580.173.02", **(modules or {}))
    make_sysfs.make_tree(make_sysfs.validate_spec(spec), str(tmp_path))
    return {"sysfs_root": str(tmp_path / "sys"), "proc_root": str(tmp_path / "proc"),
            "nvidia_smi": "/usr/bin/nvidia-smi"}


def check(host, params, name="imex", **extra):
    outcome = run.validate(host, dict(params, checks=[name], **extra))
    return [(r["gpu"], r["passed"], r["message"]) for r in outcome["results"]]


# ---------------------------------------------------------------- the real domain passes


def test_the_real_18_node_domain_is_read_as_printed():
    reading = imex.parse_domain(eighteen())
    assert sorted(reading["nodes"]) == list(range(18))
    assert reading["nodes"][3] == ("172.31.49.228", "READY")
    assert reading["table"] == {row: dict.fromkeys(range(18), "C") for row in range(18)}
    assert (reading["domain"], imex.problems(reading)) == ("UP", [])


def test_the_older_gh200_output_without_versions_is_read_too():
    text = fixture(("imex-ctl", "jpsnips-imex-1node-fabric-hdl-import101-README.md"))
    start = text.index("Node #0   - 10.136.206.47")
    reading = imex.parse_domain(text[start:text.index("Domain State: UP", start) + 16])
    assert reading["nodes"] == {0: ("10.136.206.47", "READY"), 1: ("10.136.206.48", "READY")}
    assert (len(reading["table"]), reading["domain"], imex.problems(reading)) == (2, "UP", [])


def test_a_host_run_imex_on_a_tray_passes_both_questions(tmp_path):
    host = Host()
    assert check(host, tray(tmp_path), imex_mode="host") == [
        ("host", True, "nvidia-imex-ctl -q: READY"),
        ("host", True, "nvidia-imex-ctl -N: Domain State UP, 18 nodes READY, every pair Connected")]
    assert host.ran[1:] == [["-q"], ["-N"]]


# ---------------------------------------------------------------- copies of it fail, naming nodes and state


def cell(text, row, column, code):
    """``text`` with the connectivity table's cell (row, column) set to ``code``."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith(DOMAIN)) + 1 + row
    words = lines[at].split()
    words[1 + column] = code
    lines[at] = "   ".join(words)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("old, new, wanted", [
    ("172.31.50.44    - READY", "172.31.50.44    - UNAVAILABLE", ["node #5 (172.31.50.44) UNAVAILABLE"]),
    ("Domain State: UP", "Domain State: DOWN", ["Domain State DOWN, wanted UP"]),
    ("Domain State: UP", "", ["Domain State not printed, wanted UP"]),
])
def test_a_node_or_the_domain_in_another_state_fails_naming_it(tmp_path, old, new, wanted):
    host = Host(domain=(0, eighteen().replace(old, new), ""))
    [query, domain] = check(host, tray(tmp_path), imex_mode="host")
    assert query[1] is True
    assert domain[1:] == (False, "nvidia-imex-ctl -N: " + "; ".join(wanted))


@pytest.mark.parametrize("code, meaning", [("D", "Disconnected"), ("N", "Never Connected"),
                                           ("!V!", "Version mismatch"), ("R", "Recovering")])
def test_a_pair_not_connected_fails_naming_both_nodes_and_the_legend(tmp_path, code, meaning):
    text = cell(eighteen(), 3, 7, code)
    [_query, domain] = check(Host(domain=(0, text, "")), tray(tmp_path), imex_mode="host")
    assert domain[1:] == (False, f"nvidia-imex-ctl -N: node #3 (172.31.49.228) to #7: {code} ({meaning})")


def test_a_node_lost_to_all_is_named_by_each_row(tmp_path):
    text = eighteen()
    for other in range(18):
        text = cell(cell(text, 17, other, "D"), other, 17, "D")
    message = check(Host(domain=(0, text, "")), tray(tmp_path), imex_mode="host")[1][2]
    assert "node #0 (172.31.48.81) to #17: D (Disconnected)" in message
    assert "node #17 (172.31.56.47) to #0, #1, #2, #3, #4, #5, #6, #7, #8" in message
    assert message.count("to #17: D") == 17


def test_a_node_missing_from_the_table_fails(tmp_path):
    lines = [line for line in eighteen().splitlines() if not line.strip().startswith("9 ")]
    message = check(Host(domain=(0, "\n".join(lines), "")), tray(tmp_path), imex_mode="host")[1][2]
    assert message == "nvidia-imex-ctl -N: node #9 (172.31.53.80): not in the connectivity table"


def test_a_daemon_that_does_not_answer_fails_both_saying_what_it_said(tmp_path):
    refused = (1, "", "Connection refused: 127.0.0.1:50005\n")
    results = check(Host(query=refused, domain=refused), tray(tmp_path), imex_mode="host")
    assert results == [
        ("host", False, "nvidia-imex-ctl -q: Connection refused: 127.0.0.1:50005 (exit 1), wanted READY"),
        ("host", False, "nvidia-imex-ctl -N: Connection refused: 127.0.0.1:50005: no IMEX domain read")]


def test_no_nvidia_imex_ctl_on_a_host_run_tray_fails(tmp_path):
    [result] = check(Host(programs=("nvidia-smi",)), tray(tmp_path), imex_mode="host")
    assert result[1:] == (False, "nvidia-imex-ctl not found: the nvidia-imex package (at the driver's "
                                 "version) is not installed")


# ---------------------------------------------------------------- when the check does not apply


def test_dra_mode_runs_nothing_on_the_host(tmp_path):
    host = Host()
    assert check(host, tray(tmp_path), imex_mode="dra") == [("host", None, run.DRA_IMEX)]
    assert host.ran == [["-q", "-x"]]


def test_the_inventory_s_fabric_wins_over_the_gb200_ids(tmp_path):
    """A board that shares the GB200 IDs but stands alone: no IMEX domain, no cluster UUID asked."""
    params = tray(tmp_path)
    assert check(Host(), params, imex_mode="host", fabric="none") == [
        ("host", None, "not an NVL72 tray (fabric none): no IMEX domain")]
    host = Host()
    zero = fixture(("smi-qx-k8s-test-infra", "qx-gb200.xml")).replace(
        "00000001-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000000")
    host.run = lambda argv: (0, zero, "")
    assert [passed for _g, passed, _m in check(host, params, "fabric")] == [False] * 4
    alone = check(host, params, "fabric", fabric="none")
    assert [passed for _g, passed, _m in alone] == [True] * 4 and alone[0][2].endswith("(none)")


# ---------------------------------------------------------------- peermem


def test_peermem_loaded_passes_and_unloaded_fails_naming_what_it_needs(tmp_path):
    loaded = tray(tmp_path / "loaded", {"ib_core": None, "nvidia_peermem": "580.173.02"})
    assert check(Host(), loaded, "peermem", peermem=True) == [("host", True, "nvidia_peermem is loaded")]
    bare = tray(tmp_path / "bare")
    [result] = check(Host(), bare, "peermem", peermem=True)
    assert result[1] is False
    assert result[2] == (f"nvidia_peermem is not loaded (not in {bare['proc_root']}/modules nor live under "
                         f"{bare['sysfs_root']}/module): {MODULE_NEEDS['nvidia_peermem']}")
    assert check(Host(), bare, "peermem") == [("host", None, "nvidia_peermem not chosen (peermem false)")]


def test_peermem_is_read_from_sysfs_where_proc_modules_cannot_be(tmp_path):
    params = tray(tmp_path, {"nvidia_peermem": None})
    (tmp_path / "proc" / "modules").unlink()
    assert (tmp_path / "sys" / "module" / "nvidia_peermem" / "initstate").read_text().strip() == "live"
    assert check(Host(), params, "peermem", peermem=True)[0][1] is True
