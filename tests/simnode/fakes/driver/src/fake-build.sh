#!/bin/sh
# gpunode simulated node: the "build" of the fake NVIDIA kernel module, run by
# the real DKMS (MAKE in dkms.conf) with the target kernel. It compiles, with
# the real gcc, an object whose .modinfo section says what a real nvidia.ko
# says (version, license by flavor, vermagic of the kernel), so the real
# modinfo, depmod and dkms handle it. It is never loaded into a kernel.
set -eu
kernel=$1
version=$(cat version)
case $(cat flavor) in open) license="Dual MIT/GPL" ;; *) license="NVIDIA" ;; esac
for name in nvidia nvidia-uvm nvidia-modeset nvidia-drm nvidia-peermem; do
  cat >"$name.c" <<SRC
__attribute__((section(".modinfo"), used)) static const char v[] = "version=$version";
__attribute__((section(".modinfo"), used)) static const char l[] = "license=$license";
__attribute__((section(".modinfo"), used)) static const char n[] = "name=$(echo $name | tr - _)";
__attribute__((section(".modinfo"), used)) static const char m[] = "vermagic=$kernel SMP preempt mod_unload modversions ";
SRC
  gcc -c -o "$name.ko" "$name.c"
done
