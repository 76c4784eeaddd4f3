"""The weight quantizer of every baseline (OmniQuant, ICLR 2024, and its code
OpenGVLab/OmniQuant): asymmetric, `bits` bits, groups of
`group_size` input columns per output row, with OmniQuant's learnable weight clipping (LWC).

    x_max = σ(γ)·max(W_G), x_min = σ(β)·min(W_G)          (RTN: σ = 1, no clipping)
    h = clamp((x_max − x_min)/(2^N − 1), 1e−5, 1e4),  z = round(−x_min/h)
    Ŵ = (clamp(round_ste(W/h) + z, 0, 2^N − 1) − z)·h

W/h is computed as W·(1/h) in float32, torch.fake_quantize_per_channel_affine's arithmetic, so
RTN equals that op bit for bit (tests/lfq/test_quantizer.py). The zero point is rounded without
a straight-through gradient, as in OmniQuant's code; γ, β still learn through h.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from kernels import quant as kq

LWC_INIT = 4.0  # σ(4) = 0.982 (OmniQuant code's LWC init)


def round_ste(x: torch.Tensor) -> torch.Tensor:
    """round in the forward pass, identity in the backward pass."""
    return x + (torch.round(x) - x).detach()


def group_params(w: torch.Tensor, bits: int, group_size: int, gamma=None, beta=None):
    """(h, z), each [N, K // group_size]; γ, β (same shape) clip the range through σ."""
    n, k = w.shape
    wg = w.reshape(n, k // group_size, group_size)
    xmax, xmin = wg.amax(-1), wg.amin(-1)
    if gamma is not None:
        xmax, xmin = torch.sigmoid(gamma) * xmax, torch.sigmoid(beta) * xmin
    h = ((xmax - xmin) / (2 ** bits - 1)).clamp(1e-5, 1e4)
    z = (-xmin / h).clamp(-1e4, 1e4).round()
    return h, z


def fake_quant(w: torch.Tensor, h: torch.Tensor, z: torch.Tensor, bits: int, group_size: int) -> torch.Tensor:
    """Ŵ with a straight-through round (differentiable in h, hence in γ, β)."""
    n, k = w.shape
    wg = w.reshape(n, k // group_size, group_size)
    q = torch.clamp(round_ste(wg * (1.0 / h)[..., None]) + z[..., None], 0, 2 ** bits - 1)
    return ((q - z[..., None]) * h[..., None]).reshape(n, k)


def codes(w: torch.Tensor, h: torch.Tensor, z: torch.Tensor, bits: int, group_size: int) -> torch.Tensor:
    """Integer codes of W (uint8); the kernel (or its reference) does the arithmetic."""
    return kq.quantize(w.detach().float().contiguous(), h.detach(), z.detach(), bits, group_size)


def rtn(w: torch.Tensor, bits: int, group_size: int):
    """Round-to-nearest: (codes, h, z) with the full min/max range (γ = β = +∞)."""
    h, z = group_params(w.float(), bits, group_size)
    return codes(w, h, z, bits, group_size), h, z


class LWCLinear(nn.Module):
    """A frozen nn.Linear weight quantized on the fly with learnable clipping γ, β."""

    def __init__(self, linear: nn.Linear, bits: int, group_size: int):
        super().__init__()
        w = linear.weight.detach().float()
        if w.shape[1] % group_size:
            raise ValueError(f"in_features {w.shape[1]} is not a multiple of group_size {group_size}")
        self.register_buffer("weight", w)
        self.bias = None if linear.bias is None else linear.bias.detach()
        self.bits, self.group_size = bits, group_size
        shape = (w.shape[0], w.shape[1] // group_size)
        self.gamma = nn.Parameter(torch.full(shape, LWC_INIT))
        self.beta = nn.Parameter(torch.full(shape, LWC_INIT))

    def params(self):
        return group_params(self.weight, self.bits, self.group_size, self.gamma, self.beta)

    def forward(self, x):
        h, z = self.params()
        return F.linear(x, fake_quant(self.weight, h, z, self.bits, self.group_size).to(x.dtype), self.bias)

    @torch.no_grad()
    def export(self):
        h, z = self.params()
        return codes(self.weight, h, z, self.bits, self.group_size), h, z
