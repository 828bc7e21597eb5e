# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filter gpunode_rollout_batch_error: whether the rolling path's batch is the one its host asked for.

``serial`` is templated once per play, from extra vars and play vars only: a
``gpunode_rollout_batch`` set in the inventory never reaches it (ansible/ansible#27166), while
every task of the play sees it. The first task of each batch (playbooks/rollout.yml) compares the
batch Ansible made (``ansible_play_batch``) with the batches that value makes of the play's hosts,
as ``PlaybookExecutor._get_serialized_batches`` cuts them (a count, a percentage of every host of
the play, or a list of them whose last repeats), without the hosts failed before the play; the
last batch may be smaller.

Standard library only, no Ansible import: the unit tests load this file on every Python.
"""

VARIABLE = "gpunode_rollout_batch"


def _size(value, count):
    text = str(value).strip()
    if text.endswith("%"):  # as ansible's pct_to_int: at least 1
        return int(int(text[:-1]) / 100.0 * count) or 1
    return int(text)


def batches(batch, hosts):
    """The host lists ``serial: batch`` makes of ``hosts``, in order."""
    sizes = (batch if isinstance(batch, list) else [batch]) or [0]
    left, made = list(hosts), []
    while left:
        size = _size(sizes[min(len(made), len(sizes) - 1)], len(hosts))
        size = size if size > 0 else len(left)
        made.append(left[:size])
        left = left[size:]
    return made


def gpunode_rollout_batch_error(batch, hosts, active, wanted):
    """"" when ``batch`` (``ansible_play_batch``) is the batch ``wanted`` makes of ``hosts``
    (``ansible_play_hosts_all``) less the hosts not in ``active`` (``ansible_play_hosts``); else the
    message that stops the run before this batch changes anything."""
    try:
        expected = batches(wanted, hosts)
    except (TypeError, ValueError):
        return f"{VARIABLE}: {wanted!r} is neither a count nor a percentage (such as 2 or 25%)"
    for made in expected:
        if batch and batch[0] in made:
            if [host for host in made if host in active] == list(batch):
                return ""
            break
    return (f"{VARIABLE} is {wanted!r} for this host, but the play made a batch of {len(batch)} "
            f"({', '.join(batch)}): serial reads extra vars and play vars, never the inventory "
            f"(ansible/ansible#27166). Pass it with -e {VARIABLE}={wanted}. Stopped before this batch "
            f"changed anything.")


class FilterModule:
    """The rolling path's filters."""

    def filters(self):
        return {"gpunode_rollout_batch_error": gpunode_rollout_batch_error}
