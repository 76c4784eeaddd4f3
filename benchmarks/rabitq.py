"""RaBitQ proxy scores (binary keys × INT4 query) against dense fp32 q·Kᵀ (RaBitQCache, arXiv 2606.31519).

    python benchmarks/rabitq.py [--keys 4096 8192 16384 32768] [--heads 8] [--head-dim 128]
                                [--reps 20] [--threads 1] [--out benchmarks/out/rabitq.json]

One decode step's scoring of N cached keys for H heads (one query per head):
1. Key memory: bytes of the 1-bit codes + 3 fp32 factors per key (kernels/rabitq.py layout)
   against fp32 keys (and fp16 keys, the paper's cache): ratios.
2. Time on the CPU, side by side in one run (calls interleaved, median over reps): dense fp32
   batched mat-vec q·Kᵀ; the method's CPU path `methods.rabitqcache.rabitq.rabitq_scores_popcount`
   (⟨b, q_u⟩ by popcount on the packed words, then the affine); the old CPU path
   `kernels.rabitq.rabitq_scores_ref` (unpack the bits to floats, float matmul, affine); and the
   query preparation (rotation + INT4), which both proxy paths add. Printed: dense / (popcount +
   prep) and (unpack + prep) / dense, the dense mat-vec's achieved GB/s (the reference rate:
   performance is reported against a limit), and a check that popcount and unpack agree bit for bit.
3. Where CUDA exists: the Triton kernel against the torch reference on the GPU and against the
   dense fp32 / fp16 matvec, with the kernel's achieved GB/s over the bytes it reads, and a
   check that kernel and reference agree.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _inputs(h, n, d, device, torch):
    from methods.rabitqcache import rabitq as R

    g = torch.Generator().manual_seed(0)
    k = (torch.randn(h, n, d, generator=g) + torch.randn(h, 1, d, generator=g)).to(device)
    q = torch.randn(h, d, generator=g).to(device)
    rot = R.random_rotation(d, g).to(device)
    c_k, c_q = k.mean(1), torch.zeros(h, d, device=device)
    kc = R.encode_keys(k, rot, c_k, c_q)
    return k, q, rot, c_k, c_q, kc


def _time(fns: dict, reps: int, sync, cpu: dict | None = None) -> dict:
    """Median wall seconds per call of each fn, calls interleaved (one of each per rep). With
    `cpu` (a dict) also the median process CPU seconds per call into it (on a shared machine
    CPU time is less disturbed by other jobs than wall time)."""
    times = {name: [] for name in fns}
    cpus = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    sync()
    for _ in range(reps):
        for name, fn in fns.items():
            sync()
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - t0)
            cpus[name].append(time.process_time() - c0)
    if cpu is not None:
        cpu.update({name: statistics.median(c) for name, c in cpus.items()})
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keys", type=int, nargs="+", default=[4096, 8192, 16384, 32768])
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="benchmarks/out/rabitq.json")
    a = p.parse_args(argv)

    import torch

    from kernels import rabitq as K
    from methods.rabitqcache import rabitq as R

    torch.set_num_threads(a.threads)
    h, d = a.heads, a.head_dim
    res = {"heads": h, "head_dim": d, "threads": a.threads, "cpu": [], "cuda": []}
    for n in a.keys:
        k, q, rot, c_k, c_q, kc = _inputs(h, n, d, "cpu", torch)
        code_bytes = kc.codes.numel() * 4 + kc.kfac.numel() * 4
        qs = R.prepare_query(q, rot, c_q, c_k)
        pop = R.rabitq_scores_popcount(kc.codes, qs.qu, kc.kfac, qs.qfac, 1.0)
        ref = K.rabitq_scores_ref(kc.codes, qs.qu, kc.kfac, qs.qfac, 1.0)
        t = _time({
            "dense_fp32": lambda: torch.bmm(k, q.unsqueeze(-1)),
            "rabitq_popcount": lambda: R.rabitq_scores_popcount(kc.codes, qs.qu, kc.kfac, qs.qfac, 1.0),
            "rabitq_unpack_ref": lambda: K.rabitq_scores_ref(kc.codes, qs.qu, kc.kfac, qs.qfac, 1.0),
            "prepare_query": lambda: R.prepare_query(q, rot, c_q, c_k),
        }, a.reps, lambda: None, cpu := {})
        pop_t = t["rabitq_popcount"] + t["prepare_query"]
        ref_t = t["rabitq_unpack_ref"] + t["prepare_query"]
        row = {"keys": n, "bytes_fp32": k.numel() * 4, "bytes_fp16": k.numel() * 2, "bytes_codes": code_bytes,
               "bytes_codes_bits": kc.codes.numel() * 4, "bytes_codes_factors": kc.kfac.numel() * 4,
               "mem_ratio_fp32_over_codes": k.numel() * 4 / code_bytes,
               "mem_ratio_fp16_over_codes": k.numel() * 2 / code_bytes,
               "time_s": t, "cpu_time_s": cpu, "speedup_popcount_over_dense": t["dense_fp32"] / pop_t,
               "cpu_speedup_popcount_over_dense": cpu["dense_fp32"] / (cpu["rabitq_popcount"] + cpu["prepare_query"]),
               "time_ratio_ref_over_dense": ref_t / t["dense_fp32"],
               "speedup_popcount_over_ref": ref_t / pop_t,
               "popcount_equals_ref_bitwise": bool(torch.equal(pop, ref)),
               "dense_fp32_GBps": k.numel() * 4 / t["dense_fp32"] / 1e9,
               "popcount_codes_GBps": code_bytes / t["rabitq_popcount"] / 1e9}
        res["cpu"].append(row)
        print(f"CPU N={n:6d}: keys fp32 {row['bytes_fp32'] / 2 ** 20:.1f} MiB vs codes {code_bytes / 2 ** 20:.2f} MiB "
              f"(bits {row['bytes_codes_bits'] / 2 ** 20:.2f} + factors {row['bytes_codes_factors'] / 2 ** 20:.2f}): "
              f"fp32/codes {row['mem_ratio_fp32_over_codes']:.1f}× (fp16/codes {row['mem_ratio_fp16_over_codes']:.1f}×)")
        print(f"  time: dense fp32 {t['dense_fp32'] * 1e3:.2f} ms ({row['dense_fp32_GBps']:.1f} GB/s) | popcount "
              f"{t['rabitq_popcount'] * 1e3:.2f} ms | unpack ref {t['rabitq_unpack_ref'] * 1e3:.2f} ms | query prep "
              f"{t['prepare_query'] * 1e3:.3f} ms")
        print(f"  dense / (popcount + prep) {row['speedup_popcount_over_dense']:.2f}×; (unpack + prep) / dense "
              f"{row['time_ratio_ref_over_dense']:.2f}×; unpack / popcount {row['speedup_popcount_over_ref']:.1f}×; "
              f"bit-identical {row['popcount_equals_ref_bitwise']}; in CPU time dense / (popcount + prep) "
              f"{row['cpu_speedup_popcount_over_dense']:.2f}×")
    if torch.cuda.is_available():
        res["device"] = torch.cuda.get_device_name()
        sync = torch.cuda.synchronize
        for n in a.keys:
            k, q, rot, c_k, c_q, kc = _inputs(h, n, d, "cuda", torch)
            qs = R.prepare_query(q, rot, c_q, c_k)
            k16, q16 = k.half(), q.half()
            tri = K.rabitq_scores_triton(kc.codes, qs.qu, kc.kfac, qs.qfac, 1.0)
            ref = K.rabitq_scores_ref(kc.codes, qs.qu, kc.kfac, qs.qfac, 1.0)
            t = _time({
                "dense_fp32": lambda: torch.bmm(k, q.unsqueeze(-1)),
                "dense_fp16": lambda: torch.bmm(k16, q16.unsqueeze(-1)),
                "triton": lambda: K.rabitq_scores_triton(kc.codes, qs.qu, kc.kfac, qs.qfac, 1.0),
                "ref": lambda: K.rabitq_scores_ref(kc.codes, qs.qu, kc.kfac, qs.qfac, 1.0),
            }, a.reps * 5, sync)
            read = kc.codes.numel() * 4 + kc.kfac.numel() * 4
            row = {"keys": n, "time_s": t, "max_relerr_triton_vs_ref": float((tri - ref).abs().max() / ref.abs().max()),
                   "speedup_triton_over_ref": t["ref"] / t["triton"],
                   "speedup_triton_over_dense_fp32": t["dense_fp32"] / t["triton"],
                   "speedup_triton_over_dense_fp16": t["dense_fp16"] / t["triton"],
                   "triton_GBps": read / t["triton"] / 1e9,
                   "dense_fp16_GBps": k16.numel() * 2 / t["dense_fp16"] / 1e9}
            res["cuda"].append(row)
            print(f"GPU N={n:6d}: Triton {t['triton'] * 1e6:.1f} µs ({row['triton_GBps']:.0f} GB/s of codes), "
                  f"vs ref {row['speedup_triton_over_ref']:.1f}×, vs dense fp32 {row['speedup_triton_over_dense_fp32']:.2f}×, "
                  f"vs dense fp16 {row['speedup_triton_over_dense_fp16']:.2f}× ({row['dense_fp16_GBps']:.0f} GB/s); "
                  f"max rel. diff {row['max_relerr_triton_vs_ref']:.1e}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
