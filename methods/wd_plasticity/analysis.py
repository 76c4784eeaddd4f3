"""Aggregation over the λ × seed sweep, the claim metrics (W1–W3), and the figure.

Imports no torch. Seed statistics: claim metrics are computed on seed means; every headline and
mechanism claim metric also carries its per-seed values (`replicates`, unit seed,
methods.core.stats.replicate_record), from which methods.core.claims computes the interval its
verdict uses. Items (test answers) of several seeds are never pooled.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from methods.wd_plasticity.config import AnalysisConfig


def table(rows: list[dict]) -> pd.DataFrame:
    """One row per (λ, seed): pretraining, probe and downstream numbers side by side."""
    recs = []
    for r in rows:
        rec = {"weight_decay": r["weight_decay"], "seed": r["seed"], "val_loss": r["val_loss"],
               "final_train_loss": r["final_train_loss"]}
        rec.update({k: r["probes"][k] for k in ("weight_rms", "probe_accuracy", "probe_chance", "qk_norm",
                                                 "attention_effective_rank", "train_val_gap") if k in r["probes"]})
        for task, t in sorted(r["eval"]["tasks"].items()):
            for kind in ("base", "finetuned", "gain"):
                for m, v in t[kind].items():
                    rec[f"{task}_{kind}_{m}"] = v
            rec[f"{task}_selected_lr"] = t["selected_lr"]
        tasks = sorted(r["eval"]["tasks"])
        rec["ft_answer_nll"] = float(np.mean([rec[f"{t}_finetuned_answer_nll"] for t in tasks]))
        rec["ft_exact_match"] = float(np.mean([rec[f"{t}_finetuned_exact_match"] for t in tasks]))
        rec["gain_exact_match"] = float(np.mean([rec[f"{t}_gain_exact_match"] for t in tasks]))
        recs.append(rec)
    return pd.DataFrame(recs).sort_values(["weight_decay", "seed"]).reset_index(drop=True)


def _strictly(values: np.ndarray, sign: int) -> bool:
    d = np.diff(values)
    return bool(np.all(sign * d > 0))


def rel_improvement(nll_by_wd: pd.Series, baseline: float) -> float:
    """(NLL(baseline λ) − min over larger λ of NLL) / NLL(baseline λ): > 0 means a larger λ
    fine-tunes better than the default."""
    larger = nll_by_wd[nll_by_wd.index > baseline]
    return float((nll_by_wd[baseline] - larger.min()) / nll_by_wd[baseline])


def _per_seed(df: pd.DataFrame, col: str) -> pd.DataFrame:
    """seed × λ table of one column (seeds that lack a λ are dropped: a replicate needs every λ)."""
    return df.pivot(index="seed", columns="weight_decay", values=col).dropna()


def _replicates(values: pd.Series) -> dict:
    from methods.core.stats import replicate_record

    return replicate_record(values.to_numpy(dtype=float), unit="seed", ids=[int(s) for s in values.index])


def claim_metrics(df: pd.DataFrame, cfg: AnalysisConfig) -> dict:
    """Claim metrics on seed means, and, for every headline/mechanism claim, the per-seed values
    of the same statistic (`replicates`, unit seed), from which `methods.core.claims` computes
    the interval. Where a claim compares λ's chosen on the seed means (the best λ, the worst λ),
    each seed's value is the same comparison at those λ's, so the mean over seeds of the
    replicates is the point metric."""
    means = df.groupby("weight_decay").mean(numeric_only=True)
    wds = means.index.to_numpy()
    out: dict = {"n_seeds": int(df["seed"].nunique()), "weight_decays": wds.tolist(), "notes": {},
                 "replicates": {}}
    reps = out["replicates"]
    # every metric a claim checks is a key, null where it cannot be measured
    for k in ("w1_rel_improvement", "w1_spearman_rho", "w2_tradeoff_gap", "w3_gap_margin", "w3_gap_lower",
              "w3_probe_min_step", "w3_probe_nondecreasing", "w3_probe_max_above_chance"):
        out[k] = None
    nll = _per_seed(df, "ft_answer_nll")
    if cfg.baseline_wd not in means.index or not (wds > cfg.baseline_wd).any():
        out["notes"]["w1_rel_improvement"] = f"the λ grid needs {cfg.baseline_wd} and a larger value"
    else:
        out["w1_rel_improvement"] = rel_improvement(means["ft_answer_nll"], cfg.baseline_wd)
        # per seed: the same reduction at the best larger λ (chosen on the seed means), over the
        # seed-mean baseline NLL, so that the replicates average to the point value
        larger = means["ft_answer_nll"][means.index > cfg.baseline_wd]
        best_larger = float(larger.idxmin())
        base = float(means["ft_answer_nll"][cfg.baseline_wd])
        reps["w1_rel_improvement"] = _replicates((nll[cfg.baseline_wd] - nll[best_larger]) / base)
        mono = df[df["weight_decay"].isin(cfg.monotone_wds)]
        from scipy.stats import spearmanr

        rho = spearmanr(mono["weight_decay"], mono["ft_answer_nll"]).statistic if len(mono) > 2 else float("nan")
        out["w1_spearman_rho"] = float(rho) if np.isfinite(rho) else None
        best = means["ft_answer_nll"].idxmin()
        out["notes"]["w1_rel_improvement"] = (
            "fine-tuned answer NLL (nats/answer, task mean, seed mean) by λ: "
            + ", ".join(f"{w:g}: {v:.4f}" for w, v in means["ft_answer_nll"].items())
            + f"; best λ = {best:g}; best λ > {cfg.baseline_wd:g} = {best_larger:g} (chosen on the seed means, "
            f"the per-seed replicates compare at it); Spearman ρ(λ, NLL) over λ ∈ {cfg.monotone_wds}, all seeds: {rho:.2f}")
    argmin_val = float(means["val_loss"].idxmin())
    argmax_plast = float(means["ft_answer_nll"].idxmin())
    out["w2_argmin_val_loss"], out["w2_argmax_plasticity"] = argmin_val, argmax_plast
    out["w2_tradeoff"] = bool(argmin_val < argmax_plast)
    dval = float(means["val_loss"][argmax_plast] - means["val_loss"][argmin_val])
    out["w2_delta_val_loss"] = dval
    # W2 as a difference: how much better than the val-loss-best λ the best larger λ fine-tunes
    # (answer NLL at argmin_λ L_val minus the lowest NLL over larger λ, both by seed mean);
    # > 0 exactly when argmin_λ L_val < argmax_λ plasticity
    larger_than_v = means["ft_answer_nll"][means.index > argmin_val]
    if len(larger_than_v):
        lam_b = float(larger_than_v.idxmin())
        out["w2_tradeoff_gap"] = float(means["ft_answer_nll"][argmin_val] - larger_than_v.min())
        reps["w2_tradeoff_gap"] = _replicates(nll[argmin_val] - nll[lam_b])
        gap_text = (f"; answer NLL at λ = {argmin_val:g} minus at λ = {lam_b:g} (the best larger λ) = "
                    f"{out['w2_tradeoff_gap']:.4f}")
    else:
        gap_text = f"; no λ larger than {argmin_val:g} in the grid, so no larger λ can fine-tune better"
    out["notes"]["w2_tradeoff_gap"] = (f"argmin_λ L_val = {argmin_val:g}, argmax_λ plasticity = {argmax_plast:g}, "
                                       f"ΔL_val between them = {dval:.4f}" + gap_text)
    out["notes"]["w2_tradeoff"] = out["notes"]["w2_tradeoff_gap"]
    rms = means["weight_rms"].to_numpy()
    out["w3_weight_rms_decreasing"] = _strictly(rms, -1)
    out["notes"]["w3_weight_rms_decreasing"] = "weight RMS by λ: " + ", ".join(f"{v:.4f}" for v in rms)
    gap = means["train_val_gap"]
    if 0.0 in gap.index and (gap.index >= 0.1).any():
        out["w3_gap_lower"] = bool((gap[gap.index >= 0.1] < gap[0.0]).all())
        # margin: gap(λ = 0) minus the largest gap over λ ≥ 0.1 (the worst λ, by seed mean);
        # > 0 exactly when every λ ≥ 0.1 has the smaller gap
        worst = float(gap[gap.index >= 0.1].idxmax())
        out["w3_gap_margin"] = float(gap[0.0] - gap[worst])
        g = _per_seed(df, "train_val_gap")
        reps["w3_gap_margin"] = _replicates(g[0.0] - g[worst])
        worst_text = f"; margin at the worst λ ≥ 0.1 ({worst:g}): {out['w3_gap_margin']:.4f}"
    else:
        worst_text = "; the grid needs λ = 0 and a λ ≥ 0.1"
    out["notes"]["w3_gap_margin"] = ("val − train loss gap by λ: " + ", ".join(f"{w:g}: {v:.4f}" for w, v in gap.items())
                                     + worst_text)
    out["notes"]["w3_gap_lower"] = out["notes"]["w3_gap_margin"]
    if "probe_accuracy" in means and means["probe_accuracy"].notna().all():
        sel = means["probe_accuracy"][means.index.isin(cfg.monotone_wds)]
        acc = sel.to_numpy()
        out["w3_probe_nondecreasing"] = bool(np.all(np.diff(acc) >= 0))
        # the smallest step between consecutive λ's of the monotone grid (by seed mean);
        # > 0 when accuracy rises at every step
        steps = np.diff(acc)
        j = int(np.argmin(steps))
        lo_w, hi_w = float(sel.index[j]), float(sel.index[j + 1])
        out["w3_probe_min_step"] = float(steps[j])
        pa = _per_seed(df, "probe_accuracy")
        reps["w3_probe_min_step"] = _replicates(pa[hi_w] - pa[lo_w])
        # guard metric: a probe at or below chance at every λ reads nothing, whatever its order
        out["w3_probe_max_above_chance"] = float((means["probe_accuracy"] - means["probe_chance"]).max())
        out["notes"]["w3_probe_min_step"] = (
            "city probe CV accuracy by λ: " + ", ".join(f"{w:g}: {v:.3f}" for w, v in means["probe_accuracy"].items())
            + f" (chance {means['probe_chance'].iloc[0]:.3f}); smallest step over {cfg.monotone_wds}: "
            f"λ {lo_w:g} → {hi_w:g}, {steps[j]:+.3f}")
        out["notes"]["w3_probe_nondecreasing"] = out["notes"]["w3_probe_min_step"]
    else:
        out["notes"]["w3_probe_min_step"] = "no probe accuracy in the table (the probe did not run at this scale)"
    qk = means["qk_norm"].to_numpy()
    out["w3_qk_decreasing"] = _strictly(qk, -1)
    out["notes"]["w3_qk_decreasing"] = ("mean ‖W_Q W_Kᵀ‖_F by λ: " + ", ".join(f"{v:.3f}" for v in qk)
                                        + "; attention effective rank: "
                                        + ", ".join(f"{v:.2f}" for v in means["attention_effective_rank"]))
    return out


def figure(df: pd.DataFrame, path, caption: str) -> None:
    from methods.core import plots

    means = df.groupby("weight_decay").mean(numeric_only=True)
    sds = df.groupby("weight_decay").std(numeric_only=True).fillna(0.0)
    x = np.arange(len(means))
    labels = [f"{w:g}" for w in means.index]
    fig, axes = plots.figure(2, 2, figsize=(8.0, 5.6))
    panels = [("val_loss", "pretraining val loss"), ("ft_answer_nll", "answer NLL after SFT (test)"),
              ("probe_accuracy", "city probe accuracy (CV)"), ("weight_rms", "weight RMS")]
    for ax, (col, title) in zip(axes.flat, panels):
        if col not in means:
            ax.set_visible(False)
            continue
        ax.errorbar(x, means[col], yerr=sds[col], marker="o", capsize=3, label="mean ± sd over seeds")
        if col == "ft_answer_nll":
            for c in means.columns:
                if c.endswith("_finetuned_answer_nll"):
                    ax.plot(x, means[c], marker=".", linestyle="--", label=c.split("_")[0])
            ax.legend()
        if col == "probe_accuracy" and "probe_chance" in means:
            ax.axhline(means["probe_chance"].iloc[0], color="grey", linestyle=":", label="chance")
        ax.set_xticks(x, labels)
        ax.set_xlabel("pretraining weight decay λ")
        ax.set_title(title)
    plots.save(fig, path, caption)
