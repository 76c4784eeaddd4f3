"""GPTQ (Frantar et al., ICLR 2023, Alg. 1) on one weight matrix, group-wise asymmetric.

Columns are quantized in order; after column q the not-yet-quantized columns absorb its error,
δ_F = −(w_q − quant(w_q)) / [H⁻¹]_qq · (H⁻¹)_{q,F}, with H = 2XXᵀ (damped by `percdamp` of its
mean diagonal). The rows of the upper Cholesky factor of H⁻¹ are exactly the [H⁻¹]_{q,F} of the
successively reduced inverses (paper §3.3), so no inverse is updated; updates to columns
outside the current block of `block_size` are applied lazily, once per block (§3.2).

Group parameters are computed when the first column of a group is reached, from the group's
current (already updated) weights. The reference code reads them from the matrix as it was at
the start of the lazy block, which differs for groups that start inside a block; ours is the
column-by-column algorithm exactly (tests/lfq/test_quantizer.py checks it against a direct OBQ loop).
With `act_order`, columns go in order of decreasing H_qq and the group parameters are fixed from
the unmodified weights up front ("static groups"), so groups stay contiguous for packing.
"""
from __future__ import annotations

import torch

from .quantizer import group_params


def _quant_col(w, h, z, bits):
    return torch.clamp(torch.round(w * (1.0 / h)) + z, 0, 2 ** bits - 1)


def gptq_quantize(w: torch.Tensor, hess: torch.Tensor, bits: int, group_size: int,
                  block_size: int = 128, percdamp: float = 0.01, act_order: bool = False):
    """(codes uint8 [N, K], h, z [N, K // group_size]) of W [N, K] given H [K, K]."""
    w = w.detach().double().clone()
    hess = hess.detach().double().clone()
    n, k = w.shape
    if k % group_size:
        raise ValueError(f"in_features {k} is not a multiple of group_size {group_size}")
    block_size = max(group_size, block_size // group_size * group_size)  # groups never straddle blocks
    dead = torch.diag(hess) == 0
    hess[dead, dead] = 1.0
    w[:, dead] = 0.0
    h_all = torch.zeros(n, k // group_size, dtype=torch.double)
    z_all = torch.zeros_like(h_all)
    if act_order:
        h_all, z_all = group_params(w, bits, group_size)
        perm = torch.argsort(torch.diag(hess), descending=True)
    else:
        perm = torch.arange(k)
    w, hess = w[:, perm], hess[perm][:, perm]
    hess += percdamp * torch.mean(torch.diag(hess)) * torch.eye(k, dtype=torch.double)
    hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(hess)), upper=True)
    q_all = torch.zeros_like(w)
    for i1 in range(0, k, block_size):
        i2 = min(i1 + block_size, k)
        w1, err1, hinv1 = w[:, i1:i2].clone(), torch.zeros(n, i2 - i1, dtype=torch.double), hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            col = int(perm[i1 + i])
            g = col // group_size
            if not act_order and col % group_size == 0:
                h_all[:, g], z_all[:, g] = [t[:, 0] for t in group_params(w1[:, i:i + group_size], bits, group_size)]
            q = _quant_col(w1[:, i], h_all[:, g], z_all[:, g], bits)
            q_all[:, i1 + i] = q
            err = (w1[:, i] - (q - z_all[:, g]) * h_all[:, g]) / hinv1[i, i]
            w1[:, i:] -= err[:, None] * hinv1[i, i:][None, :]
            err1[:, i] = err
        w[:, i2:] -= err1 @ hinv[i1:i2, i2:]  # the lazy batch update (§3.2)
    codes = torch.empty_like(q_all)
    codes[:, perm] = q_all
    return codes.to(torch.uint8), h_all.float(), z_all.float()
