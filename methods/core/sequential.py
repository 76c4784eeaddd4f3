"""Sequential seeds: headline claims are looked at after planned numbers of seeds, and more seeds
are trained only while a headline claim is undecided.

A paper's scale section may set

    looks: [3, 5, 8, 12]     # seeds after each planned look; the last one is the cap

The type-I error is controlled across the looks by alpha spending (Lan & DeMets 1983) with the
Hwang–Shih–DeCani family, γ = −2 (Hwang, Shih & DeCani 1990): the cumulative error spent by
information fraction t = n_k / n_K is α(1 − e^{−γt}) / (1 − e^{−γ}). Look k uses its increment
α_k as the two-sided error of its interval (level 1 − α_k); by the union bound the chance that
any look's interval excludes the true value is at most Σ α_k = α, whatever the dependence between
looks, so no group-sequential boundary computation is needed (it is conservative). γ = −2 sits
between O'Brien–Fleming-like spending (γ = −4, almost nothing early) and Pocock-like (γ = 1): it
lets a large effect decide at the first look and keeps ≥ 80 % power at the cap for an effect of one
between-seed SD with looks 3, 5, 8, 12 (tests/core/test_sequential.py simulates both).

Anytime-valid confidence sequences (`confseq`) were the alternative; with 3–12 seeds and an
unknown variance they are several times wider than a t interval, so they would decide almost
nothing at the seed counts a 2-core machine can afford.
"""
from __future__ import annotations

import math

from .stats import LEVEL

ALPHA = 1 - LEVEL
GAMMA = -2.0


def check_looks(looks) -> list[int]:
    """A look schedule: strictly increasing seed counts, the first at least 1."""
    if (not isinstance(looks, list) or not looks or any(type(n) is not int for n in looks)
            or looks[0] < 1 or any(b <= a for a, b in zip(looks, looks[1:]))):
        raise ValueError(f"looks must be a non-empty, strictly increasing list of seed counts, got {looks!r}")
    return looks


def spent(t: float, alpha: float = ALPHA, gamma: float = GAMMA) -> float:
    """Cumulative error spent at information fraction t (Hwang–Shih–DeCani)."""
    if gamma == 0:
        return alpha * t
    return alpha * (1 - math.exp(-gamma * t)) / (1 - math.exp(-gamma))


def look_alphas(looks, alpha: float = ALPHA, gamma: float = GAMMA) -> list[float]:
    """The error each look may spend (they add up to alpha)."""
    looks = check_looks(looks)
    cum = [spent(n / looks[-1], alpha, gamma) for n in looks]
    return [c - p for c, p in zip(cum, [0.0] + cum[:-1])]


def look_level(looks, look: int, alpha: float = ALPHA) -> float:
    """The confidence level of look `look` (0-based)."""
    alphas = look_alphas(looks, alpha)
    if not 0 <= look < len(alphas):
        raise ValueError(f"look {look} is outside the schedule {looks}")
    return 1 - alphas[look]


def seeds_at(seeds: list, looks, look: int) -> list:
    """The seeds of look `look`: the first looks[look] of the paper's seed list."""
    looks = check_looks(looks)
    if len(seeds) < looks[-1]:
        raise ValueError(f"looks {looks} need {looks[-1]} seeds, the seed list has {len(seeds)}")
    return list(seeds[:looks[look]])


def undecided(claims: list[dict]) -> list[str]:
    """Ids of the headline claims of a claims table that more seeds could still decide: those
    whose verdict is inconclusive for want of replicates or because the interval straddles."""
    return [c["id"] for c in claims if c["kind"] == "headline" and c["verdict"] == "inconclusive"
            and c.get("undecided_by") in ("n < 3", "interval straddles")]


def next_look(claims: list[dict], looks, look: int) -> int | None:
    """The look to run after `look`, or None when no headline claim could use more seeds or the
    cap is reached."""
    if look + 1 >= len(check_looks(looks)) or not undecided(claims):
        return None
    return look + 1
