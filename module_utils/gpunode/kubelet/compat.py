# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What stops a kubelet of a given version from starting, besides its gates.

Checked before gpunode restarts a kubelet, so that a restart never turns a
running node into one whose kubelet does not come back:

- flags the kubelet no longer has: an unknown flag makes it exit at start
  (``unknown flag: --pod-infra-container-image``);
- cgroup v1: from 1.35 the kubelet refuses to run on a cgroup v1 host unless
  its configuration sets ``failCgroupV1: false`` (a config-file field: there
  is no command-line flag for it);
- the drop-in configuration directory (``--config-dir``): beta and on by
  default from 1.30, GA in 1.35; a 1.28-1.29 kubelet reads it only with the
  ``KUBELET_CONFIG_DROPIN_DIR_ALPHA`` environment variable.

Sources:

- kubernetes/kubernetes CHANGELOG/CHANGELOG-1.35.md, Urgent Upgrade Notes:
  "Removed the ``--pod-infra-container-image`` flag from ``kubelet`` command
  line ... to prevent startup failures".
- kubernetes/kubernetes cmd/kubelet/app/options/globalflags_linux.go @
  f9cfc9d93491 (1.36 and before: the 18 cAdvisor flags registered as
  deprecated, "it will follow the standard CLI deprecation timeline before
  being removed"); the 1.37 revision registers only ``--housekeeping-interval``
  (``register(global, local, cadvisorflags.HousekeepingInterval)``), so the
  other 18 are unknown flags from 1.37.
- kubernetes/website content/en/docs/concepts/architecture/cgroups.md and the
  kubeadm upgrade page: "For Kubernetes 1.35 the FailCgroupV1 kubelet
  configuration option is set to true by default"; kubespray
  roles/kubernetes/node/templates/kubelet-config.v1beta1.yaml.j2 @ 46dbdd3994b3
  writes ``failCgroupV1`` from 1.35 on.
- KEP-3983 (kubernetes.dev/resources/keps/3983) and the v1.35 blog "Kubelet
  Configuration Drop-in Directory Graduates to GA": alpha 1.28, beta 1.30,
  GA 1.35; cmd/kubelet/app/server.go mergeKubeletConfigurations: files with
  the ``.conf`` extension, walked in lexical order, merged as JSON merge
  patches over the main file (maps such as featureGates merge key by key).

Standard library only; Python 3.8+ (this runs on target hosts).
"""

from ansible.module_utils.gpunode.formats.kube_version import minor as kube_minor

PIP_REMOVED_IN = (1, 35)
CADVISOR_REMOVED_IN = (1, 37)
_CADVISOR_FLAGS = (
    "application-metrics-count-limit",
    "boot-id-file",
    "container-hints",
    "containerd",
    "containerd-namespace",
    "enable-load-reader",
    "event-storage-age-limit",
    "event-storage-event-limit",
    "global-housekeeping-interval",
    "log-cadvisor-usage",
    "machine-id-file",
    "storage-driver-buffer-duration",
    "storage-driver-db",
    "storage-driver-host",
    "storage-driver-password",
    "storage-driver-secure",
    "storage-driver-table",
    "storage-driver-user",
)
# flag name (without --) -> the first minor version whose kubelet refuses it
REMOVED_FLAGS = {"pod-infra-container-image": PIP_REMOVED_IN}
REMOVED_FLAGS.update({name: CADVISOR_REMOVED_IN for name in _CADVISOR_FLAGS})

CGROUP_V1_REFUSED_FROM = (1, 35)
CONFIG_DIR_ON_BY_DEFAULT_FROM = (1, 30)
CONFIG_DIR_ALPHA_FROM = (1, 28)
CONFIG_DIR_ALPHA_ENV = "KUBELET_CONFIG_DROPIN_DIR_ALPHA"
DROPIN_EXTENSION = ".conf"


def flag_name(arg):
    """``--pod-infra-container-image=x`` -> ``pod-infra-container-image``; None for a non-flag."""
    if not arg.startswith("-") or arg in ("-", "--"):
        return None
    return arg.lstrip("-").split("=", 1)[0]


def removed_flags(args, version):
    """Flags of ``args`` that a kubelet of ``version`` no longer has: list of (flag, removed_in)."""
    minor = kube_minor(version)
    found = []
    for arg in args:
        name = flag_name(arg)
        removed = REMOVED_FLAGS.get(name) if name else None
        if removed is not None and minor >= removed:
            found.append((f"--{name}", "{}.{}".format(*removed)))
    return found


def cgroup_version(mountinfo):
    """2 when /sys/fs/cgroup is a cgroup2 mount (the unified hierarchy), else 1; None when unknown.

    ``mountinfo`` is the text of /proc/self/mountinfo: the kubelet asks the
    same question of the filesystem type of /sys/fs/cgroup.
    """
    fstype = None
    for line in (mountinfo or "").splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        if fields[4] == "/sys/fs/cgroup":
            fstype = line.split(" - ", 1)[1].split()[0]
    if fstype is None:
        return None
    return 2 if fstype == "cgroup2" else 1


def cgroup_v1_refusal(version, cgroup, fail_cgroup_v1):
    """Why a kubelet of ``version`` would not start on this host's cgroups, or None.

    ``fail_cgroup_v1`` is the effective ``failCgroupV1`` of its configuration
    (None when not set: the default, true from 1.35).
    """
    if cgroup != 1 or kube_minor(version) < CGROUP_V1_REFUSED_FROM:
        return None
    if fail_cgroup_v1 is False:
        return None
    return (
        "this host runs cgroup v1 and a {}.{} kubelet refuses to start there (failCgroupV1 defaults to "
        'true from 1.35: "kubelet is configured to not run on a host using cgroup v1"); move the host to '
        "cgroup v2, or set failCgroupV1: false in the kubelet's configuration".format(*kube_minor(version))
    )


def config_dir_read(version, environment):
    """Whether a kubelet of ``version`` reads its ``--config-dir`` (``environment``: its environment)."""
    minor = kube_minor(version)
    if minor >= CONFIG_DIR_ON_BY_DEFAULT_FROM:
        return True
    return minor >= CONFIG_DIR_ALPHA_FROM and bool((environment or {}).get(CONFIG_DIR_ALPHA_ENV))
