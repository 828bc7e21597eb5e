"""scripts/real-host-guard.sh: what the guards of scripts/real-host-check.sh let through (reads) and
refuse (everything that changes a GPU or the host), and that a refused call is logged and not run."""

import subprocess

import pytest
from conftest import ROOT

GUARD = ROOT / "scripts" / "real-host-guard.sh"


def is_read(*argv):
    script = f'. "{GUARD}"; _is_read "$@"'
    return subprocess.run(["sh", "-c", script, "guard", *argv], check=False).returncode == 0


@pytest.mark.parametrize("argv", [
    ["nvidia-smi"], ["nvidia-smi", "-q"], ["nvidia-smi", "-q", "-x"], ["nvidia-smi", "-L"],
    ["nvidia-smi", "--query-gpu=driver_version,persistence_mode", "--format=csv,noheader"],
    ["nvidia-smi", "-i", "0", "--query-gpu=index,mig.mode.current", "--format=csv"],
    ["nvidia-smi", "mig", "-lgip"], ["nvidia-smi", "mig", "-lgipp"], ["nvidia-smi", "mig", "-lgi"],
    ["nvidia-smi", "mig", "-lci"], ["nvidia-smi", "mig", "-i", "0", "-lgi"], ["nvidia-smi", "nvlink", "-s"],
    ["nvidia-smi", "topo", "-m"],
    ["systemctl", "show", "-p", "Id,LoadState", "nvidia-persistenced.service"],
    ["systemctl", "is-active", "kubelet"], ["systemctl", "--no-pager", "status", "containerd"],
    ["dpkg", "-l"], ["dpkg", "--admindir=/var/lib/dpkg", "-S", "/usr/bin/nvidia-smi"],
    ["apt-get", "install", "-s", "nvidia-driver-580"], ["modprobe", "-n", "nvidia"], ["dkms", "status"],
    ["mokutil", "--sb-state"], ["rpm", "-qa"], ["ldconfig", "-p"],
])
def test_reads_pass(argv):
    assert is_read(*argv)


@pytest.mark.parametrize("argv", [
    ["nvidia-smi", "-pm", "1"], ["nvidia-smi", "-i", "0", "-mig", "1"],
    ["nvidia-smi", "--gpu-reset", "-i", "0"], ["nvidia-smi", "-r"],
    ["nvidia-smi", "mig", "-cgi", "19,19", "-C"], ["nvidia-smi", "mig", "-dci"],
    ["nvidia-smi", "mig", "-dgi"], ["nvidia-smi", "-ac", "1593,1410"], ["nvidia-smi", "-pl", "300"],
    ["nvidia-smi", "-c", "EXCLUSIVE_PROCESS"],
    ["systemctl", "restart", "containerd"], ["systemctl", "enable", "--now", "nvidia-persistenced"],
    ["systemctl", "daemon-reload"], ["systemctl", "stop", "kubelet"],
    ["modprobe", "nvidia"], ["modprobe", "-r", "nvidia"], ["rmmod", "nvidia"], ["insmod", "x.ko"],
    ["depmod", "-a"], ["apt-get", "install", "-y", "nvidia-driver-580"], ["apt-get", "update"],
    ["apt", "install", "x"], ["dpkg", "-i", "x.deb"], ["dpkg", "--configure", "-a"],
    ["dpkg", "--set-selections"], ["rpm", "-i", "x.rpm"], ["dnf", "install", "x"], ["reboot"],
    ["shutdown", "-r", "now"], ["nvidia-persistenced"], ["update-initramfs", "-u"], ["dracut", "--force"],
    ["dkms", "install", "nvidia/580"], ["mokutil", "--import", "x.der"],
    ["nvidia-ctk", "cdi", "generate", "--output=/etc/cdi/nvidia.yaml"], ["ldconfig"],
])
def test_writes_are_refused(argv):
    assert not is_read(*argv)


def test_a_refused_call_is_logged_and_not_run(tmp_path):
    log, marker = tmp_path / "guard.log", tmp_path / "ran"
    real = tmp_path / "real"
    real.write_text(f"#!/bin/sh\ntouch {marker}\n")
    real.chmod(0o755)
    script = f'. "{GUARD}"; guard nvidia-smi "{real}" "{log}" "$@"'
    refused = subprocess.run(["sh", "-c", script, "g", "-pm", "1"], capture_output=True, text=True,
                             check=False)
    assert refused.returncode == 1 and "refused nvidia-smi -pm 1" in refused.stderr and not marker.exists()
    allowed = subprocess.run(["sh", "-c", script, "g", "-L"], check=False)
    assert allowed.returncode == 0 and marker.exists()
    assert log.read_text() == "REFUSED nvidia-smi -pm 1\nALLOWED nvidia-smi -L\n"
