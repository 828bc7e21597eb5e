"""kubelet_feature_gates with flags_file on the layouts where one file overrides another.

Each layout is built in a temporary folder from the format's rules (systemd.exec(5):
EnvironmentFile= assignments win over Environment= whatever their order, files are read
in the order listed, a later assignment wins, a missing ``-`` file is skipped; ExecStart
expands only the variables it names). The drop-ins name their environment files by
absolute paths under the temporary folder, as a node's would under /.

The module may report a gate applied only if systemd would start the kubelet with it;
when the file named in flags_file is overridden, the gate goes to the assignment that
wins (that file is then in ``files`` and the diff), or the module fails saying why and
writes nothing.
"""

import os

import kubelet_feature_gates
import pytest
from conftest import ROOT, shared_path

KUBESPRAY = ROOT / "tests" / "simnode" / "fakes" / "kubelet" / "kubespray"
GATE = {"DynamicResourceAllocation": True}
FLAG = "--feature-gates=DynamicResourceAllocation=true"
VERSION = "1.30.2"

# kubeadm's 10-kubeadm.conf from the RPM/deb packages (kubelet 1.11+); @ is the node's root
KUBEADM_DROPIN = (
    "# Note: This dropin only works with kubeadm and kubelet v1.11+\n"
    "[Service]\n"
    'Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf '
    '--kubeconfig=/etc/kubernetes/kubelet.conf"\n'
    'Environment="KUBELET_CONFIG_ARGS=--config=@/var/lib/kubelet/config.yaml"\n'
    "EnvironmentFile=-@/var/lib/kubelet/kubeadm-flags.env\n"
    "EnvironmentFile=-@{user_file}\n"
    "ExecStart=\n"
    "ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS "
    "$KUBELET_EXTRA_ARGS\n"
)
UNIT = "[Unit]\nDescription=kubelet\n[Service]\nExecStart=/usr/bin/kubelet\nRestart=always\n"
USER_FILES = {"rpm": "/etc/sysconfig/kubelet", "deb": "/etc/default/kubelet"}


class Layout:
    """Files of a node under ``root`` (absolute node paths prefixed with it)."""

    def __init__(self, root):
        self.root = str(root)

    def path(self, node_path):
        return self.root + node_path

    def write(self, node_path, text):
        full = self.path(node_path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as handle:
            handle.write(text.replace("@", self.root))
        return full

    def read(self, node_path):
        with open(self.path(node_path), encoding="utf-8") as handle:
            return handle.read()

    def snapshot(self):
        found = {}
        for directory, _dirs, names in os.walk(self.root):
            for name in names:
                with open(os.path.join(directory, name), encoding="utf-8") as handle:
                    found[os.path.join(directory, name)] = handle.read()
        return found


def kubeadm_layout(tmp_path, flavor, user_text, kubeadm_flags='KUBELET_KUBEADM_ARGS="--v=2"\n'):
    """kubeadm's drop-in and its environment files; ``user_text`` None: the user's file is absent."""
    node = Layout(tmp_path)
    user_file = USER_FILES[flavor]
    dropin = node.write(
        "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
        KUBEADM_DROPIN.format(user_file=user_file),
    )
    if kubeadm_flags is not None:
        node.write("/var/lib/kubelet/kubeadm-flags.env", kubeadm_flags)
    if user_text is not None:
        node.write(user_file, user_text)
    return node, dropin, node.path(user_file)


def gates(run_module, flags_file, check_mode=False, **extra):
    args = {"gates": GATE, "kubernetes_version": VERSION, "flags_file": flags_file, **extra}
    return run_module(kubelet_feature_gates, args, check_mode=check_mode, diff=True)


def diff_headers(result):
    diff = result.get("diff") or []
    diff = diff if isinstance(diff, list) else [diff]
    return sorted(entry["before_header"] for entry in diff)


@pytest.mark.parametrize("flavor", ["rpm", "deb"])
@pytest.mark.parametrize(
    ("user_text", "expected"),
    [
        ("KUBELET_EXTRA_ARGS=\n", f"KUBELET_EXTRA_ARGS={FLAG}\n"),
        (
            'KUBELET_EXTRA_ARGS="--node-ip=10.0.0.5 --v=4"\n',
            f'KUBELET_EXTRA_ARGS="--node-ip=10.0.0.5 --v=4 {FLAG}"\n',
        ),
        (
            "# set by the installer\nKUBELET_EXTRA_ARGS=--v=2\n",
            f"# set by the installer\nKUBELET_EXTRA_ARGS=--v=2 {FLAG}\n",
        ),
    ],
    ids=["empty", "quoted-flags", "comment-and-flags"],
)
def test_dropin_named_but_the_environment_file_sets_the_variable(
    run_module, tmp_path, flavor, user_text, expected
):
    """The drop-in's Environment= would lose to the EnvironmentFile=: the gate goes to that file."""
    node, dropin, user_file = kubeadm_layout(tmp_path, flavor, user_text)
    dropin_before = node.read("/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf")
    ok, preview = gates(run_module, dropin, check_mode=True)
    assert ok, preview
    assert preview["changed"] and preview["files"] == [user_file]
    assert diff_headers(preview) == [user_file]
    assert node.read(USER_FILES[flavor]) == user_text
    ok, result = gates(run_module, dropin)
    assert ok, result
    assert result["changed"] and result["applied_gates"] == GATE
    assert result["files"] == [user_file]
    assert result["location"] == f"{user_file} KUBELET_EXTRA_ARGS"
    assert not result["daemon_reload"]  # an environment file is read at each start
    assert not any("overridden" in w for w in result.get("warnings", []))
    assert node.read(USER_FILES[flavor]) == expected
    assert node.read("/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf") == dropin_before
    ok, again = gates(run_module, dropin)
    assert ok and not again["changed"], again
    assert again["applied_gates"] == GATE


@pytest.mark.parametrize("flavor", ["rpm", "deb"])
@pytest.mark.parametrize("user_text", [None, "KUBELET_NODE_IP=10.0.0.5\n"], ids=["absent", "other-variable"])
def test_dropin_gets_the_flag_when_no_environment_file_sets_the_variable(
    run_module, tmp_path, flavor, user_text
):
    node, dropin, user_file = kubeadm_layout(tmp_path, flavor, user_text)
    ok, result = gates(run_module, dropin)
    assert ok, result
    assert result["files"] == [dropin] and result["applied_gates"] == GATE
    assert result["daemon_reload"]  # a changed drop-in needs systemctl daemon-reload
    assert f'Environment="KUBELET_EXTRA_ARGS={FLAG}"' in node.read(
        "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"
    )
    assert os.path.exists(user_file) is (user_text is not None)
    ok, again = gates(run_module, dropin)
    assert ok and not again["changed"], again


def test_the_same_holds_when_the_unit_is_known(run_module, tmp_path):
    node, dropin, user_file = kubeadm_layout(tmp_path, "rpm", "KUBELET_EXTRA_ARGS=\n")
    unit = node.write("/usr/lib/systemd/system/kubelet.service", UNIT)
    ok, result = gates(run_module, dropin, unit_files=[unit, dropin], service="kubelet.service")
    assert ok, result
    assert result["files"] == [user_file]
    assert node.read("/etc/sysconfig/kubelet") == f"KUBELET_EXTRA_ARGS={FLAG}\n"


def test_shared_dropin_with_inline_extra_args_and_sysconfig(run_module, tmp_path):
    """The corpus drop-in sets KUBELET_EXTRA_ARGS inline AND reads /etc/sysconfig/kubelet."""
    text = shared_path(
        "fixtures", "kubelet", "10-kubeadm.conf-rhel-sysconfig-inline-extra-allforcloud"
    ).read_text()
    assert "EnvironmentFile=-/etc/sysconfig/kubelet" in text
    node = Layout(tmp_path)
    text = text.replace("=-/etc/sysconfig/kubelet", "=-@/etc/sysconfig/kubelet").replace(
        "=-/var/lib/kubelet/", "=-@/var/lib/kubelet/"
    )
    dropin = node.write("/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", text)
    node.write("/etc/sysconfig/kubelet", "KUBELET_EXTRA_ARGS=--node-ip=10.0.0.5\n")
    ok, result = gates(run_module, dropin)
    assert ok, result
    assert result["files"] == [node.path("/etc/sysconfig/kubelet")]
    assert node.read("/etc/sysconfig/kubelet") == f"KUBELET_EXTRA_ARGS=--node-ip=10.0.0.5 {FLAG}\n"
    # without /etc/sysconfig/kubelet the inline assignment reaches the kubelet and gets the flag
    os.unlink(node.path("/etc/sysconfig/kubelet"))
    ok, result = gates(run_module, dropin)
    assert ok, result
    assert result["files"] == [dropin]
    assert f'Environment="KUBELET_EXTRA_ARGS=--fail-swap-on=false {FLAG}"' in node.read(
        "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"
    )


def kubespray_layout(tmp_path):
    node = Layout(tmp_path)
    unit_text = (KUBESPRAY / "kubelet.service").read_text()
    assert "EnvironmentFile=-/etc/kubernetes/kubelet.env" in unit_text
    unit = node.write(
        "/etc/systemd/system/kubelet.service",
        unit_text.replace("=-/etc/kubernetes/kubelet.env", "=-@/etc/kubernetes/kubelet.env"),
    )
    env = node.write("/etc/kubernetes/kubelet.env", (KUBESPRAY / "kubelet.env").read_text())
    return node, unit, env


def test_kubespray_env_file_gets_the_flag_in_kubelet_args(run_module, tmp_path):
    """kubelet.env holds several flag variables; ExecStart expands KUBELET_ARGS, never KUBELET_EXTRA_ARGS."""
    node, unit, env = kubespray_layout(tmp_path)
    ok, result = gates(run_module, env, unit_files=[unit], service="kubelet.service")
    assert ok, result
    assert result["files"] == [env] and result["applied_gates"] == GATE
    assert result["location"] == f"{env} KUBELET_ARGS"
    text = node.read("/etc/kubernetes/kubelet.env")
    assert "KUBELET_EXTRA_ARGS" not in text
    assert f'--runtime-cgroups=/system.slice/containerd.service \\\n  {FLAG}"\n' in text
    ok, again = gates(run_module, env, unit_files=[unit], service="kubelet.service")
    assert ok and not again["changed"], again


def test_kubespray_asked_for_kubelet_extra_args_fails_and_writes_nothing(run_module, tmp_path):
    node, unit, env = kubespray_layout(tmp_path)
    before = node.snapshot()
    ok, result = gates(
        run_module, env, unit_files=[unit], service="kubelet.service", flags_variable="KUBELET_EXTRA_ARGS"
    )
    assert not ok
    assert env in result["msg"] and "never expands $KUBELET_EXTRA_ARGS" in result["msg"]
    assert node.snapshot() == before


def test_kubespray_unit_named_alone_gets_the_flag_in_execstart(run_module, tmp_path):
    node, unit, _env = kubespray_layout(tmp_path)
    ok, result = gates(run_module, unit)
    assert ok, result
    assert result["files"] == [unit] and result["location"] == f"{unit} ExecStart"
    assert f"$KUBELET_CLOUDPROVIDER {FLAG}\n" in node.read("/etc/systemd/system/kubelet.service")


def test_kubeadm_flags_env_overridden_by_a_later_env_file(run_module, tmp_path):
    """kubeadm-flags.env holds --feature-gates, but /etc/default/kubelet sets KUBELET_KUBEADM_ARGS too."""
    node, dropin, user_file = kubeadm_layout(
        tmp_path,
        "deb",
        'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock"\n',
        kubeadm_flags='KUBELET_KUBEADM_ARGS="--feature-gates=OldGate=true --v=2"\n',
    )
    unit = node.write("/lib/systemd/system/kubelet.service", UNIT)
    flags_env = node.path("/var/lib/kubelet/kubeadm-flags.env")
    ok, result = gates(run_module, flags_env, unit_files=[unit, dropin], service="kubelet.service")
    assert ok, result
    # the kubelet never got OldGate: it is not carried over; the gate goes where it reaches
    assert result["gates"] == GATE and result["applied_gates"] == GATE
    assert result["files"] == [user_file]
    assert (
        node.read("/var/lib/kubelet/kubeadm-flags.env")
        == 'KUBELET_KUBEADM_ARGS="--feature-gates=OldGate=true --v=2"\n'
    )
    assert node.read("/etc/default/kubelet").endswith(f"KUBELET_EXTRA_ARGS={FLAG}\n")


def test_kubeadm_flags_env_that_reaches_is_edited_in_place(run_module, tmp_path):
    node, dropin, _user_file = kubeadm_layout(
        tmp_path,
        "deb",
        "KUBELET_EXTRA_ARGS=\n",
        kubeadm_flags='KUBELET_KUBEADM_ARGS="--feature-gates=OldGate=true"\n',
    )
    unit = node.write("/lib/systemd/system/kubelet.service", UNIT)
    flags_env = node.path("/var/lib/kubelet/kubeadm-flags.env")
    ok, result = gates(
        run_module, flags_env, unit_files=[unit, dropin], service="kubelet.service", allow_unknown=True
    )
    assert ok, result
    assert result["files"] == [flags_env]
    assert node.read("/var/lib/kubelet/kubeadm-flags.env") == (
        'KUBELET_KUBEADM_ARGS="--feature-gates=OldGate=true,DynamicResourceAllocation=true"\n'
    )


TWO_FILES_DROPIN = (
    "[Service]\n"
    "EnvironmentFile=-@/etc/kubelet/first.env\n"
    "EnvironmentFile=-@/etc/kubelet/second.env\n"
    "ExecStart=\n"
    "ExecStart=/usr/bin/kubelet $KUBELET_EXTRA_ARGS\n"
)


def test_two_environment_files_set_the_variable_the_later_wins(run_module, tmp_path):
    node = Layout(tmp_path)
    dropin = node.write("/etc/systemd/system/kubelet.service.d/20-env.conf", TWO_FILES_DROPIN)
    first = node.write("/etc/kubelet/first.env", "KUBELET_EXTRA_ARGS=--feature-gates=DeadGate=true\n")
    second = node.write("/etc/kubelet/second.env", "KUBELET_EXTRA_ARGS=--v=2\n")
    unit = node.write("/etc/systemd/system/kubelet.service", UNIT)
    args = {"unit_files": [unit, dropin], "service": "kubelet.service"}
    ok, result = gates(run_module, first, **args)
    assert ok, result
    assert result["files"] == [second] and result["gates"] == GATE
    assert node.read("/etc/kubelet/first.env") == "KUBELET_EXTRA_ARGS=--feature-gates=DeadGate=true\n"
    assert node.read("/etc/kubelet/second.env") == f"KUBELET_EXTRA_ARGS=--v=2 {FLAG}\n"
    # the later file named directly: edited in place
    ok, again = gates(run_module, second, **args)
    assert ok and not again["changed"], again
    # the drop-in named alone (unit not found): the same resolution
    ok, alone = gates(run_module, dropin)
    assert ok and not alone["changed"] and alone["applied_gates"] == GATE, alone


def test_execstart_that_never_expands_the_variable(run_module, tmp_path):
    node = Layout(tmp_path)
    text = '[Service]\nEnvironment="KUBELET_EXTRA_ARGS=--v=2"\nExecStart=\nExecStart=/usr/bin/kubelet --v=2\n'
    dropin = node.write("/etc/systemd/system/kubelet.service.d/10-kubelet.conf", text)
    ok, result = gates(run_module, dropin, flags_variable="KUBELET_EXTRA_ARGS")
    assert not ok
    assert dropin in result["msg"] and "never expands $KUBELET_EXTRA_ARGS" in result["msg"]
    assert node.read("/etc/systemd/system/kubelet.service.d/10-kubelet.conf") == text
    ok, result = gates(run_module, dropin)
    assert ok, result
    assert result["location"] == f"{dropin} ExecStart"
    assert f"ExecStart=/usr/bin/kubelet --v=2 {FLAG}\n" in node.read(
        "/etc/systemd/system/kubelet.service.d/10-kubelet.conf"
    )


def test_dropin_without_execstart_overridden_by_its_environment_file_fails(run_module, tmp_path):
    """A drop-in with no ExecStart= named alone: its Environment= loses to its own EnvironmentFile=."""
    node = Layout(tmp_path)
    text = '[Service]\nEnvironment="KUBELET_EXTRA_ARGS=--v=2"\nEnvironmentFile=-@/etc/sysconfig/kubelet\n'
    dropin = node.write("/etc/systemd/system/kubelet.service.d/30-extra.conf", text)
    node.write("/etc/sysconfig/kubelet", "\n\nKUBELET_EXTRA_ARGS=--v=4\n")
    before = node.snapshot()
    ok, result = gates(run_module, dropin, backup=True)
    assert not ok
    assert f"{dropin} line 2 sets KUBELET_EXTRA_ARGS" in result["msg"]
    assert f"{node.path('/etc/sysconfig/kubelet')} line 3" in result["msg"]
    assert "EnvironmentFile= wins over Environment=" in result["msg"]
    assert node.snapshot() == before
    # without the environment file the drop-in's assignment is what the kubelet gets
    os.unlink(node.path("/etc/sysconfig/kubelet"))
    ok, result = gates(run_module, dropin)
    assert ok and result["applied_gates"] == GATE, result
    assert f'Environment="KUBELET_EXTRA_ARGS=--v=2 {FLAG}"' in node.read(
        "/etc/systemd/system/kubelet.service.d/30-extra.conf"
    )
