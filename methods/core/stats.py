"""Replicate statistics for claims: hierarchical intervals, exact binomial bounds and the error
spending of sequential looks (scipy, no torch).

Replication units. A claim's evidence comes from independent replicates of its *outer unit*:
`seed` (a training seed: a whole model trained again) or `item` (an evaluation item of a fixed
model or simulator, where nothing is trained). Items of several seeds are never pooled as if
independent: with seeds, the statistic is hierarchical, a t interval over seed-level values
(`seed_interval`) or a cluster bootstrap that resamples seeds and then items within each seed
(`cluster_bootstrap`).

An analysis reports per-replicate values in its summary JSON and lets `methods.core.claims`
compute the interval at the level the current look allows (`replicate_record`):

    {"c2_gap": 0.12, ..., "replicates": {"c2_gap": replicate_record([...], unit="seed")}}

or, for a fixed-level interval it computes itself, the interval next to the metric:

    {"c2_gap": 0.12, ..., "intervals": {"c2_gap": interval_record(..., unit="seed")}}

A per-replicate boolean (does X hold in this seed?) is counted, not averaged: `holds_record`
(k of n replicates), decided by its exact Clopper–Pearson bound on the rate at which it holds.
"""
from __future__ import annotations

import math

import numpy as np

LEVEL = 0.95
UNITS = ("seed", "item")


def _unit(unit: str) -> str:
    if unit not in UNITS:
        raise ValueError(f"replication unit must be one of {list(UNITS)}, got {unit!r}")
    return unit


def interval_record(lo: float, hi: float, *, method: str, n: int, unit: str, level: float = LEVEL,
                    n_inner: int | None = None) -> dict:
    """The JSON form of an interval, as `claims.evaluate_claims` reads it: `n` replicates of the
    outer `unit`; `n_inner` items within them when the statistic is hierarchical."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise ValueError(f"bad interval [{lo}, {hi}]")
    rec = {"lo": float(lo), "hi": float(hi), "level": float(level), "method": method, "n": int(n),
           "unit": _unit(unit)}
    if n_inner is not None:
        rec["n_inner"] = int(n_inner)
    return rec


def wilson(successes: int, trials: int, level: float = LEVEL, *, unit: str = "item") -> dict:
    """Wilson score interval for a binomial proportion (scipy.stats.binomtest); its replicates are
    the trials, so it is an item-level interval unless the trials are seeds."""
    from scipy.stats import binomtest

    if trials <= 0 or not 0 <= successes <= trials:
        raise ValueError(f"wilson needs 0 <= successes <= trials > 0, got {successes}/{trials}")
    ci = binomtest(int(successes), int(trials)).proportion_ci(confidence_level=level, method="wilson")
    return interval_record(ci.low, ci.high, method="wilson", n=trials, level=level, unit=unit)


def _finite(values, what: str, at_least: int = 2) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size < at_least or not np.isfinite(x).all():
        raise ValueError(f"{what} needs >= {at_least} finite values, got {np.asarray(values).tolist()}")
    return x


def t_interval(values, level: float = LEVEL, *, unit: str) -> dict:
    """Student-t interval for the mean of per-replicate values (n >= 2; scipy.stats.t)."""
    from scipy.stats import t

    x = _finite(values, "t_interval")
    m, se = float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))
    half = float(t.ppf(0.5 + level / 2, x.size - 1)) * se
    return interval_record(m - half, m + half, method="t", n=x.size, level=level, unit=unit)


def seed_interval(values, level: float = LEVEL, *, counts=None, count_scale: float = 1.0) -> dict:
    """t interval over seed-level values. When every seed gives the same value the t interval has
    zero width, which is no evidence of certainty: with `counts` ((successes, trials) per seed,
    the items behind each seed's rate; a value is `count_scale` × successes / trials, e.g. 100
    for percent) it is widened to the Wilson interval of the pooled counts, the resolution those
    items allow; without counts it stays degenerate and a claim reads it as undecided."""
    x = _finite(values, "seed_interval")
    if np.ptp(x) == 0 and counts is not None:
        k, n = (int(sum(c[i] for c in counts)) for i in (0, 1))
        if len(counts) != x.size:
            raise ValueError(f"seed_interval: {len(counts)} counts for {x.size} seeds")
        w = wilson(k, n, level)
        return interval_record(count_scale * w["lo"], count_scale * w["hi"], method="t, widened to wilson of pooled counts",
                               n=x.size, n_inner=n, level=level, unit="seed")
    return t_interval(x, level, unit="seed")


def bootstrap_mean(values, level: float = LEVEL, *, unit: str, n_resamples: int = 2000, seed: int = 0) -> dict:
    """Percentile bootstrap interval for the mean of per-unit values (scipy.stats.bootstrap).

    With fewer than 2 distinct values the bootstrap distribution is degenerate; the interval
    is then the single value, which a claim reads as no evidence of spread, not as certainty.
    """
    from scipy.stats import bootstrap

    x = _finite(values, "bootstrap_mean")
    if np.ptp(x) == 0:
        return interval_record(float(x[0]), float(x[0]), method="bootstrap", n=x.size, level=level, unit=unit)
    res = bootstrap((x,), np.mean, confidence_level=level, n_resamples=n_resamples,
                    method="percentile", random_state=np.random.default_rng(seed))
    return interval_record(res.confidence_interval.low, res.confidence_interval.high,
                           method="bootstrap", n=x.size, level=level, unit=unit)


def paired_bootstrap_diff(a, b, level: float = LEVEL, *, unit: str, n_resamples: int = 2000, seed: int = 0) -> dict:
    """Percentile bootstrap interval for mean(a − b) over paired units (seeds or items)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired_bootstrap_diff needs equal shapes, got {a.shape} and {b.shape}")
    return bootstrap_mean(a - b, level, unit=unit, n_resamples=n_resamples, seed=seed)


def cluster_bootstrap_distribution(groups, *, n_resamples: int = 4000, seed: int = 0) -> np.ndarray:
    """Two-stage bootstrap of the mean of seed means: each resample draws len(groups) seeds with
    replacement, then, within each drawn seed, its items with replacement (Davison & Hinkley 1997,
    §3.8, strategy 2)."""
    gs = [_finite(g, "cluster_bootstrap: every seed", at_least=1) for g in groups]
    if len(gs) < 2:
        raise ValueError(f"cluster_bootstrap needs >= 2 seeds, got {len(gs)}")
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples)
    for r in range(n_resamples):
        picks = rng.integers(0, len(gs), size=len(gs))
        out[r] = np.mean([gs[j][rng.integers(0, gs[j].size, size=gs[j].size)].mean() for j in picks])
    return out


def cluster_bootstrap(groups, level: float = LEVEL, *, n_resamples: int = 4000, seed: int = 0) -> dict:
    """Percentile interval of `cluster_bootstrap_distribution`: per-item values grouped by seed,
    seeds outermost. The point estimate it brackets is the mean of the seed means."""
    dist = cluster_bootstrap_distribution(groups, n_resamples=n_resamples, seed=seed)
    lo, hi = np.quantile(dist, [(1 - level) / 2, (1 + level) / 2])
    return interval_record(float(lo), float(hi), method="cluster bootstrap", n=len(groups),
                           n_inner=sum(len(g) for g in groups), level=level, unit="seed")


def replicate_record(values, *, unit: str, counts=None, count_scale: float = 1.0, items=None, ids=None) -> dict:
    """Per-replicate values of one metric for `claims` to compute the interval from (at the
    level of the current look). `counts`: (successes, trials) per replicate, used to widen a
    zero-width seed interval (a value is `count_scale` × successes / trials); `items`: per-item values per seed, for a cluster bootstrap;
    `ids`: the replicates' names (seeds) for the report."""
    x = _finite(values, "replicate_record", at_least=1)
    rec = {"unit": _unit(unit), "values": [float(v) for v in x]}
    if counts is not None and count_scale != 1.0:
        rec["count_scale"] = float(count_scale)
    for key, val in (("counts", counts), ("items", items), ("ids", ids)):
        if val is not None:
            if len(val) != x.size:
                raise ValueError(f"replicate_record: {len(val)} {key} for {x.size} values")
            rec[key] = [list(map(float, v)) if key == "items" else (list(map(int, v)) if key == "counts" else v)
                        for v in val]
    return rec


def interval_from_replicates(rec: dict, level: float = LEVEL) -> dict | None:
    """The interval a `replicate_record` gives at `level`; None with fewer than 2 replicates."""
    values = rec["values"]
    if len(values) < 2:
        return None
    if rec["unit"] == "seed":
        if rec.get("items") is not None:
            return cluster_bootstrap(rec["items"], level)
        return seed_interval(values, level, counts=rec.get("counts"), count_scale=rec.get("count_scale", 1.0))
    return t_interval(values, level, unit=rec["unit"])


def holds_record(flags, *, unit: str, level: float = LEVEL) -> dict:
    """How often a per-replicate boolean holds: k of n, with the exact (Clopper–Pearson) interval
    of the rate (scipy.stats.binomtest)."""
    from scipy.stats import binomtest

    flags = [bool(f) for f in flags]
    if not flags:
        raise ValueError("holds_record needs >= 1 replicate")
    k, n = sum(flags), len(flags)
    ci = binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    return {"k": k, "n": n, "lo": float(ci.low), "hi": float(ci.high), "level": float(level),
            "method": "clopper-pearson", "unit": _unit(unit)}


def seeds_needed(values, threshold: float, level: float, cap: int = 1000) -> int | None:
    """Smallest n at which a t interval at `level`, with the observed mean and between-replicate
    SD, would exclude `threshold`; None when it cannot be estimated (the mean sits on the
    threshold, the replicates have no spread) or n would pass `cap`."""
    from scipy.stats import t

    x = _finite(values, "seeds_needed")
    gap, sd = abs(float(x.mean()) - threshold), float(x.std(ddof=1))
    if gap == 0 or np.ptp(x) == 0:
        return None
    for n in range(2, cap + 1):
        if float(t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n) < gap:
            return max(n, x.size)
    return None
