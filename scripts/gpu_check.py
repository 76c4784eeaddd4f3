"""A short, fixed set of checks for a CUDA machine; writes one JSON (`make gpu-check`).

    python scripts/gpu_check.py [--out build/gpu-check/gpu_check.json] [--skip-paper-path]

1. device: name, capability, memory, bf16 support; the runtime spec `auto` must resolve to CUDA.
2. paper path: the stand-in paper-scale DAGs of wd_plasticity and lfq (tests/paper_path) with
   the scale's runtime (device auto → the GPU); every torch step's log must report CUDA.
3. trainer: `methods.core.train.train` on a ~125M-parameter Llama in bf16 autocast with fp32
   master weights: tokens/s and MFU = achieved FLOP/s / the GPU's dense bf16 peak (FLOPs per
   token as in benchmarks/trainer.py: 6·N + 12·L·T·d).
4. kernels: every Triton kernel compiled for the GPU (TRITON_INTERPRET unset) against its torch
   reference on the same CUDA inputs, and the fused dequant-matmul / RaBitQ score timed beside
   the reference and a dense bf16 matmul.
Exits 2 with one line when there is no CUDA device; non-zero when a check fails.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# dense bf16 tensor-core peaks (FLOP/s) from the vendors' datasheets, matched on the device name
PEAK_BF16 = [("H200", 989e12), ("H100 SXM", 989e12), ("H100 PCIe", 756e12), ("H100", 989e12),
             ("A100", 312e12), ("L40S", 362e12), ("L4", 121e12), ("A10", 125e12), ("4090", 165e12)]


def peak_bf16(name: str) -> float | None:
    return next((p for key, p in PEAK_BF16 if key in name), None)


def timed(fn, reps: int = 20) -> float:
    """Median seconds of one call on the GPU (CUDA events after a warm-up)."""
    import torch

    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return sorted(times)[len(times) // 2]


def check_device() -> dict:
    import torch

    from methods.core import runtime

    p = torch.cuda.get_device_properties(0)
    rt = runtime.activate({"device": "auto", "dtype": "auto"})
    return {"name": p.name, "capability": f"{p.major}.{p.minor}", "memory_gib": round(p.total_memory / 2 ** 30, 1),
            "bf16": torch.cuda.is_bf16_supported(), "runtime_device": str(rt.device),
            "runtime_dtype": str(rt.compute_dtype), "torch": torch.__version__, "cuda": torch.version.cuda,
            "ok": rt.device.type == "cuda"}


def check_paper_path(work: Path) -> dict:
    """The stand-in paper-scale DAGs of wd_plasticity and lfq, on the GPU."""
    from tests.paper_path.standins import build

    scales = build(work / "standins")
    env = {**os.environ, "ICML26_LM_EVAL_TASKS": str(work / "standins" / "lm_eval_tasks"),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TQDM_DISABLE": "1"}
    out = {}
    for paper in ("wd_plasticity", "lfq"):
        results = work / "results"
        target = results / "paper" / paper / "claims.json"
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "4", "--config", "scale=paper",
                               f"scales_dir={scales}", f"results_dir={results}", f"papers=[{paper}]", "--",
                               str(target)], cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        # every torch step ends its log with "done in Xs on <device> (<dtype>)"
        steps = {}
        for log in sorted((results / "paper" / paper / "logs").rglob("*.log")):
            for line in log.read_text(errors="replace").splitlines():
                if ": done in " in line and " on " in line:
                    steps[str(log.relative_to(results))] = line.split(" on ", 1)[1]
        on_cpu = [k for k, v in steps.items() if not v.startswith("cuda")]
        out[paper] = {"returncode": proc.returncode, "wall_s": round(wall, 1), "torch_steps": len(steps),
                      "steps_not_on_cuda": on_cpu, "ok": proc.returncode == 0 and bool(steps) and not on_cpu}
        if proc.returncode:
            out[paper]["stderr_tail"] = proc.stderr[-1500:]
    return out


def check_trainer(steps: int = 30) -> dict:
    import torch

    from benchmarks.trainer import flops_per_token
    from methods.core import runtime
    from methods.core.models import ModelConfig, build_model
    from methods.core.train import TrainConfig, train

    rt = runtime.activate({"device": "auto", "dtype": "auto"})
    vocab, seq, batch = 32000, 1024, 16
    mcfg = ModelConfig(d_model=768, n_layers=12, n_heads=12, d_ff=2048, max_seq_len=seq)

    class Tok:  # build_model needs only the vocabulary size and the special ids
        pad_token_id, eos_token_id = 0, 1

        def __len__(self):
            return vocab

    model = build_model(mcfg, Tok(), seed=0)
    g = torch.Generator(device="cpu").manual_seed(0)
    data = torch.randint(0, vocab, (steps + 4, batch, seq + 1), generator=g)
    stamps = []

    def batch_fn(step):
        stamps.append(time.perf_counter())
        return {"input_ids": data[step, :, :-1], "labels": data[step, :, 1:]}

    cfg = TrainConfig(steps=steps + 3, batch_size=batch, lr=3e-4, warmup_steps=2, grad_clip=1.0, log_every=10)
    torch.cuda.synchronize()
    rows = train(model, batch_fn, cfg)
    torch.cuda.synchronize()
    stamps.append(time.perf_counter())
    dt = stamps[-1] - stamps[3]  # the first 3 steps warm up (allocator, cuBLAS heuristics)
    f = flops_per_token(mcfg, vocab, seq)
    tokens = steps * batch * seq
    achieved = f["flops_per_token"] * tokens / dt
    peak = peak_bf16(torch.cuda.get_device_name(0))
    return {"model": {"d_model": 768, "n_layers": 12, "params_matmul": f["N_matmul"]}, "batch": batch,
            "seq_len": seq, "timed_steps": steps, "tokens_per_s": round(tokens / dt),
            "achieved_tflops": round(achieved / 1e12, 1), "peak_bf16_tflops": peak and peak / 1e12,
            "mfu": peak and round(achieved / peak, 3), "final_loss": rows[-1]["loss"],
            "param_dtype": str(next(model.parameters()).dtype), "device": str(rt.device),
            "ok": bool(torch.isfinite(torch.tensor(rows[-1]["loss"])))}


def check_kernels() -> dict:
    import torch

    os.environ.pop("TRITON_INTERPRET", None)
    from kernels import quant as Q, rabitq as R

    dev = torch.device("cuda")
    torch.manual_seed(0)
    out = {}
    n = k = 4096
    bits, g = 4, 128
    w = torch.randn(n, k, device=dev)
    wg = w.view(n, k // g, g)
    scale = ((wg.amax(-1) - wg.amin(-1)) / (2 ** bits - 1)).clamp(1e-5, 1e4)
    zero = torch.round(-wg.amin(-1) / scale)
    q_ref, q_tri = Q.quantize_ref(w, scale, zero, bits, g), Q.quantize_triton(w, scale, zero, bits, g)
    out["quantize_mismatch"] = int((q_ref != q_tri).sum())
    out["dequantize_maxabs"] = float((Q.dequantize_ref(q_ref, scale, zero, g) - Q.dequantize_triton(q_ref, scale, zero, g)).abs().max())
    p_ref, p_tri = Q.pack_ref(q_ref, bits), Q.pack_triton(q_ref, bits)
    out["pack_mismatch"] = int((p_ref != p_tri).sum())
    for m in (1, 16):
        x = torch.randn(m, k, device=dev)
        y_ref = Q.dequant_matmul_ref(x, p_ref, scale, zero, bits, g)
        y_tri = Q.dequant_matmul_triton(x, p_ref, scale, zero, bits, g)
        wb, xb = Q.dequantize_ref(q_ref, scale, zero, g).bfloat16(), x.bfloat16()
        out[f"dqmm_m{m}"] = {
            "relerr": float((y_ref - y_tri).abs().max() / y_ref.abs().max()),
            "triton_ms": round(timed(lambda: Q.dequant_matmul_triton(x, p_ref, scale, zero, bits, g)) * 1e3, 4),
            "reference_ms": round(timed(lambda: Q.dequant_matmul_ref(x, p_ref, scale, zero, bits, g)) * 1e3, 4),
            "dense_bf16_ms": round(timed(lambda: xb @ wb.T) * 1e3, 4)}
    h, nk, d = 8, 32768, 128
    codes = torch.randint(-2 ** 31, 2 ** 31 - 1, (h, nk, d // 32), dtype=torch.int32, device=dev)
    qu = torch.randint(0, 16, (h, d), dtype=torch.int32, device=dev)
    kfac, qfac = torch.rand(h, nk, 3, device=dev), torch.rand(h, 4, device=dev)
    s_ref = R.rabitq_scores_ref(codes, qu, kfac, qfac, 0.1)
    s_tri = R.rabitq_scores_triton(codes, qu, kfac, qfac, 0.1)
    keys = torch.randn(h, nk, d, device=dev, dtype=torch.bfloat16)
    qv = torch.randn(h, d, 1, device=dev, dtype=torch.bfloat16)
    out["rabitq_32k"] = {
        "relerr": float((s_ref - s_tri).abs().max() / s_ref.abs().max()),
        "triton_ms": round(timed(lambda: R.rabitq_scores_triton(codes, qu, kfac, qfac, 0.1)) * 1e3, 4),
        "reference_ms": round(timed(lambda: R.rabitq_scores_ref(codes, qu, kfac, qfac, 0.1)) * 1e3, 4),
        "dense_bf16_qk_ms": round(timed(lambda: torch.bmm(keys, qv)) * 1e3, 4)}
    out["ok"] = (out["quantize_mismatch"] == 0 and out["pack_mismatch"] == 0 and out["dequantize_maxabs"] < 1e-5
                 and all(out[f"dqmm_m{m}"]["relerr"] < 1e-4 for m in (1, 16)) and out["rabitq_32k"]["relerr"] < 1e-4)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "build" / "gpu-check" / "gpu_check.json"))
    ap.add_argument("--skip-paper-path", action="store_true")
    a = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: error: no CUDA device on this machine", file=sys.stderr)
        return 2
    out_path = Path(a.out)
    work = out_path.parent
    work.mkdir(parents=True, exist_ok=True)
    report = {"device": check_device()}
    checks = [("kernels", check_kernels), ("trainer", check_trainer)]
    if not a.skip_paper_path:
        checks.append(("paper_path", lambda: check_paper_path(work)))
    for name, fn in checks:
        t0 = time.perf_counter()
        try:
            report[name] = fn()
        except Exception as e:  # one failed check must not hide the others' figures
            report[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        report[name]["check_s"] = round(time.perf_counter() - t0, 1)
        print(f"gpu_check: {name}: {json.dumps(report[name])[:600]}", file=sys.stderr)
    ok = all(v.get("ok", all(x.get("ok") for x in v.values() if isinstance(x, dict)))
             for v in report.values())
    report["ok"] = ok
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1))
    tmp.replace(out_path)
    print(f"gpu_check: {'all checks passed' if ok else 'FAILED'}; {out_path}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
