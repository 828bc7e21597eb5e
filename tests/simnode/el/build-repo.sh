#!/usr/bin/env bash
# Build the RPM side of a simulated EL node, inside its image build (Dockerfile):
#
#   /srv/gpunode-rpm/<repo>/x86_64/   NVIDIA's CUDA repository stand-in (repo: rhel9 | rhel10):
#                                     the driver of every branch in VERSIONS, on rocky9 also the
#                                     older 570 point releases in points (nvidia-driver*,
#                                     kmod-nvidia-{latest,open}-dkms, cuda-drivers[-<b>],
#                                     nvidia-open, nvidia-fabric-manager) and the container
#                                     toolkit, signed; repodata signed (repomd.xml.asc); on
#                                     EL 9 the nvidia-driver module streams (modules.yaml,
#                                     genmodules.py, added with modifyrepo_c); the key as
#                                     D42D0685.pub (the name NVIDIA's key has in its
#                                     repositories) and gpunode-test-rpm.pub
#   /srv/gpunode-rpm/baseos/          the distribution's repository stand-in: kernel-devel,
#                                     kernel-headers, kernel-devel-matched of the running
#                                     kernel, epel-release, python3-dnf-plugin-versionlock
#                                     (Debian's plugin, removed from dnf-plugins-core's files)
#                                     (enabled in the image, gpgcheck)
#   /srv/gpunode-rpm/epel/<major>/x86_64/   EPEL's stand-in: dkms (Debian's dkms inside)
#   /srv/gpunode-rpm/extensions/10/x86_64/  (rhel10 only) RHEL 10.1's extensions repository stand-in:
#                                     Red Hat's signed NVIDIA open modules for the running kernel
#                                     (kmod-nvidia-<kernel> of 580.95.05, specs/kmod-nvidia-signed.spec),
#                                     signed; not configured: a test enables it as
#                                     subscription-manager does (id rhel-10-for-x86_64-extensions-rpms)
#   installed: the release package, gpunode-debian-userland, dracut, kernel-core
#
# Usage: build-repo.sh FLAVOR SRC     (FLAVOR rocky9 | rhel10; SRC the build context copy)
set -euo pipefail
flavor=$1 src=$2
versions=(570.172.08 580.95.05) points=()
case $flavor in
  # points: a pinned point release that is not the branch's newest (molecule/driver-el's rocky9-point)
  rocky9) el_major=9 os_version=9.6 dracut_version=057 points=(570.124.06 570.133.20) ;;
  rhel10) el_major=10 os_version=10.0 dracut_version=103 ;;
  *) echo "build-repo.sh: unknown flavor $flavor" >&2; exit 2 ;;
esac
dist=.el$el_major repo=/srv/gpunode-rpm/rhel$el_major/x86_64
base=/srv/gpunode-rpm/baseos epel=/srv/gpunode-rpm/epel/$el_major/x86_64
repos=("$repo" "$base" "$epel")
kernel=$(uname -r)
kernel_ver=${kernel%%-*}
kernel_rel=${kernel#"$kernel_ver"}
kernel_rel=${kernel_rel#-}
kernel_rel=${kernel_rel//-/_}
kernel_rel=${kernel_rel:-0}
work=$(mktemp -d /tmp/gpunode-rpmbuild.XXXXXX)
mkdir -p "$work/SOURCES" "$work/installed" "$repo" "$base" "$epel"
export GNUPGHOME=$work/gnupg
mkdir -m 0700 "$GNUPGHOME"

rpmb() {  # OUTDIR SPEC [--define ...]
  local outdir=$1 spec=$2
  shift 2
  rpmbuild -bb --quiet --define "_topdir $work" --define "_sourcedir $work/SOURCES" \
    --define "_rpmdir $outdir" --define "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm" \
    --define "dist $dist" "$@" "$src/el/specs/$spec" >/dev/null
}

# the sources: the os-release, Debian's dkms
cp "$src/el/release/$flavor" "$work/SOURCES/os-release"
dkms_version=$(dpkg-query -W -f '${Version}' dkms | sed 's/-.*//')
dpkg-query -L dkms | while read -r path; do if [[ -f $path && ! -L $path ]] || [[ -L $path ]]; then echo "$path"; fi; done >"$work/dkms.files"
tar -cf "$work/dkms.tar" -T "$work/dkms.files" 2>/dev/null
sed -i 's,^,/,;s,^//,/,' "$work/dkms.files"
plugin_version=$(dpkg-query -W -f '${Version}' dnf-plugins-core | sed 's/-.*//')
versionlock_files=(/usr/lib/python3/dist-packages/dnf-plugins/versionlock.py /etc/dnf/plugins/versionlock.conf)
: >/etc/dnf/plugins/versionlock.list
tar -cf "$work/versionlock.tar" "${versionlock_files[@]}" /etc/dnf/plugins/versionlock.list 2>/dev/null

# 1. the node's own packages, installed now
rpmb "$work/installed" el-base.spec --define "flavor $flavor" --define "el_major $el_major" \
  --define "os_version $os_version" --define "dracut_version $dracut_version" --define "kernel $kernel" \
  --define "kernel_ver $kernel_ver" --define "kernel_rel $kernel_rel"
# 2. the distribution's repository and EPEL
rpmb "$base" kernel-devel.spec --define "kernel $kernel" --define "kernel_ver $kernel_ver" --define "kernel_rel $kernel_rel"
rpmb "$base" epel-release.spec --define "el_major $el_major"
rpmb "$base" python3-dnf-plugin-versionlock.spec --define "plugin_version $plugin_version" \
  --define "plugin_tar $work/versionlock.tar"
rpmb "$epel" dkms.spec --define "dkms_version $dkms_version" --define "dkms_tar $work/dkms.tar" \
  --define "dkms_files $work/dkms.files"
# 3. NVIDIA's repository (nvidia-rpms.sh: also built by the offline bundle's EL test)
TMPDIR=$work bash "$src/el/nvidia-rpms.sh" "$src" "$repo" "$el_major" "${versions[@]}" "${points[@]}"
if ((el_major == 10)); then  # RHEL 10.1's extensions repository: Red Hat's signed modules
  repos+=(/srv/gpunode-rpm/extensions/10/x86_64)
  mkdir -p "${repos[3]}"
  rpmb "${repos[3]}" kmod-nvidia-signed.spec --define "kernel $kernel" --define "driver_version ${versions[1]}"
fi

# 4. a throw-away key signs every package and every repository's metadata
gpg --batch --quiet --pinentry-mode loopback --passphrase '' \
  --quick-gen-key 'gpunode-test-rpm <gpunode-test-rpm@example.invalid>' rsa2048 sign never
mkdir -p /etc/pki/rpm-gpg
gpg --batch --armor --export gpunode-test-rpm >/etc/pki/rpm-gpg/RPM-GPG-KEY-gpunode-test
cp /etc/pki/rpm-gpg/RPM-GPG-KEY-gpunode-test "$repo/gpunode-test-rpm.pub"
cp /etc/pki/rpm-gpg/RPM-GPG-KEY-gpunode-test "$repo/D42D0685.pub"
rpms=()
for dir in "${repos[@]}"; do rpms+=("$dir"/*.rpm); done
rpmsign --addsign --define "__gpg /usr/bin/gpg" --define "_gpg_name gpunode-test-rpm" --define "_gpg_path $GNUPGHOME" \
  "${rpms[@]}" "$work/installed"/*.rpm 2>&1 | { grep -v -e GPG_TTY -e "^$" || true; } >&2
for dir in "${repos[@]}"; do
  createrepo_c --quiet --no-database "$dir"
done
if ((el_major == 9)); then
  python3 "$src/el/genmodules.py" "$repo" "$work/modules.yaml"
  modifyrepo_c --mdtype=modules "$work/modules.yaml" "$repo/repodata" >/dev/null
fi
for dir in "${repos[@]}"; do
  gpg --batch --yes --armor --detach-sign --local-user gpunode-test-rpm -o "$dir/repodata/repomd.xml.asc" "$dir/repodata/repomd.xml"
done

# 5. the node: rpm's database where EL keeps it, the key imported, the own packages installed,
# versionlock only in its package
rm -f "${versionlock_files[@]}" /etc/dnf/plugins/versionlock.list
rpmkeys --import /etc/pki/rpm-gpg/RPM-GPG-KEY-gpunode-test
rpm -i --force-debian "$work/installed"/*.rpm 2>/dev/null || rpm -i "$work/installed"/*.rpm
cat >/etc/yum.repos.d/gpunode-baseos.repo <<REPO
# the distribution's repository (BaseOS/AppStream) of the simulated node: a local stand-in
[baseos]
name=gpunode stand-in of the distribution's repository (kernel-devel, kernel-headers, epel-release)
baseurl=file://$base/
enabled=1
gpgcheck=1
repo_gpgcheck=1
gpgkey=file:///etc/pki/rpm-gpg/RPM-GPG-KEY-gpunode-test
REPO
gpgconf --kill gpg-agent >/dev/null 2>&1 || true
rm -rf "$work"
