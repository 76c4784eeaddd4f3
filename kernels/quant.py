"""Group-wise weight quantization kernels (the OmniQuant-style weight quantizer of LFQ,
arXiv 2605.29756).

Layout (every function): a weight W is [N, K] (out × in, nn.Linear's), quantized asymmetrically
in groups of `group_size` consecutive input columns; `scale` and `zero` are [N, K // group_size]
float32, `zero` holding integers (OmniQuant/GPTQ round the zero point), and

    q = clamp(round(W · (1/scale)) + zero, 0, 2^bits − 1),   Ŵ = (q − zero) · scale.

`round` is round-half-to-even and the division is a multiplication by the float32 reciprocal,
exactly what torch.fake_quantize_per_channel_affine computes, so the two agree bit for bit.

Packing stores q in int32 words along the input dimension, `32 // bits` codes per word, code i of
a word in bits [i·bits, (i+1)·bits); 3-bit codes go in 4-bit slots (bits must divide 32: 2, 4, 8
are dense; `slot_bits` maps 3 → 4).

Every Triton kernel has a pure-torch reference with the same signature (`*_ref`); the public
functions dispatch with `kernels.use_triton` (Triton on CUDA, or anywhere under
TRITON_INTERPRET=1; the reference otherwise).
"""
from __future__ import annotations

import torch

from kernels import use_triton

try:  # triton is optional: the references need only torch
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - the CPU env has triton; a minimal env may not
    triton = None


def slot_bits(bits: int) -> int:
    """Bits of the storage slot of a `bits`-bit code (3-bit codes are stored as 4-bit)."""
    if bits not in (2, 3, 4, 8):
        raise ValueError(f"bits must be 2, 3, 4 or 8, got {bits}")
    return 4 if bits == 3 else bits


def _check(w: torch.Tensor, scale: torch.Tensor, group_size: int) -> None:
    n, k = w.shape
    if k % group_size:
        raise ValueError(f"input dim {k} is not a multiple of group_size {group_size}")
    if tuple(scale.shape) != (n, k // group_size):
        raise ValueError(f"scale shape {tuple(scale.shape)} != {(n, k // group_size)}")


# ------------------------------------------------------------------- references ----
def quantize_ref(w, scale, zero, bits: int, group_size: int) -> torch.Tensor:
    """Integer codes q (uint8) of W."""
    _check(w, scale, group_size)
    inv = (1.0 / scale.float()).repeat_interleave(group_size, dim=1)
    z = zero.float().repeat_interleave(group_size, dim=1)
    return torch.clamp(torch.round(w.float() * inv) + z, 0, 2 ** bits - 1).to(torch.uint8)


def dequantize_ref(q, scale, zero, group_size: int) -> torch.Tensor:
    """Ŵ = (q − zero) · scale, float32."""
    _check(q, scale, group_size)
    s = scale.float().repeat_interleave(group_size, dim=1)
    z = zero.float().repeat_interleave(group_size, dim=1)
    return (q.float() - z) * s


def pack_ref(q, bits: int) -> torch.Tensor:
    """int32 words [N, K // (32 // slot)] holding the codes q [N, K]."""
    slot = slot_bits(bits)
    per = 32 // slot
    n, k = q.shape
    if k % per:
        raise ValueError(f"input dim {k} is not a multiple of {per} codes per word")
    shifts = torch.arange(per, dtype=torch.int64) * slot
    words = (q.to(torch.int64).view(n, k // per, per) << shifts).sum(-1)
    words = torch.where(words >= 2 ** 31, words - 2 ** 32, words)  # two's-complement wrap
    return words.to(torch.int32)


def unpack_ref(packed, bits: int, k: int) -> torch.Tensor:
    """Inverse of `pack_ref`: codes [N, k] (uint8)."""
    slot = slot_bits(bits)
    per = 32 // slot
    shifts = torch.arange(per, dtype=torch.int64) * slot
    codes = (packed.to(torch.int64).unsqueeze(-1) >> shifts) & (2 ** slot - 1)
    return codes.reshape(packed.shape[0], -1)[:, :k].to(torch.uint8)


def dequant_matmul_ref(x, packed, scale, zero, bits: int, group_size: int) -> torch.Tensor:
    """x [M, K] @ Ŵᵀ with Ŵ [N, K] unpacked and dequantized from `packed`: [M, N] float32."""
    w = dequantize_ref(unpack_ref(packed, bits, x.shape[1]), scale, zero, group_size)
    return x.float() @ w.t()


# ---------------------------------------------------------------------- Triton ----
if triton is not None:

    @triton.jit
    def _round_half_even(x):
        # tl has no rint that the interpreter also runs: floor(x + ½), minus one on exact ties
        # whose result is odd (IEEE round-to-nearest-even, as torch.round and nearbyint)
        r = tl.floor(x + 0.5)
        tie = (r - x) == 0.5
        odd = (r - 2.0 * tl.floor(r * 0.5)) == 1.0
        return tl.where(tie & odd, r - 1.0, r)

    @triton.jit
    def _quantize_kernel(w_ptr, s_ptr, z_ptr, q_ptr, N, K, G, QMAX: tl.constexpr,
                         GROUP: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        m = cols < K
        w = tl.load(w_ptr + row * K + cols, mask=m, other=0.0).to(tl.float32)
        s = tl.load(s_ptr + row * G + cols // GROUP, mask=m, other=1.0)
        z = tl.load(z_ptr + row * G + cols // GROUP, mask=m, other=0.0)
        q = _round_half_even(w * (1.0 / s)) + z
        q = tl.minimum(tl.maximum(q, 0.0), QMAX)
        tl.store(q_ptr + row * K + cols, q.to(tl.uint8), mask=m)

    @triton.jit
    def _dequantize_kernel(q_ptr, s_ptr, z_ptr, w_ptr, N, K, G, GROUP: tl.constexpr,
                           BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        m = cols < K
        q = tl.load(q_ptr + row * K + cols, mask=m, other=0).to(tl.float32)
        s = tl.load(s_ptr + row * G + cols // GROUP, mask=m, other=1.0)
        z = tl.load(z_ptr + row * G + cols // GROUP, mask=m, other=0.0)
        tl.store(w_ptr + row * K + cols, (q - z) * s, mask=m)

    @triton.jit
    def _pack_kernel(q_ptr, p_ptr, K, NW, SLOT: tl.constexpr, PER: tl.constexpr,
                     BLOCK: tl.constexpr):
        row = tl.program_id(0)
        words = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        m = words < NW
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for i in tl.static_range(PER):
            v = tl.load(q_ptr + row * K + words * PER + i, mask=m, other=0).to(tl.int32)
            acc = acc | (v << (i * SLOT))
        tl.store(p_ptr + row * NW + words, acc, mask=m)

    @triton.jit
    def _dequant_matmul_kernel(x_ptr, p_ptr, s_ptr, z_ptr, y_ptr, M, N, K, NW, G,
                               SLOT: tl.constexpr, PER: tl.constexpr, GROUP: tl.constexpr,
                               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        acc = tl.zeros([BM, BN], dtype=tl.float32)
        for k0 in range(0, K, BK):
            rk = k0 + tl.arange(0, BK)
            x = tl.load(x_ptr + rm[:, None] * K + rk[None, :],
                        mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0).to(tl.float32)
            wm = (rk[:, None] < K) & (rn[None, :] < N)
            # Ŵᵀ tile [BK, BN]: the word holding code k of row n, shifted and masked
            word = tl.load(p_ptr + rn[None, :] * NW + rk[:, None] // PER, mask=wm, other=0)
            q = ((word >> ((rk[:, None] % PER) * SLOT)) & ((1 << SLOT) - 1)).to(tl.float32)
            g = rn[None, :] * G + rk[:, None] // GROUP
            s = tl.load(s_ptr + g, mask=wm, other=0.0)
            z = tl.load(z_ptr + g, mask=wm, other=0.0)
            acc += tl.dot(x, (q - z) * s, input_precision="ieee")
        tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def quantize_triton(w, scale, zero, bits: int, group_size: int) -> torch.Tensor:
    _check(w, scale, group_size)
    n, k = w.shape
    q = torch.empty((n, k), dtype=torch.uint8, device=w.device)
    block = 128
    _quantize_kernel[(n, triton.cdiv(k, block))](
        w.contiguous(), scale.float().contiguous(), zero.float().contiguous(), q, n, k,
        k // group_size, QMAX=float(2 ** bits - 1), GROUP=group_size, BLOCK=block)
    return q


def dequantize_triton(q, scale, zero, group_size: int) -> torch.Tensor:
    _check(q, scale, group_size)
    n, k = q.shape
    w = torch.empty((n, k), dtype=torch.float32, device=q.device)
    block = 128
    _dequantize_kernel[(n, triton.cdiv(k, block))](
        q.contiguous(), scale.float().contiguous(), zero.float().contiguous(), w, n, k,
        k // group_size, GROUP=group_size, BLOCK=block)
    return w


def pack_triton(q, bits: int) -> torch.Tensor:
    slot = slot_bits(bits)
    per = 32 // slot
    n, k = q.shape
    if k % per:
        raise ValueError(f"input dim {k} is not a multiple of {per} codes per word")
    nw = k // per
    out = torch.empty((n, nw), dtype=torch.int32, device=q.device)
    block = 64
    _pack_kernel[(n, triton.cdiv(nw, block))](q.contiguous(), out, k, nw, SLOT=slot, PER=per, BLOCK=block)
    return out


def dequant_matmul_triton(x, packed, scale, zero, bits: int, group_size: int) -> torch.Tensor:
    slot = slot_bits(bits)
    m, k = x.shape
    n = packed.shape[0]
    if k % group_size or tuple(scale.shape) != (n, k // group_size):
        raise ValueError(f"scale shape {tuple(scale.shape)} does not fit K={k}, group_size={group_size}")
    y = torch.empty((m, n), dtype=torch.float32, device=x.device)
    bm, bn, bk = 16, 32, 32
    _dequant_matmul_kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn))](
        x.contiguous(), packed.contiguous(), scale.float().contiguous(), zero.float().contiguous(), y,
        m, n, k, packed.shape[1], k // group_size, SLOT=slot, PER=32 // slot, GROUP=group_size,
        BM=bm, BN=bn, BK=bk)
    return y


# ------------------------------------------------------------------ dispatchers ----
def quantize(w, scale, zero, bits: int, group_size: int) -> torch.Tensor:
    f = quantize_triton if use_triton(w) else quantize_ref
    return f(w, scale, zero, bits, group_size)


def dequantize(q, scale, zero, group_size: int) -> torch.Tensor:
    f = dequantize_triton if use_triton(q) else dequantize_ref
    return f(q, scale, zero, group_size)


def pack(q, bits: int) -> torch.Tensor:
    return (pack_triton if use_triton(q) else pack_ref)(q, bits)


def unpack(packed, bits: int, k: int) -> torch.Tensor:
    return unpack_ref(packed, bits, k)  # only the fused dequant-matmul unpacks on the GPU


def dequant_matmul(x, packed, scale, zero, bits: int, group_size: int) -> torch.Tensor:
    f = dequant_matmul_triton if use_triton(x, packed) else dequant_matmul_ref
    return f(x, packed, scale, zero, bits, group_size)
