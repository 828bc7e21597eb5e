#!/bin/sh
# Write stub NVIDIA driver package trees for tests/simnode/aptrepo/build.sh
# into OUTDIR, for one driver VERSION, under the real package names and
# dependencies of Ubuntu's server series, Debian's non-free and NVIDIA's CUDA
# repository (see README.md). Usage: make-packages.sh VERSION OUTDIR
set -eu
[ $# -eq 2 ] || { echo "usage: $0 VERSION OUTDIR" >&2; exit 2; }
version=$1 out=$2 here=$(cd "$(dirname "$0")" && pwd)
echo "$version" | grep -Eq '^[0-9]+\.[0-9]+(\.[0-9]+)?$' || { echo "$0: bad version $version" >&2; exit 2; }
branch=${version%%.*}
deb=$version-0ubuntu1
lib=usr/lib/x86_64-linux-gnu

tree() {  # NAME DESCRIPTION DEPENDS [EXTRA CONTROL LINES]
  dir=$out/$1-$version
  rm -rf "$dir"
  mkdir -p "$dir/DEBIAN" "$dir/usr/share/doc/$1"
  {
    echo "Package: $1"
    echo "Version: $deb"
    echo "Architecture: amd64"
    echo "Maintainer: gpunode tests <gpunode@example.invalid>"
    [ -n "$3" ] && echo "Depends: $3"
    [ -n "${4:-}" ] && printf '%s\n' "$4"
    echo "Description: $2 (gpunode stub of the NVIDIA driver $version)"
  } >"$dir/DEBIAN/control"
  echo "gpunode stub" >"$dir/usr/share/doc/$1/README"
}

# kernel module source, built and installed by the real DKMS: proprietary and
# open flavours (Ubuntu's nvidia-dkms-<b>-server and -server-open)
dkms_tree() {  # FLAVOR
  name=nvidia-dkms-$branch-server
  [ "$1" = open ] && name=$name-open
  tree "$name" "NVIDIA DKMS package ($1 kernel module)" "dkms" \
"Provides: nvidia-dkms-kernel
Conflicts: nvidia-dkms-kernel
Replaces: nvidia-dkms-kernel"
  d=$out/$name-$version
  mkdir -p "$d/usr/src/nvidia-$version"
  sed "s/@VERSION@/$version/g" "$here/src/dkms.conf" >"$d/usr/src/nvidia-$version/dkms.conf"
  cp "$here/src/fake-build.sh" "$d/usr/src/nvidia-$version/fake-build.sh"
  echo "$version" >"$d/usr/src/nvidia-$version/version"
  echo "$1" >"$d/usr/src/nvidia-$version/flavor"
  cat >"$d/DEBIAN/postinst" <<POSTINST
#!/bin/sh
set -e
if [ "\$1" = configure ]; then
  # a test may make the postinst wait here, as a node that crashes mid-install would stop
  if [ -e /etc/gpunode-sim/hang-postinst ]; then
    touch /run/gpunode-postinst-waiting
    while [ -e /etc/gpunode-sim/hang-postinst ]; do sleep 1; done
    rm -f /run/gpunode-postinst-waiting
  fi
  # as Debian's dkms postinst (dkms_common.postinst): registered always, built for the running
  # kernel when its headers are there, else skipped with its message (a Packer VM baking another kernel)
  kernel=\$(uname -r)
  if [ -d "/lib/modules/\$kernel/build" ]; then
    dkms install nvidia/$version -k "\$kernel"
  else
    [ -e /var/lib/dkms/nvidia/$version ] || dkms add nvidia/$version
    echo "Module build for kernel \$kernel was skipped since the kernel headers for this kernel do not seem to be installed."
  fi
fi
POSTINST
  cat >"$d/DEBIAN/prerm" <<PRERM
#!/bin/sh
set -e
dkms remove nvidia/$version --all >/dev/null 2>&1 || true
PRERM
}
dkms_tree proprietary
dkms_tree open

tree "libnvidia-compute-$branch-server" "NVIDIA libcompute package" "" \
"Provides: libnvidia-compute
Conflicts: libnvidia-compute
Replaces: libnvidia-compute"
d=$out/libnvidia-compute-$branch-server-$version
mkdir -p "$d/$lib"
: >"$d/$lib/libnvidia-ml.so.$version"
ln -s "libnvidia-ml.so.$version" "$d/$lib/libnvidia-ml.so.1"

tree "nvidia-utils-$branch-server" "NVIDIA driver support binaries" "libnvidia-compute-$branch-server (= $deb)" \
"Provides: nvidia-utils
Conflicts: nvidia-utils
Replaces: nvidia-utils"
d=$out/nvidia-utils-$branch-server-$version
mkdir -p "$d/usr/bin"
sed "s/@VERSION@/$version/g" "$here/bin/nvidia-smi" >"$d/usr/bin/nvidia-smi"
chmod 0755 "$d/usr/bin/nvidia-smi"

tree "nvidia-compute-utils-$branch-server" "NVIDIA compute utilities" "libnvidia-compute-$branch-server (= $deb), adduser" \
"Provides: nvidia-compute-utils
Conflicts: nvidia-compute-utils
Replaces: nvidia-compute-utils"
d=$out/nvidia-compute-utils-$branch-server-$version
mkdir -p "$d/usr/bin" "$d/lib/systemd/system"
sed "s/@VERSION@/$version/g" "$here/bin/nvidia-persistenced" >"$d/usr/bin/nvidia-persistenced"
chmod 0755 "$d/usr/bin/nvidia-persistenced"
cat >"$d/lib/systemd/system/nvidia-persistenced.service" <<'UNIT'
[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target
StopWhenUnneeded=false

[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced

[Install]
WantedBy=multi-user.target
UNIT
cat >"$d/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  adduser --system --group --no-create-home --home /nonexistent nvidia-persistenced >/dev/null 2>&1 || true
fi
POSTINST

# Ubuntu's metapackages (restricted): headless, headless-open, driver
common="nvidia-compute-utils-$branch-server (= $deb), libnvidia-compute-$branch-server (= $deb)"
tree "nvidia-headless-$branch-server" "NVIDIA headless metapackage" "nvidia-dkms-$branch-server (= $deb), $common"
tree "nvidia-headless-$branch-server-open" "NVIDIA headless metapackage (open kernel module)" \
  "nvidia-dkms-$branch-server-open (= $deb), $common"
tree "nvidia-driver-$branch-server" "NVIDIA driver metapackage" "nvidia-headless-$branch-server (= $deb), nvidia-utils-$branch-server (= $deb)"
# Debian's non-free names over the same stubs: nvidia-tesla-<b>-driver (and nvidia-driver
# for 535, bookworm's and bullseye's branch), the open module as a separate package
any_dkms="nvidia-dkms-$branch-server (= $deb) | nvidia-dkms-$branch-server-open (= $deb)"
debian_driver="$any_dkms, $common, nvidia-utils-$branch-server (= $deb)"
tree "nvidia-tesla-$branch-driver" "NVIDIA Tesla driver metapackage (Debian)" "$debian_driver"
tree "nvidia-tesla-$branch-open-kernel-dkms" "NVIDIA open kernel module DKMS source (Debian, Tesla)" \
  "nvidia-dkms-$branch-server-open (= $deb)"
if [ "$branch" = 535 ]; then
  tree nvidia-driver "NVIDIA metapackage (Debian)" "$debian_driver"
  tree nvidia-open-kernel-dkms "NVIDIA open kernel module DKMS source (Debian)" "nvidia-dkms-$branch-server-open (= $deb)"
fi
# NVIDIA's CUDA repository: cuda-drivers-<b> / nvidia-open-<b> up to 580; from 590 one set
# of names (cuda-drivers, nvidia-open) whose branch or version a pinning package chooses
if [ "$branch" -lt 590 ]; then
  tree "cuda-drivers-$branch" "CUDA driver metapackage (NVIDIA)" "nvidia-headless-$branch-server (= $deb), nvidia-utils-$branch-server (= $deb)"
  tree "nvidia-open-$branch" "NVIDIA open driver metapackage (NVIDIA)" "nvidia-headless-$branch-server-open (= $deb), nvidia-utils-$branch-server (= $deb)"
else
  tree cuda-drivers "CUDA driver metapackage (NVIDIA)" "nvidia-headless-$branch-server (= $deb), nvidia-utils-$branch-server (= $deb)"
  tree nvidia-open "NVIDIA open driver metapackage (NVIDIA)" "nvidia-headless-$branch-server-open (= $deb), nvidia-utils-$branch-server (= $deb)"
  for pin in "$branch" "$version"; do
    tree "nvidia-driver-pinning-$pin" "NVIDIA driver pinning: $pin (NVIDIA)" "" \
"Provides: nvidia-driver-pinning
Conflicts: nvidia-driver-pinning
Replaces: nvidia-driver-pinning"
    d=$out/nvidia-driver-pinning-$pin-$version
    mkdir -p "$d/etc/apt/preferences.d"
    printf 'Package: cuda-drivers nvidia-open nvidia-fabricmanager\nPin: version %s.*\nPin-Priority: 1000\n' \
      "$pin" >"$d/etc/apt/preferences.d/nvidia-driver-pinning"
  done
fi

# fabric manager: refuses to start unless the loaded driver is exactly its version;
# nvidia-fabricmanager-<b> (Ubuntu, CUDA before 580), nvidia-fabricmanager (CUDA from 580)
fm=nvidia-fabricmanager-$branch
[ "$branch" -ge 580 ] && fm=nvidia-fabricmanager
tree "$fm" "Fabric Manager for NVSwitch based systems" ""
d=$out/$fm-$version
mkdir -p "$d/usr/bin" "$d/lib/systemd/system"
cat >"$d/usr/bin/nv-fabricmanager" <<FM
#!/bin/sh
# gpunode stub of nv-fabricmanager $version: like the real one, it exits when
# the loaded driver is not exactly its version; on an NVLink5 system (a PCI
# function whose VPD holds SW_MNG) as nvidia-fabricmanager-start.sh does when
# ib_umad is not loaded or NVLSM is not installed (notes/fabric.md section 1);
# otherwise it stays up.
. /etc/gpunode-sim/driver-fakes.conf
loaded=\$(cat "\$SIM_ROOT/sys/module/nvidia/version" 2>/dev/null || echo none)
if [ "\$loaded" != "$version" ]; then
  echo "fabric manager $version: driver version mismatch (loaded: \$loaded)" >&2
  exit 1
fi
if grep -qs SW_MNG "\$SIM_ROOT"/sys/bus/pci/devices/*/vpd; then
  echo "Detected NVL5+ system"
  if ! grep -q "^ib_umad " "\$SIM_ROOT/proc/modules"; then
    echo 'Kernel module "ib_umad" has not been loaded, fabric manager cannot be started' >&2
    exit 1
  fi
  [ -x /opt/nvidia/nvlsm/sbin/nvlsm ] || { echo "/opt/nvidia/nvlsm/sbin/nvlsm does not exist" >&2; exit 1; }
fi
exec sleep infinity
FM
chmod 0755 "$d/usr/bin/nv-fabricmanager"
cat >"$d/lib/systemd/system/nvidia-fabricmanager.service" <<'UNIT'
[Unit]
Description=NVIDIA fabric manager service

[Service]
ExecStart=/usr/bin/nv-fabricmanager
Restart=no

[Install]
WantedBy=multi-user.target
UNIT

# the NVLink fabric's packages at the driver's version (one name from 580, <name>-<b> before:
# NVIDIA gpu-driver-container install.sh): NSCQ (a library stub), NVSDM (from 570) and IMEX
# (from 550: nvidia-imex runs while the loaded driver is exactly its version and the nodes file
# its config.cfg names is there; config.cfg a conffile, nvidia-imex.service)
suffix=-$branch
[ "$branch" -ge 580 ] && suffix=
tree "libnvidia-nscq$suffix" "NVSwitch configuration and query library" ""
mkdir -p "$out/libnvidia-nscq$suffix-$version/$lib"
: >"$out/libnvidia-nscq$suffix-$version/$lib/libnvidia-nscq.so.$version"
[ "$branch" -ge 570 ] && tree "libnvsdm$suffix" "NVIDIA Switch Device Management library" ""
imex=nvidia-imex$suffix
tree "$imex" "NVIDIA Internode Memory Exchange service" ""
d=$out/$imex-$version
mkdir -p "$d/usr/bin" "$d/lib/systemd/system" "$d/etc/nvidia-imex"
printf 'SERVER_PORT=50000\nIMEX_CMD_ENABLED=0\nIMEX_CMD_PORT=50005\nIMEX_NODE_CONFIG_FILE=/etc/nvidia-imex/nodes_config.cfg\n' \
  >"$d/etc/nvidia-imex/config.cfg"
echo /etc/nvidia-imex/config.cfg >"$d/DEBIAN/conffiles"
cat >"$d/usr/bin/nvidia-imex" <<IMEX
#!/bin/sh
# gpunode stub of nvidia-imex $version -c CONFIG: exits when the loaded driver is not exactly its
# version or the nodes file CONFIG names is missing or empty; otherwise it stays up.
. /etc/gpunode-sim/driver-fakes.conf
loaded=\$(cat "\$SIM_ROOT/sys/module/nvidia/version" 2>/dev/null || echo none)
[ "\$loaded" = "$version" ] || { echo "IMEX $version: driver version mismatch (loaded: \$loaded)" >&2; exit 1; }
nodes=\$(sed -n 's/^IMEX_NODE_CONFIG_FILE=//p' "\$2")
[ -s "\$nodes" ] || { echo "IMEX $version: no nodes in \$nodes" >&2; exit 1; }
exec sleep infinity
IMEX
chmod 0755 "$d/usr/bin/nvidia-imex"
cat >"$d/lib/systemd/system/nvidia-imex.service" <<'UNIT'
[Unit]
Description=NVIDIA IMEX service

[Service]
ExecStart=/usr/bin/nvidia-imex -c /etc/nvidia-imex/config.cfg
Restart=no

[Install]
WantedBy=multi-user.target
UNIT

# NVLSM and infiniband-diags: their own versions, whatever the driver's (one tree each)
for pkg in "nvlsm 2025.06.5-1 NVLink Subnet Manager" "infiniband-diags 50.0-2 InfiniBand diagnostic programs"; do
  set -- $pkg
  d=$out/$1
  rm -rf "$d"
  mkdir -p "$d/DEBIAN"
  printf 'Package: %s\nVersion: %s\nArchitecture: amd64\nMaintainer: gpunode tests <gpunode@example.invalid>\nDescription: %s (gpunode stub)\n' \
    "$1" "$2" "$(shift 2; echo "$*")" >"$d/DEBIAN/control"
done
mkdir -p "$out/nvlsm/opt/nvidia/nvlsm/sbin" "$out/infiniband-diags/usr/sbin"
printf '#!/bin/sh\nexec sleep infinity\n' >"$out/nvlsm/opt/nvidia/nvlsm/sbin/nvlsm"
printf '#!/bin/sh\necho "gpunode stub of ibstat"\n' >"$out/infiniband-diags/usr/sbin/ibstat"
chmod 0755 "$out/nvlsm/opt/nvidia/nvlsm/sbin/nvlsm" "$out/infiniband-diags/usr/sbin/ibstat"
