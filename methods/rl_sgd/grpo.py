"""GRPO (DeepSeekMath's group-relative objective, as in trl) written for exact control, for the
RLVR study of arXiv 2602.07729; the shared pieces (advantages, loss, log-probs, sampling) are
`methods.core.rl`, this module is the task's loop.

One iteration: for each of `n_prompts` prompts sample G completions from the current policy
(temperature T, at most `max_new` tokens, stopping at EOS); reward 1/0 by exact match;
group-relative advantages Â_i = (r_i − mean_g r) / (std_g r + eps) (sample std, divisor G − 1,
as trl: `core.rl.group_advantages`); groups with zero reward variance optionally dropped; then
ONE on-policy update of

    L(θ) = − Σ_i Σ_t min(ρ Â_i, clip(ρ, 1−ε_lo, 1+ε_hi) Â_i) / norm  (+ β k3-KL, β = 0 by default)

with ρ = π_θ/π_old ≡ 1 numerically (π_old = the detached current policy), so ∇L is the
REINFORCE-with-group-baseline gradient. Loss normalisation (the two give different gradients): `token` divides by
the total number of completion tokens in the batch (verl `token-mean`, trl's default `dapo`),
`seq` takes each sequence's token mean, then the mean over sequences (our pilot).
"""
from __future__ import annotations

import math

import torch

from methods.core import rl

from . import task
from .config import GRPOConfig


def loss_of(logp, old_logp, adv, mask, cfg: GRPOConfig, ref_logp=None):
    """`core.rl.grpo_loss` with this config's normalisation, clip bounds and β."""
    return rl.grpo_loss(logp, old_logp, adv, mask, norm=cfg.loss_norm, clip_lo=cfg.clip_lo, clip_hi=cfg.clip_hi,
                        beta=cfg.beta, ref_logp=ref_logp)


def rewards_for(comp, pairs, op="add"):
    return torch.tensor([task.reward(task.decode(c), a, b, op) for c, (a, b) in zip(comp.tolist(), pairs)])


def batch_prompts(pairs, op="add"):
    return torch.tensor([task.encode(task.prompt(a, b, op)) for a, b in pairs])


@torch.no_grad()
def accuracy(model, pairs, op="add", max_new=4, bs=512) -> float:
    """Greedy exact match on held-out pairs."""
    model.eval()
    hits = 0.0
    for i in range(0, len(pairs), bs):
        chunk = pairs[i: i + bs]
        comp = rl.sample(model, batch_prompts(chunk, op), max_new, eos_id=task.EOS_ID, greedy=True)
        hits += rewards_for(comp, chunk, op).sum().item()
    return hits / len(pairs)


def grpo_step(model, opt, prompt_ids, comp, rewards, cfg: GRPOConfig, ref_model=None):
    """One on-policy update from given completions; returns (loss, stats)."""
    adv = rl.group_advantages(rewards, cfg.group_size, cfg.adv_eps)
    keep = torch.ones_like(rewards, dtype=torch.bool)
    if cfg.skip_zero_var:
        keep = (rewards.view(-1, cfg.group_size).std(1) > 0).repeat_interleave(cfg.group_size)
    stats = {"reward": rewards.mean().item(), "kept_groups": int(keep.sum().item()) // cfg.group_size}
    if not keep.any():
        return None, stats
    p, c, a = prompt_ids[keep], comp[keep], adv[keep]
    mask = rl.completion_mask(c, task.EOS_ID)
    model.train()
    logp = rl.completion_logprobs(model, p, c)
    ref = None
    if cfg.beta and ref_model is not None:
        with torch.no_grad():
            ref = rl.completion_logprobs(ref_model, p, c)
    loss = loss_of(logp, logp.detach(), a, mask, cfg, ref)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item(), stats


def run(model, opt, cfg: GRPOConfig, seed: int, train_pairs, log=None):
    """The GRPO loop; prompts are a pure function of (seed, step)."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for step in range(cfg.steps):
        rng = torch.Generator().manual_seed(seed * 100003 + step)
        idx = torch.randint(len(train_pairs), (cfg.n_prompts,), generator=rng).tolist()
        pairs = [train_pairs[i] for i in idx for _ in range(cfg.group_size)]
        prompt_ids = batch_prompts(pairs)
        model.eval()
        comp = rl.sample(model, prompt_ids, cfg.max_new, eos_id=task.EOS_ID, temperature=cfg.temperature,
                         generator=gen)
        rewards = rewards_for(comp, pairs)
        loss, stats = grpo_step(model, opt, prompt_ids, comp, rewards, cfg)
        row = {"step": step, "loss": loss if loss is not None else math.nan, **stats}
        rows.append(row)
        if log and (step % cfg.log_every == 0 or step == cfg.steps - 1):
            log(row)
    return rows
