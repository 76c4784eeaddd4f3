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
(the RaBitQ paper: keeps the estimate unbiased). The binary × INT4 product runs in the Triton
kernel `kernels.rabitq.rabitq_scores` where Triton dispatches (CUDA, or TRITON_INTERPRET=1) and
on the CPU in `rabitq_scores_popcount` here: the integer dot ⟨b, q_u⟩ = Σ_j 2^j·popcount(b ∧ q_j)
read straight from the packed words (numpy's `bitwise_count`, numpy ≥ 2.0), then the same affine
as `kernels.rabitq.rabitq_scores_ref` in the same fp32 operation order, so the estimates equal the
unpacking reference bit for bit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from kernels import rabitq as K, use_triton


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


# ------------------------------------------------------- CPU popcount path ----
def popcount_words(codes: torch.Tensor) -> np.ndarray:
    """int32 codes [..., W] (`kernels.rabitq.pack_bits_ref` layout) as the words popcount reads,
    without a copy for contiguous codes: uint64 [..., W/2] when W is even (little-endian: word k
    holds dimensions 64k … 64k + 63, bit i of the word is dimension 64k + i), else uint32 [..., W]
    (bit i of word k is dimension 32k + i). Bits past D stay as packed (zero)."""
    a = codes.detach().contiguous().numpy()
    if a.dtype != np.int32:
        raise ValueError(f"codes must be int32, got {a.dtype}")
    return a.view(np.uint64) if a.shape[-1] % 2 == 0 else a.view(np.uint32)


def pack_bits64(bits: torch.Tensor) -> np.ndarray:
    """{0,1} [..., D] → uint64 words [..., ⌈D/64⌉]; bit i of word k = element 64k + i, bits past
    D zero. The same words as `popcount_words(kernels.rabitq.pack_bits_ref(bits))` for even W."""
    a = np.asarray(bits.detach().to(torch.bool).numpy())
    d = a.shape[-1]
    pad = -d % 64
    if pad:
        a = np.concatenate([a, np.zeros(a.shape[:-1] + (pad,), dtype=bool)], axis=-1)
    by = np.packbits(a, axis=-1, bitorder="little")                # [..., 8·⌈D/64⌉] bytes
    return np.ascontiguousarray(by).view("<u8").astype(np.uint64, copy=False)


def unpack_bits64(words: np.ndarray, d: int) -> torch.Tensor:
    """Inverse of `pack_bits64` (also reads `popcount_words`' uint32 words): uint8 {0,1} [..., D]."""
    w = np.ascontiguousarray(words)
    by = w.astype(w.dtype.newbyteorder("<"), copy=False).view(np.uint8)
    return torch.from_numpy(np.unpackbits(by, axis=-1, count=d, bitorder="little").copy())


def _query_planes(qu: torch.Tensor, word: np.dtype) -> np.ndarray:
    """The 4 bit-planes of q_u [H, D] packed as `word` (uint64 or uint32) [H, 4, ⌈D/bits⌉],
    bit i of word k = dimension bits·k + i, zero past D: `kernels.rabitq.query_planes` in
    `popcount_words`' layout, by numpy's packbits (the torch packer costs ~0.3 ms per call)."""
    q = qu.detach().to(torch.uint8).numpy()
    nbits = 8 * np.dtype(word).itemsize
    pl = (q[:, None, :] >> np.arange(K.QUERY_BITS, dtype=np.uint8)[:, None]) & 1   # [H, 4, D]
    pad = -q.shape[-1] % nbits
    if pad:
        pl = np.concatenate([pl, np.zeros(pl.shape[:-1] + (pad,), dtype=np.uint8)], axis=-1)
    by = np.ascontiguousarray(np.packbits(pl, axis=-1, bitorder="little"))
    return by.view(np.dtype(word).newbyteorder("<")).astype(word, copy=False)


def _popcount_blocks(codes: torch.Tensor, qu: torch.Tensor, chunk: int):
    """Yield (key slice, ⟨b, q_u⟩ [H, m] as uint16 or int32) over blocks of about `chunk`
    (head, key) pairs; see `binary_int4_dot`. The temporaries are allocated once and stay in
    cache; each block's words are first transposed to word-major [Wk, H, m] so every AND and
    popcount runs over contiguous memory."""
    h, n, _ = codes.shape
    d = qu.shape[-1]
    top = 2 ** K.QUERY_BITS - 1
    if top * d >= 2 ** 24:
        raise ValueError(f"⟨b, q_u⟩ ≤ {top * d} does not fit fp32 exactly")
    words = popcount_words(codes)                                     # [H, N, Wk]
    nw = words.shape[-1]
    planes = _query_planes(qu, words.dtype)                           # [H, 4, Wk]
    planes = np.ascontiguousarray(planes.transpose(2, 1, 0))[..., None]  # [Wk, 4, H, 1]
    acc_t = np.uint16 if top * d < 2 ** 16 else np.int32              # half the traffic of int32
    c = max(1, min(n, chunk // max(h, 1)))
    wt = np.empty((nw, h, c), dtype=words.dtype)
    tmp = np.empty((h, c), dtype=words.dtype)
    pc, sums = np.empty((h, c), dtype=acc_t), np.empty((K.QUERY_BITS, h, c), dtype=acc_t)
    for c0 in range(0, n, c):
        m = min(c, n - c0)
        wm, tm, pm, sm = wt[:, :, :m], tmp[:, :m], pc[:, :m], sums[:, :, :m]
        np.copyto(wm, words[:, c0:c0 + m].transpose(2, 0, 1))
        for j in range(K.QUERY_BITS):
            for w in range(nw):
                np.bitwise_and(wm[w], planes[w, j], out=tm)             # b_w ∧ plane_{j,w}
                np.bitwise_count(tm, out=sm[j] if w == 0 else pm)
                if w:
                    sm[j] += pm                                       # s_j = Σ_w popcount
        acc = sm[K.QUERY_BITS - 1]
        for j in reversed(range(K.QUERY_BITS - 1)):                  # Horner: Σ_j 2^j s_j
            acc <<= 1
            acc += sm[j]
        yield slice(c0, c0 + m), acc


def binary_int4_dot(codes: torch.Tensor, qu: torch.Tensor, dtype: torch.dtype = torch.int32,
                    chunk: int = 1 << 16) -> torch.Tensor:
    """The exact integer ⟨b, q_u⟩ [H, N] from packed key bits codes int32 [H, N, ⌈D/32⌉] and
    q_u uint8 [H, D] ∈ [0, 15]: Σ_j 2^j·Σ_w popcount(b_w ∧ plane_{j,w}) over the 4 bit-planes of
    q_u, packed in the same word layout (`kernels.rabitq.query_planes`: bits past D are zero, so
    key bits past D, whatever they hold, add nothing). One AND + popcount per (plane, word); the
    plane sums are combined by Horner's rule ((s3·2 + s2)·2 + s1)·2 + s0. Keys are taken in
    blocks of about `chunk` (head, key) pairs. `dtype` int32 or float32 (exact: ≤ 15·D < 2^24)."""
    if dtype not in (torch.int32, torch.float32):
        raise ValueError(f"dtype {dtype}: int32 or float32")
    h, n, _ = codes.shape
    out = np.empty((h, n), dtype=np.int32 if dtype == torch.int32 else np.float32)
    for sl, acc in _popcount_blocks(codes, qu, chunk):
        out[:, sl] = acc
    return torch.from_numpy(out)


def rabitq_scores_popcount(codes, qu, kfac, qfac, scale: float, chunk: int = 1 << 16) -> torch.Tensor:
    """`kernels.rabitq.rabitq_scores_ref` (same signature, same output) on the CPU without
    unpacking: per block of keys the integer dot by popcount (`binary_int4_dot`), then the
    reference's affine with the same fp32 operations in the same order (the dot is an exact
    integer < 2^24 in fp32 in both; each +, −, × is correctly rounded in fp32 in numpy as in
    torch; a·b = b·a exactly), so the two agree bit for bit (tests/rabitqcache/test_popcount.py)."""
    K._check(codes, qu, kfac, qfac)
    h, n, _ = codes.shape
    sd = math.sqrt(qu.shape[1])
    delta, vl, squ, qc = qfac.float().unbind(-1)
    # the reference's per-query fp32 factors, computed by the same torch ops
    a_ = (2 * delta[:, None] / sd).numpy()                      # × ⟨b, q_u⟩
    b_ = (2 * vl[:, None] / sd).numpy()                         # × Σb
    c_ = (delta * squ / sd + sd * vl)[:, None].numpy()          # subtracted
    qc_ = qc[:, None].numpy()
    kf = kfac.detach().float().contiguous().numpy()             # [H, N, 3]
    sc = np.float32(scale)         # torch's fp32 kernels also round a Python scalar to fp32 first
    out = np.empty((h, n), dtype=np.float32)
    c = max(1, min(n, chunk // max(h, 1)))
    kft = np.empty((3, h, c), dtype=np.float32)                 # the block's factors, column-major
    for sl, dot in _popcount_blocks(codes, qu, chunk):
        ip, ft = out[:, sl], kft[:, :, :sl.stop - sl.start]
        np.copyto(ft, kf[:, sl].transpose(2, 0, 1))
        np.multiply(dot, a_, out=ip)                            # (2Δ/√D)·⟨b, q_u⟩
        ft[1] *= b_                                             # (2v_l/√D)·Σb
        ip += ft[1]
        ip -= c_                                                # − (Δ·Σq_u/√D + √D·v_l)
        ip *= ft[0]                                             # kfac0·ip
        ip += ft[2]                                             # + kfac2
        ip += qc_                                               # + qfac3
        ip *= sc                                                # scale·(…)
    return torch.from_numpy(out)


def int4_scores(codes, qu, kfac, qfac, scale: float) -> torch.Tensor:
    """The method's binary × INT4 scorer: the Triton kernel where `kernels.use_triton` picks it,
    the popcount path on CPU tensors, the unpacking reference otherwise (CUDA without Triton)."""
    if use_triton(codes, qu):
        return K.rabitq_scores_triton(codes, qu, kfac, qfac, scale)
    if codes.device.type == "cpu":
        return rabitq_scores_popcount(codes, qu, kfac, qfac, scale)
    return K.rabitq_scores_ref(codes, qu, kfac, qfac, scale)


def estimate_int4(qs: QueryState, kc: KeyCodes) -> torch.Tensor:
    """Estimated q·k with the INT4 query, through the binary × INT4 scorer (`int4_scores`): [..., N]."""
    n, w = kc.codes.shape[-2:]
    d = qs.qu.shape[-1]                    # the true D (codes hold ⌈D/32⌉ zero-padded words)
    lead = torch.broadcast_shapes(kc.codes.shape[:-2], qs.qu.shape[:-1])   # as estimate_fp broadcasts
    est = int4_scores(kc.codes.expand(*lead, n, w).reshape(-1, n, w), qs.qu.expand(*lead, d).reshape(-1, d),
                      kc.kfac.expand(*lead, n, 3).reshape(-1, n, 3), qs.qfac.expand(*lead, 4).reshape(-1, 4), 1.0)
    return est.reshape(*lead, n)


def error_bound(qs: QueryState, kc: KeyCodes, eps0: float = 1.9) -> torch.Tensor:
    """The RaBitQ bound on |est − q·k| for the float query: [..., N]."""
    d = qs.qr.shape[-1]
    ratio = torch.sqrt((1 - kc.ip_ob ** 2).clamp_min(0)) / kc.ip_ob
    return kc.norm * qs.qr.norm(dim=-1, keepdim=True) * ratio * eps0 / math.sqrt(d - 1)
