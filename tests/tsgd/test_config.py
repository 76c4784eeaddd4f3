"""The `tsgd:` section declared as dataclasses (methods/tsgd/config.py): the three scale
files validate, bad values give one-line errors naming the dotted key, and the JSON schema that
`json_schema(Config)` generates agrees with `from_dict` under `jsonschema` (an independent
implementation) on the valid sections and on the bad inputs."""
from __future__ import annotations

import pytest

from methods.core.config import from_dict, section_class
from methods.tsgd.config import Config, OptimConfig, VariantConfig
from tests.config_cases import ROOT, SCALES, Cases

CASES = Cases("tsgd", Config)
section, edited = CASES.section, CASES.edited


BAD = [  # (dotted path in the tiny section, new value, the whole one-line error)
    ("data.source", "file", "config key 'tsgd.data.source': 'file' is not one of ['synthetic', 'hub']"),
    ("data.n_types", 13, "config key 'tsgd.data.n_types': 13 is greater than the maximum of 12"),
    ("data.test_hubs", [{"name": "a", "id": "b", "split": "test", "question": "q"}],
     "missing config key 'tsgd.data.test_hubs[0].answer'"),
    ("llm.kind", "api", "config key 'tsgd.llm.kind': 'api' is not one of ['sim', 'endpoint']"),
    ("llm.endpoints", [{"backend": "openai"}] * 3,
     "config key 'tsgd.llm.endpoints': [{'backend': 'openai'}, {'backend': 'openai'}, {'backend': 'openai'}] "
     "has more than 2 items"),
    ("llm.sim_reflector.p_good", 1.5, "config key 'tsgd.llm.sim_reflector.p_good': 1.5 is greater than the maximum of 1"),
    ("llm.sim_solver.t6", 0.1, "unknown config key 'tsgd.llm.sim_solver.t6' (allowed: t0, t1, t2, t3, t4, t5)"),
    ("embedder", "bert", "config key 'tsgd.embedder': 'bert' is not one of ['hash', 'minilm']"),
    ("tsgd.lr", 0.5, "config key 'tsgd.tsgd.lr': expected int, got 0.5"),
    ("tsgd.temperature", -0.1, "config key 'tsgd.tsgd.temperature': -0.1 is less than the minimum of 0"),
    ("variants.full.verify", "global",
     "config key 'tsgd.variants.full.verify': 'global' is not one of ['dual', 'local', 'none']"),
    ("variants.C12.capacity", 0, "config key 'tsgd.variants.C12.capacity': 0 is less than the minimum of 1"),
    ("rag.checkpoints", [], "config key 'tsgd.rag.checkpoints': [] has fewer than 1 items"),
    ("analysis.flat_from", 2, "config key 'tsgd.analysis.flat_from': 2.0 is greater than the maximum of 1"),
]
# checks of __post_init__ (keys the generated JSON schema cannot express: a required key of an
# open mapping, a required entry of a map)
CROSS = [
    ("variants", {"C12": {"capacity": 12, "verify": "dual"}}, "missing config key 'tsgd.variants.full'"),
    ("llm.endpoints", [{"model": "x"}], "missing config key 'tsgd.llm.endpoints[0].backend'"),
]


@pytest.mark.parametrize("scale", SCALES)
def test_scale_sections_validate(scale):
    cfg = from_dict(Config, section(scale), "tsgd")
    assert isinstance(cfg.tsgd, OptimConfig) and cfg.tsgd.temperature == 0.7
    assert all(isinstance(v, VariantConfig) for v in cfg.variants.values())
    assert cfg.variants["full"].verify == "dual" and cfg.variants["no_budget"].capacity is None


def test_section_class_is_this_config():
    assert section_class("tsgd", ROOT) is Config


@pytest.mark.parametrize("path,value,message", BAD + CROSS,
                         ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(BAD + CROSS)])
def test_bad_values_give_one_line_errors(path, value, message):
    assert CASES.error(edited(path, value)) == message


def test_generated_schema_agrees_with_from_dict():
    CASES.assert_schema_agrees(BAD)
