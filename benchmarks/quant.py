"""Quantized storage and the dequantize-matmul against fp32 (LFQ).

    python benchmarks/quant.py [--shapes 1024x1024 4096x4096] [--batch 1 16] [--bits 2 3 4]
                               [--group-size 32] [--model-dir results/tiny/lfq/models/omni-lfq-w3g32]
                               [--reps 20] [--threads 1] [--out benchmarks/out/quant.json]

1. Size: bytes of the packed codes + fp16 scales + int8 zeros (kernels/quant.py layout, as in
   a quantized model directory's quant.safetensors) against fp32 weights: ratio fp32/packed per
   bit width, and, with --model-dir, the ratio for a real quantized directory (quantized
   linears only, and the whole model with its FP embeddings / norms / head).
2. Time: `kernels.quant.dequant_matmul` (on CPU the torch reference: unpack, dequantize, matmul)
   against a plain fp32 `x @ Wᵀ`, interleaved in one run, median over reps; the fp32 matmul's
   achieved GFLOP/s is printed beside it as the machine's reference rate (performance is reported against a limit).
   On CPU the dequantize is pure overhead (the fused Triton kernel needs a GPU); the ratio shows
   what the storage saving costs without a kernel.
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=["1024x1024", "4096x4096"])
    p.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    p.add_argument("--bits", type=int, nargs="+", default=[2, 3, 4])
    p.add_argument("--group-size", type=int, default=32)
    p.add_argument("--model-dir", default=None)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--agoq-model", default="tiny", help="AGoQ peak-memory model (benchmarks/agoq.py MODELS)")
    p.add_argument("--skip-agoq", action="store_true", help="skip 3., the AGoQ peak-memory ratio")
    p.add_argument("--out", default="benchmarks/out/quant.json")
    a = p.parse_args(argv)

    import torch

    from kernels import quant as kq

    torch.set_num_threads(a.threads)
    res = {"threads": a.threads, "group_size": a.group_size, "size": [], "matmul": []}
    g = a.group_size
    for bits in a.bits:
        # per weight: slot bits of code + 16-bit scale and 8-bit zero per group
        bpw = kq.slot_bits(bits) + 24 / g
        res["size"].append({"bits": bits, "bits_per_weight": bpw, "ratio_fp32_over_packed": 32 / bpw})
        print(f"size  W{bits}g{g}: {bpw:.2f} bits/weight, fp32/packed = {32 / bpw:.2f}x")
    for shape in a.shapes:
        n, k = map(int, shape.split("x"))
        for bits in a.bits:
            w, packed, scale, zero = _packed(n, k, bits, g, torch, kq)
            w_hat = kq.dequantize(kq.unpack(packed, bits, k), scale, zero, g)
            for m in a.batch:
                x = torch.randn(m, k)
                err = float((kq.dequant_matmul(x, packed, scale, zero, bits, g) - x @ w_hat.t()).abs().max())
                t_fp, t_dq = [], []
                for _ in range(3):
                    x @ w.t(), kq.dequant_matmul(x, packed, scale, zero, bits, g)
                for _ in range(a.reps):  # interleaved: machine load hits both alike
                    t0 = time.perf_counter(); x @ w.t(); t_fp.append(time.perf_counter() - t0)  # noqa: E702
                    t0 = time.perf_counter(); kq.dequant_matmul(x, packed, scale, zero, bits, g); t_dq.append(time.perf_counter() - t0)  # noqa: E702
                fp, dq = statistics.median(t_fp), statistics.median(t_dq)
                row = {"shape": shape, "bits": bits, "batch": m, "fp32_ms": fp * 1e3, "dequant_matmul_ms": dq * 1e3,
                       "ratio_dequant_over_fp32": dq / fp, "fp32_gflops": 2 * m * n * k / fp / 1e9,
                       "max_abs_err_vs_dequantized_dense": err}
                res["matmul"].append(row)
                print(f"matmul {shape} W{bits} M={m}: fp32 {fp * 1e3:.3f} ms ({row['fp32_gflops']:.1f} GFLOP/s), "
                      f"dequant-matmul {dq * 1e3:.3f} ms, ratio {dq / fp:.2f}x")
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
