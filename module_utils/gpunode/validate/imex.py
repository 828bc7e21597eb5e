# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What ``nvidia-imex-ctl -N`` prints: the IMEX domain's nodes, its connectivity table, its state.

The shape is that of a real 18-node GB200 domain (IMEX 570.172, AWS ParallelCluster's guide;
../shared/fixtures/fabric/imex-ctl) and of the older GH200 outputs without ``- Version:``::

    Node #0   - 172.31.48.81    - READY                - Version: 570.172
     Nodes From\\To  0   1
           0        C   C
    Domain State: UP

Standard library only; Python 3.8+ (runs on managed nodes).
"""

import re

NODE_RE = re.compile(r"^Node #(\d+)\s+-\s+(\S+)\s+-\s+(\S+)")
DOMAIN_RE = re.compile(r"^Domain State:\s*(\S+)")
TABLE_HEAD = "Nodes From\\To"
#: The connectivity table's legend, as nvidia-imex-ctl prints it.
LEGEND = {"I": "Invalid", "N": "Never Connected", "R": "Recovering", "D": "Disconnected",
          "A": "Authenticating", "!V!": "Version mismatch", "!M!": "Node map mismatch", "C": "Connected"}


def parse_domain(text):
    """``{"nodes": {index: (address, state)}, "table": {from: {to: code}}, "domain": state or None}``."""
    nodes, table, domain, columns = {}, {}, None, None
    for line in text.splitlines():
        stripped = line.strip()
        node, state = NODE_RE.match(stripped), DOMAIN_RE.match(stripped)
        if node:
            nodes[int(node.group(1))] = (node.group(2), node.group(3))
        elif state:
            domain = state.group(1)
        elif stripped.startswith(TABLE_HEAD):
            columns = [int(word) for word in stripped[len(TABLE_HEAD):].split() if word.isdigit()]
        elif columns is not None and stripped[:1].isdigit():
            row, *codes = stripped.split()
            table[int(row)] = dict(zip(columns, codes))
    return {"nodes": nodes, "table": table, "domain": domain}


def _node(nodes, index):
    return f"node #{index} ({nodes[index][0]})" if index in nodes else f"node #{index}"


def problems(reading):
    """What keeps the domain from being ready: nodes not READY, pairs not Connected, the state not UP."""
    nodes, table = reading["nodes"], reading["table"]
    found = [f"{_node(nodes, i)} {state}" for i, (_addr, state) in sorted(nodes.items()) if state != "READY"]
    for index in sorted(set(nodes) | set(table)):
        row = table.get(index)
        if row is None:
            found.append(f"{_node(nodes, index)}: not in the connectivity table")
            continue
        codes = {}
        for other in sorted(set(nodes) | set(row)):
            code = row.get(other, "missing")
            if code != "C":
                codes.setdefault(code, []).append(f"#{other}")
        found.extend(f"{_node(nodes, index)} to {', '.join(peers)}: {code} ({LEGEND.get(code, 'unknown')})"
                     for code, peers in codes.items())
    if reading["domain"] != "UP":
        found.append(f"Domain State {reading['domain'] or 'not printed'}, wanted UP")
    return found
