# gpunode simulated node: body of the fake NVIDIA-Linux-x86_64-<version>.run
# (make-runfile.sh puts VERSION and the payload functions in front). Accepts
# the real installer's options (unknown ones fail as the real one does),
# records each call in /var/log/gpunode-fake-nvidia-installer.calls and
# refuses, like the real one, when a nvidia module is loaded or the kernel
# headers are missing. Installs: nvidia-smi, nvidia-persistenced,
# nvidia-uninstall, libnvidia-ml.so.<version> (+ libGLX_nvidia unless
# --no-opengl-files) and the module source in /usr/src/nvidia-<version>,
# registered and built with the real DKMS (--dkms) or built straight into
# /lib/modules/<kernel>/kernel/drivers/video. A previous install is removed
# first with its nvidia-uninstall. The module is not left loaded.
set -eu
. /etc/gpunode-sim/driver-fakes.conf
calls=/var/log/gpunode-fake-nvidia-installer.calls
echo "$VERSION $*" >>"$calls"
dkms=0 opengl=1 flavor=proprietary signkey= signcert= sign=0
while [ $# -gt 0 ]; do
  case $1 in
    -s|--silent|-a|--accept-license|-q|--no-questions|--ui=none|-X|--no-x-check|--no-nouveau-check|\
    --disable-nouveau|--no-drm|--no-install-libglvnd|--install-libglvnd|--no-rpms|--no-backup|\
    --no-distro-scripts|--skip-module-unload|--skip-module-load|--no-cc-version-check|\
    --no-check-for-alternate-installs|--no-systemd|--no-peermem) ;;
    --dkms) dkms=1 ;;
    --no-dkms) dkms=0 ;;
    --no-opengl-files) opengl=0 ;;
    --kernel-module-type=open|-M=open) flavor=open ;;
    --kernel-module-type=proprietary|-M=proprietary) flavor=proprietary ;;
    --kernel-module-build-directory=kernel-open|-m=kernel-open) flavor=open ;;
    --kernel-module-build-directory=kernel|-m=kernel) flavor=proprietary ;;
    --module-signing-secret-key=*) signkey=${1#*=} ;;
    --module-signing-public-key=*) signcert=${1#*=} ;;
    -v|--version) echo "nvidia-installer:  version $VERSION"; exit 0 ;;
    *) echo "ERROR: Unrecognized option: '$1'" >&2; exit 1 ;;
  esac
  shift
done
log() { echo "$1" >>/var/log/nvidia-installer.log; }
: >/var/log/nvidia-installer.log
log "nvidia-installer log file '/var/log/nvidia-installer.log'"
log "creation time: $(date)"
log "installer version: $VERSION (gpunode fake)"
fail() { log "ERROR: $1"; echo "ERROR: $1" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "nvidia-installer must be run as root"
kernel=$(uname -r)
if grep -q '^nvidia' "$SIM_ROOT/proc/modules" 2>/dev/null; then
  fail "An NVIDIA kernel module 'nvidia' appears to be already loaded in your kernel.  This may be because it is in use (for example, by an X server, a CUDA program, or the NVIDIA Persistence Daemon), but this may also happen if your kernel was configured without support for module unloading.  Please be sure to exit any programs that may be using the GPU(s) before attempting to upgrade your driver."
fi
[ -d "/lib/modules/$kernel/build/include" ] || fail "Unable to find the kernel source tree for the currently running kernel.  Please make sure you have installed the kernel source files for your kernel and that they are properly configured."
if [ -n "$signkey$signcert" ]; then
  [ -r "$signkey" ] && [ -r "$signcert" ] || fail "Unable to read the module signing key pair '$signkey' / '$signcert'"
  sign=1
fi
if [ -x /usr/bin/nvidia-uninstall ]; then
  log "Uninstalling the previous installation with /usr/bin/nvidia-uninstall"
  /usr/bin/nvidia-uninstall --silent >>/var/log/nvidia-installer.log 2>&1
fi
lib=/usr/lib/x86_64-linux-gnu
src=/usr/src/nvidia-$VERSION
mkdir -p "$lib" "$src" /usr/bin
payload_nvidia_smi >/usr/bin/nvidia-smi
payload_nvidia_persistenced >/usr/bin/nvidia-persistenced
payload_fake_build >"$src/fake-build.sh"
payload_dkms_conf >"$src/dkms.conf"
echo "$VERSION" >"$src/version"
echo "$flavor" >"$src/flavor"
: >"$lib/libnvidia-ml.so.$VERSION"
ln -sf "libnvidia-ml.so.$VERSION" "$lib/libnvidia-ml.so.1"
files="/usr/bin/nvidia-smi /usr/bin/nvidia-persistenced $lib/libnvidia-ml.so.$VERSION $lib/libnvidia-ml.so.1"
if [ "$opengl" = 1 ]; then
  : >"$lib/libGLX_nvidia.so.$VERSION"
  files="$files $lib/libGLX_nvidia.so.$VERSION"
fi
chmod 0755 /usr/bin/nvidia-smi /usr/bin/nvidia-persistenced
if [ "$dkms" = 1 ]; then
  log "Installing the kernel module with DKMS"
  dkms install "nvidia/$VERSION" -k "$kernel" >>/var/log/nvidia-installer.log 2>&1 || fail "Failed to install the kernel module through DKMS."
  undo="dkms remove nvidia/$VERSION --all"
else
  build=$(mktemp -d)
  cp "$src"/* "$build"/
  (cd "$build" && sh ./fake-build.sh "$kernel")
  mkdir -p "/lib/modules/$kernel/kernel/drivers/video"
  for ko in "$build"/*.ko; do
    cp "$ko" "/lib/modules/$kernel/kernel/drivers/video/"
    files="$files /lib/modules/$kernel/kernel/drivers/video/$(basename "$ko")"
  done
  rm -rf "$build"
  depmod "$kernel"
  undo="depmod $kernel"
fi
[ "$sign" = 1 ] && log "Signed the kernel module with $signkey"
cat >/usr/bin/nvidia-uninstall <<UNINSTALL
#!/bin/sh
# nvidia-uninstall of the gpunode fake driver $VERSION
$undo >/dev/null 2>&1 || true
rm -f $files
rm -rf $src
rm -f /usr/bin/nvidia-uninstall
UNINSTALL
chmod 0755 /usr/bin/nvidia-uninstall
log "Installation of the NVIDIA Accelerated Graphics Driver for Linux-x86_64 (version: $VERSION) is now complete."
