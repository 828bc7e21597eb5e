#!/usr/bin/env bash
# The demo: start a simulated GPU node (a systemd container whose fake sysfs
# describes a real GPU by its PCI IDs, with local stand-ins for NVIDIA's
# servers), run `ansible-playbook -i inventories/demo site.yml --check --diff`
# (what a first run would do, changing nothing), then site.yml twice, and show
# that the second run changed nothing.
#   scripts/demo.sh           run the demo (the node is kept for a look)
#   scripts/demo.sh --clean   remove the demo node
set -euo pipefail
cd "$(dirname "$0")/.."
node=gpunode-demo
image=gpunode-bookworm-systemd:latest
log_dir=${DEMO_LOG_DIR:-.cache/demo}

if [[ ${1:-} == --clean ]]; then
  docker rm -f "$node" >/dev/null 2>&1 || true
  docker volume rm "$node-docker" >/dev/null 2>&1 || true
  echo "removed $node"
  exit 0
fi

# A fresh node each time, so the first run shows the whole convergence.
docker rm -f "$node" >/dev/null 2>&1 || true
docker run -d --name "$node" --hostname "$node" \
  --cap-add SYS_ADMIN --cap-add NET_ADMIN \
  --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
  --cgroupns host --tmpfs /run --tmpfs /run/lock --tmpfs /tmp \
  -v /sys/fs/cgroup:/sys/fs/cgroup:rw -v "$node-docker:/var/lib/docker" \
  "$image" >/dev/null
timeout 60 sh -c "until docker exec $node systemctl is-system-running 2>/dev/null | grep -qE 'running|degraded'; do sleep 0.5; done"
mkdir -p "$log_dir"
echo "== simulated GPU node $node is up; preparing its simulated hardware"
ansible-playbook -i inventories/demo tests/simnode/prepare-demo.yml >"$log_dir/prepare.log" 2>&1 || {
  cat "$log_dir/prepare.log"; exit 1; }

run() {
  local n=$1 start=$SECONDS
  echo "== run $n: ansible-playbook -i inventories/demo site.yml"
  ansible-playbook -i inventories/demo site.yml | tee "$log_dir/run$n.log"
  echo "== run $n took $((SECONDS - start)) s" | tee -a "$log_dir/times.log"
}
: >"$log_dir/times.log"
start=$SECONDS
echo "== check run: ansible-playbook -i inventories/demo site.yml --check --diff (changes nothing)"
ansible-playbook -i inventories/demo site.yml --check --diff >"$log_dir/check.log" 2>&1 || {
  tail -n 60 "$log_dir/check.log"; echo "== the check run failed (log: $log_dir/check.log)" >&2; exit 1; }
sed -n '/^PLAY RECAP/,$p' "$log_dir/check.log"
echo "== check run took $((SECONDS - start)) s (full output with diffs: $log_dir/check.log)" | tee -a "$log_dir/times.log"
run 1
run 2
recap=$(grep -E "^$node +:" "$log_dir/run2.log" | tail -n1)
if grep -qE 'changed=0 .*failed=0' <<<"$recap"; then
  echo "== second run changed nothing: $recap"
else
  echo "== second run was not a no-op: $recap" >&2
  exit 1
fi
addons_dir=$PWD/demo-output/addons
echo "== GPU cluster add-ons for the simulated node (the demo has no cluster: rendered, not applied)"
ansible-playbook -i inventories/demo playbooks/cluster_addons.yml -e gpu_cluster_addons_mode=gpushare \
  -e gpu_cluster_addons_kubernetes_version=1.30 -e "gpu_cluster_addons_output_dir=$addons_dir" \
  >"$log_dir/addons.log" 2>&1 || { cat "$log_dir/addons.log"; exit 1; }
echo "== labels for the GPU node:"
grep -zo "kubectl label node [^']*" "$log_dir/addons.log" | tr -s ' \n\0' '  \n' || true
echo "== manifests written to $addons_dir:"
ls "$addons_dir"
echo "== the node stays up: docker exec -it $node bash; remove it with: make demo-clean"
