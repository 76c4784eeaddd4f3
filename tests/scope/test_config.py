"""The `scope:` section declared as dataclasses (methods/scope/config.py): the three scale
files validate, bad values give one-line errors naming the dotted key, and the JSON schema that
`json_schema(Config)` generates agrees with `from_dict` under `jsonschema` (an independent
implementation) on the valid sections and on the bad inputs."""
from __future__ import annotations

import pytest

from methods.core.config import from_dict, section_class
from methods.core.model_pool.config import MemberConfig
from methods.scope.config import Config, PredictorConfig
from tests.config_cases import ROOT, SCALES, Cases

CASES = Cases("scope", Config)
section, edited = CASES.section, CASES.edited


BAD = [  # (dotted path in the tiny section, new value, the whole one-line error)
    ("extra_members", [], "config key 'scope.extra_members': [] has fewer than 1 items"),
    ("extra_members.0.name", "X-S", "config key 'scope.extra_members[0].name': 'X-S' does not match '^[A-Za-z0-9_]+$'"),
    ("extra_members.0.mix_arith", 1.5,
     "config key 'scope.extra_members[0].mix_arith': 1.5 is greater than the maximum of 1"),
    ("outcomes.queries.ops", "+/", "config key 'scope.outcomes.queries.ops': '+/' does not match '^[-+*]+$'"),
    ("outcomes.queries.n_anchor", 0, "config key 'scope.outcomes.queries.n_anchor': 0 is less than the minimum of 1"),
    ("outcomes.pool.members", ["S"], "config key 'scope.outcomes.pool.members': ['S'] has fewer than 2 items"),
    ("outcomes.pool.price_per_10k", -0.01,
     "config key 'scope.outcomes.pool.price_per_10k': -0.01 is less than the minimum of 0"),
    ("predictor.model", 3, "config 'scope.predictor.model': expected a mapping, got 3"),
    ("predictor.k_prompt", -1, "config key 'scope.predictor.k_prompt': -1 is less than the minimum of 0"),
    ("predictor.grpo.group", 1, "config key 'scope.predictor.grpo.group': 1 is less than the minimum of 2"),
    ("predictor.grpo.lr", 0, "config key 'scope.predictor.grpo.lr': 0.0 must be greater than 0"),
    ("route.alpha_step", 0, "config key 'scope.route.alpha_step': 0.0 must be greater than 0"),
    ("route.w", 1.2, "config key 'scope.route.w': 1.2 is greater than the maximum of 1"),
    ("route.budgets", [0.1, 0], "config key 'scope.route.budgets[1]': 0.0 must be greater than 0"),
    ("route.budgets", [], "config key 'scope.route.budgets': [] has fewer than 1 items"),
]


@pytest.mark.parametrize("scale", SCALES)
def test_scale_sections_validate(scale):
    cfg = from_dict(Config, section(scale), "scope")
    assert all(isinstance(m, MemberConfig) for m in cfg.extra_members)
    assert isinstance(cfg.predictor, PredictorConfig)
    assert cfg.outcomes.pool.unseen in cfg.outcomes.pool.members
    if scale == "paper":   # the released predictor and outcome dataset: nothing trained or generated
        assert cfg.predictor.hub and cfg.predictor.decode and cfg.predictor.grpo is None
        assert not cfg.outcomes.queries.generated and set(cfg.outcomes.pool.prices) == set(cfg.outcomes.pool.members)
    else:
        assert cfg.predictor.grpo.group >= 2 and cfg.outcomes.queries.generated


def test_section_class_is_this_config():
    assert section_class("scope", ROOT) is Config


@pytest.mark.parametrize("path,value,message", BAD, ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(BAD)])
def test_bad_values_give_one_line_errors(path, value, message):
    assert CASES.error(edited(path, value)) == message


CROSS = [  # the checks relating keys (__post_init__, not in the JSON schema): the whole error
    ("outcomes.pool.unseen", "L3",
     "config key 'scope.outcomes.pool.unseen': 'L3' is not among pool.members ['D', 'S', 'Mq', 'M', 'L', 'L2']"),
    ("extra_members.1.name", "D", "config key 'scope.extra_members': names must be unique, got ['D', 'D', 'L2']"),
    ("extra_members.0.train", None, "config key 'scope.extra_members.D': needs hub, or model+train+mix_arith"),
    ("direct_members", ["Q"], "config key 'scope.direct_members': ['Q'] are not trained extra members "
                              "(extra_members: ['D', 'L2', 'Mq'])"),
    ("seeds", [0, 0, 1], "config key 'scope.seeds': seeds must be unique, got [0, 0, 1]"),
    ("seeds", [], "config key 'scope.seeds': [] has fewer than 1 items"),
    ("predictor.model", None,
     "config key 'scope.predictor.model': needed to train the predictor (predictor.hub is null)"),
    ("predictor.hub", "org/p",
     "config key 'scope.predictor.decode': needed to sample the hub predictor 'org/p'"),
    ("outcomes.queries.seed", None,
     "config key 'scope.outcomes.queries': source 'generated' needs ['seed']"),
    ("outcomes.queries.source", "org/data",
     "config key 'scope.outcomes.queries': ['n_anchor', 'n_train', 'n_test', 'max_ops', 'max_digits', 'ops', "
     "'rev_min', 'rev_max', 'seed'] are generator keys, unused with the outcome dataset 'org/data' (its splits "
     "are the dataset's)"),
    ("outcomes.pool.price_per_10k", None,
     "config key 'scope.outcomes.pool.price_per_10k': needed with generated queries"),
]


@pytest.mark.parametrize("path,value,message", CROSS, ids=[p for p, _, _ in CROSS])
def test_cross_key_checks_give_one_line_errors(path, value, message):
    assert CASES.error(edited(path, value)) == message


def test_generated_schema_agrees_with_from_dict():
    CASES.assert_schema_agrees(BAD)
