"""Step-time overhead of DAG-MoE's K sequential rounds, at widths above the tiny scale.

    python benchmarks/dag_moe.py [--widths 64 256 512] [--reps 10] [--threads 1] [--dispatch sorted]

For each width d, the four tiny architectures (moe_sum N8/K2, moe_fine N16/K4, dag_moe
N8/K2, dag_moe_K4 N16/K4; expert d_ff = 2d for N=8 and d for N=16, so the active FLOPs match)
are built as 2-layer DAG-MoE LMs and timed side by side in this one process: every repetition
runs one training step (forward + backward + AdamW, aux loss on) of each model on the same
fixed batch, the order rotating, so machine load hits all four alike
(`methods.dag_moe.run.time_steps`). Reported: median ms per step, the ratios dag/sum,
fine/sum, dag_K4/fine, and the counted FLOP overhead (closed form) beside them, so the latency
cost of the rounds reads against the arithmetic it adds. Results go to `--out` as JSON.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--widths", type=int, nargs="+", default=[64, 256, 512])
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dispatch", default="sorted", choices=["sorted", "rounds", "dense"])
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "dag_moe.json"))
    a = p.parse_args(argv)

    import torch

    from methods.core.models import ModelConfig
    from methods.dag_moe.model import ArchConfig, MoEConfig, build, dag_moe_config, flops_per_token
    from methods.dag_moe.run import time_steps

    torch.set_num_threads(a.threads)
    vocab = 256
    results = []
    for d in a.widths:
        m = ModelConfig(d_model=d, n_layers=a.layers, n_heads=max(1, d // 64), d_ff=2 * d,
                        max_seq_len=a.seq_len)
        archs = {"moe_sum": ArchConfig(8, 2, 2 * d, "sum"), "moe_fine": ArchConfig(16, 4, d, "sum"),
                 "dag_moe": ArchConfig(8, 2, 2 * d, "dag"), "dag_moe_K4": ArchConfig(16, 4, d, "dag")}
        moe = MoEConfig(edge_bias_init=0.0, edge_weight_init_std=0.0, edge_mode="soft", dispatch=a.dispatch,
                        router_renormalize=True, aux_loss_coef=1e-2)  # the tiny scale's knobs
        cfgs = {n: dag_moe_config(m, ar, moe, vocab) for n, ar in archs.items()}
        models = {n: build(c, 0) for n, c in cfgs.items()}
        g = torch.Generator().manual_seed(0)
        ids = torch.randint(0, vocab, (a.batch_size, a.seq_len + 1), generator=g)
        t = time_steps(models, {"input_ids": ids[:, :-1], "labels": ids[:, 1:]}, a.warmup, a.reps)
        ms = {n: t[n]["median_ms"] for n in t}
        fl = {n: flops_per_token(c, a.seq_len)["model"] for n, c in cfgs.items()}
        row = {"d": d, "median_ms": ms,
               "ratio_dag_vs_sum": ms["dag_moe"] / ms["moe_sum"],
               "ratio_fine_vs_sum": ms["moe_fine"] / ms["moe_sum"],
               "ratio_dagK4_vs_fine": ms["dag_moe_K4"] / ms["moe_fine"],
               "flop_overhead_dag_pct": 100 * (fl["dag_moe"] / fl["moe_sum"] - 1),
               "flop_overhead_dagK4_pct": 100 * (fl["dag_moe_K4"] / fl["moe_fine"] - 1)}
        results.append(row)
        print(f"d={d:4d}  " + "  ".join(f"{n} {v:7.1f} ms" for n, v in ms.items())
              + f"  | dag/sum {row['ratio_dag_vs_sum']:.2f}x  fine/sum {row['ratio_fine_vs_sum']:.2f}x"
              f"  dagK4/fine {row['ratio_dagK4_vs_fine']:.2f}x  | FLOPs +{row['flop_overhead_dag_pct']:.2f}%"
              f" / +{row['flop_overhead_dagK4_pct']:.2f}%", flush=True)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": vars(a), "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
