# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The RHEL family's prebuilt NVIDIA open kernel modules, signed with the distribution's own key
(``el-signed``): the EL counterpart of ``ubuntu-signed``.

Pure Python (standard library only), run on the target by ``nvidia_driver_state``. A kernel
module signed with the key the distribution's kernel trusts loads under Secure Boot with no MOK
enrollment and no DKMS build. Who ships them, and where (:data:`OFFERS`):

- Red Hat, from RHEL 10.1 on (x86_64), in the extensions repository: NVIDIA's maintainer in
  github.com/NVIDIA/yum-packaging-precompiled-kmod issue 59 (2026-02-04): "For RHEL 10.1+ (x86_64),
  Red Hat is now providing signed .ko modules, these do not require importing a key into MOK":
  ``subscription-manager repos --enable=rhel-10-for-x86_64-extensions-rpms``,
  ``dnf install kmod-nvidia nvidia-open``. NVIDIA's own precompiled kmods (its CUDA repository,
  EL 9) are signed by NVIDIA, not Red Hat (the same repository's issue 67): they need NVIDIA's key
  enrolled, so they do not count; the metadata is read from the distribution's repository only.
- AlmaLinux 9 and 10, in the repository ``almalinux-nvidia`` that ``almalinux-release-nvidia-driver``
  (AlmaLinux's Extras) configures: ``kmod-nvidia-open`` (source ``nvidia-open-kmod``), signed "using a
  dedicated secondary certificate that will be trusted by AlmaLinux kernel builds" (AlmaLinux ALESCo
  RFC 0004, approved; the release package's spec installs ``/etc/yum.repos.d/almalinux-nvidia.repo``;
  the repository id is ``almalinux-nvidia``, as ``dnf --enablerepo=almalinux-nvidia`` in users'
  build scripts and the AlmaLinux wiki's ``dnf install almalinux-release-nvidia-driver`` say).

Such a module is built for one kernel, so the choice is made from the repository's metadata
(``dnf repoquery``, :data:`QUERY_FORMAT`), per kernel: the running one and every kernel installed
after it (it boots next). A package is built for kernel ``K`` (``uname -r``) when it says so the
way RPM kmods do: it provides ``kernel-modules = K`` (NVIDIA's precompiled kmod-nvidia.spec, written
with Red Hat, names them ``kmod-nvidia-<driver>-<kernel>-<release>``), requires
``kernel-uname-r = K`` (kmodtool's kmods; ``kernel-core`` provides it), or is named
``<kmod>-K`` (kmodtool's ``kmod-<name>-<uname -r>``). Its driver is the package's version.
The userspace is NVIDIA's compute-only set from its CUDA repository, ``nvidia-driver-cuda``
(NVIDIA Driver Installation Guide, "Compute-only and Desktop Installation"), at that driver,
without DKMS: the signed package provides the ``nvidia-kmod`` it requires.
"""

import re

from ansible.module_utils.gpunode.driver.driver import DriverError, version_matches

#: Distributions that sign NVIDIA's open modules for their kernels: from which release
#: (``since``), the repository that serves them (``{major}``, ``{arch}`` filled in) and their names.
OFFERS = {
    "redhat": {"name": "RHEL", "since": (10, 1), "repository": "rhel-{major}-for-{arch}-extensions-rpms",
               "kmod": "kmod-nvidia"},
    "almalinux": {"name": "AlmaLinux", "since": (9,), "repository": "almalinux-nvidia",
                  "kmod": "kmod-nvidia-open"},
}
OFFERS["rhel"] = OFFERS["redhat"]
#: The userspace installed with the signed module (compute-only: nvidia-smi, CUDA's libraries).
USERSPACE = ("nvidia-driver-cuda",)
#: ``dnf repoquery --qf``: a package's name and [epoch:]version-release, then its provides and requires.
QUERY_FORMAT = "@%{name} %{evr}\\n%{provides}\\n%{requires}"
_KERNEL_DEP_RE = re.compile(r"^(?:kernel-modules|kernel(?:-core|-modules)?-uname-r) = (\S+)$")


def offer(state, request):
    """The distribution's offer (:data:`OFFERS`, with ``repository`` filled in); refuses, before
    anything is read or changed, where the distribution signs no NVIDIA module, saying what to do."""
    found = OFFERS.get(str(state.get("distribution") or "").lower())
    version = str(state.get("distribution_version") or "")
    if found and _numbers(version) >= found["since"]:
        major, arch = version.split(".", maxsplit=1)[0], state.get("architecture") or "x86_64"
        return dict(found, repository=found["repository"].format(major=major, arch=arch))
    whose = ("Secure Boot is on and no module signing key is set" if request.get("signed_auto")
             else "nvidia_driver_method: el-signed")
    name = found["name"] if found else state.get("distribution")
    raise DriverError(
        f"{whose}, and {name} {version} ships no NVIDIA kernel module signed with a key "
        "its kernel trusts (Red Hat signs NVIDIA's open modules from RHEL 10.1 on, in "
        "rhel-10-for-<arch>-extensions-rpms; AlmaLinux 9 and 10 in almalinux-nvidia). Create a key pair, "
        "enroll its public key with `mokutil --import <cert.der>` (confirm at the next boot) and set "
        "nvidia_driver_signing_key and nvidia_driver_signing_cert; or move the node to RHEL 10.1 or later; "
        "or turn Secure Boot off. Nothing was changed.")


def parse_query(text):
    """``[{"name", "evr", "deps"}]`` of ``dnf repoquery --qf QUERY_FORMAT`` (deps: provides and requires)."""
    found = []
    for line in (text or "").splitlines():
        if line.startswith("@") and " " in line:
            name, evr = line[1:].split(" ", 1)
            found.append({"name": name, "evr": evr.strip(), "deps": []})
        elif found and line.strip():
            found[-1]["deps"].append(line.strip())
    return found


def driver_of(kmod):
    """The driver version a kmod package carries: its version (``3:580.95.05-1.el10_1``: 580.95.05)."""
    return kmod["evr"].split(":")[-1].split("-")[0]


def built_for(kmod, kernel, prefix):
    """Whether the kmod package is built for ``kernel`` (``uname -r``), as its metadata says."""
    return kmod["name"] == f"{prefix}-{kernel}" or any(
        match.group(1) == kernel for match in map(_KERNEL_DEP_RE.match, kmod["deps"]) if match)


def signed_request(request, state, read):
    """The ``el-signed`` request: the driver as the distribution's signed module for the running kernel
    and each kernel that boots next (``read``: ``driver.host.read_el_signed``'s ``repository``, ``kmod``,
    ``kmods``, ``error``, ``boot_kernels``), its packages ``install`` and ``hold`` (the running kernel's
    module, the userspace) and ``follow`` (the next kernels' modules), ``version`` the module's driver.
    Raises DriverError, saying what the repository has, where it cannot."""
    repo, prefix, kernel = read["repository"], read["kmod"], state["kernel"]
    if request["module_type"] != "open":
        raise DriverError(f"{repo} signs NVIDIA's open kernel modules only; these GPUs need the proprietary "
                          "ones: set nvidia_driver_signing_key and nvidia_driver_signing_cert. "
                          "Nothing was changed.")
    if read["kmods"] is None:
        raise DriverError(f"the repository {repo} cannot be read on this node ({read['error']}): enable it "
                          f"(RHEL: subscription-manager repos --enable={repo}). Nothing was changed.")
    ours = [k for k in read["kmods"] if version_matches(driver_of(k), request["wanted"])]
    here = [k for k in ours if built_for(k, kernel, prefix)]
    if not here:
        drivers = sorted({driver_of(k) for k in read["kmods"] if built_for(k, kernel, prefix)})
        raise DriverError(
            f"{repo} has no signed NVIDIA module of {request['wanted']} for kernel {kernel} (for this "
            f"kernel: {', '.join(drivers) or 'none'}). Boot a kernel it has modules for, choose a driver it "
            "has (nvidia_driver_branch, nvidia_driver_version), or build with DKMS under your own key "
            "(nvidia_driver_signing_key and nvidia_driver_signing_cert). Nothing was changed.")
    chosen = max(here, key=lambda k: _numbers(driver_of(k)))
    version, follow = driver_of(chosen), []
    for release in read["boot_kernels"]:
        built = [k["name"] for k in ours if built_for(k, release, prefix) and driver_of(k) == version]
        if not built:
            raise DriverError(f"kernel {release} is installed and boots next, but {repo} has no signed "
                              f"NVIDIA module of {version} for it: the node would boot without its driver. "
                              "Remove that kernel or wait for its module before rebooting. "
                              "Nothing was changed.")
        follow.append(built[0])
    install = [chosen["name"], *USERSPACE]
    packages = dict(request["packages"] or {}, install=install, hold=list(install), follow=follow, pin=None)
    return dict(request, packages=packages, version=version, wanted=version)


def installed_kmods(packages):
    """The signed modules a switch to DKMS removes (any offer's kmod, not NVIDIA's DKMS packages)."""
    prefixes = tuple(f"{o['kmod']}-" for o in OFFERS.values())
    return sorted(name for name, entry in (packages or {}).items() if name.startswith(prefixes)
                  and not name.endswith("-dkms") and entry["status"] not in ("not-installed", "config-files"))


def _numbers(version):
    return tuple(int(n) for n in re.findall(r"\d+", version))
