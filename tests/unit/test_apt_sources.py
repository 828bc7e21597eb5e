# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One-line apt sources as deb822 stanzas (module_utils/gpunode/host/packages.py), by sources.list(5)."""

import re

import pytest
from ansible.module_utils.gpunode.host.packages import (
    OPTION_FIELDS,
    AptSourceError,
    deb822_text,
    parse_one_line,
)


@pytest.mark.parametrize(("line", "fields"), [
    ("deb http://deb.debian.org/debian bookworm main",
     {"Types": "deb", "URIs": "http://deb.debian.org/debian", "Suites": "bookworm", "Components": "main"}),
    ("deb-src  http://deb.debian.org/debian   trixie main contrib non-free ",
     {"Types": "deb-src", "URIs": "http://deb.debian.org/debian", "Suites": "trixie",
      "Components": "main contrib non-free"}),
    # NVIDIA's flat repositories: suite "/" and no component
    ("deb [signed-by=/etc/apt/keyrings/k.asc] https://developer.download.nvidia.com/compute/cuda/repos/"
     "debian12/x86_64/ /",
     {"Types": "deb", "URIs": "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/",
      "Suites": "/", "Signed-By": "/etc/apt/keyrings/k.asc"}),
    ("deb [ arch=amd64,arm64 signed-by=/k.gpg check-valid-until=no ] http://m/ sub/",
     {"Types": "deb", "URIs": "http://m/", "Suites": "sub/", "Architectures": "amd64 arm64",
      "Signed-By": "/k.gpg", "Check-Valid-Until": "no"}),
    ("deb [trusted=yes]http://m/ x y",
     {"Types": "deb", "URIs": "http://m/", "Suites": "x", "Components": "y", "Trusted": "yes"}),
])
def test_one_line_sources_become_deb822_fields(line, fields):
    assert parse_one_line(line) == fields


@pytest.mark.parametrize("option", sorted(OPTION_FIELDS))
def test_every_one_line_option_has_its_deb822_field(option):
    fields = parse_one_line(f"deb [{option}=a,b] http://m/ /")
    assert fields[OPTION_FIELDS[option]] == "a b"


@pytest.mark.parametrize(("line", "why"), [
    ("", "empty"),
    ("   ", "empty"),
    ("deb http://m/ /\nTrusted: yes", "newline"),
    ("deb http://m/ /\rx", "control character"),
    ("deb\thttp://m/ /", "control character"),
    ("rpm http://m/ /", "not deb or deb-src"),
    ("deb http://m/", "needs a URI and a suite"),
    ("deb [trusted=yes http://m/ /", "needs a URI and a suite"),
    ("deb [signed-by=/k] http://m/ / main", "flat suite"),
    ("deb http://m/ bookworm", "needs a component"),
    ("deb [frobnicate=yes] http://m/ /", "unknown option 'frobnicate'"),
    ("deb [arch+=amd64] http://m/ /", "unknown option 'arch+'"),
    ("deb [trusted] http://m/ /", "is not KEY=VALUE"),
    ("deb [signed-by=] http://m/ /", "is not KEY=VALUE"),
    ("deb http://m/ bookworm main #comment", "needs a URI and a suite"),
])
def test_lines_apt_would_not_read_as_one_source_are_refused(line, why):
    with pytest.raises(AptSourceError, match=re.escape(why)):
        parse_one_line(line)


def test_the_text_is_the_header_and_one_stanza():
    text = deb822_text("deb [signed-by=/k.asc] http://m/ /", "# Written by gpunode\n")
    assert text == "# Written by gpunode\nTypes: deb\nURIs: http://m/\nSuites: /\nSigned-By: /k.asc\n"
    assert deb822_text("deb http://m/ /") == "Types: deb\nURIs: http://m/\nSuites: /\n"


def test_a_header_must_be_comments():
    with pytest.raises(AptSourceError, match="must be a comment"):
        deb822_text("deb http://m/ /", "Trusted: yes\n")
