"""methods/dibjudge/config.py declares the `dibjudge` section of the scale files: the three scale files
validate, bad values fail with one line naming the dotted key, the file loads without torch or numpy
(the workflow reads it at parse time), and the JSON schema generated from the declaration, run by an
independent implementation (`jsonschema`), agrees with `from_dict`."""
from __future__ import annotations

import pytest

from tests.config_cases import Cases, assert_loads_without_torch_or_numpy

NAME = "dibjudge"
CASES = Cases(NAME)
Config, SCHEMA, section = CASES.Config, CASES.schema, CASES.section


BAD = {  # case → (dotted key changed, new value or ... = deleted, dotted key the error names)
    "n_train without L2": ("data.n_train.L2", ..., "data.n_train.L2"),
    "n_train with L3": ("data.n_train.L3", 10, "data.n_train.L3"),
    "n_train EN 0": ("data.n_train.EN", 0, "data.n_train.EN"),
    "synonyms L1 0": ("data.n_synonyms.L1", 0, "data.n_synonyms.L1"),
    "synonyms for EN": ("data.n_synonyms.EN", 1, "data.n_synonyms.EN"),
    "mt_better_frac > 1": ("data.mt_better_frac", 1.5, "data.mt_better_frac"),
    "omit_frac < 0": ("data.omit_frac", -0.1, "data.omit_frac"),
    "n_colours 0": ("data.n_colours", 0, "data.n_colours"),
    "n_colours 2": ("data.n_colours", 2, "data.n_colours"),      # no wrong value beyond the 2 context facts
    "max_count 2": ("data.max_count", 2, "data.max_count"),
    "vq_decay > 1": ("train.model.vq_decay", 1.5, "train.model.vq_decay"),
    "d_z 0": ("train.model.d_z", 0, "train.model.d_z"),
    "vq_beta < 0": ("train.model.vq_beta", -1, "train.model.vq_beta"),
    "lr < 0": ("train.lr", -1e-3, "train.lr"),
    "warmup_frac > 1": ("train.warmup_frac", 2, "train.warmup_frac"),
    "no seeds": ("train.seeds", [], "train.seeds"),
    "queue 0": ("train.queue", 0, "train.queue"),
    "eval_data a string": ("train.hub.eval_data", "x", "train.hub.eval_data"),
    "judge a number": ("train.hub.judge", 1, "train.hub.judge"),
    "no variants": ("variants", [], "variants"),
    "unknown variant": ("variants", ["sft", "dib"], "variants[1]"),
    "report lang EN": ("report.lang", "EN", "report.lang"),
    "report full sft": ("report.full", "sft", "report.full"),
    "typo'd key": ("train.lam_bais", 0.5, "train.lam_bais"),
    "missing key": ("data.ttr_bins", ..., "data.ttr_bins"),
}


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_scale_sections_validate(scale):
    data, cfg = CASES.loaded(scale)  # the generated schema accepts it too
    assert cfg.data.n_train.L2 == data["data"]["n_train"]["L2"]
    assert cfg.data.n_synonyms.L1 == data["data"]["n_synonyms"]["L1"]
    assert cfg.train.model.d_z == data["train"]["model"]["d_z"] and cfg.report.full == data["report"]["full"]


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_value_is_one_line_naming_the_key(case):
    key, value, named = BAD[case]
    CASES.assert_rejected(CASES.edited(key, value), f"'{NAME}.{named}'")


def test_loads_without_torch_or_numpy():
    assert_loads_without_torch_or_numpy(NAME)


def test_languages_match_the_generator():
    import dataclasses

    from methods.dibjudge import config, synth_lang

    assert tuple(f.name for f in dataclasses.fields(config.NTrain)) == synth_lang.LANGS
    assert tuple(f.name for f in dataclasses.fields(config.NSynonyms)) == synth_lang.LANGS[1:]
