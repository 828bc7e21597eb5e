#!/bin/sh
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Make a simulated node an image host, as cloud and vendor images are (the real H100 VM of
# ../shared/fixtures/real-hosts/h100-sxm5-80gb-vm): the driver brought by the image, outside
# any package - the open module 580.159.04 in the fake sysfs/procfs (tests/simnode/specs/
# h100-vm-image.yml, from the reading's pci.txt and proc-driver-nvidia-version.txt), its tools
# under /usr/local/nvidia/bin (the driver fakes' nvidia-smi), libnvidia-ml under
# /usr/local/nvidia/lib64, persistence mode on (smi-driver.csv) - and no kmod.
#
#   image-host.sh REPO SIM_ROOT [--no-systemd]
#     REPO       the repository (or a copy of tests/simnode and scripts) on the node
#     SIM_ROOT   where the fake sys/ and proc/ go (e.g. /opt/gpunode-sim)
#     --no-systemd  also take systemctl, Docker, containerd and the kubelet away (the real host: a
#                   container that does not boot systemd)
# Run as root on the node; idempotent.
set -eu
repo=$1 root=$2 no_systemd=${3:-}
version=580.159.04
python3 "$repo/tests/simnode/make_sysfs.py" "$repo/tests/simnode/specs/h100-vm-image.yml" "$root"
mkdir -p /etc/gpunode-sim /usr/local/nvidia/bin /usr/local/nvidia/lib64 "$root/run"
echo "SIM_ROOT=$root" >/etc/gpunode-sim/driver-fakes.conf
sed "s/@VERSION@/$version/" "$repo/tests/simnode/fakes/driver/bin/nvidia-smi" >/usr/local/nvidia/bin/nvidia-smi
chmod 0755 /usr/local/nvidia/bin/nvidia-smi
: >/usr/local/nvidia/lib64/libnvidia-ml.so.$version
touch "$root/run/nvidia-persistence"
# no kmod: modinfo, lsmod, modprobe, depmod, rmmod, insmod gone (as on the real host)
for tool in modinfo lsmod modprobe depmod rmmod insmod kmod; do
  for dir in /usr/local/sbin /usr/sbin /sbin /usr/bin /bin; do
    [ ! -e "$dir/$tool" ] || rm -f "$dir/$tool"
  done
done
if [ "$no_systemd" = --no-systemd ]; then  # the real host's bare image: no systemd, no engine, no kubelet
  for tool in systemctl docker dockerd containerd containerd-shim-runc-v2 ctr runc kubelet; do
    for dir in /usr/local/bin /usr/bin /bin /usr/sbin; do [ ! -e "$dir/$tool" ] || rm -f "$dir/$tool"; done
  done
fi
echo "image host: driver $version (open) under /usr/local/nvidia, no package, no kmod${no_systemd:+, no systemd}"
