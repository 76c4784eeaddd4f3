"""The `siamesenorm` section declared in methods/siamesenorm/config.py, under the checks of tests/config_cases.py:
the three scale files validate; bad values fail in one line naming the dotted key, and the generated
JSON schema refuses them too; the rules across keys are the section class's alone."""
import pytest

from methods.core.models import ModelConfig
from methods.core.train import TrainConfig
from tests.config_cases import DELETE, Cases, bad_ids

PAPER = "siamesenorm"
CASES = Cases(PAPER)
Config, SECTIONS, SCHEMA, edited = CASES.Config, CASES.sections, CASES.schema, CASES.edited


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_scale_sections_validate(scale):
    sec, cfg = CASES.loaded(scale)
    assert isinstance(cfg.run.model, ModelConfig) and isinstance(cfg.run.train, TrainConfig)
    assert cfg.schemes == sec["schemes"] and cfg.lrs == [float(x) for x in sec["lrs"]]


BAD = [  # (dotted key, value, the one-line message)
    ("schemes", [], "config key 'siamesenorm.schemes': [] has fewer than 1 items"),
    ("schemes", ["pre", "pre"], "config key 'siamesenorm.schemes': ['pre', 'pre'] has repeated items"),
    ("schemes", ["pre", "mix"], "config key 'siamesenorm.schemes[1]': 'mix' is not one of"),
    ("lrs", [0.01, 0], "config key 'siamesenorm.lrs[1]': 0.0 must be greater than 0"),
    ("seeds", [-1], "config key 'siamesenorm.seeds[0]': -1 is less than the minimum of 0"),
    ("data.arith_fraction", -0.1, "config key 'siamesenorm.data.arith_fraction': -0.1 is less than the minimum of 0"),
    ("data.max_digit", 0, "config key 'siamesenorm.data.max_digit': 0 is less than the minimum of 1"),
    ("data.source", None, "config key 'siamesenorm.data.source': expected str, got None"),
    ("run.diverge_ratio", 0, "config key 'siamesenorm.run.diverge_ratio': 0.0 must be greater than 0"),
    ("run.hybrid_attn_norm", "false", "config key 'siamesenorm.run.hybrid_attn_norm': expected bool, got 'false'"),
    ("run.train.weight_decay", -0.1, "config key 'siamesenorm.run.train.weight_decay': -0.1 is less than the minimum"),
    ("run.train.schedule", "linear", "config key 'siamesenorm.run.train.schedule': 'linear' is not one of"),
    ("run.train.min_lr_ratio", 1.5, "config key 'siamesenorm.run.train.min_lr_ratio': 1.5 is greater than the maximum"),
    ("steptime.warmup", -1, "config key 'siamesenorm.steptime.warmup': -1 is less than the minimum of 0"),
    ("steptime.model", {}, "unknown config key 'siamesenorm.steptime.model'"),
    ("eval.tasks", [], "config key 'siamesenorm.eval.tasks': [] has fewer than 1 items"),
    ("eval.limit", 0, "config key 'siamesenorm.eval.limit': 0 is less than the minimum of 1"),
    ("analysis.low_lr", 0, "config key 'siamesenorm.analysis.low_lr': 0.0 must be greater than 0"),
    ("analysis.c1_tolerance", -0.05, "config key 'siamesenorm.analysis.c1_tolerance': -0.05 is less than the minimum"),
    ("analysis.post", DELETE, "missing config key 'siamesenorm.analysis.post'"),
]


@pytest.mark.parametrize("path,value,message", BAD, ids=bad_ids(BAD))
def test_bad_value_is_one_line_naming_the_key(path, value, message):
    CASES.assert_rejected(edited(path, value), message)


def test_accepted_edge_values_agree_with_the_generated_schema():
    CASES.assert_accepted([("eval.limit", 5), ("schemes", ["hybrid_pre"]), ("data.arith_fraction", 1),
                           ("steptime.warmup", 0), ("analysis.c1_post_margin", 0)])


@pytest.mark.parametrize("path,value,message", [
    ("data.n_arith_eval", 10**7, "config key 'data.n_arith_eval': 10000000 held-out problems leave too few"),
    ("run.grad_stats_step", 10**6, "config key 'run.grad_stats_step' must be in [1, run.train.steps="),
    ("eval.tasks", ["siamesenorm_arith", "arithmetic"], "config key 'eval.tasks': 'siamesenorm_arith' runs alone"),
    ("eval.arith_task", "gsm8k", "config key 'eval.arith_task': 'gsm8k' is not in tasks"),
])
def test_rules_across_keys(path, value, message):
    """The steps' rules across keys, kept in the section classes: not in the generated schema."""
    doc = edited(path, value)
    msg = CASES.error(doc)
    assert msg.startswith(message), msg
    assert SCHEMA.is_valid(doc)
