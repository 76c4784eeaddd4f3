"""FusionRoute's outputs from the replicates' evaluations: the claim metrics (methods/fusionroute/
claims.yaml) with their per-seed values as replicates, the numbers behind each, the exact-match
table and the figure.

Every system is scored by exact match on the same test prompts of each replicate; a replicate is
a from-scratch run of the whole pipeline with its own data draw (fusionroute.seeds). The outer
replication unit of every claim is the seed: a claim metric is the mean over seeds of one value
per seed (a difference of two exact-match rates on that seed's prompts), and the summary carries
those per-seed values under `replicates` (`methods.core.stats.replicate_record`, unit "seed"), from
which `methods.core.claims` computes the interval over seeds. The prompts of several seeds are never
pooled as if independent (3 seeds × 400 prompts are 3 replicates, not 2400).
"""
from __future__ import annotations

import math

import numpy as np

from methods.core.results import InputError
from methods.core.stats import replicate_record, t_interval, wilson

from . import data as D

SYSTEMS = ("expert_add", "expert_rev", "expert_brk", "merged", "router_alone", "expert_only_routing",
           "fusionroute_sft", "fusionroute", "seq_level_oracle")


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
    """The claim metrics (exact-match points): the mean over seeds of one value per seed, the
    per-seed values under `replicates` (unit seed) and `per_seed`, the guard metrics and the notes."""
    check_evals(evals)
    if len(seeds) != len(evals):
        raise InputError(f"aggregate: {len(seeds)} seeds but {len(evals)} evaluations")
    P = 100.0
    seeds = list(seeds)
    pairs = {  # metric -> (system A, system B, domains): A − B on each seed's prompts of `domains`
        "c1_margin_vs_best_expert": ("fusionroute", best_expert, D.DOMAINS),
        "c1_margin_vs_expert_only": ("fusionroute", "expert_only_routing", D.DOMAINS),
        "c3_comp_gain": ("fusionroute", "expert_only_routing", ("comp",)),
        "c4_add_gain_vs_router": ("fusionroute", "router_alone", ("add",)),
        "c5_cdpo_minus_sft": ("fusionroute", "fusionroute_sft", D.DOMAINS),
    }
    m: dict = {"replicates": {}, "per_seed": {}, "seeds": seeds, "n_seeds": len(seeds)}

    def put(key, per_seed, counts=None):
        m[key] = float(np.mean(per_seed))
        m["per_seed"][key] = [float(v) for v in per_seed]
        m["replicates"][key] = replicate_record(per_seed, unit="seed", ids=seeds, counts=counts,
                                                count_scale=P)

    for key, (a, b, doms) in pairs.items():
        if not all(pooled([r], a, doms)[1] for r in evals):   # paper scale: no comp documents (C3 not measured)
            m[key], m["per_seed"][key] = None, None
            continue
        put(key, [P * (rate(r, a, doms) - rate(r, b, doms)) for r in evals])
    # C2 ("competitive with each expert on its own domain"): per seed, the smallest home-domain
    # gap FusionRoute − expert_k over k; its mean over seeds is ≤ the smallest mean gap, so a
    # lower bound above the threshold on it bounds every domain's gap.
    gaps = {d: [P * (rate(r, "fusionroute", (d,)) - rate(r, f"expert_{d}", (d,))) for r in evals]
            for d in D.EXPERT_DOMAINS}
    put("c2_min_home_gap", [min(gaps[d][i] for d in D.EXPERT_DOMAINS) for i in range(len(evals))])
    m["c2_home_gaps"] = {d: float(np.mean(v)) for d, v in gaps.items()}
    # exact match of the main systems, mean over seeds of each seed's macro (all its prompts;
    # every domain has n_test at tiny), with each seed's (correct, prompts)
    for name, sysname in [("fusionroute_macro_em", "fusionroute"), ("fusionroute_sft_macro_em", "fusionroute_sft"),
                          ("expert_only_macro_em", "expert_only_routing"), ("merged_macro_em", "merged"),
                          ("router_alone_macro_em", "router_alone"),
                          ("seq_level_oracle_macro_em", "seq_level_oracle"),
                          ("best_single_expert_macro_em", best_expert)]:
        put(name, [P * rate(r, sysname) for r in evals],
            counts=[pooled([r], sysname) for r in evals])
    # guard metrics: the experts solve their own domain (else "competitive with / beats every
    # expert" compares with models that measure nothing), and CDPO changed some output (else
    # SFT+CDPO ties SFT by construction); means over seeds
    home = {d: float(np.mean([P * rate(r, f"expert_{d}", (d,)) for r in evals])) for d in D.EXPERT_DOMAINS}
    m["expert_home_em"] = home
    m["min_expert_home_em"] = min(home.values())
    m["cdpo_changed_frac"] = float(np.mean([r["cdpo_changed"]["k"] / r["cdpo_changed"]["n"] for r in evals]))
    m["notes"] = claim_notes(evals, m)
    return m


def claim_notes(evals: list[dict], m: dict) -> dict:
    """The numbers behind every claim metric: the systems' exact match and the per-seed values
    (the interval over seeds is the claims table's)."""
    def seeds(key):
        return f"per seed ({len(evals)} seed(s)) " + ", ".join(f"{v:+.1f}" for v in m["per_seed"][key])

    def em(s, doms=D.DOMAINS):
        return 100.0 * float(np.mean([rate(r, s, doms) for r in evals]))

    n = f"mean over {len(evals)} seed(s) of {len(evals[0]['domains'])} test prompts each"
    return {
        "c1_margin_vs_best_expert": f"macro EM FusionRoute {m['fusionroute_macro_em']:.1f} vs best expert "
                                    f"{m['best_single_expert_macro_em']:.1f} ({n}); {seeds('c1_margin_vs_best_expert')}",
        "c1_margin_vs_expert_only": f"macro EM FusionRoute {m['fusionroute_macro_em']:.1f} vs expert-only routing "
                                    f"{m['expert_only_macro_em']:.1f}; {seeds('c1_margin_vs_expert_only')}",
        "c2_min_home_gap": "mean gap " + "; ".join(f"{d}: {m['c2_home_gaps'][d]:+.1f}" for d in D.EXPERT_DOMAINS)
                           + f" (expert home EM {', '.join(f'{d} {v:.1f}' for d, v in m['expert_home_em'].items())}); "
                           f"smallest gap {seeds('c2_min_home_gap')}",
        "c3_comp_gain": "no comp documents (paper scale: no held-out composition domain)"
                        if m["c3_comp_gain"] is None else
                        f"comp EM FusionRoute {em('fusionroute', ('comp',)):.1f} vs expert-only "
                        f"{em('expert_only_routing', ('comp',)):.1f} (router alone {em('router_alone', ('comp',)):.1f}); "
                        f"{seeds('c3_comp_gain')}",
        "c4_add_gain_vs_router": f"add EM FusionRoute {em('fusionroute', ('add',)):.1f} vs router alone "
                                 f"{em('router_alone', ('add',)):.1f}; {seeds('c4_add_gain_vs_router')}",
        "c5_cdpo_minus_sft": f"macro EM SFT+CDPO {m['fusionroute_macro_em']:.1f} vs SFT only "
                             f"{m['fusionroute_sft_macro_em']:.1f}; CDPO changed {100 * m['cdpo_changed_frac']:.1f}% of the "
                             f"test outputs; {seeds('c5_cdpo_minus_sft')}",
    }


def seed_em(evals: list[dict]) -> dict:
    """{system: {domain or "macro": (EM %, lo %, hi %)}}: the mean over seeds of each seed's exact
    match with the 95% t interval over seeds; with one seed, that seed's EM with the Wilson
    interval over its prompts (an interval over items of one trained pipeline)."""
    out = {}
    for s in SYSTEMS:
        row = {}
        for col, doms in [*((d, (d,)) for d in D.DOMAINS), ("macro", D.DOMAINS)]:
            ks = [pooled([r], s, doms) for r in evals]
            if not all(n for _, n in ks):   # paper scale: a domain without documents (comp)
                row[col] = (math.nan, math.nan, math.nan)
                continue
            v = [100.0 * k / n for k, n in ks]
            if len(v) >= 2 and max(v) > min(v):
                iv = t_interval(v, unit="seed")
            elif len(v) >= 2:
                iv = {"lo": v[0], "hi": v[0]}
            else:
                w = wilson(*ks[0])
                iv = {"lo": 100.0 * w["lo"], "hi": 100.0 * w["hi"]}
            row[col] = (float(np.mean(v)), iv["lo"], iv["hi"])
        out[s] = row
    return out


def plot(evals: list[dict], path) -> None:
    import matplotlib.pyplot as plt

    from methods.core.plots import figure, save

    em = seed_em(evals)
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
    what = (f"mean over {len(evals)} seeds with the 95% t interval over seeds" if len(evals) >= 2
            else "one seed with the Wilson 95% interval over its prompts")
    save(fig, path, f"Exact match (greedy, stop at ';'), {what}, per domain and macro-average for each single "
         "expert, the uniform weight-merged expert, the router alone, expert-only token routing, sequence-level "
         "routing with an oracle domain label, FusionRoute after SFT and after CDPO. comp (reverse of a sum) is "
         "held out from every expert.")


def table(evals: list[dict], seeds: list[int]) -> str:
    em = seed_em(evals)
    cols = list(D.DOMAINS) + ["macro"]
    what = ("mean over seeds, 95% t interval over seeds of the macro" if len(evals) >= 2
            else "one seed, Wilson 95% interval over its prompts of the macro")
    lines = [f"Exact match (%), seeds {seeds} ({what}), then the macro of each seed.", "",
             "| system | " + " | ".join(cols) + " | macro 95% | " + " | ".join(f"seed {s}" for s in seeds) + " |",
             "|---" * (len(cols) + 2 + len(seeds)) + "|"]
    for n, row in em.items():
        per = [r["em"][n]["macro"] for r in evals]
        lines.append(f"| {n} | " + " | ".join(f"{row[c][0]:.1f}" for c in cols)
                     + f" | [{row['macro'][1]:.1f}, {row['macro'][2]:.1f}] | " + " | ".join(f"{v:.1f}" for v in per) + " |")
    return "\n".join(lines) + "\n"
