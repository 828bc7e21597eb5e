# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The node as a module sees it: programs, commands, warnings, file queries and clocks.

Every command gpunode runs on a node runs with ``C_LOCALE``: the output the
modules parse (dpkg, systemctl, nvidia-smi, kubelet --version, containerd
config dump) is then the untranslated text the parsers expect, whatever the
node's locale. :class:`Host` is the one host-access class of module_utils;
concerns take it (or a test's stand-in with the same methods) instead of the
``AnsibleModule``.

Standard library only; Python 3.8+ (this runs on target hosts).
"""

import time

from ansible.module_utils.gpunode.host import files

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}


class Host:
    """Programs found on PATH, commands run in the C locale and warnings shown to the user
    (all through the ``AnsibleModule``), file queries and the two clocks.

    ``error``: the exception :meth:`read_text` raises for a file it cannot read.
    """

    def __init__(self, module, error=OSError):
        self.module = module
        self._error = error

    @property
    def check_mode(self):
        """Whether the module runs in check mode (a caller that would change something asks)."""
        return self.module.check_mode

    def which(self, name, opt_dirs=None):
        """The path of program ``name`` (also looked for in ``opt_dirs``), or None."""
        return self.module.get_bin_path(name, opt_dirs=opt_dirs or [])

    def run(self, argv, data=None, environ=None):
        """``(rc, stdout, stderr)`` of ``argv``; ``data`` (bytes or text) goes to its stdin as
        given; ``environ``: more variables, over the C locale."""
        environ_update = dict(C_LOCALE, **(environ or {}))
        if data is None:
            return self.module.run_command(argv, environ_update=environ_update)
        return self.module.run_command(argv, environ_update=environ_update, data=data, binary_data=True)

    def warn(self, message):
        self.module.warn(message)

    def read_text(self, path):
        """The text of ``path``, or None when it does not exist."""
        return files.read_text(path, self._error)

    def exists(self, path):
        return files.exists(path)

    def isdir(self, path):
        return files.is_dir(path)

    def listdir(self, path):
        return files.listdir(path)

    def mtime(self, path):
        """The modification time of ``path``, or None when it cannot be read."""
        return files.mtime(path)

    def boot_time(self):
        """Seconds since boot now (``CLOCK_BOOTTIME``, the clock of ``/proc/PID/stat``)."""
        return time.clock_gettime(time.CLOCK_BOOTTIME)

    def wall_time(self):
        return time.time()
