"""AGoQ claim metrics on hand-made runs and probe (no training): per-seed ratios paired by seed,
their mean and 95% t interval (checked against scipy), the bound over every seed, and the
format ratios of the first seed."""
import numpy as np
import pytest
from scipy import stats

from methods.agoq.analysis import claim_metrics, table_rows
from methods.agoq.config import AnalysisConfig

CFG = AnalysisConfig(baseline="fp", laaq="laaq", uni4="uni4", uni2="uni2", laaq_stage="laaq_stage", agoq="qgrad8",
                     pp_stages=[2, 4], claim_stages=4, scale_overhead_bits=0.25)
SHARES = {"norm": 20, "attn_core": 20, "attn_in": 10, "mlp_inner": 50}
VAL = {"fp": [0.60, 0.62, 0.61], "laaq": [0.59, 0.63, 0.60], "uni4": [0.61, 0.64, 0.62], "uni2": [3.9, 4.0, 3.8],
       "qgrad8": [0.60, 0.62, 0.61]}
TRAIN = {"laaq": [0.70, 0.71, 0.72], "qgrad8": [0.707, 0.70, 0.72]}


def _run(v, seed):
    n = 1000
    return {"variant": v, "val_loss": VAL[v][seed], "initial_val_loss": 4.0,
            "final_train_loss": TRAIN.get(v, [0.7] * 3)[seed], "activations": {"numel_by_tag": SHARES},
            "grad_buffer_bytes": 1031.25 if v == "qgrad8" else 4000, "grad_fp32_bytes": 4 * n,
            "grad_buffer_bytes_per_param": 1.03125 if v == "qgrad8" else 4.0,
            "comm_bytes_per_step_per_rank": 258.0 if v == "qgrad8" else 1000.0, "world_size": 2,
            "allreduce_max_err_over_bound": [0.5, 0.9, 0.7][seed] if v == "qgrad8" else None,
            "allreduce_rel_err_mean": 0.01, "replicas_in_sync": True}


def _probe():
    pol = {k: {"ratio_vs_bf16": r, "avg_bits": 16 * r, "grad_rel_err": 0.0}
           for k, r in (("fp", 1.0), ("laaq", 0.36), ("laaq_stage", 0.34), ("uni4", 0.266), ("uni2", 0.14))}
    return {"policies": pol, "collective": {"4": {"quangrad": 0.010, "naive_ring": 0.012, "bf16": 0.002},
                                            "8": {"quangrad": 0.009, "naive_ring": 0.015, "bf16": 0.003}}}


def _t95(x):
    x = np.asarray(x, float)
    return stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))


def _core_iv(rec):
    from methods.core.stats import interval_from_replicates

    iv = interval_from_replicates(rec)
    return iv["lo"], iv["hi"]


def test_claim_metrics_pair_seeds_and_give_t_intervals():
    runs = {v: {s: _run(v, s) for s in range(3)} for v in VAL}
    m, pp = claim_metrics(runs, _probe(), CFG)
    for key, v in (("a2_laaq_val_ratio", "laaq"), ("a2_uni4_val_ratio", "uni4"), ("a2_uni2_val_ratio", "uni2")):
        r = [VAL[v][s] / VAL["fp"][s] for s in range(3)]
        assert m[key] == pytest.approx(np.mean(r))
        rec = m["replicates"][key]
        assert rec["unit"] == "seed" and rec["ids"] == [0, 1, 2] and rec["values"] == pytest.approx(r)
        assert _core_iv(rec) == pytest.approx(_t95(r))
    dev = [abs(TRAIN["qgrad8"][s] / TRAIN["laaq"][s] - 1) for s in range(3)]
    assert m["a3_qgrad8_train_loss_dev"] == pytest.approx(np.mean(dev))
    assert m["replicates"]["a3_qgrad8_train_loss_dev"]["values"] == pytest.approx(dev)
    assert _core_iv(m["replicates"]["a3_qgrad8_train_loss_dev"]) == pytest.approx(_t95(dev))
    assert "intervals" not in m
    assert m["a3_quangrad_err_w_lo_minus_w_hi"] == pytest.approx(0.001)
    assert m["a3_naive_err_w_hi_minus_w_lo"] == pytest.approx(0.003)
    assert m["a2_fp_val_loss_drop"] == pytest.approx(1 - 0.62 / 4.0)
    assert m["a3_gloo_within_bound"] is True
    assert m["a4_grad_bytes_ratio"] == pytest.approx(1.03125 / 4) and m["a6_comm_bytes_ratio"] == pytest.approx(0.258)
    assert m["a3_quangrad_err_max"] == 0.010 and m["a3_naive_over_quangrad"] == pytest.approx(0.015 / 0.009)
    assert m["a5_uniform_ratio_exact"] is True
    # one seed over the bound fails A3f
    runs["qgrad8"][2]["allreduce_max_err_over_bound"] = 1.2
    assert claim_metrics(runs, _probe(), CFG)[0]["a3_gloo_within_bound"] is False
    rows = {r["variant"]: r for r in table_rows(runs, _probe())}
    assert rows["laaq"]["val_loss_per_seed"] == VAL["laaq"] and rows["laaq_stage"]["val_loss_per_seed"] is None


def test_one_seed_and_untrained_variants():
    runs = {v: {0: _run(v, 0)} for v in ("fp", "qgrad8")}   # smoke: fp and qgrad8 only
    m, _ = claim_metrics(runs, _probe(), CFG)
    assert m["a2_laaq_val_ratio"] is None and m["a3_qgrad8_train_loss_dev"] is None
    assert m["replicates"] == {}


def test_claims_engine_reads_the_seed_replicates():
    """A2c (uni2 breaks training) is decided by the t interval over the 3 per-seed ratios; A1a
    (format arithmetic of the bit policy) is a sanity claim decided by its value."""
    from methods.core.claims import evaluate_claims, load_claims

    runs = {v: {s: _run(v, s) for s in range(3)} for v in VAL}
    m, _ = claim_metrics(runs, _probe(), CFG)
    rows = {r["id"]: r for r in evaluate_claims(load_claims("methods/agoq/claims.yaml"), m, "tiny")["claims"]}
    assert rows["A2c"]["verdict"] == "reproduced" and rows["A2c"]["n"] == 3
    assert rows["A1a"]["kind"] == "sanity" and rows["A1a"]["verdict"] == "reproduced"
    assert rows["A3b"]["verdict"] == "inconclusive"     # a difference of two means without an interval
