"""host/systemd.py resolve() and kubelet/flags.py plan_edit: where --feature-gates reaches the kubelet.

Unit files: kubeadm's drop-ins (the real ones of the ../shared corpus), the
official RPM layout and a kubespray node's unit and kubelet.env (written for
gpunode in their shape, see tests/fixtures/kubelet/SOURCE.txt).
"""

import pytest
from ansible.module_utils.gpunode.host.systemd import UnitError, resolve
from ansible.module_utils.gpunode.kubelet.flags import (
    FlagsError,
    check_reaches_kubelet,
    gates_in_args,
    plan_edit,
    set_gate_string,
)
from conftest import FIXTURES, ROOT, shared_files

RPM = FIXTURES / "kubelet" / "rpm-layout"
KUBESPRAY = ROOT / "tests" / "simnode" / "fakes" / "kubelet" / "kubespray"


class Files:
    """Files of one node, by path; read() returns None for a missing one."""

    def __init__(self, files):
        self.files = dict(files)

    def read(self, path):
        return self.files.get(path)


def rpm_node(sysconfig=None, dropin=None):
    files = Files(
        {
            "/usr/lib/systemd/system/kubelet.service": (RPM / "kubelet.service").read_text(),
            "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": dropin
            or (RPM / "10-kubeadm.conf").read_text(),
            "/etc/sysconfig/kubelet": sysconfig
            if sysconfig is not None
            else (RPM / "sysconfig-kubelet").read_text(),
            "/var/lib/kubelet/kubeadm-flags.env": 'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint='
            'unix:///var/run/containerd/containerd.sock"\n',
        }
    )
    units = [
        ("/usr/lib/systemd/system/kubelet.service", files.read("/usr/lib/systemd/system/kubelet.service")),
        (
            "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
            files.read("/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"),
        ),
    ]
    return files, units


def test_rpm_layout_resolves_like_systemd():
    files, units = rpm_node()
    command = resolve(units, files.read)
    args = [a.value for a in command.args]
    assert args == [
        "/usr/bin/kubelet",
        "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
        "--kubeconfig=/etc/kubernetes/kubelet.conf",
        "--config=/var/lib/kubelet/config.yaml",
        "--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock",
    ]
    # KUBELET_EXTRA_ARGS is set (empty) by /etc/sysconfig/kubelet: the file is where it comes from
    assert command.winner("KUBELET_EXTRA_ARGS").path == "/etc/sysconfig/kubelet"


def test_rpm_layout_the_gate_goes_to_sysconfig_not_the_dropin():
    files, units = rpm_node()
    command = resolve(units, files.read)
    plan = plan_edit(command, units, files.read, "DynamicResourceAllocation=true")
    assert list(plan.texts) == ["/etc/sysconfig/kubelet"]
    assert (
        plan.texts["/etc/sysconfig/kubelet"]
        == "KUBELET_EXTRA_ARGS=--feature-gates=DynamicResourceAllocation=true\n"
    )
    assert plan.where == "/etc/sysconfig/kubelet KUBELET_EXTRA_ARGS"


def test_rpm_layout_a_gate_written_into_the_dropin_never_reaches_the_kubelet():
    """The old behaviour: Environment=KUBELET_EXTRA_ARGS in the drop-in, lost to /etc/sysconfig/kubelet."""
    files, units = rpm_node()
    dropin_path, dropin = units[1]
    edited, where = set_gate_string(dropin, "systemd", "DynamicResourceAllocation=true")
    assert where == "Environment KUBELET_EXTRA_ARGS"
    command = resolve([units[0], (dropin_path, edited)], files.read)
    assert gates_in_args(command.args) == {}
    problem = check_reaches_kubelet(command, dropin_path, {"DynamicResourceAllocation": True})
    assert "EnvironmentFile= wins over Environment=" in problem
    assert "/etc/sysconfig/kubelet line 1" in problem


def test_user_edited_dropin_with_inline_extra_args_and_sysconfig():
    """The corpus file that sets KUBELET_EXTRA_ARGS inline and reads /etc/sysconfig/kubelet."""
    paths = shared_files("kubelet", "10-kubeadm.conf-rhel-sysconfig-inline-extra-allforcloud")
    if not paths:
        pytest.skip("../shared corpus not present")
    files, units = rpm_node(dropin=paths[0].read_text())
    command = resolve(units, files.read)
    # the inline --fail-swap-on=false is lost to the empty KUBELET_EXTRA_ARGS of /etc/sysconfig/kubelet
    assert "--fail-swap-on=false" not in [a.value for a in command.args]
    plan = plan_edit(command, units, files.read, "DevicePlugins=true")
    assert list(plan.texts) == ["/etc/sysconfig/kubelet"]
    # with no /etc/sysconfig/kubelet, the inline assignment wins and gets the flag
    files, units = rpm_node(dropin=paths[0].read_text(), sysconfig="")
    del files.files["/etc/sysconfig/kubelet"]
    command = resolve(units, files.read)
    assert "--fail-swap-on=false" in [a.value for a in command.args]
    plan = plan_edit(command, units, files.read, "DevicePlugins=true")
    assert list(plan.texts) == [units[1][0]]
    assert (
        'Environment="KUBELET_EXTRA_ARGS=--fail-swap-on=false --feature-gates=DevicePlugins=true"'
        in (plan.texts[units[1][0]])
    )


def kubespray_node():
    unit = (KUBESPRAY / "kubelet.service").read_text()
    env = (KUBESPRAY / "kubelet.env").read_text()
    files = Files({"/etc/systemd/system/kubelet.service": unit, "/etc/kubernetes/kubelet.env": env})
    return files, [("/etc/systemd/system/kubelet.service", unit)]


def test_kubespray_unit_never_expands_kubelet_extra_args():
    files, units = kubespray_node()
    command = resolve(units, files.read)
    args = [a.value for a in command.args]
    assert "--config=/etc/kubernetes/kubelet-config.yaml" in args
    assert "KUBELET_EXTRA_ARGS" not in command.referenced
    # the old behaviour appended KUBELET_EXTRA_ARGS to kubelet.env: it never reaches the kubelet
    env_text = files.read("/etc/kubernetes/kubelet.env")
    edited, where = set_gate_string(env_text, "env", "DevicePlugins=true", "KUBELET_EXTRA_ARGS")
    assert where == "KUBELET_EXTRA_ARGS"
    files.files["/etc/kubernetes/kubelet.env"] = edited
    command = resolve(units, files.read)
    problem = check_reaches_kubelet(command, "/etc/kubernetes/kubelet.env", {"DevicePlugins": True})
    assert "never expands $KUBELET_EXTRA_ARGS" in problem


def test_kubespray_flags_go_into_kubelet_args():
    files, units = kubespray_node()
    command = resolve(units, files.read)
    plan = plan_edit(command, units, files.read, "DevicePlugins=true")
    assert plan.where == "/etc/kubernetes/kubelet.env KUBELET_ARGS"
    new = plan.texts["/etc/kubernetes/kubelet.env"]
    files.files["/etc/kubernetes/kubelet.env"] = new
    again = resolve(units, files.read)
    assert gates_in_args(again.args) == {"DevicePlugins": True}
    # every other argument unchanged, in order
    assert [a.value for a in again.args if "feature-gates" not in a.value] == [a.value for a in command.args]


def test_kubespray_asking_for_kubelet_extra_args_explains_why_not():
    files, units = kubespray_node()
    command = resolve(units, files.read)
    with pytest.raises(FlagsError, match=r"never expands \$KUBELET_EXTRA_ARGS"):
        plan_edit(command, units, files.read, "DevicePlugins=true", variable="KUBELET_EXTRA_ARGS")


@pytest.mark.parametrize(
    "name",
    [p.name for p in shared_files("kubelet", "10-kubeadm.conf-*")],
)
def test_kubeadm_dropins_from_the_corpus_get_gates_that_reach_the_kubelet(name):
    dropin = (shared_files("kubelet", name)[0]).read_text()
    base = (RPM / "kubelet.service").read_text()
    files = Files(
        {"/lib/systemd/system/kubelet.service": base, "/etc/default/kubelet": "KUBELET_EXTRA_ARGS=\n"}
    )
    units = [
        ("/lib/systemd/system/kubelet.service", base),
        ("/etc/systemd/system/kubelet.service.d/10-kubeadm.conf", dropin),
    ]
    command = resolve(units, files.read)
    before = [a.value for a in command.args]
    plan = plan_edit(command, units, files.read, "DevicePlugins=true")
    for path, text in plan.texts.items():
        files.files[path] = text
    new_units = [(path, plan.texts.get(path, text)) for path, text in units]
    after = resolve(new_units, files.read)
    assert gates_in_args(after.args) == {"DevicePlugins": True}
    assert [a.value for a in after.args if "feature-gates" not in a.value] == before


def test_later_environment_file_and_resets():
    unit = (
        "[Service]\n"
        'Environment="A=--a=1" B=--b=1\n'
        "Environment=\n"
        "Environment=A=--a=2\n"
        "EnvironmentFile=-/etc/one\n"
        "EnvironmentFile=\n"
        "EnvironmentFile=-/etc/two\n"
        "EnvironmentFile=/etc/three\n"
        "ExecStart=/bin/true\n"
        "ExecStart=\n"
        "ExecStart=/usr/bin/kubelet $A $B ${C} --x=${A} $$D\n"
    )
    files = Files(
        {"/etc/one": "A=--a=one\n", "/etc/two": "C='x y'\nA=--a=two\n", "/etc/three": "A=--a=three\n"}
    )
    command = resolve([("/u", unit)], files.read)
    assert [a.value for a in command.args] == ["/usr/bin/kubelet", "--a=three", "x y", "--x=--a=three", "$D"]
    assert command.winner("A").path == "/etc/three"
    assert command.winner("B") is None  # reset by the empty Environment=
    assert [(a.path, a.line) for a in command.overridden("A")] == [("/u", 4), ("/etc/two", 2)]


def test_quoted_words_in_a_value_are_split_like_systemd():
    unit = "[Service]\nEnvironment='ARGS=--a=\"x y\" --b=2'\nExecStart=/usr/bin/kubelet $ARGS\n"
    command = resolve([("/u", unit)], Files({}).read)
    assert [a.value for a in command.args] == ["/usr/bin/kubelet", "--a=x y", "--b=2"]


def test_unit_errors_name_the_file_and_line():
    with pytest.raises(UnitError, match=r"^/u: line 2: "):
        resolve([("/u", "[Service]\nnot an assignment\n")], Files({}).read)
    with pytest.raises(UnitError, match=r"^/etc/env: line 1: "):
        resolve(
            [("/u", "[Service]\nEnvironmentFile=/etc/env\nExecStart=/k\n")], Files({"/etc/env": "X='\n"}).read
        )


def test_no_execstart_is_an_error_for_plan_edit():
    command = resolve([("/u", "[Service]\nEnvironment=A=1\n")], Files({}).read)
    with pytest.raises(FlagsError, match="no ExecStart"):
        plan_edit(command, [("/u", "[Service]\nEnvironment=A=1\n")], Files({}).read, "A=true")
