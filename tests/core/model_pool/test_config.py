"""The `model_pool:` section declared as dataclasses (methods/core/model_pool/config.py): the three scale
files validate, bad values give one-line errors naming the dotted key, and the JSON schema that
`json_schema(Config)` generates agrees with `from_dict` under `jsonschema` (an independent
implementation) on the valid sections and on the bad inputs."""
from __future__ import annotations

import pytest

from methods.core.config import from_dict, section_class
from methods.core.model_pool.config import Config, MemberConfig
from methods.core.model_pool.pool import pool_config
from methods.core.results import InputError
from tests.config_cases import DELETE, ROOT, SCALES, Cases

CASES = Cases("model_pool", Config)
section, edited = CASES.section, CASES.edited


BAD = [  # (dotted path in the tiny section, new value, the whole one-line error)
    ("data.ops", "+/", "config key 'model_pool.data.ops': '+/' does not match '^[-+*]+$'"),
    ("data.ops", "", "config key 'model_pool.data.ops': '' does not match '^[-+*]+$'"),
    ("data.n_train", 0, "config key 'model_pool.data.n_train': 0 is less than the minimum of 1"),
    ("members", [], "config key 'model_pool.members': [] has fewer than 1 items"),
    ("members.0.name", "S-1", "config key 'model_pool.members[0].name': 'S-1' does not match '^[A-Za-z0-9_]+$'"),
    ("members.0.mix_arith", 1.5, "config key 'model_pool.members[0].mix_arith': 1.5 is greater than the maximum of 1"),
    ("members.0.hub", 5, "config key 'model_pool.members[0].hub': expected str, got 5"),
    ("members.0.train", DELETE, "missing config key 'model_pool.members[0].train'"),
    ("verifier.n_sampled", -1, "config key 'model_pool.verifier.n_sampled': -1 is less than the minimum of 0"),
    ("verifier.temperature", 0, "config key 'model_pool.verifier.temperature': 0.0 must be greater than 0"),
    ("cost.repeats", 0, "config key 'model_pool.cost.repeats': 0 is less than the minimum of 1"),
    ("cost.warmup", 1, "unknown config key 'model_pool.cost.warmup' (allowed: batch, ctx_len, repeats)"),
]


@pytest.mark.parametrize("scale", SCALES)
def test_scale_sections_validate(scale):
    cfg = from_dict(Config, section(scale), "model_pool")
    assert cfg.members and all(isinstance(m, MemberConfig) for m in cfg.members)
    assert pool_config(section(scale)) == cfg     # the pool's steps read the same dataclass


def test_section_class_is_this_config():
    assert section_class("model_pool", ROOT) is Config


@pytest.mark.parametrize("path,value,message", BAD, ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(BAD)])
def test_bad_values_give_one_line_errors(path, value, message):
    assert CASES.error(edited(path, value)) == message


CROSS = [  # the checks relating keys (Config.__post_init__, not in the JSON schema): the whole error
    ("members.1.name", "S", "config key 'model_pool.members': names must be unique, got ['S', 'S', 'L']"),
    ("members.0.model", None, "config key 'model_pool.members.S': needs hub, or model+train+mix_arith"),
    ("members.0.mix_arith", None, "config key 'model_pool.members.S': needs hub, or model+train+mix_arith"),
]


@pytest.mark.parametrize("path,value,message", CROSS, ids=[p for p, _, _ in CROSS])
def test_cross_key_checks_give_one_line_errors(path, value, message):
    assert CASES.error(edited(path, value)) == message
    with pytest.raises(InputError) as e:     # the pool's steps: the same error
        pool_config(edited(path, value))
    assert str(e.value) == message


def test_a_hub_member_needs_no_model():
    d = edited("members.0.model", None)
    d["members"][0]["hub"] = "org/some-model"
    assert from_dict(Config, d, "model_pool").members[0].model is None


def test_generated_schema_agrees_with_from_dict():
    CASES.assert_schema_agrees(BAD)
