#!/usr/bin/env bash
# Test the collection tarball that scripts/build_collection.py built, the way
# a user gets it: `ansible-galaxy collection install` into a temporary
# collections path, then, from a temporary directory with an empty ansible.cfg
# (nothing of the playbook project can stand in for the collection):
#   1. ansible-doc of every module and filter of the collection (none undocumented);
#   2. ansible-playbook --syntax-check of every playbook of the collection, by FQCN;
#   3. tests/collection/smoke.yml (FQCNs only) against localhost;
#   4. ansible-test sanity on the installed copy (scripts/collection_sanity.py).
# Usage: scripts/test-collection.sh [--skip-sanity] [-- options for collection_sanity.py]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
skip_sanity=false
if [[ ${1:-} == --skip-sanity ]]; then skip_sanity=true; shift; fi
[[ ${1:-} == -- ]] && shift

read -r namespace name version < <(python - <<'EOF'
import yaml
galaxy = yaml.safe_load(open("collection/galaxy.yml", encoding="utf-8"))
print(galaxy["namespace"], galaxy["name"], galaxy["version"])
EOF
)
fqcn="$namespace.$name"
tarball="build/$namespace-$name-$version.tar.gz"
[[ -f $tarball ]] || { echo "test-collection: $tarball missing: run scripts/build_collection.py" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/gpunode-collection.XXXXXX")
trap 'rm -rf "$work"' EXIT
step() { echo "test-collection: $* ($((SECONDS - started)) s)"; }
started=$SECONDS

mkdir -p "$work/run"
: >"$work/run/ansible.cfg"
export ANSIBLE_CONFIG=$work/run/ansible.cfg ANSIBLE_COLLECTIONS_PATH=$work/collections
export ANSIBLE_LOCAL_TEMP=$work/tmp ANSIBLE_HOME=$work/ansible-home
unset ANSIBLE_LIBRARY ANSIBLE_MODULE_UTILS ANSIBLE_ROLES_PATH ANSIBLE_FILTER_PLUGINS

# Dependencies (galaxy.yml) are not fetched: Galaxy is unreachable in CI, and
# scripts/bootstrap.sh has installed them into the virtualenv already.
ansible-galaxy collection install --offline --no-deps -p "$work/collections" "$ROOT/$tarball" >/dev/null
installed="$work/collections/ansible_collections/$namespace/$name"
step "installed $tarball into $installed"

# 1. Documentation: every module and filter, by FQCN.
for type in module filter; do
  listing=$(cd "$work/run" && ansible-doc -t "$type" -l "$fqcn")
  mapfile -t plugins < <(awk '{print $1}' <<<"$listing")
  undocumented=$(grep -F UNDOCUMENTED <<<"$listing" || true)
  if [[ -n $undocumented ]]; then
    echo "test-collection: undocumented ${type}s:" >&2
    echo "$undocumented" >&2
    exit 1
  fi
  if ((${#plugins[@]})); then
    (cd "$work/run" && ansible-doc -t "$type" "${plugins[@]}" >/dev/null)
  fi
  step "ansible-doc -t $type: ${#plugins[@]} documented"
done

# 2. Every playbook of the collection parses, with its roles, by FQCN.
mapfile -t playbooks < <(find "$installed/playbooks" -maxdepth 1 -name '*.yml' -printf '%f\n' | sed 's/\.yml$//' | sort)
(cd "$work/run" && ansible-playbook -i localhost, --syntax-check "${playbooks[@]/#/$fqcn.}" >/dev/null)
step "syntax check: ${#playbooks[@]} playbooks"

# 3. The FQCN playbook against localhost, on a simulated Tesla T4.
export SMOKE_DIR=$work/smoke
mkdir -p "$SMOKE_DIR"
python tests/simnode/make_sysfs.py tests/simnode/specs/t4-vm.yml "$SMOKE_DIR/sim" >/dev/null
cp tests/collection/smoke.yml "$work/run/"
(cd "$work/run" && ansible-playbook -i localhost, smoke.yml)
step "smoke playbook passed"

# 4. ansible-test sanity on what was installed.
if ! $skip_sanity; then
  python "$ROOT/scripts/collection_sanity.py" --collection "$installed" "$@"
  step "ansible-test sanity passed"
fi
