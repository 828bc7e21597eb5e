#!/usr/bin/env bash
# make test-cluster: apply gpu_cluster_addons to the cluster in $KUBECONFIG and
# check that the GPUs become schedulable. For users with a cluster; CI has no
# API server and does not run this.
#
#   KUBECONFIG=~/.kube/config INVENTORY=inventories/mine make test-cluster
#
# INVENTORY   inventory whose gpu_nodes hosts are the cluster's GPU nodes
#             (reachable: playbooks/cluster_addons.yml reads their GPU facts) [required]
# MODE        nvidia | gpushare | hami                           [nvidia]
# TIMEOUT     seconds to wait for readiness                      [300]
# EXTRA_VARS  more -e for ansible-playbook (JSON or key=value)   []
# VALIDATION_POD_DIGEST  the validation pod's digest (sha256:...; set and empty skips step 5)
#             [the role's: NVIDIA's gpu-operator-validator v25.3.1]
# READINESS=1 step 6: the NodeReadinessRule (needs the Node Readiness Controller's CRD)  [off]
# ROLLOUT=1   step 7: site.yml's rolling path with a drain, one node at a time: it CHANGES the
#             GPU nodes (the inventory's settings; pass a driver change in EXTRA_VARS to see a
#             drain); needs SSH to them                                               [off]
# TAINT_KEY, CONDITION  gpu_validate_taint_key and gpu_validate_condition_type, where changed
#
# Steps: (1) render the manifests for the cluster's version and validate each
# with kubernetes-validate (strict); (2) apply them (the role waits until the
# device plugin is ready and every GPU node advertises its resource, and
# fails naming the nodes that do not); (3) apply again: nothing may change;
# (4) show each GPU node's allocatable resource; (5) the validation gate's pod
# (CUDA vectorAdd on one GPU) on every GPU node, which must succeed; (6) with READINESS=1 the
# readiness rule applied, twice (no change), and every GPU node whose condition gpunode.io/GPUValidated
# is True without the taint; (7) with ROLLOUT=1 site.yml with gpunode_rollout_drain, batch 1: no host
# fails, and afterwards no GPU node is cordoned or keeps gpunode.io/gpu-daemonsets=paused.
set -euo pipefail
cd "$(dirname "$0")/../.."

fail() { echo "test-cluster: $*" >&2; exit 1; }

: "${KUBECONFIG:?test-cluster: set KUBECONFIG to the cluster to test against (CI does not run this)}"
[[ -r $KUBECONFIG ]] || fail "KUBECONFIG=$KUBECONFIG is not a readable file"
: "${INVENTORY:?test-cluster: set INVENTORY to an inventory with the GPU nodes of the cluster in group gpu_nodes}"
MODE=${MODE:-nvidia}
TIMEOUT=${TIMEOUT:-300}
[[ $MODE == nvidia || $MODE == gpushare || $MODE == hami ]] || fail "MODE must be nvidia, gpushare or hami, not $MODE"
python3 -c 'import kubernetes' 2>/dev/null \
  || fail "the Python package kubernetes is missing: pip install -r requirements.txt"
export KUBECONFIG ANSIBLE_NOCOLOR=1

log=$(mktemp -d "${TMPDIR:-/tmp}/gpunode-test-cluster.XXXXXX")
common=(-i "$INVENTORY" -e "gpu_cluster_addons_mode=$MODE" -e "gpu_cluster_addons_wait_timeout=$TIMEOUT")
[[ -n ${EXTRA_VARS:-} ]] && common+=(-e "$EXTRA_VARS")

version=$(python3 -c 'from kubernetes import client, config
config.load_kube_config()
print(client.VersionApi().get_code().git_version)') || fail "cannot reach the API server in $KUBECONFIG"
echo "== Kubernetes $version; mode $MODE; logs in $log"

start=$SECONDS
echo "== 1/5 render and validate"
ansible-playbook "${common[@]}" playbooks/cluster_addons.yml \
  -e "gpu_cluster_addons_output_dir=$log/manifests" -e "gpu_cluster_addons_kubernetes_version=$version" \
  >"$log/render.log" 2>&1 || { tail -n 40 "$log/render.log"; fail "rendering failed"; }
if python3 -c 'import kubernetes_validate' 2>/dev/null; then
  minor=$(sed -E 's/^v?([0-9]+\.[0-9]+).*/\1/' <<<"$version")
  kubernetes-validate --strict --quiet -k "$minor.0" "$log"/manifests/*.yaml \
    || fail "rendered manifests do not validate for $version"
else
  echo "   (kubernetes-validate not installed: skipped; pip install -r requirements-dev.txt)"
fi

echo "== 2/5 apply and wait for the GPUs (up to $TIMEOUT s)"
ansible-playbook "${common[@]}" playbooks/cluster_addons.yml | tee "$log/apply1.log" \
  || fail "applying failed (see above; the last assert names what is not ready)"

echo "== 3/5 apply again: nothing may change"
ansible-playbook "${common[@]}" playbooks/cluster_addons.yml >"$log/apply2.log" 2>&1 \
  || { tail -n 40 "$log/apply2.log"; fail "second apply failed"; }
recap=$(grep -E '^localhost +:' "$log/apply2.log" | tail -n1)
grep -qE 'changed=0 .*failed=0' <<<"$recap" || fail "second apply was not a no-op: $recap"

echo "== 4/5 GPU nodes and what they advertise"
resource=$([[ $MODE == nvidia ]] && echo nvidia.com/gpu || echo aliyun.com/gpu-mem)
python3 - "$resource" <<'PY'
import sys
from kubernetes import client, config
config.load_kube_config()
nodes = client.CoreV1Api().list_node(label_selector="nvidia.com/gpu.present=true").items
for node in nodes:
    alloc = node.status.allocatable or {}
    print(f"   {node.metadata.name}: {sys.argv[1]}={alloc.get(sys.argv[1], 'absent')}"
          f" product={node.metadata.labels.get('nvidia.com/gpu.product', '?')}")
sys.exit(0 if nodes else 1)
PY
echo "== 5/5 the validation pod on every GPU node"
if [[ $MODE != nvidia ]]; then
  echo "   (mode $MODE advertises no nvidia.com/gpu: skipped)"
elif [[ -z ${VALIDATION_POD_DIGEST-unset} ]]; then
  echo "   (VALIDATION_POD_DIGEST set empty: skipped)"
else
  digest=()
  [[ -n ${VALIDATION_POD_DIGEST:-} ]] && digest=(-e "gpu_cluster_addons_validation_pod_digest=$VALIDATION_POD_DIGEST")
  ansible-playbook "${common[@]}" "${digest[@]}" \
    tests/cluster/validation_pod.yml >"$log/validation-pod.log" 2>&1 \
    || { tail -n 40 "$log/validation-pod.log"; fail "the validation pod did not succeed"; }
fi
if [[ ${READINESS:-0} == 1 ]]; then
  echo "== 6/7 the readiness rule (Node Readiness Controller)"
  ansible-playbook "${common[@]}" -e gpu_cluster_addons_readiness_rule=true playbooks/cluster_addons.yml \
    >"$log/readiness1.log" 2>&1 || { tail -n 40 "$log/readiness1.log"; fail "applying the readiness rule failed"; }
  ansible-playbook "${common[@]}" -e gpu_cluster_addons_readiness_rule=true playbooks/cluster_addons.yml \
    >"$log/readiness2.log" 2>&1 || { tail -n 40 "$log/readiness2.log"; fail "second apply of the rule failed"; }
  grep -E '^localhost +:' "$log/readiness2.log" | tail -n1 | grep -qE 'changed=0 .*failed=0' \
    || fail "second apply of the readiness rule was not a no-op (see $log/readiness2.log)"
fi
if [[ ${ROLLOUT:-0} == 1 ]]; then
  echo "== 7/7 site.yml's rolling path, drained, one node at a time"
  ansible-playbook "${common[@]}" site.yml -e gpunode_rollout_drain=true -e gpunode_rollout_batch=1 \
    -e "gpunode_rollout_kubeconfig=$KUBECONFIG" >"$log/rollout.log" 2>&1 \
    || { tail -n 60 "$log/rollout.log"; fail "the rolling run failed (the table above says where)"; }
fi
if [[ ${READINESS:-0} == 1 || ${ROLLOUT:-0} == 1 ]]; then
  python3 - "${TAINT_KEY:-readiness.k8s.io/gpunode-gpu-unvalidated}" "${CONDITION:-gpunode.io/GPUValidated}" \
    <<'PY' || fail "GPU nodes left cordoned, paused or tainted though validated (above)"
import sys
from kubernetes import client, config
config.load_kube_config()
bad = []
for node in client.CoreV1Api().list_node(label_selector="nvidia.com/gpu.present=true").items:
    name, labels = node.metadata.name, node.metadata.labels or {}
    validated = any(c.type == sys.argv[2] and c.status == "True" for c in node.status.conditions or [])
    taints = [t.key for t in node.spec.taints or [] if t.key == sys.argv[1]]
    print(f"   {name}: validated={validated} cordoned={bool(node.spec.unschedulable)} taints={taints}")
    if node.spec.unschedulable or labels.get("gpunode.io/gpu-daemonsets") == "paused" or (validated and taints):
        bad.append(name)
sys.exit(1 if bad else 0)
PY
fi
echo "== test-cluster passed in $((SECONDS - start)) s ($recap)"
