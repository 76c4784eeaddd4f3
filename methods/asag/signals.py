"""The controller's signals and decision rules (arXiv 2606.15070, as given
by a third-party summary of the paper; NV), as pure functions.

Attention entropy of one head/layer over a window of query rows:
    H_{h,l} = mean_i [ −Σ_j A[i,j] log A[i,j] / log k_i ],  k_i = number of keys row i sees
(not stated in the paper; our choice: rows averaged, each row normalised by log of its causal key length, so
H_{h,l} ∈ [0, 1]); the aggregate is H = Σ_h Σ_{l ∈ last 4 layers} H_{h,l} and ΔH = (H − H₁)/H₁.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported lazily, inside the functions
    import torch

from .config import Policy

EXIT, INJECT, JUMP, CONTINUE = "exit", "inject", "jump", "continue"


def row_entropy(attn, eps: float = 0.0):
    """Shannon entropy (nats) of each row of a probability tensor [..., k] (0·log 0 = 0)."""
    import torch

    a = attn.double()
    return -(torch.where(a > 0, a * torch.log(a.clamp_min(1e-300)), torch.zeros_like(a))).sum(-1)


def window_entropy(attn, rows: range | list[int], q_offset: int = 0) -> "torch.Tensor":
    """Per-head normalised entropy of one layer's attention [heads, q, k] over query rows
    `rows` (absolute positions, causal: row i sees keys 0..i) → [heads]. The attention's first
    query row is position `q_offset` (0: every position from the start; a window recomputed
    over a cached prefix starts later)."""
    import torch

    rows = list(rows)
    sub = attn[:, [i - q_offset for i in rows], :]            # [h, w, k]
    ent = row_entropy(sub)                                     # [h, w]
    k = torch.tensor([i + 1 for i in rows], dtype=torch.float64)
    norm = torch.where(k > 1, torch.log(k), torch.ones_like(k))  # a 1-key row has entropy 0
    return (ent / norm).mean(-1)


def attention_state(attentions, rows, prev_span: tuple[int, int] | None, cur_span: tuple[int, int],
                    n_last: int = 4, q_offset: int = 0) -> dict:
    """H (sum over heads of the last `n_last` layers) and the trap test from per-layer
    attentions [(1, heads, T - q_offset, T)] of one eager forward pass (query rows from position
    `q_offset` on). Trap: averaged over heads, layers and the window's rows, the attention mass
    on the previous thought exceeds the mass on the current thought."""
    layers = [a.detach() for a in attentions[-n_last:]]
    H = float(sum(window_entropy(a[0], rows, q_offset).sum() for a in layers))
    trap, m_prev, m_cur = False, 0.0, 0.0
    rows = [i - q_offset for i in rows]
    for a in layers:
        sub = a[0][:, rows, :].double().mean(0)               # [w, k] mean over heads
        m_cur += float(sub[:, cur_span[0]:cur_span[1]].sum(-1).mean()) / len(layers)
        if prev_span is not None:
            m_prev += float(sub[:, prev_span[0]:prev_span[1]].sum(-1).mean()) / len(layers)
    if prev_span is not None:
        trap = m_prev > m_cur
    return {"H": H, "trap": trap, "mass_prev": m_prev, "mass_cur": m_cur}


def answer_confidence(probs: list[float]) -> float:
    """C = arithmetic mean of the answer tokens' probabilities (DEER's avg policy); 0 if empty."""
    return sum(probs) / len(probs) if probs else 0.0


def deer_stop(conf: float, lam: float) -> bool:
    """DEER: stop at an ATP iff the trial answer's confidence exceeds λ."""
    return conf > lam


def asag_decide(conf: float, H: float, H1: float | None, trap: bool, jumps: int, pol: Policy) -> tuple[str, float, int]:
    """(action, ΔH, jumps after the action) at one ATP; H1 None means this is the first ATP."""
    if H1 is None:
        return (EXIT if conf > pol.lam else CONTINUE), 0.0, jumps
    dH = (H - H1) / H1 if H1 != 0 else 0.0
    if dH < pol.alpha:
        if conf > pol.lam:
            return EXIT, dH, jumps
        return (INJECT if pol.inject else CONTINUE), dH, jumps
    if trap and pol.jump:
        jumps += 1
        return (EXIT if jumps > pol.max_jumps else JUMP), dH, jumps
    return CONTINUE, dH, jumps


def decide_at_atp(pol: Policy, conf: float, st: dict | None, H1: float | None, jumps: int,
                  rec: dict) -> tuple[str, float | None, int]:
    """One ATP of a policy (tiny and hub decoders alike): the action, the first ATP's entropy H1
    (set at the first ATP that measured attention) and the jumps so far; `rec` (the ATP's record)
    gets the attention statistics, ΔH and the action."""
    if st is not None:
        rec.update(H=st["H"], trap=st["trap"], mass_prev=st["mass_prev"], mass_cur=st["mass_cur"])
    action = CONTINUE
    if pol.kind == "deer":
        action = EXIT if deer_stop(conf, pol.lam) else CONTINUE
    elif pol.kind == "asag":
        action, dH, jumps = asag_decide(conf, st["H"], H1, st["trap"], jumps, pol)
        rec["dH"] = dH
    elif pol.kind == "vanilla":
        rec["dH"] = 0.0 if H1 is None else (st["H"] - H1) / H1
    if H1 is None and "H" in rec:
        H1 = rec["H"]
    rec["action"] = action
    return action, H1, jumps


def inject_probs(probs, target_ids: list[int], weight: float = 0.05):
    """Convergence-enhancing injection: (1−w)·softmax + w·r, r uniform over `target_ids`."""
    import torch

    if not target_ids:
        return probs
    r = torch.zeros_like(probs)
    ids = sorted(set(target_ids))
    r[..., ids] = 1.0 / len(ids)
    return (1 - weight) * probs + weight * r
