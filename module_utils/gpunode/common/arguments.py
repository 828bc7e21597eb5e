# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Another module's arguments, given as one dict option, checked as that module would check them.

``gpunode_node_state`` takes the arguments of three state modules (and of the validation
record), one dict option each: :func:`validated` applies the module's own argument spec
(types, choices, defaults, mutually exclusive options) with ansible-core's validator.
"""

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator


class ArgumentsError(Exception):
    """Arguments the module they are meant for would refuse; the message names the option."""


def validated(spec, params, option, mutually_exclusive=None):
    """``params`` with the defaults of ``spec``; raises :class:`ArgumentsError` that starts with
    ``option`` (the dict option they came in) and lists what is wrong."""
    result = ArgumentSpecValidator(spec, mutually_exclusive=mutually_exclusive).validate(dict(params or {}))
    if result.error_messages:
        raise ArgumentsError(f"{option}: " + "; ".join(result.error_messages))
    return result.validated_parameters
