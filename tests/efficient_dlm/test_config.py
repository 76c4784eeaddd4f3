"""methods/efficient_dlm/config.py declares the `efficient_dlm` section of the scale files: the three
scale files validate, bad values fail with one line naming the dotted key, the file loads without
torch or numpy (the workflow reads it at parse time), and the JSON schema generated from the
declaration, run by an independent implementation (`jsonschema`), agrees with `from_dict`."""
from __future__ import annotations

import pytest

from tests.config_cases import Cases, assert_loads_without_torch_or_numpy, edited

NAME = "efficient_dlm"
CASES = Cases(NAME)
Config, SCHEMA, section = CASES.Config, CASES.schema, CASES.section


BAD = {  # case → (dotted key changed, new value or ... = deleted, dotted key the error names)
    "no variants": ("variants", [], "variants"),
    "unknown variant": ("variants", ["fullbidir", "ar"], "variants[1]"),
    "corpus a number": ("data.corpus", 3, "data.corpus"),
    "repeated task": ("data.tasks", ["add", "add"], "data.tasks"),
    "unknown task": ("data.tasks", ["mul"], "data.tasks[0]"),
    "no tasks": ("data.tasks", [], "data.tasks"),
    "mix of 1": ("data.mix", [1.0], "data.mix"),
    "mix of 5": ("data.mix", [1, 1, 1, 1, 1], "data.mix"),
    "mix weight < 0": ("data.mix", [1, -1], "data.mix[1]"),
    "no rev_chars": ("data.rev_chars", "", "data.rev_chars"),
    "n_train_docs 0": ("data.n_train_docs", 0, "data.n_train_docs"),
    "ar seq_len 0": ("ar.seq_len", 0, "ar.seq_len"),
    "ar hub_id a number": ("ar.hub_id", 1, "ar.hub_id"),
    "beta < 0": ("convert.beta", -1, "convert.beta"),
    "eps 1": ("convert.eps", 1, "convert.eps"),
    "eps 0": ("convert.eps", 0, "convert.eps"),
    "clean_intra full": ("convert.clean_intra", "full", "convert.clean_intra"),
    "no thresholds": ("eval.thresholds", [], "eval.thresholds"),
    "threshold > 1": ("eval.thresholds", [0.9, 1.1], "eval.thresholds[1]"),
    "eval block 0": ("eval.block", 0, "eval.block"),
    "claim threshold a string": ("analysis.claim_threshold", "0.9", "analysis.claim_threshold"),
    "train_tokens a float": ("hub.train_tokens", 1.5, "hub.train_tokens"),
    "typo'd key": ("eval.max_nwe", 24, "eval.max_nwe"),
    "missing key": ("convert.clean_intra", ..., "convert.clean_intra"),
}


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_scale_sections_validate(scale):
    data, cfg = CASES.loaded(scale)  # the generated schema accepts it too
    assert cfg.variants == data["variants"] and cfg.data.tasks == data["data"]["tasks"]
    assert cfg.convert.beta == data["convert"]["beta"] and cfg.ar.train.steps == data["ar"]["train"]["steps"]


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_value_is_one_line_naming_the_key(case):
    key, value, named = BAD[case]
    CASES.assert_rejected(CASES.edited(key, value), f"'{NAME}.{named}'")


def test_loads_without_torch_or_numpy():
    assert_loads_without_torch_or_numpy(NAME)


CROSS = {  # the __post_init__ checks that relate keys: case → (dotted key changed, new value, key the error names)
    "mix not one weight per task + pcfg": ("data.mix", [1.0, 1.0, 1.0, 1.0], "data.mix"),
    "no weight on the tasks": ("data.mix", [0.0, 0.0, 1.0], "data.mix"),
    "rev_min > rev_max": ("data.rev_min", 99, "data.rev_min"),
    "seq_len not whole blocks": ("convert.seq_len", 60, "convert.seq_len"),
}


@pytest.mark.parametrize("case", sorted(CROSS))
def test_cross_key_check_is_one_line_naming_the_keys(case):
    key, value, named = CROSS[case]
    data = section("tiny")
    assert len(data["data"]["tasks"]) == 2 and data["convert"]["block"] == 8, "the cases assume these"
    msg = CASES.error(edited(data, key, value))
    assert "\n" not in msg and f"'{named}'" in msg, msg


PAPER_CROSS = {  # paper-scale hub checks: case → (dotted key changed, new value, key the error names)
    "AR base not one of the paper's bases": ("ar.hub_id", "Qwen/Qwen3-14B", "ar.hub_id"),
}


@pytest.mark.parametrize("case", sorted(PAPER_CROSS))
def test_paper_hub_checks_are_one_line_naming_the_key(case):
    key, value, named = PAPER_CROSS[case]
    msg = CASES.error(edited(section("paper"), key, value))
    assert "\n" not in msg and f"'{named}'" in msg, msg
