"""The RaBitQ estimator of q·k for KV-cache keys (arXiv 2606.31519; RaBitQ,
Gao & Long, SIGMOD'24, arXiv 2405.12497).

Conventions (row vectors, every tensor [..., D]): P is a Haar-random orthogonal D×D matrix and a
vector x is rotated as x' = x @ P. Per (layer, head), prefill gives the centroids c_q (mean
query) and c_k (mean key). A key k is stored as

    r = k − c_k, n = ‖r‖, u' = (r @ P)/n, b = 1[u' > 0], ⟨x̄, u'⟩ = Σ|u'_i|/√D (= ⟨ō, o⟩),

packed bits plus the factors (n/⟨x̄, u'⟩, Σb, c_q·k). For a query q, q' = (q − c_q) @ P and

    ⟨q − c_q, k − c_k⟩ ≈ n · ⟨x̄, q'⟩ / ⟨x̄, u'⟩,        x̄ = (2b − 1)/√D,

unbiased over P (RaBitQ Thm 3.2); then q·k = ⟨q − c_q, k − c_k⟩ + q·c_k + c_q·k − c_q·c_k exactly.
The error bound (RaBitQ §3.2; constants as we read them, NV): with probability ≥ 1 − 2e^{−c0 ε0²},

    |err| ≤ n·‖q − c_q‖ · √((1 − ⟨ō,o⟩²)/⟨ō,o⟩²) · ε0/√(D − 1).

The INT4 query path quantizes q' to B_q = 4 bits (v_l = min q', Δ = (max − v_l)/15,
q_u = round((q' − v_l)/Δ)); rounding is deterministic (faiss, the vLLM fork) or randomized
(the RaBitQ paper: keeps the estimate unbiased). The binary × INT4 product runs in
`kernels.rabitq.rabitq_scores`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kernels import rabitq as K


def random_rotation(d: int, generator: torch.Generator, n: int | None = None) -> torch.Tensor:
    """Haar-random orthogonal matrix [D, D] (or [n, D, D]): QR of a Gaussian matrix with the
    signs of R's diagonal folded into Q (without that fix QR is not Haar-distributed)."""
    g = torch.randn((n or 1, d, d), generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(g)
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
    q = q.float()
    return q if n is not None else q[0]


@dataclass
class KeyCodes:
    """Encoded keys: `codes` int32 [..., N, ⌈D/32⌉], `kfac` fp32 [..., N, 3] (see kernels.rabitq),
    and ⟨ō, o⟩ and n = ‖k − c_k‖ [..., N] kept for the error bound and statistics."""
    codes: torch.Tensor
    kfac: torch.Tensor
    ip_ob: torch.Tensor
    norm: torch.Tensor

    def cat(self, other: "KeyCodes") -> "KeyCodes":
        return KeyCodes(*(torch.cat([a, b], dim=-2 if a.ndim == self.codes.ndim else -1)
                          for a, b in ((self.codes, other.codes), (self.kfac, other.kfac),
                                       (self.ip_ob, other.ip_ob), (self.norm, other.norm))))


def encode_keys(k: torch.Tensor, rot: torch.Tensor, c_k: torch.Tensor, c_q: torch.Tensor) -> KeyCodes:
    """k [..., N, D]; rot [D, D]; c_k, c_q [..., D] (broadcast over N)."""
    d = k.shape[-1]
    r = k.float() - c_k.float().unsqueeze(-2)
    norm = r.norm(dim=-1)
    ur = r @ rot
    bits = ur > 0
    # ⟨ō, o⟩ = Σ|u'_i|/√D for the unit u' = ur/n; a zero residual has no direction: any code
    # is exact (n = 0), and ⟨ō, o⟩ = 1 avoids 0/0
    ip_ob = torch.where(norm > 0, ur.abs().sum(-1) / (norm * math.sqrt(d)), torch.ones_like(norm))
    kfac = torch.stack([norm / ip_ob, bits.sum(-1).float(),
                        (k.float() * c_q.float().unsqueeze(-2)).sum(-1)], dim=-1)
    return KeyCodes(K.pack_bits_ref(bits), kfac, ip_ob, norm)


@dataclass
class QueryState:
    """A rotated, centred query: float q' [..., D], its INT4 codes and the per-query factors."""
    qr: torch.Tensor
    qu: torch.Tensor
    qfac: torch.Tensor


def quantize_query(qr: torch.Tensor, bits: int = K.QUERY_BITS, randomized: bool = False,
                   generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q' [..., D] → (q_u uint8, Δ, v_l). Deterministic round-half-even (torch.round, as
    faiss's std::round up to ties) or randomized rounding (unbiased: E[q_u] = (q' − v_l)/Δ)."""
    vl = qr.amin(-1)
    delta = (qr.amax(-1) - vl) / (2 ** bits - 1)
    delta = torch.where(delta > 0, delta, torch.ones_like(delta))
    x = (qr - vl.unsqueeze(-1)) / delta.unsqueeze(-1)
    if randomized:
        u = torch.rand(x.shape, generator=generator, dtype=x.dtype, device=x.device)
        qu = torch.floor(x + u)
    else:
        qu = torch.round(x)
    return qu.clamp(0, 2 ** bits - 1).to(torch.uint8), delta, vl


def prepare_query(q: torch.Tensor, rot: torch.Tensor, c_q: torch.Tensor, c_k: torch.Tensor,
                  randomized: bool = False, generator: torch.Generator | None = None) -> QueryState:
    """q, c_q, c_k [..., D] → QueryState with qfac = (Δ, v_l, Σq_u, q·c_k − c_q·c_k)."""
    # as a row vector, so a batch of rotations [..., D, D] pairs with a batch of queries
    qr = ((q.float() - c_q.float()).unsqueeze(-2) @ rot).squeeze(-2)
    qu, delta, vl = quantize_query(qr, randomized=randomized, generator=generator)
    qc = (q.float() * c_k.float()).sum(-1) - (c_q.float() * c_k.float()).sum(-1)
    qfac = torch.stack([delta, vl, qu.float().sum(-1), qc], dim=-1)
    return QueryState(qr, qu, qfac)


def estimate_fp(qs: QueryState, kc: KeyCodes) -> torch.Tensor:
    """Estimated q·k with the float query q': [..., N] (no query quantization)."""
    d = qs.qr.shape[-1]
    b = K.unpack_bits_ref(kc.codes)[..., :d].float()                         # [..., N, D]
    bq = (b @ qs.qr.unsqueeze(-1)).squeeze(-1)                               # ⟨b, q'⟩
    ip = (2 * bq - qs.qr.sum(-1, keepdim=True)) / math.sqrt(d)              # ⟨x̄, q'⟩
    return kc.kfac[..., 0] * ip + kc.kfac[..., 2] + qs.qfac[..., 3:4]


def estimate_int4(qs: QueryState, kc: KeyCodes) -> torch.Tensor:
    """Estimated q·k with the INT4 query, through the binary × INT4 kernel: [..., N]."""
    n, w = kc.codes.shape[-2:]
    d = qs.qu.shape[-1]                    # the true D (codes hold ⌈D/32⌉ zero-padded words)
    lead = torch.broadcast_shapes(kc.codes.shape[:-2], qs.qu.shape[:-1])   # as estimate_fp broadcasts
    est = K.rabitq_scores(kc.codes.expand(*lead, n, w).reshape(-1, n, w), qs.qu.expand(*lead, d).reshape(-1, d),
                          kc.kfac.expand(*lead, n, 3).reshape(-1, n, 3), qs.qfac.expand(*lead, 4).reshape(-1, 4), 1.0)
    return est.reshape(*lead, n)


def error_bound(qs: QueryState, kc: KeyCodes, eps0: float = 1.9) -> torch.Tensor:
    """The RaBitQ bound on |est − q·k| for the float query: [..., N]."""
    d = qs.qr.shape[-1]
    ratio = torch.sqrt((1 - kc.ip_ob ** 2).clamp_min(0)) / kc.ip_ob
    return kc.norm * qs.qr.norm(dim=-1, keepdim=True) * ratio * eps0 / math.sqrt(d - 1)
