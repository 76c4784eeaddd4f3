"""Metrics table, the C5 SimBackend threshold sweep, claim metrics and the figure."""
from __future__ import annotations

import json

import numpy as np

from . import metrics as M, prompts as P
from .config import AnalysisConfig


def metric_rows(samples: dict, world: dict, embedder=None, embeddings: dict | None = None) -> list[dict]:
    """One row per (model, method): means over topics. With `embeddings` (a dict), the sample
    embeddings of each (model, method) are kept there per topic, in topic order (for the topic
    bootstrap of C4)."""
    rows = []
    for model, recs in samples.items():
        for method in dict.fromkeys(r["method"] for r in recs):
            rr = [r for r in recs if r["method"] == method]
            per = []
            for r in rr:
                valid, s = world["pool"][r["topic"]], r["samples"]
                per.append({"validity": M.validity(s, valid),
                            "unique_valid": M.unique_valid_fraction(s, valid),
                            "coverage": M.coverage(s, valid),
                            "kl_to_ref": M.kl_to_reference(s, valid, world["p_ref"][r["topic"]]),
                            "distinct2_corpus": M.distinct_n_corpus(s, 2),
                            "distinct2_intra": M.distinct_n_intra(s, 2),
                            "rouge_l": M.mean_pairwise_rouge_l(s)})
            row = {"model": model, "method": method, "n_topics": len(rr),
                   "n_samples": int(np.mean([len(r["samples"]) for r in rr]))}
            row.update({k: float(np.nanmean([p[k] for p in per])) for k in per[0]})
            row["unique_valid_per_topic"] = [p["unique_valid"] for p in per]
            if embedder is not None:
                embs = {r["topic"]: embedder(r["samples"]) for r in rr}
                row["semantic_diversity"] = M.pooled_semantic_diversity(list(embs.values()))
                if embeddings is not None:
                    embeddings[(model, method)] = embs
            rows.append(row)
    return rows


def sim_threshold_sweep(world: dict, cfg: AnalysisConfig) -> list[dict]:
    """C5: a simulated VS-capable LLM (SimBackend) that, asked for responses with probability
    below p, samples k items without replacement from q_p ∝ min(pi_ref, p) and verbalises them
    as JSON. Each prompt goes through messages() -> chat -> parse_verbalized; Coverage-N per
    prompt is averaged. The expected coverage of iid draws from q_p is reported beside it."""
    import re

    from methods.core.llm import SimBackend

    k = world["k"]

    def respond(prompt: str, rng) -> str:
        topic = prompt.rsplit("about ", 1)[1].split()[0].rstrip(".")
        mt = re.search(r"probability below ([0-9.eE-]+)\.", prompt)
        p = np.asarray(world["p_ref"][topic])
        q = np.minimum(p, float(mt.group(1))) if mt else p
        q = q / q.sum()
        idx = np.random.default_rng(rng.getrandbits(63)).choice(len(q), k, replace=False, p=q)
        return json.dumps({"responses": [{"text": world["pool"][topic][i],
                                          "probability": round(float(q[i]), 3)} for i in idx]})

    sim = SimBackend(respond)
    chats = -(-cfg.sim_n // k)
    out = []
    for thr in cfg.sim_thresholds:
        convs = [P.messages("vs_standard", f"Tell me a joke about {t}", k=k,
                            p_threshold=None if thr < 0 else thr)
                 for t in world["topics"] for _ in range(cfg.sim_repeats)]
        replies = sim.chat(convs, max_new_tokens=256, temperature=0.7, n=chats, seed=cfg.seed)
        cov, exp = [], []
        for ci, rep in enumerate(replies):
            t = world["topics"][ci // cfg.sim_repeats]
            texts = [it["text"] for r in rep for it in P.parse_verbalized(r)][:cfg.sim_n]
            cov.append(M.coverage(texts, world["pool"][t]))
            p = np.asarray(world["p_ref"][t])
            q = np.minimum(p, thr) if thr > 0 else p
            exp.append(M.expected_coverage(q / q.sum(), cfg.sim_n))
        out.append({"threshold": thr, "coverage": float(np.mean(cov)),
                    "coverage_se": float(np.std(cov) / np.sqrt(len(cov))),
                    "expected_coverage_iid": float(np.mean(exp))})
    return out


def retention_gain_interval(embeddings: dict, topics: list[str], reps: int, seed: int) -> dict | None:
    """C4's paired topic bootstrap: resample topics (the same draw for base and aligned, Direct and
    VS), recompute each pooled semantic diversity and retention(VS) − retention(Direct);
    percentile interval (methods.core.stats.interval_record). None without the four embeddings."""
    from methods.core.stats import LEVEL, interval_record

    keys = [(mo, me) for mo in ("base", "aligned") for me in ("direct", "vs_standard")]
    if any(k not in embeddings for k in keys):
        return None
    # pair units: per topic the within-topic diversity sum and pair count of each run
    stats = {}
    for k in keys:
        d, n = [], []
        for t in topics:
            e = embeddings[k].get(t)
            m = 0 if e is None or len(e) < 2 else len(e) * (len(e) - 1) // 2
            d.append(M.semantic_diversity(e) * m if m else 0.0)
            n.append(m)
        stats[k] = (np.asarray(d), np.asarray(n, float))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(topics), (reps, len(topics)))
    with np.errstate(divide="ignore", invalid="ignore"):
        div = {k: d[idx].sum(1) / n[idx].sum(1) for k, (d, n) in stats.items()}
        gain = (div[("aligned", "vs_standard")] / div[("base", "vs_standard")]
                - div[("aligned", "direct")] / div[("base", "direct")])
    gain = gain[np.isfinite(gain)]
    if len(gain) < reps // 2:
        return None
    lo, hi = np.quantile(gain, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    # topics of ONE trained base/aligned pair: an interval over items (the claim replicates over seeds)
    return interval_record(float(lo), float(hi), method="bootstrap", n=len(topics), unit="item")


def claim_metrics(theory: dict, rows: list[dict], gamma_hat: float, sweep: list[dict],
                  alpha: float, cfg: AnalysisConfig, base_slope: float = float("nan"),
                  c4_interval: dict | None = None) -> dict:
    """Claim metrics, their intervals and the guard metrics: the base LM must track pi_ref
    (c3_base_slope, else gamma-hat is a slope on noise) and produce valid samples in the Direct and
    VS formats (else the diversity ratios compare nothing)."""
    from methods.core.stats import interval_record, replicate_record

    by = {(r["model"], r["method"]): r for r in rows}
    tab = theory["sharpen"]
    c1 = max(max(abs(r["gamma_closed_form"] - r["gamma_theory"]),
                 abs(r["gamma_dpo"] - r["gamma_theory"])) for r in tab)
    a = theory["alpha"]
    db, da = by[("base", "direct")], by[("aligned", "direct")]
    ratio, lo, hi = M.bootstrap_ratio_ci(da["unique_valid_per_topic"], db["unique_valid_per_topic"],
                                         reps=cfg.bootstrap, seed=cfg.seed)
    key = "semantic_diversity" if "semantic_diversity" in db else "unique_valid"
    def div(x, y):
        return x / y if y and np.isfinite(y) else float("nan")

    ret = {m: div(by[("aligned", m)][key], by[("base", m)][key])
           for m in ("direct", "vs_standard") if ("base", m) in by}
    covs = [s["coverage"] for s in sweep]
    intervals = {}
    if np.isfinite(lo) and np.isfinite(hi):
        intervals["c3_direct_unique_ratio"] = interval_record(lo, hi, method="bootstrap", unit="item",
                                                              n=len(db["unique_valid_per_topic"]))
    if c4_interval is not None:
        intervals["c4_retention_gain"] = c4_interval
    notes = {
        "c4_retention_gain": (f"exploratory (our prototype did not pass); retention of "
                              f"{key}: VS {ret.get('vs_standard', float('nan')):.3f}, Direct "
                              f"{ret['direct']:.3f}; 95% paired topic-bootstrap interval. DPO here trains on the direct format only, so "
                              "a VS advantage can come from alignment not transferring to the "
                              "list format rather than from the paper's mechanism (a "
                              "distribution-level prompt recovering pi_ref); the raw VS/Direct "
                              "diversity ratio is an artefact of lists sampled without "
                              "replacement and is not a reproduction of 1.6-2.1x."),
        "c3_gamma_hat": "theory for the DPO'd tiny LM is 1 + alpha/beta; the tiny LM only "
                        "approximates the population optimum",
    }
    vs_base = by.get(("base", "vs_standard"), {})
    gain = ret.get("vs_standard", float("nan")) - ret["direct"]
    # C3a/C3b/C4 replicate over training seeds (the DPO'd pair is trained here): this run is ONE
    # base/aligned pair, so each claim metric is one seed-level value (claims reads n < 3); the
    # topic bootstraps in `intervals` are over items of that one pair
    replicates = {k: replicate_record([v], unit="seed") for k, v in
                  (("c3_gamma_hat", gamma_hat), ("c3_direct_unique_ratio", ratio), ("c4_retention_gain", gain))
                  if v is not None and np.isfinite(v)}
    return {
        "c1_max_abs_gamma_error": c1,
        "c2_alpha_z": abs(a["alpha_hat"] - alpha) / a["alpha_se"],
        "alpha_hat": a["alpha_hat"], "alpha_se": a["alpha_se"], "alpha_p": a["alpha_p"],
        "c3_gamma_hat": gamma_hat,
        "c3_gamma_theory": 1 + alpha / theory["dpo_beta"],
        "c3_base_slope": base_slope,
        "c3_direct_unique_ratio": ratio, "c3_direct_unique_ratio_ci": [lo, hi],
        "base_direct_validity": db["validity"],
        "base_vs_validity": vs_base.get("validity", float("nan")),
        "c4_retention_direct": ret["direct"],
        "c4_retention_vs": ret.get("vs_standard", float("nan")),
        "c4_retention_gain": gain,
        "c4_metric": key,
        "c5_coverage": covs,
        "c5_monotone": bool(all(b > a_ for a_, b in zip(covs, covs[1:]))),
        "intervals": intervals,
        "replicates": replicates,
        "notes": notes,
    }


def figure(theory: dict, rows: list[dict], sweep: list[dict], path: str, caption: str) -> None:
    from methods.core import plots

    fig, ax = plots.figure(1, 3, figsize=(14, 4))
    for r in theory["sharpen"]:
        p, q = np.log(r["p_ref"]), np.log(r["p_dpo"])
        ax[0].scatter(p, q, s=10, label=f"β={r['beta']}: γ={r['gamma_dpo']:.3f}")
    ax[0].set_xlabel("log π_ref"), ax[0].set_ylabel("log π_DPO (tabular)")
    ax[0].set_title("C1 sharpening"), ax[0].legend(fontsize=8)
    key = "semantic_diversity" if "semantic_diversity" in rows[0] else "unique_valid"
    methods = list(dict.fromkeys(r["method"] for r in rows))
    for j, model in enumerate(["base", "aligned"]):
        vals = [next(r[key] for r in rows if r["model"] == model and r["method"] == m) for m in methods]
        ax[1].bar(np.arange(len(methods)) + 0.4 * j, vals, 0.4, label=model)
    ax[1].set_xticks(np.arange(len(methods)) + 0.2, methods)
    ax[1].set_ylabel(key), ax[1].set_title("tiny LM: diversity by method"), ax[1].legend()
    thr = [("off" if s["threshold"] < 0 else str(s["threshold"])) for s in sweep]
    ax[2].errorbar(range(len(sweep)), [s["coverage"] for s in sweep],
                   [2 * s["coverage_se"] for s in sweep], marker="o", label="measured (±2 SE)")
    ax[2].plot(range(len(sweep)), [s["expected_coverage_iid"] for s in sweep], "--", label="iid expectation")
    ax[2].set_xticks(range(len(sweep)), thr), ax[2].set_xlabel("VS probability threshold p")
    ax[2].set_ylabel("Coverage-N"), ax[2].set_title("C5 SimBackend"), ax[2].legend()
    plots.save(fig, path, caption)
