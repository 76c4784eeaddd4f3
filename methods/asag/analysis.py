"""Table, claim metrics and figure of the ASAG study (arXiv 2606.15070)."""
from __future__ import annotations

from statistics import mean

from .config import AnalysisConfig


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


def prestudy(vanilla: list[dict], thr: float) -> dict:
    """Correct vanilla traces with ≥ 2 ATPs: the mean ΔH over the ATPs (after the first, the
    reference) at or after the first ATP whose probed answer is the gold answer; the fraction of
    traces where it is below `thr`."""
    vals = []
    for r in vanilla:
        if not r["correct"] or r["n_atps"] < 2:
            continue
        k = next((i for i, a in enumerate(r["atps"]) if a["A"] == r["gold"]), None)
        if k is None:
            continue
        d = [a["dH"] for a in r["atps"][max(k, 1):]]
        if d:
            vals.append(mean(d))
    return {"n": len(vals), "frac_below": (sum(v < thr for v in vals) / len(vals)) if vals else None,
            "mean_dH": mean(vals) if vals else None}


def claim_metrics(runs: dict[str, list[dict]], cfg: AnalysisConfig) -> dict:
    tab = {r["policy"]: r for r in table(runs)}
    v, a, d, n = tab[cfg.vanilla], tab[cfg.asag], tab[cfg.deer], tab[cfg.nothink]
    pre = prestudy(runs[cfg.vanilla], cfg.prestudy_threshold)
    same = None
    if cfg.nogate in runs:
        same = all((x["exit"], x["tokens"], x["answer"]) == (y["exit"], y["tokens"], y["answer"])
                   for x, y in zip(runs[cfg.nogate], runs[cfg.deer]))
    others = [r["acc"] for k, r in tab.items() if k != cfg.nothink]
    m = {
        "c1_len_ratio": a["len"] / v["len"],
        "c2_acc_minus_vanilla_pp": 100 * (a["acc"] - v["acc"]),
        "c2_acc_minus_deer_pp": 100 * (a["acc"] - d["acc"]),
        "c2_nothink_lowest": bool(n["acc"] < min(others)),
        "c3_prestudy_frac": pre["frac_below"],
        "c4_nogate_equals_deer": same,
        "prestudy": pre,
        "table": list(tab.values()),
    }
    notes = {}
    if m["c1_len_ratio"] > 0.75:
        notes["c1_len_ratio"] = f"ASAG keeps {m['c1_len_ratio']:.2f} of vanilla's tokens (threshold ≤ 0.75)"
    first = sum(r["exit"] == "first_atp" for r in runs[cfg.asag])
    gated = sum(1 for r in runs[cfg.asag] for a in r["atps"][1:])
    notes["c2_acc_minus_deer_pp"] = (f"{first}/{len(runs[cfg.asag])} ASAG runs exit at the first ATP, where ASAG's "
                                     f"rule is DEER's; the entropy-gated rules saw {gated} later ATPs")
    notes["c1_len_ratio"] = notes["c2_acc_minus_deer_pp"]
    if m["c2_acc_minus_deer_pp"] < 0:
        notes["c2_acc_minus_deer_pp"] = "ASAG is less accurate than DEER at the same λ on this synthetic task"
    if pre["frac_below"] is not None and pre["frac_below"] <= 0.5:
        notes["c3_prestudy_frac"] = (f"over {pre['n']} correct vanilla traces the attention entropy does not "
                                     f"drop by 10% after the correct answer appears (mean ΔH {pre['mean_dH']:.3f}); "
                                     "ΔH rises with position along every trace (the window's rows see more keys), "
                                     "a risk we named before running: a 0.8M model may not show the drop")
    if pre["frac_below"] is None:
        notes["c3_prestudy_frac"] = "no correct vanilla trace with ≥ 2 ATPs"
    m["notes"] = notes
    return m


def figure(runs, path, caption):
    from methods.core import plots

    tab = table(runs)
    fig, (ax, bx) = plots.figure(1, 2, figsize=(9, 3.6))
    for r in tab:
        ax.scatter(r["len"], 100 * r["acc"], s=30)
        ax.annotate(r["policy"], (r["len"], 100 * r["acc"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("mean generated tokens")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("accuracy vs tokens")
    van = runs.get("vanilla", [])
    for r in van[:30]:
        xs = [a["pos"] for a in r["atps"]]
        ys = [a["dH"] for a in r["atps"]]
        if xs:
            bx.plot(xs, ys, color="#1b6ca8" if r["correct"] else "#d1495b", alpha=0.4, lw=0.8, marker=".")
    bx.axhline(-0.1, color="k", ls="--", lw=0.8)
    bx.set_xlabel("ATP position (generated tokens)")
    bx.set_ylabel("ΔH (relative to first ATP)")
    bx.set_title("vanilla traces: attention-entropy change")
    plots.save(fig, path, caption)
