#!/usr/bin/env bash
# Build the driver fakes once for every simulated node on this machine, into
# CACHE (default: .cache/driver-fakes in the repository):
#
#   CACHE/current -> build-<key>      the newest build (a relative link)
#   CACHE/build-<key>/archive/        a signed flat apt repository standing in for the
#                                     distribution's archive: linux-headers-<kernel> (stub)
#   CACHE/build-<key>/driver/         a signed flat apt repository standing in for NVIDIA's
#                                     and the distributions' driver packages (make-packages.sh)
#                                     for every version in VERSIONS, Ubuntu's signed modules
#                                     (make-signed-packages.sh: SIGNED_VERSION, for the running
#                                     kernel and the next one, whose name is in signed-next-kernel,
#                                     with a linux-image stub of it), the fake installers
#                                     NVIDIA-Linux-x86_64-<version>.run with <name>.sha256,
#                                     and gpunode-test-archive.asc (the key of both)
#
# <key> hashes what the build depends on (these scripts, the sources under src/ and
# bin/, aptrepo/build.sh, the versions, the running kernel): an unchanged key
# builds nothing. Nodes get the cache by a bind mount (molecule platforms) or one
# archive (prepare-node.yml), never file by file. A lock serialises concurrent
# builds; a new build lands beside the old one and `current` moves atomically, so
# nodes that have the cache mounted never see a half-built repository.
#
# Usage: tests/simnode/fakes/driver/build-cache.sh [CACHE]
# Prints "driver fakes: built build-<key>" or "driver fakes: up to date build-<key>".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
cache=${1:-$root/.cache/driver-fakes}
# every version a scenario, the demo or the benchmarks use
versions=(535.129.03 570.124.06 570.133.20 590.48.01 595.71.05)
# the driver of Ubuntu's prebuilt signed modules (molecule/driver-signed)
signed_version=570.133.20
kernel=$(uname -r)
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)

exec 9>"$cache/.lock"
flock 9

key=$( (cd "$here" && cat build-cache.sh make-packages.sh make-signed-packages.sh make-runfile.sh runfile.sh src/* bin/*
        cat "$root/tests/simnode/aptrepo/build.sh"; echo "${versions[*]} $kernel") | sha256sum | cut -c1-16)
build=build-$key
if [[ -f $cache/$build/.complete ]]; then
  ln -sfn "$build" "$cache/current.new" && mv -T "$cache/current.new" "$cache/current"
  echo "driver fakes: up to date $build"
  exit 0
fi

work=$cache/$build.tmp
rm -rf "$work"
mkdir -p "$work/trees/archive/linux-headers-$kernel/DEBIAN" "$work/trees/driver"
headers=$work/trees/archive/linux-headers-$kernel
mkdir -p "$headers/lib/modules/$kernel/build/include"
cat >"$headers/DEBIAN/control" <<CONTROL
Package: linux-headers-$kernel
Version: 1.0-1
Architecture: all
Maintainer: gpunode tests <gpunode@example.invalid>
Description: gpunode stub: the build/include directory DKMS looks for, no headers
CONTROL
# Ubuntu's linux-modules-extra-<kernel> (mlx5_ib and ib_umad on the cloud kernels): objects whose
# .modinfo the real modinfo and depmod read, as src/fake-build.sh makes nvidia's; never loaded
extra=$work/trees/archive/linux-modules-extra-$kernel
mkdir -p "$extra/DEBIAN" "$extra/lib/modules/$kernel/kernel/drivers/infiniband"
printf 'Package: linux-modules-extra-%s\nVersion: 1.0-1\nArchitecture: all\nMaintainer: gpunode tests <gpunode@example.invalid>\nDescription: gpunode stub: mlx5_ib and ib_umad for the kernel\n' \
  "$kernel" >"$extra/DEBIAN/control"
printf '#!/bin/sh\nset -e\n[ "$1" = configure ] && depmod -a %s || true\n' "$kernel" >"$extra/DEBIAN/postinst"
for module in mlx5_ib ib_umad; do
  printf '__attribute__((section(".modinfo"), used)) static const char n[] = "name=%s";\n__attribute__((section(".modinfo"), used)) static const char m[] = "vermagic=%s SMP preempt mod_unload modversions ";\n__attribute__((section(".modinfo"), used)) static const char l[] = "license=Dual BSD/GPL";\n' \
    "$module" "$kernel" >"$work/$module.c"
  gcc -c -o "$extra/lib/modules/$kernel/kernel/drivers/infiniband/$module.ko" "$work/$module.c"
done
for version in "${versions[@]}"; do
  "$here/make-packages.sh" "$version" "$work/trees/driver"
done
next_kernel=$("$here/make-signed-packages.sh" "$signed_version" "$kernel" "$work/trees/driver")
# one throw-away key signs both repositories (the second build reuses the first's)
"$root/tests/simnode/aptrepo/build.sh" "$work/archive" "$work/trees/archive" >/dev/null
cp -a "$work/archive/.gnupg" "$work/driver.gnupg"
mkdir -p "$work/driver" && mv "$work/driver.gnupg" "$work/driver/.gnupg"
"$root/tests/simnode/aptrepo/build.sh" "$work/driver" "$work/trees/driver" >/dev/null
for version in "${versions[@]}"; do
  run=$("$here/make-runfile.sh" "$version" "$work/driver")
  sha256sum "$run" | cut -d' ' -f1 >"$run.sha256"
done
echo "$next_kernel" >"$work/driver/signed-next-kernel"
rm -rf "$work/trees" "$work/archive/.gnupg" "$work/driver/.gnupg"
touch "$work/.complete"
mv -T "$work" "$cache/$build"
ln -sfn "$build" "$cache/current.new" && mv -T "$cache/current.new" "$cache/current"
# older builds go once nothing points at them
find "$cache" -maxdepth 1 -name 'build-*' ! -name "$build" -exec rm -rf {} +
echo "driver fakes: built $build"
