"""gpu_cluster_addons_readiness_rule: the NodeReadinessRule gpunode-gpu-validated, decided by
gpu_cluster_addons_plan and rendered from the role's template, checked against the Node Readiness
Controller's own CRD (../shared/fixtures/readiness/crd, main and v0.5.0): its openAPI schema with
jsonschema and its CEL rules (x-kubernetes-validations) evaluated by a CEL runtime (cel-python),
not re-coded here.
"""

import pathlib

import gpu_cluster_addons_plan
import pytest
import yaml
from conftest import shared_files

try:  # the controller's (every test using them is marked controller); targets have none of them
    import celpy
    import jinja2
    import jsonschema
    from ansible.plugins.filter.core import FilterModule
    from celpy import celtypes
except ImportError:
    celpy = jinja2 = jsonschema = FilterModule = celtypes = None

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "roles/gpu_cluster_addons/templates/nodereadinessrule-gpunode-gpu-validated.yaml.j2"
RULE_FILE = "70-nodereadinessrule-gpunode-gpu-validated.yaml"
CONTROLLER = pytest.mark.controller(reason="jinja2, jsonschema and cel-python are the controller's")


def plan(run_module, mode="nvidia", **args):
    args = dict({"mode": mode, "kubernetes_version": "1.34"}, **args)
    ok, result = run_module(gpu_cluster_addons_plan, args, check_mode=True)
    assert ok, result
    return result


def files(result, which):
    return [entry["file"] for entry in result["manifests"][which]]


@pytest.mark.parametrize("mode", ["nvidia", "gpushare", "hami", "dra"])
def test_the_rule_is_a_file_of_every_mode_when_on_and_taken_away_when_off(run_module, mode):
    on = plan(run_module, mode, readiness_rule=True)
    assert RULE_FILE in files(on, "present") and RULE_FILE not in files(on, "absent")
    assert on["readiness_rule"] == {"enabled": True, "name": "gpunode-gpu-validated",
                                    "taint_key": "readiness.k8s.io/gpunode-gpu-unvalidated",
                                    "condition_type": "gpunode.io/GPUValidated"}
    off = plan(run_module, mode)
    assert RULE_FILE in files(off, "absent") and RULE_FILE not in files(off, "present")


@pytest.mark.parametrize("key", ["gpunode.io/gpu-unvalidated", "readiness.k8s.io/a/b",
                                 "startup-taint.cluster-autoscaler.kubernetes.io/gpunode"])
def test_a_taint_key_the_controller_cannot_manage_is_refused(run_module, key):
    ok, result = run_module(gpu_cluster_addons_plan, {"mode": "nvidia", "kubernetes_version": "1.34",
                                                      "readiness_rule": True, "readiness_taint_key": key})
    assert not ok and "gpu_cluster_addons_readiness_taint_key" in result["msg"] and repr(key) in result["msg"]


def test_a_condition_type_that_is_no_qualified_name_is_refused(run_module):
    ok, result = run_module(gpu_cluster_addons_plan, {"mode": "nvidia", "kubernetes_version": "1.34",
                                                      "readiness_rule": True,
                                                      "readiness_condition_type": "gpunode.io/GPU Validated"})
    assert not ok
    assert "gpu_cluster_addons_readiness_condition_type (readiness_condition_type)" in result["msg"]


KEY = "readiness.k8s.io/gpunode-gpu-unvalidated"
LEGACY = "gpunode.io/gpu-unvalidated"


@pytest.mark.parametrize(("given", "rule"),
                         [(None, False), ("readiness.k8s.io/gpu-x", True), (LEGACY, False)])
def test_the_gate_puts_the_key_in_use_lifts_it_and_the_legacy_key_and_the_daemonsets_tolerate_both(
        run_module, given, rule):
    result = plan(run_module, readiness_rule=rule, **({"readiness_taint_key": given} if given else {}))
    key = given or KEY
    keys = [key] + ([LEGACY] if key != LEGACY else [])
    assert result["validation_gate"] == {
        "taint": {"key": key, "effect": "NoSchedule"},
        "lifted": [{"key": name, "effect": "NoSchedule"} for name in keys],
        "tolerations": [{"key": name, "operator": "Exists", "effect": "NoSchedule"} for name in keys],
    }
    assert result["readiness_rule"]["taint_key"] == key


def test_the_dra_kubelet_plugin_tolerates_the_gate_in_use(run_module):
    result = plan(run_module, "dra", readiness_taint_key="readiness.k8s.io/gpu-x")
    daemonset = next(obj for obj in result["dra"]["manifests"].values() if obj["kind"] == "DaemonSet")
    tolerated = [t["key"] for t in daemonset["spec"]["template"]["spec"]["tolerations"]]
    assert tolerated[1:3] == ["readiness.k8s.io/gpu-x", LEGACY]


GPU = {"present": True, "gpu_count": 1, "models": ["TU104GL [Tesla T4]"]}
EARLIER = {"passed": True, "ran": False, "validated_at": "2026-11-20T10:00:00Z"}
NOW = {"passed": True, "ran": True, "validated_at": "2026-11-29T10:00:00Z"}
FAILED = {"passed": False, "ran": True, "failed_checks": ["cuda", "xid"]}


def gates(run_module, verdicts, mode="nvidia", check_mode=False, allocations=None, **args):
    """Each GPU host's ``gate`` as gpu_cluster_addons_plan decides it from the hosts' last validations
    (``verdicts``: host -> its gpu_validate facts, None for a host this run has none for)."""
    facts = {host: dict({"nvidia_gpu": GPU}, **({"gpu_validate": v} if v else {}))
             for host, v in verdicts.items()}
    args = dict({"mode": mode, "kubernetes_version": "1.34", "gpu_hosts": sorted(verdicts),
                 "host_facts": facts, "allocations": allocations or {}}, **args)
    ok, result = run_module(gpu_cluster_addons_plan, args, check_mode=check_mode)
    assert ok, result
    return {node["host"]: node["gate"] for node in result["gpu_nodes"]}, result


def test_the_gate_taints_a_failed_node_lifts_both_keys_from_a_passed_one_and_leaves_one_without_verdict(
        run_module):
    decided, result = gates(run_module, {"gpu-1": EARLIER, "gpu-2": FAILED, "gpu-3": None})
    assert [decided[h]["taint"] for h in ("gpu-1", "gpu-2", "gpu-3")] == ["absent", "present", None]
    assert decided["gpu-2"]["label"] == {"labels": {"gpunode.io/gpu-validated": "false"}, "annotations": {
        "gpunode.io/gpu-validated-at": "", "gpunode.io/gpu-validation-failed": "cuda,xid"}}
    assert decided["gpu-1"]["label"]["annotations"]["gpunode.io/gpu-validated-at"] == EARLIER["validated_at"]
    assert decided["gpu-3"]["label"] is None
    assert not any(g["untainted"] or g["pod"] or g["commands"] for g in decided.values())
    assert result["ansible_facts"]["gpu_cluster_addons"]["untainted"] == {}


def test_with_the_readiness_rule_the_play_leaves_the_taint_to_the_controller_and_still_labels(run_module):
    decided, result = gates(run_module, {"gpu-1": EARLIER, "gpu-2": FAILED}, readiness_rule=True)
    assert [decided[h]["taint"] for h in ("gpu-1", "gpu-2")] == [None, None]
    assert decided["gpu-2"]["label"]["labels"] == {"gpunode.io/gpu-validated": "false"}
    assert result["ansible_facts"]["gpu_cluster_addons"]["untainted"] == {}  # the controller keeps it


def test_a_validation_pod_keeps_the_taint_until_it_succeeds_and_with_the_rule_publishes_its_failure(
        run_module):
    decided, _ = gates(run_module, {"gpu-1": NOW, "gpu-2": EARLIER, "dra-1": NOW},
                       gate={"validation_pod": True}, allocations={"dra-1": "dra"})
    assert (decided["gpu-1"]["pod"], decided["gpu-1"]["taint"]) == (True, "present")
    assert [t["key"] for t in decided["gpu-1"]["lifted_after_pod"]] == [KEY, LEGACY]
    # validated before: no new pod
    assert not decided["gpu-2"]["pod"] and decided["gpu-2"]["taint"] == "absent"
    assert not decided["dra-1"]["pod"] and decided["dra-1"]["taint"] == "absent"
    assert decided["dra-1"]["no_pod"] == (
        "its GPUs are not advertised as nvidia.com/gpu (DRA, or gpushare mode)")
    ruled, _ = gates(run_module, {"gpu-1": NOW}, gate={"validation_pod": True}, readiness_rule=True)
    assert ruled["gpu-1"]["pod"] and ruled["gpu-1"]["lifted_after_pod"] == []
    conditions = ruled["gpu-1"]["pod_conditions"]
    assert [(c["succeeded"], c["type"], c["status"], c["reason"]) for c in conditions] == [
        (True, "gpunode.io/GPUValidated", "True", "Passed"),
        (False, "gpunode.io/GPUValidated", "False", "CUDAPodFailed")]
    assert decided["gpu-1"]["pod_conditions"] == []  # without the rule the play lifts the taint itself
    unpinned, _ = gates(run_module, {"gpu-1": NOW})
    assert unpinned["gpu-1"]["no_pod"] == "gpu_cluster_addons_validation_pod_digest is empty"
    checked, _ = gates(run_module, {"gpu-1": NOW}, check_mode=True, gate={"validation_pod": True})
    assert (checked["gpu-1"]["pod"], checked["gpu-1"]["taint"]) == (False, "absent")  # predicted, no pod


def test_render_mode_prints_the_commands_and_a_failed_node_nothing_taints_serves_unvalidated(run_module):
    decided, result = gates(run_module, {"gpu-1": EARLIER, "gpu-2": FAILED}, gate={"apply": False})
    assert decided["gpu-1"]["commands"] == [
        f"kubectl taint node gpu-1 {KEY}:NoSchedule-", f"kubectl taint node gpu-1 {LEGACY}:NoSchedule-",
        "kubectl label node gpu-1 --overwrite gpunode.io/gpu-validated=true"]
    assert decided["gpu-2"]["commands"][0] == f"kubectl taint node gpu-2 {KEY}:NoSchedule --overwrite"
    assert all(g["taint"] is None and g["label"] is None for g in decided.values())
    assert result["ansible_facts"]["gpu_cluster_addons"]["untainted"] == {
        "gpu-2": "render mode: nothing ran the printed kubectl commands"}
    ruled, result = gates(run_module, {"gpu-2": FAILED}, gate={"apply": False}, readiness_rule=True)
    assert ruled["gpu-2"]["commands"] == [
        "kubectl label node gpu-2 --overwrite gpunode.io/gpu-validated=false"]
    assert result["ansible_facts"]["gpu_cluster_addons"]["untainted"] == {}


def test_the_gate_turned_off_lifts_the_taint_everywhere_and_says_a_failed_node_serves_untainted(run_module):
    decided, result = gates(run_module, {"gpu-1": FAILED, "gpu-2": None}, gate={"enabled": False})
    assert [decided[h]["taint"] for h in ("gpu-1", "gpu-2")] == ["absent", "absent"]
    assert [t["key"] for t in decided["gpu-2"]["taints"]] == [KEY, LEGACY]
    assert decided["gpu-1"]["label"] is None
    assert result["ansible_facts"]["gpu_cluster_addons"]["untainted"] == {
        "gpu-1": "gpu_cluster_addons_validation_gate is false"}
    ruled, result = gates(run_module, {"gpu-1": FAILED}, gate={"enabled": False}, readiness_rule=True)
    assert (ruled["gpu-1"]["taint"], ruled["gpu-1"]["taints"]) == (None, [])  # the controller's to keep
    assert result["ansible_facts"]["gpu_cluster_addons"]["untainted"] == {}


def role_task(path, item, result):
    """A task of the role's ``path`` with ``item`` as Ansible templates it, with the role's defaults and
    vars and the plan ``result``: its module's arguments."""
    from ansible.parsing.dataloader import DataLoader  # noqa: PLC0415 (controller only)
    from ansible.template import Templar  # noqa: PLC0415 (controller only)

    loader = DataLoader()
    role = ROOT / "roles/gpu_cluster_addons"
    variables = {"ansible_check_mode": False, "__gpu_cluster_addons_plan": result, "item": item}
    for name in ("defaults", "vars"):
        variables.update(loader.load_from_file(str(role / name / "main.yml"), trusted_as_template=True))
    task = loader.load_from_file(str(role / path), trusted_as_template=True)[0]
    templar = Templar(loader=loader, variables=variables)
    module = next(key for key in task if key.startswith("kubernetes.core."))
    return templar.template(task["loop"]), templar.template(task[module])


@pytest.mark.controller(reason="templates the role's task with ansible-core's Templar")
@pytest.mark.parametrize(("verdict", "state", "keys"),
                         [(EARLIER, "absent", [KEY, LEGACY]), (FAILED, "present", [KEY])])
def test_the_roles_gate_task_carries_out_the_plan_for_each_node_it_loops_over(
        run_module, verdict, state, keys):
    _, result = gates(run_module, {"gpu-1": verdict, "gpu-2": None})
    node = next(n for n in result["gpu_nodes"] if n["host"] == "gpu-1")
    loop, args = role_task("tasks/validation_gate.yml", node, result)
    assert [n["host"] for n in loop] == ["gpu-1"]  # no verdict: left out
    assert args["state"] == state and [t["key"] for t in args["taints"]] == keys, args


@pytest.mark.controller(reason="templates the role's task with ansible-core's Templar")
@pytest.mark.parametrize(("phase", "published"), [("Succeeded", ("True", "Passed")),
                                                  ("Failed", ("False", "CUDAPodFailed")),
                                                  ("", ("False", "CUDAPodFailed"))])
def test_with_the_rule_a_validation_pod_publishes_its_verdict_as_the_nodes_condition(
        run_module, phase, published):
    from ansible.parsing.dataloader import DataLoader  # noqa: PLC0415 (controller only)
    from ansible.template import Templar  # noqa: PLC0415 (controller only)

    _, result = gates(run_module, {"gpu-1": NOW}, gate={"validation_pod": True}, readiness_rule=True)
    loader = DataLoader()
    block = loader.load_from_file(str(ROOT / "roles/gpu_cluster_addons/tasks/validation_pod_node.yml"),
                                  trusted_as_template=True)[0]
    task = next(t for t in block["block"] if "gpu_node_condition" in t)
    variables = {"__gpu_cluster_addons_pod_node": result["gpu_nodes"][0], **block["vars"],
                 "__gpu_cluster_addons_pod": {"resources": [{"status": {"phase": phase}}] if phase else []}}
    loop = Templar(loader=loader, variables=variables).template(task["loop"])
    assert [(item["status"], item["reason"]) for item in loop] == [published]
    assert task["delegate_to"] == "{{ __gpu_cluster_addons_pod_node.host }}"


# ---------------------------------------------------------------- against the controller's CRD


def render(plan_result):
    """The role's template as the role renders it (ansible-core's own filters)."""
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined)
    environment.filters.update(FilterModule().filters())
    text = environment.from_string(TEMPLATE.read_text()).render(
        ansible_managed="Ansible managed", __gpu_cluster_addons_plan=plan_result,
        __gpu_cluster_addons_common_labels={"app.kubernetes.io/managed-by": "gpunode"})
    return yaml.safe_load(text)


def _split(text, separator):
    """Kubernetes' CEL strings extension ``split`` (cel-go ext.Strings, enabled for CRD rules:
    https://kubernetes.io/docs/reference/using-api/cel/), which standard CEL lacks."""
    return celtypes.ListType([celtypes.StringType(part) for part in str(text).split(str(separator))])


def cel_failures(schema, value, path="spec"):
    """The messages of the x-kubernetes-validations rules ``value`` breaks (rules on oldSelf are
    transition rules, which a create skips), walking the schema along the object."""
    failures = []
    environment = celpy.Environment()
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" in rule["rule"]:
            continue
        program = environment.program(environment.compile(rule["rule"]), functions={"split": _split})
        try:
            outcome = program.evaluate({"self": celpy.json_to_cel(value)})
        except celpy.CELEvalError as exc:
            outcome = exc
        if outcome is not True and outcome != celpy.celtypes.BoolType(True):
            failures.append(f"{path}: {rule.get('message') or rule['rule']}")
    if isinstance(value, dict):
        for key, item in value.items():
            if key in (schema.get("properties") or {}):
                failures += cel_failures(schema["properties"][key], item, f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            failures += cel_failures(schema["items"], item, f"{path}[{index}]")
    return failures


def problems(crd_path, obj):
    """What the API server would refuse in ``obj``: schema errors and broken CEL rules."""
    crd = yaml.safe_load(crd_path.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == obj["apiVersion"].split("/")[1])
    schema = version["schema"]["openAPIV3Schema"]
    assert obj["kind"] == crd["spec"]["names"]["kind"]
    found = [f"schema: {error.message}" for error in jsonschema.Draft7Validator(schema).iter_errors(obj)]
    return found + cel_failures(schema["properties"]["spec"], obj.get("spec") or {})


CRDS = shared_files("readiness/crd", "**/*.yaml")


@CONTROLLER
@pytest.mark.parametrize("crd", CRDS, ids=lambda p: p.parent.name)
def test_the_rendered_rule_is_what_design_says_and_the_crd_admits_it(run_module, crd):
    rule = render(plan(run_module, readiness_rule=True))
    assert rule["apiVersion"] == "readiness.node.x-k8s.io/v1alpha1" and rule["kind"] == "NodeReadinessRule"
    assert rule["metadata"]["name"] == "gpunode-gpu-validated"
    assert rule["spec"] == {
        "conditions": [{"type": "gpunode.io/GPUValidated", "requiredStatus": "True"}],
        "taint": {"key": "readiness.k8s.io/gpunode-gpu-unvalidated", "effect": "NoSchedule"},
        "enforcementMode": "continuous",
        "nodeSelector": {"matchLabels": {"nvidia.com/gpu.present": "true"}},
    }
    assert problems(crd, rule) == []


@CONTROLLER
@pytest.mark.parametrize("crd", CRDS, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("example", shared_files("readiness/examples", "*/*.yaml"), ids=lambda p: p.stem)
def test_the_upstream_examples_pass_the_same_checks(crd, example):
    assert problems(crd, yaml.safe_load(example.read_text())) == []


BROKEN = {
    "a key outside readiness.k8s.io/": (
        lambda spec: spec["taint"].update(key="gpunode.io/gpu-unvalidated"), "taint key must start with"),
    "two slashes in the key": (
        lambda spec: spec["taint"].update(key="readiness.k8s.io/a/b"), "exactly one '/'"),
    "no nodeSelector": (lambda spec: spec.pop("nodeSelector"), "'nodeSelector' is a required property"),
    "an unknown mode": (lambda spec: spec.update(enforcementMode="always"), "'always' is not one of"),
    "an unknown effect": (lambda spec: spec["taint"].update(effect="NoRun"), "taint effect must be one of"),
}


@CONTROLLER
@pytest.mark.parametrize("crd", CRDS, ids=lambda p: p.parent.name)
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_what_the_crd_refuses_is_refused(run_module, crd, case):
    rule = render(plan(run_module, readiness_rule=True))
    breaks, expected = BROKEN[case]
    breaks(rule["spec"])
    assert any(expected in problem for problem in problems(crd, rule)), problems(crd, rule)
