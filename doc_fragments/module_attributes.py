# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The attributes every gpunode module shares: full check mode, POSIX targets, and diff support.

A module names one of ``module_attributes`` (it shows what it changes with ``--diff``) or
``module_attributes.no_diff`` (it has nothing to show) in ``extends_documentation_fragment``,
plus ``module_attributes.facts`` when it returns ``ansible_facts``; the descriptions are
ansible-core's (``ansible.builtin.action_common_attributes``), so no module names that too. A
module's own ``attributes`` still win over the fragment's. The collection build writes the
collection's name in front, as for ``node_lock``.
"""


class ModuleDocFragment:
    # each a plain string: ansible-test sanity's yamllint reads a fragment's attributes as literals
    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target, if not
      supported the action will be skipped.
    support: full
  platform:
    description: Target OS/families that can be operated against
    support: N/A
    platforms: posix
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in
      diff mode
    support: full
"""

    NO_DIFF = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target, if not
      supported the action will be skipped.
    support: full
  platform:
    description: Target OS/families that can be operated against
    support: N/A
    platforms: posix
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in
      diff mode
    support: none
"""

    FACTS = r"""
attributes:
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts
    support: full
"""
