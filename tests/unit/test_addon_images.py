"""module_utils/gpunode/addons/images.py: the add-ons' images and the one registry prefix for a mirror."""

import pytest
import yaml
from ansible.module_utils.gpunode.addons import dra_objects, images
from ansible.module_utils.gpunode.formats.values import ValueSyntaxError
from conftest import ROOT

PREFIX = "registry.local:5000/mirror"
DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(("reference", "expected"), [
    # the registry host goes, path and tag stay
    ("nvcr.io/nvidia/k8s-device-plugin:v0.20.0", f"{PREFIX}/nvidia/k8s-device-plugin:v0.20.0"),
    ("registry.k8s.io/kube-scheduler:v1.33.1", f"{PREFIX}/kube-scheduler:v1.33.1"),
    ("registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu",
     f"{PREFIX}/dra-driver-nvidia/dra-driver-nvidia-gpu"),
    ("registry.cn-hangzhou.aliyuncs.com/acs/k8s-gpushare-plugin:v2-1.11-aff8a23",
     f"{PREFIX}/acs/k8s-gpushare-plugin:v2-1.11-aff8a23"),
    # Docker Hub: explicit or implicit, official images under library/
    ("docker.io/projecthami/hami:v2.10.0", f"{PREFIX}/projecthami/hami:v2.10.0"),
    ("projecthami/hami:v2.10.0", f"{PREFIX}/projecthami/hami:v2.10.0"),
    ("ubuntu:24.04", f"{PREFIX}/library/ubuntu:24.04"),
    ("docker.io/ubuntu", f"{PREFIX}/library/ubuntu"),
    ("index.docker.io/library/busybox:1", f"{PREFIX}/library/busybox:1"),
    # hosts with ports, localhost, IPv6; a digest is kept
    ("registry.local:5000/team/app:1", f"{PREFIX}/team/app:1"),
    ("localhost:5000/app", f"{PREFIX}/app"),
    ("localhost/app", f"{PREFIX}/app"),
    ("[::1]:5000/app:1", f"{PREFIX}/app:1"),
    (f"nvcr.io/nvidia/k8s-device-plugin:v0.20.0@{DIGEST}",
     f"{PREFIX}/nvidia/k8s-device-plugin:v0.20.0@{DIGEST}"),
    # a first component without '.', ':' or localhost is a Docker Hub user, not a host
    ("nvidia/cuda:12.4.1-base-ubuntu22.04", f"{PREFIX}/nvidia/cuda:12.4.1-base-ubuntu22.04"),
])
def test_mirrored_replaces_the_registry_host(reference, expected):
    assert images.mirrored(PREFIX, reference) == expected
    assert images.mirrored("", reference) == reference  # no prefix: as pinned
    assert images.mirrored("mirror.example.com", reference) == expected.replace(PREFIX, "mirror.example.com")


def test_split_registry():
    assert images.split_registry("nvcr.io/nvidia/x:1") == ("nvcr.io", "nvidia/x:1")
    assert images.split_registry("ubuntu") == (None, "library/ubuntu")
    assert images.split_registry("docker.io/a/b") == (None, "a/b")


@pytest.mark.parametrize("good", ["registry.local:5000", "registry.local:5000/mirror", "localhost:5000",
                                  "localhost", "mirror.example.com/gpu/images", "10.0.0.5:5000/m"])
def test_registry_prefix_accepts_registry_hosts(good):
    assert images.registry_prefix("p", good) == good


@pytest.mark.parametrize("bad", ["mirror", "mirror/gpu", "registry.local:5000/", "registry.local:5000/Mirror",
                                 "registry.local:5000/mirror:v1", "https://registry.local",
                                 "registry.local/a b", "registry.local\n", "registry.local/a//b", "",
                                 5000, None])
def test_registry_prefix_refuses_what_is_no_registry(bad):
    with pytest.raises(ValueSyntaxError) as error:
        images.registry_prefix("gpu_cluster_addons_image_registry", bad)
    assert str(error.value).startswith(
        f"gpu_cluster_addons_image_registry: {bad!r} is not an image registry prefix")


IMAGES = {
    "nvidia_device_plugin": {"repository": "nvcr.io/nvidia/k8s-device-plugin", "tag": "v0.20.0"},
    "hami": {"repository": "docker.io/projecthami/hami", "tag": "v2.10.0"},
    "hami_kube_scheduler": {"repository": "registry.k8s.io/kube-scheduler", "tag": None},
}


def test_addon_images_as_pinned_and_mirrored():
    assert images.addon_images(IMAGES, "1.33.1") == {
        "nvidia_device_plugin": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
        "hami": "docker.io/projecthami/hami:v2.10.0",
        "hami_kube_scheduler": "registry.k8s.io/kube-scheduler:v1.33.1",
    }
    assert images.addon_images(IMAGES, "1.33.1", PREFIX) == {
        "nvidia_device_plugin": f"{PREFIX}/nvidia/k8s-device-plugin:v0.20.0",
        "hami": f"{PREFIX}/projecthami/hami:v2.10.0",
        "hami_kube_scheduler": f"{PREFIX}/kube-scheduler:v1.33.1",
    }


def test_the_roles_images_are_the_variables_the_messages_name():
    """The role hands the images option from its variables (vars/main.yml __gpu_cluster_addons_images, which
    the offline bundle imports too); a refusal names the variable IMAGES gives: the same one."""
    role_vars = yaml.safe_load((ROOT / "roles" / "gpu_cluster_addons" / "vars" / "main.yml").read_text())
    handed = role_vars["__gpu_cluster_addons_images"]
    assert set(handed) == set(images.IMAGES)
    for name, (image_variable, tag_variable) in images.IMAGES.items():
        wanted = {"repository": "{{ " + image_variable + " }}"}
        if tag_variable:
            wanted["tag"] = "{{ " + tag_variable + " }}"
        assert handed[name] == wanted, name


TAG = "gpu_cluster_addons_nvidia_device_plugin_version (images.nvidia_device_plugin.tag)"
REPOSITORY = "gpu_cluster_addons_nvidia_device_plugin_image (images.nvidia_device_plugin.repository)"


@pytest.mark.parametrize(("entry", "shown"), [
    ({"repository": "nvcr.io/nvidia/x", "tag": ""}, f"{TAG}: ''"),
    ({"repository": "nvcr.io/nvidia/x", "tag": None}, f"{TAG}: None"),
    ({"repository": "nvcr.io/NVIDIA/x", "tag": "v1"}, f"{REPOSITORY}: 'nvcr.io/NVIDIA/x'"),
])
def test_an_image_missing_its_tag_or_with_a_bad_part_is_refused_naming_variable_and_option(entry, shown):
    with pytest.raises(ValueSyntaxError) as error:
        images.addon_images({"nvidia_device_plugin": entry}, "1.33.1")
    assert str(error.value).startswith(shown + " is not "), str(error.value)


def test_a_mirrored_reference_that_gets_too_long_is_refused_naming_both_variables():
    with pytest.raises(ValueSyntaxError) as error:
        images.addon_images(IMAGES, "1.33.1", "r.io/" + "a" * 240)
    assert "gpu_cluster_addons_nvidia_device_plugin_image (images.nvidia_device_plugin) with " \
           "gpu_cluster_addons_image_registry" in str(error.value)


def test_dra_settings_are_mirrored_examples_included():
    given = {"namespace": "gpu"}
    settings = images.dra_settings(PREFIX, given)
    assert settings["image"] == f"{PREFIX}/dra-driver-nvidia/dra-driver-nvidia-gpu"
    assert settings["example_image"] == f"{PREFIX}/library/ubuntu:24.04"
    assert given == {"namespace": "gpu"}  # not modified
    plan = dra_objects.plan("dra", "1.34.2", {"n": "dra"}, settings)
    assert plan["image"] == f"{PREFIX}/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.5.0"
    pods = [o for o in plan["examples"].values() if o["kind"] == "Pod"]
    containers = [c for p in pods for c in p["spec"]["containers"]]
    assert pods and all(c["image"] == f"{PREFIX}/library/ubuntu:24.04" for c in containers)
    assert images.dra_settings("", {})["image"] == dra_objects.DEFAULT_SETTINGS["image"]


@pytest.mark.parametrize(("given", "shown"), [
    ({"nvidia-device-plugin": {"repository": "nvcr.io/nvidia/x", "tag": "v1"}},
     "images: 'nvidia-device-plugin' is not an add-on image's name (nvidia_device_plugin, "),
    ({"hami": {"repository": "docker.io/projecthami/hami", "version": "v2.10.0"}},
     "images.hami: {'repository': 'docker.io/projecthami/hami', 'version': 'v2.10.0'} is not an image"),
    ({"hami": "docker.io/projecthami/hami:v2.10.0"},
     "images.hami: 'docker.io/projecthami/hami:v2.10.0' is not"),
])
def test_an_unknown_image_or_key_is_refused_not_left_out(given, shown):
    with pytest.raises(ValueSyntaxError) as error:
        images.addon_images(given, "1.33.1")
    assert str(error.value).startswith(shown), str(error.value)
