"""Every module's DOCUMENTATION options equal its argument spec (STYLE.md), in one test.

What ``ansible-test sanity``'s validate-modules checks in the collection, here for
every module of library/ as ``make test`` runs it: the same option names, and per
option the same type (``str`` when unsaid), default, choices, ``required``,
``elements`` and suboptions. The spec is what the module hands ``AnsibleModule``
(captured from ``build_module()``); a module that is the documentation of an
action plugin of its name is compared with the plugin's ``ARGUMENT_SPEC``.
The options of the project's documentation fragments (doc_fragments/) that a
module names in ``extends_documentation_fragment`` count as its own, as
ansible-doc and validate-modules merge them (``module_attributes`` has none).
"""

import importlib

import pytest
import yaml
from ansible.module_utils import basic
from conftest import ROOT, load_file

MODULES = sorted(path.stem for path in (ROOT / "library").glob("*.py"))
ACTIONS = {path.stem for path in (ROOT / "action_plugins").glob("*.py")}
FRAGMENTS = {path.stem: path for path in (ROOT / "doc_fragments").glob("*.py")}
# what each compared key means when unsaid
COMPARED = {"type": "str", "required": False, "default": None, "choices": None, "elements": None}


class Built(Exception):
    """Raised in place of AnsibleModule.__init__, carrying what the module asked for."""


def argument_spec(name, monkeypatch):
    if name in ACTIONS:
        return load_file(ROOT / "action_plugins" / f"{name}.py", f"{name}_action").ARGUMENT_SPEC

    def capture(self, argument_spec, **_kwargs):
        raise Built(argument_spec)

    monkeypatch.setattr(basic.AnsibleModule, "__init__", capture)
    with pytest.raises(Built) as built:
        importlib.import_module(name).build_module()
    return built.value.args[0]


def documented_options(name):
    """DOCUMENTATION's options of module ``name``, with those of the project fragments it names."""
    documentation = yaml.safe_load(importlib.import_module(name).DOCUMENTATION)
    options = dict(documentation.get("options") or {})
    for fragment in documentation.get("extends_documentation_fragment") or []:
        stem, _, variable = fragment.partition(".")
        if stem in FRAGMENTS:
            holder = load_file(FRAGMENTS[stem], f"{stem}_doc_fragment").ModuleDocFragment
            merged = yaml.safe_load(getattr(holder, variable.upper() or "DOCUMENTATION"))
            options.update(merged.get("options") or {})
    return options


def differences(documented, spec, where=""):
    """What ``documented`` (DOCUMENTATION options) says otherwise than ``spec``, one line each."""
    found = []
    if set(documented) != set(spec):
        found.append(f"{where or 'options'}: documented {sorted(documented)}, spec {sorted(spec)}")
        return found
    for option, rules in spec.items():
        doc, path = documented[option] or {}, f"{where}{option}"
        found.extend(f"{path}: {key} {doc.get(key, unsaid)!r} documented, {rules.get(key, unsaid)!r} in spec"
                     for key, unsaid in COMPARED.items() if doc.get(key, unsaid) != rules.get(key, unsaid))
        if rules.get("options") or doc.get("suboptions"):
            found.extend(differences(doc.get("suboptions") or {}, rules.get("options") or {}, f"{path}."))
    return found


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.controller(reason="its action plugin imports the controller"))
    if name in ACTIONS else name
    for name in MODULES
])
def test_documentation_options_equal_the_argument_spec(name, monkeypatch):
    assert differences(documented_options(name), argument_spec(name, monkeypatch)) == []


def test_a_project_fragment_documents_the_option_of_each_module_that_names_it():
    documentation = yaml.safe_load(importlib.import_module("nvidia_mig").DOCUMENTATION)
    assert "lock_timeout" not in documentation["options"]
    assert documented_options("nvidia_mig")["lock_timeout"]["type"] == "int"


@pytest.mark.parametrize("name", sorted(set(MODULES) - ACTIONS))
def test_a_module_takes_its_attributes_from_the_one_fragment(name):
    """check_mode, diff_mode and platform come from module_attributes (its diff variant), not a copy."""
    documentation = yaml.safe_load(importlib.import_module(name).DOCUMENTATION)
    fragments = documentation.get("extends_documentation_fragment") or []
    assert len({"module_attributes", "module_attributes.no_diff"} & set(fragments)) == 1, fragments
    assert not set(documentation.get("attributes") or {}) & {"check_mode", "diff_mode", "platform"}


def test_a_difference_names_the_option_and_what_differs():
    spec = {"mode": {"type": "str", "choices": ["a", "b"]},
            "nodes": {"type": "list", "elements": "dict", "options": {"name": {"required": True}}}}
    documented = {"mode": {"type": "str", "choices": ["a"]},
                  "nodes": {"type": "list", "elements": "dict", "suboptions": {"name": {"type": "str"}}}}
    assert differences(documented, spec) == [
        "mode: choices ['a'] documented, ['a', 'b'] in spec",
        "nodes.name: required False documented, True in spec",
    ]
