#!/usr/bin/env python3
"""Write a fake sysfs/procfs tree that describes a simulated GPU node.

Usage: make_sysfs.py SPEC ROOT

SPEC is a YAML file (or the name of one in tests/simnode/specs/, without
.yml) in the format documented in docs/DEVELOPING.md; ROOT receives ``sys/``
and ``proc/`` shaped like the kernel's:

    sys/devices/<parent>/<address>/{vendor,device,subsystem_vendor,
        subsystem_device,class,numa_node,modalias[,revision]}
    sys/devices/<parent>/<address>/driver -> sys/bus/pci/drivers/<driver>
    sys/bus/pci/devices/<address> -> sys/devices/<parent>/<address>
    sys/bus/pci/drivers/<driver>/<address> -> the device
    sys/devices/<parent>/<address>/vpd        (when the spec gives ``vpd``: synthetic, see vpd_image)
    sys/devices/<parent>/<address>/physfn -> its physical function (an SR-IOV VF, ``physfn``)
    sys/module/<name>/{initstate,version}     (version only when given)
    proc/modules
    proc/driver/nvidia/version                (when the nvidia module is loaded)
    switch/fabric                             (when the spec gives ``fabric``: fake-only, see below)

A GB200/GB300 tray's GPUs report the NVLink fabric that the switch trays run (their subnet
manager and NMX-Controller): a spec's ``fabric`` (state, status, clique_id, cluster_uuid, health) is
that switch side, written to ``switch/fabric`` as shell assignments that the fake nvidia-smi reads
(tests/simnode/fakes/driver/bin/nvidia-smi); a real node has no such file.

A spec may also name the distribution package that installed the loaded driver
(``driver_package``: name, version, provides); tests/simnode/driver_package.py
installs a stub of it on the node, so that dpkg owns the driver's files there
as on the host the spec describes. This script only checks that entry.

Links are relative, as in the kernel's sysfs, so the tree can be copied.
The script is idempotent: it builds the tree aside, compares it with what is
under ROOT and swaps it in only when they differ (a rebuild also drops files
that other fakes wrote there). It prints one line saying which happened.
Needs only python3 and PyYAML, so it runs inside the simulated node.
"""

import argparse
import os
import re
import shutil
import sys
import tempfile

import yaml

SPECS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "specs")

ADDRESS_RE = re.compile(r"^([0-9a-f]{4}):([0-9a-f]{2}):([0-1][0-9a-f])\.([0-7])$")
HEX4_RE = re.compile(r"^[0-9a-f]{4}$")
CLASS_RE = re.compile(r"^[0-9a-f]{6}$")
MODULE_RE = re.compile(r"^[A-Za-z0-9_-]+$")
VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+)+$")
DRIVER_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
PARENT_RE = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}(/[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])*$")

DEVICE_KEYS = {
    "address", "parent", "vendor", "device", "subsystem_vendor", "subsystem_device",
    "class", "numa_node", "driver", "revision", "vpd", "physfn",
}
VPD_KEYS = {"id", "read_only"}
VPD_KEYWORD_RE = re.compile(r"^[A-Z][A-Z0-9]$")
TOP_KEYS = {"description", "modules", "devices", "nvidia_module_type", "driver_package", "fabric"}
#: the switch side of a tray's fabric (switch/fabric): key -> the fake nvidia-smi's variable
FABRIC_KEYS = {"state": "FABRIC_STATE", "status": "FABRIC_STATUS", "clique_id": "FABRIC_CLIQUE",
               "cluster_uuid": "FABRIC_CLUSTER", "health": "FABRIC_HEALTH"}
FABRIC_VALUE_RE = re.compile(r"^[A-Za-z0-9 ._-]+$")
#: the folders of the tree, built aside and swapped in together
TOPS = ("sys", "proc", "switch")
PACKAGE_KEYS = {"name", "version", "provides"}
#: Debian policy 5.6.1 (package names) and 5.6.12 (versions: upstream-revision, no epoch here).
PACKAGE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
PACKAGE_VERSION_RE = re.compile(r"^[0-9][A-Za-z0-9.+~]*-[A-Za-z0-9.+~]+$")

# /proc/driver/nvidia/version as the two kinds of kernel module write it.
NVIDIA_VERSION_TEXT = {
    "proprietary": (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Thu Oct 19 18:56:32 UTC 2023\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n"
    ),
    "open": (
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build  "
        "(dvs-builder@U16-A24-9-2)  Thu Oct 10 12:15:00 UTC 2024\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n"
    ),
}


class SpecError(Exception):
    """The spec is not valid; the message names the file and the problem."""


def _hex(value, where, pattern, width):
    """Normalise an ID given as "10de", "0x10DE" or an int to lower-case hex."""
    if isinstance(value, bool) or value is None:
        raise SpecError(f"{where}: expected a hex ID, got {value!r}")
    if isinstance(value, int):
        text = f"{value:0{width}x}"
    else:
        text = str(value).strip().lower()
        text = text[2:] if text.startswith("0x") else text
    if not pattern.match(text):
        raise SpecError(f"{where}: {value!r} is not {width} hex digits")
    return text


def validate_spec(data, source="spec"):
    """Check a parsed spec and return it normalised (lower-case hex, defaults)."""
    if not isinstance(data, dict):
        raise SpecError(f"{source}: the top level must be a mapping")
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise SpecError(f"{source}: unknown keys {sorted(unknown)}")
    modules = data.get("modules") or {}
    if not isinstance(modules, dict):
        raise SpecError(f"{source}: modules must be a mapping of name -> version or null")
    norm_modules = {}
    for name, value in modules.items():
        if not isinstance(name, str) or not MODULE_RE.match(name):
            raise SpecError(f"{source}: modules: {name!r} is not a module name")
        version = None if value is None else str(value)
        if version is not None and not VERSION_RE.match(version):
            raise SpecError(f"{source}: modules.{name}: {version!r} is not a version like 535.129.03")
        norm_modules[name] = version
    module_type = data.get("nvidia_module_type", "proprietary")
    if module_type not in NVIDIA_VERSION_TEXT:
        raise SpecError(f"{source}: nvidia_module_type must be one of {sorted(NVIDIA_VERSION_TEXT)}")
    devices = data.get("devices") or []
    if not isinstance(devices, list):
        raise SpecError(f"{source}: devices must be a list")
    norm_devices = []
    seen = set()
    for index, dev in enumerate(devices):
        where = f"{source}: devices[{index}]"
        if not isinstance(dev, dict):
            raise SpecError(f"{where}: must be a mapping")
        unknown = set(dev) - DEVICE_KEYS
        if unknown:
            raise SpecError(f"{where}: unknown keys {sorted(unknown)}")
        for key in ("address", "vendor", "device", "class"):
            if key not in dev:
                raise SpecError(f"{where}: {key} is required")
        address = str(dev["address"]).lower()
        match = ADDRESS_RE.match(address)
        if not match:
            raise SpecError(f"{where}: address {dev['address']!r} is not like 0000:00:1e.0")
        if address in seen:
            raise SpecError(f"{where}: address {address} appears twice")
        seen.add(address)
        parent = str(dev.get("parent") or f"pci{match.group(1)}:{match.group(2)}")
        if not PARENT_RE.match(parent):
            raise SpecError(f"{where}: parent {parent!r} is not like pci0000:00[/0000:00:01.0...]")
        klass = str(dev["class"]).lower()
        klass = klass[2:] if klass.startswith("0x") else klass
        if len(klass) == 4:
            klass += "00"
        if not CLASS_RE.match(klass):
            raise SpecError(f"{where}: class {dev['class']!r} is not 4 or 6 hex digits")
        numa = dev.get("numa_node", -1)
        if isinstance(numa, bool) or not isinstance(numa, int) or numa < -1:
            raise SpecError(f"{where}: numa_node must be an integer >= -1")
        driver = dev.get("driver")
        if driver is not None and (not isinstance(driver, str) or not DRIVER_RE.match(driver)):
            raise SpecError(f"{where}: driver {driver!r} is not a driver name")
        revision = dev.get("revision")
        physfn = dev.get("physfn")
        if physfn is not None and not ADDRESS_RE.match(str(physfn)):
            raise SpecError(f"{where}: physfn {physfn!r} is not like 0000:00:1e.0")
        norm_devices.append({
            "address": address,
            "parent": parent,
            "vendor": _hex(dev["vendor"], f"{where}.vendor", HEX4_RE, 4),
            "device": _hex(dev["device"], f"{where}.device", HEX4_RE, 4),
            "subsystem_vendor": _hex(dev.get("subsystem_vendor", "0000"),
                                     f"{where}.subsystem_vendor", HEX4_RE, 4),
            "subsystem_device": _hex(dev.get("subsystem_device", "0000"),
                                     f"{where}.subsystem_device", HEX4_RE, 4),
            "class": klass,
            "numa_node": numa,
            "driver": driver,
            "revision": None if revision is None else _hex(revision, f"{where}.revision",
                                                           re.compile(r"^[0-9a-f]{2}$"), 2),
            "vpd": validate_vpd(dev.get("vpd"), f"{where}.vpd"),
            "physfn": None if physfn is None else str(physfn),
        })
    for dev in norm_devices:
        if dev["physfn"] is not None and dev["physfn"] not in seen:
            raise SpecError(f"{source}: {dev['address']}: physfn {dev['physfn']} is not a device of the spec")
    return {
        "description": str(data.get("description", "")),
        "modules": norm_modules,
        "nvidia_module_type": module_type,
        "devices": norm_devices,
        "driver_package": validate_package(data.get("driver_package"), norm_modules, source),
        "fabric": validate_fabric(data.get("fabric"), source),
    }


def validate_fabric(fabric, source):
    """The switch side of a tray's fabric: None, or every key of FABRIC_KEYS as a plain string."""
    if fabric is None:
        return None
    if not isinstance(fabric, dict) or set(fabric) != set(FABRIC_KEYS):
        raise SpecError(f"{source}: fabric must be a mapping of exactly {sorted(FABRIC_KEYS)}")
    for key, value in fabric.items():
        if not FABRIC_VALUE_RE.match(str(value)):
            raise SpecError(f"{source}: fabric.{key}: {value!r} is not a plain value")
    return {key: str(value) for key, value in fabric.items()}


def validate_vpd(vpd, where):
    """A device's ``vpd``: ``{id: str, read_only: {keyword: str}}`` (ASCII, at most 255 bytes a value)."""
    if vpd is None:
        return None
    if not isinstance(vpd, dict) or set(vpd) - VPD_KEYS or not isinstance(vpd.get("read_only", {}), dict):
        raise SpecError(f"{where}: must be a mapping with id (a string) and read_only (keyword: string)")
    keywords = {str(k): str(v) for k, v in (vpd.get("read_only") or {}).items()}
    for keyword, value in keywords.items():
        if not VPD_KEYWORD_RE.match(keyword) or keyword == "RV" or len(value) > 255 or not value.isascii():
            raise SpecError(f"{where}.read_only: {keyword}: not a PCI VPD keyword (2 characters, not RV) "
                            "with an ASCII value of at most 255 bytes")
    return {"id": str(vpd.get("id", "")), "read_only": keywords}


def vpd_image(vpd):
    """A PCI VPD image (PCI Local Bus Specification 3.0, 6.4 and appendix I), synthetic: the 0x82
    identifier string, a 0x90 VPD-R resource of the spec's keywords (2 characters, a length byte, the
    value) closed by RV, whose first byte makes the bytes up to it sum to zero, and the 0x78 end tag."""
    ident = vpd["id"].encode("ascii")
    body = b"".join(key.encode("ascii") + bytes([len(value)]) + value.encode("ascii")
                    for key, value in vpd["read_only"].items())
    body += b"RV\x01"
    image = (bytes([0x82, len(ident) & 0xFF, len(ident) >> 8]) + ident
             + bytes([0x90, (len(body) + 1) & 0xFF, (len(body) + 1) >> 8]) + body)
    return image + bytes([-sum(image) & 0xFF, 0x78])


def validate_package(package, modules, source="spec"):
    """The ``driver_package`` entry, checked: a Debian name, a version of the loaded nvidia module."""
    if package is None:
        return None
    where = f"{source}: driver_package"
    if not isinstance(package, dict):
        raise SpecError(f"{where}: must be a mapping with name, version (and provides)")
    unknown = set(package) - PACKAGE_KEYS
    if unknown:
        raise SpecError(f"{where}: unknown keys {sorted(unknown)}")
    name, version = str(package.get("name", "")), str(package.get("version", ""))
    provides = package.get("provides") or []
    if not isinstance(provides, list):
        raise SpecError(f"{where}.provides: must be a list of package names")
    for value, what in [(name, "name"), *((str(p), "provides") for p in provides)]:
        if not PACKAGE_NAME_RE.match(value):
            raise SpecError(f"{where}.{what}: {value!r} is not a Debian package name")
    if not PACKAGE_VERSION_RE.match(version):
        raise SpecError(f"{where}.version: {version!r} is not a Debian version like 535.129.03-0ubuntu1")
    loaded = modules.get("nvidia")
    if not loaded or version.split("-", maxsplit=1)[0] != loaded:
        raise SpecError(f"{where}.version: {version!r} is not a package of the loaded nvidia module "
                        f"({loaded or 'none loaded'})")
    return {"name": name, "version": version, "provides": [str(p) for p in provides]}


def load_spec(spec):
    """Read a spec by path, or by name from tests/simnode/specs/."""
    path = spec
    if not os.path.exists(path) and os.sep not in spec:
        path = os.path.join(SPECS_DIR, spec if spec.endswith(".yml") else spec + ".yml")
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from exc
    return validate_spec(data, path)


def modalias(dev):
    klass = dev["class"]
    return "pci:v0000{}d0000{}sv0000{}sd0000{}bc{}sc{}i{}".format(
        dev["vendor"].upper(), dev["device"].upper(), dev["subsystem_vendor"].upper(),
        dev["subsystem_device"].upper(), klass[0:2].upper(), klass[2:4].upper(), klass[4:6].upper(),
    )


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _link(target, link_path):
    """A relative symlink at link_path pointing to the absolute target."""
    os.makedirs(os.path.dirname(link_path), exist_ok=True)
    os.symlink(os.path.relpath(target, os.path.dirname(link_path)), link_path)


def build_tree(spec, root):
    """Write sys/ and proc/ for a normalised spec under root (an empty dir)."""
    sys_dir = os.path.join(root, "sys")
    proc_dir = os.path.join(root, "proc")
    bus_devices = os.path.join(sys_dir, "bus", "pci", "devices")
    drivers_dir = os.path.join(sys_dir, "bus", "pci", "drivers")
    os.makedirs(bus_devices)
    os.makedirs(drivers_dir)
    dev_dirs = {}
    for dev in spec["devices"]:
        dev_dir = dev_dirs[dev["address"]] = os.path.join(sys_dir, "devices", *dev["parent"].split("/"),
                                                          dev["address"])
        files = {
            "vendor": f"0x{dev['vendor']}\n",
            "device": f"0x{dev['device']}\n",
            "subsystem_vendor": f"0x{dev['subsystem_vendor']}\n",
            "subsystem_device": f"0x{dev['subsystem_device']}\n",
            "class": f"0x{dev['class']}\n",
            "numa_node": f"{dev['numa_node']}\n",
            "modalias": modalias(dev) + "\n",
        }
        if dev["revision"] is not None:
            files["revision"] = f"0x{dev['revision']}\n"
        for name, text in files.items():
            _write(os.path.join(dev_dir, name), text)
        if dev["vpd"] is not None:
            with open(os.path.join(dev_dir, "vpd"), "wb") as handle:
                handle.write(vpd_image(dev["vpd"]))
        _link(dev_dir, os.path.join(bus_devices, dev["address"]))
        if dev["driver"]:
            driver_dir = os.path.join(drivers_dir, dev["driver"])
            os.makedirs(driver_dir, exist_ok=True)
            _link(driver_dir, os.path.join(dev_dir, "driver"))
            _link(dev_dir, os.path.join(driver_dir, dev["address"]))
    for dev in spec["devices"]:
        if dev["physfn"]:
            _link(dev_dirs[dev["physfn"]], os.path.join(dev_dirs[dev["address"]], "physfn"))
    modules_lines = []
    for index, (name, version) in enumerate(sorted(spec["modules"].items())):
        module_dir = os.path.join(sys_dir, "module", name)
        _write(os.path.join(module_dir, "initstate"), "live\n")
        if version is not None:
            _write(os.path.join(module_dir, "version"), version + "\n")
        taint = " (POE)" if name.startswith("nvidia") else ""
        size = 1048576 + 4096 * index
        modules_lines.append(f"{name} {size} 0 - Live 0x0000000000000000{taint}\n")
    os.makedirs(proc_dir)
    _write(os.path.join(proc_dir, "modules"), "".join(modules_lines))
    nvidia_version = spec["modules"].get("nvidia")
    if nvidia_version is not None:
        text = NVIDIA_VERSION_TEXT[spec["nvidia_module_type"]].format(version=nvidia_version)
        _write(os.path.join(proc_dir, "driver", "nvidia", "version"), text)
    os.makedirs(os.path.join(root, "switch"))
    if spec.get("fabric"):
        _write(os.path.join(root, "switch", "fabric"),
               "".join(f"{FABRIC_KEYS[key]}='{value}'\n" for key, value in sorted(spec["fabric"].items())))


def snapshot(root):
    """Everything under the tree's folders (TOPS): relative path -> content or link."""
    result = {}
    for top in TOPS:
        base = os.path.join(root, top)
        if not os.path.lexists(base):
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            rel_dir = os.path.relpath(dirpath, root)
            result[rel_dir] = ("dir",)
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                rel = os.path.join(rel_dir, name)
                if os.path.islink(path):
                    result[rel] = ("link", os.readlink(path))
                elif os.path.isfile(path):
                    with open(path, "rb") as handle:
                        result[rel] = ("file", handle.read())
    return result


def _check_root(root):
    real = os.path.realpath(root)
    if real == os.sep:
        raise SpecError(f"{root}: refusing to write a fake sysfs over the real root")
    for top in TOPS:
        path = os.path.join(real, top)
        if os.path.ismount(path) or (os.path.lexists(path) and not os.path.isdir(path)):
            raise SpecError(f"{path}: is a mount point or not a directory; refusing to replace it")


def make_tree(spec, root):
    """Make the tree's folders under root (TOPS) match spec; returns True when anything changed."""
    _check_root(root)
    os.makedirs(root, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".make_sysfs.", dir=root)
    try:
        build_tree(spec, staging)
        if snapshot(staging) == snapshot(root):
            return False
        for top in TOPS:
            current = os.path.join(root, top)
            if os.path.lexists(current):
                shutil.rmtree(current)
            os.replace(os.path.join(staging, top), current)
        return True
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Write a simulated node's sysfs/procfs from a spec.")
    parser.add_argument("spec", help="spec file, or a name from tests/simnode/specs/")
    parser.add_argument("root", help="directory that receives sys/ and proc/")
    args = parser.parse_args(argv)
    try:
        spec = load_spec(args.spec)
        changed = make_tree(spec, args.root)
    except SpecError as exc:
        print(f"make_sysfs: {exc}", file=sys.stderr)
        return 2
    if changed:
        print(f"make_sysfs: {args.root} rebuilt from {args.spec} (changed)")
    else:
        print(f"make_sysfs: {args.root} already matches {args.spec} (unchanged)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
