"""The `pse:` section declared as dataclasses (methods/pse/config.py): the three scale
files validate, bad values give one-line errors naming the dotted key, and the JSON schema that
`json_schema(Config)` generates agrees with `from_dict` under `jsonschema` (an independent
implementation) on the valid sections and on the bad inputs."""
from __future__ import annotations

import pytest

from methods.core.config import from_dict, section_class
from methods.pse.config import BACKENDS, AgentConfig, Config, ScenarioConfig
from tests.config_cases import DELETE, ROOT, SCALES, Cases

CASES = Cases("pse", Config)
section, edited = CASES.section, CASES.edited


BAD = [  # (dotted path in the tiny section, new value, the whole one-line error)
    ("scenarios.stages", 1, "config key 'pse.scenarios.stages': 1 is less than the minimum of 2"),
    ("scenarios.max_new_tokens", DELETE, "missing config key 'pse.scenarios.max_new_tokens'"),
    ("agents", [], "config key 'pse.agents': [] has fewer than 1 items"),
    ("agents.0.name", "bad name", "config key 'pse.agents[0].name': 'bad name' does not match '^[A-Za-z0-9_.-]+$'"),
    ("agents.0.spec", ["sim"], "config key 'pse.agents[0].spec': expected a mapping, got ['sim']"),
    ("primary", 3, "config key 'pse.primary': expected str, got 3"),
    ("judge.kind", "human", "config key 'pse.judge.kind': 'human' is not one of ['string', 'llm']"),
    ("analysis.conf", 1.0, "config key 'pse.analysis.conf': 1.0 must be less than 1"),
    ("analysis.min_cells_in_ci", 1.5, "config key 'pse.analysis.min_cells_in_ci': 1.5 is greater than the maximum of 1"),
]
# checks of __post_init__ (keys the generated JSON schema cannot express: a required key of an
# open mapping, a required entry of a map)
CROSS = [
    ("agents.0.spec", {"model": "x"}, "missing config key 'pse.agents[0].spec.backend'"),
    ("agents.0.spec", {"backend": "vllm"},
     f"config key 'pse.agents[0].spec.backend': 'vllm' is not one of {list(BACKENDS)}"),
    ("judge.specs", [{"model": "x"}], "missing config key 'pse.judge.specs[0].backend'"),
]


@pytest.mark.parametrize("scale", SCALES)
def test_scale_sections_validate(scale):
    cfg = from_dict(Config, section(scale), "pse")
    assert isinstance(cfg.scenarios, ScenarioConfig) and cfg.scenarios.max_new_tokens == 200
    assert all(isinstance(a, AgentConfig) and a.spec["backend"] in BACKENDS for a in cfg.agents)
    assert cfg.primary in {a.name for a in cfg.agents}


def test_section_class_is_this_config():
    assert section_class("pse", ROOT) is Config


@pytest.mark.parametrize("path,value,message", BAD + CROSS,
                         ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(BAD + CROSS)])
def test_bad_values_give_one_line_errors(path, value, message):
    assert CASES.error(edited(path, value)) == message


def test_generated_schema_agrees_with_from_dict():
    CASES.assert_schema_agrees(BAD)
