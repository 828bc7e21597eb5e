# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Restart a service, wait until it is healthy, roll back when it is not.

The one shape every gpunode restart has (Docker after daemon.json, containerd
after its drop-in, the kubelet after its gates, kube-scheduler after its
manifest): restart, then wait until every health check passes; when they do
not within the timeout, put the files back from their backups, restart again,
wait again, and fail saying what happened. The module ``verified_restart``
runs it on the node; the decisions and the messages are here, free of
Ansible, so they are tested without a node.

A health check is an HTTP URL that must answer 200, or a command that must
exit 0 with stdout matching every ``expect`` regular expression (``docker
info`` listing the nvidia runtime, ``containerd config dump`` declaring it).

Standard library and ansible.module_utils only; Python 3.8+ (this runs on target hosts).
"""

import re
import time
import urllib.error

from ansible.module_utils.urls import ConnectionError as UrlConnectionError
from ansible.module_utils.urls import open_url


class HealthCheckError(Exception):
    """Bad check definitions; the message says which and why."""


def compile_expectations(patterns):
    """Regular expressions of ``expect``; a bad one raises HealthCheckError naming it."""
    compiled = []
    for pattern in patterns or []:
        try:
            compiled.append(re.compile(pattern, re.MULTILINE))
        except re.error as exc:
            raise HealthCheckError(f"expect {pattern!r}: not a regular expression: {exc}") from exc
    return compiled


def unmet_expectations(stdout, compiled):
    """The patterns of ``compiled`` that ``stdout`` does not match."""
    return [regex.pattern for regex in compiled if not regex.search(stdout or "")]


def probe_url(url, validate_certs=True, timeout=5.0, opener=open_url):
    """None when ``url`` answers 200, else what went wrong."""
    try:
        response = opener(url, timeout=timeout, validate_certs=validate_certs)
        with response:
            status = response.status if hasattr(response, "status") else response.getcode()
    except urllib.error.HTTPError as exc:
        return f"{url} answered {exc.code}"
    except (urllib.error.URLError, UrlConnectionError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"{url}: {reason}"
    if status != 200:
        return f"{url} answered {status}"
    return None


def command_problem(argv, rc, stdout, stderr, compiled):
    """None when a command check passed, else what went wrong."""
    name = " ".join(argv)
    if rc != 0:
        detail = (stderr or stdout or "").strip().splitlines()
        return f"{name} exited {rc}" + (f": {detail[-1]}" if detail else "")
    unmet = unmet_expectations(stdout, compiled)
    if unmet:
        return f"{name} does not report {', '.join(repr(p) for p in unmet)}"
    return None


def wait_until(probe, timeout, interval, clock=time.monotonic, sleep=time.sleep):
    """Call ``probe()`` (None means healthy, else a problem) until healthy or ``timeout``.

    Returns ``(healthy, last_problem, attempts)``. The probe runs at least once.
    """
    deadline = clock() + max(0.0, float(timeout))
    attempts = 0
    while True:
        attempts += 1
        problem = probe()
        if problem is None:
            return True, None, attempts
        if clock() + interval > deadline:
            return False, problem, attempts
        sleep(interval)


def failure_message(*, service, reason, timeout, problem, restored, healthy_after, journal):
    """What the module says when the service did not come back."""
    who = service or "the service"
    parts = [f"{who} was not healthy within {timeout} s after {reason}: {problem}."]
    if restored:
        outcome = "healthy again" if healthy_after else "STILL NOT HEALTHY"
        parts.append(f"Restored {', '.join(restored)} from the backups; {who} is {outcome}.")
    else:
        parts.append("Nothing was restored (no backups given).")
    if journal:
        parts.append(f"Last log lines of {who}:\n{journal.rstrip()}")
    return " ".join(parts)
