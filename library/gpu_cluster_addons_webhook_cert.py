#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module gpu_cluster_addons_webhook_cert: keep or renew the serving certificate of HAMi's webhook."""

DOCUMENTATION = r"""
---
module: gpu_cluster_addons_webhook_cert
short_description: Keep or renew the serving certificate of HAMi's admission webhook
description:
  - Reads the certificate of the webhook's Secret (O(certificate) and O(ca) - its C(tls.crt) and C(ca)
    data as kubernetes.core.k8s_info returns them; never its key) and keeps it while it is valid for
    the Service's names, issued by its CA, and more than O(renew_days) days from expiry.
  - Otherwise makes a new CA and serving certificate (for C(<service>.<namespace>.svc),
    C(<service>.<namespace>.svc.cluster.local) and 127.0.0.1) with the Python package cryptography,
    in memory, and returns the Secret to apply. Nothing is written to disk; give the task
    C(no_log) since the result holds the private key.
  - Runs on the controller (the add-ons play's localhost).
requirements:
  - cryptography (ansible-core requires it)
options:
  certificate:
    description: The Secret's C(tls.crt) (base64 PEM); empty when there is no Secret.
    type: str
    default: ""
  ca:
    description: The Secret's C(ca) (base64 PEM).
    type: str
    default: ""
  has_key:
    description: Whether the Secret has a C(tls.key).
    type: bool
    default: false
  secret_name:
    description: Name of the Secret.
    type: str
    default: hami-scheduler-tls
  service:
    description: The webhook's Service.
    type: str
    default: hami-scheduler
  namespace:
    description: Namespace of the Service and the Secret.
    type: str
    default: kube-system
  renew_days:
    description: Renew when the certificate expires within this many days.
    type: int
    default: 30
  labels:
    description: Labels of the Secret.
    type: dict
    default: {}
extends_documentation_fragment:
  - module_attributes.no_diff
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Read the webhook's Secret
  kubernetes.core.k8s_info:
    kind: Secret
    name: hami-scheduler-tls
    namespace: kube-system
  register: current
  no_log: true

- name: Keep or renew its certificate
  gpu_cluster_addons_webhook_cert:
    certificate: "{{ (current.resources | first | default({})).data['tls.crt'] | default('') }}"
    ca: "{{ (current.resources | first | default({})).data['ca'] | default('') }}"
    has_key: "{{ 'tls.key' in (current.resources | first | default({})).data | default({}) }}"
  register: cert
  no_log: true  # a new certificate's Secret holds its key
"""

RETURN = r"""
changed:
  description: Whether a new certificate was made (the Secret must be applied).
  returned: always
  type: bool
reason:
  description: Why the certificate is kept (valid) or renewed (no Secret, expiring, wrong names...).
  returned: always
  type: str
ca_bundle:
  description: Base64 PEM of the CA, for the MutatingWebhookConfiguration's caBundle.
  returned: always
  type: str
not_after:
  description: When the kept or new certificate expires (ISO 8601).
  returned: always
  type: str
secret:
  description: The Secret to apply when renewed (holds the private key), else null.
  returned: always
  type: dict
"""

import datetime

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.addons.webhook_cert import WebhookCertError, plan, secret
from ansible.module_utils.gpunode.host.lock import exit_run


def build_module():
    return AnsibleModule(
        argument_spec={
            "certificate": {"type": "str", "default": ""},
            "ca": {"type": "str", "default": ""},
            "has_key": {"type": "bool", "default": False},
            "secret_name": {"type": "str", "default": "hami-scheduler-tls"},
            "service": {"type": "str", "default": "hami-scheduler"},
            "namespace": {"type": "str", "default": "kube-system"},
            "renew_days": {"type": "int", "default": 30},
            "labels": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )


def run(module, now=None):
    params = module.params
    now = now or datetime.datetime.now(datetime.timezone.utc)
    # the key itself never comes here: the module's arguments may be logged
    key = "x" if params["has_key"] else ""
    current = {"tls.crt": params["certificate"], "ca": params["ca"], "tls.key": key}
    result = plan(current, params["service"], params["namespace"], now, params["renew_days"])
    new = None
    if result["renew"]:
        new = secret(params["secret_name"], params["namespace"], result["data"], params["labels"])
    return {
        "changed": result["renew"],
        "reason": result["reason"],
        "ca_bundle": result["ca_bundle"],
        "not_after": result["not_after"],
        "secret": new,
    }


def main():
    exit_run(build_module(), run, (WebhookCertError,), lock=False)


if __name__ == "__main__":
    main()
