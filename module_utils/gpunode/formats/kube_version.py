# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Kubernetes versions, read one way everywhere in gpunode.

Accepts what users type (``1.28``, ``v1.28.2``) and what tools print
(``Kubernetes v1.28.2`` from ``kubelet --version``, ``v1.29.3+rke2r1``,
``v1.30.1-eks-1234``, an image tag ``kube-scheduler:v1.29.2``). Versions are
tuples ``(major, minor, patch)``, compared as tuples; a missing patch is 0.

Standard library only; Python 3.8+ (this runs on target hosts).
"""

import re

_VERSION_RE = re.compile(r"(?<![\d.])v?(\d+)\.(\d+)(?:\.(\d+))?(?![\d])")


class KubeVersionError(ValueError):
    """Text that holds no Kubernetes version."""


def parse(text, error=KubeVersionError, what="Kubernetes version"):
    """``"Kubernetes v1.28.2"`` -> ``(1, 28, 2)``; raises ``error`` naming ``what``."""
    if isinstance(text, (tuple, list)):
        text = ".".join(str(part) for part in text)
    match = _VERSION_RE.search(str(text if text is not None else ""))
    if not match:
        raise error(f"{what}: cannot read a version from {text!r} (expected e.g. 1.28.2 or v1.28.2)")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def minor(version):
    """``(1, 28, 2)`` or ``"v1.28.2"`` -> ``(1, 28)``."""
    parsed = version if isinstance(version, tuple) and len(version) == 3 else parse(version)
    return parsed[0], parsed[1]


def text(version):
    """``(1, 28, 2)`` -> ``"1.28.2"``."""
    return ".".join(str(part) for part in version)
