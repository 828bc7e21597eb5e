# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# The guards of scripts/real-host-check.sh (sourced by each): guard NAME REAL LOG ARGS...
# logs "ALLOWED|REFUSED NAME ARGS" to LOG, runs REAL with ARGS when the call is a read,
# else says so on stderr and exits 1. A call is a read only when it matches a rule below;
# anything unknown is refused.

# the first argument that is not an option (the subcommand), or ""
_subcommand() {
  for arg in "$@"; do
    case $arg in -*) ;; *) echo "$arg"; return ;; esac
  done
  echo ""
}

# every argument is one of nvidia-smi's read options (or a value of one)
_smi_read() {
  [ $# -gt 0 ] || return 0
  if [ "$1" = mig ]; then
    shift
    for arg in "$@"; do
      case $arg in -lgip|-lgipp|-lgi|-lci|-lcip|-i|--id|--id=*|[0-9]*|-gi|-ci|-h|--help) ;; *) return 1 ;; esac
    done
    return 0
  fi
  case $1 in
    nvlink) shift; for a in "$@"; do case $a in -s|--status|-c|--capabilities|-i|[0-9]*) ;; *) return 1 ;; esac; done; return 0 ;;
    topo) shift; for a in "$@"; do case $a in -m|--matrix|-i|[0-9]*) ;; *) return 1 ;; esac; done; return 0 ;;
  esac
  for arg in "$@"; do
    case $arg in
      -q|--query|-x|--xml-format|-L|--list-gpus|-d|-i|--id=*|--query-*=*|--format=*|-h|--help|--version) ;;
      -u|--unit|-f|--filename=*) ;;
      [0-9]*|[A-Z]*|GPU-*) ;;  # a value: an index, a -d display type (MEMORY, ECC...), a UUID
      *) return 1 ;;
    esac
  done
  return 0
}

_is_read() {
  name=$1; shift
  sub=$(_subcommand "$@")
  case $name in
    nvidia-smi) _smi_read "$@" ;;
    systemctl)
      case $sub in
        show|status|cat|is-active|is-enabled|is-failed|is-system-running|list-units|list-unit-files|list-timers|list-dependencies|show-environment|get-default) return 0 ;;
        "") case "$*" in --version|*--version*) return 0 ;; esac; return 1 ;;
        *) return 1 ;;
      esac ;;
    modprobe)
      for arg in "$@"; do case $arg in -n|--dry-run|-c|--showconfig|--show-depends|-D|--version|-V) return 0 ;; esac; done
      return 1 ;;
    depmod) for arg in "$@"; do case $arg in -n|--dry-run|--version|-V) return 0 ;; esac; done; return 1 ;;
    apt-get)
      for arg in "$@"; do case $arg in -s|--simulate|--just-print|--dry-run|--recon|--no-act|--version|-v) return 0 ;; esac; done
      return 1 ;;
    apt) case $sub in list|show|policy|search|depends|rdepends) return 0 ;; *) return 1 ;; esac ;;
    dpkg)
      while [ $# -gt 0 ]; do case $1 in --admindir=*|--root=*) shift ;; *) break ;; esac; done
      case ${1:-} in
        -l|--list|-L|--listfiles|-s|--status|-S|--search|-p|--print-avail|--print-architecture) return 0 ;;
        --print-foreign-architectures|--compare-versions|-C|--audit|--get-selections|--version) return 0 ;;
        *) return 1 ;;
      esac ;;
    rpm) case "$1" in -q*|--query|-V|--verify|--version) return 0 ;; *) return 1 ;; esac ;;
    dnf|yum) case $sub in list|info|repoquery|check-update|search|provides|repolist) return 0 ;; *) return 1 ;; esac ;;
    dkms) [ "$sub" = status ] ;;
    mokutil) case "$1" in --sb-state|--list-enrolled|--list-new|--version|-h|--help) return 0 ;; *) return 1 ;; esac ;;
    nvidia-ctk)
      case "$*" in
        --version|-v|"cdi list"*) return 0 ;;
        "cdi generate"*) case "$*" in *--output*) return 1 ;; *) return 0 ;; esac ;;
        *) return 1 ;;
      esac ;;
    ldconfig) case "$1" in -p|--print-cache|--version) return 0 ;; *) return 1 ;; esac ;;
    nvidia-persistenced|nv-fabricmanager)
      case "$1" in --version|-v|-h|--help) return 0 ;; *) return 1 ;; esac ;;
    *) return 1 ;;  # rmmod, insmod, reboot, shutdown, poweroff, halt, update-initramfs, dracut
  esac
}

guard() {
  name=$1 real=$2 log=$3
  shift 3
  if _is_read "$name" "$@"; then
    echo "ALLOWED $name $*" >>"$log"
    exec "$real" "$@"
  fi
  echo "REFUSED $name $*" >>"$log"
  echo "real-host-check: refused $name $* (not a read; nothing was run)" >&2
  exit 1
}
