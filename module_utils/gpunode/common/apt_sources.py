# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""apt sources: a one-line source (sources.list(5)) as the deb822 stanza apt reads from a .sources file.

gpunode writes its apt sources as deb822 files (``/etc/apt/sources.list.d/NAME.sources``,
what ``ansible.builtin.deb822_repository`` writes and what ansible-core recommends since
``apt_repository`` was deprecated in 2.21), rendered here: the module that would write
them needs python3-debian on the node, which a node does not have. Users still give one
line (``deb [signed-by=KEYRING] URI SUITE COMPONENT...``): the inventory's format is
unchanged.
"""

import re

# one-line options (sources.list(5), "THE ONE-LINE-STYLE FORMAT") -> deb822 field names
OPTION_FIELDS = {
    "arch": "Architectures",
    "lang": "Languages",
    "target": "Targets",
    "pdiffs": "PDiffs",
    "by-hash": "By-Hash",
    "allow-insecure": "Allow-Insecure",
    "allow-weak": "Allow-Weak",
    "allow-downgrade-to-insecure": "Allow-Downgrade-To-Insecure",
    "trusted": "Trusted",
    "signed-by": "Signed-By",
    "check-valid-until": "Check-Valid-Until",
    "valid-until-min": "Valid-Until-Min",
    "valid-until-max": "Valid-Until-Max",
    "check-date": "Check-Date",
    "date-max-future": "Date-Max-Future",
    "inrelease-path": "InRelease-Path",
}
TYPES = ("deb", "deb-src")
# what a URI, suite, component or option value may hold: no space, no control character,
# nothing that ends the options or starts a comment
TOKEN = re.compile(r"[^\s\[\]#]+\Z")


class AptSourceError(ValueError):
    """A one-line source that apt would not read as one source; the message says why."""


def _options(text, line):
    fields = {}
    for option in text.split():
        key, sep, value = option.partition("=")
        if not sep or not value or not TOKEN.match(value):
            raise AptSourceError(f"apt source {line!r}: option {option!r} is not KEY=VALUE")
        if key not in OPTION_FIELDS:
            raise AptSourceError(f"apt source {line!r}: unknown option {key!r} "
                                 f"(sources.list(5): {', '.join(sorted(OPTION_FIELDS))})")
        # one-line values are comma-separated lists; deb822 separates them with spaces
        fields[OPTION_FIELDS[key]] = " ".join(part for part in value.split(",") if part)
    return fields


def parse_one_line(line):
    """``{"Types", "URIs", "Suites", "Components"?, option fields...}`` of a one-line source.

    Raises AptSourceError for anything apt would not read as exactly one source
    (a newline, a missing suite, an unknown option, a flat suite with components).
    """
    if not isinstance(line, str) or not line.strip():
        raise AptSourceError("apt source: empty")
    if any(ord(char) < 32 or ord(char) == 127 for char in line):
        raise AptSourceError(f"apt source {line!r}: holds a newline or another control character")
    match = re.match(r"\s*(\S+)\s*(?:\[([^\]]*)\])?\s*(.*)\Z", line)
    kind, options, rest = match.groups()
    if kind not in TYPES:
        raise AptSourceError(f"apt source {line!r}: starts with {kind!r}, not deb or deb-src")
    words = rest.split()
    if len(words) < 2 or not all(TOKEN.match(word) for word in words):
        raise AptSourceError(f"apt source {line!r}: needs a URI and a suite "
                             "(deb [OPTIONS] URI SUITE [COMPONENT...])")
    uri, suite, components = words[0], words[1], words[2:]
    if suite.endswith("/") and components:
        raise AptSourceError(f"apt source {line!r}: the flat suite {suite!r} takes no components")
    if not suite.endswith("/") and not components:
        raise AptSourceError(f"apt source {line!r}: suite {suite!r} needs a component (or end it with / for "
                             "a flat repository)")
    fields = {"Types": kind, "URIs": uri, "Suites": suite}
    if components:
        fields["Components"] = " ".join(components)
    fields.update(_options(options or "", line))
    return fields


def deb822_text(line, header=""):
    """The .sources file of a one-line source: ``header`` (comment lines) and one stanza."""
    fields = parse_one_line(line)
    if header and not all(part.startswith("#") for part in header.splitlines()):
        raise AptSourceError(f"apt source header {header!r}: every line must be a comment")
    body = "".join(f"{key}: {value}\n" for key, value in fields.items())
    return (header.rstrip("\n") + "\n" if header else "") + body
