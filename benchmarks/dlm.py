"""Efficient-DLM decoding speed: the converted model's block-parallel decoder vs greedy AR
decoding of its base, same prompts, same machine, accuracy beside each.

    python benchmarks/dlm.py --root results/tiny/efficient_dlm          # after the tiny DAG
    python benchmarks/dlm.py --root R --variant blk_clean_posmask --seed 1 --batch-sizes 1 64 --repeats 3

For each batch size and threshold τ: median wall time over `--repeats` (AR and dLM interleaved per
repeat), tokens/s (generated tokens through the answer's newline), tokens per forward, exact match,
and the ratio dLM/AR. A sanity row times transformers' `generate` (greedy, KV cache) on the AR base
at batch 1, so our AR reference is not a straw man. Writes JSON and a PNG to --out.
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
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="results/tiny/efficient_dlm")
    ap.add_argument("--variant", default="blk_clean")
    ap.add_argument("--seed", type=int, default=0, help="which conversion seed (models/<variant>_s<seed>)")
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.99, 0.9, 0.7, 0.5])
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 100])
    ap.add_argument("--n-prompts", type=int, default=100, help="per task (the data step's tasks)")
    ap.add_argument("--n-batch1", type=int, default=20, help="prompts timed at batch size 1")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--block", type=int, default=8)
    ap.add_argument("--max-new", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="benchmarks/out/dlm")
    a = ap.parse_args(argv)

    import torch

    from methods.core.models import load_model
    from methods.efficient_dlm.config import EvalConfig
    from methods.efficient_dlm.run import _load_eval, decode_all

    torch.set_num_threads(a.threads)
    root = Path(a.root)
    ar, tok = load_model(root / "models" / "ar")
    model_dir = root / "models" / f"{a.variant}_s{a.seed}"
    dlm, _ = load_model(model_dir)
    spec = json.loads((model_dir / "variant.json").read_text())
    rows_all = _load_eval(root / "data", a.n_prompts)
    results = []
    for bs in a.batch_sizes:
        rows = rows_all if bs > 1 else rows_all[:a.n_batch1 // 2] + rows_all[-(a.n_batch1 // 2):]
        cfg = EvalConfig(block=a.block, thresholds=a.thresholds, max_new=a.max_new,
                         n_per_task=a.n_prompts, batch_size=bs)
        walls = {("ar", None): []} | {("dlm", t): [] for t in a.thresholds}
        last = {}
        for _ in range(a.repeats):
            for key in walls:
                r = decode_all(ar if key[0] == "ar" else dlm, tok, rows, key[0], cfg, key[1], spec)
                walls[key].append(r["wall_s"])
                last[key] = r
        ar_tps = last[("ar", None)]["tokens_per_s"] * last[("ar", None)]["wall_s"] / statistics.median(walls[("ar", None)])
        for key, w in walls.items():
            r = last[key]
            tps = r["tokens_per_s"] * r["wall_s"] / statistics.median(w)
            results.append({"batch_size": bs, "model": "ar" if key[0] == "ar" else a.variant,
                            "threshold": key[1], "acc": r["acc"], "tpf": r["tpf"], "tokens_per_s": tps,
                            "speedup_vs_ar": tps / ar_tps, "n_prompts": len(rows)})
            print(f"bs {bs:4d} {results[-1]['model']:>18} τ={key[1]}: acc {r['acc']:.3f} "
                  f"tpf {r['tpf']:.2f} tok/s {tps:8.1f} ×AR {tps / ar_tps:.2f}", flush=True)
    # sanity: transformers' generate on the AR base, batch 1, same prompts as our bs-1 AR row
    rows = rows_all[:a.n_batch1 // 2] + rows_all[-(a.n_batch1 // 2):]
    nl = tok.convert_tokens_to_ids("\n")
    ntok, t0 = 0, time.perf_counter()
    with torch.no_grad():
        for r in rows:
            ids = torch.tensor([tok(r["prompt"], add_special_tokens=False)["input_ids"]])
            g = ar.generate(ids, max_new_tokens=a.max_new, do_sample=False, eos_token_id=nl,
                            pad_token_id=tok.pad_token_id)[0, ids.shape[1]:].tolist()
            ntok += (g.index(nl) + 1) if nl in g else len(g)
    hf = {"hf_generate_bs1_tokens_per_s": ntok / (time.perf_counter() - t0)}
    print(f"HF generate (AR, bs 1): {hf['hf_generate_bs1_tokens_per_s']:.1f} tok/s", flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "dlm.json").write_text(json.dumps({"rows": results, **hf, "args": vars(a),
                                              "loadavg": Path("/proc/loadavg").read_text().split()[:3]}, indent=1))
    from methods.core.plots import figure, save

    fig, axes = figure(1, len(a.batch_sizes), figsize=(5 * len(a.batch_sizes), 4), squeeze=False)
    for ax, bs in zip(axes[0], a.batch_sizes):
        rr = [r for r in results if r["batch_size"] == bs and r["model"] != "ar"]
        arr = [r for r in results if r["batch_size"] == bs and r["model"] == "ar"][0]
        ax.plot([r["speedup_vs_ar"] for r in rr], [r["acc"] for r in rr], "o-", label=a.variant)
        for r in rr:
            ax.annotate(f"τ={r['threshold']:g}", (r["speedup_vs_ar"], r["acc"]), fontsize=7)
        ax.plot([1.0], [arr["acc"]], "k*", ms=12, label="AR base")
        ax.set(xlabel="tokens/s relative to AR decoding", ylabel="exact match", title=f"batch {bs}")
        ax.legend(fontsize=7)
    save(fig, out / "dlm_speed.png",
         f"Decoding speed of the converted model ({a.variant}, block {a.block}) relative to greedy AR "
         "decoding of its base with a KV cache, same prompts, single CPU thread, by confidence threshold; "
         "y: exact match on the held-out prompts of the generated tasks (tiny: addition + copy).")


if __name__ == "__main__":
    main()
