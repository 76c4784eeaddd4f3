"""GRPO, the RL pieces shared by the papers that train with it (rl_sgd, arXiv 2602.07729; SCOPE's
predictor, arXiv 2601.22323): group-relative advantages, the clipped GRPO loss with its KL term,
log-probs of completion tokens under a causal LM, and sampling of completions.

GRPO is DeepSeekMath's Group Relative Policy Optimization (arXiv 2402.03300, §4.1). For each
prompt q, G completions o_1..o_G are sampled from π_old and scored r_1..r_G; every token of o_i
gets the advantage

    Â_i = (r_i − mean(r_1..G)) / (std(r_1..G) + eps)       (outcome supervision, §4.1.2)

and the objective (§4.1.1, Eq. 3), with ρ_i,t = π_θ(o_i,t | q, o_i,<t) / π_old(o_i,t | q, o_i,<t), is

    J(θ) = 1/G Σ_i 1/|o_i| Σ_t [ min(ρ_i,t Â_i, clip(ρ_i,t, 1−ε, 1+ε) Â_i) − β D_KL,i,t ]
    D_KL,i,t = π_ref/π_θ − log(π_ref/π_θ) − 1        (the "k3" estimator, Eq. 4)

`grpo_loss` is −J with the per-sequence token mean then the mean over sequences (`norm="seq"`,
Eq. 3 as written) or the sum over all completion tokens of the batch divided by their count
(`norm="token"`, the token-level loss of DAPO, arXiv 2503.14476 §3.3); the two give different
gradients. Clip bounds may differ below and above (1−ε_lo, 1+ε_hi; DAPO's clip-higher, §3.1).

Std convention: `std` is the SAMPLE standard deviation of the G rewards (Bessel's correction,
divisor G − 1), eps = 1e-4 added to it. DeepSeekMath writes std(r) without saying which
estimator, and neither rl_sgd's nor SCOPE's method description fixes it; the widely used GRPO
implementations (trl's GRPOTrainer, verl's GRPO advantage) take the N − 1 estimator, and rl_sgd
cross-checks its update against trl's (methods/rl_sgd/trl_check.py, 1e-4 relative), so that is
the one convention here. A group with all rewards equal has advantage exactly 0 for every
member; G = 1 has std 0 and advantage 0.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

ADV_EPS = 1e-4          # added to the group std (trl's GRPOTrainer value)
NORMS = ("token", "seq")


def logits_of(model, ids: torch.Tensor) -> torch.Tensor:
    """Next-token logits (B, T, V) of a plain `forward(ids) -> logits` module or an HF causal LM."""
    out = model(ids)
    return out.logits if hasattr(out, "logits") else out


def _up(x: torch.Tensor) -> torch.Tensor:
    """Half-precision logits to fp32; fp32/fp64 kept (tests run in fp64)."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


# ---- advantages ---------------------------------------------------------------------------
def group_advantages(rewards: torch.Tensor, group: int, eps: float = ADV_EPS) -> torch.Tensor:
    """Â_i = (r_i − mean_g r) / (std_g r + eps) over consecutive groups of `group` rewards (the G
    samples of one prompt are adjacent), std with Bessel's correction (module docstring); computed
    in the dtype of `rewards`, returned flat."""
    if group < 1 or rewards.numel() % group:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group}")
    r = rewards.view(-1, group)
    std = r.std(dim=1, keepdim=True) if group > 1 else torch.zeros_like(r[:, :1])
    adv = (r - r.mean(1, keepdim=True)) / (std + eps)
    # equal rewards: exactly 0, also where the rounded group mean misses them by an ulp (e.g.
    # eight float32 0.7s), which would otherwise leave ±ulp / eps
    return torch.where(std > 0, adv, torch.zeros_like(adv)).view(-1)


# ---- the GRPO loss ------------------------------------------------------------------------
def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token KL(π_θ ‖ π_ref) estimate π_ref/π_θ − log(π_ref/π_θ) − 1 (arXiv 2402.03300 Eq. 4)."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def masked_mean(per_tok: torch.Tensor, mask: torch.Tensor, norm: str) -> torch.Tensor:
    """Mean of per-token values over the completion tokens (`mask`, float or bool, (B, T)):
    `token` = Σ over all tokens / their count; `seq` = each row's token mean, then the mean of rows."""
    if norm == "token":
        return (per_tok * mask).sum() / mask.sum().clamp(min=1)
    if norm == "seq":
        return ((per_tok * mask).sum(1) / mask.sum(1).clamp(min=1)).mean()
    raise ValueError(f"loss normalisation must be one of {NORMS}, got {norm!r}")


def grpo_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, *,
              norm: str, clip_lo: float = 0.2, clip_hi: float = 0.2, beta: float = 0.0,
              ref_logp: torch.Tensor | None = None) -> torch.Tensor:
    """−J(θ) of arXiv 2402.03300 Eq. 3: per token −min(ρÂ, clip(ρ, 1−clip_lo, 1+clip_hi)Â)
    (+ β·k3-KL to `ref_logp` when β ≠ 0 and it is given), averaged by `masked_mean(norm)`.
    logp/old_logp/ref_logp (B, T) token log-probs, adv (B,), mask (B, T). On-policy
    (old_logp = logp.detach()) ρ ≡ 1: the value is −Â per token and the gradient −Â ∇log π."""
    ratio = torch.exp(logp - old_logp)
    a = adv[:, None]
    per_tok = -torch.minimum(ratio * a, torch.clamp(ratio, 1 - clip_lo, 1 + clip_hi) * a)
    if beta and ref_logp is not None:
        per_tok = per_tok + beta * k3_kl(logp, ref_logp)
    return masked_mean(per_tok, mask, norm)


# ---- log-probs of completions ---------------------------------------------------------------
def token_logprobs(model, ids: torch.Tensor, start: int = 1) -> torch.Tensor:
    """log π(ids[:, t] | ids[:, <t]) for t = start … T−1, shape (B, T − start), in fp32 (fp64 for
    an fp64 model)."""
    if not 1 <= start < ids.shape[1]:
        raise ValueError(f"start must be in [1, {ids.shape[1]}), got {start}")
    logits = _up(logits_of(model, ids)[:, start - 1:-1])
    return torch.gather(F.log_softmax(logits, -1), 2, ids[:, start:, None]).squeeze(2)


def completion_logprobs(model, prompt_ids: torch.Tensor, comp: torch.Tensor) -> torch.Tensor:
    """log π(o_t | q, o_<t) of each completion token, (B, T_c); all prompts of equal length."""
    return token_logprobs(model, torch.cat([prompt_ids, comp], 1), prompt_ids.shape[1])


def sequence_logprobs(model, seqs: list[list[int]], starts: list[int], pad: int):
    """Variable-length sequences, right-padded with `pad` into one batch (W = longest): (lp, mask),
    both (B, W − 1): lp[:, t] = log π(x_{t+1} | x_≤t), mask True on the completion tokens
    seqs[i][starts[i]:] (prompt and padding positions False)."""
    if len(seqs) != len(starts) or not seqs:
        raise ValueError(f"{len(seqs)} sequences and {len(starts)} completion starts")
    w = max(map(len, seqs))
    x = torch.full((len(seqs), w), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), w), dtype=torch.bool)
    for i, (s, st) in enumerate(zip(seqs, starts)):
        x[i, :len(s)] = torch.tensor(s)
        mask[i, st:len(s)] = True
    dev = next(model.parameters()).device
    return token_logprobs(model, x.to(dev), 1), mask[:, 1:].to(dev)


# ---- sampling -------------------------------------------------------------------------------
def completion_mask(comp: torch.Tensor, eos_id: int) -> torch.Tensor:
    """1.0 for tokens up to and including the first `eos_id` (all tokens if there is none)."""
    is_eos = (comp == eos_id).int()
    before = torch.cumsum(is_eos, 1) - is_eos  # number of EOS strictly before t
    return (before == 0).float()


@torch.no_grad()
def sample(model, prompt_ids: torch.Tensor, max_new: int, *, eos_id: int, temperature: float = 1.0,
           generator: torch.Generator | None = None, greedy: bool = False) -> torch.Tensor:
    """Completions (B, max_new) of equal-length prompts (B, P): each step one full forward pass
    (no KV cache), then a draw from softmax(logits / temperature) with `generator` (argmax when
    `greedy`); after the first `eos_id` a row is filled with `eos_id` (mask it with
    `completion_mask`). The G samples of one prompt are G copies of it in `prompt_ids`."""
    if not greedy and temperature <= 0:
        raise ValueError(f"temperature must be > 0 for sampling, got {temperature}")
    ids = prompt_ids
    done = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
    out = []
    for _ in range(max_new):
        logits = _up(logits_of(model, ids)[:, -1])
        if greedy:
            nxt = logits.argmax(-1)
        else:
            probs = F.softmax(logits / temperature, -1)
            nxt = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        nxt = torch.where(done, torch.full_like(nxt, eos_id), nxt)
        done |= nxt == eos_id
        out.append(nxt)
        ids = torch.cat([ids, nxt[:, None]], 1)
    return torch.stack(out, 1)


@torch.no_grad()
def generate(model, prompts: list[list[int]], max_new: int, *, eos_ids, pad_id: int, temperature: float = 1.0,
             greedy: bool = False, chunk: int = 64) -> list[list[int]]:
    """Completions of variable-length prompts (token-id lists) by an HF causal LM: left-padded
    batched `generate` with the KV cache, `chunk` prompts at a time, plain sampling from
    softmax(logits / temperature) (no top-k / top-p) or argmax when `greedy`; seed torch's RNG
    first. Each completion is cut after its first token in `eos_ids` (kept, as `completion_mask`
    keeps the first EOS) or has `max_new` tokens. The G samples of one prompt are G copies of it."""
    if not greedy and temperature <= 0:
        raise ValueError(f"temperature must be > 0 for sampling, got {temperature}")
    eos = {int(e) for e in ([eos_ids] if isinstance(eos_ids, int) else eos_ids)}
    dev = next(model.parameters()).device
    out = []
    for i in range(0, len(prompts), chunk):
        part = prompts[i:i + chunk]
        w = max(map(len, part))
        x = torch.full((len(part), w), pad_id, dtype=torch.long)
        m = torch.zeros_like(x)
        for j, t in enumerate(part):
            x[j, w - len(t):] = torch.tensor(t)
            m[j, w - len(t):] = 1
        # the checkpoint's generation_config (top-k/top-p, repetition penalty of an instruct model)
        # is overridden: the policy GRPO samples from is the model's own softmax
        y = model.generate(input_ids=x.to(dev), attention_mask=m.to(dev), do_sample=not greedy,
                           temperature=1.0 if greedy else temperature, top_k=0, top_p=1.0, min_p=None,
                           repetition_penalty=1.0, max_new_tokens=max_new, eos_token_id=sorted(eos),
                           pad_token_id=pad_id)
        for row in y[:, w:].tolist():
            cut = next((k + 1 for k, t in enumerate(row) if t in eos), len(row))
            out.append(row[:cut])
    return out
