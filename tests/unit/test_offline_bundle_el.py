"""playbooks/offline_bundle.yml for EL nodes, against real RPM repositories built here.

The stand-ins of NVIDIA's RPMs that the simulated EL images carry
(tests/simnode/el/nvidia-rpms.sh: rpmbuild of tests/simnode/el/specs) are built into
a temporary folder, indexed with createrepo_c, the EL 9 repository given its
``nvidia-driver`` module streams (tests/simnode/el/genmodules.py, added with
modifyrepo_c as build-repo.sh does), and served on 127.0.0.1 as NVIDIA's CUDA
repositories (rhel9, rhel10) and the toolkit's RPM repository. The bundle's EL path
runs against them: check mode fetches nothing; a real run carries exactly what each
node's dnf installs (its module stream on EL 9, its version lock on EL 10, the fabric
manager on NVSwitch systems, the toolkit), an .rpm that differs from its checksum
fails the run naming it, and what it writes is a repository dnf reads, streams
included: ``dnf module enable nvidia-driver:580-open`` then offers the branch's
``nvidia-open``. Needs rpmbuild, createrepo_c and modifyrepo_c (Debian:
rpm, createrepo-c; scripts/bootstrap.sh installs them), and dnf for the last check;
each test that lacks one is skipped, naming it.
"""

import functools
import http.server
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest
from playbook_run import ansible_playbook, local_inventory

ROOT = pathlib.Path(__file__).resolve().parents[2]
SIMNODE = ROOT / "tests" / "simnode"
PLAYBOOK = ROOT / "playbooks" / "offline_bundle.yml"
pytestmark = pytest.mark.controller(reason="runs playbooks/offline_bundle.yml through ansible-playbook")

ROCKY = {"distribution": "Rocky", "distribution_version": "9.6", "architecture": "x86_64",
         "kernel": "5.14.0-570.17.1.el9_6.x86_64", "package_source": "cuda"}
RHEL10 = {"distribution": "RedHat", "distribution_version": "10.0", "architecture": "x86_64",
          "kernel": "6.12.0-55.9.1.el10_0.x86_64", "package_source": "cuda"}
NODES = [
    dict(ROCKY, host="el9-t4", gpus=["1eb8"], branch="580"),                           # 580-open
    dict(ROCKY, host="el9-hgx", gpus=["2330"] * 8, nvswitches=4, version="570.172.08"),  # 570-open + fm
    dict(RHEL10, host="el10-hgx", gpus=["2330"] * 8, nvswitches=4, branch="580"),      # lock *nvidia*580*
]
#: what dnf installs from each branch's stream with nvidia-open (the stand-ins' requires)
OPEN_DRIVER = ["kmod-nvidia-open-dkms-{v}-1.el{m}", "libnvidia-ml-{v}-1.el{m}", "nvidia-driver-{v}-1.el{m}",
               "nvidia-driver-cuda-{v}-1.el{m}", "nvidia-driver-cuda-libs-{v}-1.el{m}",
               "nvidia-driver-libs-{v}-1.el{m}", "nvidia-kmod-common-{v}-1.el{m}", "nvidia-open-{v}-1",
               "nvidia-persistenced-{v}-1.el{m}"]
TOOLKIT = ["libnvidia-container-tools-1.17.8-1", "libnvidia-container1-1.17.8-1",
           "nvidia-container-toolkit-1.17.8-1", "nvidia-container-toolkit-base-1.17.8-1"]
TOOLS = ("rpmbuild", "createrepo_c", "modifyrepo_c")


def needs(*tools):
    missing = [tool for tool in tools if not shutil.which(tool)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not on this machine (Debian: apt-get install rpm createrepo-c "
                    "dnf; scripts/bootstrap.sh installs them)")


def driver(version, major, fabricmanager=False):
    names = [n.format(v=version, m=major) for n in OPEN_DRIVER]
    return sorted(names + ([f"nvidia-fabric-manager-{version}-1"] if fabricmanager else []))


def nvidia_repository(folder, el_major, versions):
    """NVIDIA's CUDA repository of one EL release as the simulated EL images build it."""
    subprocess.run(["bash", str(SIMNODE / "el" / "nvidia-rpms.sh"), str(SIMNODE), str(folder), str(el_major),
                    *versions], check=True, capture_output=True, text=True)
    (folder / "D42D0685.pub").write_text("stand-in of NVIDIA's repository key\n")
    subprocess.run(["createrepo_c", "--quiet", "--no-database", str(folder)], check=True)
    if el_major == 9:
        modules = folder.parent / "modules.yaml"
        subprocess.run([sys.executable, str(SIMNODE / "el" / "genmodules.py"), str(folder), str(modules)],
                       check=True)
        subprocess.run(["modifyrepo_c", "--mdtype=modules", str(modules), str(folder / "repodata")],
                       check=True, capture_output=True)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    needs(*TOOLS)
    www = tmp_path_factory.mktemp("www")
    nvidia_repository(www / "cuda" / "rhel9" / "x86_64", 9, ["570.172.08", "580.95.05"])
    nvidia_repository(www / "cuda" / "rhel10" / "x86_64", 10, ["570.172.08", "580.95.05"])
    toolkit = www / "toolkit" / "rpm" / "x86_64"
    toolkit.mkdir(parents=True)
    for rpm in (www / "cuda" / "rhel9" / "x86_64").glob("*container*.rpm"):
        shutil.copy(rpm, toolkit)
    subprocess.run(["createrepo_c", "--quiet", "--no-database", str(toolkit)], check=True)
    handler = functools.partial(QuietHandler, directory=str(www))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    yield {"url": f"http://127.0.0.1:{server.server_address[1]}", "www": www}
    server.shutdown()


def bundle(tmp_path, served, *args, path=None, check=True, nodes=NODES, url=None):
    url = url or served["url"]
    extra = {"offline_bundle_dir": str(tmp_path / "bundle"), "offline_bundle_nodes": nodes,
             "offline_bundle_cuda_repo_base": f"{url}/cuda",
             "offline_bundle_toolkit_repo_url": f"{url}/toolkit/deb/$(ARCH)",
             "offline_bundle_toolkit_rpm_repo_url": f"{url}/toolkit/rpm/$basearch",
             "offline_bundle_images": False}
    inventory = local_inventory(tmp_path / "inventory.json")
    return ansible_playbook(PLAYBOOK, inventory, "-e", json.dumps(extra), *args, check=check, timeout=300,
                            path=path)


def rpms(folder):
    """``name-version-release`` of each .rpm in ``folder`` (the stand-ins' files are named so)."""
    return sorted(p.name.rsplit(".", 2)[0] for p in folder.glob("*.rpm"))


def test_check_mode_lists_the_el_repositories_and_fetches_nothing(tmp_path, served):
    proc = bundle(tmp_path, served, "--check")
    for index in ("cuda/rhel9/x86_64/repodata/repomd.xml", "cuda/rhel10/x86_64/repodata/repomd.xml",
                  "toolkit/rpm/x86_64/repodata/repomd.xml"):
        assert f"{served['url']}/{index}" in proc.stdout
    for chosen in ("nvidia-driver:580-open", "nvidia-driver:570-open", "*nvidia*580*"):
        assert chosen in proc.stdout  # the streams and locks each node's request resolves under
    assert not (tmp_path / "bundle").exists() or not list((tmp_path / "bundle").rglob("*.rpm"))


@pytest.fixture(scope="module")
def gathered(tmp_path_factory, served):
    """The bundle of the real run (one run, several tests read it)."""
    tmp_path = tmp_path_factory.mktemp("gathered")
    earlier = tmp_path / "bundle" / "rpms" / "cuda-rhel-9-x86_64"
    earlier.mkdir(parents=True)
    (earlier / "nvidia-open-560.35.03-1.x86_64.rpm").write_bytes(b"an earlier run's, no node needs it now")
    bundle(tmp_path, served)
    return tmp_path / "bundle"


def test_a_real_run_carries_what_each_el_node_installs_as_dnf_repositories(gathered):
    out = gathered / "rpms"
    assert sorted(p.name for p in out.iterdir()) == ["cuda-rhel-10-x86_64", "cuda-rhel-9-x86_64",
                                                     "toolkit-rpm-x86_64"]
    # EL 9: each node's stream apart (580-open for the T4, 570-open with the fabric manager for the
    # HGX); an earlier run's file that no node needs now is gone
    assert rpms(out / "cuda-rhel-9-x86_64") == sorted(driver("580.95.05", 9)
                                                      + driver("570.172.08", 9, fabricmanager=True))
    # EL 10: the version lock keeps the branch's packages only
    assert rpms(out / "cuda-rhel-10-x86_64") == driver("580.95.05", 10, fabricmanager=True)
    assert rpms(out / "toolkit-rpm-x86_64") == TOOLKIT
    for name in ("cuda-rhel-9-x86_64", "cuda-rhel-10-x86_64"):
        assert (out / name / "D42D0685.pub").is_file()  # where the role looks under a mirror
    modules = list((out / "cuda-rhel-9-x86_64" / "repodata").glob("*modules.yaml*"))
    assert len(modules) == 1 and not list((out / "cuda-rhel-10-x86_64" / "repodata").glob("*modules*"))
    assert not (gathered / "rpm-packages").exists()
    readme = (gathered / "README.txt").read_text()
    assert "nvidia_driver_rpm_repository: http://MIRROR:8080/rpms/cuda-rhel-MAJOR-ARCH/" in readme
    assert "cuda-rhel-10-x86_64: nvidia-fabric-manager, nvidia-open (locks *nvidia*580*)" in readme
    sums = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=out.parent, capture_output=True, text=True,
                          check=False)
    assert sums.returncode == 0, sums.stdout + sums.stderr


def dnf(tmp_path, repository, *args):
    """dnf against the bundle's repository alone, in an install root of its own."""
    config = tmp_path / "dnf.conf"
    config.write_text("[main]\ngpgcheck=0\nreposdir=/nonexistent\nmodule_platform_id=platform:el9\n")
    argv = ["dnf", "-q", "-y", f"--config={config}", f"--installroot={tmp_path / 'root'}", "--releasever=9",
            f"--setopt=cachedir={tmp_path / 'cache'}", f"--repofrompath=bundle,{repository.as_uri()}",
            "--repo=bundle", *args]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"{' '.join(argv)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_dnf_enables_the_driver_stream_from_the_bundle_and_finds_its_packages(tmp_path, gathered):
    needs("dnf")
    repository = gathered / "rpms" / "cuda-rhel-9-x86_64"
    streams = dnf(tmp_path, repository, "module", "list", "nvidia-driver")
    assert "580-open" in streams and "570-open" in streams
    if os.geteuid() != 0:
        pytest.skip("dnf module enable runs as root only (even in an install root of its own)")
    dnf(tmp_path, repository, "module", "enable", "nvidia-driver:580-open")
    found = dnf(tmp_path, repository, "repoquery", "--queryformat", "%{name}-%{evr}\n", "nvidia-open",
                "kmod-nvidia-open-dkms")
    assert found.split() == ["kmod-nvidia-open-dkms-3:580.95.05-1.el9", "nvidia-open-580.95.05-1"]


def test_a_bundle_machine_without_createrepo_c_is_refused_naming_the_package(tmp_path, served):
    bare = tmp_path / "bin"
    bare.mkdir()
    proc = bundle(tmp_path, served, "--check", path=f"{os.path.dirname(sys.executable)}{os.pathsep}{bare}",
                  check=False)
    assert proc.returncode != 0
    assert "apt-get install createrepo-c (Debian, Ubuntu), or dnf install createrepo_c" in proc.stdout
    assert "cuda-rhel-9-x86_64" in proc.stdout


def test_an_rpm_that_differs_from_primarys_checksum_fails_naming_repository_and_package(tmp_path, served):
    www = tmp_path / "www"
    shutil.copytree(served["www"] / "cuda" / "rhel10", www / "cuda" / "rhel10")
    shutil.copytree(served["www"] / "toolkit", www / "toolkit")
    (tampered,) = (www / "cuda" / "rhel10" / "x86_64").glob("nvidia-open-580.95.05-*.rpm")
    tampered.write_bytes(tampered.read_bytes() + b"changed on the way")
    handler = functools.partial(QuietHandler, directory=str(www))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        proc = bundle(tmp_path, served, nodes=NODES[2:], url=f"http://127.0.0.1:{server.server_address[1]}",
                      check=False)
    finally:
        server.shutdown()
    assert proc.returncode != 0
    assert "nvidia-open-580.95.05-1" in proc.stdout and "did not match" in proc.stdout
    assert f"rpms/cuda-rhel-10-x86_64/{tampered.name}" in proc.stdout
