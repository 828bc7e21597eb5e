#!/bin/sh
# What a check-mode run must not change on a node (tests/molecule/check-mode.yml):
# every file, directory and link under /etc and /usr (path, type, size, mode,
# owner, mtime, link target; Python's bytecode caches aside), the dpkg database
# (package, version, selection and state: a hold shows as "hold ok installed")
# and the running services. One line per item, sorted.
set -eu
find /etc /usr -xdev -path '*/__pycache__' -prune -o \
  -printf 'file %p %y %s %m %U:%G %T@ %l\n' 2>/dev/null | LC_ALL=C sort
dpkg-query -W -f 'dpkg ${Package}:${Architecture} ${Version} ${Status}\n' 2>/dev/null | LC_ALL=C sort
if command -v systemctl >/dev/null 2>&1; then
  systemctl list-units --type=service --state=running --no-legend --plain 2>/dev/null \
    | awk '{print "service " $1}' | LC_ALL=C sort
fi
