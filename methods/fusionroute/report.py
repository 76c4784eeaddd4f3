"""FusionRoute's outputs from the replicates' evaluations: the claim metrics (methods/fusionroute/
claims.yaml) pooled over the replicates with Wilson intervals, the numbers behind each, the
exact-match table and the figure.

Every system is scored by exact match on the same test prompts of each replicate; a replicate is
a from-scratch run of the whole pipeline with its own data draw (fusionroute.seeds). Pooling the
replicates' outcomes gives one binomial proportion per (system, domain set), with its Wilson 95%
interval (methods/core/stats.py `wilson`); a difference of two such proportions gets Newcombe's
hybrid score interval built from the two Wilson intervals (Newcombe 1998, Stat. Med. 17:873,
method 10). It treats the two samples as independent; our systems answer the same prompts, and
positively correlated outcomes make the interval conservative (wider), never narrower.
"""
from __future__ import annotations

import math

from methods.core.results import InputError
from methods.core.stats import LEVEL, interval_record, wilson

from . import data as D

SYSTEMS = ("expert_add", "expert_rev", "expert_brk", "merged", "router_alone", "expert_only_routing",
           "fusionroute_sft", "fusionroute", "seq_level_oracle")


def newcombe_diff(k1: int, n1: int, k2: int, n2: int, level: float = LEVEL, scale: float = 1.0) -> dict:
    """Interval of p1 − p2 (times `scale`) from the Wilson intervals of p1 = k1/n1 and p2 = k2/n2
    (Newcombe 1998, method 10)."""
    a, b = wilson(k1, n1, level), wilson(k2, n2, level)
    p1, p2 = k1 / n1, k2 / n2
    d = p1 - p2
    lo = d - math.sqrt((p1 - a["lo"]) ** 2 + (b["hi"] - p2) ** 2)
    hi = d + math.sqrt((a["hi"] - p1) ** 2 + (p2 - b["lo"]) ** 2)
    return interval_record(scale * lo, scale * hi, method="newcombe-wilson", n=n1 + n2, level=level)


def _scaled(rec: dict, scale: float) -> dict:
    return interval_record(scale * rec["lo"], scale * rec["hi"], method=rec["method"], n=rec["n"],
                           level=rec["level"])


def counts(res: dict, system: str, domains=D.DOMAINS) -> tuple[int, int]:
    """(correct, prompts) of `system` on the test prompts of `domains` in one replicate."""
    c = [x for x, d in zip(res["correct"][system], res["domains"]) if d in domains]
    return int(sum(c)), len(c)


def rate(res: dict, system, domains=D.DOMAINS) -> float:
    """Exact-match rate of `system` (a name or a function of the replicate) in one replicate."""
    k, n = counts(res, system(res) if callable(system) else system, domains)
    return k / n


def pooled(evals: list[dict], system, domains=D.DOMAINS) -> tuple[int, int]:
    """(correct, prompts) summed over replicates; `system` is a name or a function of the replicate."""
    ks = [counts(r, system(r) if callable(system) else system, domains) for r in evals]
    return sum(k for k, _ in ks), sum(n for _, n in ks)


def best_expert(res: dict) -> str:
    """The expert with the highest macro exact match in one replicate."""
    return max((f"expert_{d}" for d in D.EXPERT_DOMAINS), key=lambda s: res["em"][s]["macro"])


def check_evals(evals: list[dict]) -> None:
    if not evals:
        raise InputError("aggregate: no replicate evaluations given")
    for i, r in enumerate(evals):
        missing = [k for k in ("correct", "domains", "em", "cdpo_changed") if k not in r]
        if missing:
            raise InputError(f"aggregate: evaluation {i} lacks {missing} (written by an older evaluate step?)")
        if r.get("pooled_macro"):   # paper scale: benchmarks of unequal sizes, no comp domain
            empty = [d for d in D.EXPERT_DOMAINS if d not in r["domains"]]
            if empty:
                raise InputError(f"aggregate: evaluation {i} has no benchmark of expert domain(s) {empty}")
            continue
        sizes = {r["domains"].count(d) for d in D.DOMAINS}
        if len(sizes) != 1 or 0 in sizes:
            raise InputError(f"aggregate: evaluation {i} has unequal or empty domains ({sizes} prompts): "
                             "the macro average is the pooled rate only with equal domain sizes")


def claim_metrics(evals: list[dict], seeds: list[int]) -> dict:
    """The claim metrics (exact-match points) pooled over replicates, their intervals under
    `intervals`, the guard metrics, the per-replicate values and the notes."""
    check_evals(evals)
    if len(seeds) != len(evals):
        raise InputError(f"aggregate: {len(seeds)} seeds but {len(evals)} evaluations")
    P = 100.0
    fr = pooled(evals, "fusionroute")
    pairs = {  # metric -> (system A, system B, domains): A − B on the pooled prompts of `domains`
        "c1_margin_vs_best_expert": ("fusionroute", best_expert, D.DOMAINS),
        "c1_margin_vs_expert_only": ("fusionroute", "expert_only_routing", D.DOMAINS),
        "c3_comp_gain": ("fusionroute", "expert_only_routing", ("comp",)),
        "c4_add_gain_vs_router": ("fusionroute", "router_alone", ("add",)),
        "c5_cdpo_minus_sft": ("fusionroute", "fusionroute_sft", D.DOMAINS),
    }
    m: dict = {"intervals": {}, "per_seed": {}, "seeds": list(seeds), "n_seeds": len(seeds)}
    for key, (a, b, doms) in pairs.items():
        (k1, n1), (k2, n2) = pooled(evals, a, doms), pooled(evals, b, doms)
        if not (n1 and n2):   # paper scale: no comp documents (C3 not measured)
            m[key], m["per_seed"][key] = None, None
            continue
        m[key] = P * (k1 / n1 - k2 / n2)
        m["intervals"][key] = newcombe_diff(k1, n1, k2, n2, scale=P)
        m["per_seed"][key] = [P * (rate(r, a, doms) - rate(r, b, doms)) for r in evals]
    # C2: every expert domain's gap FusionRoute − its expert; the minimum, and the interval
    # [min lo, min hi] (all gaps ≥ t ⇔ min lo ≥ t; some gap surely < t ⇔ min hi < t)
    gaps, los, his = {}, [], []
    for d in D.EXPERT_DOMAINS:
        (k1, n1), (k2, n2) = pooled(evals, "fusionroute", (d,)), pooled(evals, f"expert_{d}", (d,))
        gaps[d] = P * (k1 / n1 - k2 / n2)
        iv = newcombe_diff(k1, n1, k2, n2, scale=P)
        los.append(iv["lo"])
        his.append(iv["hi"])
    m["c2_min_home_gap"] = min(gaps.values())
    m["c2_home_gaps"] = gaps
    m["intervals"]["c2_min_home_gap"] = interval_record(min(los), min(his), method="min of newcombe-wilson",
                                                        n=iv["n"])
    m["per_seed"]["c2_min_home_gap"] = [min(r["em"]["fusionroute"][d] - r["em"][f"expert_{d}"][d]
                                            for d in D.EXPERT_DOMAINS) for r in evals]
    # pooled exact match of the main systems (macro = all prompts: every domain has n_test)
    for name, sysname in [("fusionroute_macro_em", "fusionroute"), ("fusionroute_sft_macro_em", "fusionroute_sft"),
                          ("expert_only_macro_em", "expert_only_routing"), ("merged_macro_em", "merged"),
                          ("router_alone_macro_em", "router_alone"),
                          ("seq_level_oracle_macro_em", "seq_level_oracle")]:
        k, n = pooled(evals, sysname)
        m[name] = P * k / n
        m["intervals"][name] = _scaled(wilson(k, n), P)
    k, n = pooled(evals, best_expert)
    m["best_single_expert_macro_em"] = P * k / n
    m["intervals"]["best_single_expert_macro_em"] = _scaled(wilson(k, n), P)
    # guard metrics: the experts solve their own domain (else "competitive with / beats every
    # expert" compares with models that measure nothing), and CDPO changed some output (else
    # SFT+CDPO ties SFT by construction)
    home = {d: P * pooled(evals, f"expert_{d}", (d,))[0] / pooled(evals, f"expert_{d}", (d,))[1]
            for d in D.EXPERT_DOMAINS}
    m["expert_home_em"] = home
    m["min_expert_home_em"] = min(home.values())
    ch_k, ch_n = sum(r["cdpo_changed"]["k"] for r in evals), sum(r["cdpo_changed"]["n"] for r in evals)
    m["cdpo_changed_frac"] = ch_k / ch_n
    m["notes"] = claim_notes(evals, m, fr)
    return m


def claim_notes(evals: list[dict], m: dict, fr: tuple[int, int]) -> dict:
    """The numbers behind every claim metric: pooled exact match, the interval and the per-replicate values."""
    def iv(key):
        r = m["intervals"][key]
        return f"95% {r['method']} [{r['lo']:.1f}, {r['hi']:.1f}]"

    def seeds(key):
        return "per seed " + ", ".join(f"{v:+.1f}" for v in m["per_seed"][key])

    em = {s: 100.0 * pooled(evals, s)[0] / pooled(evals, s)[1] for s in ("expert_only_routing", "fusionroute_sft")}
    comp = {s: 100.0 * pooled(evals, s, ("comp",))[0] / max(1, pooled(evals, s, ("comp",))[1])
            for s in ("fusionroute", "expert_only_routing", "router_alone")}
    add = {s: 100.0 * pooled(evals, s, ("add",))[0] / pooled(evals, s, ("add",))[1] for s in ("fusionroute", "router_alone")}
    n = f"{len(evals)} replicate(s) × {fr[1] // len(evals)} test prompts pooled"
    return {
        "c1_margin_vs_best_expert": f"macro EM FusionRoute {m['fusionroute_macro_em']:.1f} vs best expert "
                                    f"{m['best_single_expert_macro_em']:.1f} ({n}); {iv('c1_margin_vs_best_expert')}; "
                                    f"{seeds('c1_margin_vs_best_expert')}",
        "c1_margin_vs_expert_only": f"macro EM FusionRoute {m['fusionroute_macro_em']:.1f} vs expert-only routing "
                                    f"{em['expert_only_routing']:.1f}; {iv('c1_margin_vs_expert_only')}; "
                                    f"{seeds('c1_margin_vs_expert_only')}",
        "c2_min_home_gap": "; ".join(f"{d}: {m['c2_home_gaps'][d]:+.1f}" for d in D.EXPERT_DOMAINS)
                           + f" (expert home EM {', '.join(f'{d} {v:.1f}' for d, v in m['expert_home_em'].items())}); "
                           f"{iv('c2_min_home_gap')}; {seeds('c2_min_home_gap')}",
        "c3_comp_gain": "no comp documents (paper scale: no held-out composition domain)"
                        if m["c3_comp_gain"] is None else f"comp EM FusionRoute {comp['fusionroute']:.1f} vs expert-only {comp['expert_only_routing']:.1f} "
                        f"(router alone {comp['router_alone']:.1f}); {iv('c3_comp_gain')}; {seeds('c3_comp_gain')}",
        "c4_add_gain_vs_router": f"add EM FusionRoute {add['fusionroute']:.1f} vs router alone {add['router_alone']:.1f}; "
                                 f"{iv('c4_add_gain_vs_router')}; {seeds('c4_add_gain_vs_router')}",
        "c5_cdpo_minus_sft": f"macro EM SFT+CDPO {m['fusionroute_macro_em']:.1f} vs SFT only "
                             f"{em['fusionroute_sft']:.1f}; CDPO changed {100 * m['cdpo_changed_frac']:.1f}% of the "
                             f"test outputs; {iv('c5_cdpo_minus_sft')}; {seeds('c5_cdpo_minus_sft')}",
    }


def pooled_em(evals: list[dict]) -> dict:
    """{system: {domain or "macro": (EM %, Wilson lo %, Wilson hi %)}} pooled over replicates."""
    out = {}
    for s in SYSTEMS:
        row = {}
        for col, doms in [*((d, (d,)) for d in D.DOMAINS), ("macro", D.DOMAINS)]:
            k, n = pooled(evals, s, doms)
            if not n:   # paper scale: a domain without documents (comp)
                row[col] = (math.nan, math.nan, math.nan)
                continue
            w = wilson(k, n)
            row[col] = (100.0 * k / n, 100.0 * w["lo"], 100.0 * w["hi"])
        out[s] = row
    return out


def plot(evals: list[dict], path) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    from methods.core.plots import figure, save

    em = pooled_em(evals)
    names = list(em)
    cols = list(D.DOMAINS) + ["macro"]
    fig, ax = figure(figsize=(11, 4))
    x = np.arange(len(cols))
    wdt = 0.8 / len(names)
    for i, n in enumerate(names):
        v = np.array([em[n][c] for c in cols])
        ax.bar(x + i * wdt - 0.4 + wdt / 2, v[:, 0], wdt, label=n, color=plt.get_cmap("tab10")(i % 10),
               yerr=[v[:, 0] - v[:, 1], v[:, 2] - v[:, 0]], error_kw={"elinewidth": 0.6, "capsize": 1})
    ax.set_xticks(x, cols)
    ax.set_ylabel("exact match (%)")
    ax.legend(fontsize=7, ncol=2)
    save(fig, path, f"Exact match (greedy, stop at ';'), pooled over {len(evals)} replicate(s) with Wilson 95% "
         "intervals, per domain and macro-average for each single expert, the uniform weight-merged expert, "
         "the router alone, expert-only token routing, sequence-level routing with an oracle domain label, "
         "FusionRoute after SFT and after CDPO. comp (reverse of a sum) is held out from every expert.")


def table(evals: list[dict], seeds: list[int]) -> str:
    em = pooled_em(evals)
    cols = list(D.DOMAINS) + ["macro"]
    lines = [f"Exact match (%) pooled over seeds {seeds} (Wilson 95% interval of the macro), then the "
             "macro of each seed.", "",
             "| system | " + " | ".join(cols) + " | macro 95% | " + " | ".join(f"seed {s}" for s in seeds) + " |",
             "|---" * (len(cols) + 2 + len(seeds)) + "|"]
    for n, row in em.items():
        per = [r["em"][n]["macro"] for r in evals]
        lines.append(f"| {n} | " + " | ".join(f"{row[c][0]:.1f}" for c in cols)
                     + f" | [{row['macro'][1]:.1f}, {row['macro'][2]:.1f}] | " + " | ".join(f"{v:.1f}" for v in per) + " |")
    return "\n".join(lines) + "\n"
