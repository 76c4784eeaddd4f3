"""The `asag` section declared in methods/asag/config.py, under the checks of tests/config_cases.py:
the three scale files validate; bad values fail in one line naming the dotted key, and the generated
JSON schema refuses them too; the rules across keys are the section class's alone."""
import pytest

from methods.core.models import ModelConfig
from methods.core.train import TrainConfig
from tests.config_cases import DELETE, Cases, bad_ids

PAPER = "asag"
CASES = Cases(PAPER)
Config, SECTIONS, SCHEMA, edited = CASES.Config, CASES.sections, CASES.schema, CASES.edited


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_scale_sections_validate(scale):
    sec, cfg = CASES.loaded(scale)
    assert isinstance(cfg.train.model, ModelConfig) and isinstance(cfg.train.train, TrainConfig)
    assert [p.name for p in cfg.decode.policies] == [p["name"] for p in sec["decode"]["policies"]]


BAD = [  # (dotted key, value, the one-line message)
    ("data.max_operand", 8, "config key 'asag.data.max_operand': 8 is less than the minimum of 9"),
    ("data.max_operand", 100, "config key 'asag.data.max_operand': 100 is greater than the maximum of 99"),
    ("data.p_loop", 1.1, "config key 'asag.data.p_loop': 1.1 is greater than the maximum of 1"),
    ("data.max_rechecks", -1, "config key 'asag.data.max_rechecks': -1 is less than the minimum of 0"),
    ("train.hub_id", [], "config key 'asag.train.hub_id': expected str, got []"),
    ("train.seq_len", DELETE, "missing config key 'asag.train.seq_len'"),
    ("decode.budget", 7, "config key 'asag.decode.budget': 7 is less than the minimum of 8"),
    ("decode.inject_weight", -0.05, "config key 'asag.decode.inject_weight': -0.05 is less than the minimum of 0"),
    ("decode.n_problems", -1, "config key 'asag.decode.n_problems': -1 is less than the minimum of 0"),
    ("decode.policies", [], "config key 'asag.decode.policies': [] has fewer than 1 items"),
    ("decode.policies[0].name", "Vanilla", "config key 'asag.decode.policies[0].name': 'Vanilla' does not match"),
    ("decode.policies[0].kind", "greedy", "config key 'asag.decode.policies[0].kind': 'greedy' is not one of"),
    ("decode.policies[0].lam", 1.5, "config key 'asag.decode.policies[0].lam': 1.5 is greater than the maximum of 1"),
    ("decode.policies[0].alpha", "inf", "config key 'asag.decode.policies[0].alpha': expected float, got 'inf'"),
    ("decode.policies[0].max_jumps", -1, "config key 'asag.decode.policies[0].max_jumps': -1 is less than the minimum"),
    ("decode.policies[0].inject", DELETE, "missing config key 'asag.decode.policies[0].inject'"),
    ("analysis.prestudy_threshold", "low", "config key 'asag.analysis.prestudy_threshold': expected float, got 'low'"),
    ("analysis.extra", "x", "unknown config key 'asag.analysis.extra'"),
    ("paper.think_ratio", 0, "config key 'asag.paper.think_ratio': 0.0 must be greater than 0"),
    ("paper.think_ratio", 1.01, "config key 'asag.paper.think_ratio': 1.01 is greater than the maximum of 1"),
    ("paper.models", "Qwen/QwQ-32B", "config key 'asag.paper.models': expected a list, got 'Qwen/QwQ-32B'"),
]


@pytest.mark.parametrize("path,value,message", BAD, ids=bad_ids(BAD))
def test_bad_value_is_one_line_naming_the_key(path, value, message):
    CASES.assert_rejected(edited(path, value), message)


def test_accepted_edge_values_agree_with_the_generated_schema():
    CASES.assert_accepted([("data.max_operand", 9), ("data.max_operand", 99), ("decode.budget", 8),
                           ("decode.policies[0].alpha", 1e9), ("paper.think_ratio", 1), ("train.hub_id", "Qwen/QwQ-32B")])
