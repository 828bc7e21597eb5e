#!/usr/bin/env bash
# Build the stand-ins of NVIDIA's RPMs (specs/: nvidia-driver, kmod-nvidia-{latest,open}-dkms,
# cuda-drivers with nvidia-open and nvidia-fabric-manager, per driver version; the container
# toolkit) into OUTDIR, unsigned, with rpmbuild. Used by build-repo.sh (the EL images'
# CUDA repository stand-in, which it then signs and indexes) and by
# tests/unit/test_offline_bundle_el.py (a repository the offline bundle reads).
#
# Usage: nvidia-rpms.sh SRC OUTDIR EL_MAJOR VERSION...
#   SRC: tests/simnode (or the image build's copy of it: el/ and fakes/)
set -euo pipefail
src=$1 outdir=$2 el_major=$3
shift 3
work=$(mktemp -d "${TMPDIR:-/tmp}/gpunode-nvidia-rpms.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/SOURCES" "$outdir"

rpmb() {  # SPEC [--define ...]
  local spec=$1
  shift
  rpmbuild -bb --quiet --define "_topdir $work" --define "_sourcedir $work/SOURCES" \
    --define "_rpmdir $outdir" --define "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm" \
    --define "dist .el$el_major" "$@" "$src/el/specs/$spec" >/dev/null
}

# the sources: the Debian stand-ins' fakes
cp "$src/fakes/driver/bin/nvidia-smi" "$src/fakes/driver/bin/nvidia-persistenced" \
   "$src/fakes/driver/src/dkms.conf" "$src/fakes/driver/src/fake-build.sh" "$work/SOURCES/"
tar -C "$src/fakes/container-toolkit" --exclude=DEBIAN --exclude=nvidia-docker2 -cf "$work/SOURCES/container-toolkit.tar" \
  --transform 's,^[^/]*/,,' --show-transformed-names $(cd "$src/fakes/container-toolkit" && ls -d */ | grep -v nvidia-docker2)

for version in "$@"; do
  rpmb nvidia-driver.spec --define "driver_version $version"
  for kmod in latest open; do
    rpmb kmod-nvidia-dkms.spec --define "driver_version $version" --define "flavor $kmod"
  done
  rpmb cuda-drivers.spec --define "driver_version $version"
done
rpmb container-toolkit.spec
