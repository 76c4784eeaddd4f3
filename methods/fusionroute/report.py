"""FusionRoute's outputs from the evaluation results: the claim metrics (methods/fusionroute/
claims.yaml) with the numbers behind each, the exact-match table and figure."""
from __future__ import annotations

from . import data as D


def claim_metrics(res: dict) -> dict:
    em = res["em"]
    fr, eo = em["fusionroute"], em["expert_only_routing"]
    best_single = max(em[f"expert_{d}"]["macro"] for d in D.EXPERT_DOMAINS)
    m = {
        "c1_margin_vs_best_expert": fr["macro"] - best_single,
        "c1_margin_vs_expert_only": fr["macro"] - eo["macro"],
        "c2_min_home_gap": min(fr[d] - em[f"expert_{d}"][d] for d in D.EXPERT_DOMAINS),
        "c3_comp_gain": fr["comp"] - eo["comp"],
        "c4_add_gain_vs_router": fr["add"] - em["router_alone"]["add"],
        "c5_cdpo_minus_sft": fr["macro"] - em["fusionroute_sft"]["macro"],
        "fusionroute_macro_em": fr["macro"],
        "best_single_expert_macro_em": best_single,
        "merged_macro_em": em["merged"]["macro"],
        "seq_level_oracle_macro_em": em["seq_level_oracle"]["macro"],
    }
    return m


def claim_notes(res: dict, m: dict) -> dict:
    """The numbers behind every claim metric of `m` (= claim_metrics(res)), so a failing claim is
    explained in the table."""
    em = res["em"]
    fr, eo, sft = em["fusionroute"], em["expert_only_routing"], em["fusionroute_sft"]
    return {
        "c1_margin_vs_best_expert": f"macro EM FusionRoute {fr['macro']:.1f} vs best expert {m['best_single_expert_macro_em']:.1f}",
        "c1_margin_vs_expert_only": f"macro EM FusionRoute {fr['macro']:.1f} vs expert-only routing {eo['macro']:.1f}",
        "c2_min_home_gap": "; ".join(f"{d}: {fr[d]:.1f} vs expert {em['expert_' + d][d]:.1f}" for d in ("add", "rev", "brk")),
        "c3_comp_gain": f"comp EM FusionRoute {fr['comp']:.1f} vs expert-only {eo['comp']:.1f} (router alone {em['router_alone']['comp']:.1f})",
        "c4_add_gain_vs_router": f"add EM FusionRoute {fr['add']:.1f} vs router alone {em['router_alone']['add']:.1f}",
        "c5_cdpo_minus_sft": f"macro EM SFT+CDPO {fr['macro']:.1f} vs SFT only {sft['macro']:.1f}",
    }


def plot(res: dict, path) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    from methods.core.plots import figure, save

    em = res["em"]
    names = list(em)
    cols = list(D.DOMAINS) + ["macro"]
    fig, ax = figure(figsize=(11, 4))
    x = np.arange(len(cols))
    wdt = 0.8 / len(names)
    for i, n in enumerate(names):
        ax.bar(x + i * wdt - 0.4 + wdt / 2, [em[n][c] for c in cols], wdt, label=n,
               color=plt.get_cmap("tab10")(i % 10))
    ax.set_xticks(x, cols)
    ax.set_ylabel("exact match (%)")
    ax.legend(fontsize=7, ncol=2)
    save(fig, path, "Exact match (greedy, stop at ';') per domain and macro-average for each single "
         "expert, the uniform weight-merged expert, the router alone, expert-only token routing, "
         "sequence-level routing with an oracle domain label, FusionRoute after SFT and after CDPO. "
         "comp (reverse of a sum) is held out from every expert.")


def table(res: dict) -> str:
    cols = list(D.DOMAINS) + ["macro"]
    lines = ["| system | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for n, row in res["em"].items():
        lines.append(f"| {n} | " + " | ".join(f"{row[c]:.1f}" for c in cols) + " |")
    return "\n".join(lines) + "\n"
