# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one choice of PyYAML's safe loader, for every YAML that gpunode parses.

libyaml's loader (``yaml.CSafeLoader``, present where PyYAML was built with
libyaml, as the PyPI wheels are) composes a document about 20 times and loads
it about 7 times faster than the pure-Python ``yaml.SafeLoader`` (the data is
built by the same Python constructor); a distribution's PyYAML may lack it, and
then the pure one is used.

The two differ where ``formats/yaml_text.py`` cuts the original text by node
marks (``mark.index``, ``line``, ``column``): libyaml drops a leading UTF-8 BOM
before it counts, so each of its indices is one less than the position in the
Python string. A libyaml that counted bytes would also be wrong on any other
non-ASCII character (today's counts characters, as the pure loader does).
Marks are therefore taken from libyaml only for ASCII text, and from the pure
loader otherwise: ``safe_loader(text)``. On ASCII text the marks the editor
reads are the same (tests/unit/test_yaml_load.py compares them over every
fixture); what else differs does not move a cut: the end mark of a block
collection at a text without a final newline has another line and column
(the same index), an indentless sequence has ``flow_style`` False instead of
None, error messages are worded differently (same positions), and libyaml
takes a tab after ``key:`` that the pure loader refuses.

Standard library and PyYAML only: this runs on target hosts, where PyYAML
(python3-yaml) may be missing; callers check their own ``YAML_IMPORT_ERROR``.
"""

try:
    import yaml
except ImportError:  # the node has no python3-yaml
    yaml = None


def safe_loader(text=None):
    """The safe loader class to parse with.

    ``text``: the string whose node marks the caller will cut it by; None when
    only the data is read. libyaml's loader where PyYAML has it and, for marks,
    the text is ASCII; else the pure-Python one.
    """
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is None or (text is not None and not (isinstance(text, str) and text.isascii())):
        return yaml.SafeLoader
    return fast


def safe_load(stream):
    """``yaml.safe_load`` through :func:`safe_loader`."""
    return yaml.load(stream, Loader=safe_loader())


def safe_load_all(stream):
    """``yaml.safe_load_all`` through :func:`safe_loader` (a generator of documents)."""
    return yaml.load_all(stream, Loader=safe_loader())
