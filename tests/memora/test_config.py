"""The `memora:` section declared as dataclasses (methods/memora/config.py): the three scale
files validate, bad values give one-line errors naming the dotted key, and the JSON schema that
`json_schema(Config)` generates agrees with `from_dict` under `jsonschema` (an independent
implementation) on the valid sections and on the bad inputs."""
from __future__ import annotations

import pytest

from methods.core.config import from_dict, section_class
from methods.memora.config import Config, SynthConfig
from tests.config_cases import DELETE, ROOT, SCALES, Cases

CASES = Cases("memora", Config)
section, edited = CASES.section, CASES.edited


BAD = [  # (dotted path in the tiny section, new value, the whole one-line error)
    ("data.source", "hub",
     "config key 'memora.data.source': 'hub' is not one of ['generated', 'locomo', 'longmemeval']"),
    ("data.sha256", "ABC", "config key 'memora.data.sha256': 'ABC' does not match '^[0-9a-f]{64}$'"),
    ("data.limit", 0, "config key 'memora.data.limit': 0 is less than the minimum of 1"),
    ("data.synth.n_sessions", 2, "config key 'memora.data.synth.n_sessions': 2 is less than the minimum of 3"),
    ("data.synth.filler_fraction", 1.0, "config key 'memora.data.synth.filler_fraction': 1.0 must be less than 1"),
    ("data.synth.n_events", 5, "config key 'memora.data.synth.n_events': 5 is greater than the maximum of 4"),
    ("data.synth.start_date", "1 May 2023",
     "config key 'memora.data.synth.start_date': '1 May 2023' does not match '^[0-9]{4}-[0-9]{2}-[0-9]{2}$'"),
    ("embedder", "openai", "config key 'memora.embedder': 'openai' is not one of ['minilm', 'hash']"),
    ("llm.max_new_tokens", 0, "config key 'memora.llm.max_new_tokens': 0 is less than the minimum of 1"),
    ("llm.kind", DELETE, "missing config key 'memora.llm.kind'"),
    ("build.gamma", 1.5, "config key 'memora.build.gamma': 1.5 is greater than the maximum of 1"),
    ("policy.budget", -1, "config key 'memora.policy.budget': -1 is less than the minimum of 0"),
    ("policy.topk", 3, "unknown config key 'memora.policy.topk' (allowed: budget, expand, k)"),
    ("runs", [], "config key 'memora.runs': [] has fewer than 1 items"),
    ("runs", ["rag:semantic", "memora:greedy"],
     "config key 'memora.runs[1]': 'memora:greedy' does not match "
     "'^(rag|factstore|memora|memora_noanchor):(semantic|policy)$'"),
]


@pytest.mark.parametrize("scale", SCALES)
def test_scale_sections_validate(scale):
    cfg = from_dict(Config, section(scale), "memora")
    assert isinstance(cfg.data.synth, SynthConfig) and cfg.data.synth.start_date == "2023-05-01"
    assert cfg.build.gamma == 0.7 and (cfg.policy.k, cfg.policy.expand, cfg.policy.budget) == (5, 2, 4)
    assert len(cfg.runs) == 6


def test_section_class_is_this_config():
    assert section_class("memora", ROOT) is Config


@pytest.mark.parametrize("path,value,message", BAD, ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(BAD)])
def test_bad_values_give_one_line_errors(path, value, message):
    assert CASES.error(edited(path, value)) == message


def test_generated_schema_agrees_with_from_dict():
    CASES.assert_schema_agrees(BAD)
