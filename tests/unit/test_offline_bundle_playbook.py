"""playbooks/offline_bundle.yml through ansible-playbook, against local stand-ins for NVIDIA's servers.

A local HTTP server in a temporary folder serves a flat CUDA repository and a
toolkit repository (Packages indexes with SHA256 lines and .deb files, like
tests/simnode/aptrepo) and a runfile. The playbook runs on localhost with the
nodes given in offline_bundle_nodes: check mode lists and fetches nothing; a
real run fetches exactly the .deb files the indexes name (newest version,
dependencies in the same index, the index's checksums), the runfile, writes
the distribution's package lists, README.txt and a SHA256SUMS that verifies.
"""

import functools
import hashlib
import http.server
import json
import pathlib
import shutil
import subprocess
import threading

import pytest
from playbook_run import ansible_playbook, local_inventory

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "offline_bundle.yml"
pytestmark = pytest.mark.controller(reason="runs playbooks/offline_bundle.yml through ansible-playbook")

NODES = [
    {"host": "gpu-ubuntu", "distribution": "Ubuntu", "distribution_version": "24.04",
     "architecture": "x86_64", "kernel": "6.8.0-60-generic", "gpus": ["1eb8"], "package_source": "cuda",
     "branch": "580"},
    {"host": "gpu-debian", "distribution": "Debian", "distribution_version": "12",
     "architecture": "x86_64", "kernel": "6.1.0-37-amd64", "gpus": ["1db1"], "branch": "535"},
    {"host": "gpu-runfile", "distribution": "Ubuntu", "distribution_version": "22.04",
     "architecture": "x86_64", "kernel": "5.15.0-139-generic", "gpus": ["1eb8"], "method": "runfile",
     "version": "580.95.05"},
]


def deb(folder, name, version, depends=""):
    """A stand-in .deb (its bytes do not matter here) and its Packages stanza."""
    filename = f"{name}_{version}_amd64.deb"
    data = f"{name} {version}\n".encode()
    (folder / filename).write_bytes(data)
    lines = [f"Package: {name}", f"Version: {version}", "Architecture: amd64", f"Filename: ./{filename}",
             f"Size: {len(data)}", f"SHA256: {hashlib.sha256(data).hexdigest()}"]
    if depends:
        lines.append(f"Depends: {depends}")
    return "\n".join(lines) + "\n"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    www = tmp_path_factory.mktemp("www")
    cuda = www / "cuda" / "ubuntu2404" / "x86_64"
    toolkit = www / "toolkit" / "amd64"
    runfiles = www / "runfiles"
    for folder in (cuda, toolkit, runfiles):
        folder.mkdir(parents=True)
    (cuda / "Packages").write_text("\n".join([
        deb(cuda, "nvidia-open-580", "580.82.07-1", "nvidia-driver-580-open (= 580.82.07-1)"),
        deb(cuda, "nvidia-open-580", "580.95.05-1",
            "nvidia-driver-580-open (= 580.95.05-1), libc6 (>= 2.34)"),
        deb(cuda, "nvidia-driver-580-open", "580.82.07-1"),
        deb(cuda, "nvidia-driver-580-open", "580.95.05-1", "nvidia-dkms-580-open | nvidia-kernel-580"),
        deb(cuda, "nvidia-dkms-580-open", "580.95.05-1", "dkms"),
        deb(cuda, "cuda-toolkit-12-8", "12.8.1-1"),  # not wanted: never fetched
    ]))
    (toolkit / "Packages").write_text("\n".join([
        deb(toolkit, "nvidia-container-toolkit", "1.17.8-1", "nvidia-container-toolkit-base (= 1.17.8-1)"),
        deb(toolkit, "nvidia-container-toolkit-base", "1.17.8-1"),
        deb(toolkit, "nvidia-container-toolkit", "1.17.10~rc.1-1"),  # a release candidate: before 1.17.10-1
        deb(toolkit, "nvidia-container-toolkit", "1.17.10-1",
            "nvidia-container-toolkit-base (= 1.17.10-1), libnvidia-container-tools (>= 1.17.10-1)"),
        deb(toolkit, "nvidia-container-toolkit-base", "1.17.10-1"),
        deb(toolkit, "libnvidia-container-tools", "1.17.10-1", "libnvidia-container1 (>= 1.17.10-1)"),
        deb(toolkit, "libnvidia-container1", "1.17.10-1"),
    ]))
    runfile = b"#!/bin/sh\necho stand-in installer\n"
    (runfiles / "NVIDIA-Linux-x86_64-580.95.05.run").write_bytes(runfile)
    handler = functools.partial(QuietHandler, directory=str(www))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield {"url": f"http://127.0.0.1:{server.server_address[1]}",
           "runfile_sha256": hashlib.sha256(runfile).hexdigest()}
    server.shutdown()


def bundle(tmp_path, served, *args, images=False, check=True):
    url = served["url"]
    nodes = [dict(n) for n in NODES]
    nodes[2].update(runfile_url=f"{url}/runfiles/NVIDIA-Linux-x86_64-580.95.05.run",
                    runfile_checksum=served["runfile_sha256"])
    extra = {"offline_bundle_dir": str(tmp_path / "bundle"), "offline_bundle_nodes": nodes,
             "offline_bundle_cuda_repo_base": f"{url}/cuda",
             "offline_bundle_toolkit_repo_url": f"{url}/toolkit/$(ARCH)",
             "offline_bundle_images": images, "gpu_cluster_addons_mode": "nvidia"}
    inventory = local_inventory(tmp_path / "inventory.json")
    return ansible_playbook(PLAYBOOK, inventory, "-e", json.dumps(extra), *args, check=check, timeout=300)


def test_check_mode_lists_what_it_would_fetch_and_fetches_nothing(tmp_path, served):
    proc = bundle(tmp_path, served, "--check")
    assert f"{served['url']}/cuda/ubuntu2404/x86_64/Packages" in proc.stdout
    assert f"{served['url']}/toolkit/amd64/Packages" in proc.stdout
    assert "nvidia-open-580" in proc.stdout and "NVIDIA-Linux-x86_64-580.95.05.run" in proc.stdout
    assert not (tmp_path / "bundle").exists() or not list((tmp_path / "bundle").rglob("*.deb"))


def test_a_real_run_gathers_exactly_what_the_nodes_need(tmp_path, served):
    bundle(tmp_path, served)
    out = tmp_path / "bundle"
    debs = sorted(str(p.relative_to(out)) for p in out.rglob("*.deb"))
    assert debs == [
        "debs/cuda-ubuntu-24.04-amd64/nvidia-dkms-580-open_580.95.05-1_amd64.deb",
        "debs/cuda-ubuntu-24.04-amd64/nvidia-driver-580-open_580.95.05-1_amd64.deb",
        "debs/cuda-ubuntu-24.04-amd64/nvidia-open-580_580.95.05-1_amd64.deb",
        "debs/toolkit-amd64/libnvidia-container-tools_1.17.10-1_amd64.deb",
        "debs/toolkit-amd64/libnvidia-container1_1.17.10-1_amd64.deb",
        "debs/toolkit-amd64/nvidia-container-toolkit-base_1.17.10-1_amd64.deb",
        "debs/toolkit-amd64/nvidia-container-toolkit_1.17.10-1_amd64.deb",
    ]
    assert (out / "runfiles" / "NVIDIA-Linux-x86_64-580.95.05.run").is_file()
    assert (out / "distro-packages" / "debian-12.txt").read_text().split() == [
        "dkms", "gcc", "linux-headers-6.1.0-37-amd64", "make", "nvidia-driver"]
    readme = (out / "README.txt").read_text()
    assert "dpkg-scanpackages" in readme and "gpu_cluster_addons_image_registry" in readme
    assert "libc6" in readme and "dkms" in readme  # what the distribution's archive must give
    sums = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=out, capture_output=True, text=True,
                          check=False)
    assert sums.returncode == 0, sums.stdout + sums.stderr
    assert len(sums.stdout.splitlines()) == len([p for p in out.rglob("*") if p.is_file()]) - 1


def test_images_without_skopeo_fail_with_a_clear_message(tmp_path, served):
    if shutil.which("skopeo"):
        pytest.skip("skopeo is installed here: the images would be fetched from the internet")
    # the inventory's image wins over the role's default, as the role renders it
    pinned = json.dumps({"gpu_cluster_addons_nvidia_device_plugin_version": "v0.20.1"})
    proc = bundle(tmp_path, served, "-e", pinned, images=True, check=False)
    assert proc.returncode != 0
    assert "copied as OCI archives with skopeo, which is not on this machine" in proc.stdout
    assert not list(tmp_path.rglob("*.deb")) and not list(tmp_path.rglob("*.run"))  # refused before fetching
    assert "nvcr.io/nvidia/k8s-device-plugin:v0.20.1" in proc.stdout
    assert "k8s-device-plugin:v0.20.0" not in proc.stdout
