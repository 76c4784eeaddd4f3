"""PID estimators: our exact BROJA solver vs dit 2.3's PID_BROJA (time and agreement), and the
BATCH estimator's time (4 batches of 256, 10 epochs, 20 Sinkhorn iterations as in the tiny
config) and error vs exact on discrete tables.

    python benchmarks/pid.py [--tables 10] [--out benchmarks/out/pid.json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from methods.pid.estimators import batch_pid_avg, broja_exact, discrete_batch_inputs  # noqa: E402


def dit_broja(p):
    import dit
    from dit.pid import PID_BROJA

    outs, probs = [], []
    for (a, b, y), v in np.ndenumerate(p):
        if v > 0:
            outs.append(f"{a}{b}{y}")
            probs.append(v)
    dit.math.prng.seed(0)
    r = PID_BROJA(dit.Distribution(outs, probs), [[0], [1]], [2])
    return {"R": float(r[((0,), (1,))]), "U1": float(r[((0,),)]), "U2": float(r[((1,),)]), "S": float(r[((0, 1),)])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=10)
    ap.add_argument("--out", default="benchmarks/out/pid.json")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    rows = []
    for s in range(a.tables):
        p = np.random.default_rng(s).dirichlet(np.ones(18)).reshape(3, 3, 2)
        t0 = time.perf_counter(); ours = broja_exact(p); t1 = time.perf_counter()
        ref = dit_broja(p); t2 = time.perf_counter()
        f1, f2, p1, p2, p12 = discrete_batch_inputs(p, 1024, seed=s)
        t3 = time.perf_counter()
        b = batch_pid_avg(f1, f2, p1, p2, p12, batch_size=256, n_batches=4, epochs=10, sinkhorn_iters=20, seed=s)
        t4 = time.perf_counter()
        rows.append({"ours_s": t1 - t0, "dit_s": t2 - t1, "batch_s": t4 - t3,
                     "max_abs_ours_vs_dit": max(abs(ours[k] - ref[k]) for k in ref),
                     "ours_minus_dit_R": ours["R"] - ref["R"],
                     "max_abs_batch_vs_exact": max(abs(b[k] - ours[k]) for k in ref)})
    summary = {k: {"median": float(np.median([r[k] for r in rows])), "max": float(np.max([r[k] for r in rows]))}
               for k in rows[0]}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    for k, v in summary.items():
        print(f"{k:26s} median {v['median']:.4g}  max {v['max']:.4g}")


if __name__ == "__main__":
    main()
