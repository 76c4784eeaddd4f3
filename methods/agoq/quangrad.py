"""QuanGrad (arXiv 2605.00539, abstract): 8-bit gradient storage and the precision-preserving 8-bit all-reduce.

Gradient buffer: int8 codes with one fp32 scale per block of 128 (symmetric, divisor 127;
see quant.py), 1 + 4/128 = 1.031 bytes per parameter instead of 4 (our claim A4).

All-reduce (our INFERRED design: the abstract only says "precision-preserving 8-bit
All-Reduce"), W workers, the flat gradient padded to W equal chunks of
whole blocks:
  1. each worker quantizes its own gradient block-wise with its own scales;
  2. all-to-all of int8 chunks + scales: the owner of chunk c receives the W contributions,
     dequantizes them and sums them in fp32 (rank order, so the result is deterministic);
  3. the owner divides by W, requantizes once, and all-gathers codes + scales.
Every worker ends with the same int8 buffer (the 8-bit gradient storage). Per element,
|mean − exact mean| ≤ Σ_w s_w / (2W) + s_out / 2 (the bound Σ_w s_w/2 + s_out/2 on the sum, divided by W),
independent of the number of hops.

`Collective` runs it (or the same algorithm in fp32, the baseline) on a real torch.distributed
group and counts the bytes each rank sends; the `*_sim` functions compute the same thing for W
simulated workers in one process (and the naive int8 ring that requantizes at every hop, our
negative control).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .quant import sym_dequant, sym_quant

BLOCK = 128


@dataclass
class Int8GradBuffer:
    codes: torch.Tensor   # int8 [n] (the zero padding of the last block is not stored)
    scales: torch.Tensor  # fp32 [ceil(n / block)]
    n: int                # number of gradient elements
    block: int = BLOCK

    @classmethod
    def from_tensor(cls, g: torch.Tensor, block: int = BLOCK) -> "Int8GradBuffer":
        q, s = sym_quant(g, 8, block)
        return cls(q[: g.numel()].clone(), s, g.numel(), block)

    def to_tensor(self) -> torch.Tensor:
        return sym_dequant(_pad(self.codes, self.scales.numel() * self.block), self.scales, self.n)

    @property
    def nbytes(self) -> int:
        return self.codes.untyped_storage().nbytes() + self.scales.untyped_storage().nbytes()


def _chunked(n: int, world: int, block: int) -> tuple[int, int]:
    """(blocks per chunk, padded length) so that the flat gradient splits into W whole-block chunks."""
    n_blocks = -(-n // block)
    per = -(-n_blocks // world)
    return per, per * world * block


def _pad(x: torch.Tensor, length: int) -> torch.Tensor:
    return torch.cat([x, x.new_zeros(length - x.numel())]) if length > x.numel() else x


# fp32 arithmetic (x/s, q·s, the sum) adds a few ulps of the values on top of the bound
FP32_SLACK = 1e-6


def error_bound(in_scales: list[torch.Tensor], out_scales: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """Per-element bound Σ_w s_w/(2W) + s_out/2, expanded to elements (checks add FP32_SLACK·|x|)."""
    w = len(in_scales)
    b = sum(s for s in in_scales) / (2 * w) + out_scales / 2
    return b.repeat_interleave(block)


# ----------------------------------------------------------------- simulated workers ----
def quangrad_mean_sim(grads: list[torch.Tensor], block: int = BLOCK) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean as the workers end with it, per-element error bound), W = len(grads)."""
    n = grads[0].numel()
    per, length = _chunked(n, len(grads), block)
    qs = [sym_quant(_pad(g.reshape(-1).float(), length), 8, block) for g in grads]
    total = torch.zeros(length, device=grads[0].device)
    for q, s in qs:  # rank order, fp32, as the chunk owners do
        total += sym_dequant(q, s)
    mean = total / len(grads)
    q_out, s_out = sym_quant(mean, 8, block)
    bound = error_bound([s for _, s in qs], s_out, block)
    return sym_dequant(q_out, s_out)[:n], bound[:n]


def naive_ring_mean_sim(grads: list[torch.Tensor], block: int = BLOCK) -> torch.Tensor:
    """Ring reduce-scatter in int8 that requantizes the partial sum at every hop (own scales per
    hop), then one quantized all-gather. Chunk c starts at worker c+1 and travels the ring."""
    w, n = len(grads), grads[0].numel()
    per, length = _chunked(n, w, block)
    flat = [_pad(g.reshape(-1).float(), length).view(w, -1) for g in grads]
    out = []
    for c in range(w):
        partial = flat[(c + 1) % w][c]
        for hop in range(2, w + 1):  # each hop sends int8 to the next worker, which adds its own
            partial = sym_dequant(*sym_quant(partial, 8, block)) + flat[(c + hop) % w][c]
        out.append(sym_dequant(*sym_quant(partial / w, 8, block)))
    return torch.cat(out)[:n]


def bf16_mean(grads: list[torch.Tensor]) -> torch.Tensor:
    """bf16 all-reduce reference: bf16 inputs, bf16 partial sums along a ring."""
    acc = grads[0].reshape(-1).to(torch.bfloat16)
    for g in grads[1:]:
        acc = (acc.float() + g.reshape(-1).to(torch.bfloat16).float()).to(torch.bfloat16)
    return (acc.float() / len(grads))


def rel_l2(a: torch.Tensor, ref: torch.Tensor) -> float:
    return float((a - ref).norm() / ref.norm().clamp_min(1e-30))


# ------------------------------------------------------------------ real collective ----
class Collective:
    """Gradient averaging over a torch.distributed group; `mode` = "fp32" or "quangrad".
    Both use the same direct reduce-scatter (all-to-all) + all-gather, so their byte counts
    differ only by the payload format. `bytes_sent` counts bytes that leave this rank (the
    part of an all-to-all kept locally is not sent)."""

    def __init__(self, mode: str, block: int = BLOCK):
        import torch.distributed as dist

        if mode not in ("fp32", "quangrad"):
            raise ValueError(f"unknown all-reduce mode {mode!r} (fp32 or quangrad)")
        self.dist, self.mode, self.block = dist, mode, block
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        self.bytes_sent = 0
        self.calls = 0
        self.last_bound: torch.Tensor | None = None

    def _a2a(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        self.dist.all_to_all_single(y, x)
        self.bytes_sent += x.numel() * x.element_size() * (self.world - 1) // self.world
        return y

    def _gather(self, x: torch.Tensor) -> torch.Tensor:
        out = [torch.empty_like(x) for _ in range(self.world)]
        self.dist.all_gather(out, x)
        self.bytes_sent += x.numel() * x.element_size() * (self.world - 1)
        return torch.cat(out)

    def mean(self, flat: torch.Tensor, with_bound: bool = False):
        """The mean over ranks of `flat`: a fp32 tensor (mode fp32) or an Int8GradBuffer; with
        `with_bound`, `last_bound` holds the per-element error bound (an extra, uncounted gather)."""
        self.calls += 1
        w, n = self.world, flat.numel()
        per, length = _chunked(n, w, self.block)
        x = _pad(flat.reshape(-1).float(), length)
        if self.mode == "fp32":
            parts = self._a2a(x).view(w, -1)
            own = parts[0].clone()
            for r in range(1, w):  # rank order, fp32
                own += parts[r]
            return self._gather(own / w)[:n]
        q, s = sym_quant(x, 8, self.block)
        q_in = self._a2a(q).view(w, -1)
        s_in = self._a2a(s).view(w, -1)
        total = sym_dequant(q_in[0], s_in[0])
        for r in range(1, w):
            total = total + sym_dequant(q_in[r], s_in[r])
        q_out, s_out = sym_quant(total / w, 8, self.block)
        # the persistent buffer keeps n codes and ceil(n / block) scales (the padding is not stored)
        codes = self._gather(q_out)[:n].clone()
        scales = self._gather(s_out)[: -(-n // self.block)].clone()
        if not with_bound:
            return Int8GradBuffer(codes, scales, n, self.block)
        # bound of the owned chunk, gathered for tests / logging only (not counted as traffic)
        own_bound = sum(s_in[r] for r in range(w)) / (2 * w) + s_out / 2
        out = [torch.empty_like(own_bound) for _ in range(w)]
        self.dist.all_gather(out, own_bound)
        self.last_bound = torch.cat(out).repeat_interleave(self.block)[:n]
        return Int8GradBuffer(codes, scales, n, self.block)
