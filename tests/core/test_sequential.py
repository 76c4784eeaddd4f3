"""methods/core/sequential.py: alpha spending over planned looks, checked by simulation of the
whole sequential rule (t intervals over seeds at each look's level, stop at the first look
whose interval excludes the threshold)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as st

from methods.core import sequential as Q

LOOKS = [3, 5, 8, 12]


def test_spending_adds_up_to_alpha_and_follows_the_hsd_family():
    a = Q.look_alphas(LOOKS)
    assert sum(a) == pytest.approx(0.05, abs=1e-12) and all(x > 0 for x in a)
    # Hwang-Shih-DeCani, gamma = -2: alpha (1 - e^{2t}) / (1 - e^{2}) at t = 3/12
    assert a[0] == pytest.approx(0.05 * (1 - np.exp(0.5)) / (1 - np.exp(2.0)), rel=1e-12)
    assert a[-1] > a[0]                                    # more error left for the cap than the first look
    assert Q.look_level(LOOKS, 3) == pytest.approx(1 - a[3])
    assert Q.look_alphas([5]) == [pytest.approx(0.05)]     # one look: the plain 95 % interval
    assert Q.spent(0.5, gamma=0) == pytest.approx(0.025)
    for bad in ([], [3, 3], [0, 2], [3, 2], [3.0, 5], "3,5"):
        with pytest.raises(ValueError):
            Q.check_looks(bad)
    with pytest.raises(ValueError):
        Q.look_level(LOOKS, 4)


def simulate(effect: float, runs: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Fraction of sequential runs that decide (an interval excludes 0), and the mean seeds used;
    per-seed values ~ N(effect, 1), so `effect` is in between-seed SDs from the threshold."""
    x = np.random.default_rng(seed).normal(effect, 1.0, size=(runs, LOOKS[-1]))
    decided = np.zeros(runs, bool)
    used = np.full(runs, LOOKS[-1])
    for k, n in enumerate(LOOKS):
        level = Q.look_level(LOOKS, k)
        m, se = x[:, :n].mean(1), x[:, :n].std(1, ddof=1) / np.sqrt(n)
        half = st.t.ppf(0.5 + level / 2, n - 1) * se
        new = ~decided & ((m - half > 0) | (m + half < 0))
        used[new] = n
        decided |= new
    return float(decided.mean()), float(used.mean())


def test_a_true_effect_at_the_threshold_is_decided_at_most_5_percent_of_the_time():
    rate, _ = simulate(0.0)
    assert rate <= 0.05


def test_an_effect_of_one_between_seed_sd_is_decided_at_least_80_percent_of_the_time():
    rate, used = simulate(1.0)
    assert rate >= 0.80
    assert used < LOOKS[-1]                 # and it stops early on average


def test_seed_schedule_and_next_look():
    seeds = list(range(100, 112))
    assert Q.seeds_at(seeds, LOOKS, 0) == [100, 101, 102] and Q.seeds_at(seeds, LOOKS, 3) == seeds
    with pytest.raises(ValueError, match="need 12 seeds"):
        Q.seeds_at(seeds[:8], LOOKS, 0)
    row = {"kind": "headline", "verdict": "inconclusive", "undecided_by": "interval straddles", "id": "A"}
    decided = {**row, "verdict": "reproduced", "undecided_by": None, "id": "B"}
    guard = {**row, "undecided_by": "guard failed", "id": "C"}
    mech = {**row, "kind": "mechanism", "id": "D"}
    assert Q.next_look([row, decided], LOOKS, 0) == 1
    assert Q.next_look([decided, guard, mech], LOOKS, 0) is None    # more seeds cannot decide these
    assert Q.next_look([row], LOOKS, 3) is None                        # the cap
