"""Efficient-DLM aggregation: table, claim metrics, frontier and drift figures."""
from __future__ import annotations

from .config import AnalysisConfig


def _row(rows, model, th):
    for r in rows:
        if r["model"] == model and (th is None or abs(r["threshold"] - th) < 1e-9):
            return r
    return None


def claim_metrics(rows, drifts, cfg: AnalysisConfig):
    m, notes = {}, {}
    d = {k: v["mean"] for k, v in drifts.items()}
    if "fullbidir" in d and "blk_clean" in d:
        m["c1_drift_ratio"] = d["blk_clean"] / d["fullbidir"]
    acc = {(r["model"], r["threshold"]): r["acc"] for r in rows}
    th = cfg.claim_threshold
    if ("blk_clean", th) in acc and ("fullbidir", th) in acc:
        m["c2_acc_gap_vs_fullbidir"] = acc[("blk_clean", th)] - acc[("fullbidir", th)]
    if ("blk_noisy", th) in acc and ("blk_clean", th) in acc:
        m["c2b_acc_gap_vs_blk_noisy"] = acc[("blk_clean", th)] - acc[("blk_noisy", th)]
    ft = cfg.fast_threshold
    if ("blk_clean_posmask", ft) in acc and ("blk_clean", ft) in acc:
        m["c3_posmask_gain_fast"] = acc[("blk_clean_posmask", ft)] - acc[("blk_clean", ft)]
    mid, slow = _row(rows, "blk_clean", cfg.mid_threshold), _row(rows, "blk_clean", cfg.slow_threshold)
    if mid and slow:
        m["c4_tpf_mid"] = mid["useful_tpf"]     # tokens through the answer newline / forwards
        m["c4_acc_loss_pp"] = 100 * (slow["acc"] - mid["acc"])
    ar = _row(rows, "ar", None)
    if ar:
        m["ar_acc"] = ar["acc"]
        m["ar_tokens_per_s"] = ar["tokens_per_s"]
        best = _row(rows, "blk_clean", cfg.claim_threshold)
        if best:
            m["speedup_blk_clean_tau0.9"] = best["tokens_per_s"] / ar["tokens_per_s"]
    # accuracy claims are only informative when the converted models solve some prompts
    conv = [r["acc"] for r in rows if r["model"] != "ar"]
    if conv and max(conv) < 0.05:
        ar_acc = ar["acc"] if ar else float("nan")
        for k in ("c2_acc_gap_vs_fullbidir", "c2b_acc_gap_vs_blk_noisy", "c3_posmask_gain_fast", "c4_acc_loss_pp"):
            if k in m:
                notes[k] = (f"vacuous: every converted model is near 0 exact match (max {max(conv):.3f}; AR base "
                            f"{ar_acc:.3f}), so this comparison carries no signal at this budget")
    if m.get("c1_drift_ratio", 0.0) > 0.8:
        notes["c1_drift_ratio"] = (f"blk_clean drifts {m['c1_drift_ratio']:.2f}× as far as fullbidir at equal steps "
                                   "(one seed): the direction of the paper's Fig. 2e is not seen at this scale")
    if m.get("c3_posmask_gain_fast", 0.0) < 0:
        notes["c3_posmask_gain_fast"] = (f"position-dependent masking loses {-m['c3_posmask_gain_fast']:.3f} exact "
                                         f"match at τ={cfg.fast_threshold} (one seed, equal steps)")
    per_task = sorted(k[4:] for k in (rows[0] if rows else {}) if k.startswith("acc_"))
    if per_task:
        solved = [t for t in per_task if max(r[f"acc_{t}"] for r in rows if r["model"] != "ar") >= 0.05]
        if solved and len(solved) < len(per_task):
            notes["tasks"] = (f"only {', '.join(solved)} is solved by any converted model; the accuracy "
                              f"comparisons rest on it (tasks {', '.join(per_task)})")
    if "c4_tpf_mid" in m and m["c4_tpf_mid"] < 1.5:
        notes["c4_tpf_mid"] = (f"tokens through the answer's newline per forward {m['c4_tpf_mid']:.2f} < 1.5 at "
                               f"τ={cfg.mid_threshold} (all committed positions per forward: {mid['tpf']:.2f}); the "
                               "decoder also spends forwards on the block positions after the newline")
    if "speedup_blk_clean_tau0.9" in m:
        notes["speedup_blk_clean_tau0.9"] = ("single-thread CPU wall time of batched decoding, not the paper's "
                                             "GPU setting; the paper's throughput claims are not checked at tiny scale")
    return m, notes


def figures(rows, drifts, frontier_path, drift_path):
    from methods.core.plots import figure, save

    fig, axes = figure(1, 2, figsize=(10, 4))
    models = sorted({r["model"] for r in rows if r["model"] != "ar"})
    for mdl in models:
        rr = sorted([r for r in rows if r["model"] == mdl], key=lambda r: -r["threshold"])
        axes[0].plot([r["tpf"] for r in rr], [r["acc"] for r in rr], "o-", label=mdl)
        axes[1].plot([r["tokens_per_s"] for r in rr], [r["acc"] for r in rr], "o-", label=mdl)
        for r in rr:
            axes[0].annotate(f"{r['threshold']:g}", (r["tpf"], r["acc"]), fontsize=7)
    ar = _row(rows, "ar", None)
    if ar:
        axes[0].plot([ar["tpf"]], [ar["acc"]], "k*", ms=12, label="AR base")
        axes[1].plot([ar["tokens_per_s"]], [ar["acc"]], "k*", ms=12, label="AR base")
    axes[0].set(xlabel="tokens per forward (TPF)", ylabel="exact match (held-out tasks)")
    axes[1].set(xlabel="tokens / s (CPU, batched)", ylabel="exact match")
    axes[0].legend(fontsize=7)
    save(fig, frontier_path,
         "Accuracy–parallelism frontier: exact match on held-out prompts of the generated tasks (tiny: addition + copy) "
         "vs tokens per forward (left, labels = confidence threshold τ) and decoding tokens/s (right) "
         "for each converted model, block size 8; the star is the AR base with one token per forward.")
    fig, ax = figure(1, 1, figsize=(6, 4))
    keys = ["q", "k", "v", "o", "ffn"]
    w = 0.8 / max(1, len(drifts))
    for j, (mdl, d) in enumerate(sorted(drifts.items())):
        ax.bar([i + j * w for i in range(len(keys))], [d[k] for k in keys], w, label=mdl)
    ax.set_xticks([i + 0.4 - w / 2 for i in range(len(keys))], keys)
    ax.set(ylabel="‖W − W_AR‖ / ‖W_AR‖")
    ax.legend(fontsize=7)
    save(fig, drift_path,
         "Weight drift from the AR base after conversion, per module type (relative Frobenius norm over "
         "all layers); the paper's Fig. 2e (via reading notes) predicts the least drift for block-wise attention with clean context.")
