"""FusionRoute's math (arXiv 2601.05106, as described in the abstract and secondary summaries): fused next-token scores, batched greedy decoding, and the two
training objectives (SFT mixture-routing loss on informative positions; complemented DPO).

Shapes: router logits r [..., V]; stacked expert logits E [..., n, V]; routing scores w [..., n].
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F


def fuse(r: torch.Tensor, E: torch.Tensor, choice: torch.Tensor) -> torch.Tensor:
    """log π_θ(v) + log π_{I}(v): the router's log-probs plus the chosen expert's (unnormalised
    log of the product of experts)."""
    e = E.gather(-2, choice[..., None, None].expand(*choice.shape, 1, E.shape[-1])).squeeze(-2)
    return F.log_softmax(r, -1) + F.log_softmax(e, -1)


def next_token(system: str, r, E, w, expert: int | None = None) -> torch.Tensor:
    """Greedy next token of one system from last-position logits (r [B,V], E [B,n,V], w [B,n])."""
    if system == "expert":
        return E[:, expert].argmax(-1)
    if system == "router":
        return r.argmax(-1)
    choice = w.argmax(-1)
    if system == "expert_only":
        return E.gather(1, choice[:, None, None].expand(-1, 1, E.shape[-1]))[:, 0].argmax(-1)
    if system == "fusionroute":
        return fuse(r, E, choice).argmax(-1)
    raise ValueError(f"unknown system {system!r}")


def pad_batch(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids [B, T] and lengths [B]. Causal attention makes the padding invisible to
    the real positions, so the logits at `length-1` are those of the unpadded sequence."""
    T = max(map(len, seqs))
    ids = torch.full((len(seqs), T), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
    return ids, torch.tensor([len(s) for s in seqs])


def greedy(step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], prompts: list[list[int]],
           max_new: int, stop_id: int | list[int], pad_id: int, batch_size: int = 512,
           stop_fn: Callable[[list[int]], bool] | None = None) -> list[list[int]]:
    """Greedy completions (token ids, stop token included when reached). `step(ids, lengths)`
    returns the next token of every row; finished rows leave the batch. `stop_id` may be a list
    (several eos ids); `stop_fn(out)` also ends a row (a stop string in its text, lm-eval)."""
    stops = set(stop_id) if isinstance(stop_id, (list, tuple, set)) else {stop_id}
    outs = [[] for _ in prompts]
    for b0 in range(0, len(prompts), batch_size):
        rows = list(range(b0, min(b0 + batch_size, len(prompts))))
        for _ in range(max_new):
            if not rows:
                break
            ids, lens = pad_batch([prompts[i] + outs[i] for i in rows], pad_id)
            nxt = step(ids, lens).tolist()
            keep = []
            for i, t in zip(rows, nxt):
                outs[i].append(t)
                if t not in stops and not (stop_fn is not None and stop_fn(outs[i])):
                    keep.append(i)
            rows = keep
    return outs


def last(x: torch.Tensor, lens: torch.Tensor) -> torch.Tensor:
    """x [B, T, ...] at position lens-1 of each row."""
    return x[torch.arange(x.shape[0], device=x.device), lens - 1]


# ---- SFT phase -------------------------------------------------------------------------------
def informative(expert_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mask [B, T]: labelled positions where the experts' top-1 tokens are not all the same.
    expert_logits [n, B, T, V]."""
    top = expert_logits.argmax(-1)                     # [n, B, T]
    disagree = (top != top[:1]).any(0)
    return disagree & (labels != -100)


def route_loss(w: torch.Tensor, expert_logits: torch.Tensor, labels: torch.Tensor,
               mask: torch.Tensor) -> torch.Tensor:
    """−mean_{t∈mask} log Σ_i softmax(w_t)_i π_i(y_t): the mixture likelihood of the gold token
    (experts detached). w [B, T, n]; expert_logits [n, B, T, V]; 0 when the mask is empty."""
    if not mask.any():
        return w.sum() * 0.0
    y = labels.clamp(min=0)
    lp = F.log_softmax(expert_logits.detach().float(), -1)
    lp_y = lp.gather(-1, y[None, ..., None].expand(lp.shape[0], *y.shape, 1))[..., 0]   # [n, B, T]
    mix = torch.logsumexp(F.log_softmax(w, -1) + lp_y.permute(1, 2, 0), -1)             # [B, T]
    return -mix[mask].mean()


def lm_loss_from_logits(r: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(r.reshape(-1, r.shape[-1]).float(), labels.reshape(-1), ignore_index=-100)


def sft_loss(r, w, expert_logits, labels, lam: float, informative_only: bool = True):
    """(total, lm, route) of the SFT phase: L_lm + λ·L_route."""
    mask = informative(expert_logits, labels) if informative_only else labels != -100
    lm = lm_loss_from_logits(r, labels)
    rt = route_loss(w, expert_logits, labels, mask)
    return lm + lam * rt, lm, rt


# ---- CDPO phase ------------------------------------------------------------------------------
def fused_seq_logp(r: torch.Tensor, chosen_expert_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Σ_t log π_final(y_t) with π_final = softmax(log π_θ + log π_I) (the normalised product)
    over labelled positions. r [B,T,V]; chosen_expert_logits [B,T,V] (the expert picked at each
    position, a fixed term); labels [B,T] with -100 off the completion."""
    lp = F.log_softmax(F.log_softmax(r.float(), -1) + F.log_softmax(chosen_expert_logits.float(), -1), -1)
    y = labels.clamp(min=0)
    tok = lp.gather(-1, y[..., None])[..., 0]
    return (tok * (labels != -100)).sum(-1)


def dpo_loss(pw, pl, rw, rl, beta: float) -> torch.Tensor:
    """−mean log σ(β[(pw−rw) − (pl−rl)]) over pairs (policy / reference sequence log-probs of
    the chosen w and rejected l completions)."""
    return -F.logsigmoid(beta * ((pw - rw) - (pl - rl))).mean()
