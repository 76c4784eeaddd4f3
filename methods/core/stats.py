"""Seed statistics for claims: intervals that a claim's verdict can use (scipy, no torch).

An analysis that runs a claim over several seeds reports the point value as the metric and the
interval next to it, under `intervals` in its summary JSON:

    {"c2_gap": 0.12, ..., "intervals": {"c2_gap": interval_record(...)}}

`methods.core.claims` then decides with the interval: reproduced only when the whole interval
satisfies the check, not_reproduced only when the whole interval violates it, inconclusive
when it straddles the threshold.
"""
from __future__ import annotations

import math

import numpy as np

LEVEL = 0.95


def interval_record(lo: float, hi: float, *, method: str, n: int, level: float = LEVEL) -> dict:
    """The JSON form of an interval, as `claims.evaluate_claims` reads it."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"bad interval [{lo}, {hi}]")
    return {"lo": float(lo), "hi": float(hi), "level": float(level), "method": method, "n": int(n)}


def wilson(successes: int, trials: int, level: float = LEVEL) -> dict:
    """Wilson score interval for a binomial proportion (scipy.stats.binomtest)."""
    from scipy.stats import binomtest

    if trials <= 0 or not 0 <= successes <= trials:
        raise ValueError(f"wilson needs 0 <= successes <= trials > 0, got {successes}/{trials}")
    ci = binomtest(int(successes), int(trials)).proportion_ci(confidence_level=level, method="wilson")
    return interval_record(ci.low, ci.high, method="wilson", n=trials, level=level)


def t_interval(values, level: float = LEVEL) -> dict:
    """Student-t interval for the mean of per-seed values (n >= 2; scipy.stats.t)."""
    from scipy.stats import t

    x = np.asarray(values, dtype=float)
    if x.size < 2 or not np.isfinite(x).all():
        raise ValueError(f"t_interval needs >= 2 finite values, got {x.tolist()}")
    m, se = float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))
    half = float(t.ppf(0.5 + level / 2, x.size - 1)) * se
    return interval_record(m - half, m + half, method="t", n=x.size, level=level)


def bootstrap_mean(values, level: float = LEVEL, *, n_resamples: int = 2000, seed: int = 0) -> dict:
    """Percentile bootstrap interval for the mean of per-unit values (scipy.stats.bootstrap).

    With fewer than 2 distinct values the bootstrap distribution is degenerate; the interval
    is then the single value, which a claim reads as no evidence of spread, not as certainty.
    """
    from scipy.stats import bootstrap

    x = np.asarray(values, dtype=float)
    if x.size < 2 or not np.isfinite(x).all():
        raise ValueError(f"bootstrap_mean needs >= 2 finite values, got {x.tolist()}")
    if np.ptp(x) == 0:
        return interval_record(float(x[0]), float(x[0]), method="bootstrap", n=x.size, level=level)
    res = bootstrap((x,), np.mean, confidence_level=level, n_resamples=n_resamples,
                    method="percentile", random_state=np.random.default_rng(seed))
    return interval_record(res.confidence_interval.low, res.confidence_interval.high,
                           method="bootstrap", n=x.size, level=level)


def paired_bootstrap_diff(a, b, level: float = LEVEL, *, n_resamples: int = 2000, seed: int = 0) -> dict:
    """Percentile bootstrap interval for mean(a − b) over paired units (seeds or examples)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired_bootstrap_diff needs equal shapes, got {a.shape} and {b.shape}")
    return bootstrap_mean(a - b, level, n_resamples=n_resamples, seed=seed)
