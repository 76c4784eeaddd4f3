"""Aggregate the runs into the claim metrics (D1-D4) and draw the figure.

Imports no torch: the step-time measurement arrives as a JSON file from the `timing` step.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict

from methods.core.results import InputError


def _mean(xs):
    return sum(xs) / len(xs)


def baseline_of(runs: list[dict], arch: str) -> str | None:
    """The sum-aggregation arch with the same experts (N, K, d_ff) as a DAG arch."""
    a = next(r for r in runs if r["arch"] == arch)
    for r in runs:
        if r["aggregation"] == "sum" and (r["n_experts"], r["k"], r["d_ff"]) == (a["n_experts"], a["k"], a["d_ff"]):
            return r["arch"]
    return None


DOWNSTREAM_METRICS = ("acc", "exact_match", "word_perplexity")


def downstream_scores(results: dict) -> dict:
    """{task: its headline metric} from lm-eval's results: the first of acc, exact_match,
    word_perplexity the task reports (lm-eval suffixes metric names with ",<filter>")."""
    out = {}
    for task, metrics in results.items():
        by_name = {}
        for k, v in metrics.items():  # the first filter wins (gsm8k: strict-match)
            by_name.setdefault(k.split(",")[0], v)
        out[task] = next((by_name[m] for m in DOWNSTREAM_METRICS if m in by_name), None)
    return out


def table_rows(runs: list[dict]) -> list[dict]:
    cols = ("arch", "seed", "aggregation", "n_experts", "k", "d_ff", "val_loss", "val_ppl", "c1_acc",
            "c1_loss", "c1_heldout_acc", "c2_em", "load_cv_mean", "train_step_ms")
    out = []
    for r in sorted(runs, key=lambda r: (r["arch"], r["seed"])):
        row = {c: r.get(c) for c in cols}
        row["params_total"], row["params_active"] = r["params"]["total"], r["params"]["active"]
        row["edge_a12_by_layer"] = " ".join(f"{x:.3f}" for x in r.get("edge_a12", [])) or None
        row.update({f"lm_eval_{t}": v for t, v in sorted(r.get("downstream", {}).items())})
        out.append(row)
    return out


def _per_arch(runs: list[dict]) -> dict:
    """Per arch, seeds in order: the per-seed metrics, the param/FLOP counts, the validation curves
    and, for DAG archs, the per-layer edge strengths averaged over seeds."""
    by = defaultdict(list)
    for r in runs:
        by[r["arch"]].append(r)
    per_arch = {}
    for a in sorted(by):
        rs = sorted(by[a], key=lambda r: r["seed"])
        per_arch[a] = {k: [r.get(k) for r in rs] for k in
                       ("seed", "val_loss", "c1_acc", "c1_loss", "c1_heldout_acc", "c2_em", "load_cv_mean")}
        per_arch[a].update(params=rs[0]["params"], flops=rs[0]["flops_per_token"],
                           aggregation=rs[0]["aggregation"], val_curve=[r["val_curve"] for r in rs])
        if rs[0]["aggregation"] == "dag":
            L = len(rs[0]["edge_a12"])
            per_arch[a]["edge_a12_seed_mean"] = [_mean([r["edge_a12"][i] for r in rs]) for i in range(L)]
            per_arch[a]["edge_mean_seed_mean"] = [_mean([r["edge_mean"][i] for r in rs]) for i in range(L)]
    return per_arch


def _rep(values: list[float], seeds: list[int]) -> dict:
    """Per-seed values of a claim metric as a `replicates` record (unit seed, named by seed);
    `methods.core.claims` computes the interval over the seeds from it."""
    from methods.core.stats import replicate_record

    return replicate_record(values, unit="seed", ids=[int(k) for k in seeds])


def _d1_quality(per_arch: dict, mean_val: dict, pairs: dict, primary_dag: str,
                primary_sum: str) -> tuple[dict, dict, dict]:
    """D1, pretraining quality: the seed-mean val loss of the primary DAG arch minus the primary sum
    arch's (and the implied PPL change), with the per-seed differences (seeds paired) as its
    replicates, and of every DAG arch minus its same-experts sum arch. Returns (metrics, notes,
    replicates)."""
    m, notes, iv = {}, {}, {}
    if primary_dag in mean_val and primary_sum in mean_val:
        d, s = mean_val[primary_dag], mean_val[primary_sum]
        if per_arch[primary_dag]["seed"] != per_arch[primary_sum]["seed"]:
            raise InputError(f"aggregate: D1 seeds differ between {primary_dag} {per_arch[primary_dag]['seed']} "
                             f"and {primary_sum} {per_arch[primary_sum]['seed']}")
        diffs = [a - b for a, b in zip(per_arch[primary_dag]["val_loss"], per_arch[primary_sum]["val_loss"])]
        m["d1_val_loss_delta"] = d - s
        m["d1_val_loss_delta_per_seed"] = diffs
        m["d1_seeds_dag_lower"] = sum(x < 0 for x in diffs)
        m["d1_rel_ppl_change"] = math.exp(d - s) - 1
        iv["d1_val_loss_delta"] = _rep(diffs, per_arch[primary_dag]["seed"])
        notes["d1_val_loss_delta"] = (
            f"mean val loss {primary_dag} {d:.4f} vs {primary_sum} {s:.4f} over "
            f"{len(diffs)} seed(s); per-seed difference " + "/".join(f"{x:+.4f}" for x in diffs)
            + f" ({primary_dag} lower in {m['d1_seeds_dag_lower']} of {len(diffs)}); "
            f"PPL change {100 * (math.exp(d - s) - 1):+.2f}%; "
            + "; ".join(f"{a} {v:.4f}" for a, v in mean_val.items()))
    for a, b in pairs.items():
        if b:
            m[f"val_loss_delta_{a}_vs_{b}"] = mean_val[a] - mean_val[b]
    return m, notes, iv


def _d2_composition(compose: dict[str, dict]) -> tuple[dict, dict, dict]:
    """D2, 1-layer composition in distribution: the mean over seeds of the per-seed DAG/sum answer-
    loss ratio and of the per-seed accuracy gain DAG − sum, each with its per-seed values as
    replicates, the seeds on which DAG is more accurate, and the per-seed runs. Returns
    (metrics, notes, replicates)."""
    s_runs = {r["seed"]: r for r in compose["sum"]["runs"]}
    d_runs = {r["seed"]: r for r in compose["dag"]["runs"]}
    seeds = sorted(set(s_runs) & set(d_runs))
    if not seeds:
        raise InputError("aggregate: the D2 sum and dag compose runs share no seed")
    ls, ld = _mean([s_runs[k]["loss"] for k in seeds]), _mean([d_runs[k]["loss"] for k in seeds])
    ratios = [d_runs[k]["loss"] / s_runs[k]["loss"] for k in seeds]
    gains = [d_runs[k]["acc"] - s_runs[k]["acc"] for k in seeds]
    m: dict = {"d2_loss_ratio": _mean(ratios), "d2_loss_ratio_per_seed": ratios, "d2_loss_ratio_of_means": ld / ls,
               "d2_acc_gain": _mean(gains), "d2_acc_gain_per_seed": gains,
               "d2_acc_wins": sum(d_runs[k]["acc"] > s_runs[k]["acc"] for k in seeds), "d2_seeds": len(seeds)}
    m["d2"] = {agg: {"acc": [c["acc"] for c in compose[agg]["runs"]],
                     "loss": [c["loss"] for c in compose[agg]["runs"]],
                     "step_ms": [c["step_ms"] for c in compose[agg]["runs"]]} for agg in ("sum", "dag")}
    m["d2"]["dag"]["edge_a12"] = [c["edge_a12"][0] for c in compose["dag"]["runs"]]
    fmt = lambda xs: "/".join(f"{x:.3f}" for x in xs)  # noqa: E731
    notes = {"d2_loss_ratio": (f"1-layer C1, {len(seeds)} seed(s): loss sum {fmt(m['d2']['sum']['loss'])} "
                               f"(mean {ls:.3f}) vs dag {fmt(m['d2']['dag']['loss'])} (mean {ld:.3f}); "
                               f"per-seed ratio {fmt(ratios)}; ratio of the means {ld / ls:.3f}; pilot 0.69×"),
             "d2_acc_wins": (f"acc sum {fmt(m['d2']['sum']['acc'])} vs dag {fmt(m['d2']['dag']['acc'])}; "
                             f"dag higher in {m['d2_acc_wins']}/{len(seeds)} (pilot 3/3)")}
    notes["d2_acc_gain"] = (notes["d2_acc_wins"] + "; per-seed gain dag − sum "
                            + "/".join(f"{x:+.3f}" for x in gains))
    iv = {"d2_loss_ratio": _rep(ratios, seeds), "d2_acc_gain": _rep(gains, seeds)}
    return m, notes, iv


def _d3_overheads(per_arch: dict, pairs: dict) -> tuple[dict, dict]:
    """D3, closed-form overheads of each DAG arch over the sum arch with the same experts: params
    (vs active and vs total) and forward FLOPs per token (one MoE layer and the whole model)."""
    m, notes = {}, {}
    p_act, p_tot, f_layer, f_model = [], [], [], []
    for a, b in pairs.items():
        if not b:
            continue
        pa, pb = per_arch[a]["params"], per_arch[b]["params"]
        fa, fb = per_arch[a]["flops"], per_arch[b]["flops"]
        p_act.append(100 * (pa["active"] - pb["active"]) / pb["active"])
        p_tot.append(100 * (pa["total"] - pb["total"]) / pb["total"])
        f_layer.append(100 * (fa["moe_layer"] - fb["moe_layer"]) / fb["moe_layer"])
        f_model.append(100 * (fa["model"] - fb["model"]) / fb["model"])
        m[f"overhead_{a}"] = {"params_vs_active_pct": p_act[-1], "params_vs_total_pct": p_tot[-1],
                              "flops_moe_layer_pct": f_layer[-1], "flops_model_pct": f_model[-1],
                              "baseline": b}
    if p_act:
        m["d3_param_overhead_pct"] = max(p_act)
        m["d3_flop_overhead_pct"] = max(f_layer)
        notes["d3_param_overhead_pct"] = ("max over DAG archs of Δparams / the sum arch's ACTIVE params "
                                          f"(vs total params: max {max(p_tot):.3f}%)")
        notes["d3_flop_overhead_pct"] = ("max over DAG archs of Δ forward FLOPs per token of one MoE layer "
                                         f"(generator, messages, sigmoids); whole model: max {max(f_model):.3f}%")
    return m, notes


def _d3_step_time(timing: dict, pairs: dict, primary_dag: str, primary_sum: str) -> tuple[dict, dict]:
    """D3, measured step time: median-step ratios of each DAG arch to its same-experts sum arch and
    of every arch to the primary sum arch (one interleaved process)."""
    m, notes = {}, {}
    ratios = {}
    for a, b in pairs.items():
        if b and a in timing and b in timing:
            ratios[f"{a}/{b}"] = timing[a]["median_ms"] / timing[b]["median_ms"]
    if primary_sum in timing:
        for a in timing:
            if a != primary_sum:
                ratios.setdefault(f"{a}/{primary_sum}", timing[a]["median_ms"] / timing[primary_sum]["median_ms"])
    m["step_time_ms"] = {a: t["median_ms"] for a, t in timing.items()}
    m["step_time_ratios"] = ratios
    key = f"{primary_dag}/{primary_sum}"
    if key in ratios:
        m["d3_step_time_ratio"] = ratios[key]
        notes["d3_step_time_ratio"] = ("median fwd+bwd+AdamW step, archs interleaved in one process: "
                                       + ", ".join(f"{k} {v:.2f}×" for k, v in sorted(ratios.items())))
    return m, notes


def _d4_edges(runs: list[dict], per_arch: dict, compose: dict[str, dict], d2: dict,
              primary_dag: str) -> tuple[dict, dict, dict]:
    """D4, edges stay in use: the largest per-layer mean A_12 over validation tokens (seed mean) of
    the primary DAG arch, and as replicates each seed's A_12 at that layer (so they average to the
    point value); `d2` is what `_d2_composition` returned (its runs' edges go in the note)."""
    m, notes, reps = {}, {}, {}
    if primary_dag in per_arch and "edge_a12_seed_mean" in per_arch[primary_dag]:
        e = per_arch[primary_dag]["edge_a12_seed_mean"]
        m["d4_max_layer_edge_a12"] = max(e)
        layer = e.index(max(e))
        rs = sorted((r for r in runs if r["arch"] == primary_dag), key=lambda r: r["seed"])
        reps["d4_max_layer_edge_a12"] = _rep([r["edge_a12"][layer] for r in rs], [r["seed"] for r in rs])
        extra = ""
        if "dag" in compose:  # the compose runs' own edges (d2 holds them only when both aggs ran)
            extra = "; 1-layer compose runs: " + "/".join(f"{c['edge_a12'][0]:.3f}" for c in compose["dag"]["runs"])
        notes["d4_max_layer_edge_a12"] = ("mean A_12 per layer (seed mean) for " + primary_dag + ": "
                                          + " ".join(f"{x:.3f}" for x in e) + extra + "; pilot 0.13-0.21")
    return m, notes, reps


def _synthetic_task_means(per_arch: dict, primary_dag: str) -> tuple[dict, dict, dict]:
    """Reported: held-out-pair generalisation (LM runs trained without those pairs), C1 accuracy and
    C2 exact match, seed means per arch; and every arch's expert-load CV."""
    m, notes, reps = {}, {}, {}
    if primary_dag in per_arch and per_arch[primary_dag]["c1_heldout_acc"][0] is not None:
        h = {a: _mean(v["c1_heldout_acc"]) for a, v in per_arch.items()}
        m["heldout_pair_acc"] = h[primary_dag]
        reps["heldout_pair_acc"] = _rep(per_arch[primary_dag]["c1_heldout_acc"], per_arch[primary_dag]["seed"])
        notes["heldout_pair_acc"] = ("seed-mean C1 accuracy on held-out (f, g) pairs (chance 1/17 = 0.059): "
                                     + ", ".join(f"{a} {v:.3f}" for a, v in h.items()))
        m["c1_acc_mean"] = {a: _mean(v["c1_acc"]) for a, v in per_arch.items()}
        m["c2_em_mean"] = {a: _mean(v["c2_em"]) for a, v in per_arch.items()}
    m["load_cv_mean"] = {a: _mean(v["load_cv_mean"]) for a, v in per_arch.items()}
    return m, notes, reps


def claim_metrics(runs: list[dict], compose: dict[str, dict], timing: dict,
                  primary_dag: str = "dag_moe", primary_sum: str = "moe_sum") -> dict:
    """Summary metrics and notes for claims.yaml. `compose` maps "sum"/"dag" to compose
    results; `timing` maps arch → {"median_ms", ...} from one interleaved process."""
    per_arch = _per_arch(runs)
    mean_val = {a: _mean(v["val_loss"]) for a, v in per_arch.items()}
    pairs = {a: baseline_of(runs, a) for a, v in per_arch.items() if v["aggregation"] == "dag"}
    # every metric a claim checks is a key, null where it cannot be measured (an arch or the
    # compose runs missing)
    m: dict = {"archs": per_arch, "d1_val_loss_delta": None, "d2_loss_ratio": None, "d2_acc_gain": None,
               "d3_param_overhead_pct": None, "d3_flop_overhead_pct": None, "d4_max_layer_edge_a12": None}
    notes: dict = {}
    replicates: dict = {}
    d1m, d1n, d1r = _d1_quality(per_arch, mean_val, pairs, primary_dag, primary_sum)
    d2m, d2n, d2r = _d2_composition(compose) if "sum" in compose and "dag" in compose else ({}, {}, {})
    d4m, d4n, d4r = _d4_edges(runs, per_arch, compose, d2m, primary_dag)
    sm, sn, sr = _synthetic_task_means(per_arch, primary_dag)
    for r in (d1r, d2r, d4r, sr):
        replicates.update(r)
    for pm, pn in ((d1m, d1n), (d2m, d2n), _d3_overheads(per_arch, pairs),
                   _d3_step_time(timing, pairs, primary_dag, primary_sum) if timing else ({}, {}),
                   (d4m, d4n), (sm, sn)):
        m.update(pm)
        notes.update(pn)
    m["replicates"] = replicates
    m["notes"] = notes
    return m


def figure(summary: dict, out: str, caption: str) -> None:
    from methods.core.plots import figure as fig_, save

    archs = summary["archs"]
    has_d2 = "d2" in summary
    fig, axes = fig_(1, 3 if has_d2 else 2, figsize=(10, 3.4))
    ax = axes[0]
    for a, v in sorted(archs.items()):
        curves = [c for c in v["val_curve"] if c]
        if not curves:
            continue
        steps = [s for s, _ in curves[0]]
        mean = [statistics.mean(c[i][1] for c in curves) for i in range(len(steps))]
        ax.plot(steps, mean, marker="o", label=a, linestyle="--" if v["aggregation"] == "sum" else "-")
    ax.set(xlabel="step", ylabel="val loss (seed mean)", title="Mixture LM")
    ax.legend()
    ax = axes[1]
    names = sorted(archs)
    for i, a in enumerate(names):
        vals = archs[a]["val_loss"]
        ax.bar(i, statistics.mean(vals), color="#8d96a3" if archs[a]["aggregation"] == "sum" else "#1b6ca8")
        ax.plot([i] * len(vals), vals, "k.", markersize=6)
    ax.set_xticks(range(len(names)), names, rotation=20)
    lo = min(min(archs[a]["val_loss"]) for a in names)
    hi = max(max(archs[a]["val_loss"]) for a in names)
    ax.set_ylim(lo - 0.2 * (hi - lo + 1e-3), hi + 0.2 * (hi - lo + 1e-3))
    ax.set(ylabel="final val loss", title="D1: final val loss (dots: seeds)")
    if has_d2:
        ax = axes[2]
        d2 = summary["d2"]
        n = len(d2["sum"]["loss"])
        xs = range(n)
        ax.bar([x - 0.2 for x in xs], d2["sum"]["loss"], width=0.4, label="sum-MoE", color="#8d96a3")
        ax.bar([x + 0.2 for x in xs], d2["dag"]["loss"], width=0.4, label="DAG-MoE", color="#1b6ca8")
        ax.set_xticks(list(xs), [f"seed {i}" for i in xs])
        ax.set(ylabel="answer loss (all pairs)", title=f"D2: 1-layer composition (ratio {summary['d2_loss_ratio']:.2f})")
        ax.legend()
    save(fig, out, caption)
