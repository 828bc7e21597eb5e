#!/usr/bin/env python3
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Install the stub of the package that installed a simulated node's loaded driver.

Usage: driver_package.py SPEC

A simulated node whose spec loads an nvidia module and names its
``driver_package`` (see make_sysfs.py) gets a stub of that distribution package,
built here with ``dpkg-deb`` and installed with ``dpkg -i``: the real package's
name, version, Provides/Conflicts/Replaces, and the files gpunode judges a
driver's origin by, where the real package puts them: the NVML library
``/usr/lib/<triplet>/libnvidia-ml.so.<version>`` and its soname link (Ubuntu's
``libnvidia-compute-<branch>``, and the CUDA repository's of the same name,
ship both there). dpkg then owns the loaded driver's userspace, as on the host
the spec describes, so gpunode sees a packaged driver (origin ``package``)
where a real host would; only a spec without ``driver_package`` (the image
host) shows a driver no package owns. The stub ships no nvidia-smi: the
scenarios put their own stand-ins where they need one.

Idempotent: nothing is built when dpkg already has the package at that version.
Prints one line ending in "(changed)" or "(unchanged)". Needs python3, PyYAML,
make_sysfs.py beside it, and dpkg: it runs inside the simulated node.
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_sysfs import SpecError, load_spec

#: dpkg architecture -> the multiarch library folder (Debian's and Ubuntu's layout).
TRIPLETS = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}
C_LOCALE = dict(os.environ, LC_ALL="C")


def control_text(package, arch):
    """DEBIAN/control of the stub: a virtual name it provides also conflicts and is replaced,
    as Ubuntu's libnvidia-compute-<branch> does with libnvidia-compute (one at a time)."""
    lines = [
        f"Package: {package['name']}",
        f"Version: {package['version']}",
        f"Architecture: {arch}",
        "Maintainer: gpunode tests <gpunode@example.invalid>",
    ]
    if package["provides"]:
        names = ", ".join(package["provides"])
        lines += [f"Provides: {names}", f"Conflicts: {names}", f"Replaces: {names}"]
    upstream = package["version"].split("-")[0]
    lines.append(f"Description: gpunode stub of the NVIDIA driver {upstream}'s NVML library")
    return "\n".join(lines) + "\n"


def package_files(package, arch):
    """``{path: content}`` of regular files and ``{path: target}`` of links, relative to /."""
    triplet = TRIPLETS.get(arch)
    if not triplet:
        raise SpecError(f"driver_package: no library folder known for the architecture {arch!r}")
    upstream = package["version"].split("-")[0]
    lib = f"usr/lib/{triplet}"
    files = {
        f"{lib}/libnvidia-ml.so.{upstream}": "",
        f"usr/share/doc/{package['name']}/README": "gpunode stub: the package that installed the "
                                                   "simulated node's loaded driver\n",
    }
    links = {f"{lib}/libnvidia-ml.so.1": f"libnvidia-ml.so.{upstream}"}
    return files, links


def write_tree(package, arch, root):
    """The package tree dpkg-deb builds from."""
    os.makedirs(os.path.join(root, "DEBIAN"))
    with open(os.path.join(root, "DEBIAN", "control"), "w", encoding="utf-8") as handle:
        handle.write(control_text(package, arch))
    files, links = package_files(package, arch)
    for path, content in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w", encoding="utf-8") as handle:
            handle.write(content)
    for path, target in links.items():
        os.symlink(target, os.path.join(root, path))


def _run(argv):
    return subprocess.run(argv, check=False, capture_output=True, text=True, env=C_LOCALE)


def installed_version(name):
    """dpkg's version of ``name`` when it is installed, else None."""
    done = _run(["dpkg-query", "-W", "-f", "${Status}\t${Version}", name])
    status, _, version = done.stdout.partition("\t")
    return version if done.returncode == 0 and status.endswith(" installed") else None


def install(package):
    """Build and install the stub unless dpkg has it; True when it installed it."""
    if installed_version(package["name"]) == package["version"]:
        return False
    arch = _run(["dpkg", "--print-architecture"]).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="gpunode-driver-package.") as work:
        tree = os.path.join(work, "tree")
        write_tree(package, arch, tree)
        deb = os.path.join(work, f"{package['name']}.deb")
        for argv in (["dpkg-deb", "--root-owner-group", "--build", tree, deb], ["dpkg", "-i", deb]):
            done = _run(argv)
            if done.returncode != 0:
                said = (done.stderr or done.stdout).strip()
                raise SpecError(f"{' '.join(argv[:2])} {package['name']}: {said}")
    return True


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: driver_package.py SPEC", file=sys.stderr)
        return 2
    try:
        package = load_spec(args[0])["driver_package"]
        changed = bool(package) and install(package)
    except SpecError as exc:
        print(f"driver_package: {exc}", file=sys.stderr)
        return 2
    if not package:
        print(f"driver_package: {args[0]} names no driver package (unchanged)")
    else:
        state = "installed" if changed else "already installed"
        print(f"driver_package: {package['name']} {package['version']} {state} "
              f"({'changed' if changed else 'unchanged'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
