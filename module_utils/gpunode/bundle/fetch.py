# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The bundle's downloads: a list of files, each checked against the checksum its index gives, in one process.

playbooks/offline_bundle.yml hands each list the plan names (:mod:`.packages_index`'s ``.deb``
files, :mod:`.rpm_repos`' metadata and ``.rpm`` files: ``{url, dest, checksum}``, the checksum as
``algorithm:hex``) to one ``offline_bundle_fetch`` call instead of one ``get_url`` per file (a module
run each, about a CPU second on the controller). Each file is read with
``ansible.module_utils.urls.open_url`` (proxies from the environment, TLS validated, a timeout:
what ``get_url`` does), hashed as it is written to a temp file beside ``dest`` and renamed over it
only when the checksum matches (``host/files.py``'s ``write_chunks``): a mismatch or a broken
download keeps nothing of it. A file already there with the right checksum is kept, unread.

Errors are :class:`~.packages_index.BundleError`, naming the file (the playbook's label, such as the
repository and the package), the URL and ``dest``. Standard library and ansible.module_utils only;
Python 3.8+.
"""

import hashlib
from http.client import HTTPException

from ansible.module_utils.gpunode.bundle.packages_index import BundleError
from ansible.module_utils.gpunode.host.files import FileError, file_digest, write_chunks
from ansible.module_utils.urls import ConnectionError as UrlConnectionError
from ansible.module_utils.urls import open_url

BLOCK = 1 << 16
#: what a download raises: the network's errors (urllib's are OSErrors), the TLS check's
NETWORK = (OSError, HTTPException, UrlConnectionError)


def expected(item, name):
    """``(algorithm, hex)`` of the item's ``checksum`` (``sha256:...``); the item has a url and a dest."""
    missing = [key for key in ("url", "dest") if not item.get(key)]
    algorithm, _colon, value = str(item.get("checksum") or "").strip().lower().partition(":")
    if algorithm not in hashlib.algorithms_available or not value:
        missing.append(f"checksum {item.get('checksum')!r} as ALGORITHM:HEX (sha256:..., sha512:...)")
    if missing:
        raise BundleError(f"{name}: no {', '.join(missing)} in {item}")
    return algorithm, value


def _blocks(response, item, name, algorithm, value):
    """The response's blocks, then a check of the whole: raises when it is not the index's checksum."""
    digest, size = hashlib.new(algorithm), 0
    try:
        for block in iter(lambda: response.read(BLOCK), b""):
            digest.update(block)
            size += len(block)
            yield block
        length = response.headers.get("Content-Length")
        if length and length.isdigit() and int(length) != size:
            raise OSError(f"{size} of its {length} bytes read")
    except NETWORK as exc:
        raise BundleError(f"{name}: {item['url']}: the download broke off ({exc}); nothing written to "
                          f"{item['dest']}") from None
    if digest.hexdigest() != value:
        raise BundleError(f"{name}: {item['url']}: its {algorithm} {digest.hexdigest()} did not match the "
                          f"{value} of its index; nothing written to {item['dest']} (a repository in the "
                          "middle of an update, or changed on the way: run the bundle again)")


def fetch(item, name, checksum, opener=open_url, **request):
    """Download one item to its ``dest``: the whole file, ``checksum`` (``(algorithm, hex)``) checked, or
    nothing."""
    try:
        response = opener(item["url"], decompress=False, **request)
    except NETWORK as exc:
        raise BundleError(f"{name}: {item['url']} cannot be fetched: {exc}") from None
    try:
        write_chunks(item["dest"], _blocks(response, item, name, *checksum))
    except FileError as exc:
        raise BundleError(f"{name}: {exc}") from None
    finally:
        response.close()


def fetch_all(files, label="{url}", check_mode=False, opener=open_url, **request):
    """Yield ``(dest, fetched)`` per item of ``files`` in order: False when ``dest`` holds the file
    already (its checksum the item's), True when it was fetched (in ``check_mode``: would be).
    ``label`` names an item in errors (``str.format`` of its keys); ``request``: ``open_url``'s
    ``timeout`` and ``validate_certs``."""
    for item in files:
        try:
            name = label.format_map(item)
        except (KeyError, ValueError, IndexError) as exc:
            raise BundleError(f"label {label!r}: no {exc} in {item}") from None
        checksum = expected(item, name)
        fetched = file_digest(item["dest"], checksum[0], BundleError) != checksum[1]
        if fetched and not check_mode:
            fetch(item, name, checksum, opener, **request)
        yield item["dest"], fetched
