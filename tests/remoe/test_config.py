"""The `remoe` section declared in methods/remoe/config.py, under the checks of tests/config_cases.py:
the three scale files validate; bad values fail in one line naming the dotted key, and the generated
JSON schema refuses them too; the rules across keys are the section class's alone."""
import pytest

from methods.core.config import from_dict
from methods.core.models import ModelConfig
from methods.core.train import TrainConfig
from tests.config_cases import DELETE, Cases, bad_ids

PAPER = "remoe"
CASES = Cases(PAPER)
Config, SECTIONS, SCHEMA, edited = CASES.Config, CASES.sections, CASES.schema, CASES.edited


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_scale_sections_validate(scale):
    sec, cfg = CASES.loaded(scale)
    assert isinstance(cfg.pretrain.model, ModelConfig) and isinstance(cfg.finetune.train, TrainConfig)
    assert [v.name for v in cfg.variants] == [v["name"] for v in sec["variants"]]
    assert cfg.pretrain.moe.dispatch in ("sorted", "rounds", "dense")


BAD = [  # (dotted key, value, the one-line message)
    ("data.doc_len", 1, "config key 'remoe.data.doc_len': 1 is less than the minimum of 2"),
    ("data.mean_segment", 0.5, "config key 'remoe.data.mean_segment': 0.5 is less than the minimum of 1"),
    ("pretrain.moe.n_experts", 1, "config key 'remoe.pretrain.moe.n_experts': 1 is less than the minimum of 2"),
    ("pretrain.moe.n_shared", -1, "config key 'remoe.pretrain.moe.n_shared': -1 is less than the minimum of 0"),
    ("pretrain.moe.dispatch", "gather", "config key 'remoe.pretrain.moe.dispatch': 'gather' is not one of"),
    ("pretrain.moe.capacity", 4, "unknown config key 'remoe.pretrain.moe.capacity'"),
    ("pretrain.hub_id", DELETE, "missing config key 'remoe.pretrain.hub_id'"),
    ("finetune.lambda_ws", -0.1, "config key 'remoe.finetune.lambda_ws': -0.1 is less than the minimum of 0"),
    ("finetune.lags", [], "config key 'remoe.finetune.lags': [] has fewer than 1 items"),
    ("finetune.lags", [1, 0], "config key 'remoe.finetune.lags[1]': 0 is less than the minimum of 1"),
    ("finetune.warm_frac", 1.5, "config key 'remoe.finetune.warm_frac': 1.5 is greater than the maximum of 1"),
    ("variants", [], "config key 'remoe.variants': [] has fewer than 1 items"),
    ("variants[0].name", "2remoe", "config key 'remoe.variants[0].name': '2remoe' does not match"),
    ("variants[0].locality", "yes", "config key 'remoe.variants[0].locality': expected bool, got 'yes'"),
    ("trace.n_docs", 0, "config key 'remoe.trace.n_docs': 0 is less than the minimum of 1"),
    ("analysis.policies", ["lru", "lfu"], "config key 'remoe.analysis.policies[1]': 'lfu' is not one of"),
    ("analysis.policies", [], "config key 'remoe.analysis.policies': [] has fewer than 1 items"),
    ("analysis.backend", "redis", "config key 'remoe.analysis.backend': 'redis' is not one of ['native', 'cachetools']"),
    ("analysis.capacities", [0], "config key 'remoe.analysis.capacities[0]': 0 is less than the minimum of 1"),
    ("hub.grad_accum", -1, "config key 'remoe.hub.grad_accum': -1 is less than the minimum of 0"),
    ("hub.gguf_quant", "Q4_K_M", "unknown config key 'remoe.hub.gguf_quant'"),   # serving is not run here
    ("hub.lm_eval_tasks", "gsm8k", "config key 'remoe.hub.lm_eval_tasks': expected a list, got 'gsm8k'"),
    ("hub.seq_len", -1, "config key 'remoe.hub.seq_len': -1 is less than the minimum of 0"),
]


@pytest.mark.parametrize("path,value,message", BAD, ids=bad_ids(BAD))
def test_bad_value_is_one_line_naming_the_key(path, value, message):
    CASES.assert_rejected(edited(path, value), message)


def test_accepted_edge_values_agree_with_the_generated_schema():
    CASES.assert_accepted([("pretrain.hub_id", "deepseek-ai/DeepSeek-V2-Lite-Chat"), ("data.mean_segment", 1),
                           ("hub.grad_accum", 8), ("hub.n_train", 0), ("finetune.warm_frac", 0),
                           ("pretrain.moe.n_shared", 0)])


def test_steps_read_the_config_classes():
    """One declaration: the steps' config classes are (or extend) the ones of config.py."""
    from methods.remoe import analysis, data, model, run

    cfg = from_dict(Config, SECTIONS["tiny"], PAPER)
    assert data.DataConfig is type(cfg.data) and model.MoEConfig is type(cfg.pretrain.moe)
    assert run.PretrainConfig is type(cfg.pretrain) and run.TraceConfig is type(cfg.trace)
    assert run.Variant is type(cfg.variants[0]) and analysis.AnalysisConfig is type(cfg.analysis)
    assert issubclass(run.FinetuneConfig, type(cfg.finetune))
