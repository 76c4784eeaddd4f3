"""Binary-key × INT4-query RaBitQ score estimate (the INT4 query path of
RaBitQCache, arXiv 2606.31519, and of RaBitQ, arXiv 2405.12497).

Layout (every function): H heads (query heads; keys already repeated over a GQA group), N keys,
head_dim D, W = ⌈D/32⌉ words per key. A D that is not a multiple of 32 (faiss's RaBitQ takes any D)
is zero-padded to whole words: the padding bits are 0 in the keys and in the query's bit-planes,
so they add nothing to popcounts or Σb, and every √D below is the true D.

- `codes`  int32 [H, N, W]: the sign bits b ∈ {0,1}^D of each rotated, centred key; bit i of
  word w is dimension 32·w + i (`pack_bits_ref`).
- `qu`     uint8 [H, D]: the rotated, centred query quantized to B_q = 4 bits,
  q_u = round((q' − v_l)/Δ) ∈ [0, 15].
- `kfac`   fp32 [H, N, 3]: per key (‖r‖/⟨x̄, u'⟩, Σb, c_q·k), r = k − c_k, u' = rotated r/‖r‖.
- `qfac`   fp32 [H, 4]:  per query (Δ, v_l, Σq_u, q·c_k − c_q·c_k).

With x̄ = (2b − 1)/√D and q̄ = Δ·q_u + v_l (the dequantized query) the identity

    ⟨x̄, q̄⟩ = (2Δ/√D)·⟨b, q_u⟩ + (2v_l/√D)·Σb − (Δ/√D)·Σq_u − √D·v_l

is exact, so the only per-key work is the integer dot ⟨b, q_u⟩ = Σ_j 2^j·popcount(b ∧ plane_j)
over the four bit-planes of q_u. The estimated logit of key n is

    ŝ_n = scale · ( kfac0·⟨x̄, q̄⟩ + kfac2 + qfac3 )

(the centred RaBitQ estimate of ⟨q − c_q, k − c_k⟩ plus the exact centroid terms).
Output fp32 [H, N]. The torch reference unpacks the bits and does a float matmul; the Triton
kernel does the popcount form. `rabitq_scores` dispatches with `kernels.use_triton`.
"""
from __future__ import annotations

import math
import sys

import torch

from kernels import use_triton

try:  # triton is optional: the references need only torch
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

QUERY_BITS = 4
if sys.byteorder != "little":  # pragma: no cover - unpack_bits_ref reads words byte by byte
    raise ImportError("kernels.rabitq assumes a little-endian host")


def _check(codes, qu, kfac, qfac):
    h, n, w = codes.shape
    if qu.ndim != 2 or qu.shape[0] != h or -(-qu.shape[1] // 32) != w:
        raise ValueError(f"qu shape {tuple(qu.shape)} does not fit codes {tuple(codes.shape)} (H, ⌈D/32⌉ = W)")
    if kfac.shape != (h, n, 3) or qfac.shape != (h, 4):
        raise ValueError(f"kfac {tuple(kfac.shape)} / qfac {tuple(qfac.shape)} do not fit codes {tuple(codes.shape)}")


# ------------------------------------------------------------------- references ----
def pack_bits_ref(bits: torch.Tensor) -> torch.Tensor:
    """{0,1} tensor [..., D] → int32 words [..., ⌈D/32⌉]; bit i of word w = element 32·w + i
    (elements past D are 0)."""
    d = bits.shape[-1]
    if d % 32:
        bits = torch.nn.functional.pad(bits.to(torch.uint8), (0, 32 - d % 32))
        d = bits.shape[-1]
    shifts = torch.arange(32, dtype=torch.int64, device=bits.device)
    words = (bits.to(torch.int64).unflatten(-1, (d // 32, 32)) << shifts).sum(-1)
    words = torch.where(words >= 2 ** 31, words - 2 ** 32, words)  # two's-complement wrap
    return words.to(torch.int32)


_BYTE_BITS = {}


def unpack_bits_ref(codes: torch.Tensor) -> torch.Tensor:
    """Inverse of `pack_bits_ref`: uint8 {0,1} [..., 32·W] (any zero padding past D included).
    Each little-endian byte of a word (bits 8j..8j+7) is looked up in a 256 × 8 table: one
    gather instead of 32 shifts."""
    lut = _BYTE_BITS.get(codes.device)
    if lut is None:
        lut = _BYTE_BITS[codes.device] = ((torch.arange(256, device=codes.device)[:, None]
                                           >> torch.arange(8, device=codes.device)) & 1).to(torch.uint8)
    by = codes.contiguous().view(torch.uint8)                    # [..., 4W] (little-endian words)
    return lut[by.long()].flatten(-2)


def rabitq_scores_ref(codes, qu, kfac, qfac, scale: float) -> torch.Tensor:
    """Estimated logits fp32 [H, N] (module docstring), by unpacking the bits."""
    _check(codes, qu, kfac, qfac)
    d = qu.shape[1]
    sd = math.sqrt(d)
    b = unpack_bits_ref(codes)[..., :d].float()                           # [H, N, D]
    dot = torch.bmm(b, qu.float().unsqueeze(-1)).squeeze(-1)              # ⟨b, q_u⟩, exact integers
    delta, vl, squ, qc = qfac.float().unbind(-1)
    ip = (2 * delta[:, None] / sd) * dot + (2 * vl[:, None] / sd) * kfac[..., 1] \
        - (delta * squ / sd + sd * vl)[:, None]
    return scale * (kfac[..., 0] * ip + kfac[..., 2] + qc[:, None])


# ---------------------------------------------------------------------- Triton ----
if triton is not None:

    @triton.jit
    def _popcount32(x):
        # SWAR popcount on uint32 (no multiply, so the interpreter's numpy runs it too)
        x = x - ((x >> 1) & 0x55555555)
        x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
        x = (x + (x >> 4)) & 0x0F0F0F0F
        x = x + (x >> 8)
        x = x + (x >> 16)
        return x & 0x3F

    @triton.jit
    def _scores_kernel(codes_ptr, planes_ptr, kfac_ptr, qfac_ptr, out_ptr, N, scale, inv_sd, sd,
                       W: tl.constexpr, WP: tl.constexpr, BLOCK_N: tl.constexpr):
        h = tl.program_id(0)
        rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        rw = tl.arange(0, WP)           # WP = W rounded up to a power of two (tl.arange's rule)
        mw = rw < W
        m = rn < N
        words = tl.load(codes_ptr + (h * N + rn[:, None]) * W + rw[None, :], mask=m[:, None] & mw[None, :], other=0)
        words = words.to(tl.uint32, bitcast=True)
        dot = tl.zeros([BLOCK_N], dtype=tl.int32)
        for j in tl.static_range(4):  # the four bit-planes of q_u
            plane = tl.load(planes_ptr + (h * 4 + j) * W + rw, mask=mw, other=0).to(tl.uint32, bitcast=True)
            pc = _popcount32(words & plane[None, :]).to(tl.int32)
            dot += tl.sum(pc, axis=1) << j
        f0 = tl.load(kfac_ptr + (h * N + rn) * 3 + 0, mask=m, other=0.0)
        f1 = tl.load(kfac_ptr + (h * N + rn) * 3 + 1, mask=m, other=0.0)
        f2 = tl.load(kfac_ptr + (h * N + rn) * 3 + 2, mask=m, other=0.0)
        delta = tl.load(qfac_ptr + h * 4 + 0)
        vl = tl.load(qfac_ptr + h * 4 + 1)
        squ = tl.load(qfac_ptr + h * 4 + 2)
        qc = tl.load(qfac_ptr + h * 4 + 3)
        ip = (2.0 * delta * inv_sd) * dot.to(tl.float32) + (2.0 * vl * inv_sd) * f1 \
            - (delta * squ * inv_sd + sd * vl)
        tl.store(out_ptr + h * N + rn, scale * (f0 * ip + f2 + qc), mask=m)


def query_planes(qu: torch.Tensor) -> torch.Tensor:
    """The 4 bit-planes of q_u [H, D] as packed words int32 [H, 4, ⌈D/32⌉]."""
    planes = torch.stack([(qu.to(torch.int32) >> j) & 1 for j in range(QUERY_BITS)], dim=1)
    return pack_bits_ref(planes)


def rabitq_scores_triton(codes, qu, kfac, qfac, scale: float) -> torch.Tensor:
    _check(codes, qu, kfac, qfac)
    h, n, w = codes.shape
    d = qu.shape[1]
    out = torch.empty((h, n), dtype=torch.float32, device=codes.device)
    block = 128
    _scores_kernel[(h, triton.cdiv(n, block))](
        codes.contiguous(), query_planes(qu).contiguous(), kfac.float().contiguous(), qfac.float().contiguous(),
        out, n, float(scale), 1.0 / math.sqrt(d), math.sqrt(d), W=w, WP=triton.next_power_of_2(w), BLOCK_N=block)
    return out


# ------------------------------------------------------------------ dispatcher ----
def rabitq_scores(codes, qu, kfac, qfac, scale: float) -> torch.Tensor:
    f = rabitq_scores_triton if use_triton(codes, qu) else rabitq_scores_ref
    return f(codes, qu, kfac, qfac, scale)
