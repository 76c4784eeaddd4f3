"""Aggregation over the λ × seed sweep, the claim metrics (W1–W3), and the figure.

Imports no torch. Seed statistics: means over seeds, and a percentile bootstrap over seeds
for W1's relative improvement, reported under `intervals` (methods.core.stats), which the
claim's verdict uses.
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


def claim_metrics(df: pd.DataFrame, cfg: AnalysisConfig) -> dict:
    means = df.groupby("weight_decay").mean(numeric_only=True)
    wds = means.index.to_numpy()
    out: dict = {"n_seeds": int(df["seed"].nunique()), "weight_decays": wds.tolist(), "notes": {}}
    if cfg.baseline_wd not in means.index or not (wds > cfg.baseline_wd).any():
        out["notes"]["w1_rel_improvement"] = f"the λ grid needs {cfg.baseline_wd} and a larger value"
    else:
        out["w1_rel_improvement"] = rel_improvement(means["ft_answer_nll"], cfg.baseline_wd)
        # percentile bootstrap over seeds: resample seeds, recompute the seed-mean statistic
        rng = np.random.default_rng(cfg.seed)
        per_seed = df.pivot(index="seed", columns="weight_decay", values="ft_answer_nll")
        boots = [rel_improvement(per_seed.iloc[rng.integers(0, len(per_seed), len(per_seed))].mean(), cfg.baseline_wd)
                 for _ in range(cfg.bootstrap)]
        lo, hi = np.percentile(boots, [2.5, 97.5])
        from methods.core.stats import interval_record

        out.setdefault("intervals", {})["w1_rel_improvement"] = interval_record(
            lo, hi, method="bootstrap over seeds", n=len(per_seed))
        mono = df[df["weight_decay"].isin(cfg.monotone_wds)]
        from scipy.stats import spearmanr

        rho = spearmanr(mono["weight_decay"], mono["ft_answer_nll"]).statistic if len(mono) > 2 else float("nan")
        out["w1_spearman_rho"] = float(rho)
        best = means["ft_answer_nll"].idxmin()
        out["notes"]["w1_rel_improvement"] = (
            "fine-tuned answer NLL (nats/answer, task mean, seed mean) by λ: "
            + ", ".join(f"{w:g}: {v:.4f}" for w, v in means["ft_answer_nll"].items())
            + f"; best λ = {best:g}; Spearman ρ(λ, NLL) over λ ∈ {cfg.monotone_wds}, all seeds: {rho:.2f}")
    argmin_val = float(means["val_loss"].idxmin())
    argmax_plast = float(means["ft_answer_nll"].idxmin())
    out["w2_argmin_val_loss"], out["w2_argmax_plasticity"] = argmin_val, argmax_plast
    out["w2_tradeoff"] = bool(argmin_val < argmax_plast)
    dval = float(means["val_loss"][argmax_plast] - means["val_loss"][argmin_val])
    out["w2_delta_val_loss"] = dval
    out["notes"]["w2_tradeoff"] = (f"argmin_λ L_val = {argmin_val:g}, argmax_λ plasticity = {argmax_plast:g}, "
                                   f"ΔL_val between them = {dval:.4f}")
    rms = means["weight_rms"].to_numpy()
    out["w3_weight_rms_decreasing"] = _strictly(rms, -1)
    out["notes"]["w3_weight_rms_decreasing"] = "weight RMS by λ: " + ", ".join(f"{v:.4f}" for v in rms)
    gap = means["train_val_gap"]
    if 0.0 in gap.index and (gap.index >= 0.1).any():
        out["w3_gap_lower"] = bool((gap[gap.index >= 0.1] < gap[0.0]).all())
    out["notes"]["w3_gap_lower"] = "val − train loss gap by λ: " + ", ".join(f"{w:g}: {v:.4f}" for w, v in gap.items())
    if "probe_accuracy" in means:
        acc = means["probe_accuracy"][means.index.isin(cfg.monotone_wds)].to_numpy()
        out["w3_probe_nondecreasing"] = bool(np.all(np.diff(acc) >= 0))
        # guard metric: a probe at or below chance at every λ reads nothing, whatever its order
        out["w3_probe_max_above_chance"] = float((means["probe_accuracy"] - means["probe_chance"]).max())
        out["notes"]["w3_probe_nondecreasing"] = (
            "city probe CV accuracy by λ: " + ", ".join(f"{w:g}: {v:.3f}" for w, v in means["probe_accuracy"].items())
            + f" (chance {means['probe_chance'].iloc[0]:.3f})")
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
