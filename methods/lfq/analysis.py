"""Table, claim metrics (summary.json) and the figure of the LFQ study (claims 1–4).
Imports no torch (plots and reports never do).

Claim metrics compare, at every quantization setting, the base method with its MSE final block
(`mse_variant`, OmniQuant itself), the "+head" ablation (`headmse_variant`) and LFQ
(`lfq_variant`); each claim must hold at every setting, so the summary holds the worst
case over settings and the notes hold the per-setting numbers.
"""
from __future__ import annotations

from methods.core.results import InputError, write_metrics, write_text

from .config import AnalysisConfig


def _rows(evals: list[dict]) -> list[dict]:
    out = []
    for e in evals:
        for r in e["rows"]:
            name = r["model"]
            variant = "fp" if name == "fp" else name[: -len(e["setting"]) - 1]
            out.append({"setting": e["setting"], "variant": variant,
                        **{k: v for k, v in r.items() if k not in ("model", "lm_eval", *PER_UNIT)},
                        **{k: r[k] for k in PER_UNIT if k in r},
                        **{f"lm_eval:{t}": _em(res) for t, res in r.get("lm_eval", {}).items()}})
    return out


# per-prompt EM hits and per-sequence KL / top-1 agreement (evaluate.py): resampled for intervals,
# kept out of table.csv
PER_UNIT = ("em_hits", "kl_seq", "top1_seq")
N_BOOT = 2000


def _em(res: dict):
    for k, v in res.items():
        if k.split(",")[0] in ("exact_match", "acc", "prompt_level_strict_acc"):
            return v
    return None


def _bootstrap(stat, units: dict, n: int, method: str) -> dict:
    """95% percentile bootstrap of `stat(arrays)` resampling the n paired units (prompts or
    held-out sequences; the same draw for every variant and setting), seed 0, N_BOOT draws. An
    item-level interval: it covers the evaluation sample of one quantized model, not the
    quantization (calibration sample, seeded optimisation) that the claims are about."""
    import numpy as np

    from methods.core.stats import interval_record

    rng = np.random.default_rng(0)
    draws = [stat({k: v[idx] for k, v in units.items()}) for idx in rng.integers(0, n, size=(N_BOOT, n))]
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return interval_record(float(lo), float(hi), method=method, n=n, unit="item")


def claim_metrics(rows: list[dict], cfg: AnalysisConfig, buckets: list[int]) -> dict:
    import numpy as np

    by = {(r["setting"], r["variant"]): r for r in rows}
    settings = sorted({r["setting"] for r in rows})
    per, notes = {}, {}
    for s in settings:
        try:
            m, h, l = by[(s, cfg.mse_variant)], by[(s, cfg.headmse_variant)], by[(s, cfg.lfq_variant)]
        except KeyError as e:
            raise InputError(f"setting {s} has no variant {e.args[0][1]!r} (analysis config)") from None
        gaps = [l[f"em_{k}"] - m[f"em_{k}"] for k in buckets]
        per[s] = {
            "kl_ratio": l["kl"] / m["kl"] if m["kl"] > 0 else float("nan"),
            "top1_gap": l["top1_agree"] - m["top1_agree"],
            "em_gaps": gaps,
            "em_gap_nondecreasing": all(b >= a for a, b in zip(gaps, gaps[1:])),
            "em_gap_min_step": min(b - a for a, b in zip(gaps, gaps[1:])) if len(gaps) > 1 else float("nan"),
            "ppl_rel_diff": abs(l["ppl"] - m["ppl"]) / m["ppl"],
            "kl_order": m["kl"] >= h["kl"] >= l["kl"],
            "kl_order_margin": min(m["kl"] - h["kl"], h["kl"] - l["kl"]),
            "kl": {"mse": m["kl"], "headmse": h["kl"], "lfq": l["kl"]},
        }
    metrics = {
        "c1_kl_ratio_max": max(p["kl_ratio"] for p in per.values()),
        "c2a_top1_gap_min": min(p["top1_gap"] for p in per.values()),
        "c2b_em_gap_min": min(g for p in per.values() for g in p["em_gaps"]),
        "c2c_em_gap_nondecreasing": all(p["em_gap_nondecreasing"] for p in per.values()),
        # C2c as a difference: the smallest step of the gap LFQ − MSE between consecutive lengths,
        # over settings (≥ 0 exactly when the gap is nondecreasing at every setting)
        "c2c_em_gap_min_step": min(p["em_gap_min_step"] for p in per.values()),
        "c3_ppl_rel_diff_max": max(p["ppl_rel_diff"] for p in per.values()),
        "c4_kl_ablation_order": all(p["kl_order"] for p in per.values()),
        # C4 as a difference: min over settings of min(KL(MSE) − KL(+head), KL(+head) − KL(LFQ))
        # (≥ 0 exactly when the ordering holds at every setting)
        "c4_kl_order_margin": min(p["kl_order_margin"] for p in per.values()),
        "per_setting": per,
    }
    # ---- guard metrics: does the task separate quantizers at all? (tiny: it did not, every
    # variant was at EM ≈ 1; README "Changes to the tiny setting")
    longest = buckets[-1]
    for k in ("fp_em_longest", "rtn_lowbit_em_drop", "rtn_lowbit_ppl_rel_increase", "mse_em_headroom_max",
              "c3_ppl_fp_distance_max"):
        metrics[k] = None    # a key every guard reads, null where it cannot be measured
    fp = next((r for r in rows if r["variant"] == "fp"), None)
    if fp is not None:
        metrics["fp_em_longest"] = fp[f"em_{longest}"]
        low = min(settings, key=lambda s: int(s[1:].split("g")[0]))          # the fewest bits, e.g. w2g32
        if (low, "rtn") in by:
            metrics["rtn_lowbit_em_drop"] = fp[f"em_{longest}"] - by[(low, "rtn")][f"em_{longest}"]
        if (low, "rtn") in by:
            metrics["rtn_lowbit_ppl_rel_increase"] = by[(low, "rtn")]["ppl"] / fp["ppl"] - 1
        metrics["mse_em_headroom_max"] = max(fp[f"em_{longest}"] - by[(s, cfg.mse_variant)][f"em_{longest}"]
                                             for s in settings)
        # C3's guard, on the two models C3 compares: (|PPL_LFQ − PPL_FP| + |PPL_MSE − PPL_FP|) / PPL_MSE
        # bounds |PPL_LFQ − PPL_MSE| / PPL_MSE (triangle inequality), so where it is below 3% in every
        # setting C3's ≤ 3% holds by construction; max over settings (C3 is a max over settings)
        metrics["c3_ppl_fp_distance_max"] = max(
            (abs(by[(s, cfg.lfq_variant)]["ppl"] - fp["ppl"]) + abs(by[(s, cfg.mse_variant)]["ppl"] - fp["ppl"]))
            / by[(s, cfg.mse_variant)]["ppl"] for s in settings)
    # ---- intervals: paired bootstraps over the held-out prompts (EM) and sequences (KL, top-1);
    # one FP model and one quantization seed, so they cover the evaluation sample only
    intervals, inconclusive = {}, {}
    pairs = [(s, by[(s, cfg.mse_variant)], by[(s, cfg.lfq_variant)]) for s in settings]
    if all("em_hits" in m and "em_hits" in l for _, m, l in pairs):
        units = {f"{s}:{k}:{v}": np.asarray(r["em_hits"][str(k)], float)
                 for s, m, l in pairs for v, r in (("mse", m), ("lfq", l)) for k in buckets}
        n = len(next(iter(units.values())))
        cells = [(s, k) for s, _, _ in pairs for k in buckets]
        intervals["c2b_em_gap_min"] = _bootstrap(
            lambda u: min(u[f"{s}:{k}:lfq"].mean() - u[f"{s}:{k}:mse"].mean() for s, k in cells), units, n,
            "paired bootstrap over prompts (min over settings × lengths)")
        longest_iv = {s: _bootstrap(lambda u, s=s: u[f"{s}:{longest}:lfq"].mean() - u[f"{s}:{longest}:mse"].mean(),
                                    units, n, "paired bootstrap over prompts") for s in settings}
        if len(buckets) > 1:
            intervals["c2c_em_gap_min_step"] = _bootstrap(
                lambda u: min((u[f"{s}:{b}:lfq"].mean() - u[f"{s}:{b}:mse"].mean())
                              - (u[f"{s}:{a}:lfq"].mean() - u[f"{s}:{a}:mse"].mean())
                              for s, _, _ in pairs for a, b in zip(buckets, buckets[1:])), units, n,
                "paired bootstrap over prompts (min over settings × consecutive lengths)")
        for s_, iv in longest_iv.items():
            per[s_]["em_gap_longest_interval"] = iv
        if all(iv["lo"] <= 0 <= iv["hi"] for iv in longest_iv.values()):
            inconclusive["c2c_em_gap_min_step"] = (
                f"no measurable EM gain of LFQ over MSE at length {longest} in any setting (95% intervals "
                + "; ".join(f"{s}: [{iv['lo']:+.2f}, {iv['hi']:+.2f}]" for s, iv in longest_iv.items())
                + "): there is no gain whose growth with length could be read")
    if all("kl_seq" in m and "kl_seq" in l for _, m, l in pairs):
        units = {f"{s}:{v}:{q}": np.asarray(r[q], float)
                 for s, m, l in pairs for v, r in (("mse", m), ("lfq", l)) for q in ("kl_seq", "top1_seq")}
        n = len(next(iter(units.values())))
        intervals["c1_kl_ratio_max"] = _bootstrap(
            lambda u: max(u[f"{s}:lfq:kl_seq"].mean() / u[f"{s}:mse:kl_seq"].mean() for s in settings), units, n,
            "paired bootstrap over held-out sequences (max over settings)")
        intervals["c2a_top1_gap_min"] = _bootstrap(
            lambda u: min(u[f"{s}:lfq:top1_seq"].mean() - u[f"{s}:mse:top1_seq"].mean() for s in settings), units, n,
            "paired bootstrap over held-out sequences (min over settings)")
        heads = {s: by[(s, cfg.headmse_variant)] for s in settings}
        if all("kl_seq" in h for h in heads.values()):
            units.update({f"{s}:head:kl_seq": np.asarray(h["kl_seq"], float) for s, h in heads.items()})
            intervals["c4_kl_order_margin"] = _bootstrap(
                lambda u: min(min(u[f"{s}:mse:kl_seq"].mean() - u[f"{s}:head:kl_seq"].mean(),
                                  u[f"{s}:head:kl_seq"].mean() - u[f"{s}:lfq:kl_seq"].mean()) for s in settings),
                units, n, "paired bootstrap over held-out sequences (min over settings and both steps)")
    if intervals:
        metrics["intervals"] = intervals
    if inconclusive:
        metrics["inconclusive"] = inconclusive
    fmt = lambda f: "; ".join(f"{s}: {f(p)}" for s, p in per.items())  # noqa: E731
    notes["c1_kl_ratio_max"] = "KL(LFQ)/KL(MSE) " + fmt(lambda p: f"{p['kl_ratio']:.3f}")
    notes["c2a_top1_gap_min"] = "top-1 agreement LFQ − MSE " + fmt(lambda p: f"{p['top1_gap']:+.4f}")
    notes["c2b_em_gap_min"] = f"EM gaps LFQ − MSE at lengths {buckets} " + fmt(
        lambda p: "[" + ", ".join(f"{g:+.2f}" for g in p["em_gaps"]) + "]")
    if fp is not None:
        notes["c2b_em_gap_min"] += (f"; EM at length {longest}: FP {fp[f'em_{longest}']:.2f}, " + "; ".join(
            f"{s} " + ", ".join(f"{v} {by[(s, v)][f'em_{longest}']:.2f}" for v in
                                 dict.fromkeys(["rtn", cfg.mse_variant, cfg.lfq_variant]) if (s, v) in by)
            for s in settings))
    notes["c2c_em_gap_nondecreasing"] = notes["c2b_em_gap_min"]
    notes["c2c_em_gap_min_step"] = notes["c2b_em_gap_min"]
    notes["c3_ppl_rel_diff_max"] = "|ΔPPL|/PPL_MSE " + fmt(lambda p: f"{p['ppl_rel_diff']:.4f}")
    notes["c4_kl_ablation_order"] = "KL mse / headmse / lfq " + fmt(
        lambda p: " / ".join(f"{p['kl'][k]:.4f}" for k in ("mse", "headmse", "lfq")))
    notes["c4_kl_order_margin"] = notes["c4_kl_ablation_order"]
    for k in ("c1_kl_ratio_max", "c2c_em_gap_min_step"):   # NaN (one length; KL(MSE) = 0) → not measured
        if isinstance(metrics[k], float) and metrics[k] != metrics[k]:
            metrics[k] = None
    metrics["notes"] = notes
    return metrics


# the claim metrics (numbers) and guard metrics that become per-seed replicate records / seed means
CLAIM_KEYS = ("c1_kl_ratio_max", "c2a_top1_gap_min", "c2b_em_gap_min", "c2c_em_gap_min_step",
              "c3_ppl_rel_diff_max", "c4_kl_order_margin")
GUARD_KEYS = ("fp_em_longest", "rtn_lowbit_em_drop", "rtn_lowbit_ppl_rel_increase", "mse_em_headroom_max",
              "c3_ppl_fp_distance_max")
BOOL_KEYS = ("c2c_em_gap_nondecreasing", "c4_kl_ablation_order")


def seed_metrics(rows_by_seed: dict[int, list[dict]], cfg: AnalysisConfig, buckets: list[int]) -> dict:
    """Claim metrics over quantization seeds (the claims' outer replicates): `claim_metrics` per
    seed; a claim metric is the mean of its per-seed values, with a `replicates` record of them
    (methods.core.stats.replicate_record: the engine's t interval over seeds); a guard metric is
    its mean over seeds; a boolean is counted over seeds (`holds`). With one seed, that seed's
    metrics as they are (item-level intervals: the claims stay undecided). C2c's precondition
    (a measurable EM gain at the longest length in some setting) is read over seeds: per setting,
    the t interval over seeds of the gap at the longest length must exclude 0."""
    import numpy as np

    from methods.core.stats import holds_record, replicate_record, t_interval

    seeds = sorted(rows_by_seed)
    per_seed = {s: claim_metrics(rows_by_seed[s], cfg, buckets) for s in seeds}
    if len(seeds) == 1:
        return per_seed[seeds[0]] | {"seeds": seeds}
    first = per_seed[seeds[0]]
    out = {"seeds": seeds, "per_seed": {str(s): {k: m[k] for k in CLAIM_KEYS + GUARD_KEYS + BOOL_KEYS}
                                        for s, m in per_seed.items()}}
    replicates, notes = {}, {}
    for k in CLAIM_KEYS:
        vals = [per_seed[s][k] for s in seeds]
        if any(v is None for v in vals):
            out[k] = None
            continue
        out[k] = float(np.mean(vals))
        replicates[k] = replicate_record(vals, unit="seed", ids=[f"s{s}" for s in seeds])
    for k in GUARD_KEYS:
        vals = [per_seed[s][k] for s in seeds]
        out[k] = None if any(v is None for v in vals) else float(np.mean(vals))
    holds = {k: holds_record([per_seed[s][k] for s in seeds], unit="seed") for k in BOOL_KEYS}
    out.update({k: all(per_seed[s][k] for s in seeds) for k in BOOL_KEYS})
    settings = list(first["per_setting"])
    longest = {st: [per_seed[s]["per_setting"][st]["em_gaps"][-1] for s in seeds] for st in settings}
    ivs = {st: (t_interval(v, unit="seed") if np.ptp(v) > 0 else {"lo": v[0], "hi": v[0]}) for st, v in longest.items()}
    inconclusive = {}
    if len(buckets) > 1 and all(iv["lo"] <= 0 <= iv["hi"] for iv in ivs.values()):
        inconclusive["c2c_em_gap_min_step"] = (
            f"no measurable EM gain of LFQ over MSE at length {buckets[-1]} in any setting (95% t intervals over "
            f"{len(seeds)} seeds " + "; ".join(f"{st}: [{iv['lo']:+.3f}, {iv['hi']:+.3f}]" for st, iv in ivs.items())
            + "): there is no gain whose growth with length could be read")
    # per-setting means over seeds, for the notes and the report
    mean = lambda f: {st: float(np.mean([f(per_seed[s]["per_setting"][st]) for s in seeds])) for st in settings}  # noqa: E731
    gaps = {st: [float(np.mean([per_seed[s]["per_setting"][st]["em_gaps"][i] for s in seeds]))
                 for i in range(len(buckets))] for st in settings}
    vals = lambda k: ", ".join(f"{per_seed[s][k]:+.4g}" for s in seeds)  # noqa: E731
    fmt = lambda d, f: "; ".join(f"{st}: {f(v)}" for st, v in d.items())  # noqa: E731
    sd = f"per seed {['s%d' % s for s in seeds]}: "
    notes["c1_kl_ratio_max"] = sd + vals("c1_kl_ratio_max") + "; seed-mean KL(LFQ)/KL(MSE) " + fmt(
        mean(lambda p: p["kl_ratio"]), lambda v: f"{v:.3f}")
    notes["c2a_top1_gap_min"] = sd + vals("c2a_top1_gap_min") + "; seed-mean top-1 LFQ − MSE " + fmt(
        mean(lambda p: p["top1_gap"]), lambda v: f"{v:+.4f}")
    em_note = (f"seed-mean EM gaps LFQ − MSE at lengths {buckets} "
               + fmt(gaps, lambda g: "[" + ", ".join(f"{x:+.3f}" for x in g) + "]")
               + f"; gap at length {buckets[-1]} 95% t over seeds "
               + fmt(ivs, lambda iv: f"[{iv['lo']:+.3f}, {iv['hi']:+.3f}]"))
    notes["c2b_em_gap_min"] = sd + vals("c2b_em_gap_min") + "; " + em_note
    notes["c2c_em_gap_min_step"] = sd + vals("c2c_em_gap_min_step") + "; " + em_note
    notes["c2c_em_gap_nondecreasing"] = notes["c2c_em_gap_min_step"]
    notes["c3_ppl_rel_diff_max"] = sd + vals("c3_ppl_rel_diff_max") + "; guard (|ΔPPL_LFQ,FP| + |ΔPPL_MSE,FP|)/PPL_MSE " \
        + f"seed mean {out['c3_ppl_fp_distance_max']:.4f}"
    notes["c4_kl_order_margin"] = sd + vals("c4_kl_order_margin") + "; seed-mean KL mse / headmse / lfq " + fmt(
        {st: [np.mean([per_seed[s]["per_setting"][st]["kl"][v] for s in seeds]) for v in ("mse", "headmse", "lfq")]
         for st in settings}, lambda v: " / ".join(f"{x:.4f}" for x in v))
    notes["c4_kl_ablation_order"] = notes["c4_kl_order_margin"]
    out["replicates"], out["holds"], out["notes"] = replicates, holds, notes
    if inconclusive:
        out["inconclusive"] = inconclusive
    out["per_setting"] = {st: {"em_gaps_seed_mean": gaps[st], "em_gap_longest_interval": ivs[st]} for st in settings}
    return out


def figure(rows: list[dict], buckets: list[int], path, caption: str) -> None:
    from methods.core import plots

    settings = sorted({r["setting"] for r in rows})
    fig, axes = plots.figure(2, len(settings), figsize=(4.2 * len(settings), 6.4), squeeze=False)
    for j, s in enumerate(settings):
        sr = [r for r in rows if r["setting"] == s]
        ax = axes[0][j]
        for r in sr:
            ax.plot(buckets, [r[f"em_{k}"] for k in buckets], marker="o", label=r["variant"],
                    linestyle="--" if r["variant"] == "fp" else "-")
        ax.set(title=f"{s}: greedy exact match", xlabel="output length (digits)", ylabel="EM", ylim=(-0.02, 1.02))
        ax.legend(ncol=2)
        ax = axes[1][j]
        q = [r for r in sr if r["variant"] != "fp"]
        ax.bar(range(len(q)), [r["kl"] for r in q])
        ax.set_xticks(range(len(q)), [r["variant"] for r in q], rotation=30, ha="right")
        ax.set(title=f"{s}: KL(p_FP ‖ p_Q) per token", ylabel="nats")
    plots.save(fig, path, caption)


def report(cfg: AnalysisConfig, evals: list[dict], table_path, summary_path, figure_path, raw_cfg) -> None:
    if not evals:
        raise InputError("report: no evaluation files")
    by_seed: dict[int, list[dict]] = {}
    for e in evals:
        by_seed.setdefault(int(e.get("seed", 0)), []).append(e)
    rows_by_seed = {s: _rows(es) for s, es in sorted(by_seed.items())}
    rows = [{"seed": s, **r} for s, rs in rows_by_seed.items() for r in rs]
    buckets = sorted(int(k[3:]) for k in rows[0] if k.startswith("em_") and k[3:].isdigit())
    cols = [c for c in rows[0] if c not in PER_UNIT]
    lines = ["# Generated by python -m methods.lfq report", ",".join(cols)]
    for r in rows:
        lines.append(",".join(f"{r[c]:.6g}" if isinstance(r[c], float) else str(r[c]) for c in cols))
    write_text(table_path, "\n".join(lines) + "\n")
    metrics = seed_metrics(rows_by_seed, cfg, buckets)
    write_metrics(summary_path, metrics, raw_cfg)
    figure(rows_by_seed[min(rows_by_seed)], buckets, figure_path,
           f"LFQ on OmniQuant-LWC, GPTQ and RTN (quantization seed {min(rows_by_seed)} of {len(rows_by_seed)}). Top: greedy exact match of the running-sum chain by "
           "output length (one wrong digit breaks every later one); bottom: mean per-token "
           f"KL(p_FP‖p_Q) on held-out text. Variants: <base>[-<final-block objective>]; "
           f"LFQ = '{cfg.lfq_variant}', MSE-only = '{cfg.mse_variant}', +head ablation = '{cfg.headmse_variant}'.")
