"""The `uniscale:` section declared as dataclasses (methods/uniscale/config.py): the three scale
files validate, bad values give one-line errors naming the dotted key, and the JSON schema that
`json_schema(Config)` generates agrees with `from_dict` under `jsonschema` (an independent
implementation) on the valid sections and on the bad inputs."""
from __future__ import annotations

import pytest

from methods.core.config import from_dict, section_class
from methods.uniscale.config import POLICIES, BanditConfig, Config, TableConfig
from tests.config_cases import DELETE, ROOT, SCALES, Cases

CASES = Cases("uniscale", Config)
section, edited = CASES.section, CASES.edited


BAD = [  # (dotted path, new value, the whole one-line error)
    ("table.n_queries", 0, "config key 'uniscale.table.n_queries': 0 is less than the minimum of 1"),
    ("table.bon", [2, 0], "config key 'uniscale.table.bon[1]': 0 is less than the minimum of 1"),
    ("table.temperature", 0.0, "config key 'uniscale.table.temperature': 0.0 must be greater than 0"),
    ("table.beam_cp", 1.5, "config key 'uniscale.table.beam_cp': expected int, got 1.5"),
    ("table.seed", DELETE, "missing config key 'uniscale.table.seed'"),
    ("bandit.lam", 0, "config key 'uniscale.bandit.lam': 0.0 must be greater than 0"),
    ("bandit.weights", {"cost": [0.1, 0.9]},
     "config key 'uniscale.bandit.weights.cost': [0.1, 0.9] has fewer than 3 items"),
    ("bandit.weights", {"cost": [0.1, -0.1, 1.0]},
     "config key 'uniscale.bandit.weights.cost[1]': -0.1 is less than the minimum of 0"),
    ("bandit.policies", [], "config key 'uniscale.bandit.policies': [] has fewer than 1 items"),
    ("bandit.policies", ["uis_linucb", "thompson"],
     f"config key 'uniscale.bandit.policies[1]': 'thompson' is not one of {list(POLICIES)}"),
    ("bandit.switch_frac", 1.0, "config key 'uniscale.bandit.switch_frac': 1.0 must be less than 1"),
    ("bandit.cost_norm", [12.0], "config key 'uniscale.bandit.cost_norm': [12.0] has fewer than 2 items"),
    ("bandit.alpha_typo", 2.0, "unknown config key 'uniscale.bandit.alpha_typo' (allowed: alpha, cost_norm, "
     "feat_dim, knn_k, lam, policies, route_tts, seeds, switch_frac, tts_model, weights)"),
]


@pytest.mark.parametrize("scale", SCALES)
def test_scale_sections_validate(scale):
    cfg = from_dict(Config, section(scale), "uniscale")
    assert isinstance(cfg.table, TableConfig) and isinstance(cfg.bandit, BanditConfig)
    assert cfg.table.temperature == 1.0 and isinstance(cfg.table.temperature, float)
    assert set(cfg.bandit.policies) == set(POLICIES)


def test_section_class_is_this_config():
    assert section_class("uniscale", ROOT) is Config


@pytest.mark.parametrize("path,value,message", BAD, ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(BAD)])
def test_bad_values_give_one_line_errors(path, value, message):
    assert CASES.error(edited(path, value)) == message


def test_generated_schema_agrees_with_from_dict():
    CASES.assert_schema_agrees(BAD)
