"""Claim metrics (summary.json), a markdown table and the two figures. No torch."""
from __future__ import annotations

import statistics

import numpy as np

from methods.core.plots import figure, label_points, save
from methods.core.results import write_metrics, write_text
from methods.core.stats import replicate_record

from .config import AnalysisConfig

FAMS = ("RED", "U_TXT", "U_VIS", "SYN")
EXPECTED = {"RED": "R", "U_TXT": "U_txt", "U_VIS": "U_vis", "SYN": "S"}
ATOMS = ("R", "U_vis", "U_txt", "S")


def _spearman(a, b):
    from scipy.stats import spearmanr

    if len(a) < 3 or np.std(a) == 0 or np.std(b) == 0:
        return None
    return float(spearmanr(a, b).statistic)


def _c2_series(pid: dict, inter: list):
    """One training seed's C2 series: (VL rows, S, U_txt, Δ_vision) over its configurations."""
    vl = [r for r in inter if r["mix"] != "omni"]
    return (vl, [pid[r["config"]]["pooled"]["S"] for r in vl], [pid[r["config"]]["pooled"]["U_txt"] for r in vl],
            [r["delta_vision"] for r in vl])


def summarize(cfg: AnalysisConfig, pids: list, inters: list, rew: dict, summary, table, fig_p, fig_s, seeds=None):
    """`pids` / `inters`: one PID and one interventions record per training seed, the first seed's
    models also giving C1's profile and C3's omni model. C2: Spearman ρ per seed over its
    (mixture × checkpoint) configurations, the seeds the replicates."""
    notes = {}
    seeds = [str(s_) for s_ in (seeds or range(len(pids)))]
    pid = pids[0]
    prof = pid[cfg.profile_config]["families"]
    largest = {f: max(ATOMS, key=lambda k: prof[f][k]) for f in FAMS}
    n_ok = sum(largest[f] == EXPECTED[f] for f in FAMS)
    syn_frac = prof["SYN"]["S"] / prof["SYN"]["I"] if prof["SYN"]["I"] > 1e-9 else float("nan")
    notes["c1_families_largest_atom"] = "largest atom per family: " + ", ".join(f"{f}→{largest[f]}" for f in FAMS)
    series = [_c2_series(p, i) for p, i in zip(pids, inters)]
    vl, s, ut, dv = series[0]
    enough = all(len(v_[0]) >= cfg.min_configs for v_ in series)
    rho_s_seed = [_spearman(v_[1], v_[3]) if enough else None for v_ in series]
    rho_u_seed = [_spearman(v_[2], v_[3]) if enough else None for v_ in series]
    ok_s, ok_u = all(r is not None for r in rho_s_seed), all(r is not None for r in rho_u_seed)
    rho_s = statistics.fmean(rho_s_seed) if ok_s else None
    rho_u = statistics.fmean(rho_u_seed) if ok_u else None
    per_seed = ", ".join(f"s{sd_} {a:.3f}" for sd_, a in zip(seeds, rho_s_seed) if a is not None)
    notes["c2_rho_s_delta"] = (f"{len(vl)} configurations (mix × checkpoint) per training seed, "
                               f"ρ per seed: {per_seed}; the metric is their mean")
    notes["c2_rho_utxt_delta"] = "ρ per seed: " + ", ".join(f"s{sd_} {a:.3f}" for sd_, a in zip(seeds, rho_u_seed)
                                                             if a is not None) + "; the metric is their mean"
    omni = next((v["sensory"] for k, v in pid.items() if k.startswith("omni") and k.endswith("final")), None)
    margin = omni["U_vis"] - omni["S_av"] if omni else None
    runs = rew["runs"]
    mean = {k: statistics.fmean(r["syn_acc"] for r in v) for k, v in runs.items()}
    sd = {k: (statistics.stdev([r["syn_acc"] for r in v]) if len(v) > 1 else 0.0) for k, v in runs.items()}
    gain = mean["pid"] - mean["uniform"]
    # C4 over seeds: per-seed paired difference (same seed → same fine-tuning batches), t interval
    by_seed = {k: {r["seed"]: r["syn_acc"] for r in v} for k, v in runs.items()}
    ft_seeds = sorted(set(by_seed["pid"]) & set(by_seed["uniform"]))
    diffs = [by_seed["pid"][sd_] - by_seed["uniform"][sd_] for sd_ in ft_seeds]
    # the per-seed values are the replicates; claims computes the interval over seeds
    replicates = {"c4_syn_acc_gain": replicate_record(diffs, unit="seed", ids=ft_seeds)} if diffs else {}
    if ok_s:
        replicates["c2_rho_s_delta"] = replicate_record(rho_s_seed, unit="seed", ids=[f"s{x}" for x in seeds])
    if ok_u:
        replicates["c2_rho_utxt_delta"] = replicate_record(rho_u_seed, unit="seed", ids=[f"s{x}" for x in seeds])
    # guard metrics: spreads of the C2 series (a Spearman ρ of a flat series measures nothing), the
    # information the profile's SYN decisions and the omni decisions carry, C4's headroom
    rng_ = lambda v: float(max(v) - min(v)) if v else None  # noqa: E731
    # a C2 guard holds only when every seed's series spreads (the smallest range over the seeds)
    min_rng = lambda j: min(rng_(v_[j]) for v_ in series) if all(v_[j] for v_ in series) else None  # noqa: E731
    notes["c4_syn_acc_gain"] = ("SYN acc mean±sd over seeds: " + ", ".join(f"{k} {mean[k]:.3f}±{sd[k]:.3f}" for k in mean)
                                + f"; top-K gap items per family {rew['gap_family_counts']}")
    if omni:
        notes["c3_uvis_minus_sav"] = f"Sensory PID (bits): U_vis {omni['U_vis']:.3f}, S_av {omni['S_av']:.3f}, U_aud {omni['U_aud']:.3f}, R {omni['R_sens']:.3f}"
    metrics = {"c1_families_largest_atom": n_ok, "c1_syn_s_frac": syn_frac, "c2_rho_s_delta": rho_s,
               "c2_rho_utxt_delta": rho_u, "c3_uvis_minus_sav": margin, "c4_syn_acc_gain": gain,
               "c1_syn_info": prof["SYN"]["I"], "c2_n_configs": len(vl), "c2_s_range": min_rng(1),
               "c2_utxt_range": min_rng(2), "c2_delta_range": min_rng(3), "c2_n_seeds": len(series),
               "c2_rho_per_seed": {f"s{x}": {"S": a, "U_txt": b} for x, a, b in zip(seeds, rho_s_seed, rho_u_seed)},
               "c3_sensory_info": omni["I"] if omni else None,
               "c4_uniform_syn_acc": mean["uniform"], "c4_base_syn_acc": rew.get("base_syn_acc"),
               "c4_gap_syn_items": rew["gap_family_counts"]["SYN"], "c4_n_seeds": len(diffs),
               "replicates": replicates,
               "profile": prof, "largest_atom": largest,
               "c2_points": [{"seed": x, "config": r["config"], "S": a, "U_txt": b, "delta_vision": c}
                             for x, v_ in zip(seeds, series) for r, a, b, c in zip(*v_)],
               "sensory": omni, "reweight_syn_acc": {"mean": mean, "sd": sd}, "notes": notes}
    write_metrics(summary, metrics, {"profile_config": cfg.profile_config, "min_configs": cfg.min_configs})
    lines = [f"# Decision-level PID (bits), training seed {seeds[0]}", "", "| config | acc | Δ_vision | R | U_vis | U_txt | S | I |", "|---|---|---|---|---|---|---|---|"]
    for r in vl:
        p = pid[r["config"]]["pooled"]
        lines.append(f"| {r['config']} | {r['acc']:.3f} | {r['delta_vision']:.3f} | " + " | ".join(f"{p[k]:.3f}" for k in (*ATOMS, "I")) + " |")
    lines += ["", f"## Profile per family ({cfg.profile_config})", "", "| family | R | U_vis | U_txt | S | I |", "|---|---|---|---|---|---|"]
    for f in FAMS:
        lines.append(f"| {f} | " + " | ".join(f"{prof[f][k]:.3f}" for k in (*ATOMS, "I")) + " |")
    write_text(table, "\n".join(lines) + "\n")

    fig, ax = figure(1, 1)
    x = np.arange(len(FAMS))
    for j, k in enumerate(ATOMS):
        ax.bar(x + (j - 1.5) * 0.2, [prof[f][k] for f in FAMS], 0.2, label=k)
    ax.set_xticks(x, FAMS)
    ax.set_ylabel("bits")
    ax.legend(ncols=4)
    ax.set_title(f"Decision-level PID per task family ({cfg.profile_config})")
    save(fig, fig_p, "PID profile of the tiny fusion model's decisions per generated task family (BATCH estimator, bits). "
         "Expected largest atom: R for RED, U_txt for U_TXT, U_vis for U_VIS, S for SYN (claim C1).")
    save(synergy_figure([r["config"] for r in vl], s, ut, dv, rho_s_seed[0], rho_u_seed[0]), fig_s,
         f"Synergy and text-unique information of each (mixture × checkpoint) model's decisions on the pooled test "
         f"set against its accuracy drop when vision is masked, training seed {seeds[0]} (claim C2: ρ per seed, "
         f"interval over the {len(series)} seeds in the claims table).")


def synergy_figure(names, s, ut, dv, rho_s, rho_u):
    """Tiny scale, claim C2: S and U_txt against Δ_vision, one labelled point per configuration;
    the figure, laid out, unsaved. Labels are placed clear of each other (`label_points`)."""
    fig, axs = figure(1, 2, figsize=(8, 3.4))
    for ax, v, lab, rho in ((axs[0], s, "synergy S (bits)", rho_s), (axs[1], ut, "text-unique U_txt (bits)", rho_u)):
        ax.scatter(v, dv)
        ax.set_xlabel(lab)
        ax.set_ylabel("Δ_vision (accuracy drop)")
        ax.set_title(f"Spearman ρ = {rho:.2f}" if rho is not None else "ρ not measured")
        ax.margins(0.15, 0.12)  # room for labels around the outermost points
    fig.tight_layout()
    for ax, v in zip(axs, (s, ut)):
        label_points(ax, v, dv, names, fontsize=6)
    return fig


def summarize_hub(cfg: AnalysisConfig, pid: dict, inter: list, rew: dict, summary, table, fig_p, fig_s):
    """Paper scale: the configurations are (hub model × benchmark). C2 as in the paper: per
    benchmark, Spearman ρ across the models; the claim metric is the weakest benchmark's ρ (the
    smallest ρ(S, Δ_vision), the largest ρ(U_txt, Δ_vision)), each benchmark needing
    `min_configs` models. C1 (generated families) and C3 (omni) are not measured here."""
    notes = {}
    benches = list(dict.fromkeys(r["benchmark"] for r in inter))
    per, rho_s, rho_u, rs, ru, rd = {}, [], [], [], [], []
    for b in benches:
        rows = [r for r in inter if r["benchmark"] == b]
        s = [pid[r["config"]]["pooled"]["S"] for r in rows]
        ut = [pid[r["config"]]["pooled"]["U_txt"] for r in rows]
        dv = [r["delta_vision"] for r in rows]
        ok = len(rows) >= cfg.min_configs
        per[b] = {"n_models": len(rows), "rho_s_delta": _spearman(s, dv) if ok else None,
                  "rho_utxt_delta": _spearman(ut, dv) if ok else None,
                  "s_range": float(max(s) - min(s)), "utxt_range": float(max(ut) - min(ut)),
                  "delta_range": float(max(dv) - min(dv))}
        rho_s.append(per[b]["rho_s_delta"])
        rho_u.append(per[b]["rho_utxt_delta"])
        rs.append(per[b]["s_range"])
        ru.append(per[b]["utxt_range"])
        rd.append(per[b]["delta_range"])
    measured = bool(benches) and all(v is not None for v in rho_s + rho_u)
    notes["c2_rho_s_delta"] = "per benchmark ρ(S, Δ_vision) across models: " + ", ".join(
        f"{b} {per[b]['rho_s_delta']}" for b in benches) + "; the metric is the smallest"
    notes["c2_rho_utxt_delta"] = "per benchmark ρ(U_txt, Δ_vision): " + ", ".join(
        f"{b} {per[b]['rho_utxt_delta']}" for b in benches) + "; the metric is the largest"
    runs = rew["runs"]
    mean = {k: statistics.fmean(r["syn_acc"] for r in v) for k, v in runs.items()}
    sd = {k: (statistics.stdev([r["syn_acc"] for r in v]) if len(v) > 1 else 0.0) for k, v in runs.items()}
    by_seed = {k: {r["seed"]: r["syn_acc"] for r in v} for k, v in runs.items()}
    seeds = sorted(set(by_seed["pid"]) & set(by_seed["uniform"]))
    diffs = [by_seed["pid"][s_] - by_seed["uniform"][s_] for s_ in seeds]
    replicates = {"c4_syn_acc_gain": replicate_record(diffs, unit="seed", ids=seeds)} if diffs else {}
    notes["c4_syn_acc_gain"] = (f"LoRA on {rew.get('lora_base')}: mean test accuracy over the benchmarks, mean±sd over seeds: "
                                + ", ".join(f"{k} {mean[k]:.3f}±{sd[k]:.3f}" for k in mean)
                                + f"; top-K gap items per benchmark {rew['gap_family_counts']}")
    metrics = {"c1_families_largest_atom": None, "c1_syn_s_frac": None, "c1_syn_info": None,
               "c2_rho_s_delta": min(rho_s) if measured else None,
               "c2_rho_utxt_delta": max(rho_u) if measured else None,
               "c2_n_configs": len(inter), "c2_s_range": min(rs) if rs else None,
               "c2_utxt_range": min(ru) if ru else None, "c2_delta_range": min(rd) if rd else None,
               "c2_per_benchmark": per, "c3_uvis_minus_sav": None, "c3_sensory_info": None,
               "c4_syn_acc_gain": mean["pid"] - mean["uniform"], "c4_uniform_syn_acc": mean["uniform"],
               "c4_base_syn_acc": rew.get("base_syn_acc"), "c4_gap_syn_items": rew.get("n_gap"),
               "c4_n_seeds": len(diffs), "replicates": replicates,
               "c2_points": [{"config": r["config"], "model": r["model"], "benchmark": r["benchmark"],
                              **{k: pid[r["config"]]["pooled"][k] for k in (*ATOMS, "I")},
                              "delta_vision": r["delta_vision"]} for r in inter],
               "reweight_syn_acc": {"mean": mean, "sd": sd}, "notes": notes}
    write_metrics(summary, metrics, {"profile_config": cfg.profile_config, "min_configs": cfg.min_configs})
    lines = ["# Decision-level PID of hub MLLMs (bits)", "",
             "| config | model | benchmark | acc | Δ_vision | R | U_vis | U_txt | S | I |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in inter:
        p = pid[r["config"]]["pooled"]
        lines.append(f"| {r['config']} | {r['model']} | {r['benchmark']} | {r['acc']:.3f} | {r['delta_vision']:.3f} | "
                     + " | ".join(f"{p[k]:.3f}" for k in (*ATOMS, "I")) + " |")
    write_text(table, "\n".join(lines) + "\n")
    prof = {r["benchmark"]: pid[r["config"]]["pooled"] for r in inter if r["mix"] == cfg.profile_config}
    fig, ax = figure(1, 1)
    x = np.arange(len(prof))
    for j, k in enumerate(ATOMS):
        ax.bar(x + (j - 1.5) * 0.2, [prof[b][k] for b in prof], 0.2, label=k)
    ax.set_xticks(x, list(prof))
    ax.set_ylabel("bits")
    ax.legend(ncols=4)
    ax.set_title(f"Decision-level PID per benchmark ({cfg.profile_config})")
    save(fig, fig_p, f"PID profile of model {cfg.profile_config}'s decisions per benchmark (BATCH, bits).")
    fig, axs = figure(1, 2, figsize=(8, 3.4))
    for ax, key, lab in ((axs[0], "S", "synergy S (bits)"), (axs[1], "U_txt", "text-unique U_txt (bits)")):
        for b in benches:
            rows = [r for r in inter if r["benchmark"] == b]
            ax.scatter([pid[r["config"]]["pooled"][key] for r in rows], [r["delta_vision"] for r in rows], label=b)
        ax.set_xlabel(lab)
        ax.set_ylabel("Δ_vision (accuracy drop)")
        ax.legend(fontsize=6)
    save(fig, fig_s, "Synergy and text-unique information of each hub model's decisions per benchmark against its "
         "accuracy drop when the image is masked (claim C2).")
