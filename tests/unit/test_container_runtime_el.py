"""The container toolkit on RHEL-family nodes (dnf): module_utils/gpunode/runtime/toolkit_source.py and
the plan it feeds. What is checked comes from NVIDIA's install guide ("Installing with dnf": the
``nvidia-container-toolkit.repo`` file and the pinned ``dnf install``), ansible-core's
``yum_repository`` (what it writes) and dnf's ``repoquery --queryformat``."""

import copy

import nvidia_container_runtime_state
import pytest
from ansible.module_utils.gpunode.runtime import reader as crr
from ansible.module_utils.gpunode.runtime import toolkit_source as ts
from ansible.module_utils.gpunode.runtime.engines import RuntimeStateError
from test_container_runtime_state import WANTED, build, converge, fresh_node

RPM_WANTED = dict(
    WANTED,
    rpm_repo_url=ts.RPM_REPO_URL,
    rpm_gpgcheck=True,
    rpm_keyring=ts.RPM_KEYRING,
    rpm_repo_path=ts.RPM_REPO_PATH,
)
# NVIDIA's own file, as the install guide has it downloaded (curl ... | tee /etc/yum.repos.d/...)
NVIDIA_REPO_FILE = """\
[nvidia-container-toolkit]
name=nvidia-container-toolkit
baseurl=https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch
repo_gpgcheck=1
gpgcheck=0
enabled=1
gpgkey=https://nvidia.github.io/libnvidia-container/gpgkey
sslverify=1
sslcacert=/etc/pki/tls/certs/ca-bundle.crt
"""


def written_by_yum_repository(tmp_path, repository, existing=None):
    """The .repo file ansible-core's yum_repository writes for ``repository`` (its YumRepo, with the
    arguments its main() derives: the description becomes ``name``). Controller only: the node-side
    runs have ansible-core's module_utils, not its modules."""
    from ansible.modules import yum_repository  # noqa: PLC0415 - controller-side import

    dest = tmp_path / f"{repository['file']}.repo"
    if existing is not None:
        dest.write_text(existing)
    params = {key: value for key, value in repository.items() if key not in ("name", "file", "reposdir")}
    params["name"] = params.pop("description")
    repo = yum_repository.YumRepo(None, params, repository["name"], str(dest))
    repo.add()
    repo.save()
    return dest.read_text()


def repo_file_text(repository):
    """The repository's section as a .repo file (what a converged node has; the controller-side test
    above checks that yum_repository writes the same)."""
    section = ts.repo_section(repository)
    lines = [f"[{repository['name']}]"] + [f"{key} = {value}" for key, value in sorted(section.items())]
    return "\n".join(lines) + "\n"


def el_node():
    """A Rocky 9 node before the first run: containerd and Docker run, nothing NVIDIA."""
    node = fresh_node()
    node["package_manager"] = "dnf"
    return node


def build_el(observed, **wanted):
    return build(observed, **dict(RPM_WANTED, **wanted))


# --- the repository ------------------------------------------------------------------------


def test_dnf_nodes_get_nvidia_s_rpm_repository_with_its_key_checked():
    repo = ts.source("dnf", RPM_WANTED)

    assert repo["keyring"] == "/etc/pki/rpm-gpg/RPM-GPG-KEY-nvidia-container-toolkit"
    assert repo["path"] == "/etc/yum.repos.d/nvidia-container-toolkit.repo"
    assert repo["sources_text"] is None
    assert repo["repository"] == {
        "name": "nvidia-container-toolkit",
        "description": ts.RPM_DESCRIPTION,
        "file": "nvidia-container-toolkit",
        "reposdir": "/etc/yum.repos.d",
        "baseurl": "https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch",
        "enabled": True,
        "gpgcheck": True,
        "repo_gpgcheck": True,
        "gpgkey": "file:///etc/pki/rpm-gpg/RPM-GPG-KEY-nvidia-container-toolkit",
    }
    # NVIDIA's file: packages unchecked, metadata checked
    assert ts.source("dnf", dict(RPM_WANTED, rpm_gpgcheck=False))["repository"]["gpgcheck"] is False


def test_apt_nodes_keep_the_deb822_source():
    repo = ts.source("apt", RPM_WANTED)
    assert repo["repository"] is None
    assert repo["keyring"] == WANTED["keyring"] and repo["path"] == WANTED["sources_path"]
    assert "URIs: http://127.0.0.1:8371/\n" in repo["sources_text"]


@pytest.mark.controller(reason="writes the file with ansible-core's yum_repository module")
def test_a_repo_file_yum_repository_wrote_is_converged_and_nvidia_s_own_is_not(tmp_path):
    repository = ts.source("dnf", RPM_WANTED)["repository"]
    text = written_by_yum_repository(tmp_path, repository)

    assert ts.repo_file_converged(text, repository)
    assert not ts.repo_file_converged(None, repository)
    # NVIDIA's file in place (same section): yum_repository replaces the section, so it differs
    assert not ts.repo_file_converged(NVIDIA_REPO_FILE, repository)
    replaced = written_by_yum_repository(tmp_path, repository, NVIDIA_REPO_FILE)
    assert ts.repo_file_converged(replaced, repository)
    # a mirror moves the baseurl: the file is rewritten
    mirror = ts.source("dnf", dict(RPM_WANTED, rpm_repo_url="http://mirror:8080/toolkit/$basearch"))
    assert not ts.repo_file_converged(text, mirror["repository"])
    # another section in the same file is the operator's and stays
    other = "[site-extras]\nname=extras\nbaseurl=http://mirror/extras\n"
    assert ts.repo_file_converged(written_by_yum_repository(tmp_path, repository, other), repository)
    assert ts.repo_file_converged(repo_file_text(repository), repository)


def test_a_repo_file_dnf_cannot_parse_is_refused_naming_it():
    repository = ts.source("dnf", RPM_WANTED)["repository"]
    with pytest.raises(RuntimeStateError, match=r"nvidia-container-toolkit\.repo: not a dnf repository file"):
        ts.repo_file_converged("baseurl=http://x\n", repository, ts.RPM_REPO_PATH)


def test_a_repo_path_dnf_would_not_read_is_refused():
    with pytest.raises(RuntimeStateError, match=r"must end with \.repo"):
        ts.source("dnf", dict(RPM_WANTED, rpm_repo_path="/etc/yum.repos.d/nvidia.conf"))


# --- packages --------------------------------------------------------------------------------


def test_a_pinned_toolkit_pins_its_companions_as_nvidia_s_guide_does():
    assert ts.package_specs("dnf", {"nvidia-container-toolkit": "1.17.8-1", "python3-tomli": None}) == [
        "nvidia-container-toolkit-1.17.8-1",
        "nvidia-container-toolkit-base-1.17.8-1",
        "libnvidia-container-tools-1.17.8-1",
        "libnvidia-container1-1.17.8-1",
        "python3-tomli",
    ]
    assert ts.package_specs("dnf", {"nvidia-container-toolkit": None}) == ["nvidia-container-toolkit"]
    # apt too: it would take the companions at their newest and fail ("held broken packages")
    apt = ts.package_specs("apt", {"nvidia-container-toolkit": "1.17.8-1", "python3-tomli": None})
    assert apt == ["nvidia-container-toolkit=1.17.8-1", "nvidia-container-toolkit-base=1.17.8-1",
                   "libnvidia-container-tools=1.17.8-1", "libnvidia-container1=1.17.8-1", "python3-tomli"]
    assert ts.package_specs("apt", {"nvidia-container-toolkit": None}) == ["nvidia-container-toolkit"]


@pytest.mark.parametrize(("spec", "name"), [
    ("nvidia-container-toolkit-1.17.8-1", "nvidia-container-toolkit"),
    ("libnvidia-container1-1.17.8-1", "libnvidia-container1"),
    ("nvidia-container-toolkit", "nvidia-container-toolkit"),
    ("python3-tomli", "python3-tomli"),
])
def test_spec_names(spec, name):
    assert ts.spec_name(spec, "dnf") == name


def test_repoquery_orders_versions_as_rpm_does():
    # dnf 4 ends each formatted entry with a newline of its own: a blank line between them
    out = (
        "nvidia-container-toolkit\t1.17.8-1\n\n"
        "nvidia-container-toolkit\t1.17.10-1\n\n"
        "nvidia-container-toolkit\t1.18.0~rc.1-1\n"
        "nvidia-container-toolkit\t1.18.0-1\n"
        "python3-tomli\t2.0.1-5.el9\n"
        "Last metadata expiration check: 0:01:02 ago\n"
    )
    known = ts.parse_repoquery(out)
    assert known["nvidia-container-toolkit"] == {
        "candidate": "1.18.0-1",
        "versions": ["1.18.0-1", "1.18.0~rc.1-1", "1.17.10-1", "1.17.8-1"],
    }
    assert known["python3-tomli"]["candidate"] == "2.0.1-5.el9"
    assert ts.parse_repoquery("") == {}


# --- the plan on an EL node --------------------------------------------------------------------


def test_a_fresh_el_node_gets_the_rpm_repository_and_dnf_packages_then_is_converged():
    observed = el_node()
    plan, facts = build_el(observed)

    assert plan["package_manager"] == "dnf"
    assert plan["repo_key"] and plan["repo_source"] and plan["install"]
    assert plan["keyring"] == ts.RPM_KEYRING
    assert plan["sources_text"] is None
    assert plan["rpm_repository"]["baseurl"] == ts.RPM_REPO_URL
    assert plan["packages"][:2] == [
        "nvidia-container-toolkit-1.17.8-1",
        "nvidia-container-toolkit-base-1.17.8-1",
    ]
    assert plan["update_cache"] and not plan["packages_known"]  # check mode cannot install yet
    assert "container toolkit none -> 1.17.8" in plan["summary"]
    # containerd and Docker are configured as on any node
    assert plan["containerd"]["configure"] and plan["docker"]["configure"]

    node = converge(observed, plan)
    node["sources_text"] = repo_file_text(plan["rpm_repository"])
    node["installed"] = {ts.spec_name(spec, "dnf"): "1.17.8-1" for spec in plan["packages"]}
    again, facts_again = build_el(node)
    assert not again["changes"], again["reasons"]
    assert facts_again == facts


def test_an_el_node_at_another_toolkit_version_is_moved_to_the_pinned_one():
    observed = el_node()
    observed.update(keyring_ok=True, installed={"nvidia-container-toolkit": "1.17.7-1"})
    observed["sources_text"] = repo_file_text(ts.source("dnf", RPM_WANTED)["repository"])
    observed["apt"] = ts.parse_repoquery(
        "nvidia-container-toolkit\t1.17.8-1\nnvidia-container-toolkit\t1.17.7-1\n"
    )

    plan, _facts = build_el(observed)

    assert not plan["repo_source"] and not plan["repo_key"]
    assert plan["install"] and plan["packages_known"] and not plan["update_cache"]
    assert "nvidia-container-toolkit is at 1.17.7-1, wanted 1.17.8-1" in plan["reasons"]
    assert "container toolkit 1.17.7 -> 1.17.8" in plan["summary"]


def test_rke2_on_el_gets_pyyaml_under_el_s_package_name():
    observed = el_node()
    observed.update(rancher="rke2", yaml_available=False, engines_found=[])
    observed["rancher_state"] = {
        "unit": "rke2-agent.service", "active": False,
        "dropin_path": "/etc/rancher/rke2/config.yaml.d/99.yaml",
        "dropin_text": None, "config_before": {}, "config_after": {}, "stale": [],
        "generated_path": "/var/lib/rancher/rke2/agent/etc/containerd/config.toml",
        "generated": None, "generated_version": None,
    }
    plan, _facts = build_el(observed)
    assert "python3-pyyaml" in plan["packages"]


# --- the module --------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "message"), [
    ({"rpm_repo_url": "ftp://mirror/toolkit"},
     "rpm_repo_url: 'ftp://mirror/toolkit' is not a dnf repository baseurl"),
    ({"rpm_repo_url": "https://mirror/a b"}, "rpm_repo_url"),
    ({"rpm_keyring": "/etc/pki/rpm-gpg/my key"}, "rpm_keyring"),
])
def test_module_refuses_bad_rpm_values(run_module, args, message):
    ok, result = run_module(nvidia_container_runtime_state, args)
    assert not ok and message in result["msg"]


class FakeHost:
    """A Rocky 9 node's commands: rpm knows nothing NVIDIA, dnf's repositories offer the toolkit."""

    def __init__(self):
        self.calls = []

    def which(self, name):
        return f"/usr/bin/{name}" if name in ("rpm", "dnf", "dpkg-query", "containerd") else None

    def run(self, argv, **_kwargs):
        self.calls.append(argv)
        if argv[0].endswith("dnf"):
            return 0, "nvidia-container-toolkit\t1.17.8-1\n", ""
        if argv[0].endswith("rpm"):
            return 1, "package nvidia-container-toolkit is not installed\n", ""
        return 1, "", ""


def test_the_reader_asks_rpm_and_dnf_on_an_el_node(tmp_path, monkeypatch):
    os_release = tmp_path / "os-release"
    os_release.write_text('ID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.5"\n')
    monkeypatch.setattr("ansible.module_utils.gpunode.host.packages_rpm.OS_RELEASE", str(os_release))
    units = {"loaded": False, "active": False, "pid": None}
    tools = {
        "read_text": lambda path, _error: None,
        "units_state": lambda _host, names: {name: dict(units) for name in names},
        "process_start": lambda _pid: None,
        "stale_files": lambda _start, _paths: [],
        "containerd_facts": lambda _host, _config: ("1.7.27", ""),
        "other_imports": lambda *_args: [],
        "parse_json": lambda _text, _path: {},
        "toml_parser": "tomllib",
        "yaml_load": None,
    }
    host = FakeHost()
    wanted = dict(RPM_WANTED, rpm_keyring=str(tmp_path / "missing-key"))
    observed = crr.NodeReader(host, copy.deepcopy(wanted), tools, proc_root=str(tmp_path)).read()

    assert observed["package_manager"] == "dnf"
    assert observed["installed"] == {}
    assert observed["keyring_ok"] is False
    assert observed["apt"]["nvidia-container-toolkit"]["candidate"] == "1.17.8-1"
    dnf_calls = [call for call in host.calls if call[0] == "/usr/bin/dnf"]
    # a read: the cache only, never a download nor a key import
    assert dnf_calls and all({"repoquery", "-C", "--assumeno"} <= set(call) for call in dnf_calls)
    assert not any("apt-cache" in call[0] for call in host.calls)
