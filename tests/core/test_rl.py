"""methods.core.rl against closed forms: group advantages (numpy, sample std = the documented
convention, zero-variance groups), the GRPO loss and its gradient by hand (clipping both ways,
k3 KL, both normalisations), completion log-probs against an independent log_softmax gather on a
tiny transformers Llama, and sampling (greedy = argmax chain, temperature frequencies, EOS)."""
import math

import numpy as np
import pytest
import torch

from methods.core import rl


# ---- advantages -------------------------------------------------------------------------
def _np_advantages(r, group, eps=1e-4):
    r = np.asarray(r, dtype=np.float64).reshape(-1, group)
    return ((r - r.mean(1, keepdims=True)) / (r.std(1, ddof=1, keepdims=True) + eps)).reshape(-1)


@pytest.mark.parametrize("group", [2, 4, 8])
def test_advantages_match_numpy_sample_std(group):
    rng = np.random.default_rng(group)
    r = rng.integers(0, 4, size=6 * group).astype(float) / 3 + rng.normal(size=6 * group) * (rng.random() < 0.5)
    r[:group] = 0.7                                     # one zero-variance group
    got64 = rl.group_advantages(torch.tensor(r, dtype=torch.float64), group).numpy()
    np.testing.assert_allclose(got64, _np_advantages(r, group), rtol=0, atol=1e-12)
    got32 = rl.group_advantages(torch.tensor(r, dtype=torch.float32), group)
    assert got32.dtype == torch.float32
    np.testing.assert_allclose(got32.numpy(), _np_advantages(r, group), rtol=1e-5, atol=1e-5)
    assert np.all(got64[:group] == 0.0) and np.all(got32[:group].numpy() == 0.0)   # exactly, fp32 too


def test_advantages_documented_convention_by_hand():
    """Group {1, 2, 3, 4}: mean 2.5, sample variance (2.25 + .25 + .25 + 2.25) / 3 = 5/3 (NOT the
    population 5/4); group {2, 2, 2, 2}: all zero."""
    a = rl.group_advantages(torch.tensor([1.0, 2, 3, 4, 2, 2, 2, 2], dtype=torch.float64), 4)
    sd = math.sqrt(5 / 3)
    np.testing.assert_allclose(a[:4].numpy(), np.array([-1.5, -0.5, 0.5, 1.5]) / (sd + 1e-4), rtol=0, atol=1e-12)
    assert a[4:].tolist() == [0.0] * 4
    # G = 1: std 0 → advantage 0 (not NaN); eps is configurable
    assert rl.group_advantages(torch.tensor([3.0, 5.0]), 1).tolist() == [0.0, 0.0]
    b = rl.group_advantages(torch.tensor([0.0, 1.0], dtype=torch.float64), 2, eps=0.5)
    np.testing.assert_allclose(b.numpy(), [-0.5 / (math.sqrt(0.5) + 0.5), 0.5 / (math.sqrt(0.5) + 0.5)], atol=1e-12)
    with pytest.raises(ValueError, match="groups of 4"):
        rl.group_advantages(torch.ones(6), 4)


def test_advantages_equal_trl_grpo_trainer():
    """trl's GRPOTrainer (scale_rewards="group"): (r − mean) / (nanstd + 1e-4), nanstd Bessel-corrected."""
    trl_utils = pytest.importorskip("trl.trainer.utils")
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.5, 0.25, 0.0, 1.0])
    g = r.view(-1, 4)
    want = ((g - g.mean(1, keepdim=True)) / (trl_utils.nanstd(g, dim=1).unsqueeze(1) + 1e-4)).view(-1)
    torch.testing.assert_close(rl.group_advantages(r, 4), want, rtol=1e-6, atol=1e-6)


# ---- the GRPO loss ------------------------------------------------------------------------
LOGP = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.1, -9.0]], dtype=torch.float64)
ADV = torch.tensor([1.0, -1.0], dtype=torch.float64)
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]], dtype=torch.float64)


def test_loss_on_policy_both_normalisations():
    # ρ = 1: per token −Â → token: (−1 −1 +1) / 3; seq: mean(−1, +1) = 0
    assert rl.grpo_loss(LOGP, LOGP, ADV, MASK, norm="token").item() == pytest.approx(-1 / 3, abs=1e-12)
    assert rl.grpo_loss(LOGP, LOGP, ADV, MASK, norm="seq").item() == pytest.approx(0.0, abs=1e-12)
    # a bool mask gives the same
    assert rl.grpo_loss(LOGP, LOGP, ADV, MASK.bool(), norm="seq").item() == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="normalisation"):
        rl.grpo_loss(LOGP, LOGP, ADV, MASK, norm="sum")


def test_loss_clipping_by_hand():
    # ρ = 1.5 everywhere: Â > 0 → min(1.5, 1.2) = 1.2; Â < 0 → min(−1.5, −1.2) = −1.5 (unclipped)
    old = LOGP - math.log(1.5)
    assert rl.grpo_loss(LOGP, old, ADV, MASK, norm="token").item() == pytest.approx(-(2 * 1.2 - 1.5) / 3, abs=1e-12)
    # ρ = 0.5: Â > 0 → min(0.5, 0.8) = 0.5 (unclipped); Â < 0 → min(−0.5, −0.8) = −0.8 (clipped)
    old = LOGP + math.log(2.0)
    assert rl.grpo_loss(LOGP, old, ADV, MASK, norm="token").item() == pytest.approx(-(2 * 0.5 - 0.8) / 3, abs=1e-12)
    # asymmetric bounds: clip_lo 0.3 → 0.7 below; clip_hi 0.28 → 1.28 above (seq norm)
    assert rl.grpo_loss(LOGP, LOGP + math.log(2.0), ADV, MASK, norm="seq", clip_lo=0.3).item() == \
        pytest.approx((-0.5 + 0.7) / 2, abs=1e-12)
    assert rl.grpo_loss(LOGP, LOGP - math.log(1.5), ADV, MASK, norm="seq", clip_hi=0.28).item() == \
        pytest.approx((-1.28 + 1.5) / 2, abs=1e-12)


def test_loss_k3_kl_by_hand_and_gradient():
    """ref = logp + log ½ on every token: k3 = ½ − log ½ − 1 = log 2 − ½; ∂k3/∂logp = 1 − e^d = ½."""
    ref = LOGP + math.log(0.5)
    k = math.log(2) - 0.5
    torch.testing.assert_close(rl.k3_kl(LOGP, ref), torch.full_like(LOGP, k), rtol=0, atol=1e-12)
    lp = LOGP.clone().requires_grad_(True)
    loss = rl.grpo_loss(lp, lp.detach(), ADV, MASK, norm="seq", beta=0.1, ref_logp=ref)
    assert loss.item() == pytest.approx(((-1 + 0.1 * k) + (1 + 0.1 * k)) / 2, abs=1e-12)
    loss.backward()
    # seq norm: row 0 has 2 tokens, row 1 has 1; per token ∂/∂logp = (−Â + β·½) / n_i / G
    want = torch.tensor([[(-1 + 0.05) / 2 / 2, (-1 + 0.05) / 2 / 2, 0.0], [(1 + 0.05) / 1 / 2, 0.0, 0.0]],
                        dtype=torch.float64)
    torch.testing.assert_close(lp.grad, want, rtol=0, atol=1e-12)
    # β given without a reference (or β = 0): no KL term
    assert rl.grpo_loss(LOGP, LOGP, ADV, MASK, norm="token", beta=0.1).item() == pytest.approx(-1 / 3, abs=1e-12)
    assert rl.grpo_loss(LOGP, LOGP, ADV, MASK, norm="token", ref_logp=ref).item() == pytest.approx(-1 / 3, abs=1e-12)
    # the token norm weights every completion token equally: (−1 −1 +1 + 3·0.1k) / 3
    assert rl.grpo_loss(LOGP, LOGP, ADV, MASK, norm="token", beta=0.1, ref_logp=ref).item() == \
        pytest.approx((-1 + 0.3 * k) / 3, abs=1e-12)


def test_clipped_token_gets_no_gradient():
    """Outside the trust region on the side that helps (ρ > 1 + ε with Â > 0) the term is constant."""
    lp = LOGP.clone().requires_grad_(True)
    old = LOGP - math.log(1.5)                           # ρ = 1.5
    rl.grpo_loss(lp, old, ADV, MASK, norm="token").backward()
    # row 0 (Â = +1) clipped: 0; row 1 (Â = −1) unclipped: ∂(ρ)/∂logp = ρ = 1.5, / 3 tokens
    want = torch.tensor([[0.0, 0.0, 0.0], [1.5 / 3, 0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(lp.grad, want, rtol=0, atol=1e-12)


# ---- completion log-probs -----------------------------------------------------------------
@pytest.fixture(scope="module")
def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    m = LlamaForCausalLM(LlamaConfig(vocab_size=23, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=32,
                                     pad_token_id=0, eos_token_id=1, bos_token_id=1))
    m.eval()
    return m


def _gather_reference(model, ids, start):
    """log π(ids[b, t] | ids[b, <t]) for t ≥ start, one position at a time (float64 log_softmax)."""
    with torch.no_grad():
        logits = model(input_ids=ids).logits.double()
    lsm = torch.log_softmax(logits, -1)
    return torch.tensor([[float(lsm[b, t - 1, ids[b, t]]) for t in range(start, ids.shape[1])]
                         for b in range(ids.shape[0])], dtype=torch.float64)


def test_token_and_completion_logprobs_match_log_softmax_gather(llama):
    g = torch.Generator().manual_seed(1)
    prompts, comp = torch.randint(2, 23, (3, 5), generator=g), torch.randint(2, 23, (3, 4), generator=g)
    ids = torch.cat([prompts, comp], 1)
    with torch.no_grad():
        got = rl.completion_logprobs(llama, prompts, comp)
        full = rl.token_logprobs(llama, ids, 1)
    assert got.shape == (3, 4) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), _gather_reference(llama, ids, 5), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(full.double(), _gather_reference(llama, ids, 1), rtol=1e-6, atol=1e-6)
    assert torch.equal(full[:, 4:], got)                 # same positions, same numbers
    with pytest.raises(ValueError, match="start"):
        rl.token_logprobs(llama, ids, 0)


def test_sequence_logprobs_right_padded_batch(llama):
    """Each sequence's completion log-probs in the padded batch equal those of the sequence
    alone (causal: right padding cannot reach earlier positions); the mask marks exactly them."""
    seqs = [[5, 6, 7, 8, 9, 10], [4, 3, 2], [7, 7, 8, 9, 11, 12, 13, 14]]
    starts = [2, 1, 5]
    with torch.no_grad():
        lp, mask = rl.sequence_logprobs(llama, seqs, starts, pad=0)
    assert lp.shape == mask.shape == (3, 7) and mask.dtype == torch.bool
    for i, (s, st) in enumerate(zip(seqs, starts)):
        assert mask[i].tolist() == [st <= t + 1 < len(s) for t in range(7)]
        ref = _gather_reference(llama, torch.tensor([s]), st)[0]
        torch.testing.assert_close(lp[i, mask[i]].double(), ref, rtol=1e-5, atol=1e-5)


def test_logprobs_of_half_model_are_fp32(llama):
    import copy

    m = copy.deepcopy(llama).to(torch.bfloat16)
    ids = torch.randint(2, 23, (2, 6), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        got = rl.token_logprobs(m, ids, 2)
        want = torch.log_softmax(m(input_ids=ids).logits[:, 1:-1].float(), -1).gather(2, ids[:, 2:, None])[..., 0]
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=0, atol=0)


# ---- sampling -----------------------------------------------------------------------------
class _Fixed(torch.nn.Module):
    """forward(ids) → the same next-token logits at every position."""

    def __init__(self, logits):
        super().__init__()
        self.logits = torch.as_tensor(logits, dtype=torch.float32)

    def forward(self, ids):
        return self.logits.expand(ids.shape[0], ids.shape[1], -1)


def test_completion_mask_stops_after_first_eos():
    e = 9
    comp = torch.tensor([[5, e, e, 3], [1, 2, 3, 4], [e, 1, e, 2]])
    assert rl.completion_mask(comp, e).tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]


def test_temperature_sampling_frequencies():
    """Draws follow softmax(logits / T): 40k draws at T = 0.5, every frequency within 0.01
    (≥ 4.4 standard errors) of the closed form."""
    logits = torch.tensor([1.0, 0.0, -0.5, 0.3])
    n = 40_000
    comp = rl.sample(_Fixed(logits), torch.zeros(n, 1, dtype=torch.long), 1, eos_id=99, temperature=0.5,
                     generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(comp[:, 0], minlength=4).double() / n
    want = torch.softmax(logits.double() / 0.5, 0)
    torch.testing.assert_close(freq, want, rtol=0, atol=0.01)
    with pytest.raises(ValueError, match="temperature"):
        rl.sample(_Fixed(logits), torch.zeros(1, 1, dtype=torch.long), 1, eos_id=3, temperature=0.0)


def test_sampling_fills_eos_after_the_first():
    """Token 1 (EOS) has probability ½: once drawn, the row stays EOS; rows without it are raw draws."""
    comp = rl.sample(_Fixed([0.0, math.log(3.0), 0.0, 0.0]), torch.zeros(4000, 2, dtype=torch.long), 6,
                     eos_id=1, generator=torch.Generator().manual_seed(3))
    for row in comp.tolist():
        if 1 in row:
            assert set(row[row.index(1):]) == {1}
    # P(EOS first) = ½; P(no EOS in 6 steps) = 1/64: 4000 rows, tolerances ≥ 3.8 standard errors
    assert abs(float((comp[:, 0] == 1).float().mean()) - 0.5) < 0.03
    assert abs(float((comp != 1).all(1).float().mean()) - 1 / 64) < 0.01


def test_greedy_is_the_argmax_chain(llama):
    prompts = torch.randint(2, 23, (3, 4), generator=torch.Generator().manual_seed(4))
    got = rl.sample(llama, prompts, 5, eos_id=1, greedy=True)
    ids, want = prompts, []
    with torch.no_grad():
        for _ in range(5):
            nxt = llama(input_ids=ids).logits[:, -1].argmax(-1)
            want.append(nxt)
            ids = torch.cat([ids, nxt[:, None]], 1)
    want = torch.stack(want, 1)
    for r in range(3):     # after an EOS the row is EOS-filled
        row = want[r].tolist()
        if 1 in row:
            want[r, row.index(1):] = 1
    assert torch.equal(got, want)
