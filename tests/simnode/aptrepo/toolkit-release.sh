#!/usr/bin/env bash
# Write the stub container toolkit packages (tests/simnode/fakes/container-toolkit, nvidia-docker2
# aside) as another release: OUT/<package>/ trees for build.sh, each at VERSION (Debian revision
# included), their dependencies on each other and nvidia-ctk's --version with it. From 1.18 the
# -base package carries the CDI refresh units and enables them (tests/simnode/fakes/cdi-refresh).
#
# Usage: tests/simnode/aptrepo/toolkit-release.sh OUT VERSION     (VERSION: 1.18.0-1)
set -euo pipefail
(($# == 2)) || { echo "usage: $0 OUT VERSION" >&2; exit 2; }
out=$1 version=$2
fakes=$(cd "$(dirname "$0")/../fakes" && pwd)
from=$(sed -n 's/^Version: //p' "$fakes/container-toolkit/nvidia-container-toolkit/DEBIAN/control")
rm -rf "$out"
mkdir -p "$out"
for tree in nvidia-container-toolkit nvidia-container-toolkit-base libnvidia-container-tools libnvidia-container1; do
  cp -a "$fakes/container-toolkit/$tree" "$out/$tree"
  sed -i "s/$from/$version/g" "$out/$tree/DEBIAN/control"
done
sed -i "s/version ${from%-*} /version ${version%-*} /" "$out/nvidia-container-toolkit-base/usr/bin/nvidia-ctk"
upstream=${version%-*}
if [ "$(printf '%s\n' 1.18.0 "$upstream" | sort -V | head -n1)" = 1.18.0 ]; then
  units=$out/nvidia-container-toolkit-base/usr/lib/systemd/system
  mkdir -p "$units"
  cp "$fakes/cdi-refresh/nvidia-cdi-refresh.path" "$fakes/cdi-refresh/nvidia-cdi-refresh.service" "$units/"
  install -m 0755 "$fakes/cdi-refresh/postinst" "$out/nvidia-container-toolkit-base/DEBIAN/postinst"
fi
echo "toolkit-release: $version in $out"
