"""rl_sgd's GRPO loop (reward, config → loss, zero-variance skipping) against hand-computed values
and autograd of the written objective; the shared pieces are tested in tests/core/test_rl.py."""
import math

import pytest
import torch

from methods.core import rl
from methods.core.config import from_dict
from methods.core.results import InputError
from methods.rl_sgd import grpo, task
from methods.rl_sgd.config import GRPOConfig
from methods.rl_sgd.model import TinyConfig, TinyLM

# a GRPO section (the values these tests were written with); each test overrides what it varies
GRPO = {"steps": 40, "n_prompts": 16, "group_size": 8, "temperature": 1.0, "max_new": 4, "adv_eps": 1e-4,
        "skip_zero_var": True, "loss_norm": "token", "clip_lo": 0.2, "clip_hi": 0.2, "beta": 0.0,
        "betas": [0.9, 0.999], "weight_decay": 0.01, "momentum": 0.9, "log_every": 10}


def _cfg(**kw) -> GRPOConfig:
    return GRPOConfig(**{**GRPO, **kw})


def test_reward_exact_match_then_eos():
    assert task.reward("46;", 12, 34) == 1.0
    assert task.reward("46;77", 12, 34) == 1.0      # after EOS is ignored
    assert task.reward("46", 12, 34) == 0.0         # no EOS
    assert task.reward("047;", 12, 34) == 0.0
    assert task.reward("12;", 3, 4, "mul") == 1.0


def test_loss_of_passes_the_config():
    """rl_sgd's config reaches core.rl.grpo_loss: normalisation, clip bounds, β (the loss itself
    is checked by hand in tests/core/test_rl.py)."""
    logp = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.1, -9.0]])
    ref = logp - 0.5
    old = logp - math.log(1.5)
    adv = torch.tensor([1.0, -1.0])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    for norm, lo, hi, beta in (("token", 0.2, 0.2, 0.0), ("seq", 0.1, 0.28, 0.3), ("token", 0.3, 0.25, 0.05)):
        cfg = _cfg(loss_norm=norm, clip_lo=lo, clip_hi=hi, beta=beta)
        got = grpo.loss_of(logp, old, adv, mask, cfg, ref)
        want = rl.grpo_loss(logp, old, adv, mask, norm=norm, clip_lo=lo, clip_hi=hi, beta=beta, ref_logp=ref)
        assert got.item() == want.item()
    with pytest.raises(InputError, match="'grpo.loss_norm'"):
        from_dict(GRPOConfig, {**GRPO, "loss_norm": "sum"}, "grpo")


@pytest.mark.parametrize("norm", ["token", "seq"])
def test_gradient_equals_autograd_of_written_objective(norm):
    """∇ of the surrogate at ρ = 1 equals ∇ of −Σ_i Â_i Σ_t log π / N (REINFORCE with a group
    baseline), the GRPO objective written out, for both normalisations (fp64)."""
    torch.manual_seed(0)
    m = TinyLM(TinyConfig(d_model=16, n_heads=2, d_ff=24, n_layers=2)).double()
    cfg = _cfg(group_size=4, loss_norm=norm, skip_zero_var=False)
    pairs = [(12, 34)] * 4 + [(3, 5)] * 4
    prompts = grpo.batch_prompts(pairs)
    comp = rl.sample(m, prompts, 4, eos_id=task.EOS_ID, temperature=1.0, generator=torch.Generator().manual_seed(1))
    rewards = torch.tensor([1.0, 0, 0, 1, 0, 1, 0, 0])
    mask = rl.completion_mask(comp, task.EOS_ID)
    adv = rl.group_advantages(rewards, 4, cfg.adv_eps)

    logp = rl.completion_logprobs(m, prompts, comp)
    grpo.loss_of(logp, logp.detach(), adv, mask, cfg).backward()
    g1 = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    logp = rl.completion_logprobs(m, prompts, comp)
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
    cfg = _cfg(group_size=2, loss_norm="seq", skip_zero_var=True)
    prompts = grpo.batch_prompts([(1, 2)] * 4)
    comp = torch.tensor([[3, task.EOS_ID, 0, 0]] * 4)
    loss, stats = grpo.grpo_step(m, optim.make("sgd", m.parameters(), 0.1), prompts, comp,
                                 torch.tensor([1.0, 1.0, 1.0, 0.0]), cfg)
    assert stats["kept_groups"] == 1
    # identical completions → log π equal → loss = −mean(Â) over kept = 0
    assert loss == pytest.approx(0.0, abs=1e-12)
