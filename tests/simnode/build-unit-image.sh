#!/usr/bin/env bash
# Build the image that runs the target-side unit tests on Debian's own python3
# (scripts/unit-tests.py --container): debootstrap a minimal Debian root of the
# suite with python3 and Debian's packages of what the tests import, and import
# it (no registry is used). Skipped when an image built from the same inputs
# exists. Debian unstable (sid) is the one target Python pyenv does not have:
# its python3 is 3.14.
#
# Usage: tests/simnode/build-unit-image.sh [SUITE]   (default: sid)
# Gives the image gpunode-SUITE-unit:latest; prints its python3's version.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
suite=${1:-sid}
# requirements-unit.in, as Debian packages it (and pci.ids, the system copy a test
# reads; openssl, which makes gpu_node_condition's test certificates); kubernetes-validate is
# not in Debian: the tests that need it skip saying so
packages=python3,pci.ids,openssl,python3-pytest,python3-pytest-random-order,python3-yaml,python3-hypothesis,python3-tomli,python3-toml
mirror=${DEBIAN_MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)}
mirror=${mirror:-http://deb.debian.org/debian}
image=gpunode-$suite-unit:latest
inputs=$( (cat "$here/build-unit-image.sh"; echo "$suite") | sha256sum | cut -c1-16)

if [[ $(docker image inspect -f '{{ index .Config.Labels "gpunode.inputs" }}' "$image" 2>/dev/null) != "$inputs" ]]; then
  rootfs=$(mktemp -d /var/tmp/gpunode-unit-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  echo "debootstrap $suite ($packages) from $mirror"
  debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >/dev/null
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import -c 'CMD ["/bin/bash"]' -c "LABEL gpunode.inputs=$inputs" \
    -c "LABEL gpunode.suite=$suite" - "$image" >/dev/null
  echo "built $image ($inputs)"
fi
docker run --rm --network none "$image" python3 -c 'import platform; print(platform.python_version())'
