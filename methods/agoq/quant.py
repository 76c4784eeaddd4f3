"""Quantizers of AGoQ (arXiv 2605.00539): group-wise asymmetric min-max codes for saved activations
(LAAQ) and block-wise symmetric int8 codes for gradients (QuanGrad).

Asymmetric (activations; the abstract gives no format, so this min-max quantizer is our inferred
design), per group of G consecutive
elements of the flattened tensor:

    s = (max − min) / (2^b − 1),  z = round(−min / s),  q = clamp(round(x / s) + z, 0, 2^b − 1),
    x̂ = (q − z) · s.

s and z are stored in bf16 (z is an integer ≤ 255, exact in bf16). s is rounded *up* to bf16
when rounding to nearest would shrink it, so (2^b − 1)·s still covers the group's range and the
round-to-nearest error stays |x − x̂| ≤ s/2 (proof: x/s + z lies in [−½, 2^b − ½]). Codes of
2 and 4 bits are packed 4 and 2 per byte (code i of a byte in bits [i·b, (i+1)·b)). Stochastic
rounding uses floor(x/s + U[0, 1)), which makes x̂ unbiased (with a grid that needs no clamp, see
`minmax_params`).

Symmetric (gradients; implementations in common use differ on the divisor of the block maximum,
7 or 7.5 at 4 bits). We use the divisor 2^(b−1) − 1, i.e. 127 at
8 bits and **7 at 4 bits**: s = max|x| / 7, q = clamp(round(x / s), −7, 7) (the code −8 is
unused, so the grid is symmetric and 0 is exact). The alternative divisor 7.5 uses all 16 codes
with an offset grid; we do not. |x − x̂| ≤ s/2 for every element. Scales are fp32, one per block.

`round` is torch.round (half to even) everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

BF16_ULP = 2.0 ** -7  # relative spacing of bf16 (8 significant bits)


def _bf16_round_up(s: torch.Tensor) -> torch.Tensor:
    """s in bf16, never below s (then returned as float32)."""
    b = s.to(torch.bfloat16).float()
    low = b < s
    # for a bf16 value v, v·(1 + 2^-7) rounds to v + 1 or 2 ulps: ≥ s since s < v + ulp
    return torch.where(low, (b * (1 + BF16_ULP)).to(torch.bfloat16).float(), b)


def _groups(x: torch.Tensor, group: int) -> tuple[torch.Tensor, int]:
    flat = x.detach().reshape(-1).float()
    n = flat.numel()
    pad = (-n) % group
    if pad:  # zero padding widens the last group's range at most; it is dropped on dequantize
        flat = torch.cat([flat, flat.new_zeros(pad)])
    return flat.view(-1, group), n


def pack_codes(q: torch.Tensor, bits: int) -> torch.Tensor:
    """uint8 codes (flat) → bytes holding 8 // bits codes each."""
    if bits == 8:
        return q.reshape(-1).to(torch.uint8)
    per = 8 // bits
    q = q.reshape(-1).to(torch.uint8)
    pad = (-q.numel()) % per
    if pad:
        q = torch.cat([q, q.new_zeros(pad)])
    q = q.view(-1, per)
    out = q[:, 0].clone()
    for i in range(1, per):
        out |= q[:, i] << (i * bits)
    return out


def unpack_codes(packed: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    if bits == 8:
        return packed[:n]
    per = 8 // bits
    mask = (1 << bits) - 1
    cols = [(packed >> (i * bits)) & mask for i in range(per)]
    return torch.stack(cols, 1).reshape(-1)[:n]


@dataclass
class Packed:
    """A quantized tensor: packed codes, bf16 scale and zero per group, and what to restore."""
    codes: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor
    bits: int
    group: int
    shape: tuple
    dtype: torch.dtype

    @property
    def nbytes(self) -> int:
        """Bytes really held (the three tensors' storage)."""
        return sum(t.untyped_storage().nbytes() for t in (self.codes, self.scale, self.zero))


def minmax_params(g: torch.Tensor, bits: int, stochastic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, zero) per row of groups g [n_groups, G], as float32 holding bf16 values.

    Stochastic rounding needs every x/s + z inside [0, 2^b − 1] (a clamp would bias it), which the
    rounded integer zero point does not give: then s = range/(2^b − 2) and z = ceil(−min/s), so
    x/s + z ∈ [0, range/s + 1) ⊂ [0, 2^b − 1]. One level of resolution is the price."""
    lo, hi = g.amin(1), g.amax(1)  # (14× faster than torch.aminmax(dim=1) on CPU)
    s = (hi - lo) / (2 ** bits - (2 if stochastic else 1))
    s = torch.where(s > 0, s, torch.ones_like(s))  # a constant group: any scale is exact
    s = _bf16_round_up(s)
    z = torch.ceil(-lo / s) if stochastic else torch.round(-lo / s)
    return s, z


def group_quant(x: torch.Tensor, bits: int, group: int = 128, stochastic: bool = False,
                generator: torch.Generator | None = None) -> Packed:
    if bits not in (2, 4, 8):
        raise ValueError(f"bits must be 2, 4 or 8, got {bits}")
    g, n = _groups(x, group)
    s, z = minmax_params(g, bits, stochastic)
    v = g / s[:, None]
    if stochastic:
        v.add_(torch.rand(v.shape, generator=generator, device=v.device)).floor_()
    else:
        v.round_()
    q = v.add_(z[:, None]).clamp_(0, 2 ** bits - 1)
    return Packed(pack_codes(q, bits), s.to(torch.bfloat16), z.to(torch.bfloat16), bits, group,
                  tuple(x.shape), x.dtype)


def group_dequant(p: Packed) -> torch.Tensor:
    n = 1
    for d in p.shape:
        n *= d
    q = unpack_codes(p.codes, p.bits, p.scale.numel() * p.group).view(-1, p.group).float()
    q.sub_(p.zero.float()[:, None]).mul_(p.scale.float()[:, None])  # x̂ = (q − z)·s, in place
    return q.view(-1)[:n].view(p.shape).to(p.dtype)


# ------------------------------------------------------------- symmetric (gradients) ----
def sym_divisor(bits: int) -> int:
    """2^(b−1) − 1: 7 at 4 bits, 127 at 8 bits (we pick 7, not the 7.5 some libraries use)."""
    return 2 ** (bits - 1) - 1


def sym_quant(x: torch.Tensor, bits: int = 8, block: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 codes [n_blocks·block], fp32 scales [n_blocks]) of the flattened x (zero-padded)."""
    g, _ = _groups(x, block)
    qmax = sym_divisor(bits)
    s = g.abs().amax(1) / qmax
    s = torch.where(s > 0, s, torch.ones_like(s))
    q = torch.clamp(torch.round(g / s[:, None]), -qmax, qmax).to(torch.int8)
    return q.reshape(-1), s


def sym_dequant(q: torch.Tensor, s: torch.Tensor, n: int | None = None) -> torch.Tensor:
    x = (q.view(s.numel(), -1).float() * s[:, None]).reshape(-1)
    return x if n is None else x[:n]
