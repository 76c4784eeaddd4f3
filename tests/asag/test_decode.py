"""The decoding loop on a tiny random Llama: captured attention equals an attention recomputed
from Q/K and transformers' eager `output_attentions`; the DEER probe's confidence equals a hand
computation from full (uncached) forward passes and leaves the cache as it was."""
import math
from dataclasses import replace

import pytest
import torch

from methods.asag.config import DecodeConfig, Policy
from methods.asag.data import Vocab
from methods.asag.decode import Decoder
from methods.asag.signals import window_entropy
from methods.core.models import ModelConfig, build_model

torch.set_num_threads(1)
# the decode step's former defaults, written out (the config classes have none)
DECODE = DecodeConfig(budget=200, probe_max=6, window_cap=64, n_last_layers=4, inject_weight=0.05, n_problems=0,
                      policies=[])


@pytest.fixture(scope="module")
def model():
    v = Vocab()
    m = build_model(ModelConfig(d_model=32, n_layers=3, n_heads=4, d_ff=64, max_seq_len=128), v, seed=0)
    m.config._attn_implementation = "eager"
    with torch.no_grad():  # sharper attention than the 0.02 init so entropies differ between rows
        for n, p in m.named_parameters():
            if "q_proj" in n or "k_proj" in n:
                p.mul_(40)
    return m.eval(), v


def manual_attention(m, ids):
    """softmax(QKᵀ/√d + causal) per layer, from the layer inputs captured by hooks."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    inputs = []
    hooks = [l.self_attn.register_forward_pre_hook(lambda mod, a, kw: inputs.append(kw["hidden_states"]), with_kwargs=True)
             for l in m.model.layers]
    with torch.no_grad():
        m(input_ids=ids)
    for h in hooks:
        h.remove()
    T = ids.shape[1]
    cos, sin = m.model.rotary_emb(inputs[0], torch.arange(T)[None])
    out = []
    for layer, x in zip(m.model.layers, inputs):
        at = layer.self_attn
        hd = at.head_dim
        q = at.q_proj(x).view(1, T, -1, hd).transpose(1, 2)
        k = at.k_proj(x).view(1, T, -1, hd).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        s = q @ k.transpose(-1, -2) / math.sqrt(hd)
        s = s.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool)), float("-inf"))
        out.append(torch.softmax(s.double(), -1))
    return out


def test_captured_attention_matches_eager_and_manual(model):
    m, v = model
    ids = torch.tensor([v.encode("Q: 3 7 + 4 8 + 1 9 = ? <think> 3 7 + 4 8 = 8 5 . 8 5 + 1 9 = 1 0 4 . So 1 0 4 .")])
    with torch.no_grad():
        eager = m(input_ids=ids, output_attentions=True).attentions
    man = manual_attention(m, ids)
    for a, b in zip(eager, man):
        torch.testing.assert_close(a.double(), b, atol=1e-5, rtol=1e-4)
    dec = Decoder(m, v, DECODE)
    T = ids.shape[1]
    rows, cur, prev = range(T - 8, T), (T - 8, T), (T - 16, T - 8)
    st = dec.attention(ids[0].tolist(), rows, prev, cur)
    H_ref = sum(float(window_entropy(a[0], rows).sum()) for a in man[-3:])
    assert st["H"] == pytest.approx(H_ref, rel=1e-5)
    assert 0 < st["H"] < 4 * 3  # each head-layer term is a normalised entropy in [0, 1]


def test_probe_confidence_by_hand_and_cache_restored(model):
    from transformers import DynamicCache

    m, v = model
    dec = Decoder(m, v, replace(DECODE, probe_max=4))
    state = v.encode("Q: 1 2 + 3 4 + 5 6 = ? <think> 1 2 + 3 4 = 4 6 .")
    with torch.no_grad():
        logits, cache = dec._feed(state, DynamicCache())
        ans, C = dec.probe(state, cache)
        # hand computation: uncached forward passes, greedy, mean prob of the digit tokens
        seq, probs = state + [v["</think>"], v["\\boxed{"]], []
        for _ in range(4):
            p = torch.softmax(m(input_ids=torch.tensor([seq])).logits[0, -1].float(), -1)
            t = int(p.argmax())
            if t in (v["}"], v.eos_token_id):
                break
            if t in dec.digits:
                probs.append(float(p[t]))
            seq.append(t)
        assert C == pytest.approx(sum(probs) / len(probs) if probs else 0.0, rel=1e-4, abs=1e-7)
        assert ans == [t for t in seq[len(state) + 2:] if t in dec.digits]
        assert cache.get_seq_length() == len(state)
        after, _ = dec._feed([v["Wait"]], cache)
        fresh = m(input_ids=torch.tensor([state + [v["Wait"]]])).logits[0, -1].float()
        torch.testing.assert_close(after, fresh, atol=1e-4, rtol=1e-4)


def test_nogate_decoding_equals_deer(model):
    m, v = model
    cfg = replace(DECODE, budget=60, probe_max=4)
    dec = Decoder(m, v, cfg)
    p = v.encode("Q: 1 2 + 3 4 + 5 6 = ? <think>")
    with torch.no_grad():
        a = dec.run(p, Policy("deer", kind="deer", lam=0.5, alpha=-0.1, max_jumps=2, inject=True, jump=True))
        b = dec.run(p, Policy("ng", kind="asag", lam=0.5, alpha=1e9, max_jumps=2, inject=False, jump=False))
    assert (a["text"], a["exit"]) == (b["text"], b["exit"])
