"""The boot unit's entry (module_utils/gpunode/readiness/boot.py) and its archive
(action_plugins/gpunode_boot_archive.py): the decisions run on every target Python, the archive is
built on the controller and run as the node runs it."""

import json
import re
import subprocess
import sys
import zipfile

import pytest
from ansible.module_utils.gpunode.readiness import boot
from conftest import ROOT, load_file

TYPE = "gpunode.io/GPUValidated"
RUNNER = str(ROOT / "roles" / "gpu_validate" / "files" / "gpunode_boot_runner.py")
UNREACHABLE = {"failed": True, "msg": "cannot reach the API server for node gpu-1 at https://x:6443: refused"}
NO_NODE = {"failed": True, "msg": "GET /api/v1/nodes/gpu-1: not found (404) for node gpu-1 at https://x"}
FORBIDDEN = {"failed": True, "msg": "PATCH /api/v1/nodes/gpu-1/status: forbidden (403) for node gpu-1"}
PASSED = {"passed": True, "marker": {"passed": True, "failed_checks": [], "driver_version": "580.95.05"}}
FAILED = {"passed": False, "failed": True, "msg": "GPU validation failed: ecc on GPU 0",
          "marker": {"passed": False, "failed_checks": ["ecc"], "driver_version": "580.95.05"}}


class Node:
    """The modules as the archive answers them: conditions answered in turn, one validation."""

    def __init__(self, validation, *conditions):
        self.validation, self.conditions, self.calls = validation, list(conditions), []

    def __call__(self, name, params):
        self.calls.append((name, params.get("reason")))
        self.labels = params.get("labels")
        if name == "nvidia_gpu_validate":
            self.validate_params = params
            return self.validation
        return self.conditions.pop(0) if self.conditions else {"changed": True, "node_name": "gpu-1"}


def run_boot(tmp_path, node, **settings):
    waits, lines = [], []
    status = boot.boot(dict({"condition_type": TYPE, "retry_seconds": 10, "validate": {}}, **settings),
                       node, run_dir=str(tmp_path / "run"), sleep=waits.append, log=lines.append)
    return status, waits, lines


def test_a_boot_publishes_not_validated_then_the_verdict(tmp_path):
    node = Node(PASSED)
    status, _waits, _lines = run_boot(tmp_path, node, marker=str(tmp_path / "lib" / "validated.json"))
    assert status == 0
    assert node.calls == [("gpu_node_condition", "NotValidatedSinceBoot"), ("nvidia_gpu_validate", None),
                          ("gpu_node_condition", "Passed")]
    assert (tmp_path / "run" / "boot").exists()
    for record in (tmp_path / "run" / "validated.json", tmp_path / "lib" / "validated.json"):
        assert json.loads(record.read_text()) == PASSED["marker"]


def test_the_validation_gets_the_roles_arguments_and_its_defaults_for_those_the_role_omitted(tmp_path):
    # the settings file holds null where the role's task omits the argument (checks: every one that applies)
    node = Node(PASSED)
    run_boot(tmp_path, node, validate={"checks": None, "driver_version": None, "sysfs_root": "/opt/sim/sys",
                                       "peermem": False, "dcgm_diag_level": 1})
    assert node.validate_params == {"sysfs_root": "/opt/sim/sys", "peermem": False, "dcgm_diag_level": 1}


TRAY = "00000001-0000-0000-0000-000000000001.2"


@pytest.mark.parametrize(("clique_label", "clique", "labels"), [
    (True, TRAY, {"nvidia.com/gpu.clique": TRAY}),
    (True, None, {"nvidia.com/gpu.clique": None}),  # the fabric has no clique now: gpunode's label goes
    (False, TRAY, {}),
])
def test_the_verdict_carries_the_clique_label_as_the_role_does(tmp_path, clique_label, clique, labels):
    node = Node(dict(PASSED, clique=clique))
    assert run_boot(tmp_path, node, clique_label=clique_label)[0] == 0
    assert node.calls[-1] == ("gpu_node_condition", "Passed") and node.labels == labels


def test_a_boot_already_validated_by_the_play_publishes_no_false(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "validated.json").write_text(json.dumps(PASSED["marker"]))
    node = Node(PASSED)
    assert run_boot(tmp_path, node)[0] == 0
    assert [c for c in node.calls if c[0] == "gpu_node_condition"] == [("gpu_node_condition", "Passed")]


def test_a_failed_validation_publishes_its_message_and_exits_1(tmp_path):
    node = Node(FAILED)
    status, _waits, lines = run_boot(tmp_path, node)
    assert status == 1
    assert node.calls[-1] == ("gpu_node_condition", "ValidationFailed")
    assert lines[1] == "failed: GPU validation failed: ecc on GPU 0"


NO_KUBECONFIG = {"failed": True, "msg": "no kubelet kubeconfig: ..."}


@pytest.mark.parametrize("answer", [UNREACHABLE, NO_NODE, NO_KUBECONFIG])
def test_a_publication_waits_while_the_api_server_or_the_node_is_not_there(tmp_path, answer):
    node = Node(PASSED, answer, answer)
    status, waits, lines = run_boot(tmp_path, node)
    assert status == 0 and waits == [1.0, 2.0]
    assert lines[0].endswith("trying again in 1 s")


def test_a_refused_publication_is_not_retried_and_fails_the_unit(tmp_path):
    node = Node(PASSED, {"changed": False, "node_name": "gpu-1"}, FORBIDDEN)
    status, waits, lines = run_boot(tmp_path, node)
    assert status == 1 and waits == []
    assert "not published: PATCH" in lines[-1]


def test_publications_give_up_after_retry_seconds(tmp_path):
    node = Node(PASSED, *[UNREACHABLE] * 20)
    status, waits, _lines = run_boot(tmp_path, node, retry_seconds=10)
    assert status == 1
    assert waits == [1.0, 2.0, 4.0, 1.0, 2.0, 4.0]  # 7 s of 10 each; the next wait (8 s) would pass them


def test_without_a_condition_type_only_the_verdict_is_recorded(tmp_path):
    node = Node(PASSED)
    assert run_boot(tmp_path, node, condition_type=None)[0] == 0
    assert node.calls == [("nvidia_gpu_validate", None)]


def test_the_unit_says_in_its_journal_how_long_its_run_took_and_the_cpu_it_spent(tmp_path, capsys):
    settings = tmp_path / "boot-validate.json"
    settings.write_text(json.dumps({"validate": {}}))

    def run_module(archive, name, params, timeout):
        # a module's own process: some CPU, and long enough to show in tenths of a second
        work = "import time; sum(range(2000000)); time.sleep(0.3)"
        subprocess.run([sys.executable, "-c", work], check=True)
        return PASSED

    assert boot.main([str(settings)], run_module, run_dir=str(tmp_path / "run")) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    wall, cpu = (float(word) for word in re.findall(r"([0-9.]+) s", last))
    assert last.startswith("boot validation ended in ")
    assert last.endswith("(this unit and the modules it ran)")
    assert cpu > 0 and wall >= 0.3


def test_delays_double_up_to_thirty_seconds():
    assert list(boot.delays(100)) == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


@pytest.fixture(scope="module")
def archive_module():
    return load_file(ROOT / "action_plugins" / "gpunode_boot_archive.py", "gpunode_boot_archive_action")


def _modules(root, folder):
    return {name: str(root / folder / f"{name}.py") for name in ("nvidia_gpu_validate", "gpu_node_condition")}


@pytest.mark.controller(reason="the archive is built by an action plugin, with the controller's ansible-core")
def test_the_archive_is_the_same_bytes_each_time_and_runs_the_modules(tmp_path, archive_module):
    files = archive_module.entries(_modules(ROOT, "library"), RUNNER)
    first, second = tmp_path / "a.pyz", tmp_path / "b.pyz"
    archive_module.write_archive(files, str(first))
    archive_module.write_archive(files, str(second))
    assert first.read_bytes() == second.read_bytes()
    again = archive_module.entries(_modules(ROOT, "library"), RUNNER)
    assert archive_module.digest(files) == archive_module.digest(again)
    names = zipfile.ZipFile(first).namelist()
    assert names == sorted(names)
    assert {"__main__.py", "ansible/__init__.py", "ansible/module_utils/basic.py", "gpu_node_condition.py",
            "ansible/module_utils/gpunode/readiness/boot.py"} <= set(names)
    args = json.dumps({"ANSIBLE_MODULE_ARGS": {"checks": ["nvml"], "sysfs_root": str(tmp_path)}})
    done = subprocess.run([sys.executable, str(first), "module", "nvidia_gpu_validate", args],
                          capture_output=True, text=True, check=False)
    answer = json.loads(done.stdout[done.stdout.index("{"):])
    # the arguments reached the module (ansible-core 2.21 returns no invocation here): only nvml ran
    assert {result["check"] for result in answer["results"]} == {"nvml"} and "marker" in answer


@pytest.mark.controller(reason="builds the collection and its archive with the controller's ansible-core")
def test_the_archive_of_the_collection_imports_from_the_collection(tmp_path, archive_module):
    build = ROOT / "scripts" / "build_collection.py"
    subprocess.run([sys.executable, str(build), "--tree", str(tmp_path / "tree"), "--no-tarball"],
                   check=True, capture_output=True)
    collection = next((tmp_path / "tree" / "ansible_collections").glob("*/*"))
    runner = collection / "roles" / "gpu_validate" / "files" / "gpunode_boot_runner.py"
    files = archive_module.entries(_modules(collection / "plugins", "modules"), str(runner))
    archive_module.write_archive(files, str(tmp_path / "c.pyz"))
    prefix = "/".join(collection.parts[-3:]) + "/plugins/module_utils"
    assert f"{prefix}/gpunode/readiness/boot.py" in files and f"{prefix}/__init__.py" in files
    assert "from ansible_collections." in files["__main__.py"].decode()
    done = subprocess.run([sys.executable, str(tmp_path / "c.pyz"), "module", "gpu_node_condition",
                           json.dumps({"ANSIBLE_MODULE_ARGS": {
                               "type": TYPE, "status": "True", "reason": "Passed",
                               "kubeconfig": "/nonexistent/kubelet.conf"}})],
                          capture_output=True, text=True, check=False)
    assert "/nonexistent/kubelet.conf" in json.loads(done.stdout[done.stdout.index("{"):])["msg"]
