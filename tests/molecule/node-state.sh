#!/bin/sh
# What a check-mode run must not change on a node (tests/molecule/check-mode.yml).
#
#   node-state.sh save NAME      record the state in /run/gpunode-check/NAME
#   node-state.sh compare NAME   record it again; print what differs and exit 1
#                                if anything does (0: unchanged)
#
# The state, one line per item, sorted: every file, directory and link under
# /etc and /usr (path, type, size, mode, owner, mtime, link target; Python's
# bytecode caches aside, and a directory's mtime: its entries are listed one by
# one, and a system tool's Python adding its __pycache__ - lsb_release under
# fact gathering on bullseye - is not a change of the node), the dpkg database (package, version, selection and
# state: a hold shows as "hold ok installed") and the running services. It stays
# on the node (in /run, which is neither /etc nor /usr); only the differences
# travel back. (NODE_STATE_PATHS, NODE_STATE_DIR and NODE_STATE_LIMIT change
# the folders read, where states are kept, and how many differences are shown.)
set -eu
dir=${NODE_STATE_DIR:-/run/gpunode-check}
paths=${NODE_STATE_PATHS:-/etc /usr}
limit=${NODE_STATE_LIMIT:-60}

state() {
  # shellcheck disable=SC2086 # word splitting of the folder list is wanted
  find $paths -xdev -path '*/__pycache__' -prune -o -type d -printf 'file %p %y %m %U:%G\n' -o \
    -printf 'file %p %y %s %m %U:%G %T@ %l\n' 2>/dev/null
  if command -v dpkg-query >/dev/null 2>&1; then
    dpkg-query -W -f 'dpkg ${Package}:${Architecture} ${Version} ${Status}\n' 2>/dev/null
  fi
  if command -v systemctl >/dev/null 2>&1; then
    systemctl list-units --type=service --state=running --no-legend --plain 2>/dev/null \
      | awk '{print "service " $1}'
  fi
}

case ${1:-} in
  save)
    mkdir -p "$dir"
    state | LC_ALL=C sort >"$dir/$2"
    echo "saved $(wc -l <"$dir/$2") items"
    ;;
  compare)
    [ -f "$dir/$2" ] || { echo "no saved state $dir/$2 (run: node-state.sh save $2)"; exit 2; }
    state | LC_ALL=C sort >"$dir/$2.now"
    if cmp -s "$dir/$2" "$dir/$2.now"; then
      echo "unchanged: $(wc -l <"$dir/$2") items"
      exit 0
    fi
    # "-" before the check run, "+" after it; a changed item shows as both
    LC_ALL=C comm -3 "$dir/$2" "$dir/$2.now" | sed -e 's/^\t/+ /' -e 't' -e 's/^/- /' >"$dir/$2.diff"
    count=$(wc -l <"$dir/$2.diff")
    echo "$count lines differ (- before the check run, + after it):"
    head -n "$limit" "$dir/$2.diff"
    [ "$count" -le "$limit" ] || echo "... $((count - limit)) more in $dir/$2.diff on the node"
    exit 1
    ;;
  *)
    echo "usage: node-state.sh save NAME | compare NAME" >&2
    exit 2
    ;;
esac
