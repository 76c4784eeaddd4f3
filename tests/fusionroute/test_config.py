"""The `fusionroute:` section declared as dataclasses (methods/fusionroute/config.py): the three scale
files validate, bad values give one-line errors naming the dotted key, and the JSON schema that
`json_schema(Config)` generates agrees with `from_dict` under `jsonschema` (an independent
implementation) on the valid sections and on the bad inputs."""
from __future__ import annotations

import pytest

from methods.core.config import from_dict, section_class
from methods.fusionroute.config import Config, EvalConfig, Hub
from tests.config_cases import DELETE, ROOT, SCALES, Cases

CASES = Cases("fusionroute", Config)
section, edited = CASES.section, CASES.edited


BAD = [  # (dotted path in the tiny section, new value, the whole one-line error)
    ("data.home_frac", 1.1, "config key 'fusionroute.data.home_frac': 1.1 is greater than the maximum of 1"),
    ("data.add_digits", 0, "config key 'fusionroute.data.add_digits': 0 is less than the minimum of 1"),
    ("expert.init_seed", "0", "config key 'fusionroute.expert.init_seed': expected int, got '0'"),
    ("expert.model", 3, "config 'fusionroute.expert.model': expected a mapping, got 3"),
    ("router.max_len", 0, "config key 'fusionroute.router.max_len': 0 is less than the minimum of 1"),
    ("router.lambda_route", -1, "config key 'fusionroute.router.lambda_route': -1.0 is less than the minimum of 0"),
    ("router.informative_only", "yes",
     "config key 'fusionroute.router.informative_only': expected bool, got 'yes'"),
    ("cdpo.beta", 0, "config key 'fusionroute.cdpo.beta': 0.0 must be greater than 0"),
    ("cdpo.n_prefs", 0, "config key 'fusionroute.cdpo.n_prefs': 0 is less than the minimum of 1"),
    ("eval.cost_repeats", 0, "config key 'fusionroute.eval.cost_repeats': 0 is less than the minimum of 1"),
    ("seeds", [], "config key 'fusionroute.seeds': [] has fewer than 1 items"),
    ("seeds", [0, 0], "config key 'fusionroute.seeds': [0, 0] has repeated items"),
    ("seeds", [-1], "config key 'fusionroute.seeds[0]': -1 is less than the minimum of 0"),
    ("hub.experts", {"add": None, "rev": None},
     "config key 'fusionroute.hub.experts': {'add': None, 'rev': None} has fewer than 3 entries"),
    ("hub.experts", {"add": None, "rev": None, "brk": None, "comp": None},
     "config key 'fusionroute.hub.experts.comp': 'comp' is not one of ['add', 'rev', 'brk']"),
    ("hub.experts.add", 3, "config key 'fusionroute.hub.experts.add': expected str, got 3"),
    ("hub.datasets", [1], "config 'fusionroute.hub.datasets[0]': expected a mapping, got 1"),
    ("hub.datasets", [{"id": "openai/gsm8k", "subset": "main", "split": "train", "role": "math"}],
     "config key 'fusionroute.hub.datasets[0].role': 'math' is not one of ['add', 'rev', 'brk', 'prefs']"),
    ("hub.datasets", [{"id": "openai/gsm8k", "subset": "main", "role": "add"}],
     "missing config key 'fusionroute.hub.datasets[0].split'"),
    ("hub", DELETE, "missing config key 'fusionroute.hub'"),
]


@pytest.mark.parametrize("scale", SCALES)
def test_scale_sections_validate(scale):
    cfg = from_dict(Config, section(scale), "fusionroute")
    assert isinstance(cfg.eval, EvalConfig) and isinstance(cfg.hub, Hub)
    assert set(cfg.hub.experts) == {"add", "rev", "brk"}
    assert isinstance(cfg.router.lambda_route, float) and cfg.cdpo.beta > 0


def test_section_class_is_this_config():
    assert section_class("fusionroute", ROOT) is Config


@pytest.mark.parametrize("path,value,message", BAD, ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(BAD)])
def test_bad_values_give_one_line_errors(path, value, message):
    assert CASES.error(edited(path, value)) == message


def test_generated_schema_agrees_with_from_dict():
    CASES.assert_schema_agrees(BAD)


def test_a_step_without_hub_is_a_one_line_error(capsys, tmp_path):
    """The steps read the `hub` section beside their own (the workflow passes it): without it, a
    one-line error naming the key, exit 2."""
    import json

    from methods.core import cli
    from methods.fusionroute.__main__ import build_parser

    argv = ["expert", "--config", json.dumps(section("tiny")["expert"]), "--domain", "add", "--seed", "0",
            "--data", str(tmp_path / "data"), "--out", str(tmp_path / "out")]
    assert cli.main(build_parser(), argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["fusionroute expert: error: missing config key 'hub' (the fusionroute.hub section, "
                   "passed beside the step's)"]
