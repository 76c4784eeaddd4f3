"""Probes against closed forms, the model's own projections, and known statistical properties."""
import math

import numpy as np
import pytest
import torch

from methods.core.models import ModelConfig, build_model
from methods.core.tokenizer import train_tokenizer
from methods.wd_plasticity.pretrain import weight_rms
from methods.wd_plasticity.probes import effective_rank, probe_accuracy, qk_norms

torch.set_num_threads(1)


def test_effective_rank_closed_forms():
    n = 8
    eye = torch.eye(n)
    rank1 = torch.outer(torch.arange(1.0, n + 1), torch.ones(n))
    # singular values (2, 1, 1, 0...) → p = (1/2, 1/4, 1/4) → exp(H) = exp(1.5 ln 2) = 2^1.5
    diag = torch.diag(torch.tensor([2.0, 1.0, 1.0] + [0.0] * (n - 3)))
    got = effective_rank(torch.stack([eye, rank1, diag]))
    assert got.tolist() == pytest.approx([n, 1.0, 2 ** 1.5], rel=1e-9)
    # a causal uniform attention map (row i averages tokens 0..i) has full rank, below n
    uni = torch.tril(torch.ones(n, n)) / torch.arange(1, n + 1)[:, None]
    r = float(effective_rank(uni[None]))
    assert 1.0 < r < n


def _model(n_kv=None, seed=0):
    tok = train_tokenizer(["abcdefghij klmnop\n"])
    return build_model(ModelConfig(d_model=32, n_layers=2, n_heads=4, n_kv_heads=n_kv, d_ff=48, max_seq_len=16), tok, seed)


@pytest.mark.parametrize("n_kv", [None, 2])
def test_qk_norm_is_the_bilinear_form_of_the_projections(n_kv):
    """e_iᵀ W_Q^hᵀ W_K^h e_j is the pre-RoPE score of basis vectors e_i, e_j under head h:
    compute it through the modules' own forward (q_proj, k_proj on the identity) and compare."""
    model = _model(n_kv)
    cfg = model.config
    dh = cfg.hidden_size // cfg.num_attention_heads
    group = cfg.num_attention_heads // cfg.num_key_value_heads
    norms = qk_norms(model)
    eye = torch.eye(cfg.hidden_size, dtype=torch.float64)
    for layer, per_head in zip(model.model.layers, norms):
        att = layer.self_attn
        q = torch.nn.functional.linear(eye, att.q_proj.weight.detach().double())  # (d, heads·dh)
        k = torch.nn.functional.linear(eye, att.k_proj.weight.detach().double())
        for h, got in enumerate(per_head):
            qh = q[:, h * dh:(h + 1) * dh]
            kh = k[:, (h // group) * dh:(h // group + 1) * dh]
            assert got == pytest.approx(float((qh @ kh.T).norm()), rel=1e-12)


def test_qk_norm_scales_quadratically():
    """Scaling W_Q and W_K by c scales every ‖W_Q W_Kᵀ‖ by c² (what weight decay's shrinkage does)."""
    model = _model()
    before = np.array(qk_norms(model))
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(0.5)
            layer.self_attn.k_proj.weight.mul_(0.5)
    np.testing.assert_allclose(np.array(qk_norms(model)), before * 0.25, rtol=1e-12)


def test_weight_rms_closed_form():
    model = _model()
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(0.5 if p.ndim >= 2 else 7.0)  # the 1-D norm gains are not decayed: excluded
    assert weight_rms(model) == pytest.approx(0.5, rel=1e-12)


def test_probe_accuracy_statistical_properties():
    rng = np.random.default_rng(0)
    k, n, d = 5, 200, 16
    y = np.repeat(np.arange(k), n // k)
    centers = rng.normal(size=(k, d)) * 6.0
    separable = centers[y] + rng.normal(size=(n, d))
    noise = rng.normal(size=(n, d))
    assert probe_accuracy(separable, y, 5) > 0.97
    # labels independent of features: CV accuracy ≈ chance (1/k), within a few binomial sd
    acc = probe_accuracy(noise, y, 5)
    assert abs(acc - 1 / k) < 4 * math.sqrt((1 / k) * (1 - 1 / k) / n)


@pytest.mark.parametrize("attribute", ["city", "colour", "year"])
def test_recall_context_states_the_fact_then_asks_for_it(attribute):
    """The recall probe's text: the fact in one paraphrase, another fact, then another paraphrase
    of the fact cut exactly where its value goes (so the value completes a corpus sentence)."""
    from methods.wd_plasticity.probes import recall_context
    from methods.wd_plasticity.world import TEMPLATES

    p = {"name": "kovar", "city": "lima", "colour": "teal", "year": "1950"}
    text = recall_context(p, attribute)
    sentences = (text + p[attribute] + ".").split(". ")
    assert sentences[0] + "." == TEMPLATES[attribute][0].format(n="kovar", v=p[attribute])
    assert sentences[-1] == TEMPLATES[attribute][-1].format(n="kovar", v=p[attribute])
    assert TEMPLATES[attribute][0] != TEMPLATES[attribute][-1]     # the query is not a verbatim repeat
    assert text.count(p[attribute]) == 1 and text.endswith(" ")


def test_recall_features_are_the_final_normed_state_at_the_last_position():
    """The features equal the base model's output (after its final RMSNorm) at the last token."""
    from methods.wd_plasticity.probes import recall_features

    model = _model().eval()
    tok = train_tokenizer(["abcdefghij klmnop\n"])
    texts = ["abc de", "fgh ij kl"]
    got = recall_features(model, tok, texts)
    for t, g in zip(texts, got):
        ids = torch.tensor([tok(t, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            ref = model.model(input_ids=ids).last_hidden_state[0, -1].double().numpy()
        assert np.abs(g - ref).max() < 1e-6
