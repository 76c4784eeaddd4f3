"""Routing-trace analysis: EOR, entropy, load CV, distinct experts per document, the cache
simulation over capacities and policies, Prop. 3.1 on every trace, claim metrics and figure.
No torch."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from methods.core.results import InputError
from methods.core.safeload import load_npz
from methods.remoe.config import AnalysisConfig

from . import cache as C


def load_traces(trace_dir: str | Path) -> dict:
    out = {}
    for p in sorted(Path(trace_dir).glob("*.npz")):
        out[p.stem] = load_npz(p, keys=("topk", "n_experts", "ppl"))
    if not out:
        raise InputError(f"no traces in {trace_dir}")
    return out


def variant_metrics(tr: dict, cfg: AnalysisConfig) -> dict:
    topk = tr["topk"].astype(np.int64)  # (N, L, S, K)
    N, L, S, K = topk.shape
    E = int(tr["n_experts"])
    if any(c < K for c in cfg.capacities):
        raise InputError(f"config key 'analysis.capacities': every capacity must be >= K = {K}")
    for p in cfg.policies:
        if p not in C.POLICIES:
            raise InputError(f"config key 'analysis.policies': {p!r} not in {C.POLICIES}")
    if "lengths" in tr:  # paper scale: documents of their own lengths (−1 past the end)
        return _ragged_metrics(topk, tr["lengths"].astype(np.int64), E, float(tr["ppl"]), cfg)
    ov = (topk[:, :, 1:, :, None] == topk[:, :, :-1, None, :]).any(-1).sum(-1)  # (N, L, S−1)
    eor_layer = ov.mean((0, 2)) / K
    counts = np.stack([np.bincount(topk[:, l].ravel(), minlength=E) for l in range(L)])
    load = counts / counts.sum(1, keepdims=True)
    ent = -(load * np.log(np.clip(load, 1e-12, None))).sum(1) / np.log(E)
    cv = load.std(1) / load.mean(1)
    distinct = np.mean([[len(np.unique(topk[n, l])) for l in range(L)] for n in range(N)])
    # domain switch vs within-domain overlap
    # the trace's `dom` is the domain of each *target* character (input position p + 1), so the
    # pair of input positions (t−1, t) is dom[t−2], dom[t−1]; the pair t = 1 has no label
    dom = tr["dom"]
    same = (dom[:, :S - 2] == dom[:, 1:S - 1])[:, None, :].repeat(L, 1)
    ov2 = ov[:, :, 1:]
    eor_within = float(ov2[same].mean() / K) if same.any() else float("nan")
    eor_switch = float(ov2[~same].mean() / K) if (~same).any() else float("nan")
    sim, viol, gap_ck = {}, 0, 0.0
    n_sim = min(cfg.n_sim_docs, N)
    for pol in cfg.policies:
        for cap in cfg.capacities:
            f = []
            for n in range(n_sim):
                for l in range(L):
                    m = C.simulate(topk[n, l], cap, pol, cfg.backend)
                    steady = m[1:].mean()
                    f.append(steady)
                    if pol == "lru":
                        b = C.bound(topk[n, l])
                        viol += int(steady > b + 1e-9)
                        if cap == K:
                            gap_ck = max(gap_ck, abs(b - steady))
            sim[f"{pol}@{cap}"] = float(np.mean(f))
    return {"eor": float(eor_layer.mean()), "eor_per_layer": eor_layer.tolist(),
            "eor_within_domain": eor_within, "eor_at_switch": eor_switch,
            "bound_k_1_minus_eor": K * (1 - float(eor_layer.mean())),
            "entropy_norm": float(ent.mean()), "load_cv": float(cv.mean()),
            "distinct_per_doc": float(distinct), "ppl": float(tr["ppl"]),
            "fetch_per_token": sim, "bound_violations": viol, "bound_traces": n_sim * L,
            "bound_gap_at_c_eq_k": float(gap_ck), "k": K, "n_experts": E}


def _ragged_metrics(topk: np.ndarray, lengths: np.ndarray, E: int, ppl: float, cfg: AnalysisConfig) -> dict:
    """variant_metrics of documents of different lengths (paper scale, one held-out conversation
    per document, no domain labels): every statistic over each document's own tokens."""
    N, L, S, K = topk.shape
    if (lengths < 2).any() or (lengths > S).any():
        raise InputError(f"trace lengths must lie in [2, {S}]")
    ov_sum, n_pairs = np.zeros(L), 0
    counts = np.zeros((L, E), dtype=np.int64)
    distinct = []
    for n in range(N):
        t = topk[n, :, :lengths[n]]  # (L, len, K)
        ov = (t[:, 1:, :, None] == t[:, :-1, None, :]).any(-1).sum(-1)  # (L, len − 1)
        ov_sum += ov.sum(1)
        n_pairs += ov.shape[1]
        for l in range(L):
            counts[l] += np.bincount(t[l].ravel(), minlength=E)
        distinct.append([len(np.unique(t[l])) for l in range(L)])
    eor_layer = ov_sum / (n_pairs * K)
    load = counts / counts.sum(1, keepdims=True)
    ent = -(load * np.log(np.clip(load, 1e-12, None))).sum(1) / np.log(E)
    cv = load.std(1) / load.mean(1)
    sim, viol, gap_ck = {}, 0, 0.0
    n_sim = min(cfg.n_sim_docs, N)
    for pol in cfg.policies:
        for cap in cfg.capacities:
            f = []
            for n in range(n_sim):
                for l in range(L):
                    tr = topk[n, l, :lengths[n]]
                    m = C.simulate(tr, cap, pol, cfg.backend)
                    steady = m[1:].mean()
                    f.append(steady)
                    if pol == "lru":
                        b = C.bound(tr)
                        viol += int(steady > b + 1e-9)
                        if cap == K:
                            gap_ck = max(gap_ck, abs(b - steady))
            sim[f"{pol}@{cap}"] = float(np.mean(f))
    return {"eor": float(eor_layer.mean()), "eor_per_layer": eor_layer.tolist(),
            "eor_within_domain": float("nan"), "eor_at_switch": float("nan"),
            "bound_k_1_minus_eor": K * (1 - float(eor_layer.mean())),
            "entropy_norm": float(ent.mean()), "load_cv": float(cv.mean()),
            "distinct_per_doc": float(np.mean(distinct)), "ppl": ppl,
            "fetch_per_token": sim, "bound_violations": viol, "bound_traces": n_sim * L,
            "bound_gap_at_c_eq_k": float(gap_ck), "k": K, "n_experts": E}


def eor_model_metrics(traces: dict, cfg: AnalysisConfig) -> dict:
    """The second MoE (paper: Qwen1.5-MoE-A2.7B, EOR only): its base and ReMoE fine-tunes'
    metrics and EOR(ReMoE)/EOR(base), mean over seeds."""
    if cfg.base not in traces:
        raise InputError(f"eor model traces: no trace named {cfg.base!r}")
    per = {n: variant_metrics(tr, cfg) for n, tr in traces.items()}
    b = per[cfg.base]["eor"]
    ratios = [per[n]["eor"] / b for n in sorted(per) if split_name(n)[0] == cfg.remoe and split_name(n)[1] is not None]
    if not ratios:
        raise InputError(f"eor model traces: no fine-tuned trace of {cfg.remoe!r}")
    return {"eor_ratio": float(np.mean(ratios)), "eor_ratio_per_seed": ratios, "variants": per}


def quality_metrics(lm: dict, cfg: AnalysisConfig) -> dict:
    """lm-eval headline scores per checkpoint (paper: GSM8K strict EM, MMLU acc, IFEval loose,
    HumanEval pass@1) and ReMoE − base per task, mean over seeds."""
    if cfg.base not in lm:
        raise InputError(f"lm-eval results: no checkpoint named {cfg.base!r}")
    scores = {n: {t: s["value"] for t, s in r["scores"].items()} for n, r in lm.items()}
    base = scores[cfg.base]
    delta = {}
    for t in base:
        vals = [scores[n][t] - base[t] for n in sorted(scores) if split_name(n)[0] == cfg.remoe
                and split_name(n)[1] is not None]
        delta[t] = float(np.mean(vals)) if vals else None
    metric = {t: s["metric"] for t, s in lm[cfg.base]["scores"].items()}
    return {"scores": scores, "metric": metric, "remoe_minus_base": delta}


def split_name(name: str) -> tuple[str, int | None]:
    """Trace name → (variant, seed): "remoe_s2" → ("remoe", 2); the base, "base" → ("base", None)."""
    m = re.fullmatch(r"(.+)_s(\d+)", name)
    return (m[1], int(m[2])) if m else (name, None)


def routing_changed(tr: dict, base: dict) -> float:
    """Share of (document, layer, token) top-K sets that differ from the base router's (order-free)."""
    a, b = np.sort(tr["topk"], -1), np.sort(base["topk"], -1)
    if a.shape != b.shape:
        raise InputError(f"traces of different shapes {a.shape} vs {b.shape}: not the same documents")
    if "lengths" in tr:  # paper scale: over each document's own tokens
        valid = np.arange(a.shape[2])[None, None, :] < tr["lengths"][:, None, None]
        return float((a != b).any(-1)[np.broadcast_to(valid, a.shape[:3])].mean())
    return float((a != b).any(-1).mean())


# metrics of the headline / mechanism claims (claims.yaml, `replicates: seed`): the summary
# carries their per-seed values as a `replicates` record, from which methods.core.claims computes
# the interval at the level of the current look
SEED_METRICS = ("c1_eor_ratio", "c2_ppl_ratio", "c3_ce_only_eor_ratio", "c5_distinct_ratio", "c4_lru_miss_drop",
                "c2b_no_trust_eor_minus_remoe", "c2c_no_trust_ppl_minus_remoe")


def claim_metrics(per: dict, cfg: AnalysisConfig) -> dict:
    """Claim metrics from {trace name: variant_metrics}. Every fine-tuned variant has one trace
    per seed (one shared base): each claim's per-seed value against the base, the mean over seeds
    as the metric and the per-seed values under `replicates` (unit seed; the fine-tune seed is the
    outer unit, documents of one checkpoint are never the replicates); C2b / C2c compare the
    w/o-trust fine-tune with ReMoE of the same seed (per-seed differences)."""
    from methods.core.stats import replicate_record

    b = per[cfg.base]
    K = b["k"]
    by: dict = {}
    for name, v in per.items():
        var, seed = split_name(name)
        if seed is not None:
            by.setdefault(var, {})[seed] = v
    if cfg.remoe not in by:
        raise InputError(f"config key 'analysis.remoe': no fine-tuned trace of {cfg.remoe!r}")
    k1, k2 = f"lru@{K}", f"lru@{2 * K}"
    if k1 not in b["fetch_per_token"]:
        raise InputError(f"config key 'analysis.capacities' must contain K = {K}")
    out: dict = {"seeds": sorted(by[cfg.remoe]), "notes": {}, "replicates": {}, "per_seed": {}}
    notes, reps, ps = out["notes"], out["replicates"], out["per_seed"]

    def over_seeds(key, variant, fn, fmt="{:.4f}"):
        if variant not in by:
            out[key] = None
            return
        seeds = sorted(by[variant])
        vals = [fn(by[variant][sd]) for sd in seeds]
        out[key], ps[key] = float(np.mean(vals)), vals
        if key in SEED_METRICS and np.isfinite(vals).all():
            reps[key] = replicate_record(vals, unit="seed", ids=[f"s{sd}" for sd in seeds])
        notes[key] = (f"mean over {len(vals)} fine-tune seeds (one base) of the per-seed value "
                      + "/".join(fmt.format(x) for x in vals))

    over_seeds("c1_eor_ratio", cfg.remoe, lambda r: r["eor"] / b["eor"])
    over_seeds("c2_ppl_ratio", cfg.remoe, lambda r: r["ppl"] / b["ppl"])
    over_seeds("c3_ce_only_eor_ratio", cfg.ce_only, lambda r: r["eor"] / b["eor"])
    over_seeds("c3_ce_only_routing_changed", cfg.ce_only, lambda r: r["routing_changed"])
    over_seeds("c5_distinct_ratio", cfg.remoe, lambda r: r["distinct_per_doc"] / b["distinct_per_doc"])
    # C4a at C = 2K: at C = K, LRU holds exactly E_{t-1}, so its fetches are K(1 − EOR) on every
    # trace and the miss drop is a function of C1's EOR change alone (reported, not claimed)
    if k2 in b["fetch_per_token"]:
        over_seeds("c4_lru_miss_drop", cfg.remoe, lambda r: 1 - r["fetch_per_token"][k2] / b["fetch_per_token"][k2])
    else:
        out["c4_lru_miss_drop"] = None
        notes["c4_lru_miss_drop"] = f"capacity 2K = {2 * K} not in analysis.capacities"
    over_seeds("c4_lru_miss_drop_at_k", cfg.remoe, lambda r: 1 - r["fetch_per_token"][k1] / b["fetch_per_token"][k1])
    notes["c4_lru_miss_drop_at_k"] = (notes.get("c4_lru_miss_drop_at_k", "") + "; at C = K this equals "
                                      "1 − (1 − EOR_remoe)/(1 − EOR_base) on every trace (Prop. 3.1 with equality)")
    out["c4_bound_holds_all"] = all(v["bound_violations"] == 0 for v in per.values())
    out["c4_bound_gap_at_c_eq_k_max"] = max(v["bound_gap_at_c_eq_k"] for v in per.values())
    if cfg.no_trust in by:
        seeds = sorted(set(by[cfg.no_trust]) & set(by[cfg.remoe]))
        holds = [bool(by[cfg.no_trust][sd]["eor"] > by[cfg.remoe][sd]["eor"]
                      and by[cfg.no_trust][sd]["ppl"] > by[cfg.remoe][sd]["ppl"]) for sd in seeds]
        out["c2b_no_trust_direction_seeds"] = sum(holds)
        notes["c2b_no_trust_direction_seeds"] = (
            "w/o trust vs remoe, same seed: " + "; ".join(
                f"s{sd}: EOR {by[cfg.no_trust][sd]['eor']:.4f} vs {by[cfg.remoe][sd]['eor']:.4f}, PPL "
                f"{by[cfg.no_trust][sd]['ppl']:.4f} vs {by[cfg.remoe][sd]['ppl']:.4f}" for sd in seeds)
            + f"; both higher in {sum(holds)} of {len(seeds)} seeds")
    else:
        out["c2b_no_trust_direction_seeds"] = None
    # C2b / C2c: the w/o-trust fine-tune against ReMoE of the same seed, per seed (seeds both ran)
    for key, col in (("c2b_no_trust_eor_minus_remoe", "eor"), ("c2c_no_trust_ppl_minus_remoe", "ppl")):
        seeds = sorted(set(by.get(cfg.no_trust, {})) & set(by[cfg.remoe]))
        if not seeds:
            out[key] = None
            continue
        vals = [by[cfg.no_trust][sd][col] - by[cfg.remoe][sd][col] for sd in seeds]
        out[key], ps[key] = float(np.mean(vals)), vals
        if np.isfinite(vals).all():
            reps[key] = replicate_record(vals, unit="seed", ids=[f"s{sd}" for sd in seeds])
        notes[key] = notes.get("c2b_no_trust_direction_seeds", "")
    return out


def table_csv(per: dict, cfg: AnalysisConfig) -> str:
    cols = ["eor", "eor_within_domain", "eor_at_switch", "ppl", "entropy_norm", "load_cv",
            "distinct_per_doc", "routing_changed", "bound_violations"]
    sims = sorted({k for v in per.values() for k in v["fetch_per_token"]})
    lines = ["variant," + ",".join(cols + [f"fetch_{s}" for s in sims])]
    for name, v in per.items():
        vals = [v[c] for c in cols] + [v["fetch_per_token"][s] for s in sims]
        lines.append(name + "," + ",".join(f"{x:.6g}" for x in vals))
    return "\n".join(lines) + "\n"


def make_figure(per: dict, cfg: AnalysisConfig, path: str, caption: str) -> None:
    from methods.core.plots import figure, save

    fig, (a1, a2) = figure(1, 2, figsize=(9, 3.4))
    names = list(per)
    a1.bar(names, [per[n]["eor"] for n in names], color="#1b6ca8")
    K, E = per[names[0]]["k"], per[names[0]]["n_experts"]
    a1.axhline(K / E, ls="--", c="gray", lw=1, label=f"random routing K/E = {K / E:.2f}")
    a1.set_ylabel("EOR (mean over layers)")
    a1.legend()
    for i, n in enumerate(names):
        caps, col = cfg.capacities, f"C{i}"
        a2.plot(caps, [per[n]["fetch_per_token"][f"lru@{c}"] for c in caps], marker="o", c=col,
                label=f"{n} LRU")
        if "belady" in cfg.policies:
            a2.plot(caps, [per[n]["fetch_per_token"][f"belady@{c}"] for c in caps], ls=":",
                    marker=".", c=col, label=f"{n} Belady")
    a2.set_xlabel("cache capacity per layer (experts)")
    a2.set_ylabel("fetches / token / layer")
    a2.legend(ncol=2, fontsize=6)
    save(fig, path, caption)
