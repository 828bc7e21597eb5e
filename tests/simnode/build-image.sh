#!/usr/bin/env bash
# Build the simulated GPU node image once: debootstrap a Debian bookworm root,
# import it (no registry is used), then add systemd and the packages in
# packages.txt. Skipped when an image built from the same inputs exists.
# Usage: tests/simnode/build-image.sh [IMAGE]   (default gpunode-bookworm-systemd:latest)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
image=${1:-gpunode-bookworm-systemd:latest}
base=gpunode-bookworm-base:latest
packages=$(grep -v '^\s*#' "$here/packages.txt" | xargs)
inputs=$(cat "$here/build-image.sh" "$here/Dockerfile" "$here/packages.txt" | sha256sum | cut -c1-16)

if [[ $(docker image inspect -f '{{ index .Config.Labels "gpunode.inputs" }}' "$image" 2>/dev/null) == "$inputs" ]]; then
  echo "image $image is up to date ($inputs)"
  exit 0
fi

mirror=${DEBIAN_MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)}
mirror=${mirror:-http://deb.debian.org/debian}

if ! docker image inspect "$base" >/dev/null 2>&1; then
  rootfs=$(mktemp -d /var/tmp/gpunode-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  echo "debootstrap bookworm from $mirror"
  debootstrap --variant=minbase --include=python3,ca-certificates bookworm "$rootfs" "$mirror" >/dev/null
  rm -f "$rootfs"/var/cache/apt/archives/*.deb
  tar -C "$rootfs" -c . | docker import -c 'CMD ["/bin/bash"]' - "$base" >/dev/null
fi

docker build -q --build-arg BASE="$base" --build-arg PACKAGES="$packages" \
  --label gpunode.inputs="$inputs" -t "$image" "$here" >/dev/null
echo "built $image ($inputs)"
