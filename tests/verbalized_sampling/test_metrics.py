"""Diversity metrics against closed forms and the rouge-score reference implementation."""
from __future__ import annotations

import math

import numpy as np
import pytest

from methods.verbalized_sampling import metrics as M

TEXTS = ["the cat sat on the mat", "the dog sat on a log", "a cat and a dog",
         "the cat sat on the mat", "one two three four five six seven"]


def test_rouge_l_matches_rouge_score_package():
    from rouge_score import rouge_scorer

    sc = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    for a in TEXTS:
        for b in TEXTS:
            assert M.rouge_l_f1(a, b) == pytest.approx(sc.score(a, b)["rougeL"].fmeasure, abs=1e-12)
    pairs = [(i, j) for i in range(len(TEXTS)) for j in range(i + 1, len(TEXTS))]
    ref = np.mean([sc.score(TEXTS[i], TEXTS[j])["rougeL"].fmeasure for i, j in pairs])
    assert M.mean_pairwise_rouge_l(TEXTS) == pytest.approx(ref, abs=1e-12)


def test_distinct_n_closed_forms():
    # "the cat sat on the mat": 6 unigrams, 5 unique; 5 bigrams, all unique
    assert M.distinct_n_intra(["the cat sat on the mat"], 1) == pytest.approx(5 / 6)
    assert M.distinct_n_intra(["the cat sat on the mat"], 2) == pytest.approx(1.0)
    assert M.distinct_n_intra(["a a a a", "b c"], 1) == pytest.approx((1 / 4 + 1) / 2)
    # corpus: two identical responses halve the distinct fraction
    assert M.distinct_n_corpus(["x y z", "x y z"], 2) == pytest.approx(2 / 4)
    assert M.distinct_n_corpus(["a b", "c d"], 1) == pytest.approx(1.0)


def test_semantic_diversity_closed_forms():
    e = np.eye(4)
    assert M.semantic_diversity(e) == pytest.approx(100.0)
    assert M.semantic_diversity(np.ones((3, 5))) == pytest.approx(0.0, abs=1e-12)
    # cos = 0.6 between the two vectors; negative cosines are clipped to 0 -> distance 1
    a = np.array([[1.0, 0.0], [0.6, 0.8]])
    assert M.semantic_diversity(a) == pytest.approx(40.0)
    assert M.semantic_diversity(np.array([[1.0, 0.0], [-1.0, 0.0]])) == pytest.approx(100.0)
    # pooled: pair-weighted mean over prompts (3 pairs at 100, 1 pair at 40)
    assert M.pooled_semantic_diversity([np.eye(3), a]) == pytest.approx((300 + 40) / 4)


def test_coverage_kl_validity_closed_forms():
    valid, p = ["a", "b", "c", "d"], [0.4, 0.3, 0.2, 0.1]
    s = ["a", "a", "b", "zzz"]
    assert M.coverage(s, valid) == 0.5
    assert M.validity(s, valid) == 0.75
    assert M.unique_valid_fraction(s, valid) == 0.5
    q = np.array([2 / 3, 1 / 3])
    assert M.kl_to_reference(s, valid, p) == pytest.approx(
        float(np.sum(q * np.log(q / np.array([0.4, 0.3])))), abs=1e-12)
    samp = list(np.random.default_rng(0).choice(valid, 200000, p=p))
    assert M.kl_to_reference(samp, valid, p) < 1e-4  # matching distribution -> ~0


def test_expected_coverage_matches_monte_carlo():
    q = np.array([0.5, 0.2, 0.2, 0.05, 0.05])
    rng = np.random.default_rng(0)
    mc = np.mean([len(set(rng.choice(5, 6, p=q))) / 5 for _ in range(20000)])
    assert M.expected_coverage(q, 6) == pytest.approx(mc, abs=4 * 0.2 / math.sqrt(20000) + 2e-3)


def test_bootstrap_ratio_ci_contains_truth_and_is_ordered():
    num, den = [0.2, 0.25, 0.3, 0.15], [0.4, 0.4, 0.5, 0.3]
    r, lo, hi = M.bootstrap_ratio_ci(num, den, reps=4000)
    assert r == pytest.approx(np.mean(num) / np.mean(den))
    assert lo <= r <= hi < 1


def test_retention_gain_interval_is_a_paired_topic_bootstrap():
    """C4's interval: the same topic resample for all four runs, each run's diversity the pooled
    semantic diversity of the resampled topics (recomputed here with pooled_semantic_diversity,
    duplicates included), gain = retention(VS) − retention(Direct); percentile 95% interval."""
    from methods.verbalized_sampling.analysis import retention_gain_interval

    rng = np.random.default_rng(0)
    topics = [f"t{i}" for i in range(6)]
    embs = {(mo, me): {t: rng.normal(size=(int(rng.integers(3, 8)), 5)) + (2.0 if mo == "aligned" else 0.0)
                       for t in topics} for mo in ("base", "aligned") for me in ("direct", "vs_standard")}
    reps, seed = 300, 7
    iv = retention_gain_interval(embs, topics, reps, seed)
    idx = np.random.default_rng(seed).integers(0, len(topics), (reps, len(topics)))
    ref = []
    for row in idx:
        d = {k: M.pooled_semantic_diversity([embs[k][topics[i]] for i in row]) for k in embs}
        ref.append(d[("aligned", "vs_standard")] / d[("base", "vs_standard")]
                   - d[("aligned", "direct")] / d[("base", "direct")])
    lo, hi = np.quantile(ref, [0.025, 0.975])
    assert (iv["lo"], iv["hi"], iv["n"], iv["method"]) == (pytest.approx(lo, abs=1e-10), pytest.approx(hi, abs=1e-10),
                                                          6, "bootstrap")
    # identical base and aligned runs: every resample gives a gain of exactly 0
    same = {(mo, me): embs[("base", me)] for mo in ("base", "aligned") for me in ("direct", "vs_standard")}
    iv0 = retention_gain_interval(same, topics, reps, seed)
    assert iv0["lo"] == pytest.approx(0.0, abs=1e-12) and iv0["hi"] == pytest.approx(0.0, abs=1e-12)
    assert retention_gain_interval({k: v for k, v in embs.items() if k[1] == "direct"}, topics, reps, seed) is None


def test_claim_metrics_carry_one_seed_replicates_and_item_intervals():
    """C3a/C3b/C4 replicate over training seeds: the summary carries each as a one-value seed
    replicates record (this run is one trained base/aligned pair), the topic bootstraps as
    item-level intervals, and the claims engine reads them as n < 3, not as evidence."""
    from pathlib import Path

    from methods.core.claims import evaluate_claims, load_claims
    from methods.verbalized_sampling.analysis import claim_metrics
    from methods.verbalized_sampling.config import AnalysisConfig

    theory = {"sharpen": [{"gamma_closed_form": 2.0, "gamma_theory": 2.0, "gamma_dpo": 2.0}],
              "alpha": {"alpha_hat": 0.6, "alpha_se": 0.1, "alpha_p": 0.01}, "dpo_beta": 0.25}
    rows = [
        {"model": mo, "method": me, "unique_valid": uv, "validity": 0.9,
         "unique_valid_per_topic": [uv, uv + 0.1, uv - 0.05]}
        for mo, me, uv in (("base", "direct", 0.5), ("base", "vs_standard", 0.6),
                           ("aligned", "direct", 0.3), ("aligned", "vs_standard", 0.45))]
    cfg = AnalysisConfig(sim_repeats=2, sim_n=3, sim_thresholds=[-1, 0.2], bootstrap=200, embed=False, seed=0)
    m = claim_metrics(theory, rows, 1.7, [{"coverage": 0.3}, {"coverage": 0.5}], 0.6, cfg, base_slope=0.9)
    rep = m["replicates"]
    assert rep["c3_gamma_hat"] == {"unit": "seed", "values": [1.7]}
    assert rep["c3_direct_unique_ratio"]["values"] == pytest.approx([m["c3_direct_unique_ratio"]])
    assert rep["c4_retention_gain"]["values"] == pytest.approx([0.45 / 0.6 - 0.3 / 0.5])
    assert m["intervals"]["c3_direct_unique_ratio"]["unit"] == "item"
    spec = load_claims(Path(__file__).resolve().parents[2] / "methods/verbalized_sampling/claims.yaml")
    rows_ = {r["id"]: r for r in evaluate_claims(spec, m, "tiny")["claims"]}
    for cid in ("C3a", "C3b", "C4"):
        assert rows_[cid]["verdict"] == "inconclusive" and rows_[cid]["undecided_by"] == "n < 3", rows_[cid]
