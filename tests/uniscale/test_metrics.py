"""UniScale's claim metrics on constructed bandit runs: the per-seed values (min over weightings)
as `replicates` records, C4's t interval over seeds folded at 0 against scipy's t quantile by
hand, and the guard metrics."""
import numpy as np
import pytest
from scipy.stats import t as student_t

from methods.uniscale.analysis import metrics
from methods.uniscale.config import BanditConfig

T = 40


def _cfg():
    return BanditConfig(alpha=1.0, lam=1.0, weights={"cost": [0.1, 0.1, 0.8], "quality": [0.4, 0.4, 0.2]},
                        policies=["uis_linucb", "route_linucb", "tts_linucb", "random"], seeds=[0, 1, 2],
                        route_tts="greedy", tts_model="M", knn_k=10, feat_dim=16, switch_frac=0.5, cost_norm=None)


def _runs(level):
    """Runs whose reward is constant per (weights, policy, seed): level[(w, p)][seed]."""
    runs = []
    for (w, p), by_seed in level.items():
        for s, v in enumerate(by_seed):
            arm = [s % 2] * T if w == "cost" else [1] * T
            runs.append({"weights": w, "policy": p, "seed": s, "reward": [v] * T, "oracle": [1.0] * T, "arm": arm})
    return {"arms": ["a", "b"], "T": T, "cost_norm": [0, 1], "runs": runs}


def _t(d):
    d = np.asarray(d, float)
    half = student_t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
    return d.mean() - half, d.mean() + half


def test_seed_intervals_by_hand():
    level = {("cost", "uis_linucb"): [0.60, 0.64, 0.59], ("cost", "route_linucb"): [0.55, 0.58, 0.56],
             ("cost", "tts_linucb"): [0.50, 0.52, 0.49], ("cost", "random"): [0.40, 0.41, 0.42],
             ("quality", "uis_linucb"): [0.70, 0.66, 0.71], ("quality", "route_linucb"): [0.69, 0.70, 0.70],
             ("quality", "tts_linucb"): [0.60, 0.61, 0.62], ("quality", "random"): [0.50, 0.52, 0.50],
             ("dynamic", "uis_linucb"): [0.69, 0.68, 0.72]}
    areas = {"area_unified": 0.5, "area_route": 0.5, "area_tts": 0.3}
    m, _ = metrics(_runs(level), areas, _cfg())
    gap = {w: np.subtract(level[(w, "uis_linucb")], level[(w, "route_linucb")]) for w in ("cost", "quality")}
    # per seed: the smaller gap over the weightings; the metric is their mean over the seeds
    per_seed = np.minimum(gap["cost"], gap["quality"])
    rec = m["replicates"]["c1_uis_minus_best_restricted"]
    assert rec["unit"] == "seed" and rec["ids"] == [0, 1, 2]
    assert rec["values"] == pytest.approx(per_seed.tolist(), abs=1e-12)
    assert m["c1_uis_minus_best_restricted"] == pytest.approx(per_seed.mean(), abs=1e-12)
    assert m["c1_uis_minus_best_restricted"] <= min(g.mean() for g in gap.values()) + 1e-12
    rnd = np.minimum(*(np.subtract(level[(w, "uis_linucb")], level[(w, "random")]) for w in ("cost", "quality")))
    assert m["replicates"]["c1_uis_minus_random"]["values"] == pytest.approx(rnd.tolist(), abs=1e-12)
    assert "c1_uis_minus_best_restricted" not in m["intervals"]   # one source: the replicates
    # C2 per seed: regret T/2·(1 − r) in each half, ratio 1 for constant rewards
    assert m["replicates"]["c2_regret_half_ratio"]["values"] == pytest.approx([1.0] * 3, abs=1e-9)
    # the claims engine computes the t interval over the three seeds from the record
    from methods.core.claims import evaluate_claims, load_claims

    rows = {r["id"]: r for r in evaluate_claims(load_claims("methods/uniscale/claims.yaml"), m, "tiny")["claims"]}
    lo, hi = _t(per_seed)
    assert rows["C1a"]["n"] == 3 and rows["C1a"]["interval"]["unit"] == "seed"
    assert rows["C1a"]["interval"]["level"] == 0.95
    assert rows["C1a"]["interval"]["lo"] == pytest.approx(lo, abs=1e-12)
    assert rows["C1a"]["interval"]["hi"] == pytest.approx(hi, abs=1e-12)
    # C4: dynamic − quality-static per seed = (−0.01, 0.02, 0.01): mean 0.00667, t interval straddles 0
    d = np.subtract(level[("dynamic", "uis_linucb")], level[("quality", "uis_linucb")])
    assert m["c4_dynamic_gap"] == pytest.approx(abs(d.mean()), abs=1e-12)
    lo, hi = _t(d)
    assert lo < 0 < hi
    assert m["intervals"]["c4_dynamic_gap"]["lo"] == 0.0 and m["intervals"]["c4_dynamic_gap"]["unit"] == "seed"
    assert m["per_seed"]["c4_dynamic_signed_gap"] == pytest.approx(d.tolist(), abs=1e-12)
    assert m["intervals"]["c4_dynamic_gap"]["hi"] == pytest.approx(max(-lo, hi), abs=1e-12)
    # guards: oracle 1.0 vs random; cost-static arms (s % 2) vs quality-static arms (1): seeds 0, 2 differ
    assert m["c1_oracle_minus_random"] == pytest.approx(min(1 - np.mean(level[("cost", "random")]),
                                                            1 - np.mean(level[("quality", "random")])), abs=1e-12)
    assert m["c4_weights_change_choice"] == pytest.approx(2 / 3, abs=1e-12)
    # regret in the first half: T/2 · (1 − seed-mean UIS reward), the smaller over weightings (quality)
    assert m["c2_first_half_regret"] == pytest.approx(T / 2 * (1 - np.mean(level[("quality", "uis_linucb")])), abs=1e-9)


def test_fold_of_a_negative_interval():
    level = {(w, p): v for w in ("cost", "quality") for p, v in
             (("uis_linucb", [0.6, 0.6, 0.6]), ("route_linucb", [0.5] * 3), ("tts_linucb", [0.4] * 3), ("random", [0.3] * 3))}
    level[("dynamic", "uis_linucb")] = [0.50, 0.52, 0.51]   # always below the quality-static 0.6
    m, _ = metrics(_runs(level), {"area_unified": 0.5, "area_route": 0.5, "area_tts": 0.3}, _cfg())
    lo, hi = _t(np.subtract([0.50, 0.52, 0.51], 0.6))
    assert hi < 0
    assert m["intervals"]["c4_dynamic_gap"]["lo"] == pytest.approx(-hi, abs=1e-12)
    assert m["intervals"]["c4_dynamic_gap"]["hi"] == pytest.approx(-lo, abs=1e-12)
