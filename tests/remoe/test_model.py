"""The tiny MoE-Llama: gate-only fine-tuning touches only router weights, the trust term is 0
at the start (reference = the original router on the same hidden state), the data generator
switches domains, and the paper-scale path stops with one line."""
import json

import numpy as np
import pytest
import torch

from methods.core.models import ModelConfig
from methods.core.results import InputError
from methods.core.train import TrainConfig
from methods.remoe import data as D, model as M, run as R

MODEL = ModelConfig(d_model=32, n_layers=2, n_heads=2, d_ff=32, max_seq_len=64)
MOE = M.MoEConfig(n_experts=8, k=2, expert_d_ff=16, n_shared=1, aux_coef=0.01, dispatch="dense")
DATA = {"n_train": 40, "n_eval": 8, "doc_len": 32, "mean_segment": 24.0, "max_operand": 100, "seed": 3}


def _corpus(tmp_path):
    path = tmp_path / "corpus.npz"
    D.build(D.DataConfig(**DATA), path)
    return path


def test_corpus_switches_domains_and_is_seeded(tmp_path):
    p = _corpus(tmp_path)
    d = D.load(p)
    assert d["train_ids"].shape == (40, 33) and d["eval_ids"].shape == (8, 33)
    assert d["train_ids"].max() < len(str(d["vocab"]))
    dom = d["train_dom"]
    # a change of domain never goes back to the same domain: runs are maximal segments
    assert (np.diff(dom, axis=1) != 0).sum() > 40
    D.build(D.DataConfig(**DATA), tmp_path / "again.npz")
    np.testing.assert_array_equal(D.load(tmp_path / "again.npz")["train_ids"], d["train_ids"])


def test_gate_only_finetune_changes_only_routers(tmp_path):
    data = _corpus(tmp_path)
    base = tmp_path / "base.pt"
    model = M.build(MODEL, MOE, len(D.VOCAB), 0)
    M.save(model, MODEL, MOE, len(D.VOCAB), base, {"variant": "base"})
    # trust term is exactly 0 at the start: the reference router is the router
    m2, *_ = M.load(base)
    M.attach_reference(m2)
    x = torch.from_numpy(D.load(data)["eval_ids"][:2, :-1].astype(np.int64))
    with torch.no_grad():
        m2(input_ids=x)
    from methods.remoe.losses import trust
    for f in M.ffns(m2):
        logp = torch.log_softmax(f.last.router_logits.float(), -1)
        assert float(trust(logp, f.ref_logp)) == pytest.approx(0.0, abs=1e-6)
    tc = TrainConfig(steps=3, batch_size=4, lr=1e-2, warmup_steps=0, schedule="constant", log_every=1)
    cfg = R.FinetuneConfig(train=tc, lambda_reuse=1.0, lambda_smooth=0.1, lambda_lag=0.1, lambda_ws=0.1, window=8,
                           lags=[1, 2], warm_frac=0.1, sym_half=False, seed=0, variant=R.Variant("remoe", 1.0, True))
    out = R.finetune(cfg, str(base), str(data), str(tmp_path / "ft.pt"), str(tmp_path / "ft.jsonl"))
    assert out["changed"] == [f"model.layers.{i}.mlp.moe.router.proj.weight" for i in range(2)]
    assert set(out["last_terms"]) == {"reuse", "smooth", "lag", "ws", "loc", "trust"}
    assert out["last_terms"]["trust"] > 0
    res = R.trace(R.TraceConfig(n_docs=8, batch_size=4), [str(base), str(tmp_path / "ft.pt")],
                  str(data), str(tmp_path / "traces"))
    assert sorted(res) == ["base", "remoe_s0"]  # a fine-tune's trace is named <variant>_s<seed>
    with np.load(tmp_path / "traces" / "remoe_s0.npz") as z:
        topk = z["topk"]
    assert topk.shape == (8, 2, 32, 2) and topk.max() < 8
    assert all(np.isfinite(v) and v > 1 for v in res.values())


def test_paper_scale_path_refuses_a_non_model_in_one_line(tmp_path):
    """pretrain.hub_id set: the hub path loads the model (tests/remoe/test_hub.py runs it on the
    stand-in MoEs); a directory that is not a model stops with one line and writes nothing."""
    cfg = R.PretrainConfig(model=MODEL, moe=MOE, train=TrainConfig(steps=1, batch_size=1, lr=1e-3),
                           hub_id=str(tmp_path), seed=0)
    with pytest.raises(InputError, match="not a model directory"):
        R.pretrain(cfg, "unused", str(tmp_path / "base.pt"), str(tmp_path / "log.jsonl"))
    assert not (tmp_path / "base.pt").exists() and not (tmp_path / "log.jsonl").exists()


def test_bad_step_config_names_the_key():
    from methods.core.config import from_json
    with pytest.raises(InputError, match="mean_segment"):
        from_json(D.DataConfig, json.dumps({**DATA, "mean_segment": 0.5}), "data")
