#!/usr/bin/env bash
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Check execution-environment.yml the way this machine allows (no image: that needs the base
# image from a registry):
#   1. build the gpunode collection (scripts/build_collection.py);
#   2. `ansible-builder create` (ansible-builder in a temporary virtualenv) writes the build
#      context; the context must hold the collection, requirements.yml and requirements.txt;
#   3. a clean virtualenv gets the context's Python requirements and ansible-core pin, the
#      collections of requirements.yml from the pinned `ansible` wheel (scripts/install-collections.py,
#      no Galaxy) and the gpunode collection from the context's tarball;
#   4. from a folder outside the project (so nothing of its ansible.cfg, library/ or roles/ helps),
#      that virtualenv runs the demo's check run by FQCN when the demo's nodes are up
#      (`make demo` left them), else `ansible-playbook --syntax-check` of gpunode.gpunode.site
#      and `ansible-inventory` of the demo inventory. It prints which it did.
# Usage: bash scripts/test-ee.sh   (make ee); EE_PYTHON picks the interpreter (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${EE_PYTHON:-python3}
BUILDER_VERSION=3.2.0
work=$(mktemp -d "${TMPDIR:-/tmp}/gpunode-ee.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# pip, quiet: its warnings about the machine's index settings are not this check's
pip_install() { "$1" -m pip install --quiet "${@:2}" 2> >(grep -v "^WARNING: Location" >&2); }

echo "== 1. the collection"
python3 scripts/build_collection.py --tree "$work/tree" --output-path "$ROOT/build" | tail -1
tarball=$(ls -t build/gpunode-gpunode-*.tar.gz | head -1)

echo "== 2. ansible-builder $BUILDER_VERSION create"
"$PYTHON" -m venv "$work/builder"
pip_install "$work/builder/bin/python" "ansible-builder==$BUILDER_VERSION"
"$work/builder/bin/ansible-builder" create -f execution-environment.yml -c "$work/context" >/dev/null
context=$work/context
# Containerfile for podman, Dockerfile when the runtime it finds is docker
containerfile=
for name in Containerfile Dockerfile; do [[ -f $context/$name ]] && containerfile=$context/$name; done
[[ -n $containerfile ]] || fail "the build context has no Containerfile or Dockerfile"
for file in _build/requirements.yml _build/requirements.txt \
    "_build/collections/$(basename "$tarball")"; do
  [[ -f $context/$file ]] || fail "the build context has no $file"
done
cmp -s requirements.txt "$context/_build/requirements.txt" || fail "the context's requirements.txt is not the project's"
cmp -s requirements.yml "$context/_build/requirements.yml" || fail "the context's requirements.yml is not the project's"
pinned=$(sed -n 's/^ansible-core==//p' requirements.txt)
grep -q "ansible-core==$pinned" "$containerfile" || fail "$(basename "$containerfile") does not pin ansible-core $pinned"
grep -q "collection install --no-deps .*gpunode-gpunode-" "$containerfile" \
  || fail "$(basename "$containerfile") does not install the gpunode collection"
echo "context: $(cd "$context" && find . -type f | sort | tr '\n' ' ')"

echo "== 3. a clean virtualenv with the context's content (no Galaxy)"
"$PYTHON" -m venv "$work/ee"
ee=$work/ee/bin
pip_install "$ee/python" -r "$context/_build/requirements.txt" "ansible-core==$pinned"
"$ee/python" scripts/install-collections.py
# the image's path (/usr/share/ansible/collections) stands in as $work/collections
export ANSIBLE_COLLECTIONS_PATH=$work/collections
"$ee/ansible-galaxy" collection install --no-deps --collections-path "$work/collections" \
  "$context/_build/collections/$(basename "$tarball")" >/dev/null
"$ee/ansible-galaxy" collection list 2>/dev/null | grep -E "^(gpunode|kubernetes|community|ansible)\.[a-z]+ " | sort

echo "== 4. the playbooks from the virtualenv alone"
mkdir "$work/run"
cp -r inventories/demo "$work/run/inventory"
printf '[defaults]\n' >"$work/run/ansible.cfg"  # an empty configuration, none of the project's
cd "$work/run"
export ANSIBLE_CONFIG=$work/run/ansible.cfg ANSIBLE_NOCOLOR=1
if docker ps --format '{{.Names}}' 2>/dev/null | grep -qx gpunode-demo; then
  echo "the demo's nodes are up: its check run, by FQCN"
  "$ee/ansible-playbook" -i inventory gpunode.gpunode.site --check --diff >"$work/check.log" 2>&1 || {
    tail -40 "$work/check.log"; fail "the check run failed"; }
  grep -A10 "PLAY RECAP" "$work/check.log"
else
  echo "the demo's nodes are not up (make demo): syntax check and inventory instead"
  "$ee/ansible-playbook" -i inventory gpunode.gpunode.site --syntax-check
  "$ee/ansible-inventory" -i inventory --graph
fi
echo "OK: execution-environment.yml builds its context and its content runs"
