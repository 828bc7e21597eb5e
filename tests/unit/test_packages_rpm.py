"""module_utils/gpunode/host/packages_rpm.py: rpm's database and dnf's version locks, from rpm's
query format (rpm.org, "Query formats") and the versionlock plugin's list (dnf-plugins-core,
"DNF versionlock Plugin": one spec a line, ``#`` comments, ``!`` excludes; ``add`` writes
``name-[epoch:]version-release.*``)."""

import pytest
from ansible.module_utils.gpunode.host import packages, packages_rpm
from ansible.module_utils.gpunode.host.packages_rpm import (
    RPM_QUERY_FORMAT,
    Dnf,
    RpmError,
    enabled_stream,
    lock_matches,
    locked,
    os_release_ids,
    parse_rpm_owners,
    parse_rpm_query,
    parse_versionlock,
)

# rpm -qa --queryformat RPM_QUERY_FORMAT: a tag a package lacks prints "(none)"
RPM_QA = (
    "nvidia-open\t3\t580.95.05\t1.el9\tnoarch\n"
    "nvidia-driver\t3\t580.95.05\t1.el9\tx86_64\n"
    "kernel-devel\t(none)\t5.14.0\t427.13.1.el9_4\tx86_64\n"
    "kernel-devel\t(none)\t5.14.0\t503.14.1.el9_5\tx86_64\n"
    "dkms\t(none)\t3.1.4\t1.el9\tnoarch\n"
)
# what `dnf versionlock add nvidia-open` and `dnf versionlock exclude` leave in the list
LOCKLIST = (
    "\n# Added lock on Fri Nov 27 07:00:00 2026\n"
    "nvidia-open-3:580.95.05-1.el9.*\n"
    "\n# Added exclude on Fri Nov 27 07:01:00 2026\n"
    "!dkms-0:3.1.4-1.el9.*\n"
)
ROCKY_OS_RELEASE = 'NAME="Rocky Linux"\nVERSION_ID="9.5"\nID="rocky"\nID_LIKE="rhel centos fedora"\n'
DEBIAN_OS_RELEASE = 'PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nID=debian\n'


def test_rpm_query_gives_epoch_version_release_and_keeps_every_installed_kernel_devel():
    found = parse_rpm_query(RPM_QA + "package cuda-drivers is not installed\n")
    assert found["nvidia-open"]["version"] == "3:580.95.05-1.el9"
    assert found["dkms"]["version"] == "3.1.4-1.el9"  # no epoch: none written
    assert found["kernel-devel"]["versions"] == ["5.14.0-427.13.1.el9_4", "5.14.0-503.14.1.el9_5"]
    assert "cuda-drivers" not in found


def test_the_lock_list_is_read_line_by_line_without_comments_and_with_excludes():
    assert parse_versionlock(LOCKLIST) == [{"spec": "nvidia-open-3:580.95.05-1.el9.*", "exclude": False},
                                           {"spec": "dkms-0:3.1.4-1.el9.*", "exclude": True}]
    assert parse_versionlock(None) == []


@pytest.mark.parametrize("spec, matches", [
    ("nvidia-open-3:580.95.05-1.el9.*", True),    # what `versionlock add` writes
    ("nvidia-open", True),                       # a name alone locks whatever is installed
    ("nvidia-open-580.95.05", True),             # name-version
    ("3:nvidia-open-580.95.05-1.el9.noarch", True),  # yum's EPOCH:NAME-VERSION-RELEASE.ARCH
    ("*nvidia*580*", True),                      # NVIDIA's branch lock on EL 10
    ("*nvidia*590*", False),
    ("nvidia-open-3:580.82.07-1.el9.*", False),  # another version
    ("nvidia-open-dkms", False),                 # another name
])
def test_a_lock_spec_covers_a_package_by_the_plugins_nevra_forms(spec, matches):
    assert lock_matches(spec, ("nvidia-open", "3", "580.95.05", "1.el9", "noarch")) is matches


def test_an_exclude_that_covers_a_package_undoes_its_lock():
    nevra = ("dkms", "0", "3.1.4", "1.el9", "noarch")
    assert locked([{"spec": "dkms", "exclude": False}], nevra)
    assert not locked([{"spec": "dkms", "exclude": False}, {"spec": "dkms-3.1.4", "exclude": True}], nevra)
    assert not locked([], nevra)


def test_os_release_ids_read_id_and_id_like():
    assert os_release_ids(ROCKY_OS_RELEASE) == ["rocky", "rhel", "centos", "fedora"]
    assert os_release_ids(DEBIAN_OS_RELEASE) == ["debian"]


class RpmHost:
    """A node with rpm and dnf (and dpkg-query, as the simulated EL nodes have: Debian underneath)."""

    def __init__(self, answers, programs=("rpm", "dnf", "dpkg-query")):
        self.answers, self.programs, self.ran = answers, programs, []

    def which(self, name, opt_dirs=None):
        return f"/usr/bin/{name}" if name in self.programs else None

    def run(self, argv, data=None):
        self.ran.append(argv)
        return self.answers.get(argv[1], (1, "", "not scripted"))


@pytest.fixture
def el_node(tmp_path):
    (tmp_path / "os-release").write_text(ROCKY_OS_RELEASE)
    (tmp_path / "versionlock.list").write_text(LOCKLIST)
    return tmp_path


def dnf(host, root):
    return Dnf.detect(host, os_release=str(root / "os-release"), locklist=str(root / "versionlock.list"))


def test_installed_packages_come_from_rpm_and_locked_ones_are_held(el_node):
    host = RpmHost({"-qa": (0, RPM_QA, "")})
    backend = dnf(host, el_node)
    found = backend.packages()
    assert host.ran == [["/usr/bin/rpm", "-qa", "--queryformat", RPM_QUERY_FORMAT]]
    assert found["nvidia-open"] == {"version": "3:580.95.05-1.el9", "arch": "noarch",
                                    "versions": ["3:580.95.05-1.el9"], "want": "hold", "status": "installed"}
    assert backend.held() == ["nvidia-open"]  # dkms is excluded, not held; nvidia-driver not locked
    assert backend.interrupted(found) == []


def test_named_packages_rpm_does_not_know_are_absent(el_node):
    answer = (1, "nvidia-open\t3\t580.95.05\t1.el9\tnoarch\npackage cuda-drivers is not installed\n", "")
    backend = dnf(RpmHost({"-q": answer}), el_node)
    assert backend.installed_versions(["nvidia-open", "cuda-drivers"]) == {"nvidia-open": "3:580.95.05-1.el9"}


def test_a_database_rpm_cannot_read_is_an_error_naming_the_command(el_node):
    broken = (1, "", "error: cannot open Packages database in /var/lib/rpm\n")
    backend = dnf(RpmHost({"-qa": broken}), el_node)
    with pytest.raises(RpmError, match=r"^rpm -qa failed \(rc 1\): error: cannot open Packages database"):
        backend.packages()


def test_the_owner_of_a_path_is_the_package_rpm_names(el_node):
    owned = RpmHost({"-qf": (0, "nvidia-driver-cuda\n", "")})
    assert dnf(owned, el_node).owner("/usr/bin/nvidia-smi") == "nvidia-driver-cuda"
    unowned = RpmHost({"-qf": (1, "file /usr/local/nvidia/bin/nvidia-smi is not owned by any package\n", "")})
    assert dnf(unowned, el_node).owner("/usr/local/nvidia/bin/nvidia-smi") is None
    answer = "nvidia-driver-cuda\nfile /x is not owned by any package\nnvidia-driver-libs\n"
    assert parse_rpm_owners(answer) == ["nvidia-driver-cuda", "nvidia-driver-libs"]


def test_several_paths_are_asked_in_one_rpm_call(el_node):
    host = RpmHost({"-qf": (1, "file /a is not owned by any package\nnvidia-driver-libs\n", "")})
    assert dnf(host, el_node).owners(["/a", "/usr/lib64/libnvidia-ml.so.1", None]) == ["nvidia-driver-libs"]
    assert len(host.ran) == 1


def test_rpm_on_a_debian_host_is_a_tool_not_its_package_manager(tmp_path):
    (tmp_path / "os-release").write_text(DEBIAN_OS_RELEASE)
    assert dnf(RpmHost({}), tmp_path) is None


def test_an_el_node_gets_the_dnf_backend_before_apt(monkeypatch, el_node):
    monkeypatch.setattr(packages_rpm, "OS_RELEASE", str(el_node / "os-release"))
    monkeypatch.setattr(packages_rpm, "VERSIONLOCK_LIST", str(el_node / "versionlock.list"))
    assert packages.manager(RpmHost({})).name == "dnf"
    assert packages.manager(RpmHost({}, programs=("dpkg-query",))).name == "apt"


def test_the_enabled_stream_is_read_from_dnfs_module_state_file(el_node):
    text = "[nvidia-driver]\nname=nvidia-driver\nstream=580-open\nprofiles=\nstate=enabled\n"
    assert enabled_stream(text) == "580-open"
    assert enabled_stream(text.replace("state=enabled", "state=disabled")) is None
    assert enabled_stream(None) is None
    (el_node / "nvidia-driver.module").write_text(text)
    assert dnf(RpmHost({}), el_node).module_stream("nvidia-driver", str(el_node)) == "580-open"


def test_the_versionlock_plugin_is_there_when_its_configuration_is(el_node):
    backend = dnf(RpmHost({}), el_node)
    assert not backend.versionlock_plugin(str(el_node / "versionlock.conf"))
    (el_node / "versionlock.conf").write_text("[main]\nenabled = 1\n")
    assert backend.versionlock_plugin(str(el_node / "versionlock.conf"))


def test_the_index_refresh_is_dnf_makecache_and_its_failure_names_the_error(el_node):
    host = RpmHost({"makecache": (0, "", "")})
    dnf(host, el_node).refresh_index()
    assert host.ran == [["/usr/bin/dnf", "makecache", "-q"]]
    offline = RpmHost({"makecache": (1, "", "Error: Failed to download metadata for repo 'cuda-rhel9'\n")})
    with pytest.raises(RpmError, match=r"^dnf makecache failed \(rc 1\): Error: Failed to download metadata"):
        dnf(offline, el_node).refresh_index()
