#!/usr/bin/env python3
"""Write the modules.yaml of the stand-in NVIDIA repository for EL 9 (modifyrepo_c adds it).

Usage: genmodules.py REPODIR OUT

NVIDIA's rhel9 repository groups its driver packages into module streams of the
module nvidia-driver (NVIDIA's genmodules.py, github.com/NVIDIA/
yum-packaging-precompiled-kmod before it moved to cuda-repo-management; the
guide "dnf module enable nvidia-driver:<branch>-open"): per branch <b>-dkms
(kmod-nvidia-latest-dkms, proprietary) and <b>-open (kmod-nvidia-open-dkms),
and latest-dkms and open-dkms over every branch, each with the profiles
default, ks and fm (fm adds nvidia-fabric-manager), and a modulemd-defaults
document whose default stream is latest-dkms. The precompiled streams (<b>,
latest) are not made: no precompiled kmod stand-ins exist. Format:
libmodulemd's modulemd v2 and modulemd-defaults v1 (spec.v2.yaml).
"""

import hashlib
import os
import subprocess
import sys

import yaml

# the packages of a branch in every stream, then what each flavour adds
BRANCH = ["nvidia-driver", "nvidia-driver-libs", "nvidia-driver-cuda", "nvidia-driver-cuda-libs",
          "libnvidia-ml", "nvidia-persistenced", "nvidia-kmod-common", "nvidia-fabric-manager"]
FLAVOUR = {"dkms": ["kmod-nvidia-latest-dkms", "cuda-drivers"], "open": ["kmod-nvidia-open-dkms", "nvidia-open"]}
DEFAULT_PROFILE = ["nvidia-driver", "nvidia-driver-cuda"]


def read_packages(repodir):
    """(name, epoch, version, release, arch) of every RPM in repodir."""
    files = sorted(f for f in os.listdir(repodir) if f.endswith(".rpm"))
    out = subprocess.run(
        ["rpm", "-qp", "--nosignature", "--qf", "%{NAME} %{EPOCHNUM} %{VERSION} %{RELEASE} %{ARCH}\\n"]
        + [os.path.join(repodir, f) for f in files], check=True, capture_output=True, text=True).stdout
    return [tuple(line.split()) for line in out.splitlines()]


def stream(name, flavour, packages, branches):
    kmod = FLAVOUR[flavour][0]
    wanted = set(BRANCH + FLAVOUR[flavour]) | {"cuda-drivers-" + b for b in branches}
    rpms = sorted("{0}-{1}:{2}-{3}.{4}".format(*p) for p in packages
                  if p[0] in wanted and p[2].split(".")[0] in branches)
    names = sorted({p[0] for p in packages if p[0] in wanted and p[2].split(".")[0] in branches})
    default = DEFAULT_PROFILE + [kmod]
    version = 20260101000000
    context = hashlib.md5(("nvidia-driver" + name).encode()).hexdigest()[:8]
    return {
        "document": "modulemd", "version": 2,
        "data": {
            "name": "nvidia-driver", "stream": name, "version": version, "context": context,
            "arch": "x86_64", "summary": "Nvidia driver for " + name + " branch",
            "description": "gpunode stand-in of NVIDIA's nvidia-driver module, stream " + name + ".",
            "license": {"module": ["MIT"]},
            "profiles": {
                "default": {"rpms": default},
                "ks": {"rpms": [n for n in names if not n.startswith("cuda-drivers") and n != "nvidia-open"]},
                "fm": {"rpms": default + ["nvidia-fabric-manager"]},
            },
            "artifacts": {"rpms": rpms},
        },
    }


def main(repodir, out):
    packages = read_packages(repodir)
    branches = sorted({p[2].split(".")[0] for p in packages if p[0] == "nvidia-driver"})
    docs = []
    for branch in branches:
        docs.append(stream(branch + "-dkms", "dkms", packages, [branch]))
        docs.append(stream(branch + "-open", "open", packages, [branch]))
    docs.append(stream("latest-dkms", "dkms", packages, branches))
    docs.append(stream("open-dkms", "open", packages, branches))
    docs.append({"document": "modulemd-defaults", "version": 1,
                 "data": {"module": "nvidia-driver", "stream": "latest-dkms",
                          "profiles": {d["data"]["stream"]: ["default"] for d in docs}}})
    with open(out, "w") as stream_file:
        yaml.safe_dump_all(docs, stream_file, explicit_start=True, explicit_end=True, sort_keys=False)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
