"""Quantized storage and the dequantize-matmul against fp32 (LFQ).

    python benchmarks/quant.py [--shapes 1024x1024 4096x4096] [--batch 1 16] [--bits 2 3 4]
                               [--group-size 32] [--model-dir results/tiny/lfq/models/omni-lfq-w3g32]
                               [--reps 20] [--threads 1 2] [--act-probe] [--out benchmarks/out/quant.json]

1. Size: bytes of the packed codes + fp16 scales + int8 zeros (kernels/quant.py layout, as in
   a quantized model directory's quant.safetensors) against fp32 weights: ratio fp32/packed per
   bit width, and, with --model-dir, the ratio for a real quantized directory (quantized
   linears only, and the whole model with its FP embeddings / norms / head); also the bits per
   weight of the CPU int4 layout (4-bit code + bf16 scale and zero per group).
2. Time, side by side in one run (interleaved, median over reps, per thread count): a plain fp32
   `x @ Wᵀ`; the previous path `kernels.quant.dequant_matmul` (on CPU the torch reference:
   unpack, dequantize, fp32 matmul); and the packed layer's CPU int4 path
   (`methods.lfq.packed.PackedLinear`, torch's `_weight_int4pack_mm_for_cpu` in bf16, the
   conversions of x and of the output included), each as a ratio to fp32. The fp32 matmul's
   achieved GFLOP/s is printed beside it as the machine's reference rate; the int4 path's error
   is printed as max |ŷ − y| / max |y| against the fp32 product with the dequantized weight.
   `--act-probe` also times the raw int4 kernel with fp32 and fp16 activations (why the layer
   uses bf16).
3. AGoQ: the peak resident-memory growth of one training step (forward + backward) under each
   saved-activation bit policy (fp, laaq, uni4, uni2), each in a fresh process with the kernel's
   high-water mark reset just before the step, as a ratio to fp (`benchmarks/agoq.py
   peak_rss_ratios`; `--skip-agoq` to leave it out).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _packed(n, k, bits, group, torch, kq):
    w = torch.randn(n, k)
    wg = w.view(n, k // group, group)
    scale = ((wg.amax(-1) - wg.amin(-1)) / (2 ** bits - 1)).clamp(1e-5, 1e4).half().float()
    zero = torch.round(-wg.amin(-1) / scale)
    q = kq.quantize(w, scale, zero, bits, group)
    return w, kq.pack(q, bits), scale, zero


def _act_probe(torch, lin, x, w, threads, shape, m, reps):
    """The raw int4 kernel with fp32 / fp16 / bf16 activations (scales and zeros in the same
    dtype, as the kernel requires) against fp32 `x @ Wᵀ`: only bf16 is fast on this CPU build."""
    op = torch.ops.aten._weight_int4pack_mm_for_cpu
    out = {"threads": threads, "shape": shape, "batch": m}
    fns = {"fp32": lambda: x @ w.t()}
    for dt in (torch.bfloat16, torch.float16, torch.float32):
        xd, szd = x.to(dt), lin.scales_zeros.to(dt)
        fns[str(dt).split(".")[1]] = lambda xd=xd, szd=szd: op(xd, lin.wpack, lin.group_size, szd)
    ts = {key: [] for key in fns}
    for f in fns.values():
        f()
    for _ in range(max(3, reps // 4)):
        for key, f in fns.items():
            t0 = time.perf_counter(); f(); ts[key].append(time.perf_counter() - t0)  # noqa: E702
    fp = statistics.median(ts["fp32"])
    for key in fns:
        if key != "fp32":
            out[f"{key}_ratio_over_fp32"] = statistics.median(ts[key]) / fp
    print(f"  int4 kernel by activation dtype, t={threads} {shape} M={m}: "
          + ", ".join(f"{key} {statistics.median(ts[key]) / fp:.2f}x" for key in fns if key != "fp32"))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=["1024x1024", "4096x4096"])
    p.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    p.add_argument("--bits", type=int, nargs="+", default=[2, 3, 4])
    p.add_argument("--group-size", type=int, default=32)
    p.add_argument("--model-dir", default=None)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--threads", type=int, nargs="+", default=[1])
    p.add_argument("--act-probe", action="store_true",
                   help="also time the int4 kernel with fp32 / fp16 activations (slow: minutes at 4096²)")
    p.add_argument("--agoq-model", default="tiny", help="AGoQ peak-memory model (benchmarks/agoq.py MODELS)")
    p.add_argument("--skip-agoq", action="store_true", help="skip 3., the AGoQ peak-memory ratio")
    p.add_argument("--out", default="benchmarks/out/quant.json")
    a = p.parse_args(argv)

    import torch

    from kernels import quant as kq
    from methods.lfq.packed import PackedLinear, int4_expressible

    res = {"threads": a.threads, "group_size": a.group_size, "size": [], "matmul": [], "act_probe": []}
    g = a.group_size
    for bits in a.bits:
        # per weight: slot bits of code + 16-bit scale and 8-bit zero per group
        bpw = kq.slot_bits(bits) + 24 / g
        res["size"].append({"bits": bits, "bits_per_weight": bpw, "ratio_fp32_over_packed": 32 / bpw})
        print(f"size  W{bits}g{g}: {bpw:.2f} bits/weight, fp32/packed = {32 / bpw:.2f}x")
    if any(int4_expressible(b, g) for b in a.bits):
        bpw4 = 4 + 32 / g  # CPU int4 layout: 4-bit code + bf16 scale + bf16 zero per group
        res["size_int4_cpu"] = {"bits_per_weight": bpw4, "ratio_fp32_over_packed": 32 / bpw4}
        print(f"size  int4 CPU layout g{g} (W2/W3/W4 alike): {bpw4:.2f} bits/weight, fp32/packed = {32 / bpw4:.2f}x")
    for threads in a.threads:
        torch.set_num_threads(threads)
        for shape in a.shapes:
            n, k = map(int, shape.split("x"))
            for bits in a.bits:
                w, packed, scale, zero = _packed(n, k, bits, g, torch, kq)
                codes = kq.unpack(packed, bits, k)
                w_hat = kq.dequantize(codes, scale, zero, g)
                # the stored record: fp16 scale (exact: _packed rounds through fp16), integer zero
                lin = PackedLinear(codes, scale.half(), zero, bits, g) if int4_expressible(bits, g) else None
                for m in a.batch:
                    x = torch.randn(m, k)
                    y_ref = x @ w_hat.t()
                    err = float((kq.dequant_matmul(x, packed, scale, zero, bits, g) - y_ref).abs().max())
                    fns = {"fp32": lambda: x @ w.t(), "dequant": lambda: kq.dequant_matmul(x, packed, scale, zero, bits, g)}
                    if lin is not None:
                        fns["int4"] = lambda: lin(x)
                    ts = {key: [] for key in fns}
                    with torch.no_grad():
                        for _ in range(3):
                            for f in fns.values():
                                f()
                        for _ in range(a.reps):  # interleaved: machine load hits all alike
                            for key, f in fns.items():
                                t0 = time.perf_counter(); f(); ts[key].append(time.perf_counter() - t0)  # noqa: E702
                    fp, dq = statistics.median(ts["fp32"]), statistics.median(ts["dequant"])
                    row = {"threads": threads, "shape": shape, "bits": bits, "batch": m, "fp32_ms": fp * 1e3,
                           "dequant_matmul_ms": dq * 1e3, "ratio_dequant_over_fp32": dq / fp,
                           "fp32_gflops": 2 * m * n * k / fp / 1e9, "max_abs_err_vs_dequantized_dense": err}
                    line = (f"matmul t={threads} {shape} W{bits} M={m}: fp32 {fp * 1e3:.3f} ms ({row['fp32_gflops']:.1f} "
                            f"GFLOP/s), dequant-matmul {dq * 1e3:.3f} ms ({dq / fp:.2f}x)")
                    if lin is not None:
                        i4 = statistics.median(ts["int4"])
                        with torch.no_grad():
                            rel = float((lin(x) - y_ref).abs().max() / y_ref.abs().max())
                        row.update(int4_cpu_ms=i4 * 1e3, ratio_int4_over_fp32=i4 / fp, int4_rel_err=rel)
                        line += f", int4 CPU {i4 * 1e3:.3f} ms ({i4 / fp:.2f}x, max err {rel:.1e} of max |y|)"
                    res["matmul"].append(row)
                    print(line)
                    if a.act_probe and lin is not None and bits == a.bits[-1]:
                        res["act_probe"].append(_act_probe(torch, lin, x, w, threads, shape, m, a.reps))
    if a.model_dir:
        from safetensors import safe_open

        d = Path(a.model_dir)
        with safe_open(str(d / "quant.safetensors"), "pt") as f:
            packed_bytes = sum(f.get_tensor(t).numel() * f.get_tensor(t).element_size() for t in f.keys())
            lin_params = sum(f.get_tensor(t).numel() * 32 // kq.slot_bits(int(f.metadata()["bits"]))
                             for t in f.keys() if t.endswith(".qweight"))
        with safe_open(str(d / "model.safetensors"), "pt") as f:
            total = sum(f.get_tensor(t).numel() for t in f.keys())
        rest = (total - lin_params) * 4
        res["model"] = {"dir": str(d), "quantized_linears_ratio": lin_params * 4 / packed_bytes,
                        "whole_model_ratio": total * 4 / (packed_bytes + rest)}
        print(f"model {d.name}: linears fp32/packed = {res['model']['quantized_linears_ratio']:.2f}x, "
              f"whole model (FP embeddings/norms/head kept) = {res['model']['whole_model_ratio']:.2f}x")
    if not a.skip_agoq:
        from agoq import peak_rss_ratios  # benchmarks/agoq.py (this script's directory)

        res["agoq"] = pk = peak_rss_ratios(a.agoq_model)
        print(f"AGoQ, {pk['model']} model, batch {pk['batch']}×{pk['seq_len']}: CPU peak-RSS growth of one "
              f"training step vs fp (fresh process each, median of {pk['rounds']}): "
              + ", ".join(f"{k} {pk['peak_ratio_vs_fp'][k]:.3f}" for k in pk["peak_bytes"]))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
