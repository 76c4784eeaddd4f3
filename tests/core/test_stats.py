"""methods/core/stats.py: the claim intervals against closed forms and scipy's own intervals."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from methods.core import stats as S


@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (20, 500), (250, 500)])
def test_wilson_matches_the_closed_form(k, n):
    z = st.norm.ppf(0.975)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    iv = S.wilson(k, n)
    assert iv["lo"] == pytest.approx(max(0.0, centre - half), abs=1e-12)
    assert iv["hi"] == pytest.approx(min(1.0, centre + half), abs=1e-12)
    assert (iv["method"], iv["n"], iv["level"]) == ("wilson", n, 0.95)


def test_t_interval_matches_scipy():
    x = [2.958, 2.9608, 2.9551, 2.962]
    lo, hi = st.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=st.sem(x))
    iv = S.t_interval(x, unit="seed")
    assert (iv["lo"], iv["hi"]) == pytest.approx((lo, hi), abs=1e-12)
    assert (iv["unit"], iv["n"]) == ("seed", 4)


def test_bootstrap_mean_close_to_the_normal_interval_for_a_large_sample():
    x = np.random.default_rng(0).normal(1.0, 2.0, size=2000)
    iv = S.bootstrap_mean(x, unit="item", n_resamples=4000)
    half = 1.96 * x.std(ddof=1) / math.sqrt(x.size)
    assert iv["lo"] == pytest.approx(x.mean() - half, abs=0.01)
    assert iv["hi"] == pytest.approx(x.mean() + half, abs=0.01)
    assert S.bootstrap_mean(x, unit="item", n_resamples=500, seed=3) == S.bootstrap_mean(x, unit="item", n_resamples=500, seed=3)


def test_paired_difference_and_degenerate_samples():
    a, b = [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]
    iv = S.paired_bootstrap_diff(a, b, unit="seed")
    assert (iv["lo"], iv["hi"]) == (0.0, 0.0)     # no spread: the single value, not a made-up width
    iv = S.paired_bootstrap_diff([1.0, 2.0, 3.5, 4.0], [0.0, 1.5, 2.0, 3.0], unit="seed", n_resamples=4000)
    d = np.array([1.0, 0.5, 1.5, 1.0])
    assert d.min() <= iv["lo"] <= d.mean() <= iv["hi"] <= d.max()


@pytest.mark.parametrize("call", [lambda: S.wilson(3, 0), lambda: S.wilson(11, 10),
                                  lambda: S.t_interval([1.0], unit="seed"),
                                  lambda: S.bootstrap_mean([1.0, float("nan")], unit="item"),
                                  lambda: S.paired_bootstrap_diff([1.0, 2.0], [1.0], unit="seed"),
                                  lambda: S.interval_record(2.0, 1.0, method="x", n=1, unit="seed"),
                                  lambda: S.interval_record(1.0, 2.0, method="x", n=3, unit="prompt"),
                                  lambda: S.cluster_bootstrap([[1.0, 2.0]]),
                                  lambda: S.seed_interval([1.0, 1.0], counts=[(3, 4)]),
                                  lambda: S.replicate_record([1.0, 2.0], unit="seed", ids=[0]),
                                  lambda: S.holds_record([], unit="seed")])
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()


def test_cluster_bootstrap_variance_matches_the_two_stage_closed_form():
    """Var* of the mean of resampled seed means, seeds drawn with replacement and then items
    within each: (1/S) [Var_seeds(ȳ_j) + mean_j(σ_j² / m_j)], both with ddof = 0."""
    groups = [[0.0, 1.0, 1.0, 0.0, 1.0], [2.0, 2.5, 3.0], [1.0, 1.5, 0.5, 1.0], [4.0, 3.0]]
    means = np.array([np.mean(g) for g in groups])
    within = np.array([np.var(g) / len(g) for g in groups])
    expect = (np.var(means) + within.mean()) / len(groups)
    dist = S.cluster_bootstrap_distribution(groups, n_resamples=40000, seed=1)
    assert dist.mean() == pytest.approx(means.mean(), abs=0.01)
    assert dist.var() == pytest.approx(expect, rel=0.03)


def test_cluster_bootstrap_on_a_case_enumerated_by_hand():
    """Two seeds, items {0, 2} and {4}: a resample draws two seeds (4 equally likely ordered
    pairs), and each draw of seed A resamples its two items, mean 0, 1 or 2 w.p. 1/4, 1/2, 1/4.
    Mean of seed means over the 4 seed pairs:
      (A, A): (a1 + a2)/2, a_i iid in {0: 1/4, 1: 1/2, 2: 1/4}: values 0,.5,1,1.5,2 w.p. 1,4,6,4,1 /16
      (A, B), (B, A): (a + 4)/2: 2, 2.5, 3 w.p. 1/4, 1/2, 1/4
      (B, B): 4
    so P(T* <= 0) = 1/64, P(T* <= 1.5) = (15/16)/4 = 15/64, P(T* >= 3) = 1/8 + 1/4 = 24/64."""
    dist = S.cluster_bootstrap_distribution([[0.0, 2.0], [4.0]], n_resamples=64000, seed=2)
    assert np.mean(dist <= 0.0) == pytest.approx(1 / 64, abs=0.003)
    assert np.mean(dist <= 1.5) == pytest.approx(15 / 64, abs=0.006)
    assert np.mean(dist >= 3.0) == pytest.approx(24 / 64, abs=0.006)
    iv = S.cluster_bootstrap([[0.0, 2.0], [4.0]], n_resamples=64000, seed=2)
    # 2.5% quantile: P(T* <= 0) = 1/64 < 0.025 < P(T* <= 0.5) = 5/64, so 0.5; 97.5%: P(T* = 4) = 1/4
    assert (iv["lo"], iv["hi"], iv["n"], iv["n_inner"], iv["unit"]) == (0.5, 4.0, 2, 3, "seed")


def test_seed_interval_is_scipys_t_and_widens_only_a_zero_width_one():
    x = [0.62, 0.55, 0.71]
    lo, hi = st.t.interval(0.99, 2, loc=np.mean(x), scale=st.sem(x))
    iv = S.seed_interval(x, 0.99, counts=[(62, 100), (55, 100), (71, 100)])
    assert (iv["lo"], iv["hi"], iv["method"]) == (pytest.approx(lo), pytest.approx(hi), "t")
    iv = S.seed_interval([0.5, 0.5, 0.5], counts=[(32, 64)] * 3)
    w = S.wilson(96, 192)
    assert (iv["lo"], iv["hi"], iv["n"], iv["n_inner"]) == (w["lo"], w["hi"], 3, 192)
    # values in percent: the Wilson bounds in the same unit, through the replicate record too
    rec = S.replicate_record([50.0] * 3, unit="seed", counts=[(32, 64)] * 3, count_scale=100.0)
    iv = S.interval_from_replicates(rec)
    assert (iv["lo"], iv["hi"]) == (pytest.approx(100 * w["lo"]), pytest.approx(100 * w["hi"]))


def test_holds_record_is_the_exact_binomial_interval():
    rec = S.holds_record([True, True, False, True, True], unit="seed", level=0.9)
    ci = st.binomtest(4, 5).proportion_ci(confidence_level=0.9, method="exact")
    assert (rec["k"], rec["n"], rec["lo"], rec["hi"]) == (4, 5, ci.low, ci.high)
    # Clopper-Pearson closed form at k = n: lower bound (alpha/2)^(1/n)
    assert S.holds_record([True] * 8, unit="seed")["lo"] == pytest.approx(0.025 ** (1 / 8))


def test_seeds_needed_is_the_first_n_whose_interval_excludes_the_threshold():
    x = [0.1, 0.3, 0.2, 0.25]
    n = S.seeds_needed(x, 0.1, 0.95)
    sd, gap = np.std(x, ddof=1), np.mean(x) - 0.1
    assert st.t.ppf(0.975, n - 1) * sd / np.sqrt(n) < gap
    assert st.t.ppf(0.975, n - 2) * sd / np.sqrt(n - 1) >= gap
    assert S.seeds_needed([0.1, 0.1, 0.1], 0.0, 0.95) is None        # no spread: cannot be estimated
    assert S.seeds_needed([0.1, 0.3], 0.2, 0.95) is None              # mean on the threshold
