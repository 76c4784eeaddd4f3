"""FusionRoute's per-step fusion cost: the pure-torch reference
`(log_softmax(r) + log_softmax(E.gather(i))).argmax(-1)` against the equivalent raw-logit argmax
`(r + E.gather(i)).argmax(-1)` (log-softmax invariance), at the tiny vocabulary and at Llama-3's.

    python benchmarks/fusionroute.py [--batch 8] [--experts 3] [--repeats 20] [--out benchmarks/out/fusionroute.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from methods.fusionroute.fusion import fuse


def bench(fn, repeats):
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--experts", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="benchmarks/out/fusionroute.json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    rows = []
    for V in (48, 32000, 128256):
        g = torch.Generator().manual_seed(V)
        r = torch.randn(a.batch, V, generator=g)
        E = torch.randn(a.batch, a.experts, V, generator=g)
        i = torch.randint(0, a.experts, (a.batch,), generator=g)
        ref = fuse(r, E, i).argmax(-1)
        raw = (r + E[torch.arange(a.batch), i]).argmax(-1)
        rows.append({"vocab": V, "equal_argmax": bool(torch.equal(ref, raw)),
                     "reference_s": bench(lambda: fuse(r, E, i).argmax(-1), a.repeats),
                     "raw_logits_s": bench(lambda: (r + E[torch.arange(a.batch), i]).argmax(-1), a.repeats)})
        rows[-1]["speedup"] = rows[-1]["reference_s"] / rows[-1]["raw_logits_s"]
        print(json.dumps(rows[-1]))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"batch": a.batch, "experts": a.experts, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
