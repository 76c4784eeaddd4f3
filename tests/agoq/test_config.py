"""The `agoq` section declared in methods/agoq/config.py, under the checks of tests/config_cases.py:
the three scale files validate; bad values fail in one line naming the dotted key, and the generated
JSON schema refuses them too; the rules across keys are the section class's alone."""
import pytest

from methods.core.config import from_dict
from methods.core.models import ModelConfig
from methods.core.train import TrainConfig
from tests.config_cases import DELETE, Cases, bad_ids

PAPER = "agoq"
CASES = Cases(PAPER)
Config, SECTIONS, SCHEMA, edited = CASES.Config, CASES.sections, CASES.schema, CASES.edited


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_scale_sections_validate(scale):
    sec, cfg = CASES.loaded(scale)
    assert isinstance(cfg.run.model, ModelConfig) and isinstance(cfg.run.train, TrainConfig)
    assert [v.name for v in cfg.variants] == [v["name"] for v in sec["variants"]]
    for v, raw in zip(cfg.variants, sec["variants"]):
        bits, overrides = v.policy()  # laaq.BitPolicy's arguments: the scale file's values
        assert bits == raw["bits"] and overrides == raw["stage_overrides"]


BAD = [  # (dotted key, value, the one-line message)
    ("data.arith_fraction", 2, "config key 'agoq.data.arith_fraction': 2.0 is greater than the maximum of 1"),
    ("data.train_chars", 0, "config key 'agoq.data.train_chars': 0 is less than the minimum of 1"),
    ("run.world_size", 1, "config key 'agoq.run.world_size': 1 is less than the minimum of 2"),
    ("run.world_size", "two", "config key 'agoq.run.world_size': expected int, got 'two'"),
    ("run.hub_id", 7, "config key 'agoq.run.hub_id': expected str, got 7"),
    ("run.grad_error_every", -1, "config key 'agoq.run.grad_error_every': -1 is less than the minimum of 0"),
    ("run.stochastic", "no", "config key 'agoq.run.stochastic': expected bool, got 'no'"),
    ("variants", [], "config key 'agoq.variants': [] has fewer than 1 items"),
    ("variants[0].name", "FP", "config key 'agoq.variants[0].name': 'FP' does not match '^[a-z0-9_]+$'"),
    ("variants[0].bits.norm", 3, "config key 'agoq.variants[0].bits.norm': 3 is not one of [2, 4, 8, 16]"),
    ("variants[0].bits.head", DELETE, "missing config key 'agoq.variants[0].bits.head'"),
    ("variants[0].bits.embed", 8, "unknown config key 'agoq.variants[0].bits.embed'"),
    ("variants[0].stage_overrides", [{"stage": 0, "tag": "attn", "bits": 4}],
     "config key 'agoq.variants[0].stage_overrides[0].tag': 'attn' is not one of"),
    ("variants[0].stage_overrides", [{"stage": -1, "tag": "head", "bits": 4}],
     "config key 'agoq.variants[0].stage_overrides[0].stage': -1 is less than the minimum of 0"),
    ("variants[0].stage_overrides", [{"stage": 0, "tag": "head"}],
     "missing config key 'agoq.variants[0].stage_overrides[0].bits'"),
    ("variants[0].allreduce", "int8", "config key 'agoq.variants[0].allreduce': 'int8' is not one of ['fp32', 'quangrad']"),
    ("train_variants", ["fp", "fp"], "config key 'agoq.train_variants': ['fp', 'fp'] has repeated items"),
    ("probe.workers", [1, 4], "config key 'agoq.probe.workers[0]': 1 is less than the minimum of 2"),
    ("probe.workers", [], "config key 'agoq.probe.workers': [] has fewer than 1 items"),
    ("analysis.claim_stages", 1, "config key 'agoq.analysis.claim_stages': 1 is less than the minimum of 2"),
    ("analysis.scale_overhead_bits", -0.25, "config key 'agoq.analysis.scale_overhead_bits': -0.25 is less than"),
]


@pytest.mark.parametrize("path,value,message", BAD, ids=bad_ids(BAD))
def test_bad_value_is_one_line_naming_the_key(path, value, message):
    CASES.assert_rejected(edited(path, value), message)


@pytest.mark.parametrize("path,value,message", [
    ("run.train.batch_size", 15, "config key 'run.train.batch_size' (15) must be a multiple of 'run.world_size' (2)"),
    ("run.loss_window", 10_000, "config key 'run.loss_window' must be in [1, run.train.steps], got 10000"),
    ("analysis.claim_stages", 3, "config key 'analysis.claim_stages' (3) must be in pp_stages"),
])
def test_rules_across_keys(path, value, message):
    """The steps' rules across keys, kept in the section classes: not in the generated schema."""
    doc = edited(path, value)
    assert CASES.error(doc) == message
    assert SCHEMA.is_valid(doc)


def test_accepted_edge_values_agree_with_the_generated_schema():
    CASES.assert_accepted([("run.hub_id", "meta-llama/Llama-3.1-8B"), ("variants[0].bits.norm", 2),
                           ("variants[0].stage_overrides", [{"stage": 0, "tag": "head", "bits": 16}]),
                           ("data.arith_fraction", 0), ("probe.workers", [2]), ("run.grad_error_every", 0)])


def test_steps_read_the_config_classes():
    """One declaration: the steps' config classes are (or extend) the ones of config.py."""
    from methods.agoq import analysis, data, laaq, probe, run

    cfg = from_dict(Config, SECTIONS["tiny"], PAPER)
    assert data.DataConfig is type(cfg.data) and probe.ProbeConfig is type(cfg.probe)
    assert analysis.AnalysisConfig is type(cfg.analysis) and run.Variant is type(cfg.variants[0])
    assert issubclass(run.RunConfig, type(cfg.run))
    assert laaq.TAGS == tuple(cfg.variants[0].policy()[0])
