# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parsers of what the driver's tools and files print: ``dkms status``, ``modinfo``,
``nvidia-smi`` queries, Secure Boot, the nouveau blacklist; and what the services' states
(``gpunode.host.systemd.by_service``) say.

Pure Python; a text that cannot be trusted raises
:class:`~ansible.module_utils.gpunode.driver.driver.DriverError`.
"""

import re

from ansible.module_utils.gpunode.driver.driver import (
    NOUVEAU_BLACKLIST_LINES,
    VERSION_RE,
    DriverError,
    parse_version,
)

_DKMS_RE = re.compile(
    r"^(?P<module>[^,/\s]+)(?:/|,\s*)(?P<version>[^,:\s]+)"
    r"(?:,\s*(?P<kernel>[^,\s]+),\s*(?P<arch>[^:\s]+))?:\s*(?P<status>[a-z-]+)(?P<rest>.*)$"
)


def parse_dkms_status(text):
    """Parse ``dkms status`` (dkms 2 and 3 formats) into a list of dicts.

    Each entry: ``module``, ``version``, ``kernel`` and ``arch`` (None for
    ``added`` entries), ``status`` (``added``, ``built``, ``installed``) and
    ``warning`` (the text after the status, or None). Lines that are not
    status lines (warnings dkms prints on its own) are skipped.
    """
    entries = []
    for line in text.splitlines():
        match = _DKMS_RE.match(line.strip())
        if not match:
            continue
        rest = match.group("rest").strip()
        entries.append(
            {
                "module": match.group("module"),
                "version": match.group("version"),
                "kernel": match.group("kernel"),
                "arch": match.group("arch"),
                "status": match.group("status"),
                "warning": rest.strip("() ") or None,
            }
        )
    return entries


def parse_modinfo(text):
    """Parse ``modinfo`` output into a dict; repeated fields become lists."""
    info = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep or not key or " " in key.strip():
            continue
        key, value = key.strip(), value.strip()
        if key in info:
            if not isinstance(info[key], list):
                info[key] = [info[key]]
            info[key].append(value)
        else:
            info[key] = value
    return info


def module_flavor(license_text):
    """``open`` for the GPL/MIT open kernel modules, ``proprietary`` for ``NVIDIA``."""
    if not license_text:
        return None
    return "open" if "GPL" in license_text or "MIT" in license_text else "proprietary"


def module_from_modinfo(text):
    """What ``modinfo nvidia`` says about the module on disk: path, version, flavor."""
    info = parse_modinfo(text)
    version = info.get("version")
    if not version or not VERSION_RE.match(version):
        raise DriverError("modinfo output has no driver version")
    vermagic = info.get("vermagic")
    return {
        "path": info.get("filename"),
        "version": version,
        "flavor": module_flavor(info.get("license")),
        "kernel": vermagic.split()[0] if vermagic else None,
    }


def parse_smi_query(text):
    """Parse ``nvidia-smi --query-gpu=driver_version,persistence_mode --format=csv,noheader``.

    Returns ``{"driver_versions": [...], "persistence_mode": [...]}``, one entry
    per GPU. Raises DriverError on anything else (nvidia-smi prints its
    failures, e.g. a driver/library mismatch, on stdout).
    """
    versions, modes = [], []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split(",")]
        if not VERSION_RE.match(fields[0]):
            raise DriverError(f"nvidia-smi: {line.strip()}")
        versions.append(fields[0])
        modes.append(fields[1] if len(fields) > 1 else None)
    if not versions:
        raise DriverError("nvidia-smi listed no GPU")
    return {"driver_versions": versions, "persistence_mode": modes}


def parse_efi_secure_boot(data):
    """The SecureBoot EFI variable: 4 attribute bytes, then 1 (on) or 0 (off)."""
    if len(data) < 5:
        raise DriverError("SecureBoot EFI variable is shorter than 5 bytes")
    return data[4] == 1


def parse_mokutil_sb_state(text):
    """``mokutil --sb-state``: True / False, None when it cannot tell."""
    lowered = text.lower()
    if "secureboot enabled" in lowered:
        return True
    if "secureboot disabled" in lowered:
        return False
    return None


def userspace_version_from_names(names):
    """The version in ``libnvidia-ml.so.<version>`` file names (newest if several)."""
    found = []
    for name in names:
        match = re.match(r"^libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$", name)
        if match:
            found.append(match.group(1))
    if not found:
        return None
    return max(found, key=parse_version)


def blacklist_complete(text):
    """Whether a modprobe.d file blacklists nouveau the way the role's template does."""
    lines = {" ".join(line.split()) for line in (text or "").splitlines()}
    return all(line in lines for line in NOUVEAU_BLACKLIST_LINES)


def service_running(services, name):
    unit = (services or {}).get(name) or {}
    return unit.get("active") == "active"


def service_enabled(services, name):
    unit = (services or {}).get(name) or {}
    return unit.get("enabled") in ("enabled", "enabled-runtime", "static", "alias")


def service_exists(services, name):
    unit = (services or {}).get(name) or {}
    return unit.get("load") not in (None, "not-found")
