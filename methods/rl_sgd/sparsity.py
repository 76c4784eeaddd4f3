"""Update sparsity (the authors' `check_sparsity.py`,
github.com/SagnikMukherjee/sparsity_in_rl): the fraction of stored entries that
differ between base and RL checkpoints, compared in bf16 (the paper's metric) and in fp32;
per tensor, per category and overall; plus the rank structure of the fp32 update ΔW."""
from __future__ import annotations

import math

import torch

CATEGORIES = ("embedding", "attention", "mlp", "norm", "head")


def category(name: str) -> str:
    if "embed_tokens" in name or name.startswith("embed"):
        return "embedding"
    if "norm" in name:
        return "norm"
    if any(k in name for k in ("q_proj", "k_proj", "v_proj", "o_proj")):
        return "attention"
    if any(k in name for k in ("gate_proj", "up_proj", "down_proj")):
        return "mlp"
    if "lm_head" in name:
        return "head"
    raise ValueError(f"no category for tensor {name!r}")


def changed(base: torch.Tensor, new: torch.Tensor, dtype) -> int:
    """Entries whose value differs after casting both to `dtype` (exact inequality)."""
    return int((base.to(dtype) != new.to(dtype)).sum().item())


def effective_rank(delta: torch.Tensor) -> dict:
    """Entropy effective rank exp(H(σ/Σσ)) (Roy & Vetterli) and the number of singular
    values holding 99% of ‖ΔW‖_F², each also as a fraction of min(m, n)."""
    s = torch.linalg.svdvals(delta.double())
    full = min(delta.shape)
    if s.sum() == 0:
        return {"eff_rank": 0.0, "rank99": 0, "eff_rank_frac": 0.0, "rank99_frac": 0.0}
    p = s / s.sum()
    p = p[p > 0]
    er = math.exp(-(p * p.log()).sum().item())
    e = torch.cumsum(s ** 2, 0) / (s ** 2).sum()
    r99 = int((e < 0.99).sum().item()) + 1
    return {"eff_rank": er, "rank99": r99, "eff_rank_frac": er / full, "rank99_frac": r99 / full}


def analyse(base: dict, new: dict, with_rank: bool = True) -> dict:
    if set(base) != set(new):
        raise ValueError(f"tensor names differ: {sorted(set(base) ^ set(new))}")
    per, cat = {}, {c: {"n": 0, "bf16": 0, "fp32": 0} for c in CATEGORIES}
    tot = {"n": 0, "bf16": 0, "fp32": 0}
    hidden = {"n": 0, "bf16": 0}
    for name in sorted(base):
        b, n = base[name].float(), new[name].float()
        row = {"n": b.numel(), "bf16": changed(b, n, torch.bfloat16), "fp32": changed(b, n, torch.float32),
               "category": category(name)}
        if with_rank and b.ndim == 2 and row["category"] in ("attention", "mlp"):
            row.update(effective_rank(n - b))
        per[name] = row
        for acc in (cat[row["category"]], tot):
            for k in ("n", "bf16", "fp32"):
                acc[k] += row[k]
        if row["category"] in ("attention", "mlp"):
            hidden["n"] += row["n"]
            hidden["bf16"] += row["bf16"]
    frac = lambda d, k: d[k] / d["n"] if d["n"] else math.nan  # noqa: E731
    ranks = [r["eff_rank_frac"] for r in per.values() if "eff_rank_frac" in r]
    r99 = [r["rank99_frac"] for r in per.values() if "rank99_frac" in r]
    return {
        "n_params": tot["n"],
        "bf16_changed": frac(tot, "bf16"),
        "fp32_changed": frac(tot, "fp32"),
        "hidden_bf16_changed": frac(hidden, "bf16"),
        "per_category": {c: {"bf16_changed": frac(v, "bf16"), "fp32_changed": frac(v, "fp32"), "n": v["n"]}
                         for c, v in cat.items() if v["n"]},
        "mean_eff_rank_frac": sum(ranks) / len(ranks) if ranks else math.nan,
        "mean_rank99_frac": sum(r99) / len(r99) if r99 else math.nan,
        "per_tensor": per,
    }
