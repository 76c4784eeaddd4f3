"""Capture of prompts of different token lengths (what a hub tokenizer gives on the word-level
passkey texts, paper scale): K/V/probabilities zero-padded to the longest with a `length` per
prompt, each prompt's rows equal to capturing it alone, and the estimator's pair sampling never
reads padding (and draws exactly as before when lengths are equal)."""
import random

import torch

from methods.core.models import ModelConfig, build_model, save_model
from methods.core.results import write_jsonl
from methods.rabitqcache.config import CaptureConfig, DataConfig, SparseConfig
from methods.rabitqcache.data import build_tokenizer, filler_vocab, make_record
from methods.rabitqcache.run import capture
from methods.rabitqcache.stats import StatsConfig, sample_pairs

MC = ModelConfig(d_model=64, n_layers=2, n_heads=2, n_kv_heads=1, d_ff=128, max_seq_len=256)


def _setup(tmp_path, lengths):
    vocab = filler_vocab(30)
    tok = build_tokenizer(vocab)
    save_model(build_model(MC, tok, 0), tok, tmp_path / "m")
    cfg = DataConfig(n_train=4000, n_eval=64, train_len=256, eval_len=512, vocab_words=30, zipf_a=1.1, topic_words=0,
                     min_needles=1, max_needles=3, train_min_needles=2, train_max_needles=3, n_digits=5, seed=0)
    weights = [1.0 / (r + 1) for r in range(len(vocab))]
    rng = random.Random(0)
    recs = [make_record(rng, cfg, n, vocab, weights, train=False) for n in lengths]
    (tmp_path / "d").mkdir()
    write_jsonl(tmp_path / "d" / "eval.jsonl", recs)
    return tmp_path / "m", tmp_path / "d"


def test_unequal_prompt_lengths_are_padded_and_marked(tmp_path):
    model, data = _setup(tmp_path, [100, 100, 120])
    method = SparseConfig(method="rabitq", top_p=0.85, budget=0.1, query_bits=4, center=True, quantize_interval=16,
                          skip_layers=1, quest_page=8, rotation_seed=0, fp16_bytes=2, prefill_impl="eager")
    cap = capture(CaptureConfig(n_prompts=3, n_steps=3, batch_size=2, layers=None), model, data, method)[1]
    assert cap["k"].shape[:3] == (3, 2, 122) and cap["length"].tolist() == [102, 102, 122]  # + 2 generated
    assert not cap["k"][:2, :, 102:].any() and not cap["v"][:2, :, 102:].any()
    assert not cap["probs"][:2, ..., 102:].any()
    torch.testing.assert_close(cap["probs"].sum(-1), torch.ones(cap["probs"].shape[:-1]), rtol=0, atol=1e-5)
    # the long prompt's rows equal capturing it alone, the short ones' valid part too
    (tmp_path / "d" / "eval.jsonl").write_text((tmp_path / "d" / "eval.jsonl").read_text().splitlines()[2] + "\n")
    alone = capture(CaptureConfig(n_prompts=1, n_steps=3, batch_size=1, layers=None), model, data, method)[1]
    for key in ("q", "k", "v", "probs", "c_q", "c_k"):
        torch.testing.assert_close(cap[key][2:], alone[key], rtol=0, atol=0)


def test_sampling_skips_padding_and_is_unchanged_for_equal_lengths():
    g = torch.Generator().manual_seed(0)
    p, s, h, lk, d = 3, 2, 2, 40, 8
    cap = {2: {"q": torch.randn(p, s, h, d, generator=g), "k": torch.randn(p, h, lk, d, generator=g),
               "c_q": torch.randn(p, h, d, generator=g), "c_k": torch.randn(p, h, d, generator=g)}}
    cfg = StatsConfig(rotations=200, pairs_per_head=200, eps0=1.9, seed=0, min_layer=0, interval=8)
    plain = sample_pairs(cap, cfg, torch.Generator().manual_seed(1))
    cap[2]["length"] = torch.full((p,), lk)
    same = sample_pairs(cap, cfg, torch.Generator().manual_seed(1))
    assert all(torch.equal(a, b) for a, b in zip(plain, same))
    cap[2]["length"] = torch.tensor([lk, 20, 12])
    cap[2]["k"][1, :, 20:] = float("nan")
    cap[2]["k"][2, :, 12:] = float("nan")
    k = sample_pairs(cap, cfg, torch.Generator().manual_seed(1))[1]
    assert not k.isnan().any()
