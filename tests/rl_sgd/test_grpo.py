"""GRPO pieces against hand-computed values and autograd of the written objective."""
import math

import pytest
import torch

from methods.rl_sgd import grpo, task
from methods.rl_sgd.model import TinyConfig, TinyLM


def test_reward_exact_match_then_eos():
    assert task.reward("46;", 12, 34) == 1.0
    assert task.reward("46;77", 12, 34) == 1.0      # after EOS is ignored
    assert task.reward("46", 12, 34) == 0.0         # no EOS
    assert task.reward("047;", 12, 34) == 0.0
    assert task.reward("12;", 3, 4, "mul") == 1.0


def test_advantages_hand_computed():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0])
    a = grpo.advantages(r, 4, 1e-4)
    s1 = math.sqrt((4 * 0.25) / 3)                 # unbiased std of {1,0,0,1}
    s2 = math.sqrt((3 * 0.0625 + 0.5625) / 3)      # {1,1,1,0}: mean .75
    want = [0.5 / (s1 + 1e-4), -0.5 / (s1 + 1e-4), -0.5 / (s1 + 1e-4), 0.5 / (s1 + 1e-4),
            0.25 / (s2 + 1e-4), 0.25 / (s2 + 1e-4), 0.25 / (s2 + 1e-4), -0.75 / (s2 + 1e-4)]
    assert a.tolist() == pytest.approx(want, abs=1e-6)
    assert grpo.advantages(torch.ones(4), 4, 1e-4).abs().max().item() == 0.0


def test_completion_mask_stops_after_first_eos():
    e = task.EOS_ID
    comp = torch.tensor([[5, e, e, 3], [1, 2, 3, 4], [e, 1, e, 2]])
    assert grpo.completion_mask(comp).tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]


def test_loss_hand_computed_both_normalisations_and_clip():
    logp = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.1, -9.0]])
    adv = torch.tensor([1.0, -1.0])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    tok = grpo.GRPOConfig(loss_norm="token")
    seq = grpo.GRPOConfig(loss_norm="seq")
    # on-policy ρ = 1: token = −(1·2 − 1·1)/3; seq = −mean(1, −1) = 0
    assert grpo.grpo_loss(logp, logp, adv, mask, tok).item() == pytest.approx(-1 / 3, abs=1e-7)
    assert grpo.grpo_loss(logp, logp, adv, mask, seq).item() == pytest.approx(0.0, abs=1e-7)
    # ρ = 1.5 on every token: A>0 clipped to 1.2, A<0 takes min(−1.5, −1.2) = −1.5 → +1.5
    old = logp - math.log(1.5)
    want = -(2 * 1.2 - 1 * 1.5) / 3
    assert grpo.grpo_loss(logp, old, adv, mask, tok).item() == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("norm", ["token", "seq"])
def test_gradient_equals_autograd_of_written_objective(norm):
    """∇ of the surrogate at ρ = 1 equals ∇ of −Σ_i Â_i Σ_t log π / N (REINFORCE with a group
    baseline), the GRPO objective written out, for both normalisations (fp64)."""
    torch.manual_seed(0)
    m = TinyLM(TinyConfig(d_model=16, n_heads=2, d_ff=24, n_layers=2)).double()
    cfg = grpo.GRPOConfig(group_size=4, loss_norm=norm, skip_zero_var=False)
    pairs = [(12, 34)] * 4 + [(3, 5)] * 4
    prompts = grpo.batch_prompts(pairs)
    comp = grpo.sample(m, prompts, 4, 1.0, torch.Generator().manual_seed(1))
    rewards = torch.tensor([1.0, 0, 0, 1, 0, 1, 0, 0])
    mask = grpo.completion_mask(comp)
    adv = grpo.advantages(rewards, 4, cfg.adv_eps)

    logp = grpo.token_logps(m, prompts, comp)
    grpo.grpo_loss(logp, logp.detach(), adv, mask, cfg).backward()
    g1 = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    logp = grpo.token_logps(m, prompts, comp)
    if norm == "token":
        obj = -(adv[:, None] * logp * mask).sum() / mask.sum()
    else:
        obj = -((adv[:, None] * logp * mask).sum(1) / mask.sum(1)).mean()
    obj.backward()
    for a, b in zip(g1, (p.grad for p in m.parameters())):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    assert sum(float(g.abs().sum()) for g in g1) > 0


def test_step_skips_zero_variance_groups():
    """Dropping the all-equal group leaves the kept group's update unchanged with `seq` norm."""
    torch.manual_seed(0)
    m = TinyLM(TinyConfig(d_model=16, n_heads=2, d_ff=24)).double()
    from methods.rl_sgd import optim
    cfg = grpo.GRPOConfig(group_size=2, loss_norm="seq", skip_zero_var=True)
    prompts = grpo.batch_prompts([(1, 2)] * 4)
    comp = torch.tensor([[3, task.EOS_ID, 0, 0]] * 4)
    loss, stats = grpo.grpo_step(m, optim.make("sgd", m.parameters(), 0.1), prompts, comp,
                                 torch.tensor([1.0, 1.0, 1.0, 0.0]), cfg)
    assert stats["kept_groups"] == 1
    # identical completions → log π equal → loss = −mean(Â) over kept = 0
    assert loss == pytest.approx(0.0, abs=1e-12)
