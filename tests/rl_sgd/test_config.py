"""methods/rl_sgd/config.py declares the `rl_sgd` section of the scale files: the three scale files
validate, bad values fail with one line naming the dotted key, the file loads without torch or numpy
(the workflow reads it at parse time), and the JSON schema generated from the declaration, run by an
independent implementation (`jsonschema`), agrees with `from_dict`."""
from __future__ import annotations

import pytest

from tests.config_cases import Cases, assert_loads_without_torch_or_numpy, edited

NAME = "rl_sgd"
CASES = Cases(NAME)
Config, SCHEMA, section = CASES.Config, CASES.schema, CASES.section


BAD = {  # case → (dotted key changed, new value or ... = deleted, dotted key the error names)
    "one width": ("widths", [64], "widths"),
    "repeated width": ("widths", [64, 64], "widths"),
    "width 0": ("widths", [0, 64], "widths[0]"),
    "seed < 0": ("seeds", [-1], "seeds[0]"),
    "repeated seed": ("seeds", [0, 0], "seeds"),
    "empty sgd grid": ("grid.sgd", [], "grid.sgd"),
    "adamw lr 0": ("grid.adamw", [0], "grid.adamw[0]"),
    "ablation lr 0": ("ablation.sgd_mom", 0, "ablation.sgd_mom"),
    "max_operand 1": ("prompts.max_operand", 1, "prompts.max_operand"),
    "mul_max_a 101": ("prompts.mul_max_a", 101, "prompts.mul_max_a"),
    "one warm-start length": ("warmstart.steps", [100], "warmstart.steps"),
    "warm-start steps < 0": ("warmstart.steps", [100, -1], "warmstart.steps[1]"),
    "max_seq_len 11": ("warmstart.arch.max_seq_len", 11, "warmstart.arch.max_seq_len"),
    "ff_mult 0": ("warmstart.arch.ff_mult", 0, "warmstart.arch.ff_mult"),
    "group of 1": ("grpo.group_size", 1, "grpo.group_size"),
    "loss_norm sum": ("grpo.loss_norm", "sum", "grpo.loss_norm"),
    "one Adam beta": ("grpo.betas", [0.9], "grpo.betas"),
    "Adam beta 1": ("grpo.betas", [0.9, 1.0], "grpo.betas[1]"),
    "momentum 1": ("grpo.momentum", 1.0, "grpo.momentum"),
    "clip_lo < 0": ("grpo.clip_lo", -0.1, "grpo.clip_lo"),
    "rank a string": ("sparsity.rank", "yes", "sparsity.rank"),
    "sft lr 0": ("sft.lrs.sgd", 0, "sft.lrs.sgd"),
    "sft lr missing": ("sft.lrs.sgd_mom", ..., "sft.lrs.sgd_mom"),
    "trl width 3": ("trl_check.width", 3, "trl_check.width"),
    "trl tol 0": ("trl_check.tol", 0, "trl_check.tol"),
    "match_tol < 0": ("analysis.match_tol", -0.01, "analysis.match_tol"),
    "models a string": ("hub.models", "Qwen", "hub.models"),
    "typo'd key": ("grpo.log_evry", 10, "grpo.log_evry"),
    "missing key": ("trl_check.seed", ..., "trl_check.seed"),
}


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_scale_sections_validate(scale):
    data, cfg = CASES.loaded(scale)  # the generated schema accepts it too
    assert cfg.grpo.loss_norm == data["grpo"]["loss_norm"]
    assert cfg.sft.lrs.adamw == data["sft"]["lrs"]["adamw"]
    if scale == "paper":  # the hub path: hub models are the bases, no tiny-only sections
        assert cfg.hub.models == data["hub"]["models"] and cfg.hub.rl_dataset and cfg.hub.eval_datasets
        assert cfg.widths is cfg.prompts is cfg.warmstart is None
        assert cfg.data.seed == data["data"]["seed"] and cfg.eval.max_new == data["eval"]["max_new"]
    else:
        assert cfg.widths == data["widths"] and not cfg.hub.models and cfg.data is cfg.eval is None
        assert cfg.warmstart.arch.n_layers == data["warmstart"]["arch"]["n_layers"]


@pytest.mark.parametrize("case", [
    ("tiny", "hub.models", ["Qwen/Qwen2.5-Math-1.5B"], "describe the tiny path"),
    ("tiny", "warmstart", ..., "needed when 'hub.models' is empty"),
    ("paper", "data", ..., "'data'"),
    ("paper", "hub.eval_datasets", [], "hub.eval_datasets"),
    ("paper", "hub.rl_dataset", None, "hub.rl_dataset"),
])
def test_the_two_paths_do_not_mix(case):
    """Tiny-only sections (widths, prompts, warmstart) are refused beside hub models, and the hub
    path's sections are needed with them (and refused without): one line naming the keys."""
    scale, key, value, named = case
    msg = CASES.error(edited(section(scale), key, value))
    assert "\n" not in msg and named in msg, msg


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_value_is_one_line_naming_the_key(case):
    key, value, named = BAD[case]
    CASES.assert_rejected(CASES.edited(key, value), f"'{NAME}.{named}'")


def test_loads_without_torch_or_numpy():
    assert_loads_without_torch_or_numpy(NAME)


def test_one_warm_start_length_per_width():
    data = section("tiny")
    data = edited(data, "widths", [*data["widths"], max(data["widths"]) * 2])
    msg = CASES.error(data)
    assert "\n" not in msg and "'warmstart.steps'" in msg, msg
