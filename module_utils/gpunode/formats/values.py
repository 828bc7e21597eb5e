# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The syntax of values from the inventory that land in a file or on a command line.

A value given by the user is checked against the rules of the format it ends
up in before any file is read or written, and refused (never rewritten,
never escaped) when it breaks them: a runtime name with a double quote would
end a TOML key, a path with a newline would split a line of a deb822 source,
a ``$`` in a static pod's argument is expanded by the kubelet. Templates and
writers can then put a value in place as it is.

Each rule is a function ``rule(option, value)`` that returns the value and
raises :class:`ValueSyntaxError` naming the option (as the user spells it:
``extender.url_prefix``, ``gpu_cluster_addons_namespace``), the value
(``repr``) and the rule. :func:`check` applies a table ``{option path:
rule}`` to a module's parameters; a module calls it first and turns the error
into its one ``fail_json``. Kubernetes names (labels, taints, namespaces,
images, quantities) are in ``k8s_names.py``, built on :func:`refuse`.

Standard library only; Python 3.8+ (runs on managed nodes).
"""

import ipaddress
import re
from urllib.parse import urlsplit


class ValueSyntaxError(ValueError):
    """A value breaks the syntax of the format it would be written in; the message names the option."""


def refuse(option, value, what, rule):
    """Raise the one error shape: ``option: 'value' is not WHAT (RULE)``."""
    raise ValueSyntaxError(f"{option}: {value!r} is not {what} ({rule})")


def string(option, value, what, rule):
    """``value`` as a string; anything but a string is refused with the same rule."""
    if not isinstance(value, str):
        refuse(option, value, what, rule)
    return value


def checked(option, value, what, rule, valid):
    """``value`` when it is a string that ``valid`` accepts (a predicate: a pattern's ``fullmatch``),
    else refused with the same rule."""
    if not isinstance(value, str) or not valid(value):
        refuse(option, value, what, rule)
    return value


# ---------------------------------------------------------------- applying a table


def _values(data, path, shown):
    """(name shown, value) of each place ``path`` names in ``data``: ``a.b``, ``a[].b``, ``a{}`` (keys)."""
    if not path:
        return [(shown, data)]
    head, _dot, rest = path.partition(".")
    if head.endswith("{}"):  # the keys of a dict
        node = data.get(head[:-2]) if isinstance(data, dict) else None
        name = f"{shown}.{head[:-2]}" if shown else head[:-2]
        return [(f"{name} key", key) for key in node] if isinstance(node, dict) else []
    if head.endswith("[]"):
        node = data.get(head[:-2]) if isinstance(data, dict) else None
        name = f"{shown}.{head[:-2]}" if shown else head[:-2]
        found = []
        for index, item in enumerate(node if isinstance(node, list) else []):
            found.extend(_values(item, rest, f"{name}[{index}]"))
        return found
    if not isinstance(data, dict) or data.get(head) is None:
        return []
    return _values(data[head], rest, f"{shown}.{head}" if shown else head)


def check(params, rules):
    """Apply ``rules`` ({option path: rule}) to ``params``; absent or null values are skipped.

    Paths: ``name``, ``extender.url_prefix``, ``extender.managed_resources[].name``,
    ``labels{}`` (each key of a dict). Raises ValueSyntaxError at the first bad value.
    """
    for path, rule in rules.items():
        for shown, value in _values(params, path, ""):
            if value is not None:
                rule(shown, value)


# ---------------------------------------------------------------- paths

# What a path may hold where it lands as one word of a file or a command line
# (a flag's value, a TOML or deb822 value, a volume "src:dst:ro" spec): the
# POSIX portable filename characters (letters, digits, '.', '_', '-') and '/',
# plus '+', '@' and '~'. Whitespace, quotes, '\\', '$', ',', ':', ';', '='
# and every control or non-ASCII character are refused.
_WORD_PATH = re.compile(r"[A-Za-z0-9._+@~/-]+")
WORD_PATH_RULE = "an absolute path of letters, digits and . _ - + @ ~ / only"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def path(option, value):
    """A file a module reads or writes: absolute; no control character (newline, NUL...), quote or '\\'."""
    rule = "an absolute path without control characters (newline, carriage return, NUL, tab), quotes or '\\'"
    return checked(option, value, "a file path", rule, lambda text: text.startswith("/")
                   and not _CONTROL.search(text) and not re.search(r"[\"'`\\]", text))


def word_path(option, value):
    """An absolute path that lands as one word in a file or on a command line (see ``_WORD_PATH``)."""
    return checked(option, value, "a path", WORD_PATH_RULE, lambda text: text.startswith("/")
                   and _WORD_PATH.fullmatch(text) and "//" not in text)


def command(option, value):
    """A program: an absolute path as :func:`word_path`, or a bare name found on the PATH."""
    rule = "an absolute path or a bare program name (no leading '-'): letters, digits, . _ - + @ ~ / only"
    string(option, value, "a program", rule)
    if not _WORD_PATH.fullmatch(value) or "//" in value or ("/" in value and not value.startswith("/")):
        refuse(option, value, "a program", rule)
    if value.strip(".") == "" or value.endswith("/") or value.startswith("-"):
        refuse(option, value, "a program", rule)
    return value


# ---------------------------------------------------------------- URLs

# Characters RFC 3986 allows in a URI (unreserved, reserved, '%'); anything
# else (space, quotes, '\\', '<', '>', '{', '}', '|', '^', '`', control and
# non-ASCII characters) is refused rather than escaped.
_URI_CHARS = re.compile(r"[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+")


def http_url(option, value):
    """An http:// or https:// URL with a host (RFC 3986 characters only, no quote), parsed by urllib."""
    rule = "an http:// or https:// URL with a host, RFC 3986 characters only, no whitespace or quotes"
    string(option, value, "an http(s) URL", rule)
    if not _URI_CHARS.fullmatch(value) or "'" in value:
        refuse(option, value, "an http(s) URL", rule)
    try:
        parts = urlsplit(value)
        _port = parts.port  # raises ValueError for a port that is not a number 0-65535
    except ValueError:
        refuse(option, value, "an http(s) URL", rule)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        refuse(option, value, "an http(s) URL", rule)
    return value


def apt_uri(option, value):
    """An apt source URI (``scheme:...``, apt may expand ``$(ARCH)``), one deb822 word."""
    rule = "scheme:... (http, https, file, ...) of RFC 3986 characters, no whitespace or quotes"
    string(option, value, "an apt repository URI", rule)
    if not _URI_CHARS.fullmatch(value) or "'" in value or not re.match(r"[a-z][a-z0-9+.-]*:", value):
        refuse(option, value, "an apt repository URI", rule)
    if value.startswith(("http:", "https:")):
        http_url(option, value)
    return value


def url_segment(option, value):
    """One path segment of a URL (an extender's verb): RFC 3986 unreserved characters."""
    rule = "letters, digits and . _ ~ - (RFC 3986 unreserved characters), not empty"
    return checked(option, value, "a URL path segment", rule,
                   lambda text: re.fullmatch(r"[A-Za-z0-9._~-]+", text) and text not in (".", ".."))


# ---------------------------------------------------------------- container runtimes


def containerd_runtime_name(option, value):
    """A containerd runtime name: a key of ``runtimes`` in config.toml, written bare.

    ``[A-Za-z0-9_.-]+``: what a TOML bare key holds, plus '.', which containerd's
    CRI plugin writes quoted; other characters would need escaping there and in
    every tool that reads the runtime's name back (crictl, the RuntimeClass).
    """
    rule = "letters, digits, '_', '.' and '-' ([A-Za-z0-9_.-]+)"
    return checked(option, value, "a containerd runtime name", rule, re.compile(r"[A-Za-z0-9_.-]+").fullmatch)


def containerd_runtime_type(option, value):
    """A containerd shim name: ``io.containerd.NAME.vN`` (runc.v2, kata.v2, runsc.v1...).

    containerd runs the shim binary ``containerd-shim-NAME-vN`` for it (its
    ``runtime/v2/shim`` BinaryName: the last two dot-separated parts). containerd
    1.x configs also name the legacy v1 runtime ``io.containerd.runtime.v1.linux``
    (a version part, then the platform), which stays valid there.
    """
    rule = ("io.containerd.NAME.vN (or io.containerd.runtime.v1.linux), NAME of lower-case letters, digits, "
            "'_' and '-'")
    return checked(option, value, "a containerd runtime type", rule,
                   re.compile(r"io\.containerd\.[a-z0-9_-]+\.v[0-9]+(\.[a-z0-9_-]+)?").fullmatch)


def debian_version(option, value):
    """A Debian package version ``[epoch:]upstream[-revision]``, starting with a digit (Policy 5.6.12)."""
    rule = "[epoch:]upstream[-revision] of letters, digits and . + ~ - :, starting with a digit"
    return checked(option, value, "a package version", rule,
                   re.compile(r"([0-9]+:)?[0-9][A-Za-z0-9.+~-]*").fullmatch)


def optional(rule):
    """``rule``, with the empty string accepted (an option whose empty value means "none" or "any")."""

    def check_unless_empty(option, value):
        return value if value == "" else rule(option, value)

    return check_unless_empty


def env_variable(option, value):
    """A shell/systemd environment variable name (what ``$NAME`` in ExecStart= expands)."""
    rule = "[A-Za-z_][A-Za-z0-9_]*"
    return checked(option, value, "a variable name", rule, re.compile(rule).fullmatch)


def unit_name(option, value):
    """A systemd unit name (systemd.unit(5): at most 255 of letters, digits and ``:-_.\\@``)."""
    rule = "letters, digits and :-_.\\@, at most 255"
    return checked(option, value, "a systemd unit name", rule,
                   re.compile(r"[A-Za-z0-9:_.\\@-]{1,255}").fullmatch)


def one_line(option, value):
    """A value written as one line of a line-oriented file (an apt source line): no control character."""
    rule = "one line: no newline, carriage return, NUL or other control character"
    return checked(option, value, "a single line", rule,
                   lambda text: not _CONTROL.search(text.replace("\t", " ")) and text.strip())


def ip_address(option, value):
    """An IPv4 or IPv6 address, as written in a list of nodes (IMEX's nodes_config.cfg)."""
    rule = "an IPv4 or IPv6 address"
    string(option, value, "an IP address", rule)
    try:
        ipaddress.ip_address(value)
    except ValueError:
        refuse(option, value, "an IP address", rule)
    return value


def settings(option, value):
    """``KEY=value`` lines of a configuration file: each key a variable name, each value one line or empty."""
    for key, item in (value or {}).items():
        env_variable(f"{option} key", key)
        checked(f"{option}.{key}", str(item), "a single line", "no newline, carriage return, NUL or other "
                "control character", lambda text: not _CONTROL.search(text.replace("\t", " ")))
    return value
