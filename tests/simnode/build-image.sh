#!/usr/bin/env bash
# Build a simulated GPU node image once: debootstrap a Debian root of the
# suite, import it (no registry is used), then add systemd and the packages in
# packages.txt. Skipped when an image built from the same inputs exists.
#
# Usage: tests/simnode/build-image.sh [FLAVOR...]   (default: bookworm)
#
#   bullseye             Debian 11: Python 3.9, containerd 1.4, Docker 20.10
#   bookworm             Debian 12: Python 3.11, containerd 1.6, Docker 20.10
#   trixie               Debian 13: Python 3.13, containerd 1.7, Docker 26.1
#   trixie-containerd2   Debian 13 with containerd 2.x from Debian unstable (sid)
#
# Each FLAVOR gives the image gpunode-FLAVOR-systemd:latest.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
(($# > 0)) || set -- bookworm

mirror=${DEBIAN_MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)}
mirror=${mirror:-http://deb.debian.org/debian}

build() {
  local flavor=$1 suite extra_suite="" extra_packages=""
  case $flavor in
    bullseye | bookworm | trixie) suite=$flavor ;;
    trixie-containerd2) suite=trixie extra_suite=sid extra_packages=containerd ;;
    *) echo "build-image.sh: unknown flavor $flavor (bullseye, bookworm, trixie, trixie-containerd2)" >&2; return 2 ;;
  esac
  local image=gpunode-$flavor-systemd:latest base=gpunode-$suite-base:latest
  local packages inputs
  packages=$(grep -v '^\s*#' "$here/packages.txt" | xargs)
  inputs=$( (cat "$here/build-image.sh" "$here/Dockerfile" "$here/packages.txt"; echo "$flavor") | sha256sum | cut -c1-16)

  if [[ $(docker image inspect -f '{{ index .Config.Labels "gpunode.inputs" }}' "$image" 2>/dev/null) == "$inputs" ]]; then
    echo "image $image is up to date ($inputs)"
    return 0
  fi

  # flavors of a suite share its base image: one of them makes it, the others wait
  # (scripts/run-tests.py builds the flavors side by side)
  exec 8>"/var/tmp/gpunode-base-$suite.lock"
  flock 8
  if ! docker image inspect "$base" >/dev/null 2>&1; then
    local rootfs
    rootfs=$(mktemp -d /var/tmp/gpunode-rootfs.XXXXXX)
    echo "debootstrap $suite from $mirror"
    debootstrap --variant=minbase --include=python3,ca-certificates "$suite" "$rootfs" "$mirror" >/dev/null
    rm -f "$rootfs"/var/cache/apt/archives/*.deb
    tar -C "$rootfs" -c . | docker import -c 'CMD ["/bin/bash"]' - "$base" >/dev/null
    rm -rf "$rootfs"
  fi
  flock -u 8

  docker build -q --build-arg BASE="$base" --build-arg PACKAGES="$packages" \
    --build-arg MIRROR="$mirror" --build-arg EXTRA_SUITE="$extra_suite" \
    --build-arg EXTRA_PACKAGES="$extra_packages" \
    --label gpunode.inputs="$inputs" --label gpunode.suite="$suite" -t "$image" "$here" >/dev/null
  echo "built $image ($inputs)"
}

for flavor in "$@"; do
  build "$flavor"
done
