"""nvidia_driver_kernel_hold: the kernel packages held so that no new kernel comes, planned by the
driver (module_utils/gpunode/driver/plan.py ``plan_kernel_hold``, packages.py ``kernel_hold_targets``).

Names: Ubuntu's metapackages ``linux-<flavour>`` -> ``linux-image-<flavour>``,
``linux-headers-<flavour>`` (https://wiki.ubuntu.com/Kernel/Dev/Meta-Pkgs); Debian's
``linux-image-<flavour>``/``linux-headers-<flavour>`` (``amd64``, ``cloud-amd64``), built by the
linux-latest source package (Debian Kernel Handbook, ch. 3 "Debian kernel packages",
https://kernel-team.pages.debian.net/kernel-handbook/ch-packaging.html); dnf's versionlock
excludes every other version of a locked name
(https://dnf-plugins-core.readthedocs.io/en/latest/versionlock.html).
"""

import pytest
from ansible.module_utils.gpunode.driver.packages import kernel_hold_targets
from ansible.module_utils.gpunode.driver.plan import plan
from test_nvidia_driver import CONVERGED_PACKAGES, debian_535, dpkg, state
from test_nvidia_driver_el import ROCKY9, request


def converged_with(*packages, **extra):
    """A Debian 12 node converged on driver 535, with ``packages`` installed beside it."""
    return state("535.129.03", "535.129.03", "535.129.03", packages=(*CONVERGED_PACKAGES, *packages), **extra)


UBUNTU_GENERIC = ("linux-generic 6.8.0-60.63", "linux-image-generic 6.8.0-60.63",
                  "linux-headers-generic 6.8.0-60.63", "linux-image-6.8.0-60-generic 6.8.0-60.63",
                  "linux-headers-6.8.0-60-generic 6.8.0-60.63", "linux-tools-generic 6.8.0-60.63",
                  "linux-image-generic-hwe-24.04 6.8.0-60.63", "linux-firmware 20240318")
UBUNTU_AWS = ("linux-aws 6.8.0.1024.26", "linux-image-aws 6.8.0.1024.26", "linux-headers-aws 6.8.0.1024.26",
              "linux-image-6.8.0-1024-aws 6.8.0-1024.26", "linux-image-generic 6.8.0-60.63")
DEBIAN = ("linux-image-amd64 6.1.119-1", "linux-headers-amd64 6.1.119-1",
          "linux-image-6.1.0-28-amd64 6.1.119-1", "linux-image-cloud-amd64 6.1.119-1",
          "linux-libc-dev 6.1.119-1")


@pytest.mark.parametrize(("release", "installed", "held"), [
    ("6.8.0-60-generic", UBUNTU_GENERIC, ["linux-generic", "linux-headers-generic", "linux-image-generic",
                                          "linux-image-generic-hwe-24.04"]),
    ("6.8.0-1024-aws", UBUNTU_AWS, ["linux-aws", "linux-headers-aws", "linux-image-aws"]),
    ("6.1.0-28-amd64", DEBIAN, ["linux-headers-amd64", "linux-image-amd64"]),
    ("6.1.0-28-cloud-amd64", DEBIAN, ["linux-image-cloud-amd64"]),
    ("6.12.38+deb13-cloud-amd64", DEBIAN, ["linux-image-cloud-amd64"]),
    ("6.8.0-60-custom", UBUNTU_GENERIC, []),
])
def test_apt_holds_the_installed_metapackages_of_the_running_kernels_flavour(release, installed, held):
    assert kernel_hold_targets(release, dpkg(*installed)) == held


def test_a_debian_node_holds_its_flavour_and_plans_nothing_once_held():
    host = converged_with(*DEBIAN, running_kernel="6.1.0-28-amd64")
    steps = plan(host, debian_535(kernel_hold=True))
    assert steps["kernel_hold"] == ["linux-headers-amd64", "linux-image-amd64"]
    assert steps["kernel_record"] == ["linux-headers-amd64", "linux-image-amd64"]
    assert not steps["converged"] and not steps["disruptive"] and not steps["install"]
    assert steps["reasons"] == ["kernel not held: linux-headers-amd64, linux-image-amd64"]
    record = ["linux-headers-amd64", "linux-image-amd64"]
    held = converged_with(*DEBIAN[2:], "linux-image-amd64 6.1.119-1 hold",
                          "linux-headers-amd64 6.1.119-1 hold",
                          running_kernel="6.1.0-28-amd64", kernel_hold_record=record)
    steps = plan(held, debian_535(kernel_hold=True))
    assert steps["converged"] and steps["kernel_hold"] == [] and steps["kernel_record"] is None


def test_the_flavour_is_the_running_kernels_under_proc_root_before_unames():
    host = converged_with(*UBUNTU_AWS, kernel="6.8.0-60-generic", running_kernel="6.8.0-1024-aws")
    assert plan(host, debian_535(kernel_hold=True))["kernel_hold"] == ["linux-aws", "linux-headers-aws",
                                                                      "linux-image-aws"]


def test_false_after_true_releases_gpunodes_holds_and_never_the_operators():
    host = converged_with("linux-image-amd64 6.1.119-1 hold", "linux-headers-amd64 6.1.119-1 hold",
                          kernel_hold_record=["linux-image-amd64"])  # the headers' hold is the operator's
    steps = plan(host, debian_535())
    assert steps["kernel_unhold"] == ["linux-image-amd64"] and steps["kernel_hold"] == []
    assert steps["kernel_record"] == [] and not steps["disruptive"]
    released = converged_with("linux-image-amd64 6.1.119-1", "linux-headers-amd64 6.1.119-1 hold")
    assert plan(released, debian_535())["converged"]


def test_true_leaves_the_operators_own_hold_out_of_the_record():
    host = converged_with("linux-image-amd64 6.1.119-1 hold", "linux-headers-amd64 6.1.119-1",
                          running_kernel="6.1.0-28-amd64")
    steps = plan(host, debian_535(kernel_hold=True))
    assert steps["kernel_hold"] == steps["kernel_record"] == ["linux-headers-amd64"]


def test_a_record_of_a_hold_since_lifted_is_forgotten():
    host = converged_with("linux-image-amd64 6.1.119-1", kernel_hold_record=["linux-image-amd64"])
    steps = plan(host, debian_535())
    assert steps["kernel_unhold"] == [] and steps["kernel_record"] == [] and not steps["converged"]


def test_el_version_locks_kernel_star_and_releases_only_its_own_locks():
    rpm = {name: {"version": "5.14.0-503.14.1.el9_5", "want": want, "status": "installed"}
           for name, want in (("kernel", "install"), ("kernel-core", "install"), ("kernel-modules", "hold"),
                              ("kernel-devel", "install"), ("nvidia-open", "hold"),
                              ("kernelshark", "install"), ("dnf", "install"))}
    host = dict(state("580.95.05", "580.95.05", "580.95.05", flavor="open", packages=None), packages=rpm)
    steps = plan(host, request(ROCKY9, branch="580", kernel_hold=True))
    assert steps["kernel_hold"] == ["kernel", "kernel-core", "kernel-devel", "kernelshark"]
    assert steps["kernel_record"] == ["kernel", "kernel-core", "kernel-devel", "kernelshark"]
    steps = plan(dict(host, kernel_hold_record=["kernel", "kernel-core"]), request(ROCKY9, branch="580"))
    # nothing of the record is locked any more; kernel-modules' lock is the operator's
    assert steps["kernel_unhold"] == [] and steps["kernel_record"] == []
    locked = {name: dict(entry, want="hold") for name, entry in rpm.items()}
    steps = plan(dict(host, packages=locked, kernel_hold_record=["kernel", "kernel-core"]),
                 request(ROCKY9, branch="580"))
    assert steps["kernel_unhold"] == ["kernel", "kernel-core"] and steps["kernel_record"] == []
