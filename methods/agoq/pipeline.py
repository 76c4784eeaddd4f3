"""Closed-form 1F1B activation memory per pipeline stage (pipeline-stage policy, claim A5).
The paper (arXiv 2605.00539, abstract) sets bit-widths per pipeline stage; the balancing rule below
is our inferred design.

Under 1F1B with p stages and m ≥ p micro-batches, stage i holds up to (p − i) micro-batches of
activations, so its memory ∝ (p − i) · (average stored bits of its activations). Stage-aware
bits pick, per stage, one bit-width in {2, 4, 8} per tensor type (the types' shares of the
activation elements are measured by LAAQ's hooks) so that (p − i) · bits_i is as equal across
stages as possible while the mean over stages stays near 4 bits. Imports no torch.
"""
from __future__ import annotations

import itertools

CHOICES = (2, 4, 8)


def avg_bits(assign: dict, shares: dict, overhead: float) -> float:
    return sum(shares[t] * (assign[t] + overhead) for t in shares)


def stage_aware_bits(p: int, shares: dict, overhead: float = 0.25, mean_bits: float = 4.0) -> list[float]:
    """Average stored bits per stage: the achievable mix closest to c / (p − i), c chosen so the
    ideal per-stage bits average `mean_bits`."""
    tags = sorted(t for t in shares if shares[t] > 0)
    achievable = sorted({avg_bits(dict(zip(tags, combo)), {t: shares[t] for t in tags}, overhead)
                         for combo in itertools.product(CHOICES, repeat=len(tags))})
    c = mean_bits * p / sum(1 / (p - i) for i in range(p))
    return [min(achievable, key=lambda b: abs(b - c / (p - i))) for i in range(p)]


def stage_memory(p: int, bits: list[float]) -> list[float]:
    """Relative activation memory per stage: (p − i) micro-batches × bits_i / 16."""
    return [(p - i) * bits[i] / 16 for i in range(p)]


def table(shares: dict, stages=(2, 4, 8), overhead: float = 0.25) -> list[dict]:
    total = sum(shares.values())
    shares = {t: v / total for t, v in shares.items()}
    rows = []
    for p in stages:
        for scheme, bits in (("uniform16", [16.0] * p), ("uniform4", [4 + overhead] * p),
                             ("stage_aware", stage_aware_bits(p, shares, overhead))):
            mem = stage_memory(p, bits)
            rows.append({"p": p, "scheme": scheme, "bits": [round(b, 4) for b in bits],
                         "memory": [round(x, 4) for x in mem], "max_over_min": max(mem) / min(mem),
                         "peak_vs_uniform16": max(mem) / p})
    return rows
