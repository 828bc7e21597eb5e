#!/bin/sh
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Try gpunode read-only on the machine this runs on: site.yml --check --diff against
# localhost (connection local), nvidia_driver_method: preinstalled, with a guard in front
# of every command that changes a GPU or the host, and a snapshot before and after.
#
#   scripts/real-host-check.sh [options] [-- ansible-playbook options]
#     --python-path DIR   put DIR (installed wheels: ansible-core and its dependencies) on PYTHONPATH
#     --wheels DIR        unpack DIR/*.whl (cp312 manylinux for Ubuntu 24.04) into this run's folder first
#     --collections DIR   ANSIBLE_COLLECTIONS_PATH (kubernetes.core, community.general...)
#     --python PATH       the Python that runs Ansible and its modules (default: the first of
#                         /usr/bin/python3 and python3 on PATH that has Jinja2 and PyYAML)
#     --mig PROFILE=N     also plan MIG on every GPU: N instances of PROFILE (e.g. 1g.10gb=7)
#     --sim-root DIR      read sysfs/procfs under DIR/sys, DIR/proc (a simulated node)
#     --keep              keep the work folder (guards, logs, snapshots)
#     --work-dir DIR      where the work folder goes (default /var/tmp; its file system must allow exec)
#
# Guards (a folder first on PATH): nvidia-smi (reads only: -q, -L, --query-*, mig -lgip,
# -lgipp, -lgi, -lci, -lcip, nvlink -s, topo -m...), modprobe, rmmod, insmod, depmod,
# systemctl (show, status, is-*, list-*, cat only), apt, apt-get (simulations only), dpkg
# (queries only), dnf, yum, rpm, reboot, shutdown, poweroff, halt, nvidia-persistenced,
# nv-fabricmanager, update-initramfs, dracut, dkms (status), mokutil, nvidia-ctk, ldconfig.
# Each logs its call and refuses (exit 1) anything that is not a read; a guard exists only
# for a command the host has. Writes no command makes are caught by a snapshot of /etc,
# /usr/local, /var/lib/dpkg, the dpkg database, the running services and the GPUs' modes
# (tests/molecule/node-state.sh) before and after. Exit 1 when the run failed, a write was
# attempted or anything changed. Needs root for a true reading (the modules read as root).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
python=""
keep=0 mig="" sim_root="" wheels="" collections="" work_parent=/var/tmp
while [ $# -gt 0 ]; do
  case $1 in
    --python-path) PYTHONPATH="$2${PYTHONPATH:+:$PYTHONPATH}"; export PYTHONPATH; shift 2 ;;
    --wheels) wheels=$(cd "$2" && pwd); shift 2 ;;
    --collections) collections=$(cd "$2" && pwd); shift 2 ;;
    --python) python=$2; shift 2 ;;
    --mig) mig=$2; shift 2 ;;
    --sim-root) sim_root=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --work-dir) work_parent=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '6,29p' "$0"; exit 0 ;;
    *) echo "real-host-check: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
if [ -z "$python" ]; then  # Ansible needs Jinja2 and PyYAML (images often have them in a venv only)
  for candidate in /usr/bin/python3 "$(command -v python3 || true)"; do
    [ -x "$candidate" ] && "$candidate" -c 'import jinja2, yaml' 2>/dev/null && { python=$candidate; break; }
  done
  [ -n "$python" ] || { echo "real-host-check: no python3 with Jinja2 and PyYAML (--python)" >&2; exit 2; }
fi
# the guards are run from here: /var/tmp, as /tmp is often mounted noexec (outside the snapshot)
work=$(mktemp -d "$work_parent/gpunode-real-host-check.XXXXXX")
[ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT
if [ -n "$wheels" ]; then  # a wheel is a zip of what pip would install (no pip needed)
  for wheel in "$wheels"/*.whl; do "$python" -m zipfile -e "$wheel" "$work/site"; done
  PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"; export PYTHONPATH
fi
[ -z "$collections" ] || { ANSIBLE_COLLECTIONS_PATH=$collections; export ANSIBLE_COLLECTIONS_PATH; }
python=$(command -v "$python")
"$python" -c 'import ansible' 2>/dev/null \
  || { echo "real-host-check: $python cannot import ansible (--python-path or --wheels)" >&2; exit 2; }

# ---------------------------------------------------------------- guards
guard_dir=$work/guard log=$work/guard.log
mkdir -p "$guard_dir"
: >"$log"
# where the tools are, PATH or not (images put the driver's under their own prefix)
real_path=$PATH:/usr/local/sbin:/usr/sbin:/sbin:/usr/local/nvidia/bin:/home/kubernetes/bin/nvidia/bin
guarded="nvidia-smi modprobe rmmod insmod depmod systemctl apt apt-get dpkg dnf yum rpm reboot shutdown
poweroff halt nvidia-persistenced nv-fabricmanager update-initramfs dracut dkms mokutil nvidia-ctk ldconfig"
for name in $guarded; do
  real=$(PATH=$real_path command -v "$name" 2>/dev/null) || continue
  cat >"$guard_dir/$name" <<EOF
#!/bin/sh
# real-host-check guard for $real: reads pass, anything else is refused
. "$here/scripts/real-host-guard.sh"
guard "$name" "$real" "$log" "\$@"
EOF
  chmod +x "$guard_dir/$name"
done
echo "guards: $(ls "$guard_dir" | tr '\n' ' ')"

# ---------------------------------------------------------------- snapshot
snapshot() {
  NODE_STATE_DIR=$work NODE_STATE_PATHS="/etc /usr/local /var/lib/dpkg" sh "$here/tests/molecule/node-state.sh" "$@"
}
gpu_modes() {
  smi=$(PATH=$real_path command -v nvidia-smi 2>/dev/null) || return 0
  "$smi" --query-gpu=index,persistence_mode,mig.mode.current,mig.mode.pending,compute_mode \
    --format=csv,noheader 2>&1 || true
  "$smi" mig -lgi 2>&1 || true
}
snapshot save before
gpu_modes >"$work/gpu.before"

# ---------------------------------------------------------------- the run
cat >"$work/inventory.yml" <<EOF
all:
  hosts:
    this-host:
      ansible_connection: local
      ansible_python_interpreter: $python
  children:
    gpu_nodes:
      hosts:
        this-host:
    mig_nodes:
      hosts: {$( [ -z "$mig" ] || echo "this-host: {nvidia_mig_selected: check}" )}
  vars:
    nvidia_driver_method: preinstalled
    gpu_cluster_addons_output_dir: $work/addons
    gpu_cluster_addons_kubernetes_version: "1.34"
EOF
# the kubelet role installs PyYAML first (its package task needs python3-apt in check mode,
# which images may lack): not when the Python has it already
if "$python" -c 'import yaml' 2>/dev/null; then
  echo "    kubelet_gpu_install_python_yaml: false" >>"$work/inventory.yml"
fi
if [ -n "$mig" ]; then  # PROFILE=N: every GPU in MIG mode with N instances of PROFILE
  printf '    nvidia_mig_config: {version: v1, mig-configs: {check: [{devices: all, mig-enabled: true, mig-devices: {"%s": %s}}]}}\n' \
    "${mig%%=*}" "${mig#*=}" >>"$work/inventory.yml"
fi
if [ -n "$sim_root" ]; then
  printf '    nvidia_gpu_detect_sysfs_root: %s/sys\n    nvidia_gpu_detect_proc_root: %s/proc\n' \
    "$sim_root" "$sim_root" >>"$work/inventory.yml"
fi
rc=0
(cd "$here" && PATH="$guard_dir:$PATH" ANSIBLE_CONFIG="$here/ansible.cfg" \
  "$python" -m ansible playbook -i "$work/inventory.yml" site.yml --check --diff "$@") || rc=$?

# ---------------------------------------------------------------- verdict
gpu_modes >"$work/gpu.after"
echo "--- guarded commands ($(wc -l <"$log") calls):"
sort "$log" | uniq -c | sort -rn | head -40
status=0
if [ "$rc" -ne 0 ]; then echo "FAIL: ansible-playbook exited $rc"; status=1; fi
if grep -q '^REFUSED' "$log"; then
  echo "FAIL: writes were attempted (and refused):"; grep '^REFUSED' "$log"; status=1
fi
snapshot compare before || { echo "FAIL: files, packages or services changed"; status=1; }
if ! cmp -s "$work/gpu.before" "$work/gpu.after"; then
  echo "FAIL: the GPUs' modes changed:"; diff "$work/gpu.before" "$work/gpu.after" || true; status=1
fi
[ "$status" -ne 0 ] || echo "PASS: site.yml --check --diff went through; no write attempted, nothing changed"
[ "$keep" = 0 ] || echo "work folder: $work"
exit "$status"
