"""Image bake mode (docs/ROLES.md, "Image bake mode"): the driver planned for the image's kernel on a
build host without a GPU, nothing loaded, started or rebooted; its refusals; the role's switch."""

import json
import sys

import nvidia_driver_state
import pytest
import yaml
from ansible.module_utils.gpunode.driver.plan import plan
from playbook_run import ansible_playbook
from test_nvidia_driver import BASE, debian_535, state
from test_nvidia_driver_modules import KERNEL, ROOT, FakeHost

IMAGE_KERNEL = "6.1.0-30-amd64"  # the newest with headers
BUILD_HOST_KERNEL = "6.12.9-1-cloud-amd64"  # runs the build (under proc_root), newer, no headers here


@pytest.fixture
def build_host(tmp_path, monkeypatch):
    """A build host with no GPU, a driver of its own loaded, and the image's kernels under /lib/modules."""
    host = FakeHost(tmp_path)
    host.install(monkeypatch)
    host.bins |= {"update-initramfs"}
    host.load("550.163.01", "nvidia_uvm", "nvidia")  # the build host's: not the image's
    (host.proc / "sys" / "kernel").mkdir(parents=True)
    (host.proc / "sys" / "kernel" / "osrelease").write_text(BUILD_HOST_KERNEL + "\n")
    for release, headers in ((KERNEL, True), (IMAGE_KERNEL, True), ("6.1.0-31-amd64", False),
                             ("5.10.0-9-amd64", True)):
        (host.modules_dir / release).mkdir()
        if headers:
            (host.modules_dir / release / "build").mkdir()
    host.commands["apt-cache madison*"] = (0, "", "")
    return host


def test_a_bake_plans_the_driver_for_the_newest_kernel_with_headers_and_loads_starts_reads_no_gpu(
        build_host, run_module):
    ok, result = run_module(nvidia_driver_state, build_host.args(gpu=None, branch="535", image_build=True),
                            check_mode=True)
    assert ok, result
    assert result["ansible_facts"]["nvidia_gpu"]["present"] is False  # no GPU, planned all the same
    node, steps = result["state"], result["plan"]
    assert node["kernel"] == IMAGE_KERNEL and node["running_kernel"] == BUILD_HOST_KERNEL
    assert node["loaded"]["version"] is None and node["headers_present"]
    assert node["initramfs_command"] == ["/usr/bin/update-initramfs", "-u", "-k", IMAGE_KERNEL]
    assert steps["install"] and steps["dkms_kernels"] == [IMAGE_KERNEL] and steps["prerequisites"] == []
    assert not (steps["load"] or steps["unload"] or steps["reboot_required"] or steps["disruptive"])
    assert "start" not in steps["persistence"]
    assert f"image build for kernel {IMAGE_KERNEL}" in steps["reasons"][-1]
    assert not [call for call in build_host.calls if call[0].endswith("nvidia-smi")]


def test_a_bake_takes_the_kernel_it_is_given_when_installed(build_host, run_module):
    ok, result = run_module(nvidia_driver_state, build_host.args(
        gpu=None, version="535.129.03", image_build=True, image_kernel="6.1.0-31-amd64"), check_mode=True)
    assert ok, result
    assert result["state"]["kernel"] == "6.1.0-31-amd64"
    assert result["plan"]["prerequisites"][0] == "linux-headers-6.1.0-31-amd64"  # its headers come first


@pytest.mark.parametrize(("args", "message"), [
    ({}, "image build: set nvidia_driver_branch or nvidia_driver_version"),
    ({"branch": "535", "signing_key": "/root/mok.key", "signing_cert": "/root/mok.der"},
     "signing key (nvidia_driver_signing_key) never goes into an image"),
    ({"branch": "535", "image_kernel": "6.2.0-1-amd64"},
     "gpunode_image_kernel 6.2.0-1-amd64 is not installed"),
])
def test_a_bake_refuses_without_a_branch_with_a_signing_key_or_an_uninstalled_kernel(
        build_host, run_module, args, message):
    ok, result = run_module(nvidia_driver_state, build_host.args(gpu=None, image_build=True, **args))
    assert not ok and message in result["msg"] and "nothing was changed" in result["msg"]


def test_a_bake_refuses_where_no_kernel_has_headers(tmp_path, monkeypatch, run_module):
    host = FakeHost(tmp_path)
    host.install(monkeypatch)
    (host.modules_dir / KERNEL).mkdir()  # the kernel, without its build link
    ok, result = run_module(nvidia_driver_state, host.args(gpu=None, branch="535", image_build=True))
    assert not ok and "no kernel under" in result["msg"] and "has its headers" in result["msg"]


def test_a_bake_over_an_installed_driver_builds_for_the_image_kernel_and_reloads_nothing():
    # the build host runs 550 and the image has the 535 userspace without its module for the kernel
    request = dict(debian_535(), image_build=True)
    bake = state(userspace="535.129.03", loaded="550.163.01", services={}, systemd=False,
                 packages=(*BASE, "nvidia-driver 535.129.03-1 hold"),
                 dkms=[("535.129.03", "6.1.0-9-amd64", "installed")])
    steps = plan(bake, request)
    assert steps["dkms_build"] and steps["dkms_kernels"] == [KERNEL] and not steps["install"]
    assert not (steps["unload"] or steps["load"] or steps["disruptive"])
    assert steps["persistence"] == ["enable"]  # enabled offline, started at boot
    today = plan(bake, debian_535())  # the same host, not a bake: as without systemd today
    assert today["unload"] and today["persistence"] == []


@pytest.mark.controller(reason="runs ansible-playbook over the role's defaults")
def test_bake_mode_is_gpunode_image_build_else_packers_builder_type(tmp_path):
    hosts = {"plain": {}, "packer": {"packer_builder_type": "amazon-ebs"},
             "asked": {"gpunode_image_build": True},
             "refused": {"packer_builder_type": "docker", "gpunode_image_build": False}}
    inventory = tmp_path / "inventory.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(yaml.safe_dump({"all": {"vars": local, "hosts": hosts}}))
    playbook = tmp_path / "bake.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [
        {"ansible.builtin.include_vars": str(ROOT / "roles" / "nvidia_driver" / "defaults" / "main.yml")},
        {"ansible.builtin.copy": {"content": "{{ nvidia_driver_image_build | bool | to_json }}",
                                  "dest": str(tmp_path / "{{ inventory_hostname }}.json"),
                                  "mode": "0600"}}]}]))
    ansible_playbook(playbook, inventory)
    found = {name: json.loads((tmp_path / f"{name}.json").read_text()) for name in hosts}
    assert found == {"plain": False, "packer": True, "asked": True, "refused": False}
