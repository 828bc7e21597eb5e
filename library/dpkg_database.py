#!/usr/bin/python
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ansible module dpkg_database: holds and interrupted runs, waiting for the dpkg lock."""

DOCUMENTATION = r"""
---
module: dpkg_database
short_description: Hold and release packages and finish an interrupted dpkg run, waiting for the dpkg lock
description:
  - Sets the dpkg selection of O(hold) to C(hold) and of O(unhold) to C(install), changing only those that
    differ. Unlike C(ansible.builtin.dpkg_selections) it waits up to O(lock_timeout) seconds for dpkg's
    frontend lock (C(lock-frontend), the lock apt and dpkg take), so a concurrent apt or dpkg run delays it
    rather than failing it.
  - With O(configure_pending), finishes what an interrupted dpkg run left (C(dpkg --configure -a)) when dpkg's
    journal has entries or packages are left half-installed or half-configured - what apt refuses to work
    on with "dpkg was interrupted, you must manually run 'dpkg --configure -a'". Done before the holds.
  - A package to hold that is not installed fails the task (nothing is changed), except in check mode where
    an install of it may only have been simulated - it is reported as held then.
options:
  hold:
    description: Packages to hold.
    type: list
    elements: str
    default: []
  unhold:
    description: Packages to release from their hold.
    type: list
    elements: str
    default: []
  configure_pending:
    description: Finish an interrupted dpkg run first (C(dpkg --configure -a)).
    type: bool
    default: false
  lock_timeout:
    description: Seconds to wait for the dpkg frontend lock.
    type: int
    default: 300
  admindir:
    description: dpkg's database directory.
    type: path
    default: /var/lib/dpkg
extends_documentation_fragment:
  - module_attributes
requirements:
  - dpkg
author:
  - gpunode maintainers (@gpunode)
"""

EXAMPLES = r"""
- name: Finish an interrupted dpkg run, then hold the driver
  dpkg_database:
    configure_pending: true
    hold: [nvidia-headless-580-server, nvidia-utils-580-server]
"""

RETURN = r"""
held:
  description: Packages this run put on hold.
  returned: always
  type: list
  elements: str
released:
  description: Packages this run released from their hold.
  returned: always
  type: list
  elements: str
configured:
  description: Why C(dpkg --configure -a) ran (empty when it did not).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.gpunode.host.commands import Host
from ansible.module_utils.gpunode.host.lock import exit_run
from ansible.module_utils.gpunode.host.packages import (
    FRONTEND_LOCKED_ENV,
    Apt,
    DpkgError,
    FrontendLock,
    installed,
    interrupted,
)


def build_module():
    return AnsibleModule(
        argument_spec={
            "hold": {"type": "list", "elements": "str", "default": []},
            "unhold": {"type": "list", "elements": "str", "default": []},
            "configure_pending": {"type": "bool", "default": False},
            "lock_timeout": {"type": "int", "default": 300},
            "admindir": {"type": "path", "default": "/var/lib/dpkg"},
        },
        supports_check_mode=True,
    )


def read_packages(module):
    module.get_bin_path("dpkg-query", required=True)
    try:
        return Apt(Host(module), module.params["admindir"]).packages()
    except DpkgError as exc:
        module.fail_json(msg=str(exc))


def dpkg(module, args, data=None):
    binary = module.get_bin_path("dpkg", required=True)
    rc, out, err = Host(module).run([binary, f"--admindir={module.params['admindir']}", *args], data=data,
                                    environ=FRONTEND_LOCKED_ENV)
    if rc != 0:
        module.fail_json(msg=f"dpkg {' '.join(args)} failed (rc {rc}): {err.strip() or out.strip()}")
    return out


def run(module):
    params = module.params
    packages = read_packages(module)
    result = {"changed": False, "held": [], "released": [], "configured": []}
    if params["configure_pending"]:
        result["configured"] = interrupted(packages, params["admindir"])
    missing = [name for name in params["hold"] if not installed(packages, name)]
    if missing and not module.check_mode and not result["configured"]:
        module.fail_json(msg=f"cannot hold {', '.join(missing)}: not installed; nothing was changed",
                         **result)

    def want(name):
        return (packages.get(name) or {}).get("want")

    result["held"] = [name for name in params["hold"] if want(name) != "hold"]
    result["released"] = [name for name in params["unhold"] if want(name) == "hold"]
    result["changed"] = bool(result["configured"] or result["held"] or result["released"])
    if module._diff and result["changed"]:
        result["diff"] = {
            "before": "".join(f"{n} {(packages.get(n) or {}).get('want', 'unknown')}\n"
                              for n in result["held"] + result["released"]),
            "after": "".join([f"{n} hold\n" for n in result["held"]]
                             + [f"{n} install\n" for n in result["released"]]),
        }
    if module.check_mode or not result["changed"]:
        return result
    with FrontendLock(params["admindir"], timeout=params["lock_timeout"]):
        if result["configured"]:
            dpkg(module, ["--configure", "-a"])
            packages = read_packages(module)
            missing = [name for name in params["hold"] if not installed(packages, name)]
            if missing:
                module.fail_json(msg=f"cannot hold {', '.join(missing)}: not installed (dpkg --configure -a "
                                     "ran first)", **result)
        selections = [f"{name} hold" for name in result["held"]]
        selections += [f"{name} install" for name in result["released"]]
        if selections:
            dpkg(module, ["--set-selections"], data="\n".join(selections) + "\n")
    return result


def main():
    exit_run(build_module(), run, (DpkgError,), lock=False)


if __name__ == "__main__":
    main()
