"""ReMoE's router objective (arXiv 2605.27081, as given by a third-party
note on the paper, NV), per MoE layer on (B, S, E) log-probabilities.

KL direction (easy to get backwards with PyTorch): `kl(logp, logq)` = KL(P‖Q) = Σ_e P_e (log P_e − log Q_e), written out
explicitly. torch's `F.kl_div(input, target)` takes input = log Q and target = P and returns
KL(P‖Q), i.e. its *second* argument is the first argument of KL; we do not use it.

* Trust: (1/T) Σ_t KL(P_t ‖ sg(P_t^ref)), P^ref = frozen original router on the current h_t.
* Reuse: m_t = (1/K) Σ_{k ∈ sg(E_{t−1})} P_t^(k); ρ = mean_{t≥2} m_t per sequence;
  L = −log(ρ + 1e−8), averaged over sequences.
* Smooth: mean_t SymKL(P_t, P_{t−1}), gradients through both steps.
* Lag: mean over d ∈ D of mean_t SymKL(P_t, P_{t−d}) (lags ≥ S are skipped).
* Working set: windows of W steps, P̄_b = mean of P_t, L = mean_b H(P̄_b) (nats).
SymKL(a, b) = KL(a‖b) + KL(b‖a) (our reading, not verified; `sym_half` gives ½ of it).
"""
from __future__ import annotations

import torch


def kl(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    """KL(P‖Q) over the last axis, from log-probabilities."""
    return (logp.exp() * (logp - logq)).sum(-1)


def symkl(logp: torch.Tensor, logq: torch.Tensor, half: bool = False) -> torch.Tensor:
    s = kl(logp, logq) + kl(logq, logp)
    return 0.5 * s if half else s


def trust(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    return kl(logp, logp_ref.detach()).mean()


def reuse_mass(logp: torch.Tensor, topk_idx: torch.Tensor) -> torch.Tensor:
    """ρ per sequence: logp (B, S, E), topk_idx (B, S, K) → (B,)."""
    K = topk_idx.shape[-1]
    prev = topk_idx[:, :-1].detach()
    m = logp[:, 1:].exp().gather(-1, prev).sum(-1) / K  # (B, S−1)
    return m.mean(-1)


def reuse(logp: torch.Tensor, topk_idx: torch.Tensor) -> torch.Tensor:
    return -torch.log(reuse_mass(logp, topk_idx) + 1e-8).mean()


def smooth(logp: torch.Tensor, half: bool = False) -> torch.Tensor:
    return symkl(logp[:, 1:], logp[:, :-1], half).mean()


def lag(logp: torch.Tensor, lags: list[int], half: bool = False) -> torch.Tensor:
    S = logp.shape[1]
    terms = [symkl(logp[:, d:], logp[:, :-d], half).mean() for d in lags if d < S]
    return torch.stack(terms).mean() if terms else logp.new_zeros(())


def working_set(logp: torch.Tensor, window: int) -> torch.Tensor:
    B, S, E = logp.shape
    n = S // window
    if n == 0:
        return logp.new_zeros(())
    pbar = logp[:, :n * window].exp().reshape(B, n, window, E).mean(2)
    return -(pbar * torch.log(pbar.clamp_min(1e-12))).sum(-1).mean()


def locality(logp, topk_idx, w: dict, lags: list[int], window: int, half: bool = False) -> dict:
    """The four locality terms of one layer (unweighted) and their λ-weighted sum."""
    terms = {"reuse": reuse(logp, topk_idx), "smooth": smooth(logp, half),
             "lag": lag(logp, lags, half), "ws": working_set(logp, window)}
    terms["loc"] = sum(w[k] * terms[k] for k in ("reuse", "smooth", "lag", "ws"))
    return terms
