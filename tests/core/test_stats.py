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
    iv = S.t_interval(x)
    assert (iv["lo"], iv["hi"]) == pytest.approx((lo, hi), abs=1e-12)


def test_bootstrap_mean_close_to_the_normal_interval_for_a_large_sample():
    x = np.random.default_rng(0).normal(1.0, 2.0, size=2000)
    iv = S.bootstrap_mean(x, n_resamples=4000)
    half = 1.96 * x.std(ddof=1) / math.sqrt(x.size)
    assert iv["lo"] == pytest.approx(x.mean() - half, abs=0.01)
    assert iv["hi"] == pytest.approx(x.mean() + half, abs=0.01)
    assert S.bootstrap_mean(x, n_resamples=500, seed=3) == S.bootstrap_mean(x, n_resamples=500, seed=3)


def test_paired_difference_and_degenerate_samples():
    a, b = [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]
    iv = S.paired_bootstrap_diff(a, b)
    assert (iv["lo"], iv["hi"]) == (0.0, 0.0)     # no spread: the single value, not a made-up width
    iv = S.paired_bootstrap_diff([1.0, 2.0, 3.5, 4.0], [0.0, 1.5, 2.0, 3.0], n_resamples=4000)
    d = np.array([1.0, 0.5, 1.5, 1.0])
    assert d.min() <= iv["lo"] <= d.mean() <= iv["hi"] <= d.max()


@pytest.mark.parametrize("call", [lambda: S.wilson(3, 0), lambda: S.wilson(11, 10), lambda: S.t_interval([1.0]),
                                  lambda: S.bootstrap_mean([1.0, float("nan")]),
                                  lambda: S.paired_bootstrap_diff([1.0, 2.0], [1.0]),
                                  lambda: S.interval_record(2.0, 1.0, method="x", n=1)])
def test_bad_input_raises(call):
    with pytest.raises(ValueError):
        call()
