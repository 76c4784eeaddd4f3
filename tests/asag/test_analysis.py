"""Claim metrics of the ASAG report on hand-made runs: the share of runs past the first ATP
(where ASAG's rule can differ from DEER's), the paired intervals against a direct numpy
bootstrap, the Wilson interval against scipy, and the tie guard (no run past the first ATP →
the ASAG-vs-DEER metric is declared inconclusive and its claims are not reproduced)."""
import numpy as np
import pytest
from scipy.stats import binomtest

from methods.asag.analysis import acc_diff_interval_pp, claim_metrics, frac_past_first_atp, len_ratio_interval
from methods.asag.config import AnalysisConfig
from methods.core.claims import evaluate_claims, load_claims
from methods.core.results import InputError

CFG = AnalysisConfig(vanilla="vanilla", nothink="nothink", deer="deer", asag="asag", nogate="asag_nogate",
                     prestudy_threshold=-0.1)


def _atp(C, dH, A, action="continue"):
    return {"pos": 10, "C": C, "A": A, "H": 1.0, "dH": dH, "trap": False, "action": action}


def _run(i, correct, tokens, n_atps, exit="natural", answer=None, dHs=None, gold=5):
    atps = [_atp(0.99, (dHs or [0.0] * n_atps)[k], gold if correct else gold + 1) for k in range(n_atps)]
    return {"i": i, "gold": gold, "correct": correct, "answer": gold if correct else gold + 1, "tokens": tokens,
            "exit": exit, "n_atps": n_atps, "atps": atps, "text": ""}


def _runs(rng, n=40, asag_atps=None):
    van = [_run(i, bool(rng.random() < 0.5), int(rng.integers(60, 100)), 3, dHs=[0.0, -0.2, 0.1]) for i in range(n)]
    deer = [_run(i, r["correct"], 20, 1, exit="first_atp") for i, r in enumerate(van)]
    if asag_atps is None:
        asag_atps = [int(rng.integers(1, 4)) for _ in range(n)]
    asag = [_run(i, bool(rng.random() < 0.5), 20 + 15 * (k - 1), k, exit="first_atp" if k == 1 else "confident")
            for i, k in enumerate(asag_atps)]
    noth = [_run(i, False, 4, 0, exit="nothink") for i in range(n)]
    return {"vanilla": van, "nothink": noth, "deer": deer, "asag": asag, "asag_nogate": [dict(r) for r in deer]}


def test_frac_past_first_atp_and_guard_metrics():
    rng = np.random.default_rng(0)
    runs = _runs(rng, asag_atps=[1] * 30 + [2] * 6 + [3] * 4)
    m = claim_metrics(runs, CFG)
    assert frac_past_first_atp(runs["asag"]) == pytest.approx(10 / 40, abs=0)
    assert m["asag_frac_past_first_atp"] == pytest.approx(0.25, abs=0)
    assert m["vanilla_acc"] == pytest.approx(np.mean([r["correct"] for r in runs["vanilla"]]), abs=1e-12)
    assert m["c4_nogate_equals_deer"] is True
    assert "inconclusive" not in m
    ans = {k: np.array([r["answer"] for r in runs[k]]) for k in ("asag", "vanilla", "deer")}
    assert m["asag_answer_differs_vs_vanilla"] == pytest.approx(np.mean(ans["asag"] != ans["vanilla"]), abs=1e-12)
    assert m["asag_answer_differs_vs_deer"] == pytest.approx(np.mean(ans["asag"] != ans["deer"]), abs=1e-12)
    # hand-made vanilla traces probe the final answer at every ATP: it never changes
    assert m["vanilla_answer_changes_frac"] == 0


def test_identical_answers_are_a_tie_not_a_result():
    """ASAG past the first ATP on every problem, but with DEER's and vanilla's answers: the
    accuracy differences are 0 by construction and the accuracy claims are inconclusive."""
    rng = np.random.default_rng(4)
    runs = _runs(rng, asag_atps=[3] * 40)
    for r, d in zip(runs["asag"], runs["deer"]):
        r["answer"], r["correct"] = d["answer"], d["correct"]
    m = claim_metrics(runs, CFG)
    assert m["asag_frac_past_first_atp"] == 1 and m["c2_acc_minus_deer_pp"] == 0
    rows = {r["id"]: r for r in evaluate_claims(load_claims("methods/asag/claims.yaml"), m, "tiny")["claims"]}
    assert rows["C2b"]["verdict"] == "inconclusive" and "asag_answer_differs_vs_deer" in rows["C2b"]["note"]


def test_intervals_match_a_direct_bootstrap_and_wilson():
    rng = np.random.default_rng(1)
    runs = _runs(rng)
    m = claim_metrics(runs, CFG)
    # ratio of means: resample problems in pairs, as numpy does here directly
    x = np.array([r["tokens"] for r in runs["asag"]], float)
    y = np.array([r["tokens"] for r in runs["vanilla"]], float)
    idx = np.random.default_rng(0).integers(0, len(x), (2000, len(x)))
    lo, hi = np.percentile(x[idx].mean(1) / y[idx].mean(1), [2.5, 97.5])
    iv = m["intervals"]["c1_len_ratio"]
    assert (iv["lo"], iv["hi"]) == pytest.approx((lo, hi), abs=1e-12)
    assert iv["lo"] <= m["c1_len_ratio"] <= iv["hi"]
    # paired accuracy difference in pp: scipy's percentile bootstrap of the per-problem differences
    from scipy.stats import bootstrap

    a = np.array([r["correct"] for r in runs["asag"]], float)
    b = np.array([r["correct"] for r in runs["deer"]], float)
    ref = bootstrap((a - b,), np.mean, confidence_level=0.95, n_resamples=2000, method="percentile",
                    random_state=np.random.default_rng(0)).confidence_interval
    iv = acc_diff_interval_pp(runs["asag"], runs["deer"])
    assert (iv["lo"], iv["hi"]) == pytest.approx((100 * ref.low, 100 * ref.high), abs=1e-9)
    assert m["intervals"]["c2_acc_minus_deer_pp"] == iv
    assert m["c2_acc_minus_deer_pp"] == pytest.approx(100 * (a.mean() - b.mean()), abs=1e-9)
    # pre-study: correct vanilla traces, ΔH after the first gold-hitting ATP (skipping the reference) = mean(-0.2, 0.1)
    pre = m["prestudy"]
    n_correct = sum(r["correct"] for r in runs["vanilla"])
    assert pre["n"] == n_correct and pre["k_below"] == 0 and pre["mean_dH"] == pytest.approx(-0.05, abs=1e-12)
    w = binomtest(0, n_correct).proportion_ci(0.95, method="wilson")
    assert (m["intervals"]["c3_prestudy_frac"]["lo"], m["intervals"]["c3_prestudy_frac"]["hi"]) == \
        pytest.approx((w.low, w.high), abs=1e-12)
    assert len_ratio_interval(runs["asag"], runs["vanilla"]) == m["intervals"]["c1_len_ratio"]
    assert {m["intervals"][k]["unit"] for k in m["intervals"]} == {"item"}


def test_claims_replicate_over_seeds_one_model_reads_n_below_3():
    rng = np.random.default_rng(5)
    runs = _runs(rng, asag_atps=[3] * 40)
    m = claim_metrics(runs, CFG)
    for k in ("c1_len_ratio", "c2_acc_minus_vanilla_pp", "c2_acc_minus_deer_pp", "c3_prestudy_frac"):
        assert m["replicates"][k] == {"unit": "seed", "values": [pytest.approx(m[k], abs=1e-12)]}
    rows = {r["id"]: r for r in evaluate_claims(load_claims("methods/asag/claims.yaml"), m, "tiny")["claims"]}
    assert rows["C1"]["verdict"] == "inconclusive" and rows["C1"]["undecided_by"] == "n < 3"
    assert rows["C3"]["undecided_by"] == "n < 3" and rows["C3"]["n"] == 1
    # NoThinking is never trained: a sanity claim, decided by its value
    assert rows["C2c"]["kind"] == "sanity" and rows["C2c"]["verdict"] == "reproduced"


def test_no_run_past_the_first_atp_is_a_tie_not_a_result():
    rng = np.random.default_rng(2)
    runs = _runs(rng, asag_atps=[1] * 40)
    runs["asag"] = [dict(r) for r in runs["deer"]]      # ASAG = DEER on every problem
    m = claim_metrics(runs, CFG)
    assert m["asag_frac_past_first_atp"] == 0 and m["asag_differs_from_deer_frac"] == 0
    assert m["c2_acc_minus_deer_pp"] == 0 and "c2_acc_minus_deer_pp" in m["inconclusive"]
    spec = load_claims("methods/asag/claims.yaml")
    rows = {r["id"]: r for r in evaluate_claims(spec, m, "tiny")["claims"]}
    for cid in ("C1", "C2a", "C2b"):
        assert rows[cid]["verdict"] == "inconclusive", rows[cid]
    assert "asag_frac_past_first_atp" in rows["C2b"]["note"]


def test_runs_on_different_problems_are_refused():
    rng = np.random.default_rng(3)
    runs = _runs(rng)
    runs["deer"] = runs["deer"][:-1]
    with pytest.raises(InputError, match="same problems"):
        claim_metrics(runs, CFG)
