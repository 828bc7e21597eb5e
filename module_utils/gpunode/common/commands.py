# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What every command gpunode runs on a node runs with.

``C_LOCALE`` goes to ``module.run_command(argv, environ_update=C_LOCALE)``: the
output the modules parse (dpkg, systemctl, nvidia-smi, kubelet --version,
containerd config dump) is then the untranslated text the parsers expect,
whatever the node's locale.
"""

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
