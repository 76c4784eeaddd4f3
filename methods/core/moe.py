"""Reusable top-K mixture-of-experts layer (router + SwiGLU experts + load-balancing loss).

Used by `methods/dag_moe` (structural aggregation over the selected experts) and meant for
`methods/remoe` (router-only fine-tuning: needs the full router distribution P_t, the selected
set E_t, and experts that can be frozen independently of the router).

Conventions (T = tokens after flattening leading dims, E = experts, K = experts per token):

* Router (Mixtral `MixtralTopKRouter` semantics): logits = x W_rᵀ (+ b_r, off by default);
  probs = softmax(logits) over all E experts; (w, idx) = topk(probs, K) sorted descending;
  if `renormalize` (Mixtral default) w /= Σ_k w_k, else the raw softmax mass is kept (Switch /
  DeepSeek-style). `softmax_dtype=torch.float32` reproduces Mixtral bit-for-bit, which always
  takes the softmax in float32 (`router_logits.float()`), also for float64 inputs; the default
  `None` keeps the input dtype.
* Expert e (SwiGLU): E_e(x) = W_down[e] (silu(W_gate[e] x) ⊙ W_up[e] x), no biases.
  Weights are stored as 3-D tensors: w_gate, w_up (E, d_ff, d), w_down (E, d, d_ff).
  Mixtral stores gate_up_proj = cat([w_gate, w_up], 1) (E, 2 d_ff, d) and down_proj = w_down.
* Dispatch `SwiGLUExperts.run(inputs (N, d), expert_ids (N,))` runs expert expert_ids[n] on
  row n. "sorted": rows are sorted by expert id and each expert runs once on its contiguous
  block (a Python loop over experts, never over tokens). "dense": every expert runs on every
  row and the wanted output is gathered (fastest for tiny E on CPU; O(N E d d_ff)).
  "rounds": sorted dispatch issued once per slot k (K batched calls of T rows), i.e. the
  same GEMM batches as DAG-MoE's K rounds; only this and "dense" make a DAG layer with zero
  edges bitwise equal to the plain layer ("sorted" differs by GEMM rounding, ~1e-7 fp32,
  because a matmul's rounding depends on how many rows it is batched with).
* Combine: y_t = Σ_k w_tk · o_tk, where o_tk = E_{idx_tk}(x_t) is returned as
  `expert_out` (T, K, d) so that other aggregations (DAG-MoE) can consume it.
* Load-balancing loss (`load_balancing_loss`, = transformers' mixtral `load_balancing_loss_func`
  for one layer):  L_aux = E · Σ_e f_e · P_e  with
      f_e = (1/T) Σ_t Σ_k 1[idx_tk = e]      (fraction of tokens routed to e; Σ_e f_e = K)
      P_e = (1/T) Σ_t softmax(logits_t)_e    (mean router probability; Σ_e P_e = 1).
  Uniform routing gives L_aux = K (Mixtral form). `per_slot=True` divides f by K (Switch form,
  uniform routing gives 1). f is piecewise constant, so the gradient flows through P only.
  With a padding mask, sums run over unmasked tokens and T is their count. For several layers
  the Mixtral function pools f and P over all layers' rows before the product; this module
  computes one layer, and callers choose how to average (`pool_layers` reproduces Mixtral).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class RouterOutput:
    logits: torch.Tensor   # (T, E) pre-softmax router scores
    probs: torch.Tensor    # (T, E) softmax over all experts (in softmax_dtype)
    topk_idx: torch.Tensor  # (T, K) int64, selected experts, descending probability
    topk_weights: torch.Tensor  # (T, K) gates (renormalised if the router says so)


@dataclass
class MoEOutput:
    y: torch.Tensor             # (..., d) combined output, same leading shape as the input
    router_logits: torch.Tensor  # (T, E)
    router_probs: torch.Tensor   # (T, E)
    topk_idx: torch.Tensor       # (T, K)
    topk_weights: torch.Tensor   # (T, K)
    expert_out: torch.Tensor     # (T, K, d) ungated outputs of the K selected experts
    aux_loss: torch.Tensor       # scalar load-balancing loss for this layer (see module doc)
    extras: dict | None = None   # aggregation-specific tensors (e.g. DAG edges)


class TopKRouter(nn.Module):
    """Linear router, softmax over experts, top-K, optional renormalisation (Mixtral)."""

    def __init__(self, d: int, n_experts: int, k: int, renormalize: bool = True,
                 bias: bool = False, softmax_dtype: torch.dtype | None = None):
        super().__init__()
        if not 1 <= k <= n_experts:
            raise ValueError(f"need 1 <= k={k} <= n_experts={n_experts}")
        self.n_experts, self.k, self.renormalize = n_experts, k, renormalize
        self.softmax_dtype = softmax_dtype
        self.proj = nn.Linear(d, n_experts, bias=bias)
        nn.init.normal_(self.proj.weight, std=d ** -0.5)
        if bias:
            nn.init.zeros_(self.proj.bias)

    def forward(self, x: torch.Tensor) -> RouterOutput:
        logits = self.proj(x.reshape(-1, x.shape[-1]))
        z = logits if self.softmax_dtype is None else logits.to(self.softmax_dtype)
        probs = torch.softmax(z, dim=-1)
        w, idx = torch.topk(probs, self.k, dim=-1)  # sorted=True: descending
        if self.renormalize:
            w = w / w.sum(dim=-1, keepdim=True)
        return RouterOutput(logits, probs, idx, w)


DISPATCH = ("sorted", "rounds", "dense")


class SwiGLUExperts(nn.Module):
    """E independent SwiGLU MLPs stored as stacked weights, with batched dispatch."""

    def __init__(self, n_experts: int, d: int, d_ff: int, dispatch: str = "sorted"):
        super().__init__()
        if dispatch not in DISPATCH:
            raise ValueError(f"dispatch must be one of {DISPATCH}, got {dispatch!r}")
        self.n_experts, self.d, self.d_ff, self.dispatch = n_experts, d, d_ff, dispatch
        self.w_gate = nn.Parameter(torch.empty(n_experts, d_ff, d))
        self.w_up = nn.Parameter(torch.empty(n_experts, d_ff, d))
        self.w_down = nn.Parameter(torch.empty(n_experts, d, d_ff))
        for w, fan_in in ((self.w_gate, d), (self.w_up, d), (self.w_down, d_ff)):
            nn.init.normal_(w, std=fan_in ** -0.5)

    def expert(self, e: int, x: torch.Tensor) -> torch.Tensor:
        """E_e(x) for rows x (n, d)."""
        h = F.silu(F.linear(x, self.w_gate[e])) * F.linear(x, self.w_up[e])
        return F.linear(h, self.w_down[e])

    def run(self, inputs: torch.Tensor, expert_ids: torch.Tensor) -> torch.Tensor:
        """Row n of the result is E_{expert_ids[n]}(inputs[n]); inputs (N, d), ids (N,)."""
        ids = expert_ids.reshape(-1)
        if self.dispatch == "dense":
            # every expert on every row: (E, N, d), then gather the wanted expert per row
            h = F.silu(torch.einsum("nd,efd->enf", inputs, self.w_gate))
            h = h * torch.einsum("nd,efd->enf", inputs, self.w_up)
            out = torch.einsum("enf,edf->end", h, self.w_down)
            return out[ids, torch.arange(ids.numel(), device=ids.device)]
        order = torch.argsort(ids, stable=True)
        counts = torch.bincount(ids, minlength=self.n_experts).tolist()  # one host sync
        xs = inputs[order]
        chunks, start = [], 0
        for e, c in enumerate(counts):  # loop over experts only
            if c:
                chunks.append(self.expert(e, xs[start:start + c]))
            start += c
        ys = torch.cat(chunks, 0) if chunks else inputs.new_zeros(0, self.d)
        out = torch.empty_like(ys)
        out[order] = ys  # undo the sort
        return out

    def apply_slots(self, inputs: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """inputs (T, d) shared by all K slots, idx (T, K) -> (T, K, d) selected outputs."""
        T, K = idx.shape
        if self.dispatch == "dense":
            # run each expert once per token (not once per slot), then gather K slots
            h = F.silu(torch.einsum("td,efd->etf", inputs, self.w_gate))
            h = h * torch.einsum("td,efd->etf", inputs, self.w_up)
            allout = torch.einsum("etf,edf->etd", h, self.w_down)  # (E, T, d)
            return allout[idx, torch.arange(T, device=idx.device)[:, None]]
        if self.dispatch == "rounds":
            return torch.stack([self.run(inputs, idx[:, k]) for k in range(K)], dim=1)
        rep = inputs.unsqueeze(1).expand(T, K, inputs.shape[-1]).reshape(T * K, -1)
        return self.run(rep, idx.reshape(-1)).reshape(T, K, -1)


def combine_sum(weights: torch.Tensor, expert_out: torch.Tensor) -> torch.Tensor:
    """Plain MoE readout y_t = Σ_k w_tk o_tk; weights (T, K), expert_out (T, K, d)."""
    return (weights.to(expert_out.dtype).unsqueeze(-1) * expert_out).sum(dim=1)


def load_balancing_loss(router_logits: torch.Tensor, topk_idx: torch.Tensor | None = None,
                        k: int | None = None, mask: torch.Tensor | None = None,
                        per_slot: bool = False) -> torch.Tensor:
    """L_aux = E · Σ_e f_e P_e for one layer (formula in the module docstring).

    router_logits (T, E); topk_idx (T, K) (recomputed from softmax(logits) if None, which needs
    k); mask (T,) with 1 for real tokens. The softmax is taken in float32 like Mixtral unless
    the logits are float64.
    """
    n_exp = router_logits.shape[-1]
    logits = router_logits.reshape(-1, n_exp)
    z = logits if logits.dtype == torch.float64 else logits.float()
    probs = torch.softmax(z, dim=-1)
    if topk_idx is None:
        topk_idx = torch.topk(probs, k, dim=-1).indices
    topk_idx = topk_idx.reshape(logits.shape[0], -1)
    kk = topk_idx.shape[1]
    m = torch.ones(logits.shape[0], dtype=probs.dtype, device=probs.device) if mask is None \
        else mask.reshape(-1).to(probs.dtype)
    n_tok = m.sum()
    counts = torch.zeros(n_exp, dtype=probs.dtype, device=probs.device).scatter_add_(
        0, topk_idx.reshape(-1), m.repeat_interleave(kk))
    f = counts / n_tok
    if per_slot:
        f = f / kk
    p = (probs * m[:, None]).sum(0) / n_tok
    return n_exp * (f * p).sum()


def pool_layers(router_logits: list[torch.Tensor], k: int) -> torch.Tensor:
    """Mixtral's multi-layer form: f and P pooled over all layers' rows, then E Σ f P."""
    return load_balancing_loss(torch.cat([r.reshape(-1, r.shape[-1]) for r in router_logits]),
                               k=k)


class MoELayer(nn.Module):
    """Top-K sparse MoE FFN. forward(x (..., d)) -> MoEOutput (weighted-sum aggregation)."""

    def __init__(self, d: int, n_experts: int, k: int, d_ff: int, renormalize: bool = True,
                 dispatch: str = "sorted", router_bias: bool = False,
                 softmax_dtype: torch.dtype | None = None, aux_per_slot: bool = False):
        super().__init__()
        self.d, self.n_experts, self.k, self.d_ff = d, n_experts, k, d_ff
        self.aux_per_slot = aux_per_slot
        self.router = TopKRouter(d, n_experts, k, renormalize, router_bias, softmax_dtype)
        self.experts = SwiGLUExperts(n_experts, d, d_ff, dispatch)

    def route(self, x: torch.Tensor) -> RouterOutput:
        return self.router(x)

    def aux_loss(self, r: RouterOutput, mask: torch.Tensor | None = None) -> torch.Tensor:
        return load_balancing_loss(r.logits, r.topk_idx, mask=mask, per_slot=self.aux_per_slot)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> MoEOutput:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        r = self.route(x2)
        o = self.experts.apply_slots(x2, r.topk_idx)
        y = combine_sum(r.topk_weights, o).to(x.dtype).reshape(shape)
        return MoEOutput(y, r.logits, r.probs, r.topk_idx, r.topk_weights, o,
                         self.aux_loss(r, mask))

    def load_mixtral(self, block: nn.Module) -> None:
        """Copy weights from a transformers `MixtralSparseMoeBlock` (5.x stacked layout)."""
        with torch.no_grad():
            self.router.proj.weight.copy_(block.gate.weight)
            gu = block.experts.gate_up_proj  # (E, 2 d_ff, d) = [gate; up]
            self.experts.w_gate.copy_(gu[:, :self.d_ff])
            self.experts.w_up.copy_(gu[:, self.d_ff:])
            self.experts.w_down.copy_(block.experts.down_proj)

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def expected_params(d: int, n_experts: int, d_ff: int, router_bias: bool = False) -> int:
    """Closed form: router E(d[+1]) + experts E · 3 d d_ff."""
    return n_experts * (d + int(router_bias)) + n_experts * 3 * d * d_ff


__all__ = ["RouterOutput", "MoEOutput", "TopKRouter", "SwiGLUExperts", "MoELayer",
           "combine_sum", "load_balancing_loss", "pool_layers", "expected_params"]
