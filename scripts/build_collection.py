#!/usr/bin/env python3
"""Build the gpunode Galaxy collection from the playbook project.

    python scripts/build_collection.py [--tree DIR] [--output-path DIR] [--no-tarball]

plan_layout moves the project's folders into the collection's layout (library/ and
roles/*/library/ -> plugins/modules/, module_utils/ and *_plugins/ -> plugins/*/, roles/,
site.yml and playbooks/ -> playbooks/, collection/ -> the root). Tasks keep short names,
which a collection's roles and playbooks look up in their own collection first; what does
not resolve so is rewritten inside its line (scripts/collection_names.py), and what cannot
be fails the build with file and line. docs/COLLECTION.md has the details.
"""

import argparse
import pathlib
import shutil
import subprocess
import sys

import yaml
from collection_names import (  # beside this script
    METADATA_DIR,
    BuildError,
    Project,
    plugin_names_from_class,  # noqa: F401 (scripts/check_boilerplate.py imports it from here)
    rewrite_python,
    rewrite_yaml,
)

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Plugin folders of a playbook project (top level or in a role) -> collection plugin type.
PLUGIN_FOLDERS = {"library": "modules", "module_utils": "module_utils", "doc_fragments": "doc_fragments"} | {
    f"{kind}_plugins": kind for kind in ("action", "become", "cache", "callback", "connection", "filter",
                                         "inventory", "lookup", "strategy", "test", "vars")}
SKIPPED_SUFFIXES = (".pyc", ".pyo", ".orig", ".rej", "~")


def project_files(root):
    """Paths (relative) of the files git tracks or would track; every file without git."""
    try:
        command = ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
        paths = subprocess.run(command, check=True, capture_output=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        paths = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
    return [pathlib.PurePosixPath(rel) for rel in sorted(set(paths)) if "__pycache__" not in rel.split("/")
            and not rel.endswith(SKIPPED_SUFFIXES) and (root / rel).is_file()]


def plan_layout(root, files):
    """Map each project file that goes into the collection to (destination, kind).

    Kinds: plugin (plugins/), playbook, yaml (roles' and playbooks' other YAML),
    template (roles' templates/), copy (as it is).
    """
    layout, taken = {}, {}
    for rel in files:
        parts, is_yaml, dest = rel.parts, rel.suffix in (".yml", ".yaml"), rel
        inner = parts[2:] if parts[0] == "roles" else parts  # the project's plugin folders or a role's
        if len(inner) > 1 and inner[0] in PLUGIN_FOLDERS:
            dest, kind = pathlib.PurePosixPath("plugins", PLUGIN_FOLDERS[inner[0]], *inner[1:]), "plugin"
        elif parts[0] == "roles" and len(parts) > 2:
            kind = {"templates": "template", "files": "copy"}.get(parts[2], "yaml" if is_yaml else "copy")
        elif is_yaml and (str(rel) == f"site{rel.suffix}" or (parts[0] == "playbooks" and len(parts) == 2)):
            dest, kind = pathlib.PurePosixPath("playbooks", rel.name), "playbook"
        elif is_yaml and parts[0] == "playbooks" and len(parts) == 3 and parts[1] in ("tasks", "vars"):
            kind = "yaml"
        elif parts[0] == METADATA_DIR and len(parts) > 1:
            dest, kind = pathlib.PurePosixPath(*parts[1:]), "copy"
        elif str(rel) in ("LICENSE", "README.md"):
            kind = "copy"
        else:
            continue
        if (other := taken.setdefault(dest, rel)) != rel:
            raise BuildError(f"{rel} and {other} both become {dest} in the collection")
        layout[rel] = (dest, kind)
    if pathlib.PurePosixPath("galaxy.yml") not in taken:
        raise BuildError(f"{root / METADATA_DIR / 'galaxy.yml'}: missing")
    return layout


def build_tree(root, tree):
    """Write the collection under ``tree``/ansible_collections/NS/NAME; return that path and galaxy.yml."""
    path = root / METADATA_DIR / "galaxy.yml"
    try:
        galaxy = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise BuildError(f"{path}: {exc}") from exc
    for key in ("namespace", "name", "version"):
        if not isinstance(galaxy, dict) or not galaxy.get(key):
            raise BuildError(f"{path}: no {key}")
    layout = plan_layout(root, project_files(root))
    project = Project(root, layout, galaxy)
    target = pathlib.Path(tree) / "ansible_collections" / galaxy["namespace"] / galaxy["name"]
    if target.exists():
        shutil.rmtree(target)
    for src, (dest, kind) in sorted(layout.items()):
        out = target / dest
        out.parent.mkdir(parents=True, exist_ok=True)
        if kind == "copy" or (kind == "plugin" and dest.suffix not in (".py", ".yml", ".yaml")):
            shutil.copy2(root / src, out)
            continue
        text = (root / src).read_text(encoding="utf-8")
        if dest.suffix == ".py":
            text = rewrite_python(text, str(src), project, dest.parts[1] == "modules")
        elif kind == "template":
            text = project.rewrite_jinja(text)  # a name in filter position with a prefix is still valid Jinja
        else:  # a plugin's YAML is its documentation (filters, tests): EXAMPLES get FQCNs
            text = rewrite_yaml(text, str(src), project, playbook=src if kind == "playbook" else None)
        out.write_text(text, encoding="utf-8")
        shutil.copymode(root / src, out)
    return target, galaxy


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--tree", type=pathlib.Path, default=ROOT / "build" / "collection",
                        help="where the collection tree goes (ansible_collections/NS/NAME under it)")
    parser.add_argument("--output-path", type=pathlib.Path, default=ROOT / "build",
                        help="where the tarball goes")
    parser.add_argument("--no-tarball", action="store_true", help="build the tree only")
    args = parser.parse_args(argv)
    try:
        collection_dir, galaxy = build_tree(ROOT, args.tree)
    except BuildError as exc:
        print(f"build_collection: {exc}", file=sys.stderr)
        return 1
    print(f"collection tree: {collection_dir}")
    if not args.no_tarball:
        subprocess.run(["ansible-galaxy", "collection", "build", str(collection_dir), "--output-path",
                        str(args.output_path), "--force"], check=True, stdout=subprocess.DEVNULL)
        name = f"{galaxy['namespace']}-{galaxy['name']}-{galaxy['version']}.tar.gz"
        print(f"collection tarball: {args.output_path / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
