"""SCOPE's routing step: predictions of the estimators on the test queries, Stage I anchor
statistics, the two-stage routing rule over the α grid, baselines, budget mode, claim metrics
and the Pareto figure."""
from __future__ import annotations

import numpy as np

from methods.core.results import read_json, write_json, write_text
from methods.core.stats import LEVEL, interval_record

from . import core
from .config import RouteConfig
from .run import examples, predict, predict_hub, predictor_info


def _arrays(oc: dict, split: str):
    order = oc["order"]
    qids = [it["qid"] for it in oc["queries"] if it["split"] == split]
    corr = np.array([[oc["models"][m]["rows"][q]["correct"] for m in order] for q in qids], dtype=float)
    cost = np.array([[oc["models"][m]["rows"][q]["cost"] for m in order] for q in qids])
    return qids, corr, cost


def prediction_table(oc: dict, dirs: dict[str, str], k_prompt: int) -> dict:
    """variant → (pred_correct P(yes) (Q, M), pred_len (Q, M), parse rate)."""
    order = oc["order"]
    out, done = {}, {}
    for variant, d in dirs.items():
        k = 0 if variant == "noanchor" else k_prompt
        info = predictor_info(d)
        if info.get("hub"):
            # the released predictor: one run per (model, k); its SFT and SFT+GRPO pointers are the
            # same checkpoint, so they share predictions (GRPO moves none: C5b is a tie by construction)
            ex = examples(oc, "test", k, order, cot=True)
            run_key = (info["hub"], k)
            if run_key not in done:
                done[run_key] = predict_hub(info, ex)
            pr = done[run_key]
        else:
            ex = examples(oc, "test", k, order)
            pr = predict(d, ex)
        nq = len(ex) // len(order)
        out[variant] = {"p": np.array([p["pred_correct"] for p in pr]).reshape(nq, len(order)),
                        "len": np.array([p["pred_len"] for p in pr], dtype=float).reshape(nq, len(order)),
                        "parse_rate": float(np.mean([p["parsed"] for p in pr]))}
    return out


def shared_setting(cfg: RouteConfig, oc: dict) -> dict:
    """What every predictor seed shares (the pool and outcome table are trained once): the test
    outcomes, Stage I anchor statistics, single models, the random / highest-cost / kNN baselines."""
    order, unseen = oc["order"], oc["unseen"]
    M = len(order)
    u = order.index(unseen)
    seen_idx = [i for i in range(M) if i != u]
    qids, corr, cost = _arrays(oc, "test")
    true_len = np.array([[oc["models"][m]["rows"][q]["tokens"] for m in order] for q in qids], dtype=float)
    # ---- Stage I: anchor statistics over the top k_r anchors
    anc = np.array([[a for a, _ in oc["retrieval"][q][:cfg.k_r]] for q in qids])
    sims = np.array([[s for _, s in oc["retrieval"][q][:cfg.k_r]] for q in qids])
    a_corr = np.array([[oc["models"][m]["rows"][a]["correct"] for m in order] for a in anc.ravel()],
                      dtype=float).reshape(len(qids), cfg.k_r, M)
    a_cost = np.array([[oc["models"][m]["rows"][a]["cost"] for m in order] for a in anc.ravel()]
                      ).reshape(len(qids), cfg.k_r, M)
    acc_m, cost_m = core.anchor_stats(sims, a_corr, a_cost)
    singles = {m: {"acc": float(corr[:, i].mean()), "cost": float(cost[:, i].sum())} for i, m in enumerate(order)}
    nq = len(qids)
    rows_q = np.arange(nq)
    rng = np.random.default_rng(cfg.seed)
    rch = rng.integers(0, M, nq)
    baselines = {"random": {"acc": float(corr[rows_q, rch].mean()), "cost": float(cost[rows_q, rch].sum())}}
    hc = int(np.argmax([singles[m]["cost"] for m in order]))
    baselines["highest_cost"] = dict(singles[order[hc]])
    # kNN router: majority over the k nearest anchors of the best seen model label (the cheapest
    # correct seen model; the most accurate-on-anchors seen model when none is correct)
    anchors = [it["qid"] for it in oc["queries"] if it["split"] == "anchor"]
    an_corr = np.array([[oc["models"][m]["rows"][a]["correct"] for m in order] for a in anchors], dtype=float)
    an_cost = np.array([[oc["models"][m]["rows"][a]["cost"] for m in order] for a in anchors])
    fallback = seen_idx[int(np.argmax(an_corr[:, seen_idx].mean(0)))]
    label = {}
    for j, a in enumerate(anchors):
        ok = [i for i in seen_idx if an_corr[j, i] > 0]
        label[a] = min(ok, key=lambda i: an_cost[j, i]) if ok else fallback
    kch = np.array([int(np.argmax(np.bincount([label[a] for a, _ in oc["retrieval"][q][:cfg.knn_k]], minlength=M)))
                    for q in qids])
    baselines["knn"] = {"acc": float(corr[rows_q, kch].mean()), "cost": float(cost[rows_q, kch].sum())}
    return {"order": order, "unseen": unseen, "M": M, "u": u, "seen_idx": seen_idx, "qids": qids, "corr": corr,
            "cost": cost, "true_len": true_len, "norm_acc": core.minmax_rows(acc_m),
            "norm_cost": core.log_minmax_rows(cost_m),
            "prompt_tok": np.array([[oc["models"][m]["rows"][q]["prompt_tokens"] for m in order] for q in qids]),
            "pin": np.array([oc["models"][m]["price_in"] for m in order]),
            "pout": np.array([oc["models"][m]["price_out"] for m in order]),
            "singles": singles, "baselines": baselines, "kch": kch,
            "cmax": max(v["cost"] for v in singles.values()),
            "best_i": int(np.argmax([singles[m]["acc"] for m in order])),
            "cheap_i": int(np.argmin([singles[m]["cost"] for m in order]))}


def seed_analysis(cfg: RouteConfig, oc: dict, sh: dict, dirs: dict[str, str], k_prompt: int) -> dict:
    """One predictor seed: its three estimators' predictions, the α curves, budget mode and the
    claim metrics, with the per-query values behind the accuracy differences."""
    order, M, u, seen_idx = sh["order"], sh["M"], sh["u"], sh["seen_idx"]
    corr, cost, singles, cmax = sh["corr"], sh["cost"], sh["singles"], sh["cmax"]
    nq = len(sh["qids"])
    rows_q = np.arange(nq)
    preds = prediction_table(oc, dirs, k_prompt)
    est = {}
    for v, p in preds.items():
        est[v] = {"auc_all": core.auc(p["p"].ravel(), corr.ravel()),
                  "auc_seen": core.auc(p["p"][:, seen_idx].ravel(), corr[:, seen_idx].ravel()),
                  "auc_unseen": core.auc(p["p"][:, u], corr[:, u]),
                  "pred_acc": float(((p["p"] > 0.5) == (corr > 0.5)).mean()),
                  "pred_acc_unseen": float(((p["p"][:, u] > 0.5) == (corr[:, u] > 0.5)).mean()),
                  "mae_log_len": float(np.abs(np.log(p["len"] + 1) - np.log(sh["true_len"] + 1)).mean()),
                  "parse_rate": p["parse_rate"]}
    alphas = np.round(np.arange(0, 1 + 1e-9, cfg.alpha_step), 6)

    def choices(variant, a, anchor_only=False):
        p = preds[variant]
        pc = (p["p"] > 0.5).astype(float)
        npc = core.minmax_all((sh["prompt_tok"] * sh["pin"] + p["len"] * sh["pout"]) / 1e6)
        return core.route(sh["norm_acc"], sh["norm_cost"], pc, npc, float(a), cfg.gamma,
                          None if anchor_only else cfg.w)

    def curve(variant, anchor_only=False):
        rows = []
        for a in alphas:
            ch = choices(variant, a, anchor_only)
            rows.append({"alpha": float(a), "acc": float(corr[rows_q, ch].mean()), "cost": float(cost[rows_q, ch].sum()),
                         "share": np.bincount(ch, minlength=M).tolist(), "choice": ch})
        return rows

    curves = {"scope": curve("rl"), "scope_sft": curve("sft"), "scope_noanchor": curve("noanchor"),
              "anchor_only": curve("rl", anchor_only=True)}
    # ---- budget mode (α grid of 101) with SCOPE
    fine = []
    for a in np.linspace(0, 1, 101):
        ch = choices("rl", a)
        fine.append((float(a), float(corr[rows_q, ch].mean()), float(cost[rows_q, ch].sum())))
    budget = {}
    for b in cfg.budgets:
        ok = [f for f in fine if f[2] <= b * cmax]
        best = max(ok, key=lambda f: f[1]) if ok else None
        budget[str(b)] = None if best is None else {"alpha": best[0], "acc": best[1], "cost": best[2],
                                                    "budget": b * cmax}
    # ---- claims
    sc = curves["scope"]
    a1, a0 = sc[-1], sc[0]
    best_i, cheap_i = sh["best_i"], sh["cheap_i"]
    pts = [(s["cost"], s["acc"]) for s in singles.values()]
    dom = core.dominated(pts, [(r["cost"], r["acc"]) for r in sc])
    strict = strictly_dominated(pts, [(r["cost"], r["acc"]) for r in sc])
    e_rl, e_sft, e_no = est["rl"], est["sft"], est["noanchor"]
    y1, y0 = corr[rows_q, a1["choice"]], corr[rows_q, a0["choice"]]
    m = {
        "c1_alpha1_acc": a1["acc"], "c1_margin_vs_best_single": a1["acc"] - singles[order[best_i]]["acc"],
        "c1_margin_vs_knn": a1["acc"] - sh["baselines"]["knn"]["acc"],
        "c1_alpha1_top_share": float(np.bincount(a1["choice"], minlength=M).max() / nq),
        "c2_alpha0_cost_ratio": a0["cost"] / cmax, "c2_alpha0_acc": a0["acc"],
        "c2_acc_margin_vs_cheapest": a0["acc"] - singles[order[cheap_i]]["acc"],
        "c2_alpha0_cheapest_share": float(np.mean(a0["choice"] == cheap_i)),
        "c2_alpha0_share": np.bincount(a0["choice"], minlength=M).tolist(),
        "c3_dominated": int(sum(strict)), "c3_weakly_dominated": int(sum(dom)),
        "c4_unseen_auc": e_rl["auc_unseen"], "c4_seen_auc": e_rl["auc_seen"],
        "c4_gap": abs(e_rl["auc_unseen"] - e_rl["auc_seen"]),
        "c5_auc_anchor": e_sft["auc_all"], "c5_auc_noanchor": e_no["auc_all"],
        "c5_anchor_drop": e_sft["auc_all"] - e_no["auc_all"],
        "c5_grpo_minus_sft": e_rl["auc_all"] - e_sft["auc_all"],
        # GRPO moved some prediction (else SFT+GRPO ties SFT by construction)
        "c5_grpo_changed_frac": float(np.mean(np.abs(preds["rl"]["p"] - preds["sft"]["p"]) > 1e-9)),
        "pareto_auc": {k: core.pareto_auc([(r["cost"], r["acc"]) for r in v], cmax) for k, v in curves.items()},
        "estimator": est, "budget": budget,
    }
    # per-query values of the accuracy differences (the items within this seed)
    items = {"c1_margin_vs_best_single": y1 - corr[:, best_i], "c1_margin_vs_knn": y1 - corr[rows_q, sh["kch"]],
             "c2_acc_margin_vs_cheapest": y0 - corr[:, cheap_i]}
    uses = {"c4_unseen_auc": ("rl",), "c4_gap": ("rl",), "c5_anchor_drop": ("sft", "noanchor"),
            "c5_grpo_minus_sft": ("rl", "sft")}
    unparsed = {k: [v for v in vs if preds[v]["parse_rate"] == 0.0] for k, vs in uses.items()}
    return {"metrics": m, "items": items, "unparsed": {k: vs for k, vs in unparsed.items() if vs},
            "curves": curves, "preds": preds}


# metrics of the headline / mechanism claims (claims.yaml, `replicates: seed`): one value per
# predictor seed, emitted as `replicates` records; the accuracy differences carry their per-query
# values too (a cluster bootstrap: seeds, then queries within a seed)
SEED_METRICS = ("c1_margin_vs_best_single", "c1_margin_vs_knn", "c2_alpha0_cost_ratio", "c2_acc_margin_vs_cheapest",
                "c3_dominated", "c4_unseen_auc", "c4_gap", "c5_anchor_drop", "c5_grpo_minus_sft")
# guard metrics: the value that guards every seed (the worst seed)
GUARD_WORST = {"c1_alpha1_top_share": max, "c5_grpo_changed_frac": min}


def analyze(cfg: RouteConfig, outcomes: str, dirs: dict[int, dict[str, str]], k_prompt: int, out_dir, summary_path,
            figure_path) -> dict:
    """Every predictor seed (`dirs`: seed -> {rl, sft, noanchor}) on the shared pool: per-seed claim
    metrics, their mean as the metric and the per-seed values as `replicates` records."""
    from pathlib import Path

    from methods.core.stats import replicate_record

    oc = read_json(outcomes)
    sh = shared_setting(cfg, oc)
    order, unseen, singles = sh["order"], sh["unseen"], sh["singles"]
    seeds = sorted(dirs)
    runs = {sd: seed_analysis(cfg, oc, sh, dirs[sd], k_prompt) for sd in seeds}
    ids = [f"s{sd}" for sd in seeds]
    per = {k: [runs[sd]["metrics"][k] for sd in seeds] for k in runs[seeds[0]]["metrics"]}
    cheapest, best = order[sh["cheap_i"]], order[sh["best_i"]]
    metrics = {
        "seeds": seeds, "c1_best_single_acc": singles[best]["acc"], "c1_knn_acc": sh["baselines"]["knn"]["acc"],
        "c2_cheapest_acc": singles[cheapest]["acc"], "c3_n_models": len(singles),
        "singles": singles, "baselines": sh["baselines"], "order": order, "unseen": unseen, "n_test": len(sh["qids"]),
        "per_seed": {k: v for k, v in per.items()},
    }
    for k, vals in per.items():
        if all(isinstance(v, (int, float)) and v is not None and np.isfinite(v) for v in vals):
            metrics[k] = float(GUARD_WORST[k](vals)) if k in GUARD_WORST else float(np.mean(vals))
    reps = {}
    for k in SEED_METRICS:
        vals = per[k]
        if any(unp for sd in seeds for unp in [runs[sd]["unparsed"].get(k)]):
            continue
        if not all(v is not None and np.isfinite(v) for v in vals):
            continue
        if k in runs[seeds[0]]["items"]:
            reps[k] = replicate_record(vals, unit="seed", items=[runs[sd]["items"][k] for sd in seeds], ids=ids)
        elif k == "c3_dominated":   # a count of n models: widened by its pooled counts when every seed agrees
            n = len(singles)
            reps[k] = replicate_record(vals, unit="seed", counts=[(int(v), n) for v in vals], count_scale=float(n),
                                       ids=ids)
        else:
            reps[k] = replicate_record(vals, unit="seed", ids=ids)
    metrics["replicates"] = reps
    inconclusive = {}
    for sd in seeds:
        for k, vs in runs[sd]["unparsed"].items():
            inconclusive.setdefault(k, f"the {' and '.join(vs)} predictor of seed {sd} parsed no prediction on the "
                                       "test queries (P(correct) = 0.5 throughout)")
    all_cheap = [sd for sd in seeds if runs[sd]["metrics"]["c2_alpha0_cheapest_share"] == 1.0]
    if all_cheap:
        why = (f"α = 0 routes every test query to the cheapest model ({cheapest}) in seed(s) {all_cheap}: its cost "
               "and accuracy are that model's by construction, not a routing result")
        inconclusive.update({"c2_alpha0_cost_ratio": why, "c2_acc_margin_vs_cheapest": why})
    rl_hub = predictor_info(dirs[seeds[0]]["rl"]).get("hub")
    if rl_hub:
        why = (f"the released predictor {rl_hub} was trained on the outcome dataset's models, {unseen} among them: "
               "it is not unseen by this predictor")
        inconclusive.update({k: why for k in ("c4_unseen_auc", "c4_gap") if k not in inconclusive})
    if inconclusive:
        metrics["inconclusive"] = inconclusive

    def vals(k, f="{:.3f}"):
        return "/".join(f.format(v) for v in per[k])

    share0 = np.mean([runs[sd]["metrics"]["c2_alpha0_share"] for sd in seeds], axis=0) / len(sh["qids"])
    metrics["notes"] = {
        "c1_margin_vs_best_single": f"α=1 acc per seed {vals('c1_alpha1_acc')} vs best single {best} "
                                    f"{singles[best]['acc']:.3f}; α=1 sends up to {100 * metrics['c1_alpha1_top_share']:.0f}% "
                                    "of queries to one model",
        "c1_margin_vs_knn": f"α=1 acc per seed {vals('c1_alpha1_acc')} vs kNN router {sh['baselines']['knn']['acc']:.3f}",
        "c2_alpha0_cost_ratio": f"α=0 cost per seed {vals('c2_alpha0_cost_ratio')}× the most expensive model's; α=0 "
                                "shares (mean over seeds) " + ", ".join(f"{m} {100 * s:.0f}%" for m, s in zip(order, share0)),
        "c2_acc_margin_vs_cheapest": f"α=0 acc per seed {vals('c2_alpha0_acc')} vs cheapest {cheapest} "
                                     f"{singles[cheapest]['acc']:.3f}",
        "c3_dominated": f"per seed {vals('c3_dominated', '{:d}')} of {len(singles)} single-model points strictly "
                        "dominated by an α-grid point (cost ≤, accuracy ≥, one of them strictly)",
        "c4_unseen_auc": f"unseen {unseen} AUC per seed {vals('c4_unseen_auc')}, seen models {vals('c4_seen_auc')}",
        "c4_gap": f"|AUC unseen − AUC seen| per seed {vals('c4_gap')}",
        "c5_anchor_drop": f"AUC(SFT, anchors) − AUC(SFT, k = 0) per seed {vals('c5_anchor_drop')}",
        "c5_grpo_minus_sft": f"AUC SFT+GRPO − SFT per seed {vals('c5_grpo_minus_sft', '{:.4f}')}; GRPO moved at least "
                             f"{100 * metrics['c5_grpo_changed_frac']:.0f}% of the P(correct) predictions in every seed",
    }
    metrics = _clean(metrics)
    out_dir = Path(out_dir)
    rows = ["seed,variant,alpha,acc,cost"] + [f"{sd},{k},{r['alpha']},{r['acc']:.6f},{r['cost']:.6g}"
                                              for sd in seeds for k, v in runs[sd]["curves"].items() for r in v]
    write_text(out_dir / "pareto.csv", "\n".join(rows) + "\n")
    write_json(out_dir / "budget.json", {f"s{sd}": runs[sd]["metrics"]["budget"] for sd in seeds})
    corr, true_len, qids = sh["corr"], sh["true_len"], sh["qids"]
    sel = [{"qid": q, "models": {m: {"pred_correct": [float(runs[sd]["preds"]["rl"]["p"][i, j]) for sd in seeds],
                                     "pred_len": [float(runs[sd]["preds"]["rl"]["len"][i, j]) for sd in seeds],
                                     "gt_correct": bool(corr[i, j]), "gt_len": int(true_len[i, j])}
                                 for j, m in enumerate(order)}} for i, q in enumerate(qids)]
    write_json(out_dir / "selection.json", {"seeds": seeds, "questions": sel})
    _figure(runs[seeds[0]]["curves"], singles, sh["baselines"], figure_path, unseen)
    return metrics


def strictly_dominated(points: list[tuple[float, float]], curve: list[tuple[float, float]]) -> list[bool]:
    """Per (cost, acc) point: is some curve point at most as costly and at least as accurate, and
    strictly better in one of the two (an α-point identical to the model, e.g. α = 0 routing every
    query to the cheapest model, is a tie by construction and does not count)?"""
    tol_c, tol_a = 1e-9, 1e-12
    return [any(c <= pc * (1 + tol_c) and a >= pa - tol_a and (c < pc * (1 - tol_c) or a > pa + tol_a)
                for c, a in curve) for pc, pa in points]


def bootstrap_queries(stat, n: int, seed: int, n_resamples: int = 1000, level: float = LEVEL) -> dict | None:
    """Percentile bootstrap of `stat(idx)` over resampled test queries (each query with all its
    models' outcomes); resamples where the statistic is undefined (NaN: one class only) are dropped."""
    rng = np.random.default_rng(seed)
    vals = [stat(rng.integers(0, n, n)) for _ in range(n_resamples)]
    vals = np.array([v for v in vals if v is not None and np.isfinite(v)])
    if len(vals) < n_resamples // 2:
        return None
    lo, hi = np.quantile(vals, [(1 - level) / 2, (1 + level) / 2])
    return interval_record(float(lo), float(hi), method="bootstrap over queries", n=n, level=level,
                           unit="item")


def _clean(x):
    """NaN (an AUC with one class only) → None, so the JSON is strict and the claim unchecked."""
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return core.finite(x)


CAPTION = ("SCOPE routing on the tiny pool (test queries): routed accuracy vs total cost as the knob α goes "
           "from 0 (cheapest) to 1 (most accurate), for SCOPE (SFT+GRPO estimator + anchor statistics), the SFT-only "
           "estimator, the estimator trained without anchors (k=0) and the anchor-statistics-only router (w'=1). "
           "Squares: single models (star: the unseen model, held out of predictor training); crosses: random, "
           "highest-cost and kNN routers.")


def _figure(curves, singles, baselines, path, unseen):
    from methods.core.plots import figure, save

    fig, ax = figure(1, 1, figsize=(6.4, 4.4))
    styles = {"scope": "-o", "scope_sft": "--", "scope_noanchor": ":", "anchor_only": "-."}
    for k, v in curves.items():
        ax.plot([r["cost"] for r in v], [r["acc"] for r in v], styles[k], ms=3, label=k)
    for m, s in singles.items():
        ax.scatter([s["cost"]], [s["acc"]], marker="*" if m == unseen else "s", s=60, zorder=5, color="k")
        ax.annotate(m + (" (unseen)" if m == unseen else ""), (s["cost"], s["acc"]), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    for k, s in baselines.items():
        ax.scatter([s["cost"]], [s["acc"]], marker="x", s=40, color="gray")
        ax.annotate(k, (s["cost"], s["acc"]), fontsize=7, xytext=(3, -9), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("total cost of the test set (USD, tiny price table)")
    ax.set_ylabel("routed accuracy")
    ax.legend(fontsize=7)
    save(fig, path, CAPTION)
