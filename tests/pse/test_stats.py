"""Statistics against scipy and closed forms."""
import numpy as np
import pytest
from scipy.stats import binomtest

from methods.pse.stats import compounding, fit_hazard, slope_ci, wilson


@pytest.mark.parametrize("k,n", [(0, 10), (3, 10), (10, 10), (7, 20), (137, 400), (1, 3)])
def test_wilson_matches_scipy(k, n):
    ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    lo, hi = wilson(k, n, 0.95)
    assert lo == pytest.approx(ref.low, abs=1e-12) and hi == pytest.approx(ref.high, abs=1e-12)
    ref99 = binomtest(k, n).proportion_ci(confidence_level=0.99, method="wilson")
    assert wilson(k, n, 0.99) == pytest.approx((ref99.low, ref99.high), abs=1e-12)


def test_compounding_closed_form_card_numbers():
    """Our planted parameters: per-hop propagation 0.7, base rate 0.25 → 0.25, 0.381, 0.450, 0.486 (1.95×)."""
    c = compounding(0.25, 0.7, 0.25, 4)
    assert c == pytest.approx([0.25, 0.38125, 0.45015625, 0.48633203125], abs=1e-12)
    assert c[-1] / c[0] == pytest.approx(1.9453, abs=1e-4)
    # fixed point of the recursion: c* = q / (1 − p(1 − q))
    assert compounding(0.25, 0.7, 0.25, 200)[-1] == pytest.approx(0.25 / (1 - 0.7 * 0.75), abs=1e-12)


def test_compounding_monte_carlo():
    """The recursion is the law of independent carry (p) / re-injection (q) per stage."""
    rng = np.random.default_rng(0)
    n, p, q = 200_000, 0.5, 0.4
    c = rng.random(n) < q
    rates = [c.mean()]
    for _ in range(3):
        c = (c & (rng.random(n) < p)) | (rng.random(n) < q)
        rates.append(c.mean())
    assert rates == pytest.approx(compounding(q, p, q, 4), abs=4e-3)


def test_fit_hazard_exact_and_sampled():
    t = np.arange(1, 11)
    n = 10_000
    counts = np.round(n * 0.6 * (1 - 0.3) ** t).astype(int)
    s, h = fit_hazard(list(counts), n)
    assert (s, h) == pytest.approx((0.6, 0.3), abs=2e-3)
    rng = np.random.default_rng(1)
    s, h = fit_hazard(list(rng.binomial(n, 0.8 * (1 - 0.1) ** t)), n)
    assert (s, h) == pytest.approx((0.8, 0.1), abs=0.02)


def test_slope_ci():
    const = np.ones((50, 10))
    b, lo, hi = slope_ci(const)
    assert b == 0 and lo <= 0 <= hi
    rng = np.random.default_rng(2)
    t = np.arange(1, 11)
    y = (rng.random((2000, 10)) < 0.9 - 0.05 * t).astype(float)  # slope −0.05
    b, lo, hi = slope_ci(y)
    assert b == pytest.approx(-0.05, abs=0.005) and lo < -0.05 < hi and hi < 0


@pytest.mark.parametrize("seed,k,n,p", [(0, 2, 200, 0.5), (1, 2, 50, 0.1), (2, 3, 300, 0.3), (3, 2, 17, 0.8)])
def test_cohen_kappa_matches_sklearn(seed, k, n, p):
    """Two raters: b copies a with probability 1 − p, else draws a random label."""
    from sklearn.metrics import cohen_kappa_score

    from methods.pse.stats import cohen_kappa

    rng = np.random.default_rng(seed)
    a = rng.integers(0, k, n)
    b = np.where(rng.random(n) < p, rng.integers(0, k, n), a)
    assert cohen_kappa(a.tolist(), b.tolist()) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    assert cohen_kappa(a.tolist(), b.tolist()) == pytest.approx(cohen_kappa(b.tolist(), a.tolist()), abs=1e-12)


def test_cohen_kappa_closed_forms():
    from methods.pse.stats import cohen_kappa

    assert cohen_kappa([0, 1, 1, 0], [0, 1, 1, 0]) == 1.0
    # p_o = 0.5, p_e = 0.5 (balanced, independent-looking) -> 0
    assert cohen_kappa([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(0.0, abs=1e-15)
    # always disagreeing on balanced labels -> −1
    assert cohen_kappa([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0, abs=1e-15)
    assert np.isnan(cohen_kappa([1, 1, 1], [1, 1, 1]))  # p_e = 1: undefined (sklearn: nan too)
    with pytest.raises(ValueError):
        cohen_kappa([1, 0], [1])


def test_ratio_interval_matches_scipy_bootstrap():
    """The last/first stage factor's percentile bootstrap against scipy.stats.bootstrap (paired,
    resampling pipelines): both estimate the same percentiles (Monte Carlo tolerance 0.03)."""
    from scipy.stats import bootstrap

    from methods.pse.analysis import ratio_interval

    rng = np.random.default_rng(4)
    first = (rng.random(400) < 0.25).astype(float)
    last = np.maximum(first * (rng.random(400) < 0.7), (rng.random(400) < 0.3)).astype(float)
    ours = ratio_interval(first, last, 0.95, n_resamples=20000)
    ref = bootstrap((first, last), lambda a, b: b.mean() / a.mean(), paired=True, vectorized=False,
                    method="percentile", n_resamples=20000, random_state=np.random.default_rng(1)).confidence_interval
    assert ours["lo"] == pytest.approx(ref.low, abs=0.03) and ours["hi"] == pytest.approx(ref.high, abs=0.03)
    assert ours["lo"] < last.mean() / first.mean() < ours["hi"]
    same = ratio_interval(np.ones(10), np.ones(10), 0.95)
    assert same["lo"] == same["hi"] == 1.0
