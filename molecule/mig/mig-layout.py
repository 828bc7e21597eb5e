#!/usr/bin/env python3
# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Print `nvidia-smi -L` (or the file given) as JSON: {GPU index: {MIG profile: count}}."""

import json
import re
import subprocess
import sys

if len(sys.argv) > 1:
    with open(sys.argv[1]) as handle:
        text = handle.read()
else:
    text = subprocess.check_output(["nvidia-smi", "-L"], universal_newlines=True)
layout = {}
gpu = None
for line in text.splitlines():
    found = re.match(r"^GPU (\d+): ", line)
    if found:
        gpu = layout.setdefault(found.group(1), {})
        continue
    found = re.match(r"^\s+MIG (\S+)\s+Device\s+\d+:", line)
    if found and gpu is not None:
        gpu[found.group(1)] = gpu.get(found.group(1), 0) + 1
print(json.dumps(layout, sort_keys=True))
