"""ReMoE's paper-scale path (methods/remoe/hub.py) on the stand-in DeepSeek-V2 and Qwen2-MoE
models (tests/paper_path/standins.py): the router hooks against transformers' own router
outputs, the trust reference at initialisation, gate-only updates, gradient accumulation against
the full batch, the OpenHermes schema, the ragged-trace analysis against the tiny analysis, and a
bad model refused in one line with no output left."""
from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from methods.core.results import InputError
from methods.core.train import TrainConfig
from methods.remoe import analysis as A, hub as H, run as R
from methods.remoe.config import AnalysisConfig, HubConfig, Variant
from tests.paper_path import standins as S
from tests.workflow.conftest import ROOT, snakemake_env


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    out = tmp_path_factory.mktemp("remoe_models")
    rng = random.Random(0)
    texts = [S.corpus_text(rng, 8) for _ in range(100)] + ["".join(S._problem(rng)) for _ in range(100)]
    for fam in ("deepseek_v2", "qwen2_moe", "llama"):
        S.write_model(fam, out / fam, texts)
    return out


@pytest.mark.parametrize("fam,n_moe", [("deepseek_v2", 1), ("qwen2_moe", 2)])
def test_tap_matches_transformers_router_outputs(models, fam, n_moe):
    model, tok, tap = H.load_hub(str(models / fam))
    assert [i for i, _ in tap.layers] == ([1] if fam == "deepseek_v2" else [0, 1])  # DeepSeek: layer 0 dense
    assert len(tap.gates) == n_moe and tap.k == 2 and tap.n_experts == 4
    ids = torch.tensor([tok("The cat likes a red house.")["input_ids"]])
    tap.attach_reference()
    with torch.no_grad():
        out = model(input_ids=ids, output_router_logits=True)
    ref = [r for r in out.router_logits if r is not None]
    assert len(ref) == n_moe
    for j in range(n_moe):
        torch.testing.assert_close(tap.logits[j].float(), ref[j].float(), rtol=0, atol=1e-6)
        top = torch.topk(F.softmax(ref[j].float(), -1), 2, -1).indices
        assert torch.equal(tap.idx[j].sort(-1).values, top.sort(-1).values)
        # the frozen reference is the router itself before any update: the trust term is 0
        logp = F.log_softmax(tap.logits[j].float(), -1)
        torch.testing.assert_close(tap.ref_logp[j], logp, rtol=0, atol=1e-6)
        assert float(R.Lo.trust(logp[None], tap.ref_logp[j][None])) == pytest.approx(0.0, abs=1e-7)


def test_openhermes_messages_and_bad_speaker():
    conv = [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "2+2?"}, {"from": "gpt", "value": "4"}]
    assert H.messages(conv, "row 0") == [{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    with pytest.raises(InputError, match="unknown speaker 'bot'"):
        H.messages([{"from": "bot", "value": "x"}], "row 3")


def _cfg(hub: HubConfig, steps=1, batch=2, lr=1e-2, v=None):
    return R.FinetuneConfig(
        train=TrainConfig(steps=steps, batch_size=batch, lr=lr, betas=(0.9, 0.999), warmup_steps=0,
                          schedule="constant", grad_clip=0.0, log_every=1),
        lambda_reuse=1.0, lambda_smooth=0.1, lambda_lag=0.1, lambda_ws=0.1, window=4, lags=[1, 2], warm_frac=0.0,
        sym_half=False, variant=v or Variant("remoe", 1.0, True), seed=0, hub=hub)


def _data(tmp: Path, n: int = 6) -> Path:
    rng = random.Random(1)
    rows = [{"messages": H.messages(r["conversations"], "x")} for r in S._rows("openhermes", "train", n, rng)]
    d = tmp / "data"
    d.mkdir()
    for split in ("train", "eval"):
        (d / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def test_finetune_changes_only_the_routers(models, tmp_path):
    hub = HubConfig(None, None, 6, 6, 32, 2, [])
    base, out = tmp_path / "base.pt", tmp_path / "ft.pt"
    H.pretrain(str(models / "qwen2_moe"), str(base))
    res = H.finetune(_cfg(hub, steps=2), str(base), str(_data(tmp_path)), str(out), str(tmp_path / "log.jsonl"))
    assert res["changed"] == ["model.layers.0.mlp.gate.weight", "model.layers.1.mlp.gate.weight"]
    assert {"reuse", "smooth", "lag", "ws", "loc", "trust"} == set(res["last_terms"])
    a, b = H.read_gates(base), H.read_gates(out)
    assert a["hub_id"] == b["hub_id"] and b["meta"] == {"variant": "remoe", "seed": 0, "trainable": res["changed"]}
    # the fine-tuned gates swapped into a fresh copy of the hub model: the rest is the hub's own
    model, _, tap = H.load_hub(b["hub_id"])
    ref = {n: p.detach().clone() for n, p in model.named_parameters()}
    tap.load(b["gates"])
    diff = sorted(n for n, p in model.named_parameters() if not torch.equal(p, ref[n]))
    assert diff == res["changed"]


def test_grad_accum_equals_the_full_batch(models, tmp_path):
    """One AdamW update from 2 micro-batches of 1 (grad_accum 2) equals one from a batch of 2 when
    the sequences have the same length: Σ_m ∇(loss_m / 2) = ∇ mean."""
    tok_dir = models / "deepseek_v2"
    model0, tok, _ = H.load_hub(str(tok_dir))
    seqs = [tok("The cat near the dog likes a red house and the dog.")["input_ids"][:12],
            tok("A red house under the cat likes the dog near a cat.")["input_ids"][:12]]
    assert len(seqs[0]) == len(seqs[1]) == 12
    results = []
    for accum, micro in ((2, 1), (1, 2)):
        model, _, tap = H.load_hub(str(tok_dir), training=True)
        tap.attach_reference()
        tap.gate_only(model, torch.float32)
        cfg = _cfg(HubConfig(None, None, 2, 2, 16, accum, []), batch=2)
        w = {"reuse": 1.0, "smooth": 0.1, "lag": 0.1, "ws": 0.1}
        v = cfg.variant

        def micro_fn(step, m, micro=micro):
            return {**H.pad_batch(seqs[m * micro:(m + 1) * micro], tok.pad_token_id), "step": 1}

        def loss_fn(model, batch, tap=tap):
            B, Sq = batch["input_ids"].shape
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            loss = F.cross_entropy(logits.float().flatten(0, 1), batch["labels"].flatten(), ignore_index=-100)
            layers = []
            for j in range(len(tap.gates)):
                logp = F.log_softmax(tap.logits[j].float(), -1).reshape(B, Sq, -1)
                rows = [R._layer_terms(logp[b:b + 1], tap.idx[j].reshape(B, Sq, -1)[b:b + 1],
                                       tap.ref_logp[j].reshape(B, Sq, -1)[b:b + 1], v, cfg, w) for b in range(B)]
                layers.append({k: torch.stack([r[k] for r in rows]).mean() for k in rows[0]})
            return R._combine(loss, layers, v, 1.0, {})

        rows = H.train_accum(model, micro_fn, cfg.train, accum, loss_fn)
        results.append((rows[0]["loss"], tap.state()))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-5)
    for n in results[0][1]:
        torch.testing.assert_close(results[0][1][n], results[1][1][n], rtol=0, atol=1e-6)
        assert not torch.equal(results[0][1][n], model0.get_parameter(n).float())  # the update moved it


def _acfg(**kw):
    base = dict(base="base", remoe="remoe", ce_only="ce_only", no_trust="no_trust", capacities=[2, 4],
                policies=["lru", "fifo", "belady"], backend="native", n_sim_docs=5)
    return AnalysisConfig(**{**base, **kw})


def test_ragged_analysis_equals_the_tiny_analysis_on_full_lengths():
    rng = np.random.default_rng(0)
    N, L, Sq, K, E = 5, 2, 20, 2, 6
    topk = np.stack([rng.permutation(E)[:K] for _ in range(N * L * Sq)]).reshape(N, L, Sq, K).astype(np.int16)
    tiny = {"topk": topk, "n_experts": E, "ppl": 3.0, "dom": np.zeros((N, Sq), dtype=np.uint8)}
    paper = {"topk": topk, "n_experts": E, "ppl": 3.0, "lengths": np.full(N, Sq)}
    a, b = A.variant_metrics(tiny, _acfg()), A.variant_metrics(paper, _acfg())
    for k in ("eor", "entropy_norm", "load_cv", "distinct_per_doc", "bound_violations", "bound_gap_at_c_eq_k"):
        assert b[k] == pytest.approx(a[k], rel=1e-12, abs=1e-12), k
    assert b["fetch_per_token"] == pytest.approx(a["fetch_per_token"], rel=1e-12)
    np.testing.assert_allclose(b["eor_per_layer"], a["eor_per_layer"], rtol=1e-12)
    # ragged: a document cut to 7 tokens counts only its own pairs; padding never enters
    cut = topk.copy()
    cut[0, :, 7:] = -1
    lengths = np.full(N, Sq)
    lengths[0] = 7
    c = A.variant_metrics({**paper, "topk": cut, "lengths": lengths}, _acfg())
    ov = [(topk[n, l, 1:lengths[n], :, None] == topk[n, l, :lengths[n] - 1, None, :]).any(-1).sum()
          for n in range(N) for l in range(L)]
    assert c["eor"] == pytest.approx(sum(ov) / (L * (lengths - 1).sum() * K), rel=1e-12)
    other = cut.copy()
    other[0, :, 7:] = 3  # differences past a document's end are not routing changes
    assert A.routing_changed({"topk": other, "lengths": lengths}, {"topk": cut, "lengths": lengths}) == 0.0


def test_pretrain_refuses_a_dense_model(models, tmp_path):
    """A hub model without MoE routers (the dense Llama stand-in): one line naming it, non-zero
    exit, no checkpoint."""
    out, log = tmp_path / "base.pt", tmp_path / "log.jsonl"
    cfg = {"model": {"d_model": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": None, "d_ff": 64, "max_seq_len": 64,
                     "tie_embeddings": False, "rope_theta": 1e4, "norm_eps": 1e-5, "init_std": 0.02},
           "moe": {"n_experts": 4, "k": 2, "expert_d_ff": 16, "n_shared": 0, "aux_coef": 0.0, "dispatch": "sorted"},
           "train": {"steps": 1, "batch_size": 1, "lr": 1e-3}, "hub_id": str(models / "llama"), "seed": 0}
    proc = subprocess.run([sys.executable, "-m", "methods.remoe", "pretrain", "--config", json.dumps(cfg),
                           "--data", str(tmp_path), "--out", str(out), "--log_json", str(log)],
                          cwd=ROOT, env=snakemake_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "LlamaForCausalLM: no MoE router" in last and "Traceback" not in proc.stderr
    assert not out.exists() and not log.exists()


def test_hub_data_refuses_a_dataset_without_conversations(tmp_path):
    d = tmp_path / "ds"
    S.write_dataset("text", d)  # fineweb-like rows: a `text` field, no `conversations`
    with pytest.raises(InputError, match="no field 'conversations'"):
        H.build_data(HubConfig(None, str(d), 4, 2, 32, 1, []), tmp_path / "out")
    assert not (tmp_path / "out").exists()
