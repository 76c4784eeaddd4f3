"""The one LLM-spec declaration (methods/core/llm_spec.py): its keys are make_llm's, every scale-file
place that holds a spec refers to it in the generated schema, and a key written into a spec is
refused by name (from_dict and, independently, jsonschema) without the error repeating it."""
from __future__ import annotations

import dataclasses
import json

import pytest

from methods.core import llm
from methods.core.config import from_dict, scale_schema
from methods.core.llm_spec import HFSpec, OpenAISpec
from methods.core.registry import papers
from methods.core.results import InputError
from tests.config_cases import ROOT, Cases

SECRET = "sk-test-SECRET123"
SERVED = {"serve", "base_url_file", "wait_s"}  # the DAG's served models (methods/core/serving/)


def test_keys_are_make_llms():
    for cls, backend, extra in ((OpenAISpec, "openai", SERVED), (HFSpec, "hf", set())):
        required, optional = llm._SPEC_KEYS[backend]
        assert {f.name for f in dataclasses.fields(cls)} == {"backend"} | required | optional | extra


def test_every_spec_place_refers_to_the_one_definition():
    schema = scale_schema(papers(ROOT), ROOT)
    text = json.dumps(schema)
    assert set(schema["$defs"]["LLMSpec"]) == {"anyOf"}
    # pse agents (with the simulator) and judges, memora's answer and judge, tsgd's endpoints
    assert text.count('"#/$defs/LLMSpec"') == 5
    for cls in ("methods.core.llm_spec.OpenAISpec", "methods.core.llm_spec.HFSpec"):
        assert schema["$defs"][cls]["additionalProperties"] is False


@pytest.mark.parametrize("paper,path,where", [
    ("pse", "agents.0.spec", "pse.agents[0].spec"),
    ("pse", "judge.specs.0", "pse.judge.specs[0]"),
    ("memora", "qa.answer", "memora.qa.answer"),
    ("tsgd", "llm.endpoints.0", "tsgd.llm.endpoints[0]"),
])
def test_a_key_in_a_spec_is_refused_by_name(paper, path, where):
    cases = Cases(paper)
    spec = {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": SECRET}
    data = cases.section("paper")
    if path == "judge.specs.0":
        data["judge"]["specs"] = [spec]
    else:
        data = cases.edited(path, spec, scale="paper")
    with pytest.raises(InputError) as e:
        from_dict(cases.Config, data, paper)
    assert str(e.value).startswith(f"unknown config key '{where}.api_key' (allowed: ")
    assert SECRET not in str(e.value)
    assert list(cases.schema.iter_errors(data))  # the generated JSON schema refuses it too


def test_a_key_pasted_into_api_key_env_is_not_repeated():
    cases = Cases("pse")
    data = cases.edited("agents.0.spec", {"backend": "openai", "base_url": "http://h/v1", "model": "m",
                                          "api_key_env": SECRET}, scale="paper")
    with pytest.raises(InputError) as e:
        from_dict(cases.Config, data, "pse")
    assert str(e.value).startswith("config key 'pse.agents[0].spec.api_key_env': the value does not match")
    assert SECRET not in str(e.value)


def test_specs_stay_mappings_as_given():
    cases = Cases("pse")
    cfg = from_dict(cases.Config, cases.section("paper"), "pse")
    raw = cases.section("paper")["agents"]
    assert [a.spec for a in cfg.agents] == [a["spec"] for a in raw]  # no defaults filled in
    assert all(type(a.spec) is dict for a in cfg.agents)
