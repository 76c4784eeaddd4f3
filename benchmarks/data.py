"""Streaming token shards vs the in-memory token stream: peak memory as the corpus grows.

    python benchmarks/data.py [--base-mb 1] [--scales 1 10 100] [--old-scales 1 10]
                              [--batches 200] [--batch-size 16] [--seq-len 128] [--seq-batches 50]
                              [--vocab-size 1000] [--shard-tokens 16777216] [--out benchmarks/out/data.json]

A synthetic JSONL corpus (documents of Zipf-distributed pseudo-words, paragraphs separated by
blank lines) is written at 1×, 10× and 100× `--base-mb` MB of JSONL, and a byte-level BPE
tokenizer (`methods.core.tokenizer.train_tokenizer(kind="bpe")`) is trained on its first
documents. For each size, in a fresh process:
  new path  `write_shards(stream_texts(corpus))` (documents streamed, EOS after each), then
            `ShardedTokenStream`: `--batches` random batches of `--batch-size` × `--seq-len`
            and the first `--seq-batches` sequential (evaluation) batches;
  old path  (`--old-scales` only) every record read, the texts joined and tokenized in one
            piece by `TokenStream.from_text`, then the same batches.
Each child reports its peak resident memory (`resource.getrusage(RUSAGE_SELF).ru_maxrss`), the
same after its imports and tokenizer load (so the growth of the step itself is visible), and
its wall times. The new path must not grow with the corpus: peak(10×)/peak(1×) and
peak(100×)/peak(1×) are checked against 1.2; the exit status is 1 if either exceeds it.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
LIMIT = 1.2


# ------------------------------------------------------------------------ the corpus ----
def _words(rng: random.Random, n: int) -> list[str]:
    syl = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"] + ["an", "er", "is", "on", "th", "qu"]
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rng.choice(syl) for _ in range(rng.choice((1, 2, 2, 3, 3, 4)))))
    return sorted(out)


def write_corpus(path: Path, n_bytes: int, seed: int = 0) -> int:
    """JSONL documents until `n_bytes` bytes; returns the number of documents."""
    rng = random.Random(seed)
    words = _words(rng, 5000)
    cum, acc = [], 0.0
    for r in range(1, len(words) + 1):  # Zipf(1): a few frequent words, a long tail
        acc += 1.0 / r
        cum.append(acc)
    size = n = 0
    with open(path, "w", encoding="utf-8", buffering=1 << 20) as f:
        while size < n_bytes:
            paras = []
            for _ in range(rng.randint(1, 4)):
                sents = [" ".join(rng.choices(words, cum_weights=cum, k=rng.randint(4, 18))).capitalize() + "."
                         for _ in range(rng.randint(2, 8))]
                paras.append(" ".join(sents))
            line = json.dumps({"id": n, "text": "\n\n".join(paras)}) + "\n"
            f.write(line)
            size += len(line.encode())
            n += 1
    return n


def prefix_corpus(src: Path, dst: Path, n_bytes: int) -> None:
    """The first documents of `src` up to `n_bytes` bytes (the smaller sizes are prefixes of
    the largest, so they are generated once)."""
    size = 0
    with open(src, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as g:
        for line in f:
            if size >= n_bytes:
                break
            g.write(line)
            size += len(line.encode())


# -------------------------------------------------------------------------- children ----
def _peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _read(stream, a) -> tuple[float, int]:
    """The random and sequential batches of a stream: (seconds, a checksum so nothing is skipped)."""
    t0, check = time.perf_counter(), 0
    for step in range(a.batches):
        check += int(stream.batch(step, a.batch_size, 0)["input_ids"].sum())
    for b in stream.sequential_batches(a.batch_size, a.seq_batches):
        check += int(b["labels"].sum())
    return time.perf_counter() - t0, check


def child(a) -> dict:
    import torch

    from methods.core.tokenizer import load_tokenizer

    torch.set_num_threads(1)
    tok = load_tokenizer(a.tokenizer)
    base = _peak_mb()
    out = {"path": a.child, "corpus_bytes": Path(a.corpus).stat().st_size, "import_peak_mb": base}
    t0 = time.perf_counter()
    if a.child == "sharded":
        from methods.core.data import stream_texts
        from methods.core.shards import ShardedTokenStream, write_shards

        idx = write_shards(stream_texts(a.corpus, "text"), tok, a.shards, shard_tokens=a.shard_tokens)
        out["prepare_s"] = time.perf_counter() - t0
        stream = ShardedTokenStream(a.shards, a.seq_len)
        out.update(tokens=idx["total_tokens"], shards=len(idx["shards"]), dtype=idx["dtype"])
    else:
        from methods.core.data import TokenStream
        from methods.core.results import read_jsonl

        stream = TokenStream.from_text("\n".join(r["text"] for r in read_jsonl(a.corpus)), tok, a.seq_len)
        out["prepare_s"] = time.perf_counter() - t0
        out.update(tokens=len(stream), shards=None, dtype="int64 (torch)")
    out["read_s"], out["checksum"] = _read(stream, a)
    out["peak_mb"] = _peak_mb()
    out["growth_mb"] = out["peak_mb"] - base
    return out


def run_child(kind: str, corpus: Path, shards: Path, tok_dir: Path, a) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, "--corpus", str(corpus), "--shards", str(shards),
           "--tokenizer", str(tok_dir), "--batches", str(a.batches), "--batch-size", str(a.batch_size),
           "--seq-len", str(a.seq_len), "--seq-batches", str(a.seq_batches), "--shard-tokens", str(a.shard_tokens)]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if out.returncode:
        raise RuntimeError(f"{kind} child failed:\n{out.stderr[-3000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["child_wall_s"] = time.perf_counter() - t0
    return res


# ------------------------------------------------------------------------------ main ----
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-mb", type=float, default=1.0, help="1× corpus size (MB of JSONL)")
    p.add_argument("--scales", type=int, nargs="+", default=[1, 10, 100])
    p.add_argument("--old-scales", type=int, nargs="*", default=[1, 10])
    p.add_argument("--batches", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--seq-batches", type=int, default=50, help="sequential (evaluation) batches read")
    p.add_argument("--vocab-size", type=int, default=1000)
    p.add_argument("--shard-tokens", type=int, default=2 ** 24, help="the write_shards default")
    p.add_argument("--workdir", default=None, help="keep the corpora and shards here (default: a temp dir)")
    p.add_argument("--out", default="benchmarks/out/data.json")
    p.add_argument("--child", choices=["sharded", "old"], help=argparse.SUPPRESS)
    p.add_argument("--corpus", help=argparse.SUPPRESS)
    p.add_argument("--shards", help=argparse.SUPPRESS)
    p.add_argument("--tokenizer", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(child(a)))
        return 0
    if 1 not in a.scales:
        p.error("--scales must include 1 (the ratios are to 1×)")

    tmp = tempfile.TemporaryDirectory(prefix="bench_data_") if a.workdir is None else None
    work = Path(a.workdir or tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    top = max(a.scales)
    big = work / f"corpus_{top}x.jsonl"
    n_docs = write_corpus(big, int(top * a.base_mb * 2 ** 20))
    for s in a.scales:
        if s != top:
            prefix_corpus(big, work / f"corpus_{s}x.jsonl", int(s * a.base_mb * 2 ** 20))
    gen_s = time.perf_counter() - t0

    from methods.core.data import stream_texts
    from methods.core.tokenizer import save_tokenizer, train_tokenizer

    t0 = time.perf_counter()
    sample = [t for t, _ in zip(stream_texts(work / "corpus_1x.jsonl", "text"), range(2000))]
    save_tokenizer(train_tokenizer(sample, "bpe", a.vocab_size), work / "tok")
    tok_s = time.perf_counter() - t0
    print(f"corpus: {top}× = {big.stat().st_size / 2**20:.0f} MB JSONL, {n_docs:,} documents ({gen_s:.1f} s); "
          f"BPE tokenizer V = {a.vocab_size} on {len(sample)} documents ({tok_s:.1f} s); "
          f"{a.batches} random batches of {a.batch_size} × {a.seq_len} + {a.seq_batches} sequential; "
          f"shard_tokens {a.shard_tokens:,}", flush=True)

    rows = []
    for s in a.scales:
        kinds = ["sharded"] + (["old"] if s in a.old_scales else [])
        for kind in kinds:
            r = run_child(kind, work / f"corpus_{s}x.jsonl", work / f"shards_{s}x", work / "tok", a)
            r["scale"] = s
            rows.append(r)
            print(f"  {s:>4}× {kind:8s} peak {r['peak_mb']:7.1f} MB ({r['child_wall_s']:.1f} s)", flush=True)

    hdr = (f"{'scale':>5} {'corpus MB':>9} {'path':8s} {'tokens':>12} {'shards':>6} {'prepare s':>9} "
           f"{'Mtok/s':>7} {'read s':>7} {'import MB':>9} {'peak MB':>8} {'growth MB':>9}")
    print("\n" + hdr)
    for r in rows:
        sh = "–" if r["shards"] is None else str(r["shards"])
        print(f"{r['scale']:>4}× {r['corpus_bytes'] / 2**20:9.1f} {r['path']:8s} {r['tokens']:>12,} {sh:>6} "
              f"{r['prepare_s']:9.2f} {r['tokens'] / r['prepare_s'] / 1e6:7.2f} {r['read_s']:7.2f} "
              f"{r['import_peak_mb']:9.1f} {r['peak_mb']:8.1f} {r['growth_mb']:9.1f}")

    peak = {(r["path"], r["scale"]): r["peak_mb"] for r in rows}
    ok, ratios = True, {}
    print()
    for s in a.scales:
        if s == 1:
            continue
        ratio = peak[("sharded", s)] / peak[("sharded", 1)]
        ratios[f"sharded_{s}x_over_1x"] = ratio
        verdict = "PASS" if ratio <= LIMIT else "FAIL"
        ok &= ratio <= LIMIT
        print(f"sharded peak RSS {s}×/1×: {ratio:.3f} (limit {LIMIT}) {verdict}")
    for s in a.old_scales:
        if s != 1 and ("old", 1) in peak and ("old", s) in peak:
            ratios[f"old_{s}x_over_1x"] = peak[("old", s)] / peak[("old", 1)]
            print(f"old path (TokenStream.from_text) peak RSS {s}×/1×: {ratios[f'old_{s}x_over_1x']:.3f} "
                  f"(sharded at {s}×: {peak[('sharded', s)]:.0f} MB, old: {peak[('old', s)]:.0f} MB)")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": {k: v for k, v in vars(a).items() if k not in ("child", "corpus", "shards",
                                                                                       "tokenizer")},
                               "corpus_docs": n_docs, "generate_s": gen_s, "rows": rows, "ratios": ratios,
                               "limit": LIMIT, "pass": ok}, indent=2) + "\n")
    if tmp is not None:
        tmp.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
