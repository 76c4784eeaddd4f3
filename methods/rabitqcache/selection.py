"""Token selection over the middle region of the cache (the official code's
`rabitq_selector`, github.com/Sakuraaa0/RaBitQCache).

Every function takes per-(batch, head) scores or keys for the N middle tokens and returns a
bool mask [..., N] of the tokens to load for exact attention.
"""
from __future__ import annotations

import torch


def top_p_mask(probs: torch.Tensor, p: float) -> torch.Tensor:
    """RaBitQCache's Top-p (pyimpl `top_p.py`): sort descending, keep the tokens
    whose *inclusive* cumulative mass is ≤ p, and always the top-1. The token that crosses p
    is excluded (unlike nucleus sampling). p ≥ 1 keeps every token."""
    if p >= 1.0:
        return torch.ones_like(probs, dtype=torch.bool)
    sp, idx = probs.sort(dim=-1, descending=True)
    keep = sp.cumsum(-1) <= p
    keep[..., 0] = True
    return torch.zeros_like(keep).scatter(-1, idx, keep)


def n_budget(fraction: float, n: int) -> int:
    """Tokens a fixed-budget method keeps out of n: round(fraction·n), at least 1."""
    return max(1, min(n, round(fraction * n)))


def topk_mask(scores: torch.Tensor, k: int) -> torch.Tensor:
    idx = scores.topk(k, dim=-1).indices
    return torch.zeros_like(scores, dtype=torch.bool).scatter(-1, idx, True)


def quest_bounds(q: torch.Tensor, keys: torch.Tensor, page: int) -> torch.Tensor:
    """Quest's page criticality (Tang et al. 2024, Alg. 1): per page the channel-wise min/max
    of its keys, score Σ_i max(q_i·min_i, q_i·max_i), an upper bound of q·k over the page.
    q [..., D], keys [..., N, D] with N a multiple of `page` → [..., N/page]."""
    pages = keys.unflatten(-2, (keys.shape[-2] // page, page))
    qe = q.unsqueeze(-2)
    return torch.maximum(qe * pages.amin(-2), qe * pages.amax(-2)).sum(-1)


def quest_mask(q: torch.Tensor, keys: torch.Tensor, page: int, k: int) -> torch.Tensor:
    """The top round(k/page) pages by `quest_bounds` (at least one), as a token mask [..., N]."""
    bounds = quest_bounds(q, keys, page)
    # round (not ceil) to whole pages, so the mean budget matches the target
    pm = topk_mask(bounds, min(bounds.shape[-1], max(1, round(k / page))))
    return pm.repeat_interleave(page, dim=-1)


def int4_token_dequant(keys: torch.Tensor, bits: int = 4) -> torch.Tensor:
    """Per-token asymmetric `bits`-bit quantization of each key (min/max over its D channels),
    dequantized: the Twilight-like baseline's proxy keys (INT-quantized keys + top-p, one of the
    paper's baselines per the official configs)."""
    lo, hi = keys.amin(-1, keepdim=True), keys.amax(-1, keepdim=True)
    scale = ((hi - lo) / (2 ** bits - 1)).clamp_min(1e-8)
    return torch.round((keys - lo) / scale).clamp(0, 2 ** bits - 1) * scale + lo


def random_mask(shape: tuple, k: int, generator: torch.Generator) -> torch.Tensor:
    return topk_mask(torch.rand(shape, generator=generator), k)
