# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Who the kubelet is to the API server: its kubeconfig, its credentials and its Node's name.

One function, :func:`identity`, for every caller that speaks for the node (the Node condition,
the drain, the closing table):

- the kubeconfig: the running kubelet's ``--kubeconfig``, else the first that exists of
  kubeadm's ``/etc/kubernetes/kubelet.conf`` (kubeadm's kubelet drop-in passes
  ``--kubeconfig=/etc/kubernetes/kubelet.conf``), RKE2's and k3s' agent kubeconfigs
  (``<data-dir>/agent/kubelet.kubeconfig``, written by k3s' ``pkg/agent/config/config.go``
  (``kubeconfigKubelet``, k3s-io/k3s@001a6d94), which RKE2 embeds with data dir
  ``/var/lib/rancher/rke2``); its current context's cluster (``server``,
  ``certificate-authority[-data]``) and user (``client-certificate[-data]``,
  ``client-key[-data]``; relative paths are relative to the kubeconfig, as kubectl reads them);
- the node's name: the client certificate's subject CN ``system:node:NAME`` (the Node
  authorizer's identity, https://kubernetes.io/docs/reference/access-authn-authz/node/), else the
  kubelet's ``--hostname-override``, else the hostname, lower-cased as the kubelet does.

The CN is read from the certificate's DER with a few lines of the standard library: Python's
``ssl`` parses no certificate file publicly (``_ssl._test_decode_cert`` is private), cryptography
and the openssl program are not on every node; the subject is the fifth field of
``tbsCertificate`` after the optional version (RFC 5280, 4.1).

Python 3.8+, standard library and PyYAML (python3-yaml): runs on targets.
"""

import base64
import binascii
import os
import socket
from collections import namedtuple

from ansible.module_utils.gpunode.formats.yaml_text import YAML_IMPORT_ERROR, YamlEditError, load
from ansible.module_utils.gpunode.host.processes import PROC, scan
from ansible.module_utils.gpunode.kubelet.flags import flag_value

KUBECONFIGS = (
    "/etc/kubernetes/kubelet.conf",  # kubeadm
    "/var/lib/rancher/rke2/agent/kubelet.kubeconfig",  # RKE2
    "/var/lib/rancher/k3s/agent/kubelet.kubeconfig",  # k3s
)
NODE_USER = "system:node:"
_COMMON_NAME_OID = b"\x55\x04\x03"  # 2.5.4.3

Identity = namedtuple(
    "Identity", "kubeconfig node_name named_by server ca_file ca_data client_file client_data")


class IdentityError(Exception):
    """The kubelet's kubeconfig or credentials cannot be read; the message names the file."""


class NoKubeconfig(IdentityError):
    """No kubelet kubeconfig on the node: it is not registered in a cluster."""


def identity(host, kubeconfig=None, node_name=None, proc_root=PROC):
    """The kubelet's :class:`Identity`; ``kubeconfig`` and ``node_name`` win when given."""
    processes = scan("kubelet", proc_root)
    argv = processes[-1].argv if processes else []
    # a running kubelet's --kubeconfig that is not there yet (a kubelet before kubeadm join, or
    # bootstrapping): the node is not registered
    candidates = (flag_value(argv, "kubeconfig"), *KUBECONFIGS)
    path = kubeconfig or next((p for p in candidates if p and host.exists(p)), None)
    if path is None:
        raise NoKubeconfig("no kubelet kubeconfig: no running kubelet's --kubeconfig and none of "
                           + ", ".join(KUBECONFIGS) + " exists; pass kubeconfig")
    cluster, user = _current(_read(host, path), path)
    folder = os.path.dirname(path)
    ca_file, ca_data = _either(host, cluster, "certificate-authority", folder, path)
    cert_file, cert_data = _either(host, user, "client-certificate", folder, path)
    key_file, key_data = _either(host, user, "client-key", folder, path)
    if not cluster.get("server") or not (cert_file or cert_data) or not (key_file or key_data):
        raise IdentityError(f"{path}: its current context has no server or no client certificate and key")
    certificate = cert_data or _read(host, cert_file)
    client_data = None if cert_file and key_file else "\n".join(
        (certificate, key_data or _read(host, key_file)))
    named_by = "node_name"
    if not node_name:
        node_name, named_by = node_name_of(certificate, argv, socket.gethostname())
    return Identity(path, node_name, named_by, cluster["server"].rstrip("/"), ca_file, ca_data,
                    (cert_file, key_file) if client_data is None else None, client_data)


def node_name_of(certificate_pem, kubelet_argv, hostname):
    """(name, what named it): the certificate's ``system:node:`` CN, --hostname-override, the hostname."""
    common_name = subject_common_name(certificate_pem) or ""
    if common_name.startswith(NODE_USER):
        return common_name[len(NODE_USER):], "client certificate"
    override = (flag_value(kubelet_argv, "hostname-override") or "").strip()
    if override:
        return override.lower(), "--hostname-override"
    return hostname.strip().lower(), "hostname"


def subject_common_name(pem):
    """The subject CN of the first certificate of ``pem`` text, or None when there is none."""
    begin, end = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"
    if begin not in pem:
        return None
    try:
        der = base64.b64decode(pem.split(begin, 1)[1].split(end, 1)[0])
        tbs = _children(der, *_tlv(der, 0)[1:])[0]
        fields = _children(der, tbs[1], tbs[2])
        subject = fields[5 if fields[0][0] == 0xA0 else 4]  # [0] version is optional
        for rdn in _children(der, subject[1], subject[2]):
            for attribute in _children(der, rdn[1], rdn[2]):
                oid, value = _children(der, attribute[1], attribute[2])[:2]
                if der[oid[1]:oid[2]] == _COMMON_NAME_OID:
                    return der[value[1]:value[2]].decode("utf-8")
    except (binascii.Error, IndexError, ValueError):
        return None
    return None


def _tlv(der, at):
    """(tag, content start, content end) of the DER element at ``at``."""
    tag, length, at = der[at], der[at + 1], at + 2
    if length & 0x80:
        count = length & 0x7F
        length, at = int.from_bytes(der[at:at + count], "big"), at + count
    if at + length > len(der):
        raise ValueError("truncated DER")
    return tag, at, at + length


def _children(der, start, end):
    """The (tag, content start, content end) of each element between ``start`` and ``end``."""
    found = []
    while start < end:
        found.append(_tlv(der, start))
        start = found[-1][2]
    return found


def _read(host, path):
    text = host.read_text(path)
    if text is None:
        raise IdentityError(f"{path}: does not exist")
    return text


def _current(text, path):
    """(cluster, user) of the kubeconfig's current context."""
    if YAML_IMPORT_ERROR is not None:
        raise IdentityError(f"{path} is YAML and this node's Python has no PyYAML (python3-yaml)")
    try:
        config = load(text)
    except YamlEditError as exc:
        raise IdentityError(f"{path}: {exc}") from None

    def named(kind, name):
        for item in (config or {}).get(kind + "s") or []:
            if isinstance(item, dict) and item.get("name") == name and isinstance(item.get(kind), dict):
                return item[kind]
        raise IdentityError(f"{path}: no {kind} {name!r} (current-context {current!r})")

    current = (config or {}).get("current-context") if isinstance(config, dict) else None
    context = named("context", current)
    return named("cluster", context.get("cluster")), named("user", context.get("user"))


def _either(host, section, key, folder, path):
    """(file, None) or (None, text) of ``key`` / ``key-data``; (None, None) when neither is set."""
    if section.get(key + "-data"):
        try:
            return None, base64.b64decode(section[key + "-data"], validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise IdentityError(f"{path}: {key}-data is not base64 of PEM text") from None
    if section.get(key):
        return os.path.join(folder, section[key]), None
    return None, None
