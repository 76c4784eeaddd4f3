"""SCOPE's routing step: predictions of the estimators on the test queries, Stage I anchor
statistics, the two-stage routing rule over the α grid, baselines, budget mode, claim metrics
and the Pareto figure."""
from __future__ import annotations

import numpy as np

from methods.core.results import read_json, write_json, write_text
from methods.core.stats import LEVEL, interval_record, paired_bootstrap_diff

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


def analyze(cfg: RouteConfig, outcomes: str, dirs: dict[str, str], k_prompt: int, out_dir, summary_path,
            figure_path) -> dict:
    from pathlib import Path

    oc = read_json(outcomes)
    order, unseen = oc["order"], oc["unseen"]
    M = len(order)
    u = order.index(unseen)
    seen_idx = [i for i in range(M) if i != u]
    qids, corr, cost = _arrays(oc, "test")
    preds = prediction_table(oc, dirs, k_prompt)
    # ---- estimator quality
    est = {}
    true_len = np.array([[oc["models"][m]["rows"][q]["tokens"] for m in order] for q in qids], dtype=float)
    for v, p in preds.items():
        est[v] = {"auc_seen": core.auc(p["p"][:, seen_idx].ravel(), corr[:, seen_idx].ravel()),
                  "auc_unseen": core.auc(p["p"][:, u], corr[:, u]),
                  "auc_all": core.auc(p["p"].ravel(), corr.ravel()),
                  "pred_acc": float(((p["p"] > 0.5) == (corr > 0.5)).mean()),
                  "pred_acc_unseen": float(((p["p"][:, u] > 0.5) == (corr[:, u] > 0.5)).mean()),
                  "mae_log_len": float(np.abs(np.log(p["len"] + 1) - np.log(true_len + 1)).mean()),
                  "parse_rate": p["parse_rate"]}
    # ---- Stage I: anchor statistics over the top k_r anchors
    anc = np.array([[a for a, _ in oc["retrieval"][q][:cfg.k_r]] for q in qids])
    sims = np.array([[s for _, s in oc["retrieval"][q][:cfg.k_r]] for q in qids])
    a_corr = np.array([[oc["models"][m]["rows"][a]["correct"] for m in order] for a in anc.ravel()],
                      dtype=float).reshape(len(qids), cfg.k_r, M)
    a_cost = np.array([[oc["models"][m]["rows"][a]["cost"] for m in order] for a in anc.ravel()]
                      ).reshape(len(qids), cfg.k_r, M)
    acc_m, cost_m = core.anchor_stats(sims, a_corr, a_cost)
    norm_acc, norm_cost = core.minmax_rows(acc_m), core.log_minmax_rows(cost_m)
    prompt_tok = np.array([[oc["models"][m]["rows"][q]["prompt_tokens"] for m in order] for q in qids])
    pin = np.array([oc["models"][m]["price_in"] for m in order])
    pout = np.array([oc["models"][m]["price_out"] for m in order])
    alphas = np.round(np.arange(0, 1 + 1e-9, cfg.alpha_step), 6)

    def curve(variant, anchor_only=False):
        p = preds[variant]
        pc = (p["p"] > 0.5).astype(float)
        npc = core.minmax_all((prompt_tok * pin + p["len"] * pout) / 1e6)
        rows = []
        for a in alphas:
            ch = core.route(norm_acc, norm_cost, pc, npc, float(a), cfg.gamma, None if anchor_only else cfg.w)
            sel = np.arange(len(qids))
            rows.append({"alpha": float(a), "acc": float(corr[sel, ch].mean()), "cost": float(cost[sel, ch].sum()),
                         "share": np.bincount(ch, minlength=M).tolist(), "choice": ch})
        return rows

    curves = {"scope": curve("rl"), "scope_sft": curve("sft"), "scope_noanchor": curve("noanchor"),
              "anchor_only": curve("rl", anchor_only=True)}
    singles = {m: {"acc": float(corr[:, i].mean()), "cost": float(cost[:, i].sum())} for i, m in enumerate(order)}
    rng = np.random.default_rng(cfg.seed)
    rch = rng.integers(0, M, len(qids))
    baselines = {"random": {"acc": float(corr[np.arange(len(qids)), rch].mean()),
                            "cost": float(cost[np.arange(len(qids)), rch].sum())}}
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
    kch = []
    for q in qids:
        votes = np.bincount([label[a] for a, _ in oc["retrieval"][q][:cfg.knn_k]], minlength=M)
        kch.append(int(np.argmax(votes)))
    kch = np.array(kch)
    baselines["knn"] = {"acc": float(corr[np.arange(len(qids)), kch].mean()),
                        "cost": float(cost[np.arange(len(qids)), kch].sum())}
    # ---- budget mode (α grid of 101) with SCOPE
    p = preds["rl"]
    pc = (p["p"] > 0.5).astype(float)
    npc = core.minmax_all((prompt_tok * pin + p["len"] * pout) / 1e6)
    fine = []
    for a in np.linspace(0, 1, 101):
        ch = core.route(norm_acc, norm_cost, pc, npc, float(a), cfg.gamma, cfg.w)
        fine.append((float(a), float(corr[np.arange(len(qids)), ch].mean()), float(cost[np.arange(len(qids)), ch].sum())))
    cmax = max(s["cost"] for s in singles.values())
    budget = {}
    for b in cfg.budgets:
        ok = [f for f in fine if f[2] <= b * cmax]
        best = max(ok, key=lambda f: f[1]) if ok else None
        budget[str(b)] = None if best is None else {"alpha": best[0], "acc": best[1], "cost": best[2],
                                                    "budget": b * cmax}
    # ---- claims
    sc = curves["scope"]
    a1, a0 = sc[-1], sc[0]
    nq = len(qids)
    rows_q = np.arange(nq)
    best_i = int(np.argmax([singles[m]["acc"] for m in order]))
    cheap_i = int(np.argmin([singles[m]["cost"] for m in order]))
    best_single, cheapest = singles[order[best_i]]["acc"], order[cheap_i]
    pts = [(s["cost"], s["acc"]) for s in singles.values()]
    dom = core.dominated(pts, [(r["cost"], r["acc"]) for r in sc])
    strict = strictly_dominated(pts, [(r["cost"], r["acc"]) for r in sc])
    e_rl, e_sft, e_no = est["rl"], est["sft"], est["noanchor"]
    # per-query outcomes of the routed choices (paired with the baselines on the same queries)
    y1, y0 = corr[rows_q, a1["choice"]], corr[rows_q, a0["choice"]]
    yk = corr[rows_q, kch]
    a0_cheap_share = float(np.mean(a0["choice"] == cheap_i))
    a1_top_share = float(np.bincount(a1["choice"], minlength=M).max() / nq)
    metrics = {
        "c1_alpha1_acc": a1["acc"], "c1_best_single_acc": best_single, "c1_knn_acc": baselines["knn"]["acc"],
        "c1_margin_vs_best_single": a1["acc"] - best_single, "c1_margin_vs_knn": a1["acc"] - baselines["knn"]["acc"],
        "c1_alpha1_top_share": a1_top_share,
        "c2_alpha0_cost_ratio": a0["cost"] / cmax, "c2_alpha0_acc": a0["acc"],
        "c2_cheapest_acc": singles[cheapest]["acc"], "c2_acc_margin_vs_cheapest": a0["acc"] - singles[cheapest]["acc"],
        "c2_alpha0_cheapest_share": a0_cheap_share,
        "c3_dominated": int(sum(strict)), "c3_weakly_dominated": int(sum(dom)), "c3_n_models": len(pts),
        "c4_unseen_auc": e_rl["auc_unseen"], "c4_seen_auc": e_rl["auc_seen"],
        "c4_gap": abs(e_rl["auc_unseen"] - e_rl["auc_seen"]),
        "c5_auc_anchor": e_sft["auc_all"], "c5_auc_noanchor": e_no["auc_all"],
        "c5_anchor_drop": e_sft["auc_all"] - e_no["auc_all"],
        "c5_grpo_minus_sft": e_rl["auc_all"] - e_sft["auc_all"],
        # GRPO moved some prediction (else SFT+GRPO ties SFT by construction)
        "c5_grpo_changed_frac": float(np.mean(np.abs(preds["rl"]["p"] - preds["sft"]["p"]) > 1e-9)),
        "pareto_auc": {k: core.pareto_auc([(r["cost"], r["acc"]) for r in v], cmax) for k, v in curves.items()},
        "estimator": est, "singles": singles, "baselines": baselines, "budget": budget, "order": order,
        "unseen": unseen, "n_test": nq,
    }
    # intervals: paired bootstrap over the test queries (accuracy differences), and a bootstrap
    # resampling queries (all their (query, model) pairs) for the AUCs. Their unit is the item (a
    # test query of one trained pool and predictor); every claim replicates over training seeds
    # (claims.yaml), so these intervals describe one run and decide no headline claim.
    P = {v: preds[v]["p"] for v in ("rl", "sft", "noanchor")}
    yb = corr

    def auc_of(v, cols, idx):
        return core.auc(P[v][idx][:, cols].ravel(), yb[idx][:, cols].ravel())

    allc = list(range(M))
    # an AUC metric of a predictor that parsed no prediction at all (P(correct) = 0.5 throughout)
    # measures nothing: declared inconclusive below, its bootstrap skipped
    uses = {"c4_unseen_auc": ("rl",), "c4_gap": ("rl",), "c5_anchor_drop": ("sft", "noanchor"),
            "c5_grpo_minus_sft": ("rl", "sft")}
    unparsed = {k: [v for v in vs if preds[v]["parse_rate"] == 0.0] for k, vs in uses.items()}
    unparsed = {k: vs for k, vs in unparsed.items() if vs}
    auc_stats = {
        "c4_unseen_auc": lambda i: auc_of("rl", [u], i),
        "c4_gap": lambda i: abs(auc_of("rl", [u], i) - auc_of("rl", seen_idx, i)),
        "c5_anchor_drop": lambda i: auc_of("sft", allc, i) - auc_of("noanchor", allc, i),
        "c5_grpo_minus_sft": lambda i: auc_of("rl", allc, i) - auc_of("sft", allc, i),
    }
    metrics["intervals"] = {
        "c1_margin_vs_best_single": paired_bootstrap_diff(y1, corr[:, best_i], unit="item", seed=cfg.seed),
        "c1_margin_vs_knn": paired_bootstrap_diff(y1, yk, unit="item", seed=cfg.seed),
        "c2_acc_margin_vs_cheapest": paired_bootstrap_diff(y0, corr[:, cheap_i], unit="item", seed=cfg.seed),
        **{k: bootstrap_queries(f, nq, cfg.seed) for k, f in auc_stats.items() if k not in unparsed},
    }
    metrics["intervals"] = {k: v for k, v in metrics["intervals"].items() if v is not None}
    metrics["inconclusive"] = {k: f"the {' and '.join(vs)} predictor parsed no prediction on the test queries "
                                  "(P(correct) = 0.5 throughout)" for k, vs in unparsed.items()}
    if a0_cheap_share == 1.0:
        why = (f"α = 0 routes every test query to the cheapest model ({cheapest}): its cost and accuracy "
               "are that model's by construction, not a routing result")
        metrics["inconclusive"].update({"c2_alpha0_cost_ratio": why, "c2_acc_margin_vs_cheapest": why})
    rl_hub = predictor_info(dirs["rl"]).get("hub")
    if rl_hub:
        why = (f"the released predictor {rl_hub} was trained on the outcome dataset's models, {unseen} among them: "
               "it is not unseen by this predictor")
        metrics["inconclusive"].update({k: why for k in ("c4_unseen_auc", "c4_gap") if k not in metrics["inconclusive"]})
    if not metrics["inconclusive"]:
        del metrics["inconclusive"]
    notes = {
        "c1_margin_vs_best_single": f"α=1 acc {a1['acc']:.3f} vs best single {order[best_i]} {best_single:.3f}; "
                                    f"α=1 sends {100 * a1_top_share:.0f}% of queries to one model",
        "c1_margin_vs_knn": f"α=1 acc {a1['acc']:.3f} vs kNN router {baselines['knn']['acc']:.3f}",
        "c2_alpha0_cost_ratio": f"α=0 cost {a0['cost'] / cmax:.3f}× the most expensive model's; "
                                f"{100 * a0_cheap_share:.0f}% of queries to the cheapest ({cheapest})",
        "c2_acc_margin_vs_cheapest": f"α=0 acc {a0['acc']:.3f} vs cheapest {cheapest} {singles[cheapest]['acc']:.3f}",
        "c3_dominated": f"{sum(strict)} of {len(pts)} single-model points strictly dominated by an α-grid point "
                        f"(cost ≤, accuracy ≥, one of them strictly; {sum(dom)} weakly, counting identical points)",
        "c4_unseen_auc": f"unseen {unseen} AUC {e_rl['auc_unseen']:.3f}, seen models {e_rl['auc_seen']:.3f}",
        "c4_gap": f"|AUC unseen − AUC seen| = |{e_rl['auc_unseen']:.3f} − {e_rl['auc_seen']:.3f}|",
        "c5_grpo_minus_sft": f"AUC SFT+GRPO {e_rl['auc_all']:.3f} vs SFT {e_sft['auc_all']:.3f}; GRPO moved "
                             f"{100 * metrics['c5_grpo_changed_frac']:.0f}% of the P(correct) predictions",
    }
    metrics["notes"] = notes
    metrics = _clean(metrics)
    out_dir = Path(out_dir)
    rows = ["variant,alpha,acc,cost"] + [f"{k},{r['alpha']},{r['acc']:.6f},{r['cost']:.6g}" for k, v in curves.items() for r in v]
    write_text(out_dir / "pareto.csv", "\n".join(rows) + "\n")
    write_json(out_dir / "budget.json", budget)
    sel = [{"qid": q, "models": {m: {"pred_correct": float(preds["rl"]["p"][i, j]), "pred_len": float(preds["rl"]["len"][i, j]),
                                     "gt_correct": bool(corr[i, j]), "gt_len": int(true_len[i, j])}
                                 for j, m in enumerate(order)}} for i, q in enumerate(qids)]
    write_json(out_dir / "selection.json", sel)
    _figure(curves, singles, baselines, figure_path, unseen)
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
