"""Memora retrieval cost on LoCoMo-lite (tiny config): build time per store and per-query latency
of flat RAG, semantic lookup and the anchor-walking policy (cf. the paper's Table 4: semantic
0.235 s vs policy 4.6 s with gpt-4.1-mini; here the policy LLM is the template simulator, so
this measures only the memory side), plus cosine top-k against scikit-learn brute force.

    python benchmarks/memora.py [--emb results/tiny/memora/emb.npz]

Without --emb the hashing embedder is used (no model load); with a tiny run's cache, MiniLM
vectors (misses are embedded by loading MiniLM).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from methods.memora import memory, run, synth  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--emb", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    cfg = yaml.safe_load((ROOT / "config/scales/tiny.yaml").read_text())["memora"]
    convs, qas = synth.generate(synth.SynthConfig(**cfg["data"]["synth"]))
    embed = (run.load_cache(a.emb, "minilm") if a.emb
             else memory.EmbeddingCache(fallback=lambda: memory.HashEmbedder()))
    llm, bc, pc = memory.TemplateMemoraLLM(), memory.BuildConfig(**cfg["build"]), memory.PolicyConfig(**cfg["policy"])
    embed([q["question"] for q in qas])  # warm the cache
    stores, t_build = {}, {}
    for name in ("rag", "factstore", "memora", "memora_noanchor"):
        t0 = time.perf_counter()
        for c in convs:
            if name == "rag":
                stores[(name, c["conv_id"])] = memory.RAGIndex(memory.rag_chunks(c, bc.chunk_turns), embed)
            elif name == "factstore":
                stores[(name, c["conv_id"])] = memory.build_factstore(c, llm, embed)
            else:
                stores[(name, c["conv_id"])] = memory.build_memora(c, llm, embed, bc, name == "memora", name)
        t_build[name] = (time.perf_counter() - t0) / len(convs)
    print(f"embedder: {'MiniLM cache ' + a.emb if a.emb else 'hashing'}; {len(convs)} conversations, {len(qas)} questions")
    for k, v in t_build.items():
        print(f"build {k:16s} {1e3 * v:8.2f} ms / conversation")
    for name, pol in [("rag", "semantic"), ("memora", "semantic"), ("memora", "policy"), ("memora_noanchor", "policy")]:
        times = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            for q in qas:
                st = stores[(name, q["conv_id"])]
                if name == "rag":
                    st.search(embed([q["question"]])[0], pc.k)
                else:
                    memory.retrieve(st, q["question"], embed, pol, llm, pc)
            times.append((time.perf_counter() - t0) / len(qas))
        print(f"retrieve {name}+{pol:9s} {1e3 * statistics.median(times):7.3f} ms / query (median of {a.repeats})")
    from sklearn.neighbors import NearestNeighbors
    rng = np.random.default_rng(0)
    mat, qs = rng.normal(size=(10_000, 384)).astype(np.float32), rng.normal(size=(100, 384)).astype(np.float32)
    t0 = time.perf_counter()
    ours = [memory.cosine_topk(mat, q, 5)[0] for q in qs]
    t_ours = (time.perf_counter() - t0) / len(qs)
    nn = NearestNeighbors(n_neighbors=5, metric="cosine", algorithm="brute").fit(mat)
    t0 = time.perf_counter()
    ref = nn.kneighbors(qs, return_distance=False)
    t_ref = (time.perf_counter() - t0) / len(qs)
    agree = np.mean([list(o) == list(r) for o, r in zip(ours, ref)])
    print(f"cosine top-5 over 10k×384: ours {1e3 * t_ours:.2f} ms/query, sklearn brute (batched) "
          f"{1e3 * t_ref:.2f} ms/query, identical top-5 on {100 * agree:.0f}% of queries")


if __name__ == "__main__":
    main()
