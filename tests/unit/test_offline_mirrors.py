"""No internet (issue 23): with every mirror set, nothing names another host.

Add-ons: the role renders every mode (nvidia with named configs, MPS and MIG,
gpushare, HAMi with its own scheduler and as an extender, DRA with its
examples) through ansible-playbook with gpu_cluster_addons_image_registry set;
every image in every rendered file must start with the mirror. Node roles:
nvidia_driver_state's request and nvidia_container_runtime_state's plan with
the mirror variables set name no URL off the mirror host.
"""

import json
import pathlib
import re
import sys

import pytest
import yaml
from ansible.module_utils.gpunode.driver.driver import build_request
from ansible.module_utils.gpunode.runtime import engines as cre
from test_container_runtime_state import build, fresh_node
from test_gpu_cluster_addons_render import SHARING, ansible_playbook
from test_gpu_cluster_addons_render import T4 as T4_FACTS
from test_nvidia_driver import DEBIAN12, T4, UBUNTU2404, gpu

ROOT = pathlib.Path(__file__).resolve().parents[2]
MIRROR = "registry.local:5000/mirror"
APT = "http://apt.local:8080"
# the registries the add-ons are pinned to
UPSTREAM = r"nvcr\.io|registry\.k8s\.io|docker\.io|aliyuncs\.com|ghcr\.io|quay\.io"


def rendered_images(directory):
    """(file, image) for every ``image:`` line and IMAGE_NAME value in the rendered files."""
    found = []
    for path in sorted(directory.rglob("*.yaml")):
        text = path.read_text()
        for match in re.finditer(r"^\s*(?:- )?image:\s*\"?([^\s\"]+)", text, re.M):
            found.append((str(path.relative_to(directory)), match[1]))
        for match in re.finditer(r"name: IMAGE_NAME\s+value:\s*\"?([^\s\"]+)", text):
            found.append((str(path.relative_to(directory)), match[1]))
    return found


@pytest.mark.controller(reason="renders the role's templates through ansible-playbook")
def test_every_rendered_image_is_on_the_mirror(tmp_path):
    cases = {
        "nvidia": dict(SHARING, gpu_cluster_addons_kubernetes_version="1.33"),
        "gpushare": {"gpu_cluster_addons_mode": "gpushare", "gpu_cluster_addons_kubernetes_version": "1.33"},
        "hami": {"gpu_cluster_addons_mode": "hami", "gpu_cluster_addons_kubernetes_version": "1.33"},
        "hami-extender": {"gpu_cluster_addons_mode": "hami", "gpu_cluster_addons_hami_scheduler": "extender",
                          "gpu_cluster_addons_kubernetes_version": "1.33"},
        "dra": {"gpu_cluster_addons_mode": "dra", "gpu_cluster_addons_kubernetes_version": "1.37"},
    }
    for name, case in cases.items():
        case.update(gpu_cluster_addons_output_dir=str(tmp_path / name),
                    gpu_cluster_addons_image_registry=MIRROR)
    common = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
              "gpu_cluster_addons_gpu_hosts": []}
    gpus = {"t4-ts": {"addons_nvidia_gpu": T4_FACTS, "gpu_cluster_addons_device_plugin_config_name": "ts"},
            "t4-mps": {"addons_nvidia_gpu": T4_FACTS, "gpu_cluster_addons_device_plugin_config_name": "mps"},
            "hgx-mig": {"addons_nvidia_gpu": T4_FACTS, "gpu_cluster_addons_device_plugin_config_name": "mig"},
            "t4-node": {"addons_nvidia_gpu": T4_FACTS}}
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"children": {
        "addons_render": {"hosts": cases, "vars": common},
        "addons_gpu": {"hosts": gpus, "vars": common}}}}))
    ansible_playbook(inventory)
    for name in cases:
        found = rendered_images(tmp_path / name)
        assert found, f"{name}: no image rendered"
        off = [(f, image) for f, image in found if not image.startswith(MIRROR + "/")]
        assert not off, f"{name}: images off the mirror: {off}"
        for path in (tmp_path / name).rglob("*"):
            if path.is_file():
                hosts = re.findall(UPSTREAM, path.read_text())
                assert not hosts, f"{path}: names {hosts}"
    kinds = {image.rsplit(":", 1)[0] for name in cases for _f, image in rendered_images(tmp_path / name)}
    assert {f"{MIRROR}/nvidia/k8s-device-plugin", f"{MIRROR}/acs/k8s-gpushare-plugin",
            f"{MIRROR}/acs/k8s-gpushare-schd-extender", f"{MIRROR}/projecthami/hami",
            f"{MIRROR}/kube-scheduler", f"{MIRROR}/dra-driver-nvidia/dra-driver-nvidia-gpu",
            f"{MIRROR}/library/ubuntu"} <= kinds, kinds
    # the config-manager sidecar and the MPS control daemon were among them
    plugin = (tmp_path / "nvidia").glob("*daemonset-nvidia-device-plugin*")
    assert sum(1 for _ in plugin) == 1
    assert list((tmp_path / "nvidia").glob("*mps-control-daemon*"))


@pytest.mark.controller(reason="runs ansible-playbook")
def test_a_refused_prefix_renders_nothing(tmp_path):
    case = {"gpu_cluster_addons_mode": "nvidia", "gpu_cluster_addons_kubernetes_version": "1.33",
            "gpu_cluster_addons_output_dir": str(tmp_path / "out"),
            "gpu_cluster_addons_image_registry": "mirror"}
    common = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
              "gpu_cluster_addons_gpu_hosts": []}
    inventory = tmp_path / "inventory.json"
    inventory.write_text(json.dumps({"all": {"children": {"addons_render": {"hosts": {"bad": case},
                                                                            "vars": common}}}}))
    refused = r"gpu_cluster_addons_image_registry \(image_registry\): 'mirror' is not an image registry"
    with pytest.raises(AssertionError, match=refused):
        ansible_playbook(inventory)
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ node roles

KEYRING = "/etc/apt/keyrings/gpunode-nvidia-driver.asc"
# what docs/OFFLINE.md tells the operator to set for the driver
DRIVER_MIRRORS = {
    "apt_key_url": f"{APT}/cuda/3bf863cc.pub",
    "runfile_url": f"{APT}/runfile/NVIDIA-Linux-x86_64-580.95.05.run",
    "runfile_checksum": "a" * 64,
}
DRIVER_CASES = [  # (host, method, source, apt_repository)
    (DEBIAN12, "packages", "distro", f"deb [signed-by={KEYRING}] {APT}/debian bookworm non-free"),
    (DEBIAN12, "packages", "cuda", f"deb [signed-by={KEYRING}] {APT}/cuda/debian12/x86_64/ /"),
    (UBUNTU2404, "packages", "cuda", f"deb [signed-by={KEYRING}] {APT}/cuda/ubuntu2404/x86_64/ /"),
    (UBUNTU2404, "packages", "distro", f"deb [signed-by={KEYRING}] {APT}/ubuntu noble restricted"),
    (UBUNTU2404, "ubuntu-signed", "distro", f"deb [signed-by={KEYRING}] {APT}/ubuntu noble restricted"),
    (UBUNTU2404, "runfile", "distro", ""),
    (DEBIAN12, "runfile", "distro", ""),
]


def urls_in(value):
    """Every URL anywhere in a request or plan (strings inside dicts and lists)."""
    if isinstance(value, dict):
        return [u for v in value.values() for u in urls_in(v)]
    if isinstance(value, (list, tuple)):
        return [u for v in value for u in urls_in(v)]
    if isinstance(value, str):
        return re.findall(r"[a-z][a-z0-9+.-]*://[^\s\"']+", value)
    return []


@pytest.mark.parametrize(("host", "method", "source", "line"), DRIVER_CASES)
def test_driver_request_with_mirrors_names_only_the_mirror(host, method, source, line):
    version = "535.129.03" if host is DEBIAN12 and source == "distro" else "580.95.05"
    params = dict(DRIVER_MIRRORS, keyring=KEYRING, method=method, package_source=source, apt_repository=line,
                  version=version)
    request = build_request(params, gpu(T4), dict(host))
    urls = urls_in(request)
    if method == "runfile":
        assert request["runfile"]["url"] == DRIVER_MIRRORS["runfile_url"]
    else:
        assert request["repository"]["line"] == line
    assert urls, request
    assert all(u.startswith(APT + "/") for u in urls), urls


def test_driver_request_without_mirrors_goes_upstream():
    """The contrast: left unset, the same requests name NVIDIA's and Debian's servers."""
    urls = urls_in(build_request(dict(keyring=KEYRING, package_source="cuda", version="580.95.05"),
                                 gpu(T4), dict(UBUNTU2404)))
    assert urls and all("developer.download.nvidia.com" in u for u in urls)
    urls = urls_in(build_request(dict(keyring=KEYRING, version="535.129.03"), gpu(T4), dict(DEBIAN12)))
    assert urls and all("deb.debian.org" in u for u in urls)


def test_toolkit_plan_with_a_mirror_names_only_the_mirror():
    plan, _facts = build(fresh_node(), repo_url=f"{APT}/libnvidia-container/stable/deb/$(ARCH)")
    urls = urls_in(plan)
    assert plan["repo_source"] and urls
    assert all(u.startswith(APT + "/") for u in urls), urls
    assert plan["sources_text"] == cre.sources_text(f"{APT}/libnvidia-container/stable/deb/$(ARCH)",
                                                    "/etc/apt/keyrings/nvidia-container-toolkit.asc")


# Every task in the roles that downloads takes its URL from a mirror setting (or a plan field the
# module derived from one): a new download without a mirror variable fails here.
DOWNLOADERS = {"ansible.builtin.get_url": "url", "ansible.builtin.uri": "url",
               "ansible.builtin.apt_repository": "repo", "ansible.builtin.deb822_repository": "uris",
               "ansible.builtin.unarchive": "src", "ansible.builtin.apt_key": "url",
               "ansible.builtin.apt": "deb"}
MIRRORED = {
    "{{ gpu_cluster_addons_inspect_gpushare_url }}",
    "{{ nvidia_container_runtime_repo_key_url }}",
    "{{ __nvidia_driver_state.request.repository.key_url }}",  # nvidia_driver_apt_key_url
    "{{ __nvidia_driver_state.request.repository.line }}",  # nvidia_driver_apt_repository
    "{{ __nvidia_driver_state.request.runfile.url }}",  # nvidia_driver_runfile_url
}


def role_tasks():
    roles = ROOT / "roles"
    for path in sorted(roles.glob("*/tasks/*.yml")):
        stack = list(yaml.safe_load(path.read_text()) or [])
        while stack:
            task = stack.pop()
            if isinstance(task, dict):
                for key in ("block", "rescue", "always"):
                    stack.extend(task.get(key) or [])
                yield path.relative_to(ROOT), task


def test_every_download_in_the_roles_comes_from_a_mirror_setting():
    downloads = []
    for path, task in role_tasks():
        for module, option in DOWNLOADERS.items():
            args = task.get(module)
            if isinstance(args, dict) and args.get(option) is not None:
                downloads.append((str(path), task.get("name"), args[option]))
    assert len(downloads) >= 4, downloads
    unmirrored = [d for d in downloads if d[2] not in MIRRORED]
    assert not unmirrored, f"downloads without a mirror variable (docs/OFFLINE.md): {unmirrored}"


# The demo (scripts/demo.sh) runs site.yml with its nodes on loopback only: its inventory sets every
# mirror setting of docs/OFFLINE.md, each pointing at a stand-in on the node (or the registry mirror).
DEMO_NODE_MIRRORS = ("nvidia_driver_apt_repository", "nvidia_driver_apt_key_url", "nvidia_driver_runfile_url",
                     "nvidia_container_runtime_repo_url", "nvidia_container_runtime_repo_key_url")


def test_the_demo_inventory_sets_every_mirror():
    inventory = yaml.safe_load((ROOT / "inventories/demo/hosts.yml").read_text())["all"]
    node_vars = inventory["children"]["gpu_nodes"]["vars"]
    for name in DEMO_NODE_MIRRORS:
        hosts = re.findall(r"[a-z]+://([^\s/:]+)", node_vars.get(name) or "")
        assert hosts and set(hosts) == {"127.0.0.1"}, (name, node_vars.get(name))
    assert inventory["vars"]["gpu_cluster_addons_image_registry"] == MIRROR
