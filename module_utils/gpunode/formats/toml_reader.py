# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read TOML the same way on every target Python (3.8 to 3.14).

One reader for gpunode's modules: ``loads(text, path, error)`` returns plain
``dict``/``list`` values (whatever the parser's own types), or raises the
caller's error class with the path and the parser's message.

Parsers, the first one importable wins (no TOML code is copied into gpunode):

============  =====================================  =================================
parser        where it comes from                    distributions (package, version)
============  =====================================  =================================
``tomllib``   Python 3.11+ standard library          every target on Python 3.11+
``tomli``     the same parser as a package           Debian 12 python3-tomli 2.0.1,
                                                     Debian 13 2.2.1, Ubuntu 22.04 1.2.2
``toml``      the older ``toml`` package             Debian 11 python3-toml 0.10.1
                                                     (Debian 11 has no python3-tomli)
============  =====================================  =================================

Sources: packages.debian.org (bullseye: python3-toml 0.10.1-1, no python3-tomli;
bookworm: python3-tomli 2.0.1-2; trixie: python3-tomli 2.2.1-2),
packages.ubuntu.com (jammy: python3-tomli 1.2.2-2). ``tomllib`` is tomli 1.2.3
taken into the standard library (PEP 680).

``toml`` 0.10 returns its own dict subclass for inline tables; ``loads``
turns every table into a ``dict`` and every array into a ``list``, so the
modules compute the same bytes from the same file whichever parser ran.
The role installs the distribution's package below Python 3.11
(``TOML_PACKAGES``, in order of preference) and modules that need TOML fail
with ``missing_required_lib`` naming them when none is importable.
"""

import traceback

TOML_IMPORT_ERROR = None
try:
    import tomllib as _parser

    TOML_PARSER = "tomllib"
except ImportError:
    try:
        import tomli as _parser

        TOML_PARSER = "tomli"
    except ImportError:
        try:
            import toml as _parser

            TOML_PARSER = "toml"
        except ImportError:  # Python < 3.11 without python3-tomli or python3-toml
            _parser = None
            TOML_PARSER = None
            TOML_IMPORT_ERROR = traceback.format_exc()

# The distribution packages that provide a parser below Python 3.11, preferred first.
TOML_PACKAGES = ("python3-tomli", "python3-toml")
TOML_REQUIREMENT = "tomli (python3-tomli) or toml (python3-toml) below Python 3.11"


def plain(value):
    """``value`` with every mapping as a ``dict`` and every array as a ``list``."""
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def loads(text, path, error=ValueError):
    """The TOML document ``text`` (read from ``path``) as plain values.

    Raises ``error`` naming ``path`` when the text is not TOML, or when no
    parser is importable on this Python.
    """
    if _parser is None:
        raise error(f"{path}: cannot read TOML: no parser on this Python ({TOML_REQUIREMENT})")
    try:
        data = _parser.loads(text)
    except Exception as exc:  # each parser has its own error class (all ValueError or IndexError)
        raise error(f"{path}: not valid TOML: {exc}") from exc
    return plain(data)
