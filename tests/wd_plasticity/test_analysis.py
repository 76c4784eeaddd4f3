"""Claim metrics on hand-built sweeps whose answers are known."""
import numpy as np
import pandas as pd
import pytest

from methods.wd_plasticity.analysis import AnalysisConfig, claim_metrics, rel_improvement


def cfg(bootstrap: int) -> AnalysisConfig:
    return AnalysisConfig(baseline_wd=0.1, monotone_wds=[0.0, 0.1, 0.3], bootstrap=bootstrap, seed=0)


def _df(nll, val, rms, gap, probe, qk, seeds=(0, 1, 2), jitter=0.0):
    rows = []
    rng = np.random.default_rng(1)
    for i, wd in enumerate([0.0, 0.1, 0.3, 1.0]):
        for s in seeds:
            e = jitter * rng.standard_normal()
            rows.append({"weight_decay": wd, "seed": s, "ft_answer_nll": nll[i] + e, "val_loss": val[i],
                         "weight_rms": rms[i], "train_val_gap": gap[i], "probe_accuracy": probe[i],
                         "probe_chance": 0.07, "qk_norm": qk[i], "attention_effective_rank": 10 - i})
    return pd.DataFrame(rows)


def test_pilot_like_sweep():
    # our pilot's table: T1/T2 mean NLL, val loss, gap, RMS
    nll = [(1.181 + 1.308) / 2, (1.114 + 1.215) / 2, (0.952 + 1.111) / 2, (1.126 + 1.243) / 2]
    df = _df(nll, [0.5287, 0.5281, 0.5289, 0.5390], [0.063, 0.0582, 0.0505, 0.0365],
             [0.0098, 0.0081, 0.0078, 0.0083], [0.2, 0.25, 0.3, 0.28], [3.0, 2.5, 2.0, 1.0])
    m = claim_metrics(df, cfg(200))
    expected = (nll[1] - nll[2]) / nll[1]
    assert m["w1_rel_improvement"] == pytest.approx(expected, rel=1e-12)
    rec = m["replicates"]["w1_rel_improvement"]   # no seed noise: every seed gives the point value
    assert rec["unit"] == "seed" and rec["ids"] == [0, 1, 2]
    assert rec["values"] == pytest.approx([expected] * 3, rel=1e-12)
    assert "intervals" not in m
    assert m["w3_probe_max_above_chance"] == pytest.approx(0.3 - 0.07, abs=1e-12)
    assert m["w1_spearman_rho"] == pytest.approx(-1.0)
    assert m["w2_tradeoff"] is True and m["w2_argmin_val_loss"] == 0.1 and m["w2_argmax_plasticity"] == 0.3
    assert m["w2_delta_val_loss"] == pytest.approx(0.5289 - 0.5281)
    assert m["w2_tradeoff_gap"] == pytest.approx(nll[1] - nll[2])
    assert m["w3_gap_margin"] == pytest.approx(0.0098 - 0.0083)
    assert m["w3_probe_min_step"] == pytest.approx(0.05)
    for k in ("w2_tradeoff_gap", "w3_gap_margin", "w3_probe_min_step"):
        assert m["replicates"][k]["values"] == pytest.approx([m[k]] * 3)
    assert m["w3_weight_rms_decreasing"] and m["w3_gap_lower"] and m["w3_probe_nondecreasing"] and m["w3_qk_decreasing"]


def test_negative_results_are_reported_as_such():
    df = _df([1.0, 0.9, 1.1, 1.2], [0.6, 0.5, 0.55, 0.7], [0.05, 0.05, 0.04, 0.03],
             [0.01, 0.02, 0.005, 0.005], [0.3, 0.2, 0.25, 0.3], [2.0, 2.5, 1.0, 0.5])
    m = claim_metrics(df, cfg(50))
    assert m["w1_rel_improvement"] == pytest.approx((0.9 - 1.1) / 0.9)
    assert m["w2_tradeoff"] is False  # both argmins at λ = 0.1
    assert m["w2_tradeoff_gap"] == pytest.approx(0.9 - 1.1)   # the best λ > 0.1 fine-tunes worse
    assert m["w3_gap_margin"] == pytest.approx(0.01 - 0.02) and m["w3_probe_min_step"] == pytest.approx(-0.1)
    assert not m["w3_weight_rms_decreasing"]  # ties are not strictly decreasing
    assert not m["w3_gap_lower"] and not m["w3_probe_nondecreasing"] and not m["w3_qk_decreasing"]


def test_replicates_are_the_per_seed_values_under_seed_noise():
    """Each claim metric's replicates are the same statistic per seed (at the λ's chosen on the
    seed means), recomputed here from the table; they average to the point value."""
    df = _df([1.0, 1.0, 0.9, 0.95], [0.5, 0.49, 0.52, 0.53], [4, 3, 2, 1], [0.03, 0.02, 0.01, 0.015],
             [0.1, 0.2, 0.3, 0.3], [4, 3, 2, 1], seeds=range(8), jitter=0.02)
    rng = np.random.default_rng(2)
    df["val_loss"] += 0.005 * rng.standard_normal(len(df))
    df["train_val_gap"] += 0.002 * rng.standard_normal(len(df))
    df["probe_accuracy"] += 0.01 * rng.standard_normal(len(df))
    m = claim_metrics(df, cfg(500))
    piv = {c: df.pivot(index="seed", columns="weight_decay", values=c)
           for c in ("ft_answer_nll", "train_val_gap", "probe_accuracy")}
    means = df.groupby("weight_decay").mean(numeric_only=True)
    best = means["ft_answer_nll"][means.index > 0.1].idxmin()
    base = means["ft_answer_nll"][0.1]
    lam_v = means["val_loss"].idxmin()
    lam_b = means["ft_answer_nll"][means.index > lam_v].idxmin()
    worst = means["train_val_gap"][means.index >= 0.1].idxmax()
    acc = means["probe_accuracy"][[0.0, 0.1, 0.3]]
    j = int(np.argmin(np.diff(acc.to_numpy())))
    expect = {"w1_rel_improvement": (piv["ft_answer_nll"][0.1] - piv["ft_answer_nll"][best]) / base,
              "w2_tradeoff_gap": piv["ft_answer_nll"][lam_v] - piv["ft_answer_nll"][lam_b],
              "w3_gap_margin": piv["train_val_gap"][0.0] - piv["train_val_gap"][worst],
              "w3_probe_min_step": piv["probe_accuracy"][acc.index[j + 1]] - piv["probe_accuracy"][acc.index[j]]}
    for k, v in expect.items():
        rec = m["replicates"][k]
        assert rec["unit"] == "seed" and rec["ids"] == list(range(8))
        assert rec["values"] == pytest.approx(v.to_numpy(), abs=1e-12)
        assert np.mean(rec["values"]) == pytest.approx(m[k], abs=1e-12)
    assert np.ptp(m["replicates"]["w1_rel_improvement"]["values"]) > 0.005


def test_claims_are_decided_by_the_interval_over_seeds():
    """With clear seed noise the headline claims are decided by the t interval over seeds; with
    one seed (smoke) or no seed noise they are inconclusive, never decided by the point value."""
    from methods.core.claims import evaluate_claims, load_claims

    spec = load_claims("methods/wd_plasticity/claims.yaml")
    df = _df([1.0, 1.0, 0.8, 0.9], [0.5, 0.49, 0.52, 0.53], [4, 3, 2, 1], [0.03, 0.02, 0.01, 0.015],
             [0.1, 0.2, 0.3, 0.3], [4, 3, 2, 1], seeds=range(5), jitter=0.01)
    rows = {r["id"]: r for r in evaluate_claims(spec, claim_metrics(df, cfg(50)), "tiny")["claims"]}
    assert rows["W1"]["verdict"] == "reproduced" and rows["W1"]["n"] == 5
    assert rows["W2"]["verdict"] == "reproduced"      # λ_v = 0.1, λ = 0.3 fine-tunes 0.2 nats better
    one = claim_metrics(df[df["seed"] == 0], cfg(50))
    rows = {r["id"]: r for r in evaluate_claims(spec, one, "tiny")["claims"]}
    assert rows["W1"]["verdict"] == "inconclusive" and rows["W1"]["undecided_by"] == "n < 3"


def test_probe_at_chance_makes_the_probe_claim_inconclusive():
    """A probe that reads nothing at any λ (accuracy ≤ chance) cannot rank the λ's: W3c's guard
    fails and the verdict is inconclusive, whatever the (noise) order of the accuracies."""
    from methods.core.claims import evaluate_claims, load_claims

    df = _df([1.0, 0.9, 0.8, 0.85], [0.5] * 4, [4, 3, 2, 1], [0.02, 0.01, 0.01, 0.01],
             [0.05, 0.06, 0.07, 0.06], [4, 3, 2, 1])
    m = claim_metrics(df, cfg(50))
    assert m["w3_probe_nondecreasing"] is True and m["w3_probe_max_above_chance"] == pytest.approx(0.0, abs=1e-12)
    rows = {r["id"]: r for r in evaluate_claims(load_claims("methods/wd_plasticity/claims.yaml"), m, "tiny")["claims"]}
    assert rows["W3c"]["verdict"] == "inconclusive" and "w3_probe_max_above_chance" in rows["W3c"]["note"]


def test_every_checked_metric_is_a_key_without_probes():
    """Paper scale runs no probe (no people.jsonl): the probe metrics are null keys, not absent."""
    from methods.core.claims import check_summary, load_claims

    df = _df([1.0, 0.9, 0.8, 0.85], [0.5] * 4, [4, 3, 2, 1], [0.02, 0.01, 0.01, 0.01],
             [0.05, 0.06, 0.07, 0.06], [4, 3, 2, 1]).drop(columns=["probe_accuracy"])
    m = claim_metrics(df, cfg(50))
    assert m["w3_probe_min_step"] is None and m["w3_probe_max_above_chance"] is None
    assert "w3_probe_min_step" not in m["replicates"]
    for scale in ("smoke", "tiny", "paper"):
        check_summary(load_claims("methods/wd_plasticity/claims.yaml"), m, scale)


def test_rel_improvement_uses_only_larger_decays():
    s = pd.Series({0.0: 0.1, 0.1: 1.0, 0.3: 0.8, 1.0: 0.9})
    assert rel_improvement(s, 0.1) == pytest.approx(0.2)  # λ = 0 (0.1) is not a "larger λ"
