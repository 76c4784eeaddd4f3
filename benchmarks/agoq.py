"""AGoQ: saved-activation memory and step time of LAAQ against the unquantized baseline.

    python benchmarks/agoq.py [--model tiny|small] [--batch 16] [--seq-len 64] [--reps 10]
                              [--threads 1] [--device cpu|cuda] [--out benchmarks/out/agoq.json]

For each bit policy (fp = no quantization, laaq, uni4, uni2) one forward + backward of a Llama
model (`tiny` = d 128, L 4, FFN 344 as in the tiny config; `small` = d 512, L 8, FFN 1376):
1. saved-activation bytes: the storage held by the autograd graph at the end of the forward,
   measured by LAAQ's saved-tensor hooks (packed codes + scales + zeros; the fp baseline's
   tensors counted at 2 B/element as bf16, and at their real fp32 size);
2. on CUDA, peak allocated memory of the step (torch.cuda.max_memory_allocated) and its ratio
   to fp — the number the paper's "up to 52% less memory" is about (weights, grads and
   optimizer state included there, not here);
3. median step time over --reps interleaved repetitions, and the ratio to fp (the hooks'
   quantize/dequantize cost; a pilot run measured ~1.5× on CPU).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODELS = {"tiny": dict(d_model=128, n_layers=4, n_heads=4, d_ff=344),
          "small": dict(d_model=512, n_layers=8, n_heads=8, d_ff=1376)}


def _policies():
    from methods.agoq.laaq import TAGS, BitPolicy

    laaq = {**{t: 4 for t in TAGS}, "norm": 8, "attn_core": 8}
    return {"fp": BitPolicy.uniform(16), "laaq": BitPolicy(laaq), "uni4": BitPolicy.uniform(4),
            "uni2": BitPolicy.uniform(2)}


def _setup(model_name: str, batch: int, seq_len: int, threads: int, device: str = "cpu"):
    import torch

    from methods.core.models import ModelConfig, build_model
    from methods.core.tokenizer import train_tokenizer

    torch.set_num_threads(threads)
    dev = torch.device(device)
    tok = train_tokenizer(["abcdefghijklmnopqrstuvwxyz0123456789+-=. \n"], "char")
    model = build_model(ModelConfig(**MODELS[model_name], max_seq_len=seq_len), tok, 0).to(dev)
    x = torch.randint(3, len(tok), (batch, seq_len + 1), generator=torch.Generator().manual_seed(0)).to(dev)
    return model, x


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _child_peak(policy: str, model_name: str, batch: int, seq_len: int) -> int:
    """In a fresh process: the peak resident-memory growth (bytes) of one forward + backward
    under `policy`. The kernel's high-water mark is reset (clear_refs 5) just before the step."""
    import gc

    import torch.nn.functional as F

    from methods.agoq.laaq import SavedActivationQuantizer

    model, x = _setup(model_name, batch, seq_len, 1)
    q = SavedActivationQuantizer(model, _policies()[policy], n_stages=2)
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")
    rss0 = _status_kb("VmRSS")
    with q:
        logits = model(input_ids=x[:, :-1]).logits
    F.cross_entropy(logits.float().flatten(0, 1), x[:, 1:].flatten()).backward()
    return (_status_kb("VmHWM") - rss0) * 1024


def peak_rss_ratios(model_name: str = "tiny", batch: int = 32, seq_len: int = 128, rounds: int = 3) -> dict:
    """CPU peak memory of a training step per policy, measured (not computed): each policy in
    its own fresh process, `rounds` times interleaved, median; ratio to the fp baseline."""
    import subprocess

    peaks = {k: [] for k in ("fp", "laaq", "uni4", "uni2")}
    for _ in range(rounds):
        for name in peaks:
            out = subprocess.run([sys.executable, __file__, "--child-peak", name, "--model", model_name,
                                  "--batch", str(batch), "--seq-len", str(seq_len)],
                                 capture_output=True, text=True, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
            peaks[name].append(int(out.stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(v) for k, v in peaks.items()}
    return {"model": model_name, "batch": batch, "seq_len": seq_len, "rounds": rounds,
            "peak_bytes": med, "peak_ratio_vs_fp": {k: v / med["fp"] for k, v in med.items()}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(MODELS), default="tiny")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default="benchmarks/out/agoq.json")
    p.add_argument("--peak-rss", action="store_true",
                   help="also measure each policy's CPU peak-RSS growth in fresh processes")
    p.add_argument("--child-peak", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child_peak:
        print(_child_peak(a.child_peak, a.model, a.batch, a.seq_len))
        return 0

    import torch
    import torch.nn.functional as F

    from methods.agoq.laaq import SavedActivationQuantizer

    model, x = _setup(a.model, a.batch, a.seq_len, a.threads, a.device)
    dev = x.device
    policies = _policies()

    def step(name):
        q = SavedActivationQuantizer(model, policies[name], n_stages=2)
        model.zero_grad(set_to_none=True)
        if dev.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        with q:
            logits = model(input_ids=x[:, :-1]).logits
        F.cross_entropy(logits.float().flatten(0, 1), x[:, 1:].flatten()).backward()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        peak = torch.cuda.max_memory_allocated() if dev.type == "cuda" else None
        q.remove()
        return dt, q.summary(), peak

    for name in policies:  # warm-up
        step(name)
    times = {k: [] for k in policies}
    res = {}
    for _ in range(a.reps):
        for name in policies:  # interleaved, so machine load hits every policy alike
            dt, s, peak = step(name)
            times[name].append(dt)
            res[name] = {"saved_bytes": s["held_bytes"], "saved_bytes_fp32": s["fp32_bytes"],
                         "saved_ratio_vs_bf16": s["ratio_vs_bf16"], "avg_bits": s["avg_bits"], "peak_bytes": peak}
    base = res["fp"]
    for name, r in res.items():
        r["step_ms"] = 1000 * statistics.median(times[name])
        r["step_time_ratio"] = r["step_ms"] / (1000 * statistics.median(times["fp"]))
        r["saved_ratio_vs_fp32"] = r["saved_bytes"] / base["saved_bytes_fp32"]
        if r["peak_bytes"] is not None:
            r["peak_ratio"] = r["peak_bytes"] / base["peak_bytes"]
    n_params = sum(p.numel() for p in model.parameters())
    out = {"model": a.model, "n_params": n_params, "batch": a.batch, "seq_len": a.seq_len,
           "device": str(dev), "threads": a.threads, "reps": a.reps, "policies": res}
    print(f"{a.model} ({n_params / 1e6:.2f}M params), batch {a.batch}×{a.seq_len}, {dev}, {a.threads} thread(s)")
    print(f"{'policy':8s} {'saved MB':>9s} {'vs bf16':>8s} {'vs fp32':>8s} {'avg bits':>8s} {'peak MB':>8s} "
          f"{'peak/fp':>8s} {'step ms':>8s} {'time/fp':>8s}")
    for name, r in res.items():
        peak = f"{r['peak_bytes'] / 2**20:8.1f} {r['peak_ratio']:8.3f}" if r["peak_bytes"] else f"{'–':>8s} {'–':>8s}"
        print(f"{name:8s} {r['saved_bytes'] / 2**20:9.2f} {r['saved_ratio_vs_bf16']:8.3f} {r['saved_ratio_vs_fp32']:8.3f} "
              f"{r['avg_bits']:8.2f} {peak} {r['step_ms']:8.1f} {r['step_time_ratio']:8.2f}")
    if a.peak_rss:
        out["cpu_peak_rss"] = pk = peak_rss_ratios(a.model, a.batch, a.seq_len)
        print("CPU peak-RSS growth of one step (fresh process per policy, median of "
              f"{pk['rounds']}): " + ", ".join(f"{k} {v / 2**20:.1f} MB ({pk['peak_ratio_vs_fp'][k]:.3f})"
                                             for k, v in pk["peak_bytes"].items()))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
