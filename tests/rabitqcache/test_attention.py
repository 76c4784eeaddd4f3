"""The sparse attention inside a transformers Llama (methods/rabitqcache/attention.py):
keeping every token reproduces transformers' eager attention bit for bit (forward and
`generate`), captured probabilities equal eager `output_attentions`, the Top-p rule on a hand
example, Quest's page bound, the lazy key update, and the recorded metrics against a direct
computation."""
import dataclasses
import json

import pytest
import torch

from methods.core.models import ModelConfig, build_model
from methods.rabitqcache import selection as S
from methods.rabitqcache.attention import SparseAttention, aggregate
from methods.rabitqcache.config import SparseConfig
from methods.rabitqcache.data import build_tokenizer, filler_vocab
from methods.rabitqcache.run import decode, prefill

MC = ModelConfig(d_model=64, n_layers=3, n_heads=2, n_kv_heads=1, d_ff=128, max_seq_len=256)  # GQA 2:1


@pytest.fixture(scope="module")
def models():
    tok = build_tokenizer(filler_vocab(50))
    ours, eager = build_model(MC, tok, 0), build_model(MC, tok, 0)
    eager.config._attn_implementation = "eager"
    ids = torch.randint(3, len(tok), (2, 90), generator=torch.Generator().manual_seed(0))
    return tok, ours, eager, ids


def _cfg(**kw):
    return SparseConfig(**{"method": "rabitq", "top_p": 0.85, "budget": 0.1, "query_bits": 4, "center": True,
                           "quantize_interval": 16, "skip_layers": 1, "quest_page": 8, "rotation_seed": 0,
                           "fp16_bytes": 2, "prefill_impl": "eager", **kw})


@pytest.mark.parametrize("method,kw", [("rabitq", {"top_p": 1.0}), ("int4key", {"top_p": 1.0}),
                                       ("oracle", {"budget": 1.0}), ("quest", {"budget": 1.0}),
                                       ("dense", {})])
def test_keeping_every_token_is_eager_attention_exactly(models, method, kw):
    """Prefill, then 30 decode steps that cross three lazy-update boundaries (I = 16)."""
    _, ours, eager, ids = models
    ctl = SparseAttention(ours, _cfg(method=method, **kw), record=True)
    with torch.no_grad():
        c1, c2 = prefill(ours, ids[:, :61]), prefill(eager, ids[:, :61])
        for t in range(60, 90):
            a = ours(input_ids=ids[:, t:t + 1], cache=c1, use_cache=True).logits
            b = eager(input_ids=ids[:, t:t + 1], cache=c2, use_cache=True).logits
            assert torch.equal(a, b), (method, t, float((a - b).abs().max()))
    agg = aggregate(ctl.records)
    assert agg["recall"] == pytest.approx(1.0, abs=1e-6) and agg["rel_err"] == 0.0
    if method != "dense":  # the sparse path ran (middle tokens existed) and kept all of them
        assert agg["budget"] == 1.0 and all(r["n_mid"] > 0 for r in ctl.records)


def test_generate_runs_through_the_sparse_attention(models):
    """`model.generate` (what lm-eval calls) uses the registered attention: with every token
    kept it produces eager's tokens; with a small p it runs the sparse path (recorded)."""
    _, ours, eager, ids = models
    ctl = SparseAttention(ours, _cfg(method="rabitq", top_p=1.0), record=True)
    kw = dict(max_new_tokens=12, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        a, b = ours.generate(ids[:, :70], **kw), eager.generate(ids[:, :70], **kw)
    assert torch.equal(a, b)
    ctl.cfg, ctl.records = _cfg(method="rabitq", top_p=0.5), []
    with torch.no_grad():
        ours.generate(ids[:, :70], **kw)
    agg = aggregate(ctl.records)
    assert agg["n"] > 0 and agg["budget"] < 1.0


def test_captured_probabilities_equal_eager_output_attentions(models):
    _, ours, eager, ids = models
    ctl = SparseAttention(ours, _cfg(method="dense", skip_layers=0), capture=True)
    with torch.no_grad():
        decode(ours, ctl, prefill(ours, ids[:, :80]), ids[:, 79:80], 1)
        c = prefill(eager, ids[:, :80])
        ref = eager(input_ids=ids[:, 79:80], cache=c, use_cache=True, output_attentions=True).attentions
    for layer in range(MC.n_layers):
        got = ctl.captured[layer]["probs"][0]                      # [B, H, L] of the decode step
        torch.testing.assert_close(got, ref[layer][:, :, 0].float(), rtol=0, atol=1e-7)
        assert ctl.captured[layer]["k"].shape == (2, 2, 80, 32)    # GQA-repeated, post-RoPE


def test_top_p_rule_hand_example():
    probs = torch.tensor([0.15, 0.5, 0.05, 0.3])
    assert S.top_p_mask(probs, 0.85).tolist() == [False, True, False, True]   # 0.5+0.3 ≤ 0.85 < 0.95
    assert S.top_p_mask(probs, 0.4).tolist() == [False, True, False, False]   # the top-1 always stays
    assert S.top_p_mask(probs, 0.96).tolist() == [True, True, False, True]    # the crossing token is out
    assert S.top_p_mask(probs, 1.0).all()


def test_quest_bound_is_an_upper_bound_per_page():
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(3, 32, generator=g), torch.randn(3, 64, 32, generator=g)
    bound = S.quest_bounds(q, k, 8)
    true_max = (k @ q.unsqueeze(-1)).squeeze(-1).unflatten(-1, (8, 8)).amax(-1)
    assert (bound >= true_max - 1e-5).all()
    m = S.quest_mask(q, k, 8, 20)                  # round(20/8) = 2 pages
    assert (m.sum(-1) == 16).all()


def test_lazy_update_encodes_whole_batches(models):
    _, ours, _, ids = models
    ctl = SparseAttention(ours, _cfg(method="rabitq", top_p=0.9))
    seen = []
    with torch.no_grad():
        cache = prefill(ours, ids[:, :41])                   # 40 tokens: [16, 32) encoded
        seen.append(ctl.states[2].codes.codes.shape[2])
        for t in range(40, 70):
            ours(input_ids=ids[:, t:t + 1], cache=cache, use_cache=True)
            seen.append(ctl.states[2].codes.codes.shape[2])
    assert seen[0] == 16 and seen[-1] == 48 and set(seen) == {16, 32, 48}


def test_recorded_metrics_match_a_direct_computation(models):
    """One decode step with the oracle at budget 0.25: the recorded recall is the dense mass of
    the kept tokens, and the output error is that of attention restricted to them."""
    _, ours, _, ids = models
    cfg = _cfg(method="oracle", budget=0.25, skip_layers=2)
    ctl = SparseAttention(ours, cfg, record=True, capture=True)
    with torch.no_grad():
        decode(ours, ctl, prefill(ours, ids[:, :81]), ids[:, 80:81], 1)
    c = ctl.captured[2]
    q, k, v = c["q"][0], c["k"], c["v"]                          # [B, H, D], [B, H, L, D]
    logits = (q.unsqueeze(2) @ k.transpose(2, 3)).squeeze(2) * ours.model.layers[2].self_attn.scaling
    p = torch.softmax(logits, -1)
    n_mid = 80 - 16                                             # nq = 80 // 16 · 16 = 80: middle [16, 80)
    kk = S.n_budget(0.25, n_mid)
    keep = torch.ones_like(p, dtype=torch.bool)
    keep[..., 16:80] = S.topk_mask(logits[..., 16:80], kk)
    rec = ctl.records[0]
    torch.testing.assert_close(rec["recall"], (p * keep).sum(-1), rtol=0, atol=1e-6)
    ps = torch.softmax(logits.masked_fill(~keep, float("-inf")), -1)
    o, od = (ps.unsqueeze(2) @ v).squeeze(2), (p.unsqueeze(2) @ v).squeeze(2)
    torch.testing.assert_close(rec["rel_err"], (o - od).norm(dim=-1) / od.norm(dim=-1), rtol=1e-4, atol=1e-6)
    assert rec["budget"].eq(kk / n_mid).all()


def test_sdpa_prefill_matches_eager_prefill(models):
    """The long-context option: prefill through sdpa, decode through the same sparse path;
    logits agree with the eager-prefill run to fp32 rounding, and the same tokens are kept."""
    _, ours, _, ids = models
    outs = {}
    for impl in ("eager", "sdpa"):
        ctl = SparseAttention(ours, _cfg(method="rabitq", top_p=0.8, prefill_impl=impl), record=True)
        with torch.no_grad():
            gen, _ = decode(ours, ctl, prefill(ours, ids[:, :81]), ids[:, 80:81], 6)
        outs[impl] = (gen, aggregate(ctl.records))
    assert torch.equal(outs["eager"][0], outs["sdpa"][0])
    assert outs["eager"][1]["budget"] == pytest.approx(outs["sdpa"][1]["budget"], abs=0.02)


def test_lm_eval_generation_runs_through_the_sparse_attention(tmp_path):
    """lm-eval's HFLM `generate_until` on an exported passkey task: its decode steps are
    recorded by the sparse attention (the paper-scale LongBench / RULER path)."""
    from methods.core.evaluate import export_task
    from methods.core.models import save_model
    from methods.core.results import write_jsonl
    from methods.rabitqcache.config import DataConfig
    from methods.rabitqcache.data import build
    from methods.rabitqcache.run import LmEvalConfig, lm_eval_sparse

    build(DataConfig(n_train=8, n_eval=4, train_len=128, eval_len=128, vocab_words=30, zipf_a=1.1, topic_words=0,
                     min_needles=1, max_needles=3, train_min_needles=2, train_max_needles=3, n_digits=5, seed=0),
          tmp_path / "d")
    tok = build_tokenizer(filler_vocab(30))
    mc = dataclasses.replace(MC, max_seq_len=512)
    save_model(build_model(mc, tok, 0), tok, tmp_path / "m")
    recs = [json.loads(line) for line in (tmp_path / "d" / "eval.jsonl").read_text().splitlines()]
    write_jsonl(tmp_path / "passkey.jsonl", [{"prompt": r["prompt"], "answer": r["answer"]} for r in recs])
    export_task(tmp_path / "tasks", "rq_passkey", tmp_path / "passkey.jsonl", "generate_until", max_gen_toks=5, stop=".")
    cfg = LmEvalConfig(tasks=["rq_passkey"], limit=None, batch_size=1, top_p=0.8, metadata=None,
                       method=_cfg(method="rabitq"), include_path=str(tmp_path / "tasks"))
    out = lm_eval_sparse(cfg, tmp_path / "m")
    assert "rq_passkey" in out["results"]
    steps = out["sparse_steps"]
    assert steps["n"] > 0 and 0 < steps["budget"] < 1   # decode steps went through the sparse path
