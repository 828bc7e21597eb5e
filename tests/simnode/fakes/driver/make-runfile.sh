#!/bin/sh
# Write a fake NVIDIA-Linux-x86_64-VERSION.run into OUTDIR (see runfile.sh and
# README.md). Usage: make-runfile.sh VERSION OUTDIR. Prints the file's path.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 VERSION OUTDIR" >&2; exit 2; }
version=$1 out=$2 here=$(cd "$(dirname "$0")" && pwd)
echo "$version" | grep -Eq '^[0-9]+\.[0-9]+(\.[0-9]+)?$' || { echo "$0: bad version $version" >&2; exit 2; }
mkdir -p "$out"
run=$out/NVIDIA-Linux-x86_64-$version.run
payload() {
  echo "payload_$1() {"
  echo "cat <<'__PAYLOAD__'"
  sed "s/@VERSION@/$version/g" "$2"
  echo "__PAYLOAD__"
  echo "}"
}
{
  echo "#!/bin/sh"
  echo "VERSION=$version"
  payload nvidia_smi "$here/bin/nvidia-smi"
  payload nvidia_persistenced "$here/bin/nvidia-persistenced"
  payload fake_build "$here/src/fake-build.sh"
  payload dkms_conf "$here/src/dkms.conf"
  cat "$here/runfile.sh"
} >"$run.tmp"
chmod 0755 "$run.tmp"
mv "$run.tmp" "$run"
echo "$run"
