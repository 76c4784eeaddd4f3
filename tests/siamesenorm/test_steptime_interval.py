"""C4b's step-time ratio: per-round ratios of interleaved steps, their median and a bootstrap
interval over rounds, which the claim checker decides on (methods/siamesenorm/steptime.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import bootstrap

from methods.core.claims import evaluate_claims, load_claims
from methods.core.models import ModelConfig
from methods.siamesenorm import analysis as A
from methods.siamesenorm.steptime import StepTimeConfig, median_interval, time_schemes

from .test_pipeline import ANALYSIS, STEPTIME, _table

CLAIMS = Path(__file__).resolve().parents[2] / "methods" / "siamesenorm" / "claims.yaml"
SCHEMES = ["pre", "post", "post_pre"]
COST = {"pre": 1.0, "post": 0.9, "post_pre": 1.3}   # step seconds of each scheme on an idle machine


def fake_clock(cfg, load):
    """A clock on which the step of scheme s in round r takes COST[s] × load[r] seconds, assuming
    the order time_schemes promises: SCHEMES in rounds 0, 2, ..., reversed in rounds 1, 3, ..."""
    ticks, t = [], 0.0
    for r in range(cfg.warmup + cfg.rounds):
        for s in (SCHEMES if r % 2 == 0 else SCHEMES[::-1]):
            ticks += [t, t + COST[s] * load[r]]
            t += COST[s] * load[r] + 0.5
    it = iter(ticks)
    return lambda: next(it)


def test_per_round_ratio_cancels_the_load():
    cfg = StepTimeConfig(model=ModelConfig(d_model=16, n_layers=1, n_heads=2, d_ff=24), batch_size=2, seq_len=8,
                         vocab_size=20, warmup=1, rounds=9, seed=0, schemes=SCHEMES)
    load = [1.0, 4.0, 1.0, 1.0, 2.5, 1.0, 7.0, 1.0, 3.0, 1.0]    # a busy machine in some rounds
    res = time_schemes(cfg, clock=fake_clock(cfg, load))
    for s in SCHEMES:
        assert res["ratios_by_round"][s] == pytest.approx([COST[s] / COST["pre"]] * cfg.rounds, rel=1e-12)
        assert res["ratio_vs_pre"][s] == pytest.approx(COST[s], rel=1e-12)
        iv = res["ratio_interval"][s]
        assert iv["lo"] == pytest.approx(COST[s], rel=1e-9) and iv["hi"] == pytest.approx(COST[s], rel=1e-9)
        assert iv["n"] == cfg.rounds
        # the median ms per scheme is a median over loads: 1000 × COST × median(load of timed rounds)
        assert res["ms_per_step"][s] == pytest.approx(1000 * COST[s] * np.median(load[1:]), rel=1e-12)


def test_median_interval_is_scipys_percentile_bootstrap_of_the_median():
    x = np.random.default_rng(3).lognormal(0.2, 0.1, 25)
    iv = median_interval(x.tolist(), seed=4)
    ref = bootstrap((x,), np.median, confidence_level=0.95, n_resamples=2000, method="percentile",
                    random_state=np.random.default_rng(4)).confidence_interval
    assert (iv["lo"], iv["hi"]) == pytest.approx((ref.low, ref.high), rel=1e-12)
    assert iv["lo"] <= np.median(x) <= iv["hi"] and x.min() <= iv["lo"] and iv["hi"] <= x.max()
    assert median_interval([1.2, 1.2, 1.2]) == {"lo": 1.2, "hi": 1.2, "level": 0.95, "unit": "item",
                                                "method": "bootstrap (median of per-round ratios)", "n": 3}
    assert iv["unit"] == "item"       # the timing rounds of fixed models are the replicates


@pytest.mark.parametrize("lo,hi,verdict", [(1.10, 1.30, "reproduced"), (1.40, 1.60, "inconclusive"),
                                           (1.55, 1.70, "not_reproduced")])
def test_c4b_is_decided_by_the_interval(lo, hi, verdict):
    steptime = {**STEPTIME, "rounds": 20,
                "ratio_interval": {"post_pre": {"lo": lo, "hi": hi, "level": 0.95, "method": "bootstrap", "n": 20,
                                                "unit": "item"}}}
    m = A.claim_metrics(_table(), ANALYSIS, steptime, {"d_model": 8, "n_layers": 6})
    assert m["intervals"]["c4_step_time_ratio"]["lo"] == lo
    row = next(r for r in evaluate_claims(load_claims(CLAIMS), m, "tiny")["claims"] if r["id"] == "C4b")
    assert row["verdict"] == verdict and row["measured"] == 1.3
    if verdict == "inconclusive":
        assert "straddles or touches the threshold" in row["note"]


def test_c4b_without_an_interval_is_inconclusive():
    """A steptime.json from before the interval (no `ratio_interval`) is still read, but a
    mechanism claim is never decided by its point value alone."""
    m = A.claim_metrics(_table(), ANALYSIS, STEPTIME, {"d_model": 8, "n_layers": 6})
    assert "c4_step_time_ratio" not in m["intervals"]
    row = next(r for r in evaluate_claims(load_claims(CLAIMS), m, "tiny")["claims"] if r["id"] == "C4b")
    assert row["verdict"] == "inconclusive" and row["undecided_by"] == "no interval"
