"""Table, claim metrics R1–R5 (+ the trl cross-check) and the two figures."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated

from methods.core.config import Check, PosInt
from methods.core.results import InputError, write_metrics, write_text

from .config import Ablation, AnalysisConfig as AnalysisSection, Grid


@dataclass
class AnalysisConfig(AnalysisSection):
    """The `analysis` section plus the run design (widths, lr grid, ablations; the workflow
    merges them in). `widths`: the tiny widths (sorted here), or on the hub path the base keys
    m<i> of hub.models, narrowest first as the config lists them (the last is the main model)."""
    widths: list[PosInt] | list[Annotated[str, Check(pattern=r"^m\d+$")]]
    grid: Grid
    ablation: Ablation


def _t(values) -> dict | None:
    """95% t interval over per-seed values (methods.core.stats), None with < 2 values."""
    from methods.core.stats import t_interval

    return t_interval(values, unit="seed") if len(values) >= 2 else None


def _replicates(values, seeds) -> dict:
    """The per-seed values of a claim metric for methods.core.claims to compute the interval over
    the seeds from (the training seed is the outer unit)."""
    from methods.core.stats import replicate_record

    return replicate_record(values, unit="seed", ids=[f"s{int(sd)}" for sd in seeds])


def _curve(df, width, opt):
    """Seed-mean (lr, acc, bf16 changed, fp32 changed) per lr, sorted by lr."""
    sub = df[(df.width == width) & (df.optimizer == opt)]
    if sub.empty:
        return None
    return sub.groupby("lr")[["acc", "bf16_changed", "fp32_changed"]].mean().reset_index().sort_values("lr")


def _per_seed_ratios(df, width, tol) -> tuple[list[float], list[int], list[int]]:
    """([matched ratio of each seed whose curves match], [seeds with no matchable SGD lr],
    [the matched seeds]) at one width: `matched_ratio` on each seed's own lr curves."""
    per_seed, unmatched, matched = [], [], []
    for sd in sorted(df[(df.width == width) & (df.optimizer == "sgd")].seed.unique()):
        one = df[df.seed == sd]
        r_sd, _ = matched_ratio(_curve(one, width, "sgd"), _curve(one, width, "adamw"), tol)
        if r_sd is None:
            unmatched.append(int(sd))
        else:
            per_seed.append(r_sd)
            matched.append(int(sd))
    return per_seed, unmatched, matched


def _width_gap(m, intervals, inconclusive, notes, seed_ratios, small, large) -> None:
    """R2b: mean per-seed matched ratio at the narrowest width minus the same at the widest (> 0:
    the ratio falls with width), with a Welch 95% interval (the seeds at the two widths are
    different models, so unpaired); its `n` is the smaller of the two seed counts (the replicates
    behind the less replicated mean). Fewer than 2 matched seeds at either width, or an unmatched
    seed, gives no interval, and the analysis declares the metric inconclusive."""
    from scipy import stats

    from methods.core.stats import interval_record

    (rs, un_s, _), (rl, un_l, _) = seed_ratios[small], seed_ratios[large]
    m["r2_ratio_small_per_seed"] = rs
    m["r2_width_gap"] = (sum(rs) / len(rs) - sum(rl) / len(rl)) if rs and rl else None
    notes["r2_width_gap"] = (f"per-seed matched ratio d={small}: " + ("/".join(f"{x:.3f}" for x in rs) or "none")
                             + f"; d={large}: " + ("/".join(f"{x:.3f}" for x in rl) or "none"))
    if m["r2_width_gap"] is None:
        return
    short = [f"d={w}: {len(r)} matched seed{'s' if len(r) != 1 else ''}" + (f", unmatched {u}" if u else "")
             for w, r, u in ((small, rs, un_s), (large, rl, un_l)) if len(r) < 2 or u]
    if short:
        inconclusive["r2_width_gap"] = ("a width trend needs every seed matched and ≥ 2 seeds at each width for "
                                        f"an interval ({'; '.join(short)})")
        return
    ci = stats.ttest_ind(rs, rl, equal_var=False).confidence_interval(0.95)
    intervals["r2_width_gap"] = interval_record(float(ci.low), float(ci.high), method="welch_t",
                                                n=min(len(rs), len(rl)), unit="seed")


def matched_ratio(sgd, adamw, tol):
    """Changed-fraction ratio SGD / AdamW at matched accuracy (claim R2). For every SGD lr
    whose seed-mean accuracy lies in AdamW's accuracy range (± `tol`, then AdamW's nearest end
    point is used), AdamW's changed fraction is interpolated linearly in accuracy over its lr
    grid; the ratio reported is the LARGEST over those SGD lrs (the least favourable to the
    claim). Returns (ratio or None, per-lr details)."""
    import numpy as np

    a = adamw.sort_values("acc")
    lo, hi = a.acc.min(), a.acc.max()
    detail = []
    for _, r in sgd.iterrows():
        if lo - tol <= r.acc <= hi + tol:
            frac_a = float(np.interp(r.acc, a.acc.values, a.bf16_changed.values))
            detail.append({"sgd_lr": float(r.lr), "sgd_acc": float(r.acc), "sgd_changed": float(r.bf16_changed),
                           "adamw_changed": frac_a, "ratio": float(r.bf16_changed) / frac_a if frac_a > 0 else None})
        else:
            detail.append({"sgd_lr": float(r.lr), "sgd_acc": float(r.acc), "matched": False})
    ratios = [d["ratio"] for d in detail if d.get("ratio") is not None]
    return (max(ratios) if ratios else None), detail


def _lm_eval_columns(rows: list[dict], lm_eval: dict | None) -> None:
    """Hub path: each run's lm-eval metrics as `lm_eval:<task>:<metric>` columns (stderr and
    sample counts left out)."""
    for row in rows if lm_eval is not None else []:
        for task, metrics in (lm_eval.get(row["run"]) or {}).get("tasks", {}).items():
            for k, v in metrics.items():
                if k != "sample_len" and "stderr" not in k:
                    row[f"lm_eval:{task}:{k}"] = v


def aggregate(cfg: AnalysisConfig, runs: dict, sft: dict, trl: dict, table, summary, fig_acc, fig_width,
              lm_eval: dict | None = None):
    """`lm_eval` (hub path): {run or base dir name: {"hub_id", "tasks": {task: metrics}}}, reported
    in the summary and as a table column per task and metric; no claim reads it."""
    import pandas as pd

    rows = []
    for name, r in runs.items():
        s = r["summary"]
        rows.append({"run": name, "width": s["width"], "optimizer": s["optimizer"], "lr": s["lr"], "seed": s["seed"],
                     "n_params": s["n_params"], "base_acc": s["base_acc"], "acc": s["acc"],
                     "bf16_changed": r["bf16_changed"], "fp32_changed": r["fp32_changed"],
                     "hidden_bf16_changed": r["hidden_bf16_changed"], "eff_rank_frac": r["mean_eff_rank_frac"],
                     "rank99_frac": r["mean_rank99_frac"], "state_bytes": s["state_bytes"], "wall_s": s["wall_s"]})
    _lm_eval_columns(rows, lm_eval)
    df = pd.DataFrame(rows).sort_values(["width", "optimizer", "lr", "seed"])
    widths = list(cfg.widths) if isinstance(cfg.widths[0], str) else sorted(cfg.widths)
    large, small = widths[-1], widths[0]
    notes, m = {}, {}
    curves = {(w, o): _curve(df, w, o) for w in widths for o in ("adamw", "sgd")}
    if any(c is None for c in curves.values()):
        raise InputError("aggregate: every width needs adamw and sgd runs")
    intervals, inconclusive, reps = {}, {}, {}
    # R1: each optimizer at its best lr (by seed-mean accuracy); per-seed differences, seeds paired,
    # as the replicates record (unit seed)
    best = {o: curves[(large, o)].acc.max() for o in ("adamw", "sgd")}
    bl = {o: float(curves[(large, o)].loc[curves[(large, o)].acc.idxmax()].lr) for o in ("adamw", "sgd")}
    at_best = {o: df[(df.width == large) & (df.optimizer == o) & (abs(df.lr - bl[o]) <= 1e-12 * bl[o])]
               .set_index("seed").acc.sort_index() for o in ("adamw", "sgd")}
    if list(at_best["sgd"].index) != list(at_best["adamw"].index):
        raise InputError(f"aggregate: R1 needs the same seeds for SGD {list(at_best['sgd'].index)} and AdamW "
                         f"{list(at_best['adamw'].index)} at d={large}")
    diffs = (at_best["sgd"] - at_best["adamw"]).tolist()
    base_large = float(df[df.width == large].base_acc.iloc[0])
    m["r1_sgd_minus_adamw"] = float(best["sgd"] - best["adamw"])
    m["r1_sgd_minus_adamw_per_seed"] = diffs
    m["r1_best_acc"] = {o: float(v) for o, v in best.items()}
    m["r1_adamw_gain_over_base"] = float(best["adamw"] - base_large)
    reps["r1_sgd_minus_adamw"] = _replicates(diffs, at_best["sgd"].index)
    notes["r1_sgd_minus_adamw"] = (f"d={large}, means over {len(diffs)} seeds: SGD best {best['sgd']:.3f} "
                                   f"(lr {bl['sgd']:g}), AdamW best {best['adamw']:.3f} (lr {bl['adamw']:g}), "
                                   f"base {base_large:.3f}; per-seed SGD − AdamW "
                                   + "/".join(f"{x:+.3f}" for x in diffs))
    # R2
    ratios = {}
    for w in widths:
        ratio, detail = matched_ratio(curves[(w, "sgd")], curves[(w, "adamw")], cfg.match_tol)
        ratios[w] = ratio
        m[f"r2_detail_d{w}"] = detail
        a = curves[(w, "adamw")]
        if ratio is None:
            sgd_accs = ", ".join(f"{d['sgd_acc']:.3f}" for d in detail)
            notes[f"r2_ratio_d{w}"] = (f"d={w}: no SGD lr has an accuracy in AdamW's range "
                                       f"[{a.acc.min():.3f}, {a.acc.max():.3f}] ± {cfg.match_tol} "
                                       f"(SGD: {sgd_accs}); no matched-reward ratio")
        else:
            notes[f"r2_ratio_d{w}"] = f"d={w}: " + "; ".join(
                f"SGD lr {d['sgd_lr']:g} acc {d['sgd_acc']:.3f}: " + (
                    f"{d['sgd_changed']:.3f} vs AdamW {d['adamw_changed']:.3f}" if "ratio" in d else "unmatched")
                for d in detail)
    m["r2_ratio_small"] = ratios[small]
    # R2a / R2b per seed: the same matching on each seed's own curves at one width
    seed_ratios = {w: _per_seed_ratios(df, w, cfg.match_tol) for w in (small, large)}
    _width_gap(m, intervals, inconclusive, notes, seed_ratios, small, large)
    # R2a at the widest width, per seed: the same matching on each seed's own curves; the metric
    # is the mean over seeds of the per-seed ratio, the per-seed ratios its replicates record (the
    # claims engine computes the interval over the seeds). A seed with no matchable SGD lr makes the
    # claim inconclusive (the seed-mean-curve ratio is then shown).
    per_seed, unmatched, matched = seed_ratios[large]
    m["r2_ratio_large_seed_mean_curves"] = ratios[large]
    m["r2_ratio_large_per_seed"] = per_seed
    m["r2_unmatched_seeds"] = unmatched
    m["r2_ratio_large"] = (sum(per_seed) / len(per_seed)) if per_seed else ratios[large]
    if unmatched and m["r2_ratio_large"] is not None:
        inconclusive["r2_ratio_large"] = (f"seed(s) {unmatched} at d={large}: no SGD lr within AdamW's accuracy "
                                          f"range ± {cfg.match_tol}, so no matched-reward ratio there")
    if per_seed:
        reps["r2_ratio_large"] = _replicates(per_seed, matched)
    notes["r2_ratio_large"] = (notes[f"r2_ratio_d{large}"] + f" (seed-mean curves: ratio {ratios[large]}); per seed "
                               + "/".join(f"{x:.3f}" for x in per_seed)
                               + (f", unmatched seeds {unmatched}" if unmatched else "")
                               + " (the largest matched ratio is reported; this matching rule replaced "
                               "'SGD's best lr only' after the first tiny run, where that rule was "
                               "undefined because SGD's best accuracy exceeded AdamW's best)")
    # R3
    core = df[df.optimizer.isin(["adamw", "sgd"])]
    m["r3_min_fp32_changed"] = float(core.fp32_changed.min())
    m["r3_min_bf16_changed"] = float(core.bf16_changed.min())
    notes["r3_min_fp32_changed"] = (f"fp32 changed {core.fp32_changed.min():.4f}–{core.fp32_changed.max():.4f}; "
                                    f"bf16 changed {core.bf16_changed.min():.4f}–{core.bf16_changed.max():.4f}")
    # R4
    # a run whose every group had equal rewards never stepped (fp32 unchanged): its optimizer
    # never allocated state, so it says nothing about the state size and is left out
    stepped = df[df.fp32_changed > 0]
    ok_sgd = bool((stepped[stepped.optimizer == "sgd"].state_bytes == 0).all())
    ad = stepped[stepped.optimizer == "adamw"]
    ok_adam = bool((ad.state_bytes == 8 * ad.n_params).all())
    m["r4_state_bytes_exact"] = ok_sgd and ok_adam if len(ad) and (stepped.optimizer == "sgd").any() else None
    m["r4_adamw_state_bytes"] = int(ad.state_bytes.iloc[0]) if len(ad) else None
    m["r4_runs_without_update"] = sorted(df[df.fp32_changed == 0].run)
    m["r4_n_params_large"] = int(df[df.width == large].n_params.iloc[0])
    # R5, per seed s: RL relative drop of each ablation vs AdamW at `ablation_ref_lr` (both seed s,
    # widest width) minus the same drop in the SFT contrast run with seed s; per ablation the mean
    # over seeds and its t interval; the metric is the larger of the two means (the claim needs
    # both below 0), its interval [max of the lower ends, max of the upper ends]
    ref = df[(df.width == large) & (df.optimizer == "adamw") & (abs(df.lr - cfg.ablation_ref_lr) < 1e-15)]
    ref_acc = ref.set_index("seed").acc
    sft_seeds = sft.get("seeds", {})
    d5 = {}
    for var in ("adam_nomom", "adam_noadapt"):
        rl = df[(df.width == large) & (df.optimizer == var)].set_index("seed").acc
        rows5 = []
        for sd in sorted(rl.index):
            sf = sft_seeds.get(str(int(sd)), {})
            if sd not in ref_acc.index or var not in sf or "adamw" not in sf:
                continue
            drop_rl = (ref_acc[sd] - rl[sd]) / max(ref_acc[sd], 1e-9)
            drop_sft = (sf["adamw"]["acc"] - sf[var]["acc"]) / max(sf["adamw"]["acc"], 1e-9)
            rows5.append({"seed": int(sd), "drop_rl": float(drop_rl), "drop_sft": float(drop_sft),
                          "diff": float(drop_rl - drop_sft)})
        if rows5:
            diff = [r["diff"] for r in rows5]
            d5[var] = {"per_seed": rows5, "mean_diff": sum(diff) / len(diff), "interval": _t(diff)}
    m["r5_detail"] = d5
    sft_ref = [v["adamw"]["acc"] for v in sft_seeds.values() if "adamw" in v]
    m["r5_sft_adamw_acc_min"] = min(sft_ref) if sft_ref else None
    if d5:
        worst = max(d5, key=lambda k: d5[k]["mean_diff"])
        m["r5_rl_minus_sft_drop"] = d5[worst]["mean_diff"]
        by_seed = {}
        for v in d5.values():
            for r in v["per_seed"]:
                by_seed.setdefault(r["seed"], []).append(r["diff"] < 0)
        m["r5_holds_seeds"] = sum(all(x) and len(x) == len(d5) for x in by_seed.values())
        if all(v["interval"] is not None for v in d5.values()):
            from methods.core.stats import interval_record

            ivs = [v["interval"] for v in d5.values()]
            intervals["r5_rl_minus_sft_drop"] = interval_record(
                max(i["lo"] for i in ivs), max(i["hi"] for i in ivs),
                method="t per ablation, max over ablations", n=min(i["n"] for i in ivs), unit="seed")
        notes["r5_rl_minus_sft_drop"] = "; ".join(
            f"{k}: relative drop (RL, SFT) per seed " + ", ".join(
                f"s{r['seed']} ({r['drop_rl']:+.3f}, {r['drop_sft']:+.3f})" for r in v["per_seed"])
            + f"; mean of RL − SFT {v['mean_diff']:+.3f}" for k, v in d5.items())
    else:
        m["r5_rl_minus_sft_drop"] = None
        notes["r5_rl_minus_sft_drop"] = "no ablation runs at this scale"
    if lm_eval is not None:
        m["lm_eval"] = lm_eval
    m["x1_trl_update_rel_diff"] = trl.get("update_rel_diff")
    m["x1_trl_match"] = trl.get("match")
    m["sft_contrast"] = sft
    m["notes"] = notes
    m["intervals"] = intervals
    m["replicates"] = reps
    m["inconclusive"] = inconclusive
    write_text(table, "# Generated by python -m methods.rl_sgd aggregate\n" + df.to_csv(index=False))
    write_metrics(summary, m, {"analysis": dataclasses.asdict(cfg)})
    _figures(df, curves, widths, ratios, fig_acc, fig_width)


def _figures(df, curves, widths, ratios, fig_acc, fig_width):
    from methods.core.plots import figure, save

    fig, ax = figure()
    for w in widths:
        for o, mk in (("adamw", "o-"), ("sgd", "s--")):
            c = curves[(w, o)]
            ax.plot(c.bf16_changed * 100, c.acc, mk, label=f"{o} d={w}")
    abl = df[~df.optimizer.isin(["adamw", "sgd"])]
    for _, r in abl.iterrows():
        ax.plot(r.bf16_changed * 100, r.acc, "x", color="k")
        ax.annotate(r.optimizer, (r.bf16_changed * 100, r.acc), fontsize=7)
    for w in widths:
        b = df[df.width == w].base_acc.iloc[0]
        ax.axhline(b, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("bf16 entries changed vs base (%)")
    ax.set_ylabel("held-out exact match (greedy)")
    ax.legend(ncol=2)
    save(fig, fig_acc, "Accuracy after 40 GRPO steps against the share of bf16 weights that changed, one "
         "point per learning rate (seed mean), per optimizer and width; crosses are the ablations "
         "(Adam without momentum / adaptivity, SGD with momentum); dotted lines are the bases' accuracy. "
         "SGD reaching AdamW's accuracy at a smaller changed share is the paper's sparsity claim.")
    fig, axs = figure(1, 2)
    hub = isinstance(widths[0], str)  # hub bases m<i>: one x position each, in config order
    xs = {w: (i if hub else w) for i, w in enumerate(widths)}
    ws = [w for w in widths if ratios[w] is not None]
    axs[0].plot([xs[w] for w in ws], [ratios[w] for w in ws], "o-")
    if hub:
        axs[0].set_xticks(range(len(widths)), widths)
    else:
        axs[0].set_xscale("log", base=2)
    axs[0].set_xlabel("base model (hub.models index)" if hub else "width d")
    axs[0].set_ylabel("changed fraction SGD / AdamW\n(matched accuracy)")
    for o in ("adamw", "sgd"):
        axs[1].plot([xs[w] for w in widths],
                    [curves[(w, o)].loc[curves[(w, o)].acc.idxmax()].bf16_changed for w in widths],
                    "o-", label=f"{o} (best lr)")
    if hub:
        axs[1].set_xticks(range(len(widths)), widths)
    else:
        axs[1].set_xscale("log", base=2)
    axs[1].set_xlabel("base model (hub.models index)" if hub else "width d")
    axs[1].set_ylabel("bf16 changed fraction")
    axs[1].legend()
    save(fig, fig_width, "Width trend. Left: SGD's bf16 changed fraction over AdamW's at matched accuracy; "
         "the paper's >1000× gap is a billion-parameter effect, here the ratio should fall with width. "
         "Right: changed fraction of each optimizer's best-accuracy learning rate.")
