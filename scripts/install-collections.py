#!/usr/bin/env python3
"""Install the collections named in requirements.yml without Ansible Galaxy.

Galaxy is not reachable from CI, so the collections are unpacked from the
pinned, hash-checked ``ansible`` wheel on PyPI (requirements-collections.txt)
into this interpreter's ``site-packages/ansible_collections``, where
ansible-core finds them. Only the collections requirements.yml names are
unpacked (a few MB instead of the whole bundle). Re-running is a no-op.
"""

import json
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent


def wanted_collections():
    with open(ROOT / "requirements.yml", encoding="utf-8") as handle:
        return [entry["name"] for entry in yaml.safe_load(handle)["collections"]]


def installed_version(target, name):
    manifest = target / name.replace(".", "/") / "MANIFEST.json"
    if not manifest.is_file():
        return None
    return json.loads(manifest.read_text())["collection_info"]["version"]


def main():
    target = pathlib.Path(sysconfig.get_paths()["purelib"]) / "ansible_collections"
    names = wanted_collections()
    if all(installed_version(target, name) for name in names):
        print("collections already installed: " + ", ".join(names))
        return 0
    with tempfile.TemporaryDirectory() as download_dir:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--require-hashes", "-r", str(ROOT / "requirements-collections.txt"),
             "-d", download_dir],
            check=True,
        )
        wheel = next(pathlib.Path(download_dir).glob("ansible-*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            for name in names:
                prefix = "ansible_collections/" + name.replace(".", "/") + "/"
                members = [m for m in archive.namelist() if m.startswith(prefix)]
                if not members:
                    sys.exit(f"{wheel.name} has no collection {name}")
                shutil.rmtree(target / name.replace(".", "/"), ignore_errors=True)
                archive.extractall(target.parent, members)
                print(f"installed {name} {installed_version(target, name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
