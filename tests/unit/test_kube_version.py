"""module_utils/kube_version: one reading of Kubernetes versions."""

import pytest
from ansible.module_utils.gpunode.formats.kube_version import KubeVersionError, minor, parse, text


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("1.28", (1, 28, 0)),
        ("v1.28.2", (1, 28, 2)),
        ("Kubernetes v1.28.2\n", (1, 28, 2)),
        ("v1.29.3+rke2r1", (1, 29, 3)),
        ("v1.30.1-eks-1234abc", (1, 30, 1)),
        ("registry.k8s.io/kube-scheduler:v1.29.2", (1, 29, 2)),
        ((1, 37, 1), (1, 37, 1)),
    ],
)
def test_parse(given, expected):
    assert parse(given) == expected


@pytest.mark.parametrize("given", ["", None, "latest", "v1", "sha256:abc"])
def test_parse_refuses_text_without_a_version(given):
    with pytest.raises(KubeVersionError, match="cannot read a version"):
        parse(given)


def test_the_caller_names_its_error_and_input():
    class MyError(Exception):
        pass

    with pytest.raises(MyError, match=r"^kubelet_gpu_kubernetes_version: cannot read a version from 'x'"):
        parse("x", MyError, "kubelet_gpu_kubernetes_version")


def test_minor_and_text():
    assert minor("v1.38.0") == (1, 38)
    assert minor((1, 37, 4)) == (1, 37)
    assert text((1, 37, 4)) == "1.37.4"
    assert parse("1.9.11") < parse("1.10.0")
