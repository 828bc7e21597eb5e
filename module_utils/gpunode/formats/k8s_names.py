# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Kubernetes' own syntax for names, labels, taints, images and quantities: one implementation.

Every value a user gives that becomes a Kubernetes name is checked here and
refused when the API server (or the kubelet, or a container runtime) would
refuse it, before anything is rendered, read or written. Values derived from
facts are made valid elsewhere (``gpu_cluster_addons.label_value``); values
given by the user are never rewritten.

Each rule is ``rule(option, value)``: it returns the value, or raises
``ValueSyntaxError`` (from ``values.py``) naming the option, the value
(``repr``) and the rule. ``is_valid(rule, value)`` answers without raising.

Sources (the rules as Kubernetes documents and validates them):

- Object names: https://kubernetes.io/docs/concepts/overview/working-with-objects/names/
  (DNS subdomain names: at most 253 characters, lower-case alphanumerics, '-'
  and '.', alphanumeric at both ends; RFC 1123 label names: at most 63, no '.').
  apimachinery ``pkg/util/validation``: ``IsDNS1123Label``, ``IsDNS1123Subdomain``.
- Labels: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#syntax-and-character-set
  (key: optional DNS-subdomain prefix of at most 253 characters and '/', then a
  name of at most 63 characters, ``[A-Za-z0-9]`` at both ends, '-', '_', '.'
  between; value: empty or the same as a name). ``IsQualifiedName``, ``IsValidLabelValue``.
- Taints and tolerations: https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/
  (key and value as a label's, effect NoSchedule, PreferNoSchedule or NoExecute;
  operator Exists or Equal, Exists takes no value; tolerationSeconds with NoExecute only).
- Extended resources: https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#extended-resources
  (a qualified name with a domain outside ``kubernetes.io``; ``IsExtendedResourceName``).
- Quantities: https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/
- Image references: the grammar of ``github.com/distribution/reference`` (what
  containerd, CRI-O and Docker parse): ``[domain[:port]/]path[:tag][@digest]``.

Standard library only; Python 3.8+ (also runs on managed nodes).
"""

import re

from ansible.module_utils.gpunode.formats.values import ValueSyntaxError, checked, refuse, string

DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
NAME_MAX = 63  # the name part of a qualified name, and a label value
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Exists", "Equal")
TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")

DNS_LABEL_RULE = "at most 63 lower-case letters, digits and '-', alphanumeric at both ends (RFC 1123 label)"
DNS_SUBDOMAIN_RULE = (
    "at most 253 lower-case letters, digits, '-' and '.', alphanumeric at both ends "
    "and around each '.' (RFC 1123 subdomain)"
)
NAME_RULE = "at most 63 letters, digits, '-', '_' and '.', alphanumeric at both ends"
QUALIFIED_RULE = f"[prefix/]name: prefix a DNS subdomain of at most 253 characters, name {NAME_RULE}"
LABEL_VALUE_RULE = f"empty, or {NAME_RULE}"


def is_valid(rule, value):
    """Whether ``rule`` accepts ``value`` (for code that decides instead of refusing)."""
    try:
        rule("value", value)
    except ValueSyntaxError:
        return False
    return True


def _fits(pattern, value, most):
    return len(value) <= most and pattern.fullmatch(value) is not None


# ---------------------------------------------------------------- names


def dns_label(option, value, what="an RFC 1123 label name"):
    """A DNS label name (namespaces, RuntimeClass handlers, container and port names)."""
    return checked(option, value, what, DNS_LABEL_RULE, lambda text: _fits(_DNS_LABEL, text, DNS_LABEL_MAX))


def dns_subdomain(option, value, what="a DNS subdomain name"):
    """A DNS subdomain name (most object names: nodes, ConfigMaps, Deployments...)."""
    return checked(option, value, what, DNS_SUBDOMAIN_RULE,
                   lambda text: _fits(_DNS_SUBDOMAIN, text, DNS_SUBDOMAIN_MAX))


def namespace(option, value):
    return dns_label(option, value, "a namespace name")


def node_name(option, value):
    return dns_subdomain(option, value, "a node name")


def runtime_class_handler(option, value):
    """A RuntimeClass ``handler``: a DNS label (node.k8s.io validation), also a containerd runtime name."""
    return dns_label(option, value, "a RuntimeClass handler")


def qualified_name(option, value, what="a qualified name"):
    """``[prefix/]name`` as a label key, a taint key or an annotation key."""
    string(option, value, what, QUALIFIED_RULE)
    prefix, slash, name = value.rpartition("/")
    if slash and not _fits(_DNS_SUBDOMAIN, prefix, DNS_SUBDOMAIN_MAX):
        refuse(option, value, what, QUALIFIED_RULE)
    if not _fits(_NAME, name, NAME_MAX):
        refuse(option, value, what, QUALIFIED_RULE)
    return value


def label_key(option, value):
    return qualified_name(option, value, "a label key")


def label_value(option, value):
    """A label value: empty, or a name of at most 63 characters. Numbers are taken as their text."""
    if isinstance(value, bool):  # YAML's true would become "True": say what to write instead
        refuse(option, value, "a label value", "a string: quote it, 'true' or 'false'")
    if isinstance(value, (int, float)):
        value = str(value)
    return checked(option, value, "a label value", LABEL_VALUE_RULE,
                   lambda text: not text or _fits(_NAME, text, NAME_MAX))


def labels(option, value, allow_null=True):
    """A mapping of label keys to label values; a null value (remove the label) where ``allow_null``."""
    if not isinstance(value, dict):
        refuse(option, value, "a mapping of labels", "label key: label value")
    for key, item in value.items():
        label_key(f"{option} key", key)
        if item is None and allow_null:
            continue
        label_value(f"{option}[{key!r}]", item)
    return value


def extended_resource_name(option, value):
    """An extended resource (``nvidia.com/gpu``): a qualified name with a prefix outside kubernetes.io."""
    rule = f"domain/name outside kubernetes.io: {QUALIFIED_RULE}"
    qualified_name(option, value, "an extended resource name")
    if "/" not in value or "kubernetes.io/" in value or value.startswith("requests."):
        refuse(option, value, "an extended resource name", rule)
    if not is_valid(qualified_name, "requests." + value):  # how ResourceQuota names it
        refuse(option, value, "an extended resource name", rule)
    return value


def resource_name(option, value):
    """A container resource: cpu, memory, ephemeral-storage, hugepages-SIZE, or an extended resource."""
    if isinstance(value, str) and value in ("cpu", "memory", "ephemeral-storage"):
        return value
    if isinstance(value, str) and value.startswith("hugepages-") and is_valid(quantity, value[10:]):
        return value
    if isinstance(value, str) and "/" in value:
        return extended_resource_name(option, value)
    rule = "cpu, memory, ephemeral-storage, hugepages-SIZE or domain/name"
    return refuse(option, value, "a resource name", rule)


# ---------------------------------------------------------------- taints and tolerations


def taint_key(option, value):
    return qualified_name(option, value, "a taint key")


def taint_value(option, value):
    return label_value(option, value)


def taint_effect(option, value, allow_empty=False):
    rule = ", ".join(TAINT_EFFECTS) + (" or empty (every effect)" if allow_empty else "")
    if not (value in TAINT_EFFECTS or (allow_empty and value == "")):
        refuse(option, value, "a taint effect", rule)
    return value


def taint(option, value):
    """A taint: ``{key, value, effect}``."""
    if not isinstance(value, dict) or set(value) - {"key", "value", "effect"}:
        refuse(option, value, "a taint", "a mapping of key, value (optional) and effect")
    taint_key(f"{option}.key", value.get("key"))
    if value.get("value") is not None:
        taint_value(f"{option}.value", value["value"])
    taint_effect(f"{option}.effect", value.get("effect"))
    return value


def toleration(option, value):
    """A toleration: key, operator (Exists, Equal), value, effect, tolerationSeconds; nothing else."""
    rule = "a mapping of " + ", ".join(TOLERATION_FIELDS)
    if not isinstance(value, dict) or set(value) - set(TOLERATION_FIELDS):
        refuse(option, value, "a toleration", rule)
    key, operator = value.get("key") or "", value.get("operator") or "Equal"
    if key:
        taint_key(f"{option}.key", key)
    if operator not in TOLERATION_OPERATORS:
        refuse(f"{option}.operator", operator, "a toleration operator", "Exists or Equal")
    if not key and operator != "Exists":
        refuse(f"{option}.operator", operator, "the operator of a toleration without key", "Exists")
    if value.get("value") not in (None, ""):
        if operator == "Exists":
            refuse(f"{option}.value", value["value"], "a value of an Exists toleration", "none")
        taint_value(f"{option}.value", value["value"])
    effect = value.get("effect") or ""
    taint_effect(f"{option}.effect", effect, allow_empty=True)
    seconds = value.get("tolerationSeconds")
    whole = isinstance(seconds, int) and not isinstance(seconds, bool)
    if seconds is not None and (not whole or effect != "NoExecute"):
        refuse(f"{option}.tolerationSeconds", seconds, "a toleration period", "an integer, with NoExecute")
    return value


def tolerations(option, value):
    if not isinstance(value, list):
        refuse(option, value, "a list of tolerations", "a list of mappings")
    for index, item in enumerate(value):
        toleration(f"{option}[{index}]", item)
    return value


# ---------------------------------------------------------------- quantities and resources

# <number><suffix>: digits with an optional fraction, then a binary (Ki..Ei) or
# decimal (m, k, M..E) suffix or an exponent (e3, E-2). Resource amounts are
# never negative, so no sign.
_QUANTITY = re.compile(r"([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?")
QUANTITY_RULE = "a number with an optional suffix: Ki Mi Gi Ti Pi Ei, m k M G T P E, or an exponent (e3)"
RESOURCES_RULE = "a mapping with requests and limits (resource name: quantity) and claims"


def quantity(option, value):
    """A resource quantity (``500m``, ``64Mi``, ``1``, ``1.5``); a non-negative number is taken as is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return value
    return checked(option, value, "a quantity", QUANTITY_RULE, _QUANTITY.fullmatch)


def resources(option, value):
    """A container's ``resources``: requests and limits (name: quantity), claims (a list of {name})."""
    if not isinstance(value, dict) or set(value) - {"requests", "limits", "claims"}:
        refuse(option, value, "container resources", RESOURCES_RULE)
    for part in ("requests", "limits"):
        amounts = value.get(part)
        if amounts is None:
            continue
        if not isinstance(amounts, dict):
            refuse(f"{option}.{part}", amounts, "a mapping of resource amounts", "resource name: quantity")
        for name, amount in amounts.items():
            resource_name(f"{option}.{part} key", name)
            quantity(f"{option}.{part}[{name!r}]", amount)
    claims = value.get("claims")
    if claims is not None:
        if not isinstance(claims, list) or not all(isinstance(c, dict) and set(c) <= {"name", "request"}
                                                   for c in claims):
            refuse(f"{option}.claims", claims, "resource claims", "a list of {name, request}")
        for index, claim in enumerate(claims):
            dns_label(f"{option}.claims[{index}].name", claim.get("name"), "a resource claim name")
    return value


# ---------------------------------------------------------------- images

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[_.]|__|-+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9A-Fa-f:.]+\])(?::[0-9]+)?"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REPOSITORY = re.compile(rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*")
_REFERENCE = re.compile(rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
                        rf"(?::{_TAG})?(?:@{_DIGEST})?")
_TAG_OR_DIGEST = re.compile(rf"{_TAG}(?:@{_DIGEST})?")
REPOSITORY_MAX = 255
IMAGE_RULE = ("[registry[:port]/]path[:tag][@digest]: path components of lower-case letters and digits "
              "joined by '.', '_', '__' or '-'; tag of at most 128 letters, digits, '_', '.', '-'")


def image_repository(option, value):
    """An image without tag or digest: ``[registry[:port]/]path`` (``nvcr.io/nvidia/k8s-device-plugin``)."""
    rule = "[registry[:port]/]path, no tag or digest: " + IMAGE_RULE.split(": ", 1)[1]
    return checked(option, value, "an image repository", rule,
                   lambda text: len(text) <= REPOSITORY_MAX and _REPOSITORY.fullmatch(text))


def image_tag(option, value):
    """What follows ``repository:`` - a tag, optionally pinned to a digest (``v0.17.0@sha256:...``)."""
    rule = "a tag of at most 128 letters, digits, '_', '.', '-' (not first: '.', '-'), optionally @digest"
    return checked(option, value, "an image tag", rule, _TAG_OR_DIGEST.fullmatch)


def image_reference(option, value):
    """A whole image reference, as a container runtime parses it."""
    string(option, value, "an image reference", IMAGE_RULE)
    match = _REFERENCE.fullmatch(value)
    if not match or len(match.group("name")) > REPOSITORY_MAX:
        refuse(option, value, "an image reference", IMAGE_RULE)
    return value


# ---------------------------------------------------------------- other API values


def port(option, value):
    """A TCP/UDP port number, 1 to 65535."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        refuse(option, value, "a port number", "an integer from 1 to 65535")
    return value


def field_manager(option, value):
    """A server-side apply field manager: 1 to 128 printable characters."""
    rule = "1 to 128 printable characters"
    string(option, value, "a field manager", rule)
    if not 0 < len(value) <= 128 or not value.isprintable():
        refuse(option, value, "a field manager", rule)
    return value


def node_label_term(option, value):
    """A node label to select on: ``key`` or ``key=value`` (the value as a label value)."""
    rule = f"key[=value], key {QUALIFIED_RULE}; value {LABEL_VALUE_RULE}"
    string(option, value, "a node label", rule)
    key, equals, item = value.partition("=")
    if not is_valid(label_key, key) or (equals and not is_valid(label_value, item)):
        refuse(option, value, "a node label", rule)
    return value
