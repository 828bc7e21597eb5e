"""The check-mode step of every molecule scenario (tests/molecule/).

check-run.py reads ansible-playbook's output (default callback, as molecule
runs it) and must name the task that failed a check run, never one whose
failure a block rescued, and every task that reported a change on converged
nodes. node-state.sh must notice any change under the folders it watches.
"""

import os
import stat
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, load_file

MOLECULE = ROOT / "tests" / "molecule"
check_run = load_file(MOLECULE / "check-run.py", "check_run")

pytestmark = pytest.mark.controller(reason="check-run.py runs on the controller, beside ansible-playbook")

# Shaped like ansible-core 2.19's default callback with callback_result_format=yaml:
# a refusal rescued on one host, then a real failure on the other.
FAILED_RUN = textwrap.dedent("""\
    PLAY [Refuse a wrong checksum] *************************************************

    TASK [nvidia_driver : Runfile | create the download directory] *****************
    --- before
    +++ after
    @@ -1,3 +1,3 @@
         path: /var/cache/gpunode/nvidia-driver
    -    state: absent
    +    state: directory

    changed: [node-a]

    TASK [nvidia_driver : Runfile | download the installer, verifying its checksum] ***
    [ERROR]: Task failed: Module failed: checksum mismatch
    fatal: [node-a]: FAILED! =>
        changed: false
        msg: 'The checksum for /var/cache/gpunode/nvidia-driver/x.run did not match'

    TASK [It refused because of the checksum] **************************************
    ok: [node-a]

    TASK [nvidia_driver : Packages | hold the driver packages] *********************
    failed: [node-b] (item=nvidia-driver-535) =>
        ansible_loop_var: item
        changed: false
        item: nvidia-driver-535
        msg: Failed to find package 'nvidia-driver-535' to perform selection 'hold'.
    ...ignoring

    TASK [nvidia_driver : Packages | install the driver] ***************************
    [ERROR]: Task failed: Module failed: No package matching 'nvidia-driver-535' is available
    fatal: [node-b]: FAILED! =>
        changed: false
        msg: No package matching 'nvidia-driver-535' is available

    PLAY RECAP *********************************************************************
    node-a    : ok=5    changed=1    unreachable=0    failed=0    skipped=0    rescued=1    ignored=0
    node-b    : ok=3    changed=0    unreachable=0    failed=1    skipped=0    rescued=0    ignored=1
    """)

CONVERGED_RUN = textwrap.dedent("""\
    PLAY [Converge] ****************************************************************

    TASK [nvidia_container_runtime : Toolkit | repository key] *********************
    changed: [node-a]

    TASK [nvidia_container_runtime : Docker | daemon.json] *************************
    ok: [node-a]

    TASK [kubelet_gpu : Configure | gates] *****************************************
    changed: [node-b] => (item=/var/lib/kubelet/config.yaml)

    PLAY RECAP *********************************************************************
    node-a    : ok=9    changed=1    unreachable=0    failed=0    skipped=2 rescued=0 ignored=0
    node-b    : ok=9    changed=1    unreachable=0    failed=0    skipped=2 rescued=0 ignored=0
    """)

CLEAN_RUN = CONVERGED_RUN.replace("changed: [node-a]", "ok: [node-a]").replace(
    "changed: [node-b] =>", "ok: [node-b] =>").replace("changed=1", "changed=0")


def report(text, rc, converged):
    return check_run.report(rc, text.splitlines(), converged, "/tmp/check.log")


def test_a_failed_run_names_each_failing_task_and_not_the_rescued_or_ignored_ones():
    ok, lines = report(FAILED_RUN, 2, converged=False)
    text = "\n".join(lines)
    assert not ok
    assert "rc 2" in text and "/tmp/check.log" in text
    assert "node-b: TASK [nvidia_driver : Packages | install the driver]" in text
    assert "No package matching 'nvidia-driver-535' is available" in text
    assert "verifying its checksum" not in text  # rescued on node-a
    assert "hold the driver packages" not in text  # ignored on node-b
    assert "node-a: " not in text


def test_a_fresh_run_may_report_changes():
    ok, lines = report(CONVERGED_RUN, 0, converged=False)
    assert ok
    assert any("node-a" in line and "changed=1" in line for line in lines)


def test_changes_on_converged_nodes_fail_naming_each_task():
    ok, lines = report(CONVERGED_RUN, 0, converged=True)
    text = "\n".join(lines)
    assert not ok
    assert "2 changes" in text
    assert "node-a: TASK [nvidia_container_runtime : Toolkit | repository key]" in text
    assert "node-b: TASK [kubelet_gpu : Configure | gates] (item=/var/lib/kubelet/config.yaml)" in text
    assert "Docker | daemon.json" not in text


def test_a_converged_run_without_changes_passes():
    ok, lines = report(CLEAN_RUN, 0, converged=True)
    assert ok, lines


def test_a_failure_without_a_failed_task_shows_the_end_of_the_output():
    text = "ERROR! the playbook: converge.yml could not be found\n"
    ok, lines = report(text, 1, converged=False)
    assert not ok
    assert any("could not be found" in line for line in lines)


def test_a_run_without_a_recap_is_not_a_pass():
    ok, lines = report("PLAY [x] ***\n", 0, converged=True)
    assert not ok
    assert any("no PLAY RECAP" in line for line in lines)


@pytest.mark.parametrize(("rc", "converged", "want"), [(0, False, 0), (0, True, 1), (2, False, 1)])
def test_main_keeps_the_whole_output_and_exits_by_the_report(tmp_path, rc, converged, want, capsys):
    output = tmp_path / "out.txt"
    output.write_text(CONVERGED_RUN)
    log = tmp_path / "check.log"
    argv = ["--log", str(log)] + (["--converged"] if converged else [])
    argv += ["--", sys.executable, "-c", f"import sys; print(open({str(output)!r}).read()); sys.exit({rc})"]
    assert check_run.main(argv) == want
    assert log.read_text().startswith(CONVERGED_RUN)
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("check run on the " + ("converged" if converged else "fresh"))
    assert first.endswith("passed" if want == 0 else "FAILED")


NODE_STATE = MOLECULE / "node-state.sh"


@pytest.fixture
def node(tmp_path):
    """node-state.sh pointed at a small tree instead of /etc and /usr."""
    tree = tmp_path / "etc"
    (tree / "docker").mkdir(parents=True)
    (tree / "docker" / "daemon.json").write_text("{}\n")
    (tree / "hostname").write_text("node\n")

    def run(*args, limit=None):
        env = dict(os.environ, NODE_STATE_PATHS=str(tree), NODE_STATE_DIR=str(tmp_path / "state"))
        if limit:
            env["NODE_STATE_LIMIT"] = str(limit)
        return subprocess.run(["sh", str(NODE_STATE), *args], env=env, capture_output=True, text=True,
                              check=False)

    run.tree = tree
    return run



def test_an_untouched_node_compares_equal(node):
    assert node("save", "before").returncode == 0
    result = node("compare", "before")
    assert result.returncode == 0, result.stdout
    assert result.stdout.startswith("unchanged: ")


def test_a_written_file_shows_before_and_after(node):
    node("save", "before")
    path = node.tree / "docker" / "daemon.json"
    path.write_text('{"default-runtime": "nvidia"}\n')
    os.utime(path, (1, 1))
    result = node("compare", "before")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "2 lines differ (- before the check run, + after it):"
    assert lines[1].startswith(f"- file {path} f 3 ")
    assert lines[2].startswith(f"+ file {path} f 30 ")


def test_new_files_mode_changes_and_removals_are_changes(node):
    node("save", "before")
    (node.tree / "new.conf").write_text("x\n")
    (node.tree / "hostname").chmod(stat.S_IRUSR)
    (node.tree / "docker" / "daemon.json").unlink()
    result = node("compare", "before")
    assert result.returncode == 1
    out = result.stdout
    assert f"+ file {node.tree}/new.conf f" in out
    assert f"- file {node.tree}/docker/daemon.json f" in out
    assert f"+ file {node.tree}/hostname f 5 400 " in out


def test_a_long_difference_is_cut_and_says_how_much_more(node):
    node("save", "before")
    for n in range(10):
        (node.tree / f"f{n}").write_text("x")
    result = node("compare", "before", limit=4)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    # ten new files (a folder's own mtime is not recorded: its entries are)
    assert lines[0] == "10 lines differ (- before the check run, + after it):"
    assert len(lines) == 1 + 4 + 1
    assert lines[-1].startswith("... 6 more in ")


def test_a_bytecode_cache_a_tool_writes_is_not_a_change_of_the_node(node):
    # fact gathering on bullseye runs lsb_release, whose Python writes its bytecode
    # cache next to lsb_release.py: the folder's mtime moves, nothing of the node changes
    (node.tree / "lsb_release.py").write_text("print('x')\n")
    node("save", "before")
    cache = node.tree / "__pycache__"
    cache.mkdir()
    (cache / "lsb_release.cpython-39.pyc").write_bytes(b"\0")
    result = node("compare", "before")
    assert result.returncode == 0, result.stdout
    # a folder that appears is still a change
    (node.tree / "conf.d").mkdir()
    result = node("compare", "before")
    assert result.returncode == 1 and f"+ file {node.tree}/conf.d d" in result.stdout


def test_compare_without_a_saved_state_is_an_error(node):
    result = node("compare", "never-saved")
    assert result.returncode == 2
    assert "no saved state" in result.stdout
