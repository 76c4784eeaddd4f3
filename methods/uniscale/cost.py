"""The eFLOPs cost model, the cost normalisation and the reward (no torch). The cost model is
that of arXiv 2605.30898 (Propositions 3.1–3.3, as the official code's
`src/scripts/compute_eflops.py` writes it), restated in our own words.

eFLOPs = compute FLOPs + I · bytes moved (I = arithmetic intensity, 156 by default).
`a` is an architecture dict (P, L, n_q, n_kv, head_dim) as `methods.core.model_pool.pool.arch` gives.
"""
from __future__ import annotations

import math


def prefill(a: dict, n: int, pw: int = 2, pkv: int = 2) -> tuple[float, float]:
    """(compute, bytes) of a prefill of n tokens: 2P·n + Σ_{i=1..n} 4·i·L·N_q·d; P·p_w + 2·n·L·N_kv·d·p_kv."""
    comp = 2 * a["P"] * n + 4 * a["L"] * a["n_q"] * a["head_dim"] * n * (n + 1) / 2
    mem = a["P"] * pw + 2 * n * a["L"] * a["n_kv"] * a["head_dim"] * pkv
    return comp, mem


def decode(a: dict, starts: list[int], lens: list[int], pw: int = 2, pkv: int = 2) -> tuple[float, float]:
    """(compute, bytes) of decoding branches in lock-step: branch i starts at context starts[i]
    and generates lens[i] tokens. At each position the active branches b each pay 2P +
    4·ctx·L·N_q·d compute and 2·ctx·L·N_kv·d·p_kv KV bytes; the weights (P·p_w) are read once
    per position (closed form of Σ_n over ctx = s+n)."""
    if not lens or max(lens) == 0:
        return 0.0, 0.0
    k_att = a["L"] * a["n_q"] * a["head_dim"]
    k_kv = a["L"] * a["n_kv"] * a["head_dim"]
    comp = mem = 0.0
    for s, g in zip(starts, lens):
        ctx_sum = g * s + g * (g + 1) / 2
        comp += 2 * a["P"] * g + 4 * k_att * ctx_sum
        mem += 2 * k_kv * pkv * ctx_sum
    mem += a["P"] * pw * max(lens)
    return comp, mem


def verify(v: dict, seq_lens: list[int], pw: int = 2, pkv: int = 2) -> tuple[float, float]:
    """(compute, bytes) of one verification step: a PRM prefill of every branch's full sequence,
    the PRM weights read once for the step."""
    comp = mem = 0.0
    for n in seq_lens:
        c, m = prefill(v, n, pw, pkv)
        comp += c
        mem += m - v["P"] * pw
    return comp, mem + v["P"] * pw


def eflops(comp: float, mem: float, intensity: float) -> float:
    return comp + intensity * mem


def norm_cost(e: float, lo: float, hi: float) -> float:
    """C̃ = (log10 eFLOPs − lo)/(hi − lo), clipped to [0, 1] (log min-max over the offline table)."""
    return min(1.0, max(0.0, (math.log10(e) - lo) / (hi - lo)))


def reward(correct: float, verifier: float, c_norm: float, w: tuple[float, float, float]) -> float:
    """r = w1·Correct + w2·VerifierScore + w3·(1 − C̃)."""
    return w[0] * correct + w[1] * verifier + w[2] * (1 - c_norm)
