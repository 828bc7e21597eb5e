"""module_utils/gpunode/formats/k8s_names.py and values.py: the syntax of inventory values, per kind.

For each kind, hostile values are built from a valid one by putting in what
breaks the format it lands in (a quote ends a string, a newline splits a line,
',' and '=' split a flag list, '$' is expanded in a pod's arguments, '\\'
escapes, a space splits a word), by making it too long, by giving it a dash
at an end, a Unicode lookalike or upper case where lower is required; valid
edge values must pass. Every refusal names the option, shows the value's
repr and states the rule.
"""

import pytest
from ansible.module_utils.gpunode.addons import gpu_nodes
from ansible.module_utils.gpunode.formats import k8s_names as k8s
from ansible.module_utils.gpunode.formats import values
from ansible.module_utils.gpunode.formats.values import ValueSyntaxError

QUOTE, APOSTROPHE, NEWLINE, CR, NUL = '"', "'", "\n", "\r", "\x00"
# every character that breaks one of the formats the values land in
BREAKERS = [QUOTE, APOSTROPHE, NEWLINE, CR, NUL, " ", "\t", ",", "=", "$", "\\", "`"]
# what a URL may hold (RFC 3986 sub-delims) but nothing else here may
URL_BREAKERS = [QUOTE, APOSTROPHE, NEWLINE, CR, NUL, " ", "\t", "\\", "`", "<", ">", "{", "}", "|", "^"]
HYPHEN = "\u2010"  # looks like '-'
CYRILLIC_A = "\u0430"  # looks like 'a'
FULLWIDTH_N = "\uff4e"  # looks like 'n'
DIGEST = "sha256:" + "0123456789abcdef" * 4


def assert_refused(result, prefix, value, ending="nothing was read or written"):
    """A module's failure names the option and the value; a NUL may be refused by AnsibleModule itself.

    Where the target's syslog takes the invocation, AnsibleModule fails on an argument holding NUL
    ("embedded null character") before the module's code runs: refused too, nothing read.
    """
    msg = result["msg"]
    if "embedded null character" in msg and isinstance(value, str) and "\x00" in value:
        return
    assert msg.startswith(prefix), msg
    assert msg.endswith(ending), msg


def injected(stem, breakers=BREAKERS, at=None):
    """``stem`` with each breaker put in the middle (or at ``at``)."""
    at = len(stem) // 2 if at is None else at
    return [stem[:at] + char + stem[at:] for char in breakers]


def subdomain(length):
    """A valid DNS subdomain of exactly ``length`` characters (labels of 63)."""
    labels, left = [], length
    while left > 0:
        size = min(63, left if left <= 63 else 62)
        labels.append("a" * size)
        left -= size + 1
    name = ".".join(labels)
    assert len(name) == length, (len(name), length)
    return name


KINDS = {
    "label_key": (
        k8s.label_key,
        ["nvidia.com/gpu.product", "example.com/a_b-c.d", "a", "9", "A" * 63, "Gpu_Count",
         f"{subdomain(253)}/{'x' * 63}", "node-role.kubernetes.io/control-plane", "a.b/c.d"],
        [*injected("nvidia.com/gpu.product"), *injected("nvidia.com/gpu.product", at=3), "", "x" * 64,
         f"{subdomain(254)}/x", "-a", "a-", "_a", "a.", "a/", "/a", "a/b/c", "Example.com/x", "a..b/c",
         "-a.com/x", f"nvidia.com/gpu{HYPHEN}product", f"nvidi{CYRILLIC_A}.com/gpu",
         f"{FULLWIDTH_N}vidia.com/gpu", None, 5, ["a"]],
    ),
    "label_value": (
        k8s.label_value,
        ["", "true", "x" * 63, "Tesla-T4", "1.2_3", "A", "0"],
        [*injected("Tesla-T4"), "x" * 64, "-a", "a-", "a.", "_a", "a/b", f"Tesla{HYPHEN}T4",
         f"{CYRILLIC_A}bc", None, ["a"], {"a": 1}],
    ),
    "namespace": (
        k8s.namespace,
        ["kube-system", "a", "a" * 63, "0abc", "gpu-operator"],
        [*injected("kube-system"), "", "Kube-system", "KUBE", "a" * 64, "-a", "a-", "a.b", "a_b",
         f"kube{HYPHEN}system", f"kube-syst{CYRILLIC_A}m", None],
    ),
    "node_name": (
        k8s.node_name,
        ["gpu-01", "gpu-01.example.com", subdomain(253), "10.0.0.5", "a"],
        [*injected("gpu-01.example.com"), "", "GPU-01", subdomain(254), "-a", "a-", "a.", ".a", "a..b", "a_b",
         f"gpu{HYPHEN}01", None],
    ),
    "runtime_class_handler": (
        k8s.runtime_class_handler,
        ["nvidia", "nvidia-cdi", "kata-qemu", "a" * 63],
        [*injected("nvidia"), "", "Nvidia", "nvidia.cdi", "nvidia_cdi", "a" * 64, "-nvidia", "nvidia-",
         f"nvidi{CYRILLIC_A}"],
    ),
    "extended_resource_name": (
        k8s.extended_resource_name,
        ["nvidia.com/gpu", "aliyun.com/gpu-mem", "example.com/a_b-c.d", "nvidia.com/mig-1g.10gb",
         f"{subdomain(200)}/{'x' * 63}"],
        [*injected("nvidia.com/gpu"), "", "gpu", "cpu", "kubernetes.io/gpu", "foo.kubernetes.io/gpu",
         "nvidia.com/", "/gpu", "nvidia.com/-gpu", "nvidia.com/gpu-", f"nvidia.com/{'x' * 64}",
         f"{subdomain(250)}/gpu", "Nvidia.com/gpu", f"nvidia.com/gpu{HYPHEN}mem", "requests.nvidia.com/gpu"],
    ),
    "taint_effect": (
        k8s.taint_effect,
        ["NoSchedule", "PreferNoSchedule", "NoExecute"],
        ["", "noschedule", "NoSchedule ", " NoSchedule", "NoSchedule\n", "Evict", "NoSchedule,NoExecute",
         None],
    ),
    "quantity": (
        k8s.quantity,
        ["500m", "64Mi", "1", "1.5", "0.5Gi", ".5", "1e3", "2E-2", "100Ki", "1k", "0", 1, 0.5, 0],
        [*injected("64Mi"), "", "-1", "+1", "1 Gi", "1gi", "Mi", "1Mb", "1.2.3", "1,5", "1Mi ", True, -1,
         None],
    ),
    "image_repository": (
        k8s.image_repository,
        ["nvcr.io/nvidia/k8s-device-plugin", "registry.local:5000/a/b", "ubuntu", "Registry.Example.com/x",
         "[::1]:5000/a", "a__b/c--d/e.f_g", "localhost/x",
         "registry.cn-hangzhou.aliyuncs.com/acs/k8s-gpushare-plugin"],
        [*injected("nvcr.io/nvidia/k8s-device-plugin"), "", "nvcr.io/NVIDIA/x", "a:tag", f"a@{DIGEST}", "a/",
         "/a", "a//b", "-a", "a-", "a___b", f"nvcr.io/nvidia/k8s{HYPHEN}device-plugin", "x/" + "a" * 255],
    ),
    "image_tag": (
        k8s.image_tag,
        ["v0.17.0", "1.11-d170d8a", "latest", "_x", "X" * 128, f"v1@{DIGEST}", "v2-1.11-aff8a23"],
        [*injected("v0.17.0"), "", "x" * 129, ".v1", "-v1", "v1:2", "v1/2", f"v1{HYPHEN}2", "v1@sha256:xyz",
         f"v1@{DIGEST}@{DIGEST}", 17],
    ),
    "image_reference": (
        k8s.image_reference,
        ["nvcr.io/nvidia/k8s-device-plugin:v0.17.0", "registry.local:5000/a/b:1.11-d170d8a", "ubuntu",
         f"a/b@{DIGEST}", f"a/b:v1@{DIGEST}"],
        [*injected("nvcr.io/nvidia/k8s-device-plugin:v0.17.0"), "", "a:b:c", "a/B:c", "a:.x", f"a:{HYPHEN}x"],
    ),
    "http_url": (
        values.http_url,
        ["http://127.0.0.1:32766/gpushare-scheduler", "https://[::1]:8443/x", "https://extender.example.com",
         "http://extender.kube-system.svc:12345/a,b=c$d", "https://h/p?q=1&r=%2F"],
        [*injected("http://127.0.0.1:32766/gpushare-scheduler", URL_BREAKERS), "", "ftp://host/x", "http://",
         "http:///path", "127.0.0.1:32766/x", "http://x:99999/", "http://x:port/", "http://ex\u00e4mple.com/",
         "file:///etc/passwd", "HTTP//x", None],
    ),
    "url_segment": (
        values.url_segment,
        ["filter", "bind", "a.b_c~d-e", "Filter2"],
        [*injected("filter"), "", "a/b", "a?b", "a#b", "%2F", ".", "..", f"filt{CYRILLIC_A}r", "a:b"],
    ),
    "containerd_runtime_name": (
        values.containerd_runtime_name,
        ["nvidia", "nvidia-cdi", "nvidia.legacy", "Kata_2", "x" * 100],
        [*injected("nvidia"), "", "a/b", "a:b", "a[b]", "a#b", f"nvidi{CYRILLIC_A}", f"nvidia{HYPHEN}cdi", 5],
    ),
    "containerd_runtime_type": (
        values.containerd_runtime_type,
        ["io.containerd.runc.v2", "io.containerd.kata.v2", "io.containerd.runsc.v1",
         "io.containerd.kata-qemu.v2", "io.containerd.runtime.v1.linux"],
        [*injected("io.containerd.runc.v2"), "", "runc", "io.containerd.runc", "io.containerd.RUNC.v2",
         "io.containerd.runc.v2 ", "io.containerd..v2", "/usr/bin/containerd-shim-runc-v2",
         f"io.containerd.run{CYRILLIC_A}.v2"],
    ),
    "word_path": (
        values.word_path,
        ["/usr/bin/nvidia-container-runtime", "/etc/kubernetes/scheduler-extender-config.yaml",
         "/opt/x_y/a+b@c~d", "/"],
        [*injected("/etc/kubernetes/scheduler.yaml"), "", "relative/path", "scheduler.yaml", "/a:b", "/a;b",
         "/a*b", "/a?b", "//a", "/a//b", f"/usr/bin/nvidia{HYPHEN}container-runtime", "/et\u0441/x", None, 5],
    ),
    "command": (
        values.command,
        ["nvidia-container-runtime", "/usr/bin/nvidia-container-runtime", "runc", "/opt/bin/a+b"],
        [*injected("/usr/bin/nvidia-container-runtime"), *injected("nvidia-container-runtime"), "", ".", "..",
         "./x", "bin/x", "x/", "-x", "--help", "/a:b", f"nvidia{HYPHEN}container-runtime"],
    ),
    "path": (
        values.path,
        ["/etc/containerd/config.toml", "/tmp/a b/c.toml", "/etc/x,y=z"],
        [*injected("/etc/containerd/config.toml", [QUOTE, APOSTROPHE, NEWLINE, CR, NUL, "\t", "\\", "`"]),
         "", "etc/containerd/config.toml", "config.toml", None],
    ),
    "debian_version": (
        values.debian_version,
        ["1.17.8-1", "1:2.3~rc1-0ubuntu1", "535.129.03-1+deb12u1", "1.0"],
        [*injected("1.17.8-1"), "", "v1.17", "latest", "1.17*", "1.17.8-1 ", "-1", f"1.17{HYPHEN}1"],
    ),
    "apt_uri": (
        values.apt_uri,
        ["https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)", "http://127.0.0.1:8371/",
         "file:///srv/mirror/nvidia", "mirror+https://mirrors.example.com/list.txt"],
        [*injected("https://nvidia.github.io/libnvidia-container/stable/deb/", URL_BREAKERS), "",
         "nvidia.github.io/libnvidia-container", "http://", "https:///x", "/srv/mirror"],
    ),
}

HOSTILE = [(kind, value) for kind, (_rule, _good, bad) in KINDS.items() for value in bad]
VALID = [(kind, value) for kind, (_rule, good, _bad) in KINDS.items() for value in good]


@pytest.mark.parametrize(("kind", "value"), HOSTILE, ids=[f"{k}-{v!r}"[:80] for k, v in HOSTILE])
def test_hostile_values_are_refused_naming_the_option_value_and_rule(kind, value):
    rule = KINDS[kind][0]
    with pytest.raises(ValueSyntaxError) as caught:
        rule("my_option", value)
    message = str(caught.value)
    assert message.startswith("my_option"), message
    assert repr(value) in message, message
    assert "(" in message and message.endswith(")"), message  # the rule, in parentheses


@pytest.mark.parametrize(("kind", "value"), VALID, ids=[f"{k}-{v!r}"[:80] for k, v in VALID])
def test_valid_edge_values_pass_unchanged(kind, value):
    assert KINDS[kind][0]("my_option", value) == value
    assert k8s.is_valid(KINDS[kind][0], value)


def test_labels_name_the_key_or_the_value_at_fault():
    assert k8s.label_value("count", 8) == "8"  # a YAML number is the label's text
    with pytest.raises(ValueSyntaxError, match=r"^extra\['gpu'\]: True is not a label value \(a string"):
        k8s.labels("extra", {"gpu": True})
    assert k8s.labels("extra", {"example.com/team": "ml", "gpunode.io/old": None}) is not None
    with pytest.raises(ValueSyntaxError, match=r"^extra key: 'team name' is not a label key"):
        k8s.labels("extra", {"team name": "ml"})
    with pytest.raises(ValueSyntaxError, match=r"^extra\['team'\]: 'a\"b' is not a label value"):
        k8s.labels("extra", {"team": 'a"b'})
    with pytest.raises(ValueSyntaxError, match="is not a label value"):
        k8s.labels("extra", {"team": None}, allow_null=False)
    with pytest.raises(ValueSyntaxError, match="a mapping of labels"):
        k8s.labels("extra", ["team=ml"])


GOOD_TOLERATIONS = [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "example.com/dedicated", "operator": "Equal", "value": "gpu", "effect": "NoExecute",
     "tolerationSeconds": 300},
    {"operator": "Exists"},
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": "a", "value": ""},
]
BAD_TOLERATIONS = [
    ({"key": "a b", "operator": "Exists"}, "my_tolerations[0].key"),
    ({"key": "k", "operator": "In"}, "my_tolerations[0].operator"),
    ({"key": "k", "operator": "Exists", "value": "x"}, "my_tolerations[0].value"),
    ({"key": "k", "value": 'x"y'}, "my_tolerations[0].value"),
    ({"key": "k", "effect": "noschedule"}, "my_tolerations[0].effect"),
    ({"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}, "my_tolerations[0].tolerationSeconds"),
    ({"key": "k", "effect": "NoExecute", "tolerationSeconds": "5"}, "my_tolerations[0].tolerationSeconds"),
    ({"key": "k", "bogus": 1}, "my_tolerations[0]"),
    ({"value": "x"}, "my_tolerations[0].operator"),
    ("nvidia.com/gpu:NoSchedule", "my_tolerations[0]"),
]


def test_valid_tolerations_pass():
    assert k8s.tolerations("my_tolerations", GOOD_TOLERATIONS) == GOOD_TOLERATIONS


@pytest.mark.parametrize(("item", "where"), BAD_TOLERATIONS)
def test_bad_tolerations_name_the_field(item, where):
    with pytest.raises(ValueSyntaxError) as caught:
        k8s.tolerations("my_tolerations", [item])
    assert str(caught.value).startswith(where + ":"), caught.value


def test_taints():
    assert k8s.taint("t", {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    for bad, where in (({"key": "nvidia.com/gpu", "effect": "Nope"}, "t.effect"),
                       ({"key": "nvidia com", "effect": "NoSchedule"}, "t.key"),
                       ({"key": "k", "value": "a=b", "effect": "NoSchedule"}, "t.value"),
                       ({"key": "k", "effect": "NoSchedule", "operator": "Exists"}, "t")):
        with pytest.raises(ValueSyntaxError, match=f"^{where}:"):
            k8s.taint("t", bad)


def test_resources():
    good = {"requests": {"cpu": "50m", "memory": "64Mi", "nvidia.com/gpu": 1, "hugepages-2Mi": "1Gi"},
            "limits": {"cpu": 1, "memory": "256Mi", "ephemeral-storage": "1Gi"}, "claims": [{"name": "gpu"}]}
    assert k8s.resources("r", good) == good
    for bad, where in (({"requests": {"cpu": "50 m"}}, "r.requests['cpu']"),
                       ({"requests": {"gpu": 1}}, "r.requests key"),
                       ({"requests": {'cpu"': 1}}, "r.requests key"),
                       ({"limit": {"cpu": 1}}, "r"),
                       ({"requests": "1"}, "r.requests"),
                       ({"claims": [{"name": "GPU"}]}, "r.claims[0].name")):
        with pytest.raises(ValueSyntaxError) as caught:
            k8s.resources("r", bad)
        assert str(caught.value).startswith(where + ":"), caught.value


def test_node_label_term_takes_a_key_or_key_equals_value():
    assert k8s.node_label_term("o", "example.com/infra=yes")
    assert k8s.node_label_term("o", "node-role.kubernetes.io/control-plane")
    for bad in ("a b", "k=a b", 'k="x"', "k=v\n", "=v"):
        with pytest.raises(ValueSyntaxError, match=r"^o:"):
            k8s.node_label_term("o", bad)


def test_ports_and_field_managers():
    assert k8s.port("p", 1) == 1 and k8s.port("p", 65535) == 65535
    for bad in (0, 65536, -1, "80", True, None):
        with pytest.raises(ValueSyntaxError, match=r"^p:"):
            k8s.port("p", bad)
    assert k8s.field_manager("f", "gpunode")
    for bad in ("", "x" * 129, "a\nb", "a\x00b", 5):
        with pytest.raises(ValueSyntaxError, match=r"^f:"):
            k8s.field_manager("f", bad)


def test_check_walks_nested_options_and_lists_and_skips_nulls():
    rules = {"extender.url_prefix": values.http_url,
             "extender.managed_resources[].name": k8s.extended_resource_name,
             "labels{}": k8s.label_key, "absent": values.word_path}
    good = {"extender": {"url_prefix": "http://h/x", "managed_resources": [{"name": "a.com/b"}]},
            "labels": {"a": 1}, "absent": None}
    values.check(good, rules)
    bad = {"extender": {"url_prefix": "http://h/x",
                        "managed_resources": [{"name": "a.com/b"}, {"name": "a.com/b c"}]}}
    with pytest.raises(ValueSyntaxError, match=r"^extender\.managed_resources\[1\]\.name: 'a.com/b c'"):
        values.check(bad, rules)
    with pytest.raises(ValueSyntaxError, match=r"^labels key: 'a b'"):
        values.check({"labels": {"a b": 1}}, rules)


def test_optional_takes_the_empty_string_only():
    rule = values.optional(values.url_segment)
    assert rule("o", "") == "" and rule("o", "bind") == "bind"
    with pytest.raises(ValueSyntaxError, match=r"^o:"):
        rule("o", " ")


@pytest.mark.parametrize(
    "text", ["Tesla T4", 'GeForce "RTX" 3090', "A100-SXM4-80GB\n", "x" * 200, "ÄÖÜ GPU", "--"]
)
def test_the_fact_sanitiser_always_makes_a_value_these_rules_accept(text):
    """label_value() rewrites values derived from facts; its output must pass the user-value rule."""
    assert k8s.is_valid(k8s.label_value, gpu_nodes.label_value(text))
