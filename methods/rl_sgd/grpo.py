"""GRPO (DeepSeekMath's group-relative objective, as in trl) written for exact control, for the
RLVR study of arXiv 2602.07729.

One iteration: for each of `n_prompts` prompts sample G completions from the current policy
(temperature T, at most `max_new` tokens, stopping at EOS); reward 1/0 by exact match;
group-relative advantages Â_i = (r_i − mean_g r) / (std_g r + eps) (std unbiased, as trl);
groups with zero reward variance optionally dropped; then ONE on-policy update of

    L(θ) = − Σ_i Σ_t min(ρ Â_i, clip(ρ, 1−ε_lo, 1+ε_hi) Â_i) / norm  (+ β k3-KL, β = 0 by default)

with ρ = π_θ/π_old ≡ 1 numerically (π_old = the detached current policy), so ∇L is the
REINFORCE-with-group-baseline gradient. Loss normalisation (the two give different gradients): `token` divides by
the total number of completion tokens in the batch (verl `token-mean`, trl's default `dapo`;
the default), `seq` takes each sequence's token mean, then the mean over sequences (our
pilot).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from . import task


@dataclass
class GRPOConfig:
    steps: int = 40
    n_prompts: int = 16
    group_size: int = 8
    temperature: float = 1.0
    max_new: int = 4
    adv_eps: float = 1e-4
    skip_zero_var: bool = True
    loss_norm: str = "token"           # token | seq
    clip_lo: float = 0.2
    clip_hi: float = 0.2
    beta: float = 0.0
    betas: list = field(default_factory=lambda: [0.9, 0.999])
    weight_decay: float = 0.01
    momentum: float = 0.9
    log_every: int = 10

    def __post_init__(self):
        if self.loss_norm not in ("token", "seq"):
            raise ValueError(f"loss_norm must be token or seq, got {self.loss_norm!r}")


def logits_of(model, ids):
    out = model(ids)
    return out.logits if hasattr(out, "logits") else out


def _up(x):
    """Half-precision logits to fp32; fp32/fp64 kept (tests run in fp64)."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


@torch.no_grad()
def sample(model, prompt_ids: torch.Tensor, max_new: int, temperature: float, gen: torch.Generator | None,
           greedy: bool = False) -> torch.Tensor:
    """Completions (B, max_new); after the first EOS everything is EOS (masked later)."""
    ids = prompt_ids
    done = torch.zeros(ids.shape[0], dtype=torch.bool)
    out = []
    for _ in range(max_new):
        logits = _up(logits_of(model, ids)[:, -1])
        if greedy:
            nxt = logits.argmax(-1)
        else:
            probs = F.softmax(logits / temperature, -1)
            nxt = torch.multinomial(probs, 1, generator=gen).squeeze(1)
        nxt = torch.where(done, torch.full_like(nxt, task.EOS_ID), nxt)
        done |= nxt == task.EOS_ID
        out.append(nxt)
        ids = torch.cat([ids, nxt[:, None]], 1)
    return torch.stack(out, 1)


def completion_mask(comp: torch.Tensor) -> torch.Tensor:
    """1 for tokens up to and including the first EOS (all tokens if there is none)."""
    is_eos = (comp == task.EOS_ID).int()
    before = torch.cumsum(is_eos, 1) - is_eos  # number of EOS strictly before t
    return (before == 0).float()


def advantages(rewards: torch.Tensor, group_size: int, eps: float) -> torch.Tensor:
    r = rewards.view(-1, group_size)
    std = r.std(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(r[:, :1])
    return ((r - r.mean(1, keepdim=True)) / (std + eps)).view(-1)


def token_logps(model, prompt_ids, comp):
    """log π(o_t | q, o_<t) for each completion token, (B, T_c)."""
    ids = torch.cat([prompt_ids, comp], 1)
    logits = _up(logits_of(model, ids)[:, prompt_ids.shape[1] - 1: -1])
    return torch.gather(F.log_softmax(logits, -1), 2, comp[:, :, None]).squeeze(2)


def grpo_loss(logp, old_logp, adv, mask, cfg: GRPOConfig, ref_logp=None):
    """The clipped surrogate (+ k3 KL) with the configured normalisation."""
    ratio = torch.exp(logp - old_logp)
    a = adv[:, None]
    per_tok = -torch.minimum(ratio * a, torch.clamp(ratio, 1 - cfg.clip_lo, 1 + cfg.clip_hi) * a)
    if cfg.beta and ref_logp is not None:
        d = ref_logp - logp
        per_tok = per_tok + cfg.beta * (torch.exp(d) - d - 1)
    if cfg.loss_norm == "token":
        return (per_tok * mask).sum() / mask.sum().clamp(min=1)
    return ((per_tok * mask).sum(1) / mask.sum(1).clamp(min=1)).mean()


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
        comp = sample(model, batch_prompts(chunk, op), max_new, 1.0, None, greedy=True)
        hits += rewards_for(comp, chunk, op).sum().item()
    return hits / len(pairs)


def grpo_step(model, opt, prompt_ids, comp, rewards, cfg: GRPOConfig, ref_model=None):
    """One on-policy update from given completions; returns (loss, stats)."""
    adv = advantages(rewards, cfg.group_size, cfg.adv_eps)
    keep = torch.ones_like(rewards, dtype=torch.bool)
    if cfg.skip_zero_var:
        keep = (rewards.view(-1, cfg.group_size).std(1) > 0).repeat_interleave(cfg.group_size)
    stats = {"reward": rewards.mean().item(), "kept_groups": int(keep.sum().item()) // cfg.group_size}
    if not keep.any():
        return None, stats
    p, c, a = prompt_ids[keep], comp[keep], adv[keep]
    mask = completion_mask(c)
    model.train()
    logp = token_logps(model, p, c)
    ref = None
    if cfg.beta and ref_model is not None:
        with torch.no_grad():
            ref = token_logps(ref_model, p, c)
    loss = grpo_loss(logp, logp.detach(), a, mask, cfg, ref)
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
        comp = sample(model, prompt_ids, cfg.max_new, cfg.temperature, gen)
        rewards = rewards_for(comp, pairs)
        loss, stats = grpo_step(model, opt, prompt_ids, comp, rewards, cfg)
        row = {"step": step, "loss": loss if loss is not None else math.nan, **stats}
        rows.append(row)
        if log and (step % cfg.log_every == 0 or step == cfg.steps - 1):
            log(row)
    return rows
