"""The `wd_plasticity` section declared in methods/wd_plasticity/config.py, under the checks of tests/config_cases.py:
the three scale files validate; bad values fail in one line naming the dotted key, and the generated
JSON schema refuses them too; the rules across keys are the section class's alone."""
import pytest

from methods.core.config import from_dict
from methods.core.models import ModelConfig
from methods.core.train import TrainConfig
from tests.config_cases import DELETE, Cases, bad_ids

PAPER = "wd_plasticity"
CASES = Cases(PAPER)
Config, SECTIONS, SCHEMA, edited = CASES.Config, CASES.sections, CASES.schema, CASES.edited


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_scale_sections_validate(scale):
    sec, cfg = CASES.loaded(scale)
    assert isinstance(cfg.pretrain.model, ModelConfig) and isinstance(cfg.finetune.train, TrainConfig)
    assert cfg.pretrain.train.betas == tuple(sec["pretrain"]["train"]["betas"])
    assert set(cfg.world.tasks) == set(sec["world"]["tasks"])
    assert all(type(t).__name__ == "TaskSource" for t in cfg.world.tasks.values())
    assert cfg.weight_decays == [float(w) for w in sec["weight_decays"]]


BAD = [  # (dotted key, value, the one-line message)
    ("world.n_people", 0, "config key 'wd_plasticity.world.n_people': 0 is less than the minimum of 1"),
    ("world.qa_train_people", 1.0, "config key 'wd_plasticity.world.qa_train_people': 1.0 must be less than 1"),
    ("world.tasks", {}, "config key 'wd_plasticity.world.tasks': {} has fewer than 1 entries"),
    ("world.tasks.t-2", {"source": "world", "prompt_field": "p", "answer_field": "a", "n_train": 1,
                         "n_dev": 1, "n_test": 1}, "config key 'wd_plasticity.world.tasks.t-2': 't-2' does not match"),
    ("world.tasks.T2.n_dev", DELETE, "missing config key 'wd_plasticity.world.tasks.T2.n_dev'"),
    ("world.mix_bio", "most", "config key 'wd_plasticity.world.mix_bio': expected float, got 'most'"),
    ("weight_decays", [0.1], "config key 'wd_plasticity.weight_decays': [0.1] has fewer than 2 items"),
    ("weight_decays", [0.0, 0.1, 0.1], "config key 'wd_plasticity.weight_decays': [0.0, 0.1, 0.1] has repeated items"),
    ("seeds[1]", -1, "config key 'wd_plasticity.seeds[1]': -1 is less than the minimum of 0"),
    ("tokenizer.kind", "wordpiece", "config key 'wd_plasticity.tokenizer.kind': 'wordpiece' is not one of ['char', 'bpe']"),
    ("pretrain.train.optimizer", "adam", "config key 'wd_plasticity.pretrain.train.optimizer': 'adam' is not one of"),
    ("pretrain.train.betas", [0.9, 1.0], "config key 'wd_plasticity.pretrain.train.betas[1]': 1.0 must be less than 1"),
    ("pretrain.model.n_kv_heads", 0, "config key 'wd_plasticity.pretrain.model.n_kv_heads': 0 is less than the minimum"),
    ("pretrain.model.rope_theta", 0, "config key 'wd_plasticity.pretrain.model.rope_theta': 0.0 must be greater than 0"),
    ("pretrain.seq_len_", 64, "unknown config key 'wd_plasticity.pretrain.seq_len_'"),
    ("finetune.lrs", [], "config key 'wd_plasticity.finetune.lrs': [] has fewer than 1 items"),
    ("probes.cv_folds", 1, "config key 'wd_plasticity.probes.cv_folds': 1 is less than the minimum of 2"),
    ("probes.probe_attribute", "town", "config key 'wd_plasticity.probes.probe_attribute': 'town' is not one of"),
    ("eval.limit", 0, "config key 'wd_plasticity.eval.limit': 0 is less than the minimum of 1"),
    ("analysis.monotone_wds", [0.1], "config key 'wd_plasticity.analysis.monotone_wds': [0.1] has fewer than 2 items"),
    ("analysis", [], "config 'wd_plasticity.analysis': expected a mapping, got []"),
]


@pytest.mark.parametrize("path,value,message", BAD, ids=bad_ids(BAD))
def test_bad_value_is_one_line_naming_the_key(path, value, message):
    CASES.assert_rejected(edited(path, value), message)


def test_accepted_edge_values_agree_with_the_generated_schema():
    CASES.assert_accepted([("eval.limit", None), ("eval.limit", 1), ("world.mix_bio", 0), ("world.mix_arith", 1),
                           ("weight_decays", [0, 1]), ("pretrain.model.n_kv_heads", 2), ("tokenizer.vocab_size", 0)])


def test_steps_read_the_config_classes():
    """One declaration: the steps' config classes are the ones of config.py."""
    from methods.wd_plasticity import analysis, world

    cfg = from_dict(Config, SECTIONS["tiny"], PAPER)
    assert world.WorldConfig is type(cfg.world) and world.TaskSource is type(cfg.world.tasks["T1"])
    assert analysis.AnalysisConfig is type(cfg.analysis)
