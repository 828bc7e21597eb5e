# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The option of every module that takes the node's lock (module_utils gpunode/host/lock.py, LOCK_OPTION).

A module names it in ``extends_documentation_fragment`` as ``node_lock``; the
collection build writes the collection's name in front (``gpunode.gpunode.node_lock``),
as ansible-core resolves a fragment's short name only on its configured paths
(``doc_fragment_plugins`` in ansible.cfg), never inside a collection.
"""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  lock_timeout:
    description:
      - Seconds to wait for the node's lock, C(/run/gpunode/lock) (where C(/run) is not writable, a
        file in the folder of Ansible's remote temporary directory). Every gpunode module that edits
        the node holds it from before it reads what it changes until it has written, so two runs on
        one node never lose an update. Not taken in check mode. A run that waits longer fails,
        naming the lock and its holder's PID, and changes nothing.
    type: int
    default: 300
"""
