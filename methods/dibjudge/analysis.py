"""Claim metrics (C1-C4), the markdown table and the bias figure. No torch."""
from __future__ import annotations

from methods.core.plots import figure, save
from methods.core.stats import replicate_record

from .config import ReportConfig

# every claim and guard metric, present as a key (None = not measured) whatever variants ran
METRICS = ("c1_bias_gap_ratio", "c1_sft_p_mt", "c2_adv_gain", "c2_sft_adv_acc", "c2_id_drop", "c2_sft_min_id_acc",
           "c2_en_drop", "c2_sft_en_acc", "c3_min_gap", "c3_both_lower", "c3_nodis_probe_acc",
           "c4_min_margin", "c4_ablations_reduce_less", "c4_full_reduction")


def _gap(m, lang):
    return abs(m[f"p_mt_{lang}"] - 0.5)


def _c3_gap(dib, nd):
    """The smaller of no_dis − DIBJudge in dCor and in probe accuracy: > 0 iff both are lower."""
    return min(nd["dcor"] - dib["dcor"], nd["probe_acc"] - dib["probe_acc"])


def _c4_margin(sft, full, nb, np_, lang):
    """The smaller of (full's bias reduction − an ablation's), over no_bottleneck and no_proxy:
    > 0 iff both ablations reduce |p_MT − 0.5| less than the full model."""
    red = lambda v: _gap(sft, lang) - _gap(v, lang)  # noqa: E731
    return min(red(full) - red(nb), red(full) - red(np_))


def claim_metrics(res: dict[str, dict], cfg: ReportConfig, per_seed: dict[str, dict] | None = None) -> dict:
    """res: variant -> metrics averaged over seeds; per_seed: variant -> {seed: metrics} (for the
    intervals of the headline claims, paired by seed). Missing variants give None (claim
    not_checked). Guard metrics: SFT's p_MT, adversarial and ID accuracy (the baseline must be biased
    and must have learned quality), no_dis's probe accuracy, the full model's bias reduction."""
    L, full = cfg.lang, cfg.full
    sft, dib = res.get("sft"), res.get(full)
    out, notes, replicates = dict.fromkeys(METRICS), {}, {}
    ps = per_seed or {}
    seeds = sorted(set(ps.get("sft", {})) & set(ps.get(full, {})))
    if sft and dib:
        id_keys = sorted(k for k in sft if k.startswith("id_acc_"))
        ratio = _gap(dib, L) / max(_gap(sft, L), 1e-9)
        out["c1_bias_gap_ratio"] = ratio
        out["c1_sft_p_mt"] = sft[f"p_mt_{L}"]
        out["c2_adv_gain"] = dib[f"adv_acc_{L}"] - sft[f"adv_acc_{L}"]
        out["c2_sft_adv_acc"] = sft[f"adv_acc_{L}"]
        out["c2_sft_min_id_acc"] = min(sft[k] for k in id_keys)
        out["c2_sft_en_acc"] = sft["id_acc_EN"]
        out["n_seeds"] = len(seeds)
        if seeds:   # per-seed statistics, paired by seed; the point value is their mean
            s_, d_ = ([ps[v][k] for k in seeds] for v in ("sft", full))
            per = {"c1_bias_gap_ratio": [_gap(d, L) / max(_gap(s, L), 1e-9) for s, d in zip(s_, d_)],
                   "c2_adv_gain": [d[f"adv_acc_{L}"] - s[f"adv_acc_{L}"] for s, d in zip(s_, d_)],
                   "c2_id_drop": [max(s[k] - d[k] for k in id_keys) for s, d in zip(s_, d_)],
                   "c2_en_drop": [s["id_acc_EN"] - d["id_acc_EN"] for s, d in zip(s_, d_)]}
            for k, v in per.items():
                out[k] = float(sum(v) / len(v))
                replicates[k] = replicate_record(v, unit="seed", ids=seeds)
        else:
            out["c2_id_drop"] = max(sft[k] - dib[k] for k in id_keys)
            out["c2_en_drop"] = sft["id_acc_EN"] - dib["id_acc_EN"]
        notes["c1_bias_gap_ratio"] = (f"|p_MT-0.5| on {L}: {full} {_gap(dib, L):.3f} vs SFT {_gap(sft, L):.3f} "
                                      f"(seed means; SFT p_MT {sft[f'p_mt_{L}']:.3f})")
        notes["c2_adv_gain"] = (f"adversarial accuracy on {L}: {full} {dib[f'adv_acc_{L}']:.3f} vs SFT "
                                f"{sft[f'adv_acc_{L}']:.3f} (seed means; need +0.05)")
        notes["c2_id_drop"] = "ID accuracy SFT − DIBJudge per language (seed means): " + ", ".join(
            f"{k[7:]} {sft[k] - dib[k]:+.3f}" for k in id_keys)
    nd = res.get("no_dis")
    if dib and nd and dib.get("dcor") is not None and nd.get("dcor") is not None:
        out["c3_dcor_lower"] = bool(dib["dcor"] < nd["dcor"])
        out["c3_probe_lower"] = bool(dib["probe_acc"] < nd["probe_acc"])
        out["c3_both_lower"] = out["c3_dcor_lower"] and out["c3_probe_lower"]
        out["c3_nodis_probe_acc"] = nd["probe_acc"]
        out["c3_min_gap"] = _c3_gap(dib, nd)
        s3 = [k for k in sorted(set(ps.get(full, {})) & set(ps.get("no_dis", {})))
              if ps[full][k].get("dcor") is not None and ps["no_dis"][k].get("dcor") is not None]
        if s3:   # per seed (paired: same seed), the point value their mean
            v = [_c3_gap(ps[full][k], ps["no_dis"][k]) for k in s3]
            out["c3_min_gap"] = float(sum(v) / len(v))
            replicates["c3_min_gap"] = replicate_record(v, unit="seed", ids=s3)
        notes["c3_both_lower"] = (f"dCor {dib['dcor']:.3f} vs no_dis {nd['dcor']:.3f}; probe "
                                  f"{dib['probe_acc']:.3f} vs {nd['probe_acc']:.3f}")
    if sft and dib and res.get("no_bottleneck") and res.get("no_proxy"):
        red = {v: _gap(sft, L) - _gap(res[v], L) for v in (full, "no_bottleneck", "no_proxy")}
        out["c4_ablations_reduce_less"] = bool(red["no_bottleneck"] < red[full] and red["no_proxy"] < red[full])
        out["c4_full_reduction"] = red[full]
        out["c4_min_margin"] = _c4_margin(sft, dib, res["no_bottleneck"], res["no_proxy"], L)
        s4 = sorted(set.intersection(*(set(ps.get(v, {})) for v in ("sft", full, "no_bottleneck", "no_proxy"))))
        if s4:
            v = [_c4_margin(ps["sft"][k], ps[full][k], ps["no_bottleneck"][k], ps["no_proxy"][k], L) for k in s4]
            out["c4_min_margin"] = float(sum(v) / len(v))
            replicates["c4_min_margin"] = replicate_record(v, unit="seed", ids=s4)
        notes["c4_ablations_reduce_less"] = "bias reduction vs SFT: " + ", ".join(f"{k} {v:+.3f}" for k, v in red.items())
    out["replicates"] = replicates
    out["notes"] = notes
    return out


def table(res: dict[str, dict]) -> str:
    keys = sorted({k for m in res.values() for k in m if k != "train_s"})
    lines = ["| variant | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for v, m in res.items():
        cells = ["—" if m.get(k) is None else f"{m[k]:.3f}" for k in keys]
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def bias_figure(res: dict[str, dict], path, lang: str):
    fig, axes = figure(1, 3, figsize=(12, 3.6))
    names = list(res)
    x = range(len(names))
    for ax, (key, title) in zip(axes, [(f"p_mt_{lang}", f"Bias Suite p_MT ({lang}); ideal 0.5"),
                                       (f"adv_acc_{lang}", f"adversarial accuracy ({lang})"),
                                       ("id_acc_EN", "ID accuracy (EN)")]):
        ax.bar(x, [res[n][key] for n in names], color="#4c72b0")
        if key.startswith("p_mt"):
            ax.axhline(0.5, color="k", lw=0.8, ls="--")
        ax.set_xticks(list(x)); ax.set_xticklabels(names, rotation=35, ha="right"); ax.set_ylim(0, 1)
        ax.set_title(title)
    save(fig, path, f"DIBJudge at tiny scale, language {lang}: MT-preference rate on equal-quality pairs "
                    "(0.5 = unbiased), adversarial accuracy (better = human, worse = MT with a wrong fact) and "
                    "English accuracy per judge variant, mean over seeds.")
