# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where the container toolkit comes from on a node: NVIDIA's apt or RPM repository.

The node's package manager (``host/packages.py`` ``manager(host)``: ``apt`` on Debian and
Ubuntu, ``dnf`` on RHEL, Rocky and AlmaLinux 9 and 10) decides, here and not in the role's
Jinja:

- **apt**: the flat repository ``https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)``
  as a deb822 source signed by a keyring under ``/etc/apt/keyrings`` (``engines.sources_text``);
  packages are ``name=version``.
- **dnf**: NVIDIA's ``nvidia-container-toolkit.repo`` (the install guide, "Installing with dnf":
  https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html)
  has ``baseurl=https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch``,
  ``repo_gpgcheck=1`` and ``gpgkey=https://nvidia.github.io/libnvidia-container/gpgkey``, the key
  the apt repository is signed with. The role downloads that key (or a mirror's) once to
  ``/etc/pki/rpm-gpg`` (checked against ``repo_key_checksum`` where given) and writes the
  repository with ``ansible.builtin.yum_repository``, ``gpgkey=file://...``, ``repo_gpgcheck`` on and
  ``gpgcheck`` on by default: NVIDIA's file sets ``gpgcheck=0`` because EL 7's rpm could not verify
  the signing subkey its packages are signed with (NVIDIA/nvidia-docker#1286), which EL 9 and 10
  do; ``rpm_gpgcheck: false`` follows NVIDIA's file for a mirror that serves them unsigned.
  Packages are ``name-version``, and a pinned toolkit pins its companions the way the guide's
  ``dnf install`` does: ``nvidia-container-toolkit-<v>``, ``nvidia-container-toolkit-base-<v>``,
  ``libnvidia-container-tools-<v>``, ``libnvidia-container1-<v>``.

:func:`repo_file_converged` tells whether the ``.repo`` file already holds what
``yum_repository`` would write (its ``add``: the section replaced by the options given, booleans
as ``1``/``0``, the description as ``name``), so a converged node runs no task.

Python 3.8+ (this runs on target hosts); standard library only.
"""

import configparser
import functools
import os
import re

from ansible.module_utils.gpunode.formats import values
from ansible.module_utils.gpunode.host.packages_rpm import compare_evr
from ansible.module_utils.gpunode.runtime.engines import TOOLKIT, RuntimeStateError, sources_text

#: NVIDIA's RPM repository of the toolkit (``nvidia-container-toolkit.repo``, stable channel)
RPM_REPO_URL = "https://nvidia.github.io/libnvidia-container/stable/rpm/$basearch"
#: the repository id NVIDIA's ``.repo`` file uses, and the file the role writes
RPM_REPO_ID = "nvidia-container-toolkit"
RPM_REPO_PATH = "/etc/yum.repos.d/nvidia-container-toolkit.repo"
#: where the repository key is kept on EL (the distributions keep theirs in /etc/pki/rpm-gpg)
RPM_KEYRING = "/etc/pki/rpm-gpg/RPM-GPG-KEY-nvidia-container-toolkit"
RPM_DESCRIPTION = "NVIDIA container toolkit (gpunode nvidia_container_runtime)"
#: the packages a pinned toolkit pins with it (the install guide's ``dnf install`` and ``apt-get install``
#: of ``NVIDIA_CONTAINER_TOOLKIT_VERSION``)
PINNED_TOGETHER = {
    TOOLKIT: (TOOLKIT, "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1"),
}
#: PyYAML's package per package manager (EL names it after the project)
YAML_PACKAGE = {"apt": "python3-yaml", "dnf": "python3-pyyaml"}
#: ``dnf repoquery --queryformat`` that :func:`parse_repoquery` reads
REPOQUERY_FORMAT = "%{name}\t%{evr}\n"


def rpm_baseurl(option, value):
    """A ``.repo`` file's ``baseurl``: http://, https:// or file:// (dnf may expand ``$basearch``,
    ``$releasever``), one word, RFC 3986 characters."""
    rule = "an http://, https:// or file:/// URL of RFC 3986 characters, no whitespace or quotes"
    values.string(option, value, "a dnf repository baseurl", rule)
    if not value.startswith(("http://", "https://", "file:///")):
        values.refuse(option, value, "a dnf repository baseurl", rule)
    return values.apt_uri(option, value)


def source(manager, wanted):
    """``{"manager", "keyring", "path", "sources_text", "repository"}`` of the toolkit's repository.

    ``keyring``: where the key is kept; ``path``: the source or ``.repo`` file; ``sources_text``: the
    deb822 source (apt; None on dnf); ``repository``: ``yum_repository``'s arguments (dnf; None on apt).
    """
    if manager == "apt":
        return {
            "manager": "apt",
            "keyring": wanted["keyring"],
            "path": wanted["sources_path"],
            "sources_text": sources_text(wanted["repo_url"], wanted["keyring"]),
            "repository": None,
        }
    if manager != "dnf":
        raise RuntimeStateError(f"no toolkit repository for the package manager {manager!r} (apt or dnf)")
    path = wanted["rpm_repo_path"]
    if not path.endswith(".repo"):
        raise RuntimeStateError(f"rpm_repo_path: {path!r} must end with .repo (dnf reads only those)")
    return {
        "manager": "dnf",
        "keyring": wanted["rpm_keyring"],
        "path": path,
        "sources_text": None,
        "repository": rpm_repository(
            wanted["rpm_repo_url"], wanted["rpm_keyring"], wanted["rpm_gpgcheck"], path
        ),
    }


def rpm_repository(baseurl, keyring, gpgcheck=True, path=RPM_REPO_PATH):
    """``ansible.builtin.yum_repository``'s arguments for the toolkit's repository at ``baseurl``."""
    return {
        "name": RPM_REPO_ID,
        "description": RPM_DESCRIPTION,
        "file": os.path.basename(path)[: -len(".repo")],
        "reposdir": os.path.dirname(path) or "/",
        "baseurl": baseurl,
        "enabled": True,
        "gpgcheck": bool(gpgcheck),
        "repo_gpgcheck": True,
        "gpgkey": "file://" + keyring,
    }


def repo_section(repository):
    """The options ``yum_repository`` writes into the repository's section, as strings."""
    written = {}
    for key, value in repository.items():
        if key in ("name", "file", "reposdir"):
            continue
        text = str(int(value)) if isinstance(value, bool) else value
        written["name" if key == "description" else key] = text
    return written


def repo_file_converged(text, repository, path=RPM_REPO_PATH):
    """Whether the ``.repo`` file's ``text`` (None: missing) holds the repository as wanted.

    Raises RuntimeStateError for a file ``yum_repository`` could not read either (it parses it
    with ``configparser``).
    """
    if text is None:
        return False
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(text, source=path)
    except configparser.Error as exc:
        raise RuntimeStateError(f"{path}: not a dnf repository file: {exc}; left unchanged") from exc
    if not parser.has_section(repository["name"]):
        return False
    return dict(parser.items(repository["name"])) == repo_section(repository)


def pinned(wanted_packages):
    """``(name, version or None)`` of each package ``{name: version or None}`` installs: a pinned
    toolkit with its companions at its version. apt takes a dependency at its candidate (the newest)
    and does not go back to an older one, so ``nvidia-container-toolkit=1.17.8-1`` alone fails ("held
    broken packages") on a repository that also holds 1.18 (its ``nvidia-container-toolkit-base
    (= 1.17.8-1)``)."""
    return [(each, version) for name, version in wanted_packages.items()
            for each in (PINNED_TOGETHER.get(name, (name,)) if version else (name,))]


def package_specs(manager, wanted_packages):
    """The package manager's specs of :func:`pinned`'s packages: ``name=version`` (apt),
    ``name-version`` (dnf)."""
    separator = "=" if manager == "apt" else "-"
    return [f"{name}{separator}{version}" if version else name for name, version in pinned(wanted_packages)]


def spec_name(spec, manager):
    """The package name of one of :func:`package_specs`' specs."""
    if manager == "apt":
        return spec.split("=")[0]
    match = re.match(r"(.+?)-[0-9][^-]*-[^-]+\Z", spec)
    return match.group(1) if match else spec


def split_evr(evr):
    """``"[epoch:]version-release"`` -> ``(epoch, version, release)``."""
    epoch, _sep, rest = evr.rpartition(":")
    version, _sep, release = rest.partition("-")
    return epoch or "0", version, release


#: orders ``[epoch:]version-release`` strings as rpm does
EVR_KEY = functools.cmp_to_key(lambda a, b: compare_evr(split_evr(a), split_evr(b)))


def parse_repoquery(text):
    """``dnf repoquery --queryformat REPOQUERY_FORMAT NAME...`` -> ``{name: {"candidate", "versions"}}``
    (the shape ``engines.parse_apt_policy`` gives): every version the enabled repositories offer,
    newest first; ``candidate`` the newest. dnf prints ``%{evr}`` without an epoch of 0."""
    found = {}
    for line in (text or "").splitlines():
        fields = line.strip().split("\t")
        if len(fields) != 2 or not all(fields):
            continue
        versions = found.setdefault(fields[0], [])
        if fields[1] not in versions:
            versions.append(fields[1])
    known = {}
    for name, versions in found.items():
        newest_first = sorted(versions, key=EVR_KEY, reverse=True)
        known[name] = {"candidate": newest_first[0], "versions": newest_first}
    return known
