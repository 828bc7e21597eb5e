#!/usr/bin/env bash
# The demo: start the simulated cluster of inventories/demo (systemd containers:
# a T4 cloud VM, an HGX H100 with 8 GPUs and 4 NVSwitches, a kubeadm control
# plane; fake sysfs trees describe the real GPUs by their PCI IDs, local
# stand-ins replace NVIDIA's servers and kube-scheduler), run
# `ansible-playbook -i inventories/demo site.yml --check --diff` (what a first
# run would do, changing nothing), then site.yml twice, and show that the second
# run changed nothing on any host (the add-on manifests are rendered by site.yml
# into demo-output/addons), then renders the DRA mode with its examples into
# demo-output/addons-dra. Ends with site.yml's summary table.
#   scripts/demo.sh           run the demo (the nodes are kept for a look)
#   scripts/demo.sh --clean   remove the demo nodes
# It runs the ansible-playbook found on PATH: `make demo` puts $(VENV)/bin first
# (.venv: the oldest ansible-core of the supported range; VENV=.venv-newest: the newest).
set -euo pipefail
cd "$(dirname "$0")/.."
# inventories/demo/hosts.yml's hosts; the GPU nodes get a volume for Docker's data
gpu_nodes=(gpunode-demo gpunode-demo-hgx)
nodes=("${gpu_nodes[@]}" gpunode-demo-cp)
image=gpunode-bookworm-systemd:latest
log_dir=${DEMO_LOG_DIR:-.cache/demo}

remove_nodes() {
  local node removed=()
  for node in "${nodes[@]}"; do
    docker rm -f "$node" >/dev/null 2>&1 && removed+=("$node")
    docker volume rm "$node-docker" >/dev/null 2>&1 && removed+=("volume $node-docker")
  done
  echo "removed: ${removed[*]:-nothing}"
}

if [[ ${1:-} == --clean ]]; then
  remove_nodes
  exit 0
fi

# the summary table of a site.yml log (the debug task's msg, dedented)
summary_table() {
  awk '/^TASK \[What each host has now/ {task = 1} task && /^ +msg: \|-$/ {table = 1; next}
       table && /^ *$/ {exit} table {sub(/^        /, ""); print}' "$1"
}

# the PLAY RECAP lines of a log
recap() { sed -n '/^PLAY RECAP/,/^$/p' "$1" | sed '/^$/d'; }

start=$SECONDS
mkdir -p "$log_dir"
# the controller environment is the Makefile's VENV (.venv, or .venv-newest: make demo VENV=.venv-newest)
core=$(python -c 'from ansible.release import __version__; print(__version__)')
echo "== ansible-core $core ($(command -v ansible-playbook))"
: >"$log_dir/times.log"
took() { echo "$1 took $(($2)) s" | tee -a "$log_dir/times.log"; }

# Fresh nodes each time, so the first run shows the whole convergence.
remove_nodes >/dev/null
for node in "${nodes[@]}"; do
  volume=()
  [[ " ${gpu_nodes[*]} " == *" $node "* ]] && volume=(-v "$node-docker:/var/lib/docker")
  docker run -d --name "$node" --hostname "$node" \
    --cap-add SYS_ADMIN --cap-add NET_ADMIN \
    --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
    --cgroupns host --tmpfs /run --tmpfs /run/lock --tmpfs /tmp \
    -v /sys/fs/cgroup:/sys/fs/cgroup:rw "${volume[@]}" \
    "$image" >/dev/null
done
for node in "${nodes[@]}"; do
  timeout 90 sh -c "until docker exec $node systemctl is-system-running 2>/dev/null | grep -qE 'running|degraded'; do sleep 0.5; done"
done
took "== nodes ${nodes[*]} up:" "SECONDS - start"
echo "== preparing their simulated hardware and stand-ins (log: $log_dir/prepare.log)"
step=$SECONDS
ansible-playbook -i inventories/demo tests/simnode/prepare-demo.yml >"$log_dir/prepare.log" 2>&1 || {
  tail -n 60 "$log_dir/prepare.log"; echo "== preparing the nodes failed (log: $log_dir/prepare.log)" >&2; exit 1; }
took "== prepare" "SECONDS - step"

# No internet (issue 23, docs/OFFLINE.md): from here on the nodes reach only their
# loopback, where the stand-ins serve as the inventory's mirrors (every mirror setting
# is set). Each node leaves every Docker network (the demo reaches the nodes by
# `docker exec`), and its apt sources that name another host (Debian's archive) are
# set aside, as an offline site points them at its own mirror of the distribution
# (the nodes already have what site.yml needs from it). A default route through
# loopback ends at a REJECT rule that counts: any attempt to reach another host
# (a DNS query included) fails at once, and the demo fails if the runs made one.
offline_nodes() {
  local node net
  for node in "${nodes[@]}"; do
    for net in $(docker inspect -f '{{range $name, $_ := .NetworkSettings.Networks}}{{$name}} {{end}}' "$node"); do
      docker network disconnect "$net" "$node"
    done
    docker exec "$node" sh -ec '
      mkdir -p /root/gpunode-offline-aside
      for f in /etc/apt/sources.list /etc/apt/sources.list.d/*; do
        if [ -f "$f" ] && grep -oE "https?://[^/[:space:]]+" "$f" | grep -qvE "^https?://127\.0\.0\.1(:|$)"; then
          mv "$f" /root/gpunode-offline-aside/
        fi
      done
      ip route replace default dev lo
      iptables -I OUTPUT -m addrtype ! --dst-type LOCAL -m comment --comment gpunode-offline -j REJECT'
  done
}
# the packets each node sent to another host since offline_nodes (all rejected)
offline_attempts() {
  docker exec "$1" iptables -L OUTPUT -v -n -x | awk '/gpunode-offline/ {print $1}'
}
offline_nodes
for node in "${nodes[@]}"; do
  docker exec "$node" sh -c '! curl -sS -o /dev/null --max-time 5 http://deb.debian.org/debian/ 2>/dev/null' || {
    echo "== $node still reaches deb.debian.org" >&2; exit 1; }
done
for node in "${gpu_nodes[@]}"; do
  for mirror in http://127.0.0.1:8391/gpunode-test-archive.asc http://127.0.0.1:8371/gpunode-test-archive.asc; do
    docker exec "$node" curl -sSf -o /dev/null --max-time 5 "$mirror" || {
      echo "== $node does not reach its mirror $mirror" >&2; exit 1; }
  done
done
probes=()
for node in "${nodes[@]}"; do probes+=("$(offline_attempts "$node")"); done
echo "== the nodes are offline: loopback only (their mirrors), Debian's archive out of reach"

step=$SECONDS
echo "== check run: ansible-playbook -i inventories/demo site.yml --check --diff (changes nothing)"
ansible-playbook -i inventories/demo site.yml --check --diff >"$log_dir/check.log" 2>&1 || {
  tail -n 60 "$log_dir/check.log"; echo "== the check run failed (log: $log_dir/check.log)" >&2; exit 1; }
recap "$log_dir/check.log"
took "== check run (full output with diffs: $log_dir/check.log)" "SECONDS - step"

# run 1 is shown as it goes; run 2 only in its log (its recap and table follow)
run() {
  local n=$1 step=$SECONDS
  echo "== run $n: ansible-playbook -i inventories/demo site.yml"
  if ((n == 1)); then
    ansible-playbook -i inventories/demo site.yml 2>&1 | tee "$log_dir/run$n.log"
  else
    ansible-playbook -i inventories/demo site.yml >"$log_dir/run$n.log" 2>&1 || {
      tail -n 60 "$log_dir/run$n.log"; echo "== run $n failed (log: $log_dir/run$n.log)" >&2; exit 1; }
  fi
  took "== run $n (log: $log_dir/run$n.log)" "SECONDS - step"
}
run 1
echo "== what run 1 changed (site.yml's summary):"
summary_table "$log_dir/run1.log"
run 2

# every node in the recap of run 2, none changed, failed or unreachable
bad=0
for node in "${nodes[@]}"; do
  line=$(grep -E "^$node +:" "$log_dir/run2.log" | tail -n1 || true)
  if [[ -z $line ]]; then
    echo "== $node is missing from run 2's recap" >&2; bad=1
  elif ! grep -qE 'unreachable=0 +failed=0' <<<"$line" || ! grep -q ' changed=0 ' <<<"$line"; then
    echo "== run 2 was not a no-op on $node: $line" >&2; bad=1
  fi
done
if grep -E '^\S+ +: ok=' "$log_dir/run2.log" | grep -vqE ' changed=0 .*unreachable=0 +failed=0'; then
  echo "== run 2 was not a no-op on every host:" >&2; recap "$log_dir/run2.log" >&2; bad=1
fi
((bad == 0)) || exit 1
# and no run tried to reach another host
i=0
for node in "${nodes[@]}"; do
  attempts=$(($(offline_attempts "$node") - probes[i++]))
  ((attempts == 0)) || { echo "== $node tried to reach another host during the runs ($attempts packets rejected)" >&2; bad=1; }
done
((bad == 0)) || exit 1

addons_dir=$PWD/demo-output/addons
echo "== GPU cluster add-ons, rendered by site.yml (the demo has no API server): $(cd "$addons_dir" && echo *)"
echo "== labels for the GPU nodes (site.yml's run 2):"
grep -zo "kubectl label node [^']*" "$log_dir/run2.log" | tr -s ' \n\0' '  \n' || true
# The same role for a cluster allocating GPUs by ResourceClaim (Kubernetes 1.34+), with
# its ready-to-use examples: rendered alone (the demo's kubelets are 1.30, which the DRA
# preflight refuses), on the controller only.
dra_dir=$PWD/demo-output/addons-dra
# the add-ons' registry mirror of the inventory, for this render too
registry=$(python -c 'import yaml; print(yaml.safe_load(open("inventories/demo/hosts.yml"))["all"]["vars"]["gpu_cluster_addons_image_registry"])')
echo "== the DRA mode for Kubernetes 1.34, rendered into $dra_dir (examples/: claims of a GPU and of a MIG slice)"
ansible-playbook -i localhost, playbooks/cluster_addons.yml -e '{"ansible_python_interpreter": "{{ ansible_playbook_python }}"}' \
  -e gpu_cluster_addons_mode=dra -e gpu_cluster_addons_kubernetes_version=1.34 \
  -e "gpu_cluster_addons_output_dir=$dra_dir" -e "gpu_cluster_addons_image_registry=$registry" >"$log_dir/addons-dra.log" 2>&1 || { cat "$log_dir/addons-dra.log"; exit 1; }
echo "== $(cd "$dra_dir" && echo * examples/*)"

# Every image the rendered add-ons name is under the inventory's registry mirror
# (the `image:` lines and HAMi's IMAGE_NAME values, as tests/unit/test_offline_mirrors.py reads them).
python - "$registry" "$addons_dir" "$dra_dir" <<'EOF_IMAGES' || exit 1
import pathlib, re, sys
registry, dirs = sys.argv[1], sys.argv[2:]
images = [(str(path), m[1] or m[2]) for d in dirs for path in sorted(pathlib.Path(d).rglob("*.yaml"))
          for m in re.finditer(r'^\s*(?:- )?image:\s*"?([^\s"]+)|name: IMAGE_NAME\s+value:\s*"?([^\s"]+)',
                               path.read_text(), re.M)]
off = [f"{path}: {image}" for path, image in images if not image.startswith(registry + "/")]
if not images or off:
    sys.exit("== images of the add-ons not under the mirror " + registry + "/:\n" + "\n".join(off or ["(no image found)"]))
print(f"== all {len(images)} images of the add-ons are under the mirror {registry}/:",
      " ".join(sorted({image.removeprefix(registry + "/") for _path, image in images})))
EOF_IMAGES

echo
echo "== check run (--check --diff on the fresh nodes) recap:"
recap "$log_dir/check.log"
echo "== run 2 recap:"
recap "$log_dir/run2.log"
echo "== the second run changed nothing on ${nodes[*]}"
took "== the demo" "SECONDS - start" >/dev/null
echo "== times (ansible-core $core): $(sed -E 's/^== //; s/ \((full output|log)[^)]*\)//' "$log_dir/times.log" | paste -sd';' | sed 's/;/; /g')"
echo "== site.yml's summary after run 2 (what each host has now, what the run changed):"
summary_table "$log_dir/run2.log"
echo "== the nodes stay up: docker exec -it gpunode-demo bash; remove them with: make demo-clean"
