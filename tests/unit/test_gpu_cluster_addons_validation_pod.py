"""The validation pod (roles/gpu_cluster_addons/templates/pod-gpu-validation.yaml.j2).

Rendered through Ansible's own templating with the role's defaults and vars, then
validated with kubernetes-validate in strict mode for every Kubernetes minor the
add-ons are validated for, and checked for what the gate relies on: bound to its
node, one GPU, never restarted, the image under the mirror and pinned by digest, the default
digest the one NVIDIA's GPU Operator v25.3.1 OLM bundle pins for its validator image.
"""

import pathlib

import pytest
from ansible.module_utils.gpunode.validate import gate
from yaml import safe_load

try:  # a controller-side dependency Debian does not package: every test here is marked controller
    import kubernetes_validate
except ImportError:
    kubernetes_validate = None

ROLE = pathlib.Path(__file__).resolve().parents[2] / "roles" / "gpu_cluster_addons"
VERSIONS = [f"1.{minor}" for minor in range(25, 38)]
DIGEST = "sha256:" + "0123456789abcdef" * 4  # a well-formed stand-in for an operator's own digest
# NVIDIA/gpu-operator commit 797b31680,
# bundle/v25.3.1/manifests/gpu-operator-certified.clusterserviceversion.yaml
# (relatedImages gpu-operator-validator-image, and the operator's VALIDATOR_IMAGE)
NVIDIA_VALIDATOR = ("nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.1"
                    "@sha256:0b6f1944b05254ce50a08d44ca0d23a40f254fb448255a9234c43dec44e6929c")

pytestmark = pytest.mark.controller(reason="renders the role's template through Ansible's templating")


def _trusted(text):
    from ansible.template import trust_as_template  # noqa: PLC0415 (controller only)

    return trust_as_template(text)


def render(defaults=False, **overrides):
    # the controller's packages, imported here: target Pythons collect this file without them
    from ansible.parsing.dataloader import DataLoader  # noqa: PLC0415 (controller only)
    from ansible.template import Templar  # noqa: PLC0415 (controller only)

    loader = DataLoader()  # loads the role's files as Ansible does (their templates trusted)
    variables = {"ansible_managed": "Managed by gpunode", "ansible_check_mode": False}
    for name in ("defaults", "vars"):
        variables.update(loader.load_from_file(str(ROLE / name / "main.yml"), trusted_as_template=True))
    if not defaults:
        variables["gpu_cluster_addons_validation_pod_digest"] = DIGEST
    # the part of gpu_cluster_addons_plan's result the template reads (addons/plan.py puts it there)
    variables["__gpu_cluster_addons_plan"] = {"validation_gate": gate.gate()}
    variables.update({"__gpu_cluster_addons_validation_node": "gpu-node-1", **overrides})
    templar = Templar(loader=loader, variables=variables)
    text = _trusted((ROLE / "templates" / "pod-gpu-validation.yaml.j2").read_text())
    return safe_load(templar.template(text)), templar


@pytest.mark.parametrize("version", VERSIONS)
def test_the_pod_validates_strictly(version):
    pod, _ = render()
    try:
        kubernetes_validate.validate(pod, f"{version}.0", strict=True)
    except kubernetes_validate.ValidationError as exc:
        pytest.fail(f"{version}: {exc.message} at {list(exc.path)}")


def test_the_pod_runs_once_on_its_node_with_one_gpu_pinned_by_digest():
    pod, _ = render()
    spec = pod["spec"]
    assert spec["nodeName"] == "gpu-node-1" and spec["restartPolicy"] == "Never"
    (container,) = spec["containers"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 1}
    assert container["image"] == f"nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.1@{DIGEST}"
    for key in ("readiness.k8s.io/gpunode-gpu-unvalidated", "gpunode.io/gpu-unvalidated"):  # in use, before
        assert {"key": key, "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert pod["metadata"]["name"] == "gpunode-gpu-validation-gpu-node-1"


def test_the_image_follows_the_mirror():
    pod, _ = render(gpu_cluster_addons_image_registry="registry.example.com:5000")
    image = pod["spec"]["containers"][0]["image"]
    assert image.startswith("registry.example.com:5000/nvidia/cloud-native/gpu-operator-validator:")
    assert image.endswith(DIGEST)


def test_by_default_the_pod_runs_nvidias_validator_by_the_digest_nvidia_publishes():
    pod, templar = render(defaults=True)
    (container,) = pod["spec"]["containers"]
    assert container["image"] == NVIDIA_VALIDATOR
    assert container["command"] == ["sh", "-c", "vectorAdd"]  # as validator/cuda-workload-validation.yaml
    assert templar.template(_trusted("{{ __gpu_cluster_addons_validation_pod_on | bool }}")) is True


def test_an_image_of_its_own_runs_its_entrypoint_with_no_command():
    pod, _ = render(gpu_cluster_addons_validation_pod_image="nvcr.io/nvidia/k8s/cuda-sample",
                    gpu_cluster_addons_validation_pod_tag="vectoradd-cuda12.5.0-ubuntu22.04",
                    gpu_cluster_addons_validation_pod_command=[])
    (container,) = pod["spec"]["containers"]
    assert "command" not in container
    assert container["image"] == f"nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04@{DIGEST}"


def test_no_digest_no_pod():
    _, templar = render(gpu_cluster_addons_validation_pod_digest="")
    assert templar.template(_trusted("{{ __gpu_cluster_addons_validation_pod_on | bool }}")) is False
