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
#   rocky9               a simulated Rocky Linux 9.6 node: the bookworm image with the real
#                        dnf 4.14, rpm 4.18 and Rocky's release files, local RPM repositories
#                        of stand-in packages (NVIDIA's CUDA repository with the EL 9 module
#                        streams, kernel-devel, EPEL's dkms): see el/Dockerfile, el/build-repo.sh
#   rhel10               the same as Red Hat Enterprise Linux 10.0 (no module streams)
#
# Each FLAVOR gives the image gpunode-FLAVOR-systemd:latest. The EL images are
# built FROM gpunode-bookworm-systemd (built first when out of date) and for the
# running kernel (their kernel-devel stand-in is its), so it is in their inputs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
(($# > 0)) || set -- bookworm

mirror=${DEBIAN_MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)}
mirror=${mirror:-http://deb.debian.org/debian}

build_el() {  # FLAVOR: a simulated EL node on top of the bookworm image
  local flavor=$1 image=gpunode-$1-systemd:latest inputs
  build bookworm
  inputs=$( (cat "$here/build-image.sh"; docker image inspect -f '{{ .Id }}' gpunode-bookworm-systemd:latest
             cd "$here" && find el fakes/driver/bin fakes/driver/src fakes/container-toolkit -type f | LC_ALL=C sort \
             | xargs cat; echo "$flavor $(uname -r)") | sha256sum | cut -c1-16)
  if [[ $(docker image inspect -f '{{ index .Config.Labels "gpunode.inputs" }}' "$image" 2>/dev/null) == "$inputs" ]]; then
    echo "image $image is up to date ($inputs)"
    return 0
  fi
  docker build -q --build-arg FLAVOR="$flavor" --label gpunode.inputs="$inputs" --label gpunode.suite=bookworm \
    -f "$here/el/Dockerfile" -t "$image" "$here" >/dev/null
  echo "built $image ($inputs)"
}

# one build of an image at a time (run-tests.py builds images side by side, and
# an EL image builds the bookworm one first): a lock per flavor, held by a subshell
build() {
  (
    exec 9>"/tmp/gpunode-build-image-$1.lock"
    flock 9
    build_image "$1"
  )
}

build_image() {
  local flavor=$1 suite extra_suite="" extra_packages=""
  case $flavor in
    bullseye | bookworm | trixie) suite=$flavor ;;
    trixie-containerd2) suite=trixie extra_suite=sid extra_packages=containerd ;;
    rocky9 | rhel10) build_el "$flavor"; return ;;
    *) echo "build-image.sh: unknown flavor $flavor (bullseye, bookworm, trixie, trixie-containerd2, rocky9, rhel10)" >&2
       return 2 ;;
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
