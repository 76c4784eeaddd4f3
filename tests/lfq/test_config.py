"""The `lfq` section declared in methods/lfq/config.py, under the checks of tests/config_cases.py:
the three scale files validate; bad values fail in one line naming the dotted key, and the generated
JSON schema refuses them too; the rules across keys are the section class's alone."""
import pytest

from methods.core.models import ModelConfig
from methods.core.train import TrainConfig
from tests.config_cases import DELETE, Cases, bad_ids

PAPER = "lfq"
CASES = Cases(PAPER)
Config, SECTIONS, SCHEMA, edited = CASES.Config, CASES.sections, CASES.schema, CASES.edited


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_scale_sections_validate(scale):
    sec, cfg = CASES.loaded(scale)
    assert isinstance(cfg.base.model, ModelConfig) and isinstance(cfg.base.train, TrainConfig)
    assert [(s.bits, s.group_size) for s in cfg.settings] == [(s["bits"], s["group_size"]) for s in sec["settings"]]
    assert cfg.variants == sec["variants"]


BAD = [  # (dotted key, value, the one-line message)
    ("data.sum_fraction", 0, "config key 'lfq.data.sum_fraction': 0.0 must be greater than 0"),
    ("data.n_eval", 101, "config key 'lfq.data.n_eval': 101 is greater than the maximum of 100"),
    ("data.n_eval", 0, "config key 'lfq.data.n_eval': 0 is less than the minimum of 1"),
    ("base.hub_id", False, "config key 'lfq.base.hub_id': expected str, got False"),
    ("base.val_batches", 0, "config key 'lfq.base.val_batches': 0 is less than the minimum of 1"),
    ("calib.subset", 1, "config key 'lfq.calib.subset': expected str, got 1"),
    ("calib.n_samples", DELETE, "missing config key 'lfq.calib.n_samples'"),
    ("settings", [], "config key 'lfq.settings': [] has fewer than 1 items"),
    ("settings", [{"bits": 5, "group_size": 32}], "config key 'lfq.settings[0].bits': 5 is not one of [2, 3, 4, 8]"),
    ("settings", [{"bits": 4, "group_size": 0}], "config key 'lfq.settings[0].group_size': 0 is less than the minimum"),
    ("settings", [{"bits": 4}], "missing config key 'lfq.settings[0].group_size'"),
    ("variants", ["rtn", "awq"], "config key 'lfq.variants[1]': 'awq' does not match"),
    ("variants", ["rtn", "omni-mse"], "config key 'lfq.variants[1]': 'omni-mse' does not match"),
    ("variants", ["rtn", "rtn"], "config key 'lfq.variants': ['rtn', 'rtn'] has repeated items"),
    ("variants", [], "config key 'lfq.variants': [] has fewer than 1 items"),
    ("quant.lr", 0, "config key 'lfq.quant.lr': 0.0 must be greater than 0"),
    ("quant.gptq_percdamp", -0.01, "config key 'lfq.quant.gptq_percdamp': -0.01 is less than the minimum of 0"),
    ("quant.bits", 3, "unknown config key 'lfq.quant.bits'"),
    ("eval.buckets", [], "config key 'lfq.eval.buckets': [] has fewer than 1 items"),
    ("eval.buckets", [10, 0], "config key 'lfq.eval.buckets[1]': 0 is less than the minimum of 1"),
    ("eval.lm_eval_limit", 0, "config key 'lfq.eval.lm_eval_limit': 0 is less than the minimum of 1"),
    ("eval.lm_eval_tasks", [1], "config key 'lfq.eval.lm_eval_tasks[0]': expected str, got 1"),
    ("analysis.lfq_variant", DELETE, "missing config key 'lfq.analysis.lfq_variant'"),
]


@pytest.mark.parametrize("path,value,message", BAD, ids=bad_ids(BAD))
def test_bad_value_is_one_line_naming_the_key(path, value, message):
    CASES.assert_rejected(edited(path, value), message)


def test_accepted_edge_values_agree_with_the_generated_schema():
    CASES.assert_accepted([("data.sum_fraction", 1), ("data.n_eval", 100), ("variants", ["omni-headmse", "gptq"]),
                           ("settings", [{"bits": 8, "group_size": 1}]), ("eval.lm_eval_limit", None),
                           ("calib.subset", "wikitext-2-raw-v1"), ("quant.gptq_percdamp", 0)])


@pytest.mark.parametrize("path,value,message", [
    ("base.seq_len", 4096, "config key 'base.seq_len' 4096 exceeds base.model.max_seq_len"),
    ("eval.buckets", [20, 10], "config key 'eval.buckets' must be an increasing list, got [20, 10]"),
    ("eval.lm_eval_tasks", ["lfq_running_sum", "wikitext"], "config key 'eval.lm_eval_tasks': 'lfq_running_sum' runs alone"),
])
def test_rules_across_keys(path, value, message):
    """The steps' rules across keys, kept in the section classes: not in the generated schema."""
    doc = edited(path, value)
    msg = CASES.error(doc)
    assert msg.startswith(message), msg
    assert SCHEMA.is_valid(doc)
