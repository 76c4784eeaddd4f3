"""Estimator statistics on captured decode-time q and K (RaBitQCache,
arXiv 2606.31519; RaBitQ, arXiv 2405.12497).

For a sample of real (q, k) pairs per (layer, head) and R Haar-random rotations:
- bias: per pair, the mean error over rotations against its standard error (unbiasedness:
  |mean| < 3·SEM for ≥ 95 % of pairs), for the float query, the INT4 query with randomized
  rounding (unbiased in theory) and with deterministic rounding (faiss / the vLLM fork);
- RMSE of the q·k estimate, centred (c_q, c_k from the prefill) vs un-centred (c = 0);
- coverage of the RaBitQ bound at ε0, against its closed form: for unit o, q with ρ = ⟨o, q⟩,
  err = √(1−ρ²)·√(1−⟨ō,o⟩²)/⟨ō,o⟩·w, where w is one coordinate of a uniform unit vector in
  R^{D−1} (w² ~ Beta(½, (D−2)/2)), so P(|err| ≤ bound) = I_x(½, (D−2)/2), x = ε0²/((D−1)(1−ρ²));
- ⟨ō, o⟩: mean and std, against E⟨ō,o⟩ = √D·Γ(D/2)/(√π·Γ((D+1)/2)) for a uniform direction.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from methods.core.config import NonNegInt, PosInt
from methods.core.results import InputError

from . import rabitq as R
from .config import EstimatorConfig


@dataclass
class StatsConfig(EstimatorConfig):
    """The `estimator` section plus the region the method encodes (the workflow merges these in
    from the `method` section)."""
    min_layer: NonNegInt             # layers below are skipped (the method keeps them dense): skip_layers
    interval: PosInt                 # middle keys only: indices ≥ interval (the prefix is never encoded)


def coverage_closed_form(rho: np.ndarray, d: int, eps0: float) -> np.ndarray:
    from scipy.special import betainc

    x = np.minimum(1.0, eps0 ** 2 / ((d - 1) * np.clip(1 - rho ** 2, 1e-12, None)))
    return betainc(0.5, (d - 2) / 2, x)


def mean_ip_ob_uniform(d: int) -> float:
    return math.sqrt(d) * math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)


def sample_pairs(cap: dict, cfg: StatsConfig, g: torch.Generator):
    """(q [M, D], k [M, D], c_q [M, D], c_k [M, D], group [M]) from the captured tensors:
    `pairs_per_head` random (prompt, step, middle key) triples per (layer, head). With prompts
    of different lengths (capture's `length` [P], K zero-padded to the longest) a key index that
    falls in its prompt's padding is drawn again, so it is uniform over that prompt's middle
    [interval, length); with equal lengths nothing is redrawn."""
    qs, ks, cqs, cks, groups = [], [], [], [], []
    for gi, layer in enumerate(sorted(l for l in cap if l >= cfg.min_layer)):
        q, k = cap[layer]["q"], cap[layer]["k"]            # [P, S, H, D], [P, H, L, D]
        p_, s_, h_, _ = q.shape
        lk = k.shape[2]
        lens = cap[layer].get("length")
        if lens is not None and int(lens.min()) <= cfg.interval:
            raise InputError(f"layer {layer}: a captured prompt has {int(lens.min())} keys, none past the "
                             f"never-encoded prefix of {cfg.interval}")
        for h in range(h_):
            m = cfg.pairs_per_head
            pi = torch.randint(0, p_, (m,), generator=g)
            si = torch.randint(0, s_, (m,), generator=g)
            ki = torch.randint(cfg.interval, lk, (m,), generator=g)
            while lens is not None and (pad := ki >= lens[pi]).any():   # rejection: uniform per prompt
                ki[pad] = torch.randint(cfg.interval, lk, (int(pad.sum()),), generator=g)
            qs.append(q[pi, si, h])
            ks.append(k[pi, h, ki])
            cqs.append(cap[layer]["c_q"][pi, h])
            cks.append(cap[layer]["c_k"][pi, h])
            groups.append(torch.full((m,), gi * h_ + h))
    return torch.cat(qs), torch.cat(ks), torch.cat(cqs), torch.cat(cks), torch.cat(groups)


def estimator_stats(cap: dict, cfg: StatsConfig) -> dict:
    g = torch.Generator().manual_seed(cfg.seed)
    q, k, c_q, c_k, _ = sample_pairs(cap, cfg, g)
    m, d = q.shape
    true = (q.double() * k.double()).sum(-1)
    zero = torch.zeros_like(c_q)
    names = ("fp", "int4_rand", "int4_det", "fp_uncentred")
    errs = {n: torch.empty(cfg.rotations, m, dtype=torch.float64) for n in names}
    covered = torch.empty(cfg.rotations, m, dtype=torch.bool)
    ip_ob = torch.empty(cfg.rotations, m)
    rots = R.random_rotation(d, g, cfg.rotations)
    for r in range(cfg.rotations):
        rot = rots[r]
        # every pair is its own one-key "cache": keys [M, 1, D] against queries [M, D]
        kc = R.encode_keys(k.unsqueeze(1), rot, c_k, c_q)
        qs = R.prepare_query(q, rot, c_q, c_k)
        errs["fp"][r] = R.estimate_fp(qs, kc)[:, 0].double() - true
        errs["int4_det"][r] = R.estimate_int4(qs, kc)[:, 0].double() - true
        qr = R.prepare_query(q, rot, c_q, c_k, randomized=True, generator=g)
        errs["int4_rand"][r] = R.estimate_int4(qr, kc)[:, 0].double() - true
        covered[r] = errs["fp"][r].abs() <= R.error_bound(qs, kc, cfg.eps0)[:, 0].double() * (1 + 1e-5)
        ip_ob[r] = kc.ip_ob[:, 0]
        ku = R.encode_keys(k.unsqueeze(1), rot, zero, zero)
        errs["fp_uncentred"][r] = R.estimate_fp(R.prepare_query(q, rot, zero, zero), ku)[:, 0].double() - true
    out = {"n_pairs": m, "rotations": cfg.rotations, "head_dim": d, "eps0": cfg.eps0,
           "true_qk_std": float(true.std())}
    for n, e in errs.items():
        mean, sem = e.mean(0), e.std(0) / math.sqrt(cfg.rotations)
        out[f"bias_frac_within_3sem_{n}"] = float((mean.abs() < 3 * sem).double().mean())
        out[f"rmse_{n}"] = float(e.pow(2).mean().sqrt())
        out[f"mean_err_{n}"] = float(e.mean())
    r_ = q.double() - c_q.double()
    o_ = k.double() - c_k.double()
    rho = ((r_ * o_).sum(-1) / (r_.norm(dim=-1) * o_.norm(dim=-1))).numpy()
    out["coverage"] = float(covered.double().mean())
    out["coverage_closed_form"] = float(coverage_closed_form(rho, d, cfg.eps0).mean())
    out["coverage_se"] = math.sqrt(out["coverage_closed_form"] * (1 - out["coverage_closed_form"]) / covered.numel())
    out["ip_ob_mean"] = float(ip_ob.mean())
    out["ip_ob_std"] = float(ip_ob.std())
    out["ip_ob_uniform_mean"] = mean_ip_ob_uniform(d)
    out["rmse_ratio_centred_over_uncentred"] = out["rmse_fp"] / out["rmse_fp_uncentred"]
    out["rmse_int4_over_fp"] = out["rmse_int4_det"] / out["rmse_fp"]
    return out
