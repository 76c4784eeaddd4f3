"""methods/verbalized_sampling/config.py declares the `verbalized_sampling` section of the scale files:
the three scale files validate, bad values fail with one line naming the dotted key, the file loads
without torch or numpy (the workflow reads it at parse time), and the JSON schema generated from the
declaration, run by an independent implementation (`jsonschema`), agrees with `from_dict`. World
bounds match the grammar; the steps use the declared classes."""
from __future__ import annotations

import sys

import pytest

from methods.core.config import from_dict
from tests.config_cases import Cases, assert_loads_without_torch_or_numpy, edited

NAME = "verbalized_sampling"
CASES = Cases(NAME)
Config, SCHEMA, section = CASES.Config, CASES.schema, CASES.section


BAD = {  # case → (dotted key changed, new value or ... = deleted, dotted key the error names)
    "n_topics 0": ("world.n_topics", 0, "world.n_topics"),
    "zipf_s 0": ("world.zipf_s", 0, "world.zipf_s"),
    "one response per prompt": ("world.responses_per_prompt", 1, "world.responses_per_prompt"),
    "no theory betas": ("theory.betas", [], "theory.betas"),
    "theory beta 0": ("theory.betas", [1.0, 0], "theory.betas[1]"),
    "pretrain seed a string": ("pretrain.seed", "0", "pretrain.seed"),
    "dpo beta 0": ("dpo.beta", 0, "dpo.beta"),
    "unknown method": ("sample.methods", ["direct", "multi_turn"], "sample.methods[1]"),
    "no methods": ("sample.methods", [], "sample.methods"),
    "top_p 0": ("sample.top_p", 0, "sample.top_p"),
    "temperature < 0": ("sample.temperature", -0.5, "sample.temperature"),
    "generator backend hf": ("sample.generators.base.backend", "hf", "sample.generators.base.backend"),
    "generator transport": ("sample.generators.aligned.transport", "http", "sample.generators.aligned.transport"),
    "generator timeout 0": ("sample.generators.base.timeout", 0, "sample.generators.base.timeout"),
    "generator retries < 0": ("sample.generators.base.max_retries", -1, "sample.generators.base.max_retries"),
    "generator api key inline": ("sample.generators.base.api_key", "sk-x", "sample.generators.base.api_key"),
    "no aligned generator": ("sample.generators.aligned", ..., "sample.generators.aligned"),
    "one sim threshold": ("analysis.sim_thresholds", [0.2], "analysis.sim_thresholds"),
    "embed a string": ("analysis.embed", "yes", "analysis.embed"),
    "missing key": ("analysis.bootstrap", ..., "analysis.bootstrap"),
    # cross-field rules of the world (WorldConfig.__post_init__; no JSON-schema keyword says them)
    "more topics than the world has": ("world.n_topics", 21, "world.n_topics"),
    "pool not above k": ("world.pool_size", 5, "world.pool_size"),
    "pool beyond the grammar": ("world.pool_size", 641, "world.pool_size"),
    "more responses than the pool": ("world.responses_per_prompt", 21, "world.responses_per_prompt"),
}
CROSS_FIELD = {"more topics than the world has", "pool not above k", "pool beyond the grammar",
               "more responses than the pool"}


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_scale_sections_validate(scale):
    data, cfg = CASES.loaded(scale)  # the generated schema accepts it too
    gen = data["sample"]["generators"]
    assert cfg.sample.generators.base.backend == gen["base"]["backend"]
    assert cfg.sample.generators.aligned.timeout == float(gen["aligned"]["timeout"])
    assert cfg.analysis.sim_thresholds == [float(x) for x in data["analysis"]["sim_thresholds"]]
    assert cfg.pretrain.train.steps == data["pretrain"]["train"]["steps"]


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_value_is_one_line_naming_the_key(case):
    key, value, named = BAD[case]
    data = edited(section("tiny"), key, value)
    msg = CASES.error(data)
    # __post_init__ does not know where its section sits: cross-field errors name the key
    # within the section (world.n_topics), as the step that reads the section alone sees it
    assert "\n" not in msg and f"'{named if case in CROSS_FIELD else NAME + '.' + named}'" in msg, msg
    # the generated schema has every rule but the cross-field ones
    assert SCHEMA.is_valid(data) == (case in CROSS_FIELD), case


def test_world_bounds_match_the_grammar():
    from methods.verbalized_sampling import world

    mod = sys.modules[Config.__module__]
    assert mod.MAX_TOPICS == len(world.TOPICS)
    assert mod.GRAMMAR_SIZE == len(world.ADJS) * len(world.VERBS) * len(world.PLACES)


def test_steps_use_the_declared_classes():
    from methods.verbalized_sampling import analysis, lm, world

    mod = sys.modules[Config.__module__]
    assert (world.WorldConfig, lm.PretrainConfig, lm.DPOConfig, lm.SampleConfig, analysis.AnalysisConfig) == \
        (mod.WorldConfig, mod.PretrainConfig, mod.DPOConfig, mod.SampleConfig, mod.AnalysisConfig)
    # the sample step gets the section's sampling keys plus `generator` = one of `generators`
    sample = section("paper")["sample"]
    cfg = from_dict(mod.SampleConfig, {k: v for k, v in sample.items() if k != "generators"}, "sample")
    assert isinstance(from_dict(Config, section("paper"), NAME).sample, mod.SampleConfig)
    assert cfg.methods == sample["methods"] and cfg.temperature == sample["temperature"]
    gen = from_dict(mod.VsGenerator, sample["generators"]["aligned"], "sample.generator")
    assert gen.model == sample["generators"]["aligned"]["model"] and gen.transport == "openai"


def test_loads_without_torch_or_numpy():
    assert_loads_without_torch_or_numpy(NAME)
