# Copyright: (c) 2026, gpunode maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action gpunode_boot_archive: the boot unit's archive, built on the controller and copied to the node.

A GPU node has no Ansible, so its boot unit (roles/gpu_validate) runs the modules the play runs
from one zip (``python3 ARCHIVE``): the controller's own ``ansible/module_utils`` (the
ansible-core that runs the play, as installed), an empty ``ansible/__init__.py``, gpunode's
module_utils where the modules import them from (``ansible.module_utils.gpunode`` here,
``ansible_collections.NS.NAME.plugins.module_utils.gpunode`` in the collection build), the
modules, and a ``__main__.py`` calling ``readiness/boot.py``'s ``main``. Entries are sorted and
stamped 1980-01-01, so the same inputs give the same bytes and a re-run changes nothing.
Built once per run and inputs (a file under the run's local temporary folder, named by a digest
of the inputs' names, sizes and times), then handed to the ``copy`` action: check mode, --diff,
mode and the checksum comparison are copy's. The documentation is library/gpunode_boot_archive.py.
"""

import hashlib
import os
import re
import zipfile

import ansible.module_utils
from ansible import constants as C
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

ARGUMENT_SPEC = {
    "dest": {"type": "path", "required": True},
    "modules": {"type": "list", "elements": "str", "default": ["nvidia_gpu_validate", "gpu_node_condition"]},
    "mode": {"type": "raw", "default": "0644"},
}
STAMP = (1980, 1, 1, 0, 0, 0)
OWN_PACKAGE = re.compile(r"^from\s+([\w.]+)\.gpunode\.", re.MULTILINE)
#: the role's file that runs each module as its own process (roles/gpu_validate/files/): beside the
#: packages, not in module_utils (a plain process at boot, no AnsibleModule and no run_command there)
RUNNER = "gpunode_boot_runner.py"
MAIN = ("import sys\n\nfrom gpunode_boot_runner import run_module\n"
        "from {package}.gpunode.readiness.boot import main\n\nsys.exit(main(run_module=run_module))\n")


def _tree(folder, prefix):
    """(name in the archive, path) of each .py file under ``folder``."""
    for top, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(top, name)
                yield prefix + "/" + os.path.relpath(path, folder).replace(os.sep, "/"), path


def entries(module_files, runner):
    """{name in the archive: path on the controller (str), or content (bytes)}: the modules, what they
    import, the ``runner`` file and ``__main__``."""
    first = next(iter(module_files.values()))
    with open(first, encoding="utf-8") as source:
        found = OWN_PACKAGE.search(source.read())
    if found is None:
        raise AnsibleActionFail(f"{first}: no import of gpunode's module_utils found")
    package = found.group(1)  # ansible.module_utils, or the collection's plugins.module_utils
    where = package.replace(".", "/")
    files = {"ansible/__init__.py": b"", "__main__.py": MAIN.format(package=package).encode(), RUNNER: runner}
    files.update(_tree(os.path.dirname(ansible.module_utils.__file__), "ansible/module_utils"))
    parts = where.split("/")
    for depth in range(1, len(parts) + 1):  # the collection's packages above module_utils
        files.setdefault("/".join(parts[:depth]) + "/__init__.py", b"")
    own = os.path.join(os.path.dirname(os.path.dirname(first)), "module_utils", "gpunode")
    files.update(_tree(own, where + "/gpunode"))
    files.update({name + ".py": path for name, path in module_files.items()})
    return files


def digest(files):
    """A digest of the inputs (names, sizes, modification times, texts): the cached archive's name."""
    inputs = hashlib.sha256(ansible.module_utils.__file__.encode())
    for name in sorted(files):
        value = files[name]
        stat = None if isinstance(value, bytes) else os.stat(value)
        inputs.update(repr((name, value, stat and (stat.st_size, stat.st_mtime_ns))).encode())
    return inputs.hexdigest()[:32]


def write_archive(files, path):
    """The zip of ``files``, sorted and stamped so that the same inputs give the same bytes."""
    with zipfile.ZipFile(path, "w") as archive:
        for name in sorted(files):
            value = files[name]
            info = zipfile.ZipInfo(name, STAMP)
            info.compress_type, info.external_attr = zipfile.ZIP_DEFLATED, 0o644 << 16
            if not isinstance(value, bytes):
                with open(value, "rb") as source:
                    value = source.read()
            archive.writestr(info, value)


class ActionModule(ActionBase):
    """Builds the archive (once per run and inputs) and copies it with the copy action."""

    TRANSFERS_FILES = True
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        finder = self._shared_loader_obj.module_loader
        module_files = {name: finder.find_plugin(name) for name in args["modules"]}
        missing = sorted(name for name, path in module_files.items() if not path)
        if missing:
            raise AnsibleActionFail(f"modules not found on the controller: {', '.join(missing)}")
        files = entries(module_files, self._find_needle("files", RUNNER))
        local = os.path.join(C.DEFAULT_LOCAL_TMP, f"gpunode-boot-{digest(files)}.zip")
        if not os.path.exists(local):
            write_archive(files, f"{local}.{os.getpid()}")
            os.replace(f"{local}.{os.getpid()}", local)  # workers of other hosts may race: same bytes
        new_task = self._task.copy()
        new_task.args = {"src": local, "dest": args["dest"], "mode": args["mode"]}
        copy_action = self._shared_loader_obj.action_loader.get(
            "ansible.legacy.copy", task=new_task, connection=self._connection,
            play_context=self._play_context, loader=self._loader, templar=self._templar,
            shared_loader_obj=self._shared_loader_obj)
        return copy_action.run(task_vars=task_vars)
