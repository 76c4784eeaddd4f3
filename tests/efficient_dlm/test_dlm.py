"""Efficient-DLM core: masks vs literal masks, B=1 causal vs transformers' Llama, the masking
schedule vs its closed form, and the decoder at τ=1 vs one-token-at-a-time reference decoding."""
import math

import pytest
import torch

from methods.efficient_dlm.dlm import attention_mask, decode_dlm, diffusion_loss, forward, mask_probs


def T(rows):
    return torch.tensor(rows, dtype=torch.bool)


def test_masks_equal_literal():
    assert torch.equal(attention_mask("causal", 4, 2), T([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]))
    assert torch.equal(attention_mask("full", 3, 2), torch.ones(3, 3, dtype=torch.bool))
    assert torch.equal(attention_mask("blk_noisy", 4, 2), T([[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]]))
    # [x_t(0..3) ; x_0(0..3)], blocks {0,1},{2,3}
    lit = T([
        # noisy           clean
        [1, 1, 0, 0,   0, 0, 0, 0],
        [1, 1, 0, 0,   0, 0, 0, 0],
        [0, 0, 1, 1,   1, 1, 0, 0],
        [0, 0, 1, 1,   1, 1, 0, 0],
        [0, 0, 0, 0,   1, 0, 0, 0],
        [0, 0, 0, 0,   1, 1, 0, 0],
        [0, 0, 0, 0,   1, 1, 1, 0],
        [0, 0, 0, 0,   1, 1, 1, 1],
    ])
    assert torch.equal(attention_mask("blk_clean", 4, 2, "causal"), lit)
    lit_bi = lit.clone()
    lit_bi[4, 5] = lit_bi[6, 7] = True
    assert torch.equal(attention_mask("blk_clean", 4, 2, "bidir"), lit_bi)


@pytest.fixture(scope="module")
def tiny():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=11, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    m = LlamaForCausalLM(cfg).eval()
    m.config._attn_implementation = "eager"
    return m


def test_block1_causal_equals_hf_llama(tiny):
    x = torch.randint(3, 11, (2, 12))
    pos = torch.arange(12).expand(2, 12)
    ref = tiny(input_ids=x).logits
    for pattern in ("causal", "blk_noisy"):      # block-causal with B=1 is causal
        out, _ = forward(tiny, x, pos, attention_mask(pattern, 12, 1))
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    # two-stream layout: the clean half with causal clean_intra equals the AR model too
    out, _ = forward(tiny, torch.cat([x, x], 1), torch.cat([pos, pos], 1), attention_mask("blk_clean", 12, 4))
    torch.testing.assert_close(out[:, 12:], ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("t,beta", [(0.3, 0.0), (0.3, math.log(10) / 8), (0.05, 1.0), (0.9, 0.5)])
def test_mask_schedule_closed_form(t, beta):
    B = 8
    p = mask_probs(torch.tensor([t]), B, beta)[0].double()
    r = math.exp(beta * (1 - t))
    frac = [r ** i / sum(r ** j for j in range(B)) for i in range(B)]   # w_i / Σw
    closed = torch.tensor([min(1.0, t * B * f) for f in frac], dtype=torch.float64)
    torch.testing.assert_close(p, closed, atol=1e-6, rtol=0)
    if closed.max() < 1:
        assert abs(float(p.sum()) - t * B) < 1e-5            # expected count t·B'
    if beta == 0:
        assert torch.allclose(p, torch.full((B,), t, dtype=torch.float64))
    # Bernoulli draws: the empirical mean count matches Σ p_i within 5 standard errors
    g = torch.Generator().manual_seed(0)
    n = 20000
    draws = torch.rand(n, B, generator=g, dtype=torch.float64) < p
    var = float((p * (1 - p)).sum())
    assert abs(float(draws.sum(1).double().mean()) - float(p.sum())) < 5 * math.sqrt(var / n) + 1e-9
    # later positions are masked at least as often when β > 0
    assert torch.all(p[1:] >= p[:-1] - 1e-12)


def _reference_decode(model, prompt, block, max_new, mask_id):
    """One row, no cache, no batching: commit exactly the most confident masked token per forward
    (the mask token itself excluded from the prediction)."""
    seq = list(prompt)
    for _ in range(math.ceil(max_new / block)):
        cur = [mask_id] * block
        while mask_id in cur:
            ids = torch.tensor([seq + cur])
            C = len(seq)
            n = C + block
            m = torch.zeros(n, n, dtype=torch.bool)
            m[:C, :C] = torch.tril(torch.ones(C, C, dtype=torch.bool))
            m[C:, :] = True
            logits, _ = forward(model, ids, torch.arange(n)[None], m)
            logits[..., mask_id] = float("-inf")         # the mask token is never a prediction
            probs = torch.softmax(logits[0, C:].float(), -1)
            conf, tok = probs.max(-1)
            conf = torch.where(torch.tensor(cur) == mask_id, conf, torch.tensor(-1.0))
            j = int(conf.argmax())
            cur[j] = int(tok[j])
        seq += cur
    return seq[len(prompt):][:max_new]


def test_threshold_one_equals_one_at_a_time(tiny):
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(3, 10, (n,), generator=g).tolist() for n in (3, 7, 5)]
    with torch.no_grad():
        gen, nfe = decode_dlm(tiny, prompts, block=4, threshold=1.0, max_new=8, mask_id=10, pad_id=0,
                              stop_ids=[], mode="cache")
        for r, p in enumerate(prompts):
            assert gen[r].tolist() == _reference_decode(tiny, p, 4, 8, 10)
    assert nfe.tolist() == [8, 8, 8]                          # one token per forward


def test_parallel_threshold_commits_more(tiny):
    prompts = [[3, 4, 5], [6, 7]]
    with torch.no_grad():
        _, n1 = decode_dlm(tiny, prompts, block=4, threshold=1.0, max_new=8, mask_id=10, pad_id=0, stop_ids=[])
        _, n0 = decode_dlm(tiny, prompts, block=4, threshold=0.0, max_new=8, mask_id=10, pad_id=0, stop_ids=[])
    assert n0.tolist() == [2, 2] and n1.tolist() == [8, 8]  # τ=0: a whole block per forward


def test_loss_is_masked_ce_over_t(tiny):
    """All-masked (t→1) single block: loss equals the mean CE of predicting x0 from all-[M]."""
    x0 = torch.randint(3, 10, (2, 8))
    spec = {"pattern": "blk_clean", "shift": False, "beta": 0.0}
    g = torch.Generator().manual_seed(0)
    loss = diffusion_loss(tiny, x0, spec, 8, g, 10, eps=1.0)   # t = 1 → every token masked
    xt = torch.full_like(x0, 10)
    logits, _ = forward(tiny, xt, torch.arange(8).expand(2, 8), torch.ones(8, 8, dtype=torch.bool))
    ref = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x0.flatten())
    torch.testing.assert_close(loss, ref, atol=1e-5, rtol=1e-5)


def _mask_loving(model, mask_id, bias=50.0):
    """A copy of `model` whose head adds +bias to the mask token's logit: its argmax over the
    whole vocabulary is the mask token at every position."""
    import copy

    m = copy.deepcopy(model)
    head = torch.nn.Linear(m.lm_head.in_features, m.lm_head.out_features, bias=True)
    head.weight.data.copy_(m.lm_head.weight.data)
    head.bias.data.zero_()
    head.bias.data[mask_id] = bias
    m.lm_head = head
    return m


@pytest.mark.parametrize("mode,shift", [("cache", False), ("full", True)])
def test_decoding_terminates_when_the_model_always_predicts_the_mask(tiny, mode, shift):
    """The argmax of every position is the mask token; decoding used to loop forever (the most
    confident position was 'committed' to the mask and stayed masked). Now the mask is excluded
    from the softmax, so the output equals the decode of the unbiased model (softmax over the other
    tokens is unchanged by the mask's logit) and never contains the mask token."""
    import signal

    mask_id = 10
    biased = _mask_loving(tiny, mask_id)
    prompts = [[3, 4, 5], [6, 7], [8, 3, 4, 9, 5]]
    with torch.no_grad():
        logits, _ = forward(biased, torch.tensor([[3, 4, 5, 10, 10]]), torch.arange(5)[None],
                            attention_mask("full", 5, 5))
    assert (logits.argmax(-1) == mask_id).all()                   # the premise of the test

    def boom(*_):
        raise TimeoutError("decode_dlm did not terminate")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(60)
    try:
        for th in (1.0, 0.9, 0.0):
            kw = dict(block=4, threshold=th, max_new=8, mask_id=mask_id, pad_id=0, stop_ids=[], mode=mode, shift=shift)
            gen, nfe = decode_dlm(biased, prompts, **kw)
            ref, ref_nfe = decode_dlm(tiny, prompts, **kw)
            assert not (gen == mask_id).any()
            assert torch.equal(gen, ref) and torch.equal(nfe, ref_nfe)
            assert (nfe <= 8).all() and (nfe >= 2).all()           # ≤ block forwards per block, ≥ 1
            if th == 1.0:
                assert nfe.tolist() == [8, 8, 8]                    # one position per forward
                one_at_a_time = gen
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    if mode == "cache":
        for r, p in enumerate(prompts):
            assert one_at_a_time[r].tolist() == _reference_decode(tiny, p, 4, 8, mask_id)
