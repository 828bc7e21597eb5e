# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""HAMi's webhook certificate made on the controller (module_utils/gpunode/addons/webhook_cert.py and
the gpu_cluster_addons_webhook_cert module): kept while valid, renewed 30 days before it expires."""

import base64
import datetime
import importlib

import gpu_cluster_addons_webhook_cert as cert_module
import pytest
from ansible.module_utils.gpunode.addons import webhook_cert

pytestmark = pytest.mark.controller(reason="the certificate is made with the controller's cryptography")
NOW = datetime.datetime(2026, 11, 27, 3, 0, tzinfo=datetime.timezone.utc)
NAMES = webhook_cert.dns_names("hami-scheduler", "kube-system")


def x509_module():
    """cryptography.x509, imported inside the tests: targets' unit virtualenvs have no cryptography."""
    return importlib.import_module("cryptography.x509")


def load(data, key):
    return x509_module().load_pem_x509_certificate(base64.b64decode(data[key]))


def test_a_new_certificate_is_for_the_service_and_issued_by_its_ca():
    x509 = x509_module()
    data = webhook_cert.issue(NAMES, NOW)
    assert sorted(data) == ["ca", "tls.crt", "tls.key"]
    cert, ca = load(data, "tls.crt"), load(data, "ca")
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(sans.get_values_for_type(x509.DNSName)) == {
        "hami-scheduler.kube-system.svc",
        "hami-scheduler.kube-system.svc.cluster.local",
    }
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert cert.issuer == ca.subject
    cert.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert base64.b64decode(data["tls.key"]).startswith(b"-----BEGIN PRIVATE KEY-----")


def test_a_valid_certificate_is_kept_and_gives_its_ca_bundle():
    data = webhook_cert.issue(NAMES, NOW)
    kept = webhook_cert.decide(data, NAMES, NOW + datetime.timedelta(days=300))
    assert (kept["renew"], kept["reason"], kept["ca_bundle"]) == (False, "valid", data["ca"])
    assert kept["not_after"].startswith("2027-11-27")


@pytest.mark.parametrize(
    ("days_later", "renew"),
    [(334, False), (335, True), (366, True)],  # valid 365 days: renewed from 30 days before the end
)
def test_renewed_30_days_before_it_expires(days_later, renew):
    data = webhook_cert.issue(NAMES, NOW)
    decision = webhook_cert.decide(data, NAMES, NOW + datetime.timedelta(days=days_later))
    assert decision["renew"] is renew
    if renew:
        assert "within 30 days" in decision["reason"] and decision["ca_bundle"] is None


def test_a_secret_for_other_names_or_another_ca_or_without_its_key_is_renewed():
    data = webhook_cert.issue(NAMES, NOW)
    moved = webhook_cert.decide(data, webhook_cert.dns_names("hami-scheduler", "gpu"), NOW)
    assert moved["renew"] and "hami-scheduler.gpu.svc" in moved["reason"]
    other_ca = dict(data, ca=webhook_cert.issue(NAMES, NOW)["ca"])
    assert "its ca did not issue it" in webhook_cert.decide(other_ca, NAMES, NOW)["reason"]
    no_key = {k: v for k, v in data.items() if k != "tls.key"}
    assert webhook_cert.decide(no_key, NAMES, NOW)["reason"] == "the Secret has no tls.key"
    assert webhook_cert.decide({}, NAMES, NOW)["reason"] == "no Secret"
    garbage = dict(data, **{"tls.crt": base64.b64encode(b"not a certificate").decode()})
    assert webhook_cert.decide(garbage, NAMES, NOW)["renew"]


def module_args(data):
    return {"certificate": data.get("tls.crt", ""), "ca": data.get("ca", ""), "has_key": "tls.key" in data}


def test_module_renews_without_a_secret_and_keeps_on_the_second_run(run_module):
    ok, first = run_module(cert_module, {})
    assert ok and first["changed"] and first["reason"] == "no Secret"
    secret = first["secret"]
    assert secret["metadata"] == {"name": "hami-scheduler-tls", "namespace": "kube-system"}
    assert secret["data"]["ca"] == first["ca_bundle"]
    # the second run reads what the first one applied: nothing changes
    ok, second = run_module(cert_module, module_args(secret["data"]))
    assert ok and not second["changed"] and second["secret"] is None
    assert second["ca_bundle"] == first["ca_bundle"]


def test_module_in_check_mode_says_what_it_would_do(run_module):
    ok, result = run_module(cert_module, {}, check_mode=True)
    assert ok and result["changed"]  # a real run would apply a new Secret
    data = webhook_cert.issue(NAMES, datetime.datetime.now(datetime.timezone.utc))
    ok, result = run_module(cert_module, module_args(data), check_mode=True)
    assert ok and not result["changed"]
