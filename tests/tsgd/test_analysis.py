"""TSGD's claim metrics on constructed runs: the paired bootstrap intervals of the test-accuracy
gains against methods.core.stats (and a known property: the interval of a constant per-problem
difference is that constant), the discordant counts and the guard metrics by hand."""
import numpy as np
import pytest

from methods.core.stats import paired_bootstrap_diff
from methods.tsgd.analysis import claim_metrics


def _runs(full_ok, zs_ok, rag_ok, ops):
    base = {"zero_shot_test_acc": float(np.mean(zs_ok)), "zero_shot_test_ok": zs_ok, "rag_final_test_ok": rag_ok,
            "rag_curve": [{"memory_size": 50, "test_acc": 0.5}, {"memory_size": 200, "test_acc": 0.45},
                          {"memory_size": 600, "test_acc": float(np.mean(rag_ok))}]}
    full = {"variant": "full", "capacity": 30, "max_size": 14, "test_acc": float(np.mean(full_ok)), "test_ok": full_ok,
            "library": {"rules": [{"text": f"r{i}"} for i in range(14)]}, "ops": ops, "library_kinds": []}
    trace = [{"step": str(i), "lib_size": "14", "val_acc": v, "n_accepted": str(a)}
             for i, (v, a) in enumerate(zip(["0.5", "", "0.8", "0.81", "0.8", "0.82"], [2, 1, 0, 1, 3, 0]))]
    return base, {"full": full}, {"full": trace}


def test_gain_intervals_and_guards_by_hand():
    rng = np.random.default_rng(0)
    full_ok = (rng.random(400) < 0.8).tolist()
    zs_ok = (rng.random(400) < 0.35).tolist()
    rag_ok = (rng.random(400) < 0.4).tolist()
    ops = [{"accepted": True, "kind": "good"}, {"accepted": False, "kind": "bad"}]
    m = claim_metrics(*_runs(full_ok, zs_ok, rag_ok, ops), n_types=12, flat_from=0.5, simulated=False)
    assert m["c1_gain_over_zero_shot"] == pytest.approx(np.mean(full_ok) - np.mean(zs_ok), abs=1e-12)
    ref = paired_bootstrap_diff(np.array(full_ok, float), np.array(zs_ok, float), unit="item")
    assert m["intervals"]["c1_gain_over_zero_shot"] == ref
    assert ref["lo"] < m["c1_gain_over_zero_shot"] < ref["hi"]
    assert m["c1_discordant_over_zero_shot"] == sum(a != b for a, b in zip(full_ok, zs_ok))
    assert m["c1_discordant_over_rag"] == sum(a != b for a, b in zip(full_ok, rag_ok))
    assert m["full_accepted_ops"] == 1 and m["c2_final_size"] == 14
    assert m["c4_rag_range"] == pytest.approx(max(0.5, 0.45, np.mean(rag_ok)) - min(0.5, 0.45, np.mean(rag_ok)))
    # val evaluations 0.5, 0.8, 0.81, 0.8, 0.82 -> the tail from half of them on: 0.81, 0.8, 0.82
    assert m["c4_tail_evals"] == 3 and m["c4_tsgd_val_range_tail"] == pytest.approx(0.02, abs=1e-12)
    # the tail starts at the evaluation of step 3; ops accepted after it: steps 4, 5 -> 3 + 0
    assert m["c4_tail_accepted_ops"] == 3


def test_identical_outcomes_are_a_tie_the_guard_catches():
    """Same per-problem outcomes: gain 0 with a degenerate interval [0, 0] — the discordant count
    (a guard of C1b) is 0, so the claim cannot pass through the tie."""
    ok = [True, False] * 50
    m = claim_metrics(*_runs(ok, ok, ok, []), n_types=12, flat_from=0.5, simulated=False)
    assert m["c1_gain_over_rag"] == 0.0 and m["c1_discordant_over_rag"] == 0
    assert m["intervals"]["c1_gain_over_rag"]["lo"] == m["intervals"]["c1_gain_over_rag"]["hi"] == 0.0
    assert m["full_accepted_ops"] == 0


def test_gain_interval_is_over_items_and_every_checked_key_is_present():
    """The paired bootstrap is over the test problems of one run (unit item); the paper-scale
    headline claims replicate over seeds, so the claims engine leaves them inconclusive on it. Every
    metric a claim or guard reads is a key of the summary, null where it cannot be measured (a real
    endpoint: no simulator labels for C3)."""
    from methods.core.claims import evaluate_claims, load_claims, needed_metrics

    rng = np.random.default_rng(1)
    full_ok = (rng.random(400) < 0.9).tolist()
    zs_ok = (rng.random(400) < 0.2).tolist()
    m = claim_metrics(*_runs(full_ok, zs_ok, zs_ok, [{"accepted": True, "kind": "good"}]), n_types=12,
                      flat_from=0.5, simulated=False)
    assert {iv["unit"] for iv in m["intervals"].values()} == {"item"}
    spec = load_claims("methods/tsgd/claims.yaml")
    for scale in ("smoke", "tiny", "paper"):
        assert set(needed_metrics(spec, scale)) <= set(m)
    assert m["c3_full_minus_no_verify"] is None and m["c3_local_admits_full_rejects"] is None
    rows = {r["id"]: r for r in evaluate_claims(spec, m, "paper")["claims"]}
    assert m["intervals"]["c1_gain_over_zero_shot"]["lo"] > 0.5   # far above the threshold 0 ...
    assert rows["C1p"]["replicates"] == "seed"
    assert rows["C1p"]["verdict"] == "inconclusive" and rows["C1p"]["undecided_by"] == "no interval"   # ... over items
