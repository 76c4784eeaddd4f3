"""methods/pid/config.py declares the `pid` section of the scale files: the three scale files validate,
bad values fail with one line naming the dotted key, the file loads without torch or numpy (the
workflow reads it at parse time), and the JSON schema generated from the declaration, run by an
independent implementation (`jsonschema`), agrees with `from_dict`. The steps use the declared
classes."""
from __future__ import annotations

import sys

import pytest

from methods.core.config import from_dict
from tests.config_cases import Cases, assert_loads_without_torch_or_numpy

NAME = "pid"
CASES = Cases(NAME)
Config, SCHEMA, section = CASES.Config, CASES.schema, CASES.section


BAD = {  # case → (dotted key changed, new value or ... = deleted, dotted key the error names)
    "mix named omni": ("train.mixes.omni", [1, 1, 1, 1], "train.mixes.omni"),
    "mix key pattern": ("train.mixes.Syn", [1, 1, 1, 1], "train.mixes.Syn"),
    "mix of 3 weights": ("train.mixes.balanced", [1, 1, 1], "train.mixes.balanced"),
    "mix weight negative": ("train.mixes.balanced", [1, -1, 1, 1], "train.mixes.balanced[1]"),
    "no mixes": ("train.mixes", {}, "train.mixes"),
    "checkpoint at 0": ("train.checkpoints.early", 0, "train.checkpoints.early"),
    "checkpoint past 1": ("train.checkpoints.final", 1.5, "train.checkpoints.final"),
    "mask_prob > 1": ("train.mask_prob", 1.2, "train.mask_prob"),
    "vision_only_frac < 0": ("data.vision_only_frac", -0.1, "data.vision_only_frac"),
    "n_train 0": ("data.n_train", 0, "data.n_train"),
    "sinkhorn_tol 0": ("pid.sinkhorn_tol", 0, "pid.sinkhorn_tol"),
    "family_configs a string": ("pid.family_configs", "balanced_final", "pid.family_configs"),
    "reweight base pattern": ("reweight.base", "balanced", "reweight.base"),
    "no reweight seeds": ("reweight.seeds", [], "reweight.seeds"),
    "tau > 1": ("reweight.tau", 2, "reweight.tau"),
    "lora_base a number": ("hub.lora_base", 3, "hub.lora_base"),
    "min_configs 0": ("analysis.min_configs", 0, "analysis.min_configs"),
    "typo'd key": ("analysis.profile_confg", "x", "analysis.profile_confg"),
    "missing key": ("pid.epochs", ..., "pid.epochs"),
}


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_scale_sections_validate(scale):
    data, cfg = CASES.loaded(scale)  # the generated schema accepts it too
    assert set(cfg.train.mixes) == set(data["train"]["mixes"]) and "omni" not in cfg.train.mixes
    assert all(isinstance(w, float) for ws in cfg.train.mixes.values() for w in ws)
    assert cfg.reweight.seeds == data["reweight"]["seeds"] and cfg.hub.lora_base == data["hub"]["lora_base"]


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_value_is_one_line_naming_the_key(case):
    key, value, named = BAD[case]
    CASES.assert_rejected(CASES.edited(key, value), f"'{NAME}.{named}'")


def test_steps_use_the_declared_classes():
    from methods.pid import analysis, run, synth

    mod = sys.modules[Config.__module__]
    assert (run.TrainConfig, run.PIDConfig, run.ReweightConfig, analysis.AnalysisConfig) == \
        (mod.TrainConfig, mod.PIDConfig, mod.ReweightConfig, mod.AnalysisConfig)
    # the data step's config is the data section plus the hub section
    data = section("tiny")
    cfg = from_dict(synth.DataConfig, {**data["data"], "hub": data["hub"]}, "data")
    assert isinstance(cfg, mod.Data) and cfg.hub == data["hub"]


def test_loads_without_torch_or_numpy():
    assert_loads_without_torch_or_numpy(NAME)
