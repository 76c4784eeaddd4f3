"""Table, claim metrics and figure of the ASAG study (arXiv 2606.15070)."""
from __future__ import annotations

from statistics import mean

from methods.core.results import InputError

from .config import AnalysisConfig

# metrics of the headline / mechanism claims (claims.yaml, `replicates: seed`)
SEED_METRICS = ("c1_len_ratio", "c2_acc_minus_vanilla_pp", "c2_acc_minus_deer_pp", "c3_prestudy_frac")


def table(runs: dict[str, list[dict]]) -> list[dict]:
    van = mean(r["tokens"] for r in runs["vanilla"]) if "vanilla" in runs else None
    out = []
    for name, rows in runs.items():
        tok = mean(r["tokens"] for r in rows)
        exits = {}
        for r in rows:
            exits[r["exit"]] = exits.get(r["exit"], 0) + 1
        acts = {}
        for r in rows:
            for a in r["atps"]:
                acts[a["action"]] = acts.get(a["action"], 0) + 1
        out.append({"policy": name, "acc": mean(r["correct"] for r in rows), "len": tok,
                    "cr": tok / van if van else None, "n": len(rows),
                    **{f"exit_{k}": v for k, v in sorted(exits.items())},
                    **{f"act_{k}": v for k, v in sorted(acts.items())}})
    return out


def per_model_table(runs: dict[str, list[dict]]) -> list[dict]:
    """Accuracy, mean tokens and CR (vs vanilla of the same model and benchmark) per model ×
    benchmark × policy, and per model × policy over all benchmarks ("all")."""
    groups: dict = {}
    for pol, rows in runs.items():
        for r in rows:
            for b in (r["benchmark"], "all"):
                groups.setdefault((r["model"], b, pol), []).append(r)
    out = []
    for (m, b, pol), rows in sorted(groups.items()):
        tok = mean(r["tokens"] for r in rows)
        van = groups.get((m, b, "vanilla"))
        out.append({"model": m, "benchmark": b, "policy": pol, "n": len(rows), "acc": mean(r["correct"] for r in rows),
                    "len": tok, "cr": tok / mean(r["tokens"] for r in van) if van else None})
    return out


def prestudy(vanilla: list[dict], thr: float) -> dict:
    """Correct vanilla traces with ≥ 2 ATPs: the mean ΔH over the ATPs (after the first, the
    reference) at or after the first ATP whose probed answer is the gold answer; the fraction of
    traces where it is below `thr`."""
    vals = []
    for r in vanilla:
        if not r["correct"] or r["n_atps"] < 2:
            continue
        # paper scale records whether the probed answer is equivalent to the gold one (A_hit)
        k = next((i for i, a in enumerate(r["atps"]) if a.get("A_hit", a["A"] == r["gold"])), None)
        if k is None:
            continue
        d = [a["dH"] for a in r["atps"][max(k, 1):]]
        if d:
            vals.append(mean(d))
    k = sum(v < thr for v in vals)
    return {"n": len(vals), "k_below": k, "frac_below": (k / len(vals)) if vals else None,
            "mean_dH": mean(vals) if vals else None}


def frac_past_first_atp(rows: list[dict]) -> float:
    """Share of runs that reached a second ATP: only there can ASAG's entropy-gated rule act;
    at the first ATP it is DEER's rule (arXiv 2606.15070 as summarised, NV; `signals.asag_decide`)."""
    return sum(r["n_atps"] >= 2 for r in rows) / len(rows)


def len_ratio_interval(a: list[dict], v: list[dict], n_resamples: int = 2000, seed: int = 0) -> dict:
    """95 % percentile bootstrap over problems (resampled in pairs) of mean tokens(a) / mean tokens(v)."""
    import numpy as np

    from methods.core.stats import interval_record

    x = np.array([r["tokens"] for r in a], dtype=float)
    y = np.array([r["tokens"] for r in v], dtype=float)
    idx = np.random.default_rng(seed).integers(0, len(x), (n_resamples, len(x)))
    ratios = x[idx].mean(1) / y[idx].mean(1)
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return interval_record(lo, hi, method="bootstrap", n=len(x), unit="item")


def acc_diff_interval_pp(a: list[dict], b: list[dict]) -> dict:
    """95 % paired bootstrap over problems of 100 × (accuracy(a) − accuracy(b))."""
    from methods.core.stats import interval_record, paired_bootstrap_diff

    iv = paired_bootstrap_diff([r["correct"] for r in a], [r["correct"] for r in b], unit="item")
    return interval_record(100 * iv["lo"], 100 * iv["hi"], method="paired bootstrap", n=iv["n"], unit="item")


def claim_metrics(runs: dict[str, list[dict]], cfg: AnalysisConfig) -> dict:
    from methods.core.stats import replicate_record, wilson

    tab = {r["policy"]: r for r in table(runs)}
    v, a, d, n = tab[cfg.vanilla], tab[cfg.asag], tab[cfg.deer], tab[cfg.nothink]
    ra, rv, rd = runs[cfg.asag], runs[cfg.vanilla], runs[cfg.deer]
    if not len(ra) == len(rv) == len(rd) or any(x["i"] != y["i"] or x["i"] != z["i"] for x, y, z in zip(ra, rv, rd)):
        raise InputError("report: the runs do not cover the same problems in the same order")
    pre = prestudy(rv, cfg.prestudy_threshold)
    same = None
    if cfg.nogate in runs:
        same = all((x["exit"], x["tokens"], x["answer"]) == (y["exit"], y["tokens"], y["answer"])
                   for x, y in zip(runs[cfg.nogate], rd))
    others = [r["acc"] for k, r in tab.items() if k != cfg.nothink]
    past = frac_past_first_atp(ra)
    m = {
        "c1_len_ratio": a["len"] / v["len"],
        "c2_acc_minus_vanilla_pp": 100 * (a["acc"] - v["acc"]),
        "c2_acc_minus_deer_pp": 100 * (a["acc"] - d["acc"]),
        "c2_nothink_lowest": bool(n["acc"] < min(others)),
        "c3_prestudy_frac": pre["frac_below"],
        "c4_nogate_equals_deer": same,
        # guard metrics: the gate can act only past the first ATP; accuracy comparisons need a
        # model that solves some problems
        "asag_frac_past_first_atp": past,
        "asag_differs_from_deer_frac": sum((x["exit"], x["tokens"], x["answer"]) != (y["exit"], y["tokens"], y["answer"])
                                           for x, y in zip(ra, rd)) / len(ra),
        "vanilla_acc": v["acc"],
        # accuracy can differ only where the answers differ: identical answers are a tie by construction
        "asag_answer_differs_vs_vanilla": sum(x["answer"] != y["answer"] for x, y in zip(ra, rv)) / len(ra),
        "asag_answer_differs_vs_deer": sum(x["answer"] != y["answer"] for x, y in zip(ra, rd)) / len(ra),
        # the premise of early exit: the answer probed along a vanilla trace changes somewhere
        "vanilla_answer_changes_frac": sum(any(t["A"] != r["answer"] for t in r["atps"]) for r in rv) / len(rv),
        "prestudy": pre,
        "table": list(tab.values()),
    }
    m["intervals"] = {
        "c1_len_ratio": len_ratio_interval(ra, rv),
        "c2_acc_minus_vanilla_pp": acc_diff_interval_pp(ra, rv),
        "c2_acc_minus_deer_pp": acc_diff_interval_pp(ra, rd),
    }
    if pre["n"]:
        m["intervals"]["c3_prestudy_frac"] = wilson(pre["k_below"], pre["n"], unit="item")
    # The headline / mechanism claims replicate over training seeds (claims.yaml): this study
    # trains one model, so each has one replicate (the claims read n < 3); the intervals above
    # are over the test problems of that one model, kept for the report.
    m["replicates"] = {k: replicate_record([m[k]], unit="seed")
                       for k in SEED_METRICS if m[k] is not None}
    if past == 0:
        # every ASAG run stopped at its first ATP, where ASAG's rule is DEER's: a tie by construction
        m["inconclusive"] = {"c2_acc_minus_deer_pp": "no ASAG run passed the first ATP, where ASAG's rule is DEER's"}
    acts = {}
    for r in ra:
        for x in r["atps"][1:]:
            acts[x["action"]] = acts.get(x["action"], 0) + 1
    gate = (f"{sum(r['n_atps'] >= 2 for r in ra)}/{len(ra)} ASAG runs pass the first ATP; actions at later ATPs: "
            + (", ".join(f"{k} {c}" for k, c in sorted(acts.items())) or "none")
            + f"; ASAG's run differs from DEER's on {m['asag_differs_from_deer_frac']:.2f} of the problems")
    notes = {"c1_len_ratio": gate,
             "c2_acc_minus_vanilla_pp": (f"accuracy vanilla {v['acc']:.3f}, ASAG {a['acc']:.3f}, DEER {d['acc']:.3f}; "
                                         f"ASAG's answer differs from vanilla's on {m['asag_answer_differs_vs_vanilla']:.3f} "
                                         f"and from DEER's on {m['asag_answer_differs_vs_deer']:.3f} of the problems; the "
                                         f"probed answer changes along {m['vanilla_answer_changes_frac']:.3f} of the vanilla traces"),
             "c2_nothink_lowest": f"accuracy NoThinking {n['acc']:.3f}, lowest other {min(others):.3f}"}
    notes["c2_acc_minus_deer_pp"] = gate + "; " + notes["c2_acc_minus_vanilla_pp"]
    if pre["frac_below"] is None:
        notes["c3_prestudy_frac"] = "no correct vanilla trace with ≥ 2 ATPs"
    else:
        notes["c3_prestudy_frac"] = (f"{pre['n']} correct vanilla traces, mean ΔH {pre['mean_dH']:.3f} after the "
                                     "correct answer appears")
    m["notes"] = notes
    return m


def figure(runs, path, caption):
    from methods.core import plots

    plots.save(draw_figure(table(runs), runs.get("vanilla", [])), path, caption)


def draw_figure(tab: list[dict], van: list[dict]):
    """Accuracy vs tokens per policy (`table` rows) and ΔH along vanilla traces; the figure,
    laid out, unsaved. Policies on the same point share one label ("asag, asag_noinject")."""
    from methods.core import plots

    fig, (ax, bx) = plots.figure(1, 2, figsize=(9, 3.6))
    for r in tab:
        ax.scatter(r["len"], 100 * r["acc"], s=30)
    ax.set_xlabel("mean generated tokens")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("accuracy vs tokens")
    ax.margins(0.12, 0.2)  # room for labels around the outermost points
    for r in van[:30]:
        xs = [a["pos"] for a in r["atps"]]
        ys = [a["dH"] for a in r["atps"]]
        if xs:
            bx.plot(xs, ys, color="#1b6ca8" if r["correct"] else "#d1495b", alpha=0.4, lw=0.8, marker=".")
    bx.axhline(-0.1, color="k", ls="--", lw=0.8)
    bx.set_xlabel("ATP position (generated tokens)")
    bx.set_ylabel("ΔH (relative to first ATP)")
    bx.set_title("vanilla traces: attention-entropy change")
    fig.tight_layout()
    plots.label_points(ax, [r["len"] for r in tab], [100 * r["acc"] for r in tab], [r["policy"] for r in tab],
                       fontsize=7)
    return fig
