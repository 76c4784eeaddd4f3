"""Claim metrics of the RaBitQCache report on hand-made results: the quality metrics are
always emitted; with one model their (report-only) intervals equal a direct scipy bootstrap over
prompts, with several the claim value is the mean of the per-model values, its replicates record
holds those values (unit seed) and the claims' interval is a scipy t interval over them; the guards (dense EM, random selection) turn a model that does not
retrieve, or a selection that does not matter, into `inconclusive` verdicts instead of
special-cased metrics, and they must hold in every model."""
import numpy as np
import pytest
from scipy import stats
from scipy.stats import bootstrap

from methods.core.claims import evaluate_claims, load_claims
from methods.rabitqcache.analysis import AnalysisConfig, summary_metrics

EST = {"bias_frac_within_3sem_fp": 1.0, "bias_frac_within_3sem_int4_rand": 0.98, "bias_frac_within_3sem_int4_det": 0.99,
       "n_pairs": 256, "rotations": 200, "coverage": 0.947, "coverage_closed_form": 0.946, "eps0": 1.9,
       "head_dim": 64, "ip_ob_mean": 0.801, "ip_ob_uniform_mean": 0.801, "rmse_ratio_centred_over_uncentred": 0.86,
       "rmse_fp": 9.3, "rmse_fp_uncentred": 10.7}


def _method(em, agree, recall=0.8, budget=0.2):
    return {"em": float(np.mean(em)), "em_per_prompt": list(map(float, em)), "top1_agree": float(np.mean(agree)),
            "agree_per_prompt": list(map(float, agree)), "kl": 1e-3, "recall": recall, "recall_mid": recall - 0.1,
            "budget": budget, "budget_cv": 0.9, "io": 0.37, "n_prompts": len(em)}


def _methods(dense_em, rq_em, rnd_em, rq_agree, rnd_agree):
    return {"dense": _method(dense_em, np.ones(len(dense_em))), "rabitq_p0.85": _method(rq_em, rq_agree),
            "quest_at_p0.85": _method(rq_em, rq_agree, 0.78), "oracle_at_p0.85": _method(rq_em, rq_agree, 0.83),
            "rabitq_fpq_p0.85": _method(rq_em, rq_agree, 0.801), "rabitq_nocenter_p0.85": _method(rq_em, rq_agree, 0.79),
            "random_at_p0.85": _method(rnd_em, rnd_agree, 0.4)}


def _verdicts(s):
    rows = evaluate_claims(load_claims("methods/rabitqcache/claims.yaml"), s, "tiny")["claims"]
    return {r["id"]: r for r in rows}


def test_quality_metrics_and_their_intervals():
    rng = np.random.default_rng(0)
    dense = (rng.random(64) < 0.9).astype(float)
    rq = dense.copy()
    rq[:2] = 0.0
    agree = np.clip(rng.normal(0.97, 0.02, 64), 0, 1)
    s = summary_metrics(AnalysisConfig(), EST, {"s0": _methods(dense, rq, np.zeros(64), agree, np.full(64, 0.6))})
    assert s["c6a_em_minus_dense"] == pytest.approx(rq.mean() - dense.mean(), abs=1e-12)
    assert s["c6a_em_loss"] == pytest.approx(dense.mean() - rq.mean(), abs=1e-12)
    assert s["dense_minus_random_em_min"] == pytest.approx(dense.mean(), abs=1e-12)
    ref = bootstrap((dense - rq,), np.mean, confidence_level=0.95, n_resamples=2000, method="percentile",
                    random_state=np.random.default_rng(0)).confidence_interval
    iv = s["intervals"]["c6a_em_loss"]
    assert (iv["lo"], iv["hi"]) == pytest.approx((ref.low, ref.high), abs=1e-12) and iv["unit"] == "item"
    ref = bootstrap((agree,), np.mean, confidence_level=0.95, n_resamples=2000, method="percentile",
                    random_state=np.random.default_rng(0)).confidence_interval
    iv = s["intervals"]["c6c_top1_agree"]
    assert (iv["lo"], iv["hi"]) == pytest.approx((ref.low, ref.high), abs=1e-12)
    lost = int(((dense == 1) & (rq == 0)).sum())
    assert s["replicates"]["c6a_em_loss"] == {"unit": "seed", "values": [pytest.approx(lost / 64, abs=1e-12)],
                                              "counts": [[lost, 64]], "ids": ["s0"]}
    v = _verdicts(s)
    # one model: the claims replicate over seeds, the prompts of one model do not decide them
    assert v["C6a"]["verdict"] == v["C6c"]["verdict"] == "inconclusive"
    assert v["C6a"]["undecided_by"] == "n < 3" and not v["C6a"]["note"].startswith("guard")


def test_a_model_that_does_not_retrieve_makes_quality_claims_inconclusive():
    z = np.zeros(64)
    s = summary_metrics(AnalysisConfig(), EST, {"s0": _methods(z, z, z, np.ones(64), np.ones(64))})
    assert s["c6a_em_minus_dense"] == 0 and s["c6c_top1_agree"] == 1.0   # emitted, not withheld
    v = _verdicts(s)
    for cid in ("C6a", "C6c"):
        assert v[cid]["verdict"] == "inconclusive"
        assert "dense_em_min" in v[cid]["note"]
    assert "random_top1_agree_max" in v["C6c"]["note"]       # random selection agrees too


def test_random_selection_that_agrees_is_a_guard_not_a_special_case():
    one = np.ones(64)
    runs = {f"s{i}": _methods(one, one, np.zeros(64), one, np.full(64, 0.96)) for i in range(3)}
    s = summary_metrics(AnalysisConfig(), EST, runs)
    v = _verdicts(s)
    # EM kept in every model (zero-width over seeds), random loses it: decided by the Wilson
    # interval of the 192 pooled prompts, [0, 0.0197] < 0.05
    assert s["replicates"]["c6a_em_loss"]["counts"] == [[0, 64]] * 3
    assert v["C6a"]["verdict"] == "reproduced" and v["C6a"]["n"] == 3 and v["C6a"]["n_inner"] == 192
    assert v["C6a"]["interval"]["hi"] == pytest.approx(stats.binomtest(0, 192).proportion_ci(method="wilson").high)
    assert v["C6c"]["verdict"] == "inconclusive" and "random_top1_agree_max" in v["C6c"]["note"]


def test_em_loss_counts_only_where_they_equal_the_loss():
    rng = np.random.default_rng(3)
    dense = (rng.random(64) < 0.9).astype(float)
    rq = dense.copy()
    rq[np.flatnonzero(dense)[:3]] = 0.0           # three prompts lost
    runs = {f"s{i}": _methods(dense, rq, np.zeros(64), np.ones(64), np.full(64, 0.5)) for i in range(3)}
    s = summary_metrics(AnalysisConfig(), EST, runs)
    rec = s["replicates"]["c6a_em_loss"]
    assert rec["counts"] == [[3, 64]] * 3 and rec["values"] == [pytest.approx(3 / 64)] * 3
    gained = rq.copy()
    gained[np.flatnonzero(dense == 0)[0]] = 1.0  # a prompt RaBitQ answers and dense misses
    runs["s1"] = _methods(dense, gained, np.zeros(64), np.ones(64), np.full(64, 0.5))
    s = summary_metrics(AnalysisConfig(), EST, runs)
    assert "counts" not in s["replicates"]["c6a_em_loss"]


def _model(rng, dense_p, agree_mean, recall, quest_recall):
    dense = (rng.random(64) < dense_p).astype(float)
    agree = np.clip(rng.normal(agree_mean, 0.02, 64), 0, 1)
    m = _methods(dense, dense, np.zeros(64), agree, np.full(64, 0.5))
    m["rabitq_p0.85"]["recall"], m["quest_at_p0.85"]["recall"] = recall, quest_recall
    return m


def test_several_models_pool_as_the_mean_with_a_t_interval_over_the_models():
    rng = np.random.default_rng(1)
    runs = {f"s{i}": _model(rng, 0.9, a, r, q) for i, (a, r, q) in enumerate([(0.97, 0.85, 0.84), (0.93, 0.83, 0.835),
                                                                              (0.99, 0.86, 0.82)])}
    s = summary_metrics(AnalysisConfig(), EST, runs)
    per = [m["rabitq_p0.85"]["top1_agree"] for m in runs.values()]
    assert s["c6c_top1_agree"] == pytest.approx(np.mean(per), abs=1e-12)
    assert s["replicates"]["c6c_top1_agree"] == {"unit": "seed", "values": per, "ids": ["s0", "s1", "s2"]}
    assert "c6c_top1_agree" not in s["intervals"]
    ref = stats.t.interval(0.95, len(per) - 1, loc=np.mean(per), scale=stats.sem(per))
    v = _verdicts(s)
    iv = v["C6c"]["interval"]
    assert (iv["lo"], iv["hi"]) == pytest.approx(ref, abs=1e-12) and iv["n"] == 3 and iv["unit"] == "seed"
    diffs = [0.85 - 0.84, 0.83 - 0.835, 0.86 - 0.82]
    assert s["c5a_recall_minus_quest"] == pytest.approx(np.mean(diffs), abs=1e-12)
    assert s["replicates"]["c5a_recall_minus_quest"]["values"] == pytest.approx(diffs, abs=1e-12)
    ref = stats.t.interval(0.95, 2, loc=np.mean(diffs), scale=stats.sem(diffs))
    assert (v["C5a"]["interval"]["lo"], v["C5a"]["interval"]["hi"]) == pytest.approx(ref, abs=1e-12)
    assert s["intervals"]["c7_io_ratio"]["unit"] == "seed" and "c7_io_ratio" not in s["replicates"]
    assert s["dense_em_min"] == min(m["dense"]["em"] for m in runs.values())
    assert s["per_model"]["s1"]["c6c_top1_agree"] == per[1]
    assert s["notes"]["c6c_top1_agree"].startswith("per model: s0 ")
    assert v["C5a"]["verdict"] == "inconclusive"          # the t interval straddles 0
    assert v["C6c"]["interval"]["n"] == 3


def test_a_guard_must_hold_in_every_model():
    rng = np.random.default_rng(2)
    z = np.zeros(64)
    runs = {"s0": _model(rng, 1.0, 0.99, 0.85, 0.8), "s1": _methods(z, z, z, np.ones(64), np.full(64, 0.5))}
    s = summary_metrics(AnalysisConfig(), EST, runs)
    assert np.mean([m["dense"]["em"] for m in runs.values()]) >= 0.5 and s["dense_em_min"] == 0.0
    v = _verdicts(s)
    assert v["C6a"]["verdict"] == v["C6c"]["verdict"] == "inconclusive"
    assert "dense_em_min" in v["C6a"]["note"]
