# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""kube-scheduler's configuration API: which apiVersion each Kubernetes version serves and
prefers, the extender entry gpunode writes, the checks of a configuration, and the names and
paths gpunode uses (part of the scheduler concern; ``scheduler/config.py`` plans the files).

Formats by Kubernetes version: the legacy Policy file (``--policy-config-file``)
up to 1.18; from 1.19 a KubeSchedulerConfiguration (``--config``) in the
apiVersion that version prefers (``SERVED`` below says which versions serve
which apiVersion, with the sources).

Standard library only; Python 3.8+ (this runs on target hosts).
"""


from ansible.module_utils.gpunode.formats.kube_version import minor as kube_minor
from ansible.module_utils.gpunode.formats.kube_version import parse as parse_kube_version

GROUP = "kubescheduler.config.k8s.io"
POLICY = "Policy"
KSC = "KubeSchedulerConfiguration"

# apiVersion -> (first, last) Kubernetes minor that serves it; None: still served.
#   v1beta1  1.19-1.22  beta in 1.19; removed with the Policy API when v1beta3 came in 1.23
#                       (kubernetes/enhancements keps/sig-scheduling/785-scheduler-component-
#                       config-api/README.md, summary and implementation history 2021-09-01)
#   v1beta2  1.22-1.27  introduced in 1.22 (KEP-785); removed in 1.28 (kubernetes/kubernetes#117649)
#   v1beta3  1.23-1.28  introduced in 1.23 (KEP-785); removed in 1.29 (kubernetes/kubernetes#119994)
#   v1       1.25-      GA in 1.25 (KEP-785, 2022-05-18); the only version served from 1.29 on:
#                       staging/src/k8s.io/kube-scheduler/config holds no later version through
#                       the 1.38 cycle (kubernetes/kubernetes, checked 2026-11)
SERVED = {
    "v1beta1": ((1, 19), (1, 22)),
    "v1beta2": ((1, 22), (1, 27)),
    "v1beta3": ((1, 23), (1, 28)),
    "v1": ((1, 25), None),
}
# The last Kubernetes minor the table above was checked against.
CHECKED_THROUGH = (1, 38)
# The Policy API (--policy-config-file) was removed in 1.23 (KEP-785 history, 2021-09-01).
POLICY_REMOVED = (1, 23)

# Written once, at the top of a file this module creates: state=absent deletes only such files.
MARKER = "# Written by gpunode kube_scheduler_extender; state=absent removes this file."
VOLUME_NAME = "gpunode-scheduler-extender"
DEFAULT_CONFIG_PATH = {
    "kubeadm": "/etc/kubernetes/scheduler-extender-config.yaml",
    "rke": "/etc/kubernetes/scheduler-extender-config.yaml",
    "rke2": "/etc/rancher/rke2/scheduler-extender-config.yaml",
}
DEFAULT_KUBECONFIG = {
    "kubeadm": "/etc/kubernetes/scheduler.conf",
    "rke": "/etc/kubernetes/ssl/kubecfg-kube-scheduler.yaml",
    "rke2": "/var/lib/rancher/rke2/server/cred/scheduler.kubeconfig",
}
DEFAULT_MANIFEST = "/etc/kubernetes/manifests/kube-scheduler.yaml"
DEFAULT_RKE2_CONFIG = "/etc/rancher/rke2/config.yaml"
# Flags RKE1 and RKE2 give kube-scheduler themselves (not visible on the host): their
# meaning goes into a new --config file, which makes the scheduler ignore them.
FLAVOR_FLAGS = {"rke": {"leader-elect": "true", "profiling": "false"}, "rke2": {"profiling": "false"}}
# Top-level fields whose meaning is the same in every KubeSchedulerConfiguration version:
# a file holding only these may be moved to a served apiVersion by rewriting apiVersion.
PORTABLE_FIELDS = {
    "apiVersion", "kind", "clientConnection", "leaderElection", "extenders", "parallelism",
    "percentageOfNodesToScore", "podInitialBackoffSeconds", "podMaxBackoffSeconds",
    "enableProfiling", "enableContentionProfiling",
}
INSECURE_FIELDS = ("healthzBindAddress", "metricsBindAddress")
SKELETON_FIELDS = {
    "apiVersion", "kind", "clientConnection", "leaderElection", "enableProfiling",
    "enableContentionProfiling", *INSECURE_FIELDS,
}


class KubeSchedulerError(Exception):
    """Refusal or bad input; the message names the file and the problem."""


# ---------------------------------------------------------------- versions

def parse_version(text):
    """``"v1.28.9+rke2r1"`` -> ``(1, 28)``; raises KubeSchedulerError naming kubernetes_version."""
    version = parse_kube_version(text, KubeSchedulerError, "kubernetes_version")
    if version[0] != 1:
        raise KubeSchedulerError(f"kubernetes_version {text!r}: expected a Kubernetes 1.x version")
    return kube_minor(version)


def served(api_version, version):
    low, high = SERVED[api_version]
    return low <= version and (high is None or version <= high)


def preferred_api(version):
    """apiVersion (short: v1beta1 ... v1) to write for a new file, or POLICY."""
    if version <= (1, 18):
        return POLICY
    if version <= (1, 21):
        return "v1beta1"
    if version == (1, 22):
        return "v1beta2"
    if version <= (1, 24):
        return "v1beta3"
    return "v1"


def split_api_version(api_version):
    """``"group/version"`` -> ``(group, version)``; ``("", "")`` parts where missing."""
    parts = str(api_version).partition("/")
    return parts[0], parts[2]


def api_name(short):
    return POLICY if short == POLICY else f"{GROUP}/{short}"


def served_list(version):
    return ", ".join(api_name(api) for api in SERVED if served(api, version)) or "none"


def version_warnings(version):
    if version > CHECKED_THROUGH:
        return [f"Kubernetes {version[0]}.{version[1]} is newer than gpunode's table of scheduler "
                f"configuration versions (checked through {CHECKED_THROUGH[0]}.{CHECKED_THROUGH[1]}): "
                f"writing {api_name(preferred_api(version))}, the newest apiVersion known to be served"]
    return []


# ---------------------------------------------------------------- the extender entry

def extender_entry(extender, fmt):
    """The extender as it appears in a KubeSchedulerConfiguration or (fmt POLICY) a Policy."""
    entry = {"urlPrefix": extender["url_prefix"], "filterVerb": extender["filter_verb"]}
    if extender.get("bind_verb"):
        entry["bindVerb"] = extender["bind_verb"]
    entry["enableHttps" if fmt == POLICY else "enableHTTPS"] = bool(extender["enable_https"])
    if extender["enable_https"] and extender.get("tls_insecure"):
        # the extender's certificate is not checked: HAMi's chart (scheduler/configmap.yaml at
        # v2.10.0) calls its webhook-serving extender this way; same key in a Policy
        entry["tlsConfig"] = {"insecure": True}
    entry["nodeCacheCapable"] = bool(extender["node_cache_capable"])
    if extender.get("managed_resources"):
        entry["managedResources"] = [
            {"name": r["name"], "ignoredByScheduler": bool(r.get("ignored_by_scheduler", False))}
            for r in extender["managed_resources"]]
    entry["ignorable"] = bool(extender["ignorable"])
    return entry


def check_extender(extender):
    """Refuse settings kube-scheduler would refuse or that mean nothing."""
    url = str(extender.get("url_prefix") or "")
    if not url.startswith(("http://", "https://")):
        raise KubeSchedulerError(f"extender url_prefix {url!r}: must be an http:// or https:// URL")
    if not extender.get("filter_verb"):
        raise KubeSchedulerError("extender filter_verb: must not be empty")
    for resource in extender.get("managed_resources") or []:
        if not resource.get("name"):
            raise KubeSchedulerError("extender managed_resources: every resource needs a name")


def _resource_names(entry):
    return {r.get("name") for r in entry.get("managedResources") or [] if isinstance(r, dict)}


def find_ours(extenders, entry):
    """Index of our extender (same urlPrefix, or one of our managed resources), or None."""
    names = _resource_names(entry)
    for index, item in enumerate(extenders):
        if isinstance(item, dict) and (item.get("urlPrefix") == entry["urlPrefix"]
                                       or names & _resource_names(item)):
            return index
    return None


def validate_config(data, version, path):
    """Check what kube-scheduler would refuse for this version; raise naming path."""
    if not isinstance(data, dict):
        raise KubeSchedulerError(f"{path}: not a mapping")
    kind = data.get("kind")
    if kind == POLICY:
        if version >= POLICY_REMOVED:
            raise KubeSchedulerError(f"{path}: Policy files are not read by Kubernetes "
                                     f"{version[0]}.{version[1]} (removed in 1.23)")
    elif kind == KSC:
        group, api = split_api_version(data.get("apiVersion"))
        if group != GROUP or api not in SERVED or not served(api, version):
            raise KubeSchedulerError(f"{path}: apiVersion {data.get('apiVersion')} is not served by "
                                     f"Kubernetes {version[0]}.{version[1]} (served: {served_list(version)})")
        if not (data.get("clientConnection") or {}).get("kubeconfig"):
            raise KubeSchedulerError(f"{path}: clientConnection.kubeconfig is empty; with --config "
                                     "kube-scheduler ignores --kubeconfig")
        for field in INSECURE_FIELDS:
            if field in data and api not in ("v1beta1", "v1beta2"):
                raise KubeSchedulerError(f"{path}: {field} does not exist in {data['apiVersion']}")
            if field in data and version >= (1, 23) and data[field] not in ("", None) \
                    and not str(data[field]).endswith(":0"):
                raise KubeSchedulerError(f"{path}: {field} must be empty or port 0 from Kubernetes 1.23")
    else:
        raise KubeSchedulerError(f"{path}: kind {kind!r} is neither {KSC} nor {POLICY}")
    extenders = data.get("extenders") or []
    if not isinstance(extenders, list):
        raise KubeSchedulerError(f"{path}: extenders is not a list")
    binders, names = [], set()
    for item in extenders:
        if not isinstance(item, dict) or not item.get("urlPrefix"):
            raise KubeSchedulerError(f"{path}: an extender without urlPrefix")
        if kind == KSC and "enableHttps" in item:
            raise KubeSchedulerError(f"{path}: extender {item['urlPrefix']}: enableHttps is spelled "
                                     "enableHTTPS in a KubeSchedulerConfiguration")
        if item.get("bindVerb"):
            binders.append(item["urlPrefix"])
        for name in _resource_names(item):
            if name in names:
                raise KubeSchedulerError(f"{path}: managed resource {name} is claimed by two extenders")
            names.add(name)
    if len(binders) > 1:
        raise KubeSchedulerError(f"{path}: only one extender may bind pods; bindVerb is set on "
                                 + " and ".join(binders))
