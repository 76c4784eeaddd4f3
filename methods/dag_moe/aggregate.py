"""DAG-MoE structural aggregation over the K selected experts (arXiv 2606.01062).

Only the abstract was available: it states that a lightweight module learns, per input, a DAG
over the selected experts, with router and experts unchanged. The equations below are our
INFERRED reference design fitting that statement, per token x (d):
    (R)  s = softmax(W_r x); S = topk(s, K) sorted by score (descending) -> e_1..e_K, g_1..g_K
    (G)  a = sigmoid(W_a x + b_a),  W_a: (K(K-1)/2 × d)
    (A)  A[j,k] = a_jk for j<k, 0 otherwise     (strictly upper-triangular => acyclic)
    (M)  for k in 1..K (topological order = router rank):
             in_k = x + Σ_{j<k} A[j,k] · o_j ;  o_k = E_{e_k}(in_k)
    (Y)  y = Σ_k g_k · o_k
The router, the experts and the gates g are those of `methods.core.moe.MoELayer` (Mixtral
renormalisation by default). Round k dispatches every token's k-th expert in one batched call,
so experts still batch across tokens within a round (extra latency, same expert FLOPs).
"""
from __future__ import annotations

import math
import warnings

import torch
from torch import nn

from methods.core.moe import MoELayer, MoEOutput, combine_sum

AGGREGATIONS = ("sum", "dag")


def n_edges(k: int) -> int:
    """Number of forward edges j<k among K ranked experts: K(K-1)/2 (rows of W_a in (G))."""
    return k * (k - 1) // 2


def generator_params(d: int, k: int, bias: bool = True) -> int:
    """Closed form of the generator size: K(K-1)/2 · (d + 1) (K=2, d=64 -> 65; K=4 -> 390)."""
    return n_edges(k) * (d + int(bias))


class StructureGenerator(nn.Module):
    """Per-token edge weights A (T, K, K), strictly upper-triangular in router-rank order.

    edge_mode "soft": A = sigmoid(W_a x + b_a) on j<k ((G)-(A) in the module docstring).
    edge_mode "hard_st": forward uses 1[a > 0.5], backward the sigmoid (straight-through;
    an optional hard/ST-Gumbel variant of our design, here without Gumbel noise).
    W_a starts at `weight_init_std` (0 => every token starts with a = sigmoid(edge_bias_init));
    a pilot run used b_a = 0 (a ≈ 0.5); starting near the plain MoE (a ≈ 0.05-0.1) is the
    alternative we considered (not stated in the paper; our choice).
    """

    def __init__(self, d: int, k: int, edge_bias_init: float = 0.0,
                 weight_init_std: float = 0.0, edge_mode: str = "soft"):
        super().__init__()
        if edge_mode not in ("soft", "hard_st"):
            raise ValueError(f"edge_mode must be 'soft' or 'hard_st', got {edge_mode!r}")
        self.k, self.edge_mode = k, edge_mode
        with warnings.catch_warnings():  # K=1 has no edges: nn.Linear warns on 0-size init
            warnings.simplefilter("ignore", UserWarning)
            self.proj = nn.Linear(d, n_edges(k))  # W_a (K(K-1)/2 × d), b_a (K(K-1)/2)
        nn.init.normal_(self.proj.weight, std=weight_init_std) if weight_init_std > 0 \
            else nn.init.zeros_(self.proj.weight)
        nn.init.constant_(self.proj.bias, edge_bias_init)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[0]
        a = torch.sigmoid(self.proj(x))  # (T, K(K-1)/2), (G)
        if self.edge_mode == "hard_st":
            a = (a > 0.5).to(a.dtype) + (a - a.detach())  # exact 0/1 forward
        A = a.new_zeros(T, self.k, self.k)
        # (j, k) pairs with j < k, row-major; built per call, not a buffer: a non-persistent
        # buffer is left uninitialised when transformers loads a checkpoint on the meta device
        rows, cols = torch.triu_indices(self.k, self.k, offset=1, device=x.device)
        A[:, rows, cols] = a  # (A): only j<k entries are ever non-zero
        return A


def aggregate_sum(x: torch.Tensor, moe: MoELayer, idx: torch.Tensor, w: torch.Tensor):
    """Plain MoE (as the abstract describes it): y = Σ_{i∈S} g_i E_i(x). Returns (y, expert_out)."""
    o = moe.experts.apply_slots(x, idx)
    return combine_sum(w, o), o


def aggregate_dag(x: torch.Tensor, moe: MoELayer, idx: torch.Tensor, w: torch.Tensor,
                  A: torch.Tensor):
    """K sequential rounds over the ranked experts ((M)) and gate readout ((Y)).

    x (T, d); idx, w (T, K) router-ranked; A (T, K, K) strictly upper-triangular.
    Returns (y (T, d), expert_out (T, K, d)).
    """
    T, K = idx.shape
    outs: list[torch.Tensor] = []
    for k in range(K):  # topological order = router rank (rounds, not tokens)
        if k == 0:
            inp = x  # in_1 = x: no predecessors
        else:
            O = torch.stack(outs, dim=1)  # (T, k, d) = o_1..o_{k-1}
            # in_k = x + Σ_{j<k} A[j,k] o_j   ((M); the einsum reference)
            inp = x + torch.einsum("tj,tjd->td", A[:, :k, k].to(O.dtype), O)
        outs.append(moe.experts.run(inp, idx[:, k]))  # o_k = E_{e_k}(in_k), one batch per round
    o = torch.stack(outs, dim=1)
    return combine_sum(w, o), o  # (Y): y = Σ_k g_k o_k


class AggregatedMoE(nn.Module):
    """MoE FFN with aggregation "sum" (plain top-K MoE) or "dag" (DAG-MoE).

    forward(x (..., d), mask=None) -> MoEOutput; for "dag", extras["edges"] is A (T, K, K).
    The load-balancing loss is the router's usual one; the generator gets no extra loss (inferred; the
    abstract says nothing about it).
    """

    def __init__(self, d: int, n_experts: int, k: int, d_ff: int, aggregation: str = "dag",
                 edge_bias_init: float = 0.0, weight_init_std: float = 0.0,
                 edge_mode: str = "soft", **moe_kwargs):
        super().__init__()
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
        self.aggregation = aggregation
        self.moe = MoELayer(d, n_experts, k, d_ff, **moe_kwargs)
        self.generator = (StructureGenerator(d, k, edge_bias_init, weight_init_std, edge_mode)
                          if aggregation == "dag" else None)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> MoEOutput:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        r = self.moe.route(x2)  # (R): router unchanged
        extras = None
        if self.aggregation == "sum":
            y, o = aggregate_sum(x2, self.moe, r.topk_idx, r.topk_weights)
        else:
            A = self.generator(x2)
            y, o = aggregate_dag(x2, self.moe, r.topk_idx, r.topk_weights, A)
            extras = {"edges": A}
        return MoEOutput(y.to(x.dtype).reshape(shape), r.logits, r.probs, r.topk_idx,
                         r.topk_weights, o, self.moe.aux_loss(r, mask), extras)

    def overhead_params(self) -> int:
        return 0 if self.generator is None else sum(p.numel() for p in self.generator.parameters())


def n_binary_structures(k: int) -> int:
    """Distinct binary DAGs with a fixed topological order: 2^{K(K-1)/2} (closed form)."""
    return 2 ** n_edges(k)


def n_labelled_dags(n: int) -> int:
    """OEIS A003024 by Robinson's recurrence: a(n) = Σ_{k=1..n} (-1)^{k+1} C(n,k) 2^{k(n-k)} a(n-k)."""
    a = [1]
    for m in range(1, n + 1):
        a.append(sum((-1) ** (k + 1) * math.comb(m, k) * 2 ** (k * (m - k)) * a[m - k]
                     for k in range(1, m + 1)))
    return a[n]
