"""SCOPE's claim statistics: strict Pareto domination by hand (an α-point identical to a model
is a tie, not a domination) and the query bootstrap of an AUC against scipy.stats.bootstrap."""
import numpy as np
import pytest

from methods.scope import core
from methods.scope.analysis import bootstrap_queries, strictly_dominated


def test_strict_domination_by_hand():
    curve = [(0.1, 0.2), (0.5, 0.6), (0.9, 0.8)]
    pts = [(0.1, 0.2),    # identical to the α = 0 point: a tie, not dominated
           (0.1, 0.1),    # same cost, less accurate: dominated
           (0.6, 0.6),    # costlier, as accurate: dominated
           (0.4, 0.5),    # cheaper than every better point: not dominated
           (1.0, 0.81)]   # more accurate than every point: not dominated
    assert strictly_dominated(pts, curve) == [False, True, True, False, False]
    assert core.dominated(pts, curve) == [True, True, True, False, False]   # the weak count includes the tie


def test_query_bootstrap_of_an_auc_matches_scipy():
    from scipy.stats import bootstrap

    rng = np.random.default_rng(3)
    n, m = 300, 4
    y = (rng.random((n, m)) < 0.4).astype(float)
    p = np.clip(0.3 * y + 0.7 * rng.random((n, m)), 0, 1)
    stat = lambda idx: core.auc(p[idx].ravel(), y[idx].ravel())   # noqa: E731
    ours = bootstrap_queries(stat, n, seed=0, n_resamples=1500)
    ref = bootstrap((np.arange(n),), lambda i: stat(i.astype(int)), vectorized=False, method="percentile",
                    n_resamples=1500, random_state=np.random.default_rng(1)).confidence_interval
    assert ours["lo"] == pytest.approx(ref.low, abs=0.015) and ours["hi"] == pytest.approx(ref.high, abs=0.015)
    assert ours["lo"] < stat(np.arange(n)) < ours["hi"] and ours["n"] == n
    # an undefined statistic (one class only) in most resamples: no interval
    assert bootstrap_queries(lambda idx: float("nan"), n, seed=0, n_resamples=50) is None


def test_query_intervals_are_item_level_and_decide_no_seed_claim():
    """The query bootstrap is an interval over test queries of one trained run (unit item); every
    SCOPE claim replicates over training seeds, so the claims engine reads it as inconclusive
    (another unit than the claim's), whatever side of the threshold it lies on."""
    from methods.core.claims import evaluate_claims, load_claims
    from methods.core.stats import paired_bootstrap_diff

    rng = np.random.default_rng(0)
    y = (rng.random(200) < 0.5).astype(float)
    iv = bootstrap_queries(lambda idx: float(y[idx].mean()), 200, seed=0, n_resamples=200)
    assert iv["unit"] == "item" and iv["n"] == 200
    spec = load_claims("methods/scope/claims.yaml")
    assert all(c["replicates"] == "seed" for c in spec["claims"])
    far = paired_bootstrap_diff(np.ones(50), np.zeros(50) + (rng.random(50) < 0.1), unit="item")
    assert far["unit"] == "item" and far["lo"] > 0.5   # far above C1b's threshold 0 ...
    metrics = {"c1_margin_vs_knn": 0.9, "intervals": {"c1_margin_vs_knn": far}}
    c1b = [c for c in spec["claims"] if c["id"] == "C1b"]
    row = evaluate_claims({**spec, "claims": c1b}, metrics, "tiny")["claims"][0]
    assert row["verdict"] == "inconclusive" and row["undecided_by"] == "no interval"   # ... but over items
    assert "the claim replicates over seeds" in row["note"]
