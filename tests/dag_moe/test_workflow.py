"""The DAG-MoE rules: job counts of the dry run per scale, and the claim metrics on hand-made
runs (no training)."""
import math

import pytest

from methods.dag_moe.analysis import baseline_of, claim_metrics
from tests.workflow.conftest import job_counts, snakemake


@pytest.mark.parametrize("scale,n_train,n_seeds,n_lm_eval", [("tiny", 12, 3, 0), ("paper", 8, 2, 8)])
def test_dry_run_job_counts(tmp_path, scale, n_train, n_seeds, n_lm_eval):
    out = snakemake(f"{tmp_path}/{scale}/dag_moe/claims.json", "-n", "--quiet", "rules",
                    config={"results_dir": tmp_path, "scale": scale}, timeout=300)
    counts = job_counts(out.stdout)
    expected = {"dag_moe_data": 1, "dag_moe_train": n_train, "dag_moe_compose": 2, "dag_moe_timing": 1,
                "dag_moe_aggregate": 1, "claims": 1}
    if n_lm_eval:  # paper scale: zero-shot lm-eval tasks of every LM
        expected["dag_moe_lm_eval"] = n_lm_eval
    if scale == "paper":  # the hub corpus is tokenized once into shards; tiny generates batches
        expected["dag_moe_shards"] = 1
    assert counts == expected, out.stdout
    assert n_train == 4 * n_seeds


def test_downstream_scores_pick_the_headline_metric():
    from methods.dag_moe.analysis import downstream_scores

    res = {"hellaswag": {"acc,none": 0.31, "acc_stderr,none": 0.01, "acc_norm,none": 0.35},
           "gsm8k": {"exact_match,strict-match": 0.02, "exact_match,flexible-extract": 0.05},
           "wikitext": {"word_perplexity,none": 41.5, "byte_perplexity,none": 1.9},
           "odd": {"f1,none": 0.4}}
    assert downstream_scores(res) == {"hellaswag": 0.31, "gsm8k": 0.02, "wikitext": 41.5, "odd": None}


def _run(arch, seed, agg, n, k, ff, val, a12=None):
    r = {"arch": arch, "seed": seed, "aggregation": agg, "n_experts": n, "k": k, "d_ff": ff,
         "val_loss": val, "val_ppl": math.exp(val), "c1_acc": 0.5, "c1_loss": 1.0,
         "c1_heldout_acc": 0.06, "c2_em": 0.1, "load_cv_mean": 0.1, "val_curve": [[10, val]],
         "params": {"total": 1000 + (10 if agg == "dag" else 0), "active": 500 + (10 if agg == "dag" else 0)},
         "flops_per_token": {"moe_layer": 2000 + (20 if agg == "dag" else 0), "model": 10000 + (40 if agg == "dag" else 0)}}
    if a12 is not None:
        r.update(edge_a12=a12, edge_mean=a12)
    return r


def test_claim_metrics_by_hand():
    runs = [_run("moe_sum", 0, "sum", 8, 2, 128, 2.0), _run("moe_sum", 1, "sum", 8, 2, 128, 2.2),
            _run("dag_moe", 0, "dag", 8, 2, 128, 1.9, [0.1, 0.3]),
            _run("dag_moe", 1, "dag", 8, 2, 128, 2.0, [0.02, 0.1])]
    comp = {"sum": {"runs": [{"seed": s, "acc": a, "loss": l, "step_ms": 1.0} for s, a, l in
                             [(0, 0.5, 1.0), (1, 0.6, 1.2), (2, 0.7, 0.8)]]},
            "dag": {"runs": [{"seed": s, "acc": a, "loss": l, "step_ms": 1.2, "edge_a12": [0.2]} for s, a, l in
                             [(0, 0.6, 0.5), (1, 0.5, 0.9), (2, 0.8, 0.4)]]}}
    timing = {"moe_sum": {"median_ms": 10.0}, "dag_moe": {"median_ms": 13.0}}
    m = claim_metrics(runs, comp, timing)
    assert baseline_of(runs, "dag_moe") == "moe_sum"
    assert abs(m["d1_val_loss_delta"] - (1.95 - 2.1)) < 1e-12
    assert abs(m["d1_rel_ppl_change"] - (math.exp(-0.15) - 1)) < 1e-12
    # D2a: mean over seeds of the per-seed ratio dag/sum: 0.5/1.0, 0.9/1.2, 0.4/0.8
    ratios = [0.5, 0.75, 0.5]
    assert abs(m["d2_loss_ratio"] - sum(ratios) / 3) < 1e-12 and m["d2_acc_wins"] == 2
    assert abs(m["d2_loss_ratio_of_means"] - 1.8 / 3.0) < 1e-12
    # D2b: per-seed accuracy gain dag − sum: +0.1, −0.1, +0.1
    gains = [0.6 - 0.5, 0.5 - 0.6, 0.8 - 0.7]
    assert m["d2_acc_gain"] == pytest.approx(sum(gains) / 3)
    # per-seed values as replicates (unit seed, named by seed); core's 95% t interval over them is scipy's
    from scipy import stats

    from methods.core.stats import interval_from_replicates

    for key, xs, ids in (("d1_val_loss_delta", [1.9 - 2.0, 2.0 - 2.2], [0, 1]), ("d2_loss_ratio", ratios, [0, 1, 2]),
                         ("d2_acc_gain", gains, [0, 1, 2]), ("d4_max_layer_edge_a12", [0.3, 0.1], [0, 1]),
                         ("heldout_pair_acc", [0.06, 0.06], [0, 1])):
        rec = m["replicates"][key]
        assert rec["unit"] == "seed" and rec["ids"] == ids and rec["values"] == pytest.approx(xs), (key, rec)
        assert sum(rec["values"]) / len(xs) == pytest.approx(m[key])
        if key != "heldout_pair_acc":
            lo, hi = stats.t.interval(0.95, len(xs) - 1, loc=sum(xs) / len(xs), scale=stats.sem(xs))
            iv = interval_from_replicates(rec)
            assert abs(iv["lo"] - lo) < 1e-12 and abs(iv["hi"] - hi) < 1e-12 and iv["n"] == len(xs), (key, iv)
    assert "intervals" not in m
    assert m["d1_seeds_dag_lower"] == 2
    assert abs(m["d3_param_overhead_pct"] - 2.0) < 1e-12  # 10 / 500 active
    assert abs(m["d3_flop_overhead_pct"] - 1.0) < 1e-12   # 20 / 2000
    assert abs(m["d3_step_time_ratio"] - 1.3) < 1e-12
    # D4: seed means per layer (0.06, 0.2); max over layers
    assert abs(m["d4_max_layer_edge_a12"] - 0.2) < 1e-12
    assert abs(m["heldout_pair_acc"] - 0.06) < 1e-12


def test_claims_read_the_replicates_and_every_checked_key_is_present():
    """The claims engine decides D1/D2 from the per-seed replicates (2 LM seeds: too few), and
    a summary without the compose runs still carries every checked metric as a key (null)."""
    from methods.core.claims import check_summary, evaluate_claims, load_claims

    spec = load_claims("methods/dag_moe/claims.yaml")
    runs = [_run("moe_sum", 0, "sum", 8, 2, 128, 2.0), _run("moe_sum", 1, "sum", 8, 2, 128, 2.2),
            _run("dag_moe", 0, "dag", 8, 2, 128, 1.9, [0.1, 0.3]),
            _run("dag_moe", 1, "dag", 8, 2, 128, 2.0, [0.02, 0.1])]
    comp = {"sum": {"runs": [{"seed": s, "acc": a, "loss": 1.0, "step_ms": 1.0} for s, a in
                             [(0, 0.50), (1, 0.52), (2, 0.49)]]},
            "dag": {"runs": [{"seed": s, "acc": a, "loss": l, "step_ms": 1.2, "edge_a12": [0.2]} for s, a, l in
                             [(0, 0.70, 0.5), (1, 0.71, 0.55), (2, 0.69, 0.52)]]}}
    m = claim_metrics(runs, comp, {"moe_sum": {"median_ms": 10.0}, "dag_moe": {"median_ms": 13.0}})
    rows = {r["id"]: r for r in evaluate_claims(spec, m, "tiny")["claims"]}
    assert rows["D1"]["verdict"] == "inconclusive" and rows["D1"]["undecided_by"] == "n < 3"
    assert rows["D2a"]["verdict"] == "reproduced" and rows["D2b"]["verdict"] == "reproduced"
    assert rows["D2b"]["n"] == 3
    m = claim_metrics(runs, {}, {})
    assert m["d2_loss_ratio"] is None and m["d2_acc_gain"] is None
    for scale in ("smoke", "tiny", "paper"):
        check_summary(spec, m, scale)
