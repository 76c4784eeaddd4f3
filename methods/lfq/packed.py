"""A linear layer that computes from the packed codes of a quantized model directory (RTN, GPTQ,
OmniQuant and LFQ all store the same format, `store.py`), and its CPU int4 path.

The stored grid (quantizer.py, gptq.py) is asymmetric and group-wise along the input dimension:
codes q ∈ {0, …, 2^b − 1}, an fp16 scale s and an integer zero point z per group of g columns,

    Ŵ = (q − z) · s.

torch's CPU int4 kernels (`aten._convert_weight_to_int4pack_for_cpu`,
`aten._weight_int4pack_mm_for_cpu`; semantics below checked by experiment on torch 2.13,
tests/lfq/test_int4_cpu.py::test_kernel_semantics_as_documented) hold 4-bit codes
q4 ∈ {0, …, 15} with a per-group (scale, zero) pair and compute

    Ŵ = (q4 − 8) · scale + zero,        y = x @ Ŵᵀ,

with `qScaleAndZeros` laid out [K / g, N, 2] (scale, zero), g ∈ {32, 64, 128, 256} and N a
multiple of 16. Our grid maps onto it exactly in real arithmetic for every b ≤ 4:

    q4 = q + c,   scale = s,   zero = (8 − c − z) · s,   c = clamp(8 − z, 0, 16 − 2^b) per group,

a whole-number code offset c (q4 stays in 0…15) chosen so that the float zero is 0 whenever
8 − z fits: for 2- and 3-bit codes with 0 ≤ z < 2^b (every group whose range contains 0) the
zero is exactly 0, so its bf16 rounding (below) costs nothing; at 4 bits c = 0. The codes are
recovered exactly as q = q4 − c (c is a function of the stored z and b). Not expressible, so
kept on the previous path (`kernels.quant.dequant_matmul`: the Triton kernel on a GPU, unpack +
dequantize + fp32 matmul on CPU): 8-bit codes and group sizes outside {32, 64, 128, 256} (e.g. 16).

Precision. Of the kernel's activation dtypes only bfloat16 is vectorised on this CPU build (fp32
and fp16 activations ran 5.9–68× slower than a dense fp32 matmul at 4096², benchmarks/README.md),
so the int4 path rounds x, the scale and the zero to bfloat16 (8 significant bits); the kernel
accumulates in fp32 (the measured errors at K = 2048 are ~10× below a bound that assumes it) and
rounds the output to bfloat16, returned in x's dtype. The fp16 scales lose their 3 lowest bits;
the zero is computed from the bf16-rounded scale, so the scale error moves Ŵ proportionally
(Ŵ' = (q − z)·s' up to the rounding of the zero, which the offset c makes 0 in the common case).
The error bound is written out in tests/lfq/test_int4_cpu.py. Memory: the int4 layout keeps 4 bits per code
whatever b is (2-bit codes take twice their packed size) plus 4 bytes per group. Inference
only: the int4 op has no backward.
"""
from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn

from kernels import quant as kq

INT4_GROUPS = (32, 64, 128, 256)  # the CPU kernel's accepted qGroupSize
_N_MULTIPLE = 16  # _convert_weight_to_int4pack_for_cpu needs N % 16 == 0
KERNELS = ("auto", "int4", "dequant")


def int4_expressible(bits: int, group_size: int) -> bool:
    """Whether a (bits, group) format of the store maps onto torch's CPU int4 kernel."""
    return bits in (2, 3, 4) and group_size in INT4_GROUPS


def int4_offset(zero: torch.Tensor, bits: int) -> torch.Tensor:
    """Per-group code offset c = clamp(8 − z, 0, 16 − 2^bits) (int32, zero's shape)."""
    return (8 - zero.round().to(torch.int64)).clamp(0, 16 - 2 ** bits).to(torch.int32)


def int4_pack(codes: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, bits: int, group_size: int):
    """(packed uint8 [N', K/2], scales-and-zeros bf16 [K/g, N', 2]) for torch's CPU int4 kernel
    from `bits`-bit codes [N, K], scale [N, K/g] and integer zero points [N, K/g]; the packed
    codes are q + int4_offset(zero, bits). N' = N rounded up to a multiple of 16 (padded rows
    have scale 0 and zero 0: output 0)."""
    n, k = codes.shape
    if k % group_size or tuple(scale.shape) != (n, k // group_size) or tuple(zero.shape) != tuple(scale.shape):
        raise ValueError(f"codes {tuple(codes.shape)}, scale {tuple(scale.shape)}, zero {tuple(zero.shape)} "
                         f"do not fit group_size {group_size}")
    if not int4_expressible(bits, group_size):
        raise ValueError(f"W{bits}g{group_size} is not expressible by the CPU int4 kernel "
                         f"(bits 2/3/4, group in {INT4_GROUPS})")
    if codes.numel() and int(codes.max()) >= 2 ** bits:
        raise ValueError(f"codes above {2 ** bits - 1} in a {bits}-bit record")
    pad = -n % _N_MULTIPLE
    c = int4_offset(zero, bits)
    q = codes.to(torch.int32) + c.repeat_interleave(group_size, dim=1)
    s = scale.float().bfloat16().float()  # the kernel's scale, and the zero computed from it
    zf = (8.0 - c.float() - zero.float()) * s
    if pad:
        q = torch.cat([q, q.new_zeros(pad, k)])
        s = torch.cat([s, s.new_zeros(pad, s.shape[1])])
        zf = torch.cat([zf, zf.new_zeros(pad, zf.shape[1])])
    wpack = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.contiguous(), 1)
    sz = torch.stack([s.t(), zf.t()], dim=-1).bfloat16().contiguous()
    return wpack, sz


def int4_matmul(x: torch.Tensor, wpack: torch.Tensor, sz: torch.Tensor, group_size: int, n: int) -> torch.Tensor:
    """x [..., K] @ Ŵᵀ → [..., n] in x's dtype, through the bf16 CPU int4 kernel."""
    x2 = x.reshape(-1, x.shape[-1]).to(torch.bfloat16)
    y = torch.ops.aten._weight_int4pack_mm_for_cpu(x2, wpack, group_size, sz)
    if y.shape[1] != n:
        y = y[:, :n]
    return y.to(x.dtype).reshape(*x.shape[:-1], n)


class PackedLinear(nn.Module):
    """y = x Ŵᵀ (+ bias) from one stored record (codes, fp16 scale, zero points).

    kernel: "int4" — torch's CPU int4 kernel (bf16, see the module docstring; CPU only);
    "dequant" — `kernels.quant.dequant_matmul` on the store's int32 layout (Triton on a GPU,
    the torch reference on CPU: exact fp32, slow); "auto" — "int4" when the record is on CPU and
    its format is expressible, else "dequant". The buffers are those of the chosen kernel only."""

    def __init__(self, codes, scale, zero, bits: int, group_size: int, bias=None, kernel: str = "auto"):
        super().__init__()
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        n, k = codes.shape
        ok = int4_expressible(bits, group_size)
        if kernel == "auto":
            kernel = "int4" if ok and codes.device.type == "cpu" else "dequant"
        if kernel == "int4" and not ok:
            raise ValueError(f"W{bits}g{group_size} is not expressible by the CPU int4 kernel "
                             f"(bits 2/3/4, group in {INT4_GROUPS})")
        self.kernel, self.bits, self.group_size = kernel, bits, group_size
        self.in_features, self.out_features = k, n
        if kernel == "int4":
            wpack, sz = int4_pack(codes.cpu(), scale.cpu(), zero.cpu(), bits, group_size)
            self.register_buffer("wpack", wpack)
            self.register_buffer("scales_zeros", sz)
        else:
            self.register_buffer("qweight", kq.pack(codes.contiguous(), bits))
            self.register_buffer("scale", scale.float().contiguous())
            self.register_buffer("zero", zero.float().contiguous())
        self.bias = None if bias is None else nn.Parameter(bias.detach().float().clone(), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernel == "int4":
            if x.device.type != "cpu":
                raise RuntimeError("the int4 PackedLinear runs on CPU only; build it with kernel='dequant' for a GPU")
            y = int4_matmul(x, self.wpack, self.scales_zeros, self.group_size, self.out_features)
        else:
            x2 = x.reshape(-1, self.in_features)
            y = kq.dequant_matmul(x2, self.qweight, self.scale, self.zero, self.bits, self.group_size)
            y = y.to(x.dtype).reshape(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias.to(y.dtype)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, W{self.bits}g{self.group_size}, "
                f"kernel={self.kernel}, bias={self.bias is not None}")


def load_packed_model(model_dir, kernel: str = "auto"):
    """(model, tokenizer) of a quantized directory with every stored linear replaced by a
    `PackedLinear` built from quant.safetensors (its fake-quantized dense weight is dropped);
    embeddings, norms and the LM head stay as saved."""
    from methods.core.models import load_model

    from .store import load_records

    model, tok = load_model(Path(model_dir))
    records, bits, group = load_records(model_dir)
    for name, (codes, h16, z) in records.items():
        parent, _, leaf = name.rpartition(".")
        owner = model.get_submodule(parent)
        old = getattr(owner, leaf)
        dev = old.weight.device
        setattr(owner, leaf, PackedLinear(codes.to(dev), h16.to(dev), z.to(dev), bits, group,
                                          bias=getattr(old, "bias", None), kernel=kernel))
    return model, tok
