"""Table, claim metrics (A1–A6) and the figure of the AGoQ study. Imports no torch."""
from __future__ import annotations

from methods.agoq.config import AnalysisConfig
from methods.core.results import InputError

from .pipeline import table as pp_table


def _get(d: dict, key: str, what: str):
    if key not in d:
        raise InputError(f"{what} {key!r} not found (have {sorted(d)}); check the analysis section")
    return d[key]


def _rep(values, seeds) -> dict:
    """Per-seed values of a claim metric as a `replicates` record (unit seed, named by seed);
    `methods.core.claims` computes the interval over the seeds from it."""
    from methods.core.stats import replicate_record

    return replicate_record(values, unit="seed", ids=[int(s) for s in seeds])


def first_seed(runs: dict) -> dict:
    """{variant: summary of its lowest seed} from {variant: {seed: summary}}."""
    return {v: by_seed[min(by_seed)] for v, by_seed in runs.items()}


def claim_metrics(runs: dict, probe: dict, cfg: AnalysisConfig) -> tuple[dict, list[dict]]:
    """`runs` maps variant → {seed: train summary}. The training claims (A2, A3e) pair seeds: a
    per-seed ratio to the baseline of the same seed, the mean over seeds as the metric and the
    per-seed values under `replicates` (unit seed). Format and bound claims use every seed (A3f) or
    the first (A4, A6: the byte counts do not depend on the seed)."""
    pol, coll = probe["policies"], probe["collective"]
    by_seed = {v: dict(sorted(r.items())) for v, r in runs.items()}
    first = first_seed(by_seed)
    fp_runs = _get(by_seed, cfg.baseline, "run")
    fp = first[cfg.baseline]
    replicates: dict = {}
    per_seed: dict = {}

    def paired(name, fn):
        """Mean over the seeds shared with the baseline of fn(run, baseline run), the per-seed
        values and their replicates record (kept under `replicates[key]` by the caller); None when
        `name` was not trained at this scale (smoke trains only fp and qgrad8: not_checked)."""
        if name not in by_seed:
            return None, [], None
        seeds = sorted(set(by_seed[name]) & set(fp_runs))
        if not seeds:
            raise InputError(f"aggregate: variant {name!r} shares no seed with {cfg.baseline!r}")
        vals = [fn(by_seed[name][s], s) for s in seeds]
        return sum(vals) / len(vals), vals, _rep(vals, seeds)

    def ratio_to_fp(name):
        return paired(name, lambda r, s: r["val_loss"] / fp_runs[s]["val_loss"])

    ws = sorted(coll, key=int)
    w_lo, w_hi = ws[0], ws[-1]
    qg = {w: coll[w]["quangrad"] for w in ws}
    nv = {w: coll[w]["naive_ring"] for w in ws}
    shares = fp["activations"]["numel_by_tag"]
    pp = pp_table(shares, cfg.pp_stages, cfg.scale_overhead_bits)
    p = cfg.claim_stages
    uni = next(r for r in pp if r["p"] == p and r["scheme"] == "uniform16")
    sa = next(r for r in pp if r["p"] == p and r["scheme"] == "stage_aware")
    ag_runs = _get(by_seed, cfg.agoq, "run")
    ag = first[cfg.agoq]
    la_runs = by_seed.get(cfg.laaq)
    m = {
        "a1_laaq_bytes_ratio": _get(pol, cfg.laaq, "policy")["ratio_vs_bf16"],
        "a1_uni4_bytes_ratio": _get(pol, cfg.uni4, "policy")["ratio_vs_bf16"],
        "a1_laaq_stage_bytes_ratio": _get(pol, cfg.laaq_stage, "policy")["ratio_vs_bf16"],
        "a3_quangrad_err_max": max(qg.values()),
        "a3_quangrad_err_not_increasing": qg[w_hi] <= qg[w_lo],
        "a3_naive_err_increases": nv[w_hi] > nv[w_lo],
        "a3_naive_over_quangrad": nv[w_hi] / qg[w_hi],
        # A3b/A3c as differences of the error at the fewest and the most workers
        "a3_quangrad_err_w_lo_minus_w_hi": qg[w_lo] - qg[w_hi],
        "a3_naive_err_w_hi_minus_w_lo": nv[w_hi] - nv[w_lo],
        "a3_gloo_within_bound": all(r["allreduce_max_err_over_bound"] is not None
                                    and r["allreduce_max_err_over_bound"] <= 1.0 for r in ag_runs.values()),
        "a4_grad_bytes_ratio": ag["grad_buffer_bytes"] / ag["grad_fp32_bytes"],
        "a4_grad_bytes_per_param": ag["grad_buffer_bytes_per_param"],
        "a5_uniform_ratio_exact": [round(x / uni["memory"][-1], 9) for x in uni["memory"]] == [float(p - i) for i in range(p)],
        "a5_stage_aware_max_over_min": sa["max_over_min"],
        "a6_comm_bytes_ratio": ag["comm_bytes_per_step_per_rank"] / fp["comm_bytes_per_step_per_rank"],
        "replicas_in_sync": all(r["replicas_in_sync"] for rs in by_seed.values() for r in rs.values()),
        "seeds": sorted(fp_runs),
    }
    for key, name in (("a2_laaq_val_ratio", cfg.laaq), ("a2_uni4_val_ratio", cfg.uni4), ("a2_uni2_val_ratio", cfg.uni2)):
        m[key], per_seed[key], rec = ratio_to_fp(name)
        if rec is not None:
            replicates[key] = rec
    if la_runs:
        seeds = sorted(set(ag_runs) & set(la_runs))
        dev = [abs(ag_runs[s]["final_train_loss"] / la_runs[s]["final_train_loss"] - 1) for s in seeds]
        m["a3_qgrad8_train_loss_dev"], per_seed["a3_qgrad8_train_loss_dev"] = sum(dev) / len(dev), dev
        replicates["a3_qgrad8_train_loss_dev"] = _rep(dev, seeds)
    else:
        m["a3_qgrad8_train_loss_dev"] = None
    m["a2_fp_val_loss_drop"] = min(1 - r["val_loss"] / r["initial_val_loss"] for r in fp_runs.values())
    m["per_seed"] = per_seed
    fmt = lambda xs: "/".join(f"{x:.4f}" for x in xs)  # noqa: E731
    notes = {
        "a1_laaq_bytes_ratio": f"measured by the saved-tensor hooks on a 16×64 batch; avg {pol[cfg.laaq]['avg_bits']:.2f} bits",
        "a1_uni4_bytes_ratio": f"avg {pol[cfg.uni4]['avg_bits']:.2f} bits (4 + 0.25 for bf16 scale+zero per 128)",
        "a1_laaq_stage_bytes_ratio": (
            f"avg {pol[cfg.laaq_stage]['avg_bits']:.2f} bits, measured; RMSNorm inputs and normalized outputs are "
            f"{shares.get('norm', 0) / max(1, sum(shares.values())):.0%} of the saved elements and stay at 8 bits "
            "in our stage policy, so it cannot reach ≤0.30 here"),
        "a3_quangrad_err_max": "relative L2 error, simulated workers " + ", ".join(
            f"W={w}: QuanGrad {qg[w]:.4%}, naive ring {nv[w]:.4%}, bf16 {coll[w]['bf16']:.4%}" for w in ws),
        "a3_qgrad8_train_loss_dev": (
            f"mean over {len(per_seed['a3_qgrad8_train_loss_dev'])} seeds of |qgrad8 / laaq − 1| of the mean "
            f"train loss of the last steps (per seed {fmt(per_seed['a3_qgrad8_train_loss_dev'])}); real "
            f"{ag['world_size']}-process all-reduce" if la_runs else "laaq not trained at this scale"),
        "a3_gloo_within_bound": "real all-reduce, max |err|/bound per seed " + ", ".join(
            f"{r['allreduce_max_err_over_bound']}" for r in ag_runs.values())
        + f", mean rel L2 err (first seed) {ag['allreduce_rel_err_mean']}",
        "a5_stage_aware_max_over_min": f"p={p}, stage bits {sa['bits']}",
        "a6_comm_bytes_ratio": f"bytes sent per rank per step: qgrad8 {ag['comm_bytes_per_step_per_rank']:.0f}, "
                               f"fp {fp['comm_bytes_per_step_per_rank']:.0f}",
        "a2_fp_val_loss_drop": "smallest relative drop of the fp baseline's val loss over training, over seeds",
    }
    for k in ("a2_laaq_val_ratio", "a2_uni4_val_ratio", "a2_uni2_val_ratio"):
        if m[k] is not None:
            notes[k] = (f"mean over {len(per_seed[k])} seeds of the per-seed val-loss ratio to fp (same seed): "
                        f"{fmt(per_seed[k])}")
    notes["a3_quangrad_err_w_lo_minus_w_hi"] = notes["a3_naive_err_w_hi_minus_w_lo"] = notes["a3_quangrad_err_max"]
    return {**m, "notes": notes, "replicates": replicates}, pp


def table_rows(runs: dict, probe: dict) -> list[dict]:
    """One row per bit policy; the training columns of its first seed, val loss of every seed."""
    first = first_seed(runs)
    rows = []
    for name, pol in probe["policies"].items():
        r = first.get(name, {})
        rows.append({"variant": name, "act_bytes_ratio": round(pol["ratio_vs_bf16"], 4),
                     "avg_bits": round(pol["avg_bits"], 3), "act_grad_rel_err": round(pol["grad_rel_err"], 5),
                     "val_loss": r.get("val_loss"),
                     "val_loss_per_seed": [runs[name][sd]["val_loss"] for sd in sorted(runs[name])] if name in runs else None,
                     "final_train_loss": r.get("final_train_loss"),
                     "allreduce": r.get("allreduce"), "grad_bytes_per_param": r.get("grad_buffer_bytes_per_param"),
                     "comm_bytes_per_step": r.get("comm_bytes_per_step_per_rank"), "step_ms": r.get("step_ms")})
    return rows


def figure(runs: dict, logs: dict, probe: dict, pp: list[dict], p: int, path, caption: str) -> None:
    from methods.core.plots import figure as new_fig, save

    fig, ax = new_fig(2, 2, figsize=(10, 7))
    a = ax[0][0]
    for name, rows in logs.items():
        xs = [r["step"] for r in rows]
        ys = [r["loss"] for r in rows]
        k = max(1, len(ys) // 30)
        sm = [sum(ys[max(0, i - k + 1): i + 1]) / len(ys[max(0, i - k + 1): i + 1]) for i in range(len(ys))]
        a.plot(xs, sm, label=f"{name} (val {runs[name]['val_loss']:.3f})")
    a.set(xlabel="step", ylabel="train loss (moving mean)", title="convergence (2-process gloo)")
    a.legend()
    a = ax[0][1]
    names = list(probe["policies"])
    ratios = [probe["policies"][n]["ratio_vs_bf16"] for n in names]
    a.bar(names, ratios, color="#1b6ca8")
    for i, r in enumerate(ratios):
        a.text(i, r + 0.01, f"{r:.3f}", ha="center", fontsize=7)
    a.axhline(0.40, ls="--", c="#d1495b", lw=1, label="A1 laaq ≤ 0.40")
    a.axhline(0.30, ls=":", c="#66a182", lw=1, label="A1 near-4-bit ≤ 0.30")
    a.set(ylabel="saved-activation bytes / bf16", title="measured saved-tensor bytes")
    a.legend()
    a = ax[1][0]
    coll = probe["collective"]
    ws = sorted(coll, key=int)
    for k, lab in (("quangrad", "QuanGrad (own scales, fp32 sum, 1 requant)"),
                   ("naive_ring", "naive int8 ring (requant every hop)"), ("bf16", "bf16 all-reduce")):
        a.plot([int(w) for w in ws], [100 * coll[w][k] for w in ws], marker="o", label=lab)
    a.set_xticks([int(w) for w in ws])
    a.set(xlabel="workers W (simulated)", ylabel="rel. L2 error of mean grad (%)", title="gradient all-reduce error")
    a.legend()
    a = ax[1][1]
    for r in (x for x in pp if x["p"] == p):
        a.plot(range(p), r["memory"], marker="o", label=f"{r['scheme']} (max/min {r['max_over_min']:.2f})")
    a.set_xticks(range(p))
    a.set(xlabel="pipeline stage", ylabel="activation memory (×1 micro-batch at 16 bit)",
          title=f"1F1B stage memory model, p={p}")
    a.legend()
    save(fig, path, caption)


def load_runs(run_dirs) -> tuple[dict, dict]:
    """({variant: {seed: train summary}}, {variant: train log of its lowest seed})."""
    from pathlib import Path

    from methods.core.results import read_json, read_jsonl

    runs, logs = {}, {}
    for d in map(Path, run_dirs):
        s = read_json(d / "train_summary.json")
        seed = int(s["config"]["seed"])
        if seed in runs.setdefault(s["variant"], {}):
            raise InputError(f"aggregate: two runs of variant {s['variant']!r} with seed {seed}")
        runs[s["variant"]][seed] = s
        if seed == min(runs[s["variant"]]):
            logs[s["variant"]] = read_jsonl(d / "train_log.jsonl")
    return runs, logs
