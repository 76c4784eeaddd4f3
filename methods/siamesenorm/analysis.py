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

from methods.core.results import InputError
from methods.core.stats import holds_record, interval_record, replicate_record, t_interval

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
        if "arith_nontrivial_score" in e:  # tiny: the held-out problems without ×0 / ×1 products
            rec["arith_nontrivial_score"] = e["arith_nontrivial_score"]
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


def _per_seed(df, scheme, lr, col) -> pd.Series:
    """`col` of one scheme at one lr, indexed by seed."""
    return _at(df, scheme, lr).set_index("seed")[col].astype(float).sort_index()


def _finite_seeds(values: pd.Series, name: str, out: dict) -> pd.Series:
    """The seeds whose value of a per-seed statistic is finite. A seed without one (a run whose
    loss, PPL or gradient ratio is non-finite: it diverged) is not dropped silently: it is named
    in the note and the analysis declares the claim inconclusive (`inconclusive`), since the
    remaining seeds alone would overstate the evidence."""
    finite = values[np.isfinite(values.to_numpy(dtype=float))]
    lost = [int(k) for k in values.index if k not in finite.index]
    if lost:
        why = (f"seed(s) {lost} gave no finite value (a diverged or missing run); the interval is over the "
               f"{len(finite)} other seed(s) of {len(values)}, which cannot decide the claim")
        out["notes"][name] = out["notes"].get(name, "") + f" [{why}]"
        out["inconclusive"][name] = why
    return finite


def _replicates(values: pd.Series, name: str, out: dict) -> float:
    """Per-seed values of a claim metric as its `replicates` record (unit seed, named by seed),
    over the seeds with a finite value; returns their mean, the point value (NaN when none)."""
    finite = _finite_seeds(values, name, out)
    if finite.empty:
        return float("nan")
    out["replicates"][name] = replicate_record(finite.to_numpy(dtype=float), unit="seed",
                                               ids=[int(k) for k in finite.index])
    if len(finite) < 2:
        out["notes"][name] = out["notes"].get(name, "") + f" [{len(finite)} seed: no interval]"
    return float(finite.mean())


def _t_or_none(values, name: str, notes: dict):
    """t interval over per-seed values (unit seed), or None (with a note) when there are < 2."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        notes[name] = notes.get(name, "") + f" [{x.size} seed: no interval]"
        return None
    return t_interval(x, unit="seed")


def claim_metrics(df: pd.DataFrame, cfg: AnalysisConfig, steptime: dict, model: dict) -> dict:
    """Claim metrics. Where a claim runs over several seeds: per-seed values paired by seed, the
    mean over seeds as the metric and the per-seed values under `replicates` (unit seed; core
    computes the interval), or, for a per-seed pass/fail, the count under `holds`. A seed whose
    value is non-finite (diverged) is named and makes the claim inconclusive (`inconclusive`)."""
    S, P, Q = cfg.siamese, cfg.baseline, cfg.post
    seeds = sorted(int(x) for x in df["seed"].unique())
    out: dict = {"n_seeds": len(seeds), "seeds": seeds, "schemes": sorted(df["scheme"].unique()),
                 "lrs": sorted(float(x) for x in df["lr"].unique()), "notes": {}, "intervals": {},
                 "replicates": {}, "holds": {}, "inconclusive": {}}
    notes, iv = out["notes"], out["intervals"]

    # C1a: SiameseNorm stable at the high lr, per seed (no divergence and val loss within
    # c1_tolerance of its own low-lr loss, same seed); the count of such seeds is the metric
    s_hi, s_lo = _at(df, S, cfg.high_lr), _at(df, S, cfg.low_lr)
    q_hi, p_hi = _at(df, Q, cfg.high_lr), _at(df, P, cfg.high_lr)
    s_ratio = float(_loss(s_hi).mean() / _loss(s_lo).mean())
    out["c1_siamese_high_over_low"] = s_ratio
    lhi = _loss(s_hi).set_axis(s_hi["seed"]).sort_index()
    llo = _loss(s_lo).set_axis(s_lo["seed"]).sort_index()
    both = lhi.index.intersection(llo.index)        # the seeds run at both lrs
    lhi, llo = lhi[both], llo[both]
    div_s = s_hi.set_index("seed")["diverged"].astype(bool).sort_index()[both]
    stable = (~div_s) & (lhi / llo <= 1 + cfg.c1_tolerance)
    out["c1_siamese_stable_seeds"] = int(stable.sum())
    out["c1_siamese_stable_high_lr"] = bool(stable.all())
    out["holds"]["c1_siamese_stable_high_lr"] = holds_record(stable.tolist(), unit="seed")
    # C1b: Post-Norm fails at the high lr, per seed: diverged, or val loss >= (1 + margin) x
    # Pre-Norm's (same seed); the count of such seeds is the metric
    lq = _loss(q_hi).set_axis(q_hi["seed"]).sort_index()
    lp = _loss(p_hi).set_axis(p_hi["seed"]).sort_index()
    both = lq.index.intersection(lp.index)
    lq, lp = lq[both], lp[both]
    div_q = q_hi.set_index("seed")["diverged"].astype(bool).sort_index()[both]
    fails = div_q | (lq / lp >= 1 + cfg.c1_post_margin)
    out["c1_post_fails_high_lr"] = bool(2 * int(fails.sum()) > len(fails))
    out["holds"]["c1_post_fails_high_lr"] = holds_record(fails.tolist(), unit="seed")
    q_ratio = float(lq.mean() / lp.mean())
    out["c1_post_over_pre_high_lr"] = q_ratio
    out["c1_post_diverged_seeds"] = int(div_q.sum())
    out["c1_post_fail_seeds"] = int(fails.sum())
    per_seed = lambda r: "/".join(f"{v:.3f}" for v in r)  # noqa: E731
    notes["c1_siamese_stable_seeds"] = (
        f"{S} at lr {cfg.high_lr:g}: {int(div_s.sum())}/{len(div_s)} seeds diverged; val loss / its own "
        f"lr {cfg.low_lr:g} loss per seed {per_seed(lhi / llo)} (≤ {1 + cfg.c1_tolerance:.2f} counts); "
        f"stable in {int(stable.sum())} of {len(stable)} seeds")
    notes["c1_post_fail_seeds"] = (
        f"{Q} at lr {cfg.high_lr:g}: {int(div_q.sum())}/{len(div_q)} seeds diverged; val loss / {P}'s per "
        f"seed {per_seed(lq / lp)} (≥ {1 + cfg.c1_post_margin:.2f} or diverged counts as failing); fails in "
        f"{int(fails.sum())} of {len(fails)} seeds")
    notes["c1_siamese_stable_high_lr"] = notes["c1_siamese_stable_seeds"]
    notes["c1_post_fails_high_lr"] = notes["c1_post_fail_seeds"]

    # C2, C3: each scheme at its own best learning rate (by seed-mean val loss), seeds paired
    lr_s, lr_p = best_lr(df, S), best_lr(df, P)
    ppl_s, ppl_p = _per_seed(df, S, lr_s, "val_ppl"), _per_seed(df, P, lr_p, "val_ppl")
    if list(ppl_s.index) != list(ppl_p.index):
        raise InputError(f"aggregate: seeds differ between {S} {list(ppl_s.index)} and {P} {list(ppl_p.index)}")
    ratio = ppl_s / ppl_p
    out.update(best_lr={sch: best_lr(df, sch) for sch in out["schemes"]},
               c2_ppl_siamese=float(ppl_s.mean()), c2_ppl_pre=float(ppl_p.mean()),
               c2_ppl_ratio_per_seed=ratio.tolist(), c2_ppl_ratio_seeds_below_1=int((ratio < 1).sum()))
    notes["c2_ppl_ratio"] = (f"mean over the seeds of the per-seed ratio (per seed {per_seed(ratio)}); "
                             f"val PPL {S} {ppl_s.mean():.4f} (lr {lr_s:g}) vs {P} {ppl_p.mean():.4f} (lr {lr_p:g}); "
                             f"{S} lower in {int((ratio < 1).sum())} of {len(ratio)} seeds")
    out["c2_ppl_ratio"] = _replicates(ratio, "c2_ppl_ratio", out)
    a_s, a_p = _per_seed(df, S, lr_s, "arith_score"), _per_seed(df, P, lr_p, "arith_score")
    gain = a_s - a_p
    out.update(c3_arith_siamese=float(a_s.mean()), c3_arith_pre=float(a_p.mean()),
               c3_arith_gain_per_seed=gain.tolist(), c3_arith_max=float(max(a_s.mean(), a_p.mean())),
               c3_arith_seeds_siamese_higher=int((gain > 0).sum()))
    if a_p.mean() > 0:
        out["c3_arith_rel_gain"] = float(gain.mean() / a_p.mean())
    rel = f"relative {gain.mean() / a_p.mean():+.1%}" if a_p.mean() > 0 else "relative: n/a, Pre-Norm scores 0"
    notes["c3_arith_gain"] = (f"arithmetic {S} {a_s.mean():.3f} vs {P} {a_p.mean():.3f} at each one's best lr, "
                              f"mean over {len(gain)} seeds of the per-seed gain (per seed "
                              f"{'/'.join(f'{v:+.3f}' for v in gain)}; {S} higher in {int((gain > 0).sum())} of "
                              f"{len(gain)}; {rel}; the paper: 28.1% → 39.6%, +40.9%)")
    out["c3_arith_gain"] = _replicates(gain, "c3_arith_gain", out)
    if "arith_nontrivial_score" in df:
        nt_s = _per_seed(df, S, lr_s, "arith_nontrivial_score")
        nt_p = _per_seed(df, P, lr_p, "arith_nontrivial_score")
        out["c3_arith_nontrivial_max"] = float(max(nt_s.mean(), nt_p.mean()))
        notes["c3_arith_nontrivial_max"] = (
            f"exact match without the ×0 / ×1 products: {S} {nt_s.mean():.3f} vs {P} {nt_p.mean():.3f} "
            f"(seed means at each one's best lr)")
    else:  # paper scale: lm-eval's arithmetic tasks are not split
        out["c3_arith_nontrivial_max"] = out["c3_arith_max"]

    # C4: parameters (closed form) and step time (measured side by side)
    d, L = model["d_model"], model["n_layers"]
    n_s = int(df.loc[df["scheme"] == S, "n_params"].iloc[0])
    n_p = int(df.loc[df["scheme"] == P, "n_params"].iloc[0])
    out.update(c4_param_delta=n_s - n_p, c4_param_delta_expected=(4 * L + 2) * d,
               c4_param_delta_matches=(n_s - n_p) == (4 * L + 2) * d)
    notes["c4_param_delta_matches"] = f"{n_s:,} − {n_p:,} = {n_s - n_p:,}; (4L+2)·d = {(4 * L + 2) * d:,}"
    # C4b: the median over rounds of (S step / P step in the same round), and the bootstrap
    # interval of that median over rounds, which decides the claim (steptime.py)
    ratio_t = steptime["ratio_vs_pre"].get(S, float("nan"))
    out["c4_step_time_ratio"] = ratio_t
    out["step_time_ratio_vs_pre"] = steptime["ratio_vs_pre"]
    if (t_iv := (steptime.get("ratio_interval") or {}).get(S)) is not None:
        iv["c4_step_time_ratio"] = t_iv
    notes["c4_step_time_ratio"] = (
        f"median over {steptime.get('rounds', '?')} interleaved rounds of the per-round step-time ratio; "
        "median ms per AdamW step: " + ", ".join(f"{k} {v:.1f}" for k, v in steptime["ms_per_step"].items()))

    # C5: gradient flow, layer-0 / last-layer gradient norm at the fixed step, low lr. The fold
    # is exp|mean over seeds of log(r_S / r_P)| (= the ratio of the seed geometric means); its
    # interval maps the t interval of the per-seed log ratios through x -> exp|x|
    g = {sch: _per_seed(df, sch, cfg.low_lr, "grad_ratio_first_last") for sch in out["schemes"]}
    r = {sch: _geomean(v) for sch, v in g.items()}
    out["grad_ratio_first_last"] = r

    def fold(a, b):
        return max(r[a] / r[b], r[b] / r[a]) if r[a] > 0 and r[b] > 0 else float("nan")

    out["c5_grad_ratio_fold"] = fold(S, P)
    out["c5_post_fold"] = fold(Q, P)
    notes["c5_grad_ratio_fold"] = ("‖∇ layer 0‖ / ‖∇ layer L−1‖ (geometric mean over seeds, lr "
                                   f"{cfg.low_lr:g}): " + ", ".join(f"{k} {v:.3g}" for k, v in r.items()))
    notes["c5_post_fold"] = f"the same fold between {Q} and {P}: the pattern C5 must tell apart from {P}'s"
    # the per-seed log ratio over the seeds where both ratios are positive and finite; a seed
    # without one (diverged) is named and makes C5 inconclusive
    with np.errstate(divide="ignore", invalid="ignore"):
        logr_all = (np.log(g[S].where(g[S] > 0)) - np.log(g[P].where(g[P] > 0))).astype(float)
    logr = _finite_seeds(logr_all, "c5_grad_ratio_fold", out)
    if len(logr) and len(logr) < len(logr_all):   # the fold of the seeds that have one
        out["c5_grad_ratio_fold"] = float(math.exp(abs(logr.mean())))
    if (t := _t_or_none(logr.to_numpy(), "c5_grad_ratio_fold", notes)) is not None:
        lo, hi = t["lo"], t["hi"]
        near = 0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))
        iv["c5_grad_ratio_fold"] = interval_record(math.exp(near), math.exp(max(abs(lo), abs(hi))),
                                                   method="t (per-seed log ratio, mapped by exp|x|)",
                                                   n=t["n"], level=t["level"], unit="seed")
    return _clean(out)


def _clean(d):
    """NaN -> None (JSON null: not measured), recursively through dicts and lists."""
    if isinstance(d, dict):
        return {k: _clean(v) for k, v in d.items()}
    if isinstance(d, list):
        return [_clean(v) for v in d]
    return None if isinstance(d, float) and math.isnan(d) else d


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
