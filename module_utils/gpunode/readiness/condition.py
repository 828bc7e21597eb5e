# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A Node condition set with the kubelet's own credentials (module gpu_node_condition).

The NodeRestriction admission plugin lets a kubelet patch its own Node's status, never its
taints (kubernetes plugin/pkg/admission/noderestriction/admission.go), so the node publishes a
condition and the Node Readiness Controller maps it to a taint. The write is what Node Problem
Detector sends: a strategic-merge patch of ``/api/v1/nodes/NAME/status`` holding only this
condition (``status.conditions`` merges by ``type``: patchMergeKey of NodeStatus.Conditions in
k8s.io/api core/v1 types.go), so every other condition stays as it is.

- :func:`plan`: the condition to hold and the patch to send (None when the Node's condition
  already has that status, reason and message). ``lastTransitionTime`` moves only when the
  status changes; ``lastHeartbeatTime`` is now.
- :func:`plan_labels`: labels of the Node (a kubelet may set its own Node's labels outside the
  ``kubernetes.io`` and ``k8s.io`` namespaces, NodeRestriction again) set only where no other field
  manager owns them (``metadata.managedFields``): what GPU Feature Discovery or an operator set stays
  theirs; a label is removed only where gpunode owns it.
- :class:`NodeApi`: GET and PATCH over HTTPS with the kubelet's client certificate; errors name
  the server, the node and the kubeconfig.

Python 3.8+, standard library: runs on targets.
"""

import datetime
import http.client
import json
import re
import ssl
import urllib.parse

from ansible.module_utils.gpunode.formats.values import refuse, string

PATCH_TYPE = "application/strategic-merge-patch+json"
#: The field manager of gpunode's writes to a Node's labels (``?fieldManager=``).
FIELD_MANAGER = "gpunode"
STATUSES = ("True", "False", "Unknown")
_CAMEL_CASE = re.compile(r"[A-Z][A-Za-z0-9]*")
CAMEL_CASE_RULE = "CamelCase: a capital letter, then letters and digits (Kubernetes API conventions, Reason)"


def verdict(passed, message="", pod_follows=False):
    """(status, reason, message) a node publishes after its validation: ``True``/``Passed``, or
    ``False``/``ValidationFailed`` with the failure; where a CUDA validation pod follows (the add-ons
    play's: ``pod_follows``), a node that passed stays ``False``/``ValidationPodPending`` until the
    add-ons play publishes its pod's verdict (validate/gate.py ``POD_VERDICTS``)."""
    if not passed:
        return "False", "ValidationFailed", message or "the GPU validation failed"
    if pod_follows:
        return "False", "ValidationPodPending", "the GPU validation passed; its CUDA validation pod runs next"
    return "True", "Passed", "the GPU validation passed"


class ConditionError(Exception):
    """The request failed or was refused; the message names the server and the node."""


def reason(option, value):
    """A condition's reason: CamelCase, as the API conventions ask; refused otherwise."""
    if not _CAMEL_CASE.fullmatch(string(option, value, "a CamelCase reason", CAMEL_CASE_RULE)):
        refuse(option, value, "a CamelCase reason", CAMEL_CASE_RULE)
    return value


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def find(node, condition_type):
    """The Node's condition of ``condition_type``, or None."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == condition_type:
            return condition
    return None


def plan(current, wanted, time):
    """(condition, patch): ``wanted`` holds type, status, reason and message; patch None: nothing to send."""
    fields = ("status", "reason", "message")
    if current is not None and all(current.get(k, "") == wanted[k] for k in fields):
        return current, None
    kept = current and current.get("status") == wanted["status"] and current.get("lastTransitionTime")
    condition = dict(wanted, lastHeartbeatTime=time,
                     lastTransitionTime=current["lastTransitionTime"] if kept else time)
    return condition, {"status": {"conditions": [condition]}}


def label_owners(node, key):
    """The field managers that own ``metadata.labels[key]`` of ``node`` (its ``managedFields``)."""
    owners = set()
    for entry in (node.get("metadata") or {}).get("managedFields") or []:
        labels = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {}
        if f"f:{key}" in labels:
            owners.add(entry.get("manager") or "?")
    return sorted(owners)


def plan_labels(node, wanted):
    """``(patch, said)``: the strategic-merge patch that gives the Node the ``wanted`` labels (a value
    None: absent) where no other field manager owns them, None when nothing changes; ``said`` tells,
    per label, ``set``, ``removed``, ``unchanged`` or ``left to <managers>``."""
    have = (node.get("metadata") or {}).get("labels") or {}
    labels, said = {}, {}
    for key, value in sorted(wanted.items()):
        owners = label_owners(node, key)
        others = [owner for owner in owners if owner != FIELD_MANAGER]
        if have.get(key) == value:
            said[key] = "unchanged"
        elif not others and (FIELD_MANAGER in owners or key not in have):
            labels[key] = value
            said[key] = "removed" if value is None else "set"
        else:
            said[key] = "left to " + (", ".join(others) or "whoever set it (no field manager recorded)")
    return ({"metadata": {"labels": labels}} if labels else None), said


class NodeApi:
    """The API server's Node endpoints as the kubelet (``kubelet/identity.py`` Identity).

    ``write_private(name, text) -> path``: a file only this process reads (the module's temp
    folder), for client credentials that the kubeconfig holds as data (``ssl`` loads files only).
    """

    def __init__(self, who, write_private, timeout=30):
        self.who = who
        self.timeout = timeout
        self.url = urllib.parse.urlsplit(who.server)
        try:
            self.context = ssl.create_default_context(cafile=who.ca_file, cadata=who.ca_data)
            cert, key = who.client_file or (write_private("kubelet-client.pem", who.client_data), None)
            self.context.load_cert_chain(cert, key)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise ConditionError(f"{who.kubeconfig}: its certificate authority or client certificate and key "
                                 f"cannot be loaded: {exc}") from None

    def _where(self):
        return f"node {self.who.node_name} at {self.who.server} (kubeconfig {self.who.kubeconfig})"

    def request(self, method, path, body=None):
        """The decoded JSON answer of ``method path``; ConditionError for anything but 2xx."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = PATCH_TYPE
            body = json.dumps(body).encode("utf-8")
        connection = http.client.HTTPSConnection(
            self.url.hostname, self.url.port or 443, timeout=self.timeout, context=self.context)
        try:
            connection.request(method, self.url.path.rstrip("/") + path, body=body, headers=headers)
            response = connection.getresponse()
            status, text = response.status, response.read().decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as exc:
            raise ConditionError(f"cannot reach the API server for {self._where()}: {exc}") from None
        finally:
            connection.close()
        if 200 <= status < 300:
            return json.loads(text)
        try:
            message = json.loads(text).get("message") or text
        except ValueError:
            message = text
        what = {403: "forbidden", 404: "not found", 401: "unauthorized"}.get(status, f"HTTP {status}")
        raise ConditionError(f"{method} {path}: {what} ({status}) for {self._where()}: {message.strip()}")

    def get_node(self):
        return self.request("GET", "/api/v1/nodes/" + urllib.parse.quote(self.who.node_name))

    def patch_status(self, patch):
        path = "/api/v1/nodes/" + urllib.parse.quote(self.who.node_name) + "/status"
        return self.request("PATCH", path, patch)

    def patch_node(self, patch):
        path = f"/api/v1/nodes/{urllib.parse.quote(self.who.node_name)}?fieldManager={FIELD_MANAGER}"
        return self.request("PATCH", path, patch)
