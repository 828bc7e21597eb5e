"""One way for unit tests to run ansible-playbook: this checkout's ansible.cfg, the controller's own
ansible-playbook (the one beside this interpreter: .venv or .venv-newest), no colour."""

import json
import os
import subprocess
import sys

from conftest import ROOT

BINDIR = os.path.dirname(sys.executable)


def local_inventory(path):
    """Write a JSON inventory of ``localhost`` on this interpreter (local connection); returns ``path``."""
    path.write_text(json.dumps({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    return path


def ansible_playbook(playbook, inventory, *args, check=True, timeout=600, path=None, **env):
    """The completed process; ``check``: raise AssertionError with the output's tail when it failed.
    ``path``: PATH instead of this interpreter's bin folder before the caller's; ``env``: more
    variables (ANSIBLE_*)."""
    environment = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                       ANSIBLE_FORCE_COLOR="0", no_proxy="127.0.0.1",
                       PATH=path or BINDIR + os.pathsep + os.environ["PATH"], **env)
    command = [os.path.join(BINDIR, "ansible-playbook"), "-i", str(inventory), str(playbook), *args]
    proc = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"ansible-playbook failed ({proc.returncode}):\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}")
    return proc
