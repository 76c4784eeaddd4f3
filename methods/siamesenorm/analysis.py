"""Table, claim metrics (C1–C5) and the figure of the SiameseNorm sweep.

Imports no torch. A run's "best learning rate" is the one with the lowest seed-mean validation
loss for its scheme (a diverged run's loss counts as +inf). "siamese" is the scheme named by
`siamese` (Variant A, post_pre); other schemes in the sweep (hybrid_pre) are
tabulated and plotted, not asserted.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .config import AnalysisConfig


def table(evals: list[dict], summaries: list[dict]) -> pd.DataFrame:
    """One row per run: eval numbers joined with the training summary's gradient statistics."""
    by_key = {(s["scheme"], float(s["lr"]), int(s["seed"])): s for s in summaries}
    recs = []
    for e in evals:
        s = by_key.get((e["scheme"], float(e["lr"]), int(e["seed"])))
        if s is None:
            raise ValueError(f"no training summary for run {e['run']}")
        rec = {k: e[k] for k in ("scheme", "lr", "seed", "val_loss", "val_ppl", "diverged", "arith_score")}
        rec.update(initial_val_loss=s["initial_val_loss"], n_params=s["n_params"],
                   grad_ratio_first_last=s["grad_ratio_first_last"], wall_ms_per_step=s["wall_ms_per_step"])
        recs.append(rec)
    return pd.DataFrame(recs).sort_values(["scheme", "lr", "seed"]).reset_index(drop=True)


def _loss(df: pd.DataFrame) -> pd.Series:
    """Validation loss with diverged/non-finite runs at +inf (they lose every argmin)."""
    v = df["val_loss"].astype(float)
    return v.where(np.isfinite(v), np.inf)


def best_lr(df: pd.DataFrame, scheme: str) -> float:
    sub = df[df["scheme"] == scheme].assign(loss=lambda d: _loss(d))
    means = sub.groupby("lr")["loss"].mean()
    return float(means.idxmin())


def _at(df, scheme, lr):
    sub = df[(df["scheme"] == scheme) & np.isclose(df["lr"], lr)]
    if sub.empty:
        raise KeyError(f"no runs for scheme {scheme!r} at lr {lr:g}")
    return sub


def _geomean(x: pd.Series) -> float:
    x = x.astype(float)
    return float(np.exp(np.log(x).mean())) if (x > 0).all() and np.isfinite(x).all() else float("nan")


def claim_metrics(df: pd.DataFrame, cfg: AnalysisConfig, steptime: dict, model: dict) -> dict:
    S, P, Q = cfg.siamese, cfg.baseline, cfg.post
    out: dict = {"n_seeds": int(df["seed"].nunique()), "schemes": sorted(df["scheme"].unique()),
                 "lrs": sorted(float(x) for x in df["lr"].unique()), "notes": {}}
    notes = out["notes"]

    # C1: stability at the high learning rate
    s_hi, s_lo = _at(df, S, cfg.high_lr), _at(df, S, cfg.low_lr)
    q_hi, p_hi = _at(df, Q, cfg.high_lr), _at(df, P, cfg.high_lr)
    s_ratio = float(_loss(s_hi).mean() / _loss(s_lo).mean())
    out["c1_siamese_high_over_low"] = s_ratio
    out["c1_siamese_stable_high_lr"] = bool(not s_hi["diverged"].any() and s_ratio <= 1 + cfg.c1_tolerance)
    q_ratio = float(_loss(q_hi).mean() / _loss(p_hi).mean())
    out["c1_post_over_pre_high_lr"] = q_ratio
    out["c1_post_diverged_seeds"] = int(q_hi["diverged"].sum())
    out["c1_post_fails_high_lr"] = bool(q_hi["diverged"].any() or q_ratio >= 1 + cfg.c1_post_margin)
    notes["c1_siamese_stable_high_lr"] = (
        f"{S} at lr {cfg.high_lr:g}: {int(s_hi['diverged'].sum())}/{len(s_hi)} seeds diverged, "
        f"val loss {_loss(s_hi).mean():.4f} vs {_loss(s_lo).mean():.4f} at lr {cfg.low_lr:g} (ratio {s_ratio:.3f})")
    notes["c1_post_fails_high_lr"] = (
        f"{Q} at lr {cfg.high_lr:g}: {int(q_hi['diverged'].sum())}/{len(q_hi)} seeds diverged, "
        f"val loss {_loss(q_hi).mean():.4f} vs {P} {_loss(p_hi).mean():.4f} (ratio {q_ratio:.3f})")

    # C2, C3: each scheme at its own best learning rate
    lr_s, lr_p = best_lr(df, S), best_lr(df, P)
    s_best, p_best = _at(df, S, lr_s), _at(df, P, lr_p)
    ppl_s, ppl_p = float(s_best["val_ppl"].mean()), float(p_best["val_ppl"].mean())
    out.update(best_lr={sch: best_lr(df, sch) for sch in out["schemes"]},
               c2_ppl_siamese=ppl_s, c2_ppl_pre=ppl_p, c2_ppl_ratio=ppl_s / ppl_p)
    notes["c2_ppl_ratio"] = f"val PPL {S} {ppl_s:.4f} (lr {lr_s:g}) vs {P} {ppl_p:.4f} (lr {lr_p:g})"
    a_s, a_p = float(s_best["arith_score"].mean()), float(p_best["arith_score"].mean())
    out.update(c3_arith_siamese=a_s, c3_arith_pre=a_p, c3_arith_gain=a_s - a_p,
               c3_arith_rel_gain=(a_s - a_p) / a_p if a_p > 0 else float("nan"))
    rel = f"relative {out['c3_arith_rel_gain']:+.1%}" if a_p > 0 else "relative: n/a, Pre-Norm scores 0"
    notes["c3_arith_gain"] = (f"arithmetic {S} {a_s:.3f} vs {P} {a_p:.3f} at each one's best lr "
                              f"({rel}; the paper: 28.1% → 39.6%, +40.9%)")

    # C4: parameters (closed form) and step time (measured side by side)
    d, L = model["d_model"], model["n_layers"]
    n_s = int(df.loc[df["scheme"] == S, "n_params"].iloc[0])
    n_p = int(df.loc[df["scheme"] == P, "n_params"].iloc[0])
    out.update(c4_param_delta=n_s - n_p, c4_param_delta_expected=(4 * L + 2) * d,
               c4_param_delta_matches=(n_s - n_p) == (4 * L + 2) * d)
    notes["c4_param_delta_matches"] = f"{n_s:,} − {n_p:,} = {n_s - n_p:,}; (4L+2)·d = {(4 * L + 2) * d:,}"
    ratio = steptime["ratio_vs_pre"].get(S, float("nan"))
    out["c4_step_time_ratio"] = ratio
    out["step_time_ratio_vs_pre"] = steptime["ratio_vs_pre"]
    notes["c4_step_time_ratio"] = (
        "median ms per AdamW step, schemes interleaved in one process: "
        + ", ".join(f"{k} {v:.1f}" for k, v in steptime["ms_per_step"].items()))

    # C5: gradient flow, layer-0 / last-layer gradient norm at the fixed step, low lr
    r = {sch: _geomean(_at(df, sch, cfg.low_lr)["grad_ratio_first_last"]) for sch in out["schemes"]}
    out["grad_ratio_first_last"] = r
    fold = max(r[S] / r[P], r[P] / r[S]) if r[S] > 0 and r[P] > 0 else float("nan")
    out["c5_grad_ratio_fold"] = fold
    notes["c5_grad_ratio_fold"] = ("‖∇ layer 0‖ / ‖∇ layer L−1‖ (geometric mean over seeds, lr "
                                   f"{cfg.low_lr:g}): " + ", ".join(f"{k} {v:.3g}" for k, v in r.items()))
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def curves(logs: dict[tuple[str, float, int], list[dict]]) -> pd.DataFrame:
    """Training-loss rows of every run: scheme, lr, seed, step, loss."""
    recs = [{"scheme": k[0], "lr": k[1], "seed": k[2], "step": r["step"], "loss": r["loss"]}
            for k, rows in logs.items() for r in rows if "loss" in r]
    return pd.DataFrame(recs)


def figure(curve_df: pd.DataFrame, df: pd.DataFrame, grads: dict[str, list[float]], out, caption: str) -> None:
    from methods.core.plots import figure as new_figure, save

    lrs = sorted(curve_df["lr"].unique())
    fig, axes = new_figure(1, len(lrs) + 1, figsize=(3.4 * (len(lrs) + 1), 3.2))
    schemes = sorted(curve_df["scheme"].unique())
    for ax, lr in zip(axes, lrs):
        for sch in schemes:
            sub = curve_df[(curve_df["scheme"] == sch) & (curve_df["lr"] == lr)]
            mean = sub.groupby("step")["loss"].mean()
            ax.plot(mean.index, mean.to_numpy(), label=sch)
        ax.set_title(f"peak lr {lr:g}")
        ax.set_xlabel("step")
        ax.set_ylabel("train loss (mean over seeds)")
        ax.set_yscale("log")
    axes[0].legend()
    ax = axes[-1]
    for sch, norms in sorted(grads.items()):
        ax.plot(range(len(norms)), norms, marker="o", label=sch)
    ax.set_yscale("log")
    ax.set_xlabel("layer")
    ax.set_ylabel("gradient norm")
    ax.set_title("per-layer ‖∇‖ (lowest lr)")
    save(fig, out, caption)
