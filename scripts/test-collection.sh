#!/usr/bin/env bash
# Test the collection tarball that scripts/build_collection.py built, the way
# a user gets it: `ansible-galaxy collection install` into a temporary
# collections path, then, from a temporary directory with an empty ansible.cfg
# (nothing of the playbook project can stand in for the collection):
#   docs     ansible-doc of every module and filter of the collection (none undocumented);
#   syntax   ansible-playbook --syntax-check of every playbook of the collection, by FQCN;
#   smoke    tests/collection/smoke.yml (FQCNs only) against localhost;
#   sanity   ansible-test sanity on the installed copy (scripts/collection_sanity.py).
# Every check runs; the script fails at the end if one did, naming them.
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
tarball="$ROOT/build/$namespace-$name-$version.tar.gz"
[[ -f $tarball ]] || { echo "test-collection: $tarball missing: run scripts/build_collection.py" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/gpunode-collection.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/run"
: >"$work/run/ansible.cfg"
export ANSIBLE_CONFIG=$work/run/ansible.cfg ANSIBLE_COLLECTIONS_PATH=$work/collections
export ANSIBLE_LOCAL_TEMP=$work/tmp ANSIBLE_HOME=$work/ansible-home
unset ANSIBLE_LIBRARY ANSIBLE_MODULE_UTILS ANSIBLE_ACTION_PLUGINS ANSIBLE_ROLES_PATH ANSIBLE_FILTER_PLUGINS

started=$SECONDS
failed=()
check() {  # check NAME COMMAND...: run it, say how it went and how long it took
  local name=$1 begin=$SECONDS
  shift
  if "$@"; then
    echo "test-collection: $name passed ($((SECONDS - begin)) s)"
  else
    echo "test-collection: $name FAILED ($((SECONDS - begin)) s)" >&2
    failed+=("$name")
  fi
}

# Dependencies (galaxy.yml) are not fetched: Galaxy is unreachable in CI, and
# scripts/bootstrap.sh has installed them into the virtualenv already.
ansible-galaxy collection install --offline --no-deps -p "$work/collections" "$tarball" >/dev/null
installed="$work/collections/ansible_collections/$namespace/$name"
echo "test-collection: installed $tarball into $installed"

docs() {  # every module and filter has documentation that ansible-doc can show
  local type listing undocumented status=0
  local -a plugins
  for type in module filter; do
    listing=$(cd "$work/run" && ansible-doc -t "$type" -l "$fqcn")
    mapfile -t plugins < <(awk 'NF {print $1}' <<<"$listing")
    undocumented=$(grep -F UNDOCUMENTED <<<"$listing" || true)
    if [[ -n $undocumented ]]; then
      printf 'test-collection: undocumented %ss:\n%s\n' "$type" "$undocumented" >&2
      status=1
    fi
    if ((${#plugins[@]})) && ! (cd "$work/run" && ansible-doc -t "$type" "${plugins[@]}" >/dev/null); then
      status=1
    fi
    echo "test-collection: ansible-doc -t $type: ${#plugins[@]} in $fqcn"
  done
  return $status
}

syntax() {  # every playbook of the collection parses, with its roles, by FQCN
  local -a playbooks
  mapfile -t playbooks < <(find "$installed/playbooks" -maxdepth 1 -name '*.yml' -printf '%f\n' |
    sed 's/\.yml$//' | sort)
  echo "test-collection: playbooks: ${playbooks[*]/#/$fqcn.}"
  (cd "$work/run" && ansible-playbook -i localhost, --syntax-check "${playbooks[@]/#/$fqcn.}" >/dev/null)
}

smoke() {  # the FQCN playbook against localhost, on a simulated Tesla T4
  export SMOKE_DIR=$work/smoke
  mkdir -p "$SMOKE_DIR"
  python tests/simnode/make_sysfs.py tests/simnode/specs/t4-vm.yml "$SMOKE_DIR/sim" >/dev/null
  cp tests/collection/smoke.yml "$work/run/"
  (cd "$work/run" && ansible-playbook -i localhost, smoke.yml)
}

check docs docs
check syntax syntax
check smoke smoke
if ! $skip_sanity; then
  check sanity python "$ROOT/scripts/collection_sanity.py" --collection "$installed" "$@"
fi

if ((${#failed[@]})); then
  echo "test-collection: FAILED: ${failed[*]} ($((SECONDS - started)) s)" >&2
  exit 1
fi
echo "test-collection: all passed ($((SECONDS - started)) s)"
