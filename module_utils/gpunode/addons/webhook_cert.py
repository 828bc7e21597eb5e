# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The serving certificate of HAMi's admission webhook, made on the controller.

HAMi's chart (Project-HAMi/HAMi v2.10.0 charts/hami/templates/scheduler/job-patch/
job-createSecret.yaml) makes it with kube-webhook-certgen: a CA and a serving
certificate for ``<service>.<namespace>.svc`` and 127.0.0.1, in the Secret
``<release>-scheduler-tls`` (``tls.crt``, ``tls.key``, ``ca``), whose CA goes
into the MutatingWebhookConfiguration's ``caBundle``. When gpunode applies to a
cluster, the controller makes the same with ``cryptography`` (a dependency of
ansible-core) and keeps it in the cluster as that Secret: :func:`decide` reads
the Secret's certificate and says whether it is still good (valid, for these
names, issued by its CA, more than ``renew_days`` from expiry); only when it is
not does :func:`issue` make a new one, in memory.

Standard library and ``cryptography``; runs on the controller.
"""

import base64
import datetime
import ipaddress

try:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
except ImportError:  # pragma: no cover - ansible-core requires cryptography on the controller
    x509 = None

VALID_DAYS = 365
RENEW_DAYS = 30  # renewed 30 days before it expires
# kube-webhook-certgen's keys with the chart's --cert-name/--key-name (its CA under "ca"), so
# that a Secret the chart's Job made reads the same.
SECRET_KEYS = ("ca", "tls.crt", "tls.key")
_IP_NAMES = ("127.0.0.1",)


class WebhookCertError(ValueError):
    """A certificate that cannot be read or made; the message says which and why."""


def _require():
    if x509 is None:
        raise WebhookCertError(
            "the Python package cryptography is missing where gpu_cluster_addons_webhook_cert runs "
            "(the controller: ansible-core requires it)"
        )


def dns_names(service, namespace):
    """The names the API server calls the webhook by (the chart's ``--host``, without the IP)."""
    return [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


def _b64(data):
    return base64.b64encode(data).decode("ascii")


def _pem_of(data, key):
    value = (data or {}).get(key)
    if not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (ValueError, TypeError):
        raise WebhookCertError(f"Secret data {key}: not base64") from None


def _not_after(cert):
    value = getattr(cert, "not_valid_after_utc", None)  # cryptography >= 42
    if value is None:
        value = cert.not_valid_after.replace(tzinfo=datetime.timezone.utc)
    return value


def _sans(cert):
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return set(ext.get_values_for_type(x509.DNSName)) | {
        str(ip) for ip in ext.get_values_for_type(x509.IPAddress)
    }


def _issued_by(cert, ca):
    if cert.issuer != ca.subject:
        return False
    verify = getattr(cert, "verify_directly_issued_by", None)  # cryptography >= 40
    if verify is None:
        return True
    try:
        verify(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def decide(data, names, now, renew_days=RENEW_DAYS):
    """Keep the Secret's certificate, or make a new one? ``{renew, reason, ca_bundle, not_after}``.

    ``data``: the Secret's ``data`` (base64 values; None or {} when there is no
    Secret). ``ca_bundle`` (base64 PEM of its CA, for the webhook's caBundle)
    and ``not_after`` (ISO 8601) are those of the kept certificate, None when
    it is renewed.
    """
    _require()
    missing = [key for key in SECRET_KEYS if not (data or {}).get(key)]
    if missing:
        whole = len(missing) == len(SECRET_KEYS)
        reason = "no Secret" if whole else f"the Secret has no {', '.join(missing)}"
        return {"renew": True, "reason": reason, "ca_bundle": None, "not_after": None}
    try:
        cert = x509.load_pem_x509_certificate(_pem_of(data, "tls.crt"))
        ca = x509.load_pem_x509_certificate(_pem_of(data, "ca"))
    except ValueError as exc:
        return {"renew": True, "reason": f"its certificate does not load ({exc})", "ca_bundle": None,
                "not_after": None}
    expires = _not_after(cert)
    wanted = set(names) | set(_IP_NAMES)
    problems = []
    if expires - datetime.timedelta(days=renew_days) <= now:
        problems.append(f"it expires {expires.date().isoformat()}, within {renew_days} days")
    if not wanted <= _sans(cert):
        problems.append(f"it is not for {', '.join(sorted(wanted - _sans(cert)))}")
    if not _issued_by(cert, ca):
        problems.append("its ca did not issue it")
    if problems:
        return {"renew": True, "reason": "; ".join(problems), "ca_bundle": None, "not_after": None}
    return {"renew": False, "reason": "valid", "ca_bundle": data["ca"], "not_after": expires.isoformat()}


def _ca_usage():
    return x509.KeyUsage(
        digital_signature=False, content_commitment=False, key_encipherment=False, data_encipherment=False,
        key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
    )


def _name(common_name):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject, issuer, public_key, now, days):
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
    )


def issue(names, now, days=VALID_DAYS):
    """A new CA and serving certificate for ``names`` (and 127.0.0.1): the Secret's ``data`` (base64).

    The keys exist in memory only; the caller hands them to the cluster.
    """
    _require()
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("gpunode-hami-webhook-ca")
    ca = (
        _builder(ca_name, ca_name, ca_key.public_key(), now, days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_ca_usage(), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in _IP_NAMES]
    cert = (
        _builder(_name(names[0]), ca_name, key.public_key(), now, days)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return {
        "ca": _b64(ca.public_bytes(serialization.Encoding.PEM)),
        "tls.crt": _b64(cert.public_bytes(serialization.Encoding.PEM)),
        "tls.key": _b64(key_pem),
    }


def secret(name, namespace, data, labels=None):
    """The Secret object that holds the certificate (Opaque, as kube-webhook-certgen makes it)."""
    meta = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta, "data": dict(data)}


def plan(data, service, namespace, now, renew_days=RENEW_DAYS):
    """``{renew, reason, ca_bundle, not_after, data}``: ``data`` is the Secret's new data when renewed."""
    names = dns_names(service, namespace)
    result = decide(data, names, now, renew_days)
    result["data"] = None
    if result["renew"]:
        result["data"] = issue(names, now)
        result["ca_bundle"] = result["data"]["ca"]
        cert = x509.load_pem_x509_certificate(base64.b64decode(result["data"]["tls.crt"]))
        result["not_after"] = _not_after(cert).isoformat()
    return result
