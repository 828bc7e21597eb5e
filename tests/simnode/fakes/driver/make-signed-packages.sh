#!/bin/sh
# Write stub package trees of Ubuntu's prebuilt, Canonical-signed NVIDIA kernel
# modules (src:linux-restricted-modules) and the userspace without DKMS for
# tests/simnode/aptrepo/build.sh into OUTDIR, for one driver VERSION and the
# running KERNEL, under Ubuntu's names and versions:
#
#   nvidia-kernel-common-<b>-server           <version>-0ubuntu1
#   nvidia-headless-no-dkms-<b>-server[-open] <version>-0ubuntu1 (= kernel-common, compute-utils,
#                                             libnvidia-compute; those come from make-packages.sh)
#   linux-modules-nvidia-<b>-server[-open]-<kernel>   versioned as the kernel (6.8.0-60.1+1);
#       Depends: nvidia-kernel-common-<b>-server (<= <version>-1), (>= <version>), as Ubuntu's;
#       ships nvidia*.ko under /lib/modules/<kernel>/kernel/nvidia-<b>srv/ (objects whose .modinfo
#       says version, license and vermagic, like src/fake-build.sh's) and runs depmod
#   linux-modules-nvidia-<b>-server[-open]-<flavour>  the flavour's metapackage (running kernel)
#   ... the same for the NEXT kernel (the running one's ABI number, or its last
#       version number, plus one), and linux-image-<next kernel>: a stub kernel that
#       only creates /lib/modules/<next kernel>/ and /boot/vmlinuz-<next kernel>.
#
# Unlike Ubuntu's, the modules packages do not depend on linux-image-<kernel> (the
# container's running kernel has no package), and the linux-objects/-signatures split
# is folded into the one package. Usage: make-signed-packages.sh VERSION KERNEL OUTDIR
set -eu
[ $# -eq 3 ] || { echo "usage: $0 VERSION KERNEL OUTDIR" >&2; exit 2; }
version=$1 kernel=$2 out=$3
echo "$version" | grep -Eq '^[0-9]+\.[0-9]+(\.[0-9]+)?$' || { echo "$0: bad version $version" >&2; exit 2; }
branch=${version%%.*}
deb=$version-0ubuntu1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# <upstream>-<abinum>-<flavour> (Ubuntu) or <upstream>-<flavour> (any other kernel)
if echo "$kernel" | grep -Eq '^[0-9]+\.[0-9]+\.[0-9]+-[0-9]+-[a-z]'; then
  abi=$(echo "$kernel" | cut -d- -f1-2)
  flavour=$(echo "$kernel" | cut -d- -f3-)
  next="${abi%-*}-$((${abi##*-} + 1))-$flavour"
else
  abi=${kernel%%-*}
  flavour=${kernel#*-}
  next="${abi%.*}.$((${abi##*.} + 1))-$flavour"
fi

kversion() {  # KERNEL -> the Debian version its packages carry
  case $1 in
    *.*.*-[0-9]*-*) echo "$(echo "$1" | cut -d- -f1-2).1+1" ;;
    *) echo "${1%%-*}-1+1" ;;
  esac
}

tree() {  # NAME VERSION DESCRIPTION DEPENDS
  dir=$out/$1-$2
  rm -rf "$dir"
  mkdir -p "$dir/DEBIAN" "$dir/usr/share/doc/$1"
  {
    echo "Package: $1"
    echo "Version: $2"
    echo "Architecture: amd64"
    echo "Maintainer: gpunode tests <gpunode@example.invalid>"
    [ -n "$4" ] && echo "Depends: $4"
    echo "Description: $3 (gpunode stub)"
  } >"$dir/DEBIAN/control"
  echo "gpunode stub" >"$dir/usr/share/doc/$1/README"
}

tree "nvidia-kernel-common-$branch-server" "$deb" "Shared files used with the kernel module" ""
common="nvidia-kernel-common-$branch-server (= $deb), nvidia-compute-utils-$branch-server (= $deb), libnvidia-compute-$branch-server (= $deb)"
tree "nvidia-headless-no-dkms-$branch-server" "$deb" "NVIDIA headless metapackage - no DKMS" "$common"
tree "nvidia-headless-no-dkms-$branch-server-open" "$deb" "NVIDIA headless metapackage - no DKMS (open kernel module)" "$common"

modules() {  # FLAVOR KERNEL: the prebuilt, signed modules of one kernel
  name=linux-modules-nvidia-$branch-server
  [ "$1" = open ] && name=$name-open
  kv=$(kversion "$2")
  tree "$name-$2" "$kv" "Linux kernel nvidia modules for version $2 (signed)" \
    "nvidia-kernel-common-$branch-server (<= $version-1), nvidia-kernel-common-$branch-server (>= $version)"
  d=$out/$name-$2-$kv
  mkdir -p "$d/lib/modules/$2/kernel/nvidia-${branch}srv"
  case $1 in open) license="Dual MIT/GPL" ;; *) license="NVIDIA" ;; esac
  for mod in nvidia nvidia-uvm nvidia-modeset nvidia-drm; do
    cat >"$work/$mod.c" <<SRC
__attribute__((section(".modinfo"), used)) static const char v[] = "version=$version";
__attribute__((section(".modinfo"), used)) static const char l[] = "license=$license";
__attribute__((section(".modinfo"), used)) static const char n[] = "name=$(echo $mod | tr - _)";
__attribute__((section(".modinfo"), used)) static const char s[] = "signer=Canonical Ltd. Kernel Module Signing";
__attribute__((section(".modinfo"), used)) static const char m[] = "vermagic=$2 SMP preempt mod_unload modversions ";
SRC
    gcc -c -o "$d/lib/modules/$2/kernel/nvidia-${branch}srv/$mod.ko" "$work/$mod.c"
  done
  for script in postinst postrm; do
    printf '#!/bin/sh\nset -e\n[ -d /lib/modules/%s ] && depmod -a %s || true\n' "$2" "$2" >"$d/DEBIAN/$script"
  done
  [ "$2" = "$kernel" ] && tree "$name-$flavour" "$kv" "Linux kernel nvidia modules for the $flavour flavour" \
    "$name-$2 (= $kv)"
  return 0
}
for flavor in open proprietary; do
  modules "$flavor" "$kernel"
  modules "$flavor" "$next"
done

tree "linux-image-$next" "$(kversion "$next")" "Linux kernel image for version $next" ""
d=$out/linux-image-$next-$(kversion "$next")
mkdir -p "$d/boot" "$d/lib/modules/$next/kernel"
: >"$d/boot/vmlinuz-$next"
: >"$d/lib/modules/$next/modules.builtin"
: >"$d/lib/modules/$next/modules.order"
echo "$next"
