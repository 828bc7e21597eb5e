"""What a node's filesystem really does, against every module that edits the node (issue 28).

Each case builds a small node under a folder and runs the module's main() as Ansible would.
Devices, FIFOs and sockets are made with mknod/mkfifo/bind inside temp folders (never the
real /dev/null); full and read-only filesystems are tmpfs mounts in a private mount
namespace (a forked child that unshares its mounts: root only, skipped and counted
elsewhere); kills and interleavings are forked children of this test whose host-layer
functions the test patches, never options of the modules.
"""

import ctypes
import json
import os
import pickle
import select
import signal
import socket
import stat
import subprocess
import traceback

import containerd_runtime
import docker_daemon_config
import gpunode_node_state
import gpunode_planned_files
import kube_scheduler_extender
import kubelet_feature_gates
import manifest_files
import nvidia_driver_state
import nvidia_mig
import pytest
import yaml
from ansible.module_utils.gpunode.host import edits as host_edits
from ansible.module_utils.gpunode.host import files as host_files
from ansible.module_utils.gpunode.host import lock
from conftest import FIXTURES
from fake_proc import FakeProc
from test_module_docs import documented_options

CONTAINERD_DEFAULTS = (FIXTURES / "docker" / "containerd-config-default-1.6.20-debian.toml").read_text()
CONTAINERD_DEBIAN = FIXTURES / "docker" / "containerd-config.toml-debian-bookworm-default.toml"
SCHEDULER_MANIFEST = FIXTURES / "kube-scheduler" / "kubeadm-v1.29.2-commented.yaml"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="mknod and mounts need root (CI runs as root)")
CLONE_NEWNS = 0x00020000


# ---------------------------------------------------------------- the nodes, one per module


def docker_node(root):
    path = root / "etc" / "docker" / "daemon.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{\n    "log-driver": "json-file"\n}\n')
    args = {"path": str(path), "settings": {"default-runtime": "nvidia"}, "service": ""}
    return {"module": docker_daemon_config, "args": args, "target": path, "files": [path],
            "backup_dirs": [path.parent]}


def containerd_node(root):
    config = root / "etc" / "containerd" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_bytes(CONTAINERD_DEBIAN.read_bytes())
    dropin = config.parent / "conf.d" / "99-nvidia.toml"
    dropin.parent.mkdir()
    dropin.write_text("# an earlier drop-in, to be rewritten (and backed up first)\n")
    backups = root / "backups"
    args = {"config_path": str(config), "dropin_path": str(dropin), "service": "",
            "containerd_version": "1.6.20", "backup_dir": str(backups)}
    return {"module": containerd_runtime, "args": args, "target": dropin, "files": [dropin, config],
            "backup_dirs": [backups]}


def kubelet_node(root):
    path = root / "etc" / "default" / "kubelet"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("KUBELET_EXTRA_ARGS=--v=2\n")
    args = {"flags_file": str(path), "gates": {"DevicePlugins": True}, "kubernetes_version": "1.9.0",
            "check_running": False}
    return {"module": kubelet_feature_gates, "args": args, "target": path, "files": [path],
            "backup_dirs": [path.parent]}


def scheduler_node(root):
    etc = root / "etc" / "kubernetes"
    manifest = etc / "manifests" / "kube-scheduler.yaml"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(SCHEDULER_MANIFEST.read_text())
    manifest.chmod(0o600)
    config = etc / "scheduler-extender-config.yaml"
    args = {"manifest_path": str(manifest), "config_path": str(config),
            "backup_dir": str(etc / "gpunode-backups"), "proc_root": str(FakeProc(root).root),
            "health_url": "", "kubeadm_config": "skip"}
    return {"module": kube_scheduler_extender, "args": args, "target": config,
            "files": [config, manifest], "backup_dirs": [etc / "gpunode-backups"]}


def manifests_node(root):
    folder = root / "manifests"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "device-plugin.yaml"
    path.write_text("kind: ConfigMap\n")
    args = {"path": str(folder), "files": {"device-plugin.yaml": "kind: DaemonSet\n"}}
    return {"module": manifest_files, "args": args, "target": path, "files": [path],
            "backup_dirs": [folder]}


def planned_node(root):
    """site.yml's kubelet role writing what the one read planned (gpunode_planned_files)."""
    path = root / "var" / "lib" / "kubelet" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("featureGates: {}\n")
    edit = {"path": str(path), "before": "featureGates: {}\n",
            "after": "featureGates:\n  DevicePlugins: true\n"}
    return {"module": gpunode_planned_files, "args": {"files": [edit]}, "target": path, "files": [path],
            "backup_dirs": [path.parent]}


def mig_node(root):
    path = root / "mig-parted.yaml"
    args = {"config_file": str(path), "selected": "all-disabled", "nvidia_smi": "/bin/false"}
    return {"module": nvidia_mig, "args": args, "target": path, "files": [], "backup_dirs": []}


def driver_node(root):
    path = root / "modprobe.d" / "blacklist-nouveau.conf"
    return {"module": nvidia_driver_state, "args": {"method": "packages"}, "target": path,
            "files": [], "backup_dirs": []}


WRITERS = {"docker_daemon_config": docker_node, "containerd_runtime": containerd_node,
           "kubelet_feature_gates": kubelet_node, "kube_scheduler_extender": scheduler_node,
           "manifest_files": manifests_node, "gpunode_planned_files": planned_node}
READERS = {**WRITERS, "nvidia_mig": mig_node}  # the modules that read a file the operator names
EDITORS = {**READERS, "nvidia_driver_state": driver_node}  # every module that takes the node's lock
MODULES = {module.__name__: module for module in (
    docker_daemon_config, containerd_runtime, kubelet_feature_gates, kube_scheduler_extender, manifest_files,
    gpunode_planned_files, nvidia_mig, nvidia_driver_state)}


@pytest.fixture(autouse=True)
def _containerd_16(monkeypatch):
    """The node's containerd is Debian's 1.6.20 (no binary is run)."""
    monkeypatch.setattr(containerd_runtime, "containerd_facts",
                        lambda module, wanted: ("1.6.20~ds1", CONTAINERD_DEFAULTS))


@pytest.fixture
def no_hang():
    """A read that blocks (a FIFO opened) fails the test after 20 s instead of hanging it."""
    def alarm(_signum, _frame):
        raise TimeoutError("the module blocked for 20 s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def snapshot(root):
    """Every regular file under root: relative path -> bytes."""
    found = {}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                with open(path, "rb") as handle:
                    found[os.path.relpath(path, root)] = handle.read()
    return found


# ---------------------------------------------------------------- forked children


def in_child(work):
    """Run ``work()`` in a forked child; ('ok', value), ('error', text) or ('exit', status)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read_end)
        try:
            outcome = ("ok", work())
        except BaseException as exc:  # everything, SystemExit too, goes back to the parent
            outcome = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        with os.fdopen(write_end, "wb") as out:
            pickle.dump(outcome, out)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as incoming:
        data = incoming.read()
    _pid, status = os.waitpid(pid, 0)
    return pickle.loads(data) if data else ("exit", status)


def mount_private_tmpfs(folder, size="64k"):
    """In this (child) process: a private mount namespace with a tmpfs on ``folder``."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    subprocess.run(["mount", "--make-rprivate", "/"], check=True, capture_output=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(folder)],
                   check=True, capture_output=True)


def fill(folder):
    """Take every free byte of the filesystem holding ``folder``."""
    with open(os.path.join(folder, "filler"), "wb", buffering=0) as handle:
        for chunk in (65536, 4096, 1):
            try:
                while True:
                    handle.write(b"\0" * chunk)
            except OSError:
                continue


def private_mounts_work(tmp_path):
    folder = tmp_path / "probe"
    folder.mkdir()
    return in_child(lambda: mount_private_tmpfs(folder)) == ("ok", None)


@pytest.fixture
def private_mount(tmp_path):
    if os.geteuid() != 0 or not private_mounts_work(tmp_path):
        pytest.skip("needs root and unshare -m (a private mount namespace); CI runs as root")
    folder = tmp_path / "node"
    folder.mkdir()
    return folder


# ---------------------------------------------------------------- 1, 2: what is not a regular file


def make_fifo(path):
    os.mkfifo(path)
    return "a FIFO"


def make_socket(path):
    server = socket.socket(socket.AF_UNIX)
    cwd = os.getcwd()
    os.chdir(path.parent)  # a socket's path is at most 107 bytes: bind the name in its folder
    try:
        server.bind(path.name)
    finally:
        os.chdir(cwd)
        server.close()
    return "a socket"


def make_directory(path):
    path.mkdir()
    return "a directory"


def make_device(path):
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a null device of the test's own
    return "a character device"


def make_link_to_device(path):
    device = path.parent / "null-device"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    path.symlink_to(device)
    return "a character device"


KINDS = {"fifo": make_fifo, "socket": make_socket, "directory": make_directory,
         "device": pytest.param(make_device, marks=ROOT_ONLY),
         "link-to-device": pytest.param(make_link_to_device, marks=ROOT_ONLY)}


@pytest.mark.parametrize("make", KINDS.values(), ids=list(KINDS))
@pytest.mark.parametrize("name", READERS)
def test_a_file_that_is_not_regular_is_refused_naming_it_and_left_as_it_is(
        run_module, tmp_path, no_hang, name, make):
    node = READERS[name](tmp_path)
    target = node["target"]
    if target.exists():
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    kind = make(target)
    mode = os.lstat(target).st_mode

    ok, result = run_module(node["module"], node["args"])

    assert not ok, result
    assert str(target) in result["msg"] and kind in result["msg"], result["msg"]
    assert os.lstat(target).st_mode == mode  # still the FIFO, device, link or folder it was


def test_a_drop_in_masked_by_a_link_to_dev_null_is_the_operators_decision(tmp_path):
    dropin = tmp_path / "kubelet.service.d" / "10-kubeadm.conf"
    dropin.parent.mkdir()
    dropin.symlink_to("/dev/null")  # only read with stat: the real /dev/null is never opened
    problem = host_files.not_regular(str(dropin))
    assert problem.startswith(f"{dropin}: a symbolic link to /dev/null, which is a character device")
    assert "masks a systemd unit or drop-in" in problem


def test_a_fifo_that_appears_after_the_check_is_refused_by_the_open_not_waited_on(
        tmp_path, monkeypatch, no_hang):
    fifo = tmp_path / "daemon.json"
    os.mkfifo(fifo)
    monkeypatch.setattr(host_files, "not_regular", lambda path: None)  # the stat saw a regular file

    with pytest.raises(OSError, match=f"^{fifo}: is a FIFO"):
        host_files.read_text(str(fifo))


# ---------------------------------------------------------------- 3: a missing unit or drop-in


@pytest.mark.parametrize("relative", ["kubelet.service.d/10-kubeadm.conf", "kubelet.service"])
def test_a_missing_unit_or_drop_in_is_refused_not_created(run_module, tmp_path, relative):
    path = tmp_path / "systemd" / relative
    path.parent.mkdir(parents=True)
    args = {"flags_file": str(path), "gates": {"DevicePlugins": True}, "kubernetes_version": "1.9.0",
            "check_running": False}

    ok, result = run_module(kubelet_feature_gates, args)

    assert not ok
    assert result["msg"].startswith(f"{path}: does not exist; a systemd unit or drop-in is never created")
    assert not path.exists()


# ---------------------------------------------------------------- 4, 6: full and read-only filesystems


def run_on_broken_filesystem(run_module, folder, name, how, backup):
    def work():
        mount_private_tmpfs(folder)
        node = WRITERS[name](folder)
        if backup:
            node["args"]["backup"] = True
        before = snapshot(folder)
        if how == "full":
            fill(folder)
        else:
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True, capture_output=True)
        ok, result = run_module(node["module"], node["args"])
        after = snapshot(folder)
        after.pop("filler", None)
        return node["files"], ok, result, before, after

    outcome = in_child(work)
    assert outcome[0] == "ok", outcome
    return outcome[1]


@pytest.mark.parametrize("how, cause", [("full", "No space left on device"),
                                        ("read-only", "Read-only file system")])
@pytest.mark.parametrize("name", WRITERS)
def test_a_write_error_names_the_file_and_the_cause_and_changes_nothing(
        run_module, private_mount, name, how, cause):
    files, ok, result, before, after = run_on_broken_filesystem(run_module, private_mount, name, how, False)

    assert not ok, result
    assert cause in result["msg"], result["msg"]
    assert any(f"{path}: cannot write: {cause}" in result["msg"] for path in files), result["msg"]
    assert after == before  # no file changed, no temp file left


@pytest.mark.parametrize("name", WRITERS)
def test_a_backup_that_fails_on_a_full_disk_leaves_no_copy(run_module, private_mount, name):
    _files, ok, result, before, after = run_on_broken_filesystem(
        run_module, private_mount, name, "full", True)

    assert not ok, result
    assert "No space left on device" in result["msg"] and "no backup kept" in result["msg"], result["msg"]
    assert after == before  # no empty or truncated backup beside the file or in the backup folder


# ---------------------------------------------------------------- 5: umask 077


@pytest.mark.parametrize("name, option, mode", [
    ("docker_daemon_config", "path", 0o644),
    ("containerd_runtime", "dropin_path", 0o644),
    ("kubelet_feature_gates", "flags_file", 0o644),
    ("manifest_files", None, 0o644),
    ("kube_scheduler_extender", "config_path", 0o600),
])
def test_created_folders_and_files_get_their_documented_modes_under_umask_077(
        run_module, tmp_path, name, option, mode):
    node = WRITERS[name](tmp_path)
    new_folder = tmp_path / "new" / "folder"
    args = dict(node["args"])
    if option is None:  # manifest_files: the folder of the manifests
        args["path"] = str(new_folder)
        created = new_folder / "device-plugin.yaml"
    else:
        created = new_folder / os.path.basename(args[option])
        args[option] = str(created)
    previous = os.umask(0o077)
    try:
        ok, result = run_module(node["module"], args)
    finally:
        os.umask(previous)

    assert ok, result
    assert stat.S_IMODE(created.stat().st_mode) == mode
    assert stat.S_IMODE(new_folder.stat().st_mode) == 0o755
    assert stat.S_IMODE(new_folder.parent.stat().st_mode) == 0o755


# ---------------------------------------------------------------- 7: line endings


def test_a_crlf_daemon_json_keeps_its_line_endings(run_module, tmp_path):
    path = tmp_path / "daemon.json"
    path.write_bytes(b'{\r\n    "log-driver": "json-file"\r\n}\r\n')
    args = {"path": str(path), "settings": {"default-runtime": "nvidia"}, "service": ""}

    ok, result = run_module(docker_daemon_config, args)

    assert ok and result["changed"], result
    data = path.read_bytes()
    assert data.count(b"\r\n") == data.count(b"\n") == 4
    assert json.loads(data) == {"log-driver": "json-file", "default-runtime": "nvidia"}
    assert run_module(docker_daemon_config, args)[1]["changed"] is False


def test_a_crlf_drop_in_is_read_as_systemd_reads_it_and_keeps_its_line_endings(run_module, tmp_path):
    dropin = tmp_path / "kubelet.service.d" / "10-kubeadm.conf"
    dropin.parent.mkdir()
    dropin.write_bytes(b'[Service]\r\nEnvironment="KUBELET_KUBECONFIG_ARGS=--kubeconfig=/k.conf"\r\n'
                       b"ExecStart=\r\nExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS \\\r\n"
                       b"  $KUBELET_EXTRA_ARGS\r\n")
    args = {"flags_file": str(dropin), "gates": {"DevicePlugins": True}, "kubernetes_version": "1.9.0",
            "check_running": False}

    ok, result = run_module(kubelet_feature_gates, args)

    assert ok and result["applied_gates"] == {"DevicePlugins": True}, result
    data = dropin.read_bytes()
    assert data.count(b"\r\n") == data.count(b"\n")
    assert b'Environment="KUBELET_EXTRA_ARGS=--feature-gates=DevicePlugins=true"\r\n' in data
    assert run_module(kubelet_feature_gates, args)[1]["changed"] is False


# ---------------------------------------------------------------- 8: one lock per node


@pytest.mark.parametrize("name", EDITORS)
def test_a_run_that_cannot_get_the_nodes_lock_fails_naming_it_and_its_holder(run_module, tmp_path, name):
    node = EDITORS[name](tmp_path)
    before = snapshot(tmp_path)
    with lock.node_lock(60) as path:
        ok, result = run_module(node["module"], {**node["args"], "lock_timeout": 0})

    assert not ok
    assert result["msg"].startswith(f"{path}: held by PID {os.getpid()} ")
    assert "nothing was changed" in result["msg"]
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("name", ["docker_daemon_config", "manifest_files", "kubelet_feature_gates"])
def test_check_mode_never_takes_the_lock(run_module, tmp_path, name):
    node = WRITERS[name](tmp_path)
    with lock.node_lock(60):
        ok, result = run_module(node["module"], {**node["args"], "lock_timeout": 0}, check_mode=True)
    assert ok and result["changed"], result


def test_where_run_cannot_hold_the_lock_it_is_taken_in_the_fallback_folder(tmp_path, monkeypatch):
    blocker = tmp_path / "run"
    blocker.write_text("a file where the folder would be\n")
    monkeypatch.setattr(lock, "LOCK_DIR", str(blocker / "gpunode"))
    fallback = tmp_path / "remote-tmp"
    with lock.node_lock(1, lambda: str(fallback)) as path:
        assert path == str(fallback / "lock")
        assert (fallback / "lock").read_text() == f"{os.getpid()}\n"
        assert stat.S_IMODE(fallback.stat().st_mode) == 0o755


def late_bound_write_text(*args, **kwargs):
    """host/files.write_text as it is when called, so a child can hold it by patching host/files."""
    return host_files.write_text(*args, **kwargs)


def interleave(run_module, first, second, write_function, wait=2.0):
    """Run ``first`` and ``second`` in two children, the first held after its read, before its
    write: until the second has finished, or ``wait`` seconds (a second run waiting for the lock
    never finishes first). Returns the first's exit status and the second's outcome."""
    held_read, held_write = os.pipe()  # first -> test: read done, write about to start
    done_read, done_write = os.pipe()  # second -> first: finished
    real = getattr(host_files, write_function)

    def held(*args, **kwargs):
        os.write(held_write, b"h")
        select.select([done_read], [], [], wait)
        return real(*args, **kwargs)

    pid_first = os.fork()
    if pid_first == 0:
        setattr(host_files, write_function, held)
        ok, _result = run_module(*first)
        os._exit(0 if ok else 1)
    assert select.select([held_read], [], [], 60)[0], "the first run never reached its write"

    def second_run():
        outcome = run_module(*second)
        os.write(done_write, b"d")
        return outcome

    outcome = in_child(second_run)
    _pid, status = os.waitpid(pid_first, 0)
    return status, outcome


@pytest.mark.parametrize("locked", [True, False], ids=["with-the-lock", "without-it"])
def test_two_runs_at_once_lose_no_update(run_module, tmp_path, monkeypatch, locked):
    """The forced interleaving loses an update without the lock (so it tests something) and none with it."""
    node = docker_node(tmp_path)
    path = node["target"]
    if not locked:
        monkeypatch.setattr(lock, "module_lock", lambda module: lock.contextlib.nullcontext())
    monkeypatch.setattr(host_edits, "write_text", late_bound_write_text)
    first = (docker_daemon_config, {**node["args"], "settings": {"default-runtime": "nvidia"}})
    second = (docker_daemon_config, {**node["args"], "settings": {"data-root": "/srv/docker"}})

    status, outcome = interleave(run_module, first, second, "write_text")

    assert status == 0 and outcome[0] == "ok" and outcome[1][0], outcome
    config = json.loads(path.read_text())
    kept = {key for key in ("default-runtime", "data-root") if key in config}
    assert kept == ({"default-runtime", "data-root"} if locked else {"default-runtime"})


def test_two_kubelet_runs_at_once_keep_both_gates(run_module, tmp_path, monkeypatch):
    node = kubelet_node(tmp_path)
    monkeypatch.setattr(host_edits, "write_text", late_bound_write_text)
    first = (kubelet_feature_gates, {**node["args"], "gates": {"DevicePlugins": True}})
    second = (kubelet_feature_gates, {**node["args"], "gates": {"Accelerators": True}})

    status, outcome = interleave(run_module, first, second, "write_text")

    assert status == 0 and outcome[0] == "ok" and outcome[1][0], outcome
    assert "--feature-gates=DevicePlugins=true,Accelerators=true" in node["target"].read_text()


def test_a_kubelet_run_beside_the_writing_of_a_handed_plan_keeps_both_gates(run_module, tmp_path,
                                                                            monkeypatch):
    """site.yml's kubelet role writes what the one read planned (gpunode_planned_files); another run
    that reads meanwhile waits for the node's lock and reads what that wrote."""
    node = kubelet_node(tmp_path)
    ok, read = run_module(gpunode_node_state, {"kubelet": {**node["args"], "gates": {"DevicePlugins": True}}},
                          check_mode=True)
    assert ok and read["plans"]["kubelet"]["edits"], read
    monkeypatch.setattr(host_edits, "write_text", late_bound_write_text)
    first = (gpunode_planned_files, {"files": read["plans"]["kubelet"]["edits"]})
    second = (kubelet_feature_gates, {**node["args"], "gates": {"Accelerators": True}})

    status, outcome = interleave(run_module, first, second, "write_text")

    assert status == 0 and outcome[0] == "ok" and outcome[1][0], outcome
    assert "--feature-gates=DevicePlugins=true,Accelerators=true" in node["target"].read_text()


# ---------------------------------------------------------------- kills at each rename


@pytest.mark.parametrize("name", WRITERS)
def test_a_kill_at_any_rename_leaves_each_file_old_or_new(run_module, tmp_path, name):
    final_node = WRITERS[name](tmp_path / "final")
    ok, _result = run_module(final_node["module"], final_node["args"])
    assert ok
    renames = []
    real = host_files._write_regular

    def counting(path, *args):
        renames.append(path)
        return real(path, *args)

    host_files._write_regular, saved = counting, real
    try:
        counted = WRITERS[name](tmp_path / "count")
        run_module(counted["module"], counted["args"])
    finally:
        host_files._write_regular = saved
    assert renames
    for index in range(len(renames)):
        for after_rename in (False, True):
            check_kill(run_module, tmp_path / f"kill-{index}-{after_rename}", name, index, after_rename)


def check_kill(run_module, root, name, index, after_rename):
    node = WRITERS[name](root)
    old = {path: path.read_bytes() if path.exists() else None for path in node["files"]}

    def work():
        calls = []
        real = host_files._write_regular

        def dying(path, text, mode, tmp_dir, replace):
            def rename(tmp, target):
                calls.append(target)
                if len(calls) - 1 == index and not after_rename:
                    os._exit(9)
                replace(tmp, target)
                if len(calls) - 1 == index:
                    os._exit(9)
            return real(path, text, mode, tmp_dir, rename)

        host_files._write_regular = dying
        return run_module(node["module"], node["args"])

    assert in_child(work)[0] == "exit"
    killed = {path: path.read_bytes() if path.exists() else None for path in node["files"]}
    ok, _result = run_module(node["module"], node["args"])  # a rerun converges the node
    assert ok
    for path in node["files"]:
        assert killed[path] in (old[path], path.read_bytes()), (path, index, after_rename)
        if path.suffix in (".yaml", ".json") and killed[path] is not None:
            yaml.safe_load(killed[path])  # never a mix of the two


@pytest.mark.parametrize("name", EDITORS)
def test_every_editing_module_documents_lock_timeout_as_its_spec_has_it(monkeypatch, name):
    module = MODULES[name]
    captured = {}

    class Captured(Exception):
        pass

    def capture(**kwargs):
        captured.update(kwargs["argument_spec"])
        raise Captured

    monkeypatch.setattr(module, "AnsibleModule", capture)
    with pytest.raises(Captured):
        module.build_module()
    documented = documented_options(name)["lock_timeout"]  # the node_lock fragment's
    assert captured["lock_timeout"] == {"type": "int", "default": 300}
    assert (documented["type"], documented["default"]) == ("int", 300)
    assert "/run/gpunode/lock" in " ".join(documented["description"])
