"""methods/rabitqcache/config.py declares the `rabitqcache` section of the scale files: the three scale
files validate, bad values fail with one line naming the dotted key, the file loads without torch or
numpy (the workflow reads it at parse time), and the JSON schema generated from the declaration, run
by an independent implementation (`jsonschema`), agrees with `from_dict`."""
from __future__ import annotations

import pytest

from tests.config_cases import Cases, assert_loads_without_torch_or_numpy, edited

NAME = "rabitqcache"
CASES = Cases(NAME)
Config, SCHEMA, section = CASES.Config, CASES.schema, CASES.section


BAD = {  # case → (dotted key changed, new value or ... = deleted, dotted key the error names)
    "n_train 0": ("data.n_train", 0, "data.n_train"),
    "zipf_a < 0": ("data.zipf_a", -0.1, "data.zipf_a"),
    "topic_words < 0": ("data.topic_words", -1, "data.topic_words"),
    "val_texts 0": ("base.val_texts", 0, "base.val_texts"),
    "hub_id a number": ("base.hub_id", 3, "base.hub_id"),
    "unknown method": ("method.method", "sparse", "method.method"),
    "top_p 0": ("method.top_p", 0, "method.top_p"),
    "budget > 1": ("method.budget", 1.5, "method.budget"),
    "query_bits 8": ("method.query_bits", 8, "method.query_bits"),
    "query_bits true": ("method.query_bits", False, "method.query_bits"),
    "skip_layers < 0": ("method.skip_layers", -1, "method.skip_layers"),
    "prefill flash": ("method.prefill_impl", "flash", "method.prefill_impl"),
    "capture layer < 0": ("capture.layers", [1, -1], "capture.layers[1]"),
    "capture layers a string": ("capture.layers", "all", "capture.layers"),
    "one rotation": ("estimator.rotations", 1, "estimator.rotations"),
    "eps0 0": ("estimator.eps0", 0, "estimator.eps0"),
    "no top_ps": ("sparse.top_ps", [], "sparse.top_ps"),
    "repeated top_p": ("sparse.top_ps", [0.85, 0.85], "sparse.top_ps"),
    "top_ps item 0": ("sparse.top_ps", [0, 0.85], "sparse.top_ps[0]"),
    "ref_p > 1": ("sparse.ref_p", 1.5, "sparse.ref_p"),
    "lm_eval limit 0": ("lm_eval.limit", 0, "lm_eval.limit"),
    "lm_eval metadata a list": ("lm_eval.metadata", [], "lm_eval.metadata"),
    "lm_eval tasks a string": ("lm_eval.tasks", "ruler", "lm_eval.tasks"),
    "typo'd key": ("sparse.tail_step", 8, "sparse.tail_step"),
    "missing key": ("capture.n_steps", ..., "capture.n_steps"),
}


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_scale_sections_validate(scale):
    data, cfg = CASES.loaded(scale)  # the generated schema accepts it too
    assert cfg.method.method == data["method"]["method"] and cfg.capture.layers == data["capture"]["layers"]
    assert cfg.sparse.top_ps == [float(p) for p in data["sparse"]["top_ps"]]
    assert cfg.base.model.d_model == data["base"]["model"]["d_model"]


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_value_is_one_line_naming_the_key(case):
    key, value, named = BAD[case]
    CASES.assert_rejected(CASES.edited(key, value), f"'{NAME}.{named}'")


def test_loads_without_torch_or_numpy():
    assert_loads_without_torch_or_numpy(NAME)


CROSS = {  # the __post_init__ checks that relate keys: case → (dotted key changed, new value, key the error names)
    "more needles than names": ("data.train_max_needles", 27, "data.train_max_needles"),
    "min needles > max": ("data.min_needles", 4, "data.max_needles"),
    "eval prompts too short": ("data.eval_len", 10, "data.eval_len"),
    "vocabulary past the syllable words": ("data.vocab_words", 4097, "data.vocab_words"),
    "quest page not dividing I": ("method.quest_page", 24, "method.quest_page"),
    "ref_p not a top_p": ("sparse.ref_p", 0.9, "sparse.ref_p"),
}


@pytest.mark.parametrize("case", sorted(CROSS))
def test_cross_key_check_is_one_line_naming_the_keys(case):
    key, value, named = CROSS[case]
    msg = CASES.error(edited(section("tiny"), key, value))
    assert "\n" not in msg and f"'{named}'" in msg, msg


def test_word_list_sizes_match_the_generator():
    from methods.rabitqcache import config, data

    assert len(set(data.NAMES)) == config.N_NAMES
    assert len(data._SYL) ** 3 == len(set(data.filler_vocab(10 ** 6))) == config.MAX_VOCAB_WORDS
