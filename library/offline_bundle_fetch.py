#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module offline_bundle_fetch: download an offline bundle's files, each checked, in one run."""

DOCUMENTATION = r"""
---
module: offline_bundle_fetch
short_description: Download a list of files, each checked against its index's checksum, in one run
description:
  - Runs where playbooks/offline_bundle.yml runs (the machine with access) and downloads the files
    C(offline_bundle_plan) lists - its C(debs), C(rpm_metadata) and C(rpms) - in one module run, where
    C(ansible.builtin.get_url) in a loop is a module run per file.
  - Each file is read as C(ansible.builtin.get_url) reads it (with C(ansible.module_utils.urls) - the proxies
    of the environment, TLS certificates validated, a timeout), without decoding a C(Content-Encoding), hashed
    while it is written to a temporary file in the destination's folder, and renamed over the destination
    only when it has the checksum the index gives; otherwise nothing of it is kept and the run fails,
    naming the file (O(label)), its URL and its destination. Files fetched before stay.
  - A destination that already has the checksum is kept, unread (not changed); one with another checksum
    is fetched again. Missing folders are created. A new file gets mode 0644; a replaced one keeps its
    mode.
options:
  files:
    description:
      - The files, each a dict with C(url), C(dest) (a path on this machine) and C(checksum)
        (C(ALGORITHM:HEX), such as C(sha256:...); a C(hashlib) algorithm - sha1, sha256, sha512, ...). Other
        keys are kept for O(label).
    type: list
    elements: dict
    required: true
  label:
    description: How a file is named in messages, a Python format string of its keys.
    type: str
    default: "{url}"
  timeout:
    description: Seconds to wait for the server, per request (as C(ansible.builtin.get_url)'s).
    type: int
    default: 10
  validate_certs:
    description: Validate the server's TLS certificate.
    type: bool
    default: true
extends_documentation_fragment:
  - module_attributes.no_diff
notes:
  - In check mode nothing is fetched; RV(fetched) lists what would be.
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Each .rpm, checked against primary's checksum
  offline_bundle_fetch:
    files: "{{ bundle.rpms }}"
    label: "{package}-{version}"
"""

RETURN = r"""
fetched:
  description: The destinations written (in check mode - to be written), in the order of O(files).
  type: list
  elements: str
  returned: always
kept:
  description: The destinations that had the checksum already.
  type: list
  elements: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.bundle.fetch import fetch_all
from ansible.module_utils.gpunode.bundle.packages_index import BundleError

ARGUMENT_SPEC = {
    "files": {"type": "list", "elements": "dict", "required": True},
    "label": {"type": "str", "default": "{url}"},
    "timeout": {"type": "int", "default": 10},
    "validate_certs": {"type": "bool", "default": True},
}


def build_module():
    return AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


def main():
    module = build_module()
    params, result = module.params, {"fetched": [], "kept": []}
    request = {name: params[name] for name in ("timeout", "validate_certs")}
    try:
        for dest, fetched in fetch_all(params["files"], params["label"], module.check_mode, **request):
            result["fetched" if fetched else "kept"].append(dest)
    except BundleError as exc:
        module.fail_json(msg=str(exc), changed=bool(result["fetched"]), **result)
    module.exit_json(changed=bool(result["fetched"]), **result)


if __name__ == "__main__":
    main()
