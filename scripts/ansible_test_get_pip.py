"""Bootstrap pip into an empty virtual environment for ansible-test, without its download.

gpunode-collection-pip-bootstrap (scripts/collection_sanity.py recognises its own copies by this line)

ansible-test creates each sanity test's virtual environment without pip and
then runs a "get-pip" script in it. It takes that script from
~/.ansible/test/cache/get_pip_<pip version>.py, and downloads it from
ci-files.testing.ansible.com only when that file is missing; its error message
for a failed download names that path as the place to save the script by hand
(ansible/ansible#77304). CI cannot reach that host, so
scripts/collection_sanity.py saves this file there instead.

It does what the get-pip script does with ansible-test's arguments, using what
CI has: the pip wheel that ships with every CPython (``ensurepip``, standard
library, no network), then pip itself to install the exact packages
ansible-test asks for (``pip==<version>``) from PyPI, or from wherever the
usual PIP_* environment variables point.

ansible-test runs it as:
    python get_pip_<version>.py [pip options] pip==<version> [--no-setuptools] [--no-wheel]
"""

import importlib
import subprocess
import sys

try:
    from importlib import metadata
except ImportError:  # Python < 3.8 has no importlib.metadata; ansible-test needs 3.8+ anyway
    metadata = None

OWN_FLAGS = {"--no-setuptools": "setuptools", "--no-wheel": "wheel"}


def installed(name):
    if metadata is None:
        return False
    importlib.invalidate_caches()  # pip ran in another process: re-read site-packages
    try:
        metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def main(argv):
    unwanted = [OWN_FLAGS[arg] for arg in argv if arg in OWN_FLAGS]
    pip_args = [arg for arg in argv if arg not in OWN_FLAGS]
    present_before = {name for name in unwanted if installed(name)}
    # ensurepip installs its bundled pip (and, before Python 3.12, setuptools) from wheels inside
    # the standard library: no network.
    subprocess.run([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"], check=True,
                   stdout=subprocess.DEVNULL)
    # What get-pip does with the arguments: install them, replacing the pip just bootstrapped.
    subprocess.run([sys.executable, "-m", "pip", "install", "--upgrade", "--force-reinstall", *pip_args],
                   check=True)
    # --no-setuptools / --no-wheel: leave the environment without them, as get-pip would.
    added = [name for name in unwanted if name not in present_before and installed(name)]
    if added:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", *added], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
