#!/usr/bin/env bash
# Build a signed, flat apt repository from package trees: the local stand-in
# for NVIDIA's libnvidia-container repository (and any other) in tests.
#
# Usage: tests/simnode/aptrepo/build.sh OUT SRC [SRC...]
#
#   SRC   a directory holding package trees: SRC/<tree>/DEBIAN/control plus the
#         files the package installs (SRC/<tree>/usr/bin/...). Maintainer
#         scripts (DEBIAN/postinst, ...) are made executable here.
#   OUT   created if missing; afterwards it holds exactly
#           <name>_<version>_<arch>.deb   one per tree (dpkg-deb --root-owner-group)
#           Packages, Packages.gz         (dpkg-scanpackages --multiversion)
#           Release, InRelease, Release.gpg   signed with a throw-away ed25519 key
#           gpunode-test-archive.asc      that key's public half, ASCII-armored
#           .gnupg/                       the key (a GNUPGHOME); reused on re-runs
#
# Clients use it exactly like NVIDIA's flat repositories:
#   deb [signed-by=/etc/apt/keyrings/gpunode-test-archive.asc] http://HOST:PORT/ /
# or the deb822 form (Types: deb / URIs: http://HOST:PORT/ / Suites: / / Signed-By: ...).
# (apt accepts an armored .asc keyring in signed-by).
#
# Re-runnable and reproducible: timestamps come from SOURCE_DATE_EPOCH
# (default: the newest mtime under the SRC folders), so a rebuild of unchanged
# trees gives byte-identical .debs and indexes, and the old signatures are kept.
# The last line printed is "aptrepo: changed ..." or "aptrepo: unchanged ...".
# Takes well under a second. Needs: dpkg-deb, dpkg-scanpackages (dpkg-dev), gpg.
set -euo pipefail

if (($# < 2)); then
  echo "usage: $0 OUT SRC [SRC...]" >&2
  exit 2
fi
out=$1
shift
for tool in dpkg-deb dpkg-scanpackages gpg gpgconf gzip sha256sum md5sum; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$0: $tool not found (install dpkg-dev, gpg)" >&2; exit 1; }
done
for src in "$@"; do
  [[ -d $src ]] || { echo "$0: $src is not a directory" >&2; exit 1; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)

if [[ -z ${SOURCE_DATE_EPOCH:-} ]]; then
  SOURCE_DATE_EPOCH=$(find "$@" -printf '%T@\n' | sort -n | tail -n1 | cut -d. -f1)
fi
export SOURCE_DATE_EPOCH

# gpg-agent's socket lives in GNUPGHOME and its path must stay short (~100
# characters), so gpg works in a short copy of OUT/.gnupg that is saved back.
stage=$(mktemp -d /tmp/gpunode-aptrepo.XXXXXX)
export GNUPGHOME=$stage/gnupg
mkdir -m 0700 "$GNUPGHOME" "$stage/repo" "$stage/trees"
cleanup() {
  gpgconf --kill gpg-agent >/dev/null 2>&1 || true
  rm -rf "$stage"
}
trap cleanup EXIT
[[ -d $out/.gnupg ]] && cp -a "$out/.gnupg/." "$GNUPGHOME/"

# 1. one .deb per package tree, built from a normalized copy (modes, mtimes)
count=0
for src in "$@"; do
  for control in "$src"/*/DEBIAN/control; do
    [[ -f $control ]] || continue
    tree=$(dirname "$(dirname "$control")")
    copy=$stage/trees/$count
    cp -a "$tree" "$copy"
    chmod -R u+rwX,go+rX,go-w "$copy"
    for script in preinst postinst prerm postrm config; do
      if [[ -f $copy/DEBIAN/$script ]]; then chmod 0755 "$copy/DEBIAN/$script"; fi
    done
    find "$copy" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
    dpkg-deb --root-owner-group -Zgzip --build "$copy" "$stage/repo" >/dev/null
    count=$((count + 1))
  done
done
if ((count == 0)); then
  echo "$0: no package trees (*/DEBIAN/control) under: $*" >&2
  exit 1
fi

# 2. indexes of a flat repository (Filename: ./<deb>)
(cd "$stage/repo" && dpkg-scanpackages --multiversion . /dev/null 2>/dev/null >Packages)
gzip -9n <"$stage/repo/Packages" >"$stage/repo/Packages.gz"

# 3. Release with checksums of the indexes
{
  echo "Origin: gpunode-test"
  echo "Label: gpunode-test"
  echo "Date: $(LC_ALL=C date -u -R -d "@$SOURCE_DATE_EPOCH")"
  for algo in MD5Sum:md5sum SHA256:sha256sum; do
    echo "${algo%%:*}:"
    for index in Packages Packages.gz; do
      printf ' %s %s %s\n' "$("${algo#*:}" "$stage/repo/$index" | cut -d' ' -f1)" \
        "$(stat -c %s "$stage/repo/$index")" "$index"
    done
  done
} >"$stage/repo/Release"

# 4. the throw-away key (kept across runs); sign unless Release is unchanged
if ! gpg --batch --list-secret-keys gpunode-test-archive >/dev/null 2>&1; then
  gpg --batch --quiet --pinentry-mode loopback --passphrase '' \
    --quick-gen-key 'gpunode-test-archive <gpunode-test-archive@example.invalid>' ed25519 sign never
fi
gpg --batch --quiet --armor --export gpunode-test-archive >"$stage/repo/gpunode-test-archive.asc"
if [[ -f $out/InRelease && -f $out/Release.gpg && -f $out/Release ]] \
   && cmp -s "$out/Release" "$stage/repo/Release" \
   && cmp -s "$out/gpunode-test-archive.asc" "$stage/repo/gpunode-test-archive.asc"; then
  cp -p "$out/InRelease" "$out/Release.gpg" "$stage/repo/"
else
  gpg --batch --quiet --yes --pinentry-mode loopback --passphrase '' --local-user gpunode-test-archive \
    --digest-algo SHA256 --clearsign -o "$stage/repo/InRelease" "$stage/repo/Release"
  gpg --batch --quiet --yes --pinentry-mode loopback --passphrase '' --local-user gpunode-test-archive \
    --digest-algo SHA256 --armor --detach-sign -o "$stage/repo/Release.gpg" "$stage/repo/Release"
fi
gpgconf --kill gpg-agent >/dev/null 2>&1 || true

# 5. replace OUT's contents only where they differ
status=unchanged
for file in "$out"/*; do
  [[ -e $file && ! -e $stage/repo/${file##*/} ]] && { rm -f "$file"; status=changed; }
done
for file in "$stage/repo"/*; do
  if ! cmp -s "$file" "$out/${file##*/}"; then
    cp "$file" "$out/${file##*/}"
    status=changed
  fi
done
rm -rf "$out/.gnupg.new"
mkdir -m 0700 "$out/.gnupg.new"
find "$GNUPGHOME" -mindepth 1 -maxdepth 1 ! -name 'S.*' ! -name '*.lock' ! -name '*~' \
  -exec cp -a {} "$out/.gnupg.new/" \;
rm -rf "$out/.gnupg"
mv "$out/.gnupg.new" "$out/.gnupg"
echo "aptrepo: $status: $count package(s) in $out"
