"""The `dag_moe` section declared in methods/dag_moe/config.py, under the checks of tests/config_cases.py:
the three scale files validate; bad values fail in one line naming the dotted key, and the generated
JSON schema refuses them too; the rules across keys are the section class's alone."""
import pytest

from methods.core.config import from_dict
from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig
from tests.config_cases import DELETE, Cases, bad_ids

PAPER = "dag_moe"
CASES = Cases(PAPER)
Config, SECTIONS, SCHEMA, edited = CASES.Config, CASES.sections, CASES.schema, CASES.edited


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_scale_sections_validate(scale):
    sec, cfg = CASES.loaded(scale)
    assert isinstance(cfg.lm.model, ModelConfig) and isinstance(cfg.compose.train, TrainConfig)
    assert set(cfg.archs) == set(sec["archs"]) and all(a.aggregation in ("sum", "dag") for a in cfg.archs.values())
    assert cfg.data.mix_c1 + cfg.data.mix_c2 + cfg.data.mix_c3 == pytest.approx(1)


BAD = [  # (dotted key, value, the one-line message)
    ("archs", {}, "config key 'dag_moe.archs': {} has fewer than 1 entries"),
    ("archs.9moe", {"n_experts": 8, "k": 2, "d_ff": 64, "aggregation": "sum"},
     "config key 'dag_moe.archs.9moe': '9moe' does not match"),
    ("archs.dag_moe.aggregation", "mean", "config key 'dag_moe.archs.dag_moe.aggregation': 'mean' is not one of ['sum', 'dag']"),
    ("archs.dag_moe.k", 0, "config key 'dag_moe.archs.dag_moe.k': 0 is less than the minimum of 1"),
    ("seeds", [0, 0], "config key 'dag_moe.seeds': [0, 0] has repeated items"),
    ("data.modulus", 1, "config key 'dag_moe.data.modulus': 1 is less than the minimum of 2"),
    ("data.heldout_frac", 1, "config key 'dag_moe.data.heldout_frac': 1.0 must be less than 1"),
    ("data.mix_c1", 1.5, "config key 'dag_moe.data.mix_c1': 1.5 is greater than the maximum of 1"),
    ("data.seed", DELETE, "missing config key 'dag_moe.data.seed'"),
    ("moe.edge_mode", "hard", "config key 'dag_moe.moe.edge_mode': 'hard' is not one of ['soft', 'hard_st']"),
    ("moe.dispatch", "scatter", "config key 'dag_moe.moe.dispatch': 'scatter' is not one of"),
    ("moe.edge_weight_init_std", -0.1, "config key 'dag_moe.moe.edge_weight_init_std': -0.1 is less than the minimum"),
    ("moe.router_renormalize", 1, "config key 'dag_moe.moe.router_renormalize': expected bool, got 1"),
    ("lm.eval_batch_size", 0, "config key 'dag_moe.lm.eval_batch_size': 0 is less than the minimum of 1"),
    ("lm.train.lr", 0, "config key 'dag_moe.lm.train.lr': 0.0 must be greater than 0"),
    ("lm.model.d_model", "64", "config key 'dag_moe.lm.model.d_model': expected int, got '64'"),
    ("compose.seeds", [], "config key 'dag_moe.compose.seeds': [] has fewer than 1 items"),
    ("timing.warmup", -1, "config key 'dag_moe.timing.warmup': -1 is less than the minimum of 0"),
    ("downstream.sft_dataset", 3, "config key 'dag_moe.downstream.sft_dataset': expected str, got 3"),
    ("downstream.eval_tasks", "hellaswag", "config key 'dag_moe.downstream.eval_tasks': expected a list"),
    ("downstream.batch_size", 16, "unknown config key 'dag_moe.downstream.batch_size'"),
]


@pytest.mark.parametrize("path,value,message", BAD, ids=bad_ids(BAD))
def test_bad_value_is_one_line_naming_the_key(path, value, message):
    CASES.assert_rejected(edited(path, value), message)


def test_mixture_must_sum_to_one():
    """A rule across keys (the step's, kept in the section class): not in the generated schema."""
    doc = edited("data.mix_c1", 0.9)
    with pytest.raises(InputError, match=r"^config keys 'data.mix_c1' \+ 'data.mix_c2' \+ 'data.mix_c3' must sum to 1"):
        from_dict(Config, doc, PAPER)
    assert SCHEMA.is_valid(doc)


def test_accepted_edge_values_agree_with_the_generated_schema():
    CASES.assert_accepted([("downstream.sft_dataset", "meta-math/MetaMathQA"), ("data.heldout_frac", 0),
                           ("moe.edge_bias_init", -3), ("data.corpus_chars", 0), ("timing.warmup", 0)])


def test_steps_read_the_config_classes():
    """One declaration: the steps' config classes are (or extend) the ones of config.py."""
    from methods.dag_moe import data, model, run

    cfg = from_dict(Config, SECTIONS["tiny"], PAPER)
    assert data.DataConfig is type(cfg.data) and model.MoEConfig is type(cfg.moe)
    assert model.ArchConfig is type(cfg.archs["dag_moe"]) and run.TimingConfig is type(cfg.timing)
    assert issubclass(run.LMConfig, type(cfg.lm)) and issubclass(run.ComposeConfig, type(cfg.compose))
    assert issubclass(run.DownstreamConfig, type(cfg.downstream))
