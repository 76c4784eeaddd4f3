"""LLM backend layer: requests/s of OpenAIBackend against our local OpenAI-compatible server
(methods/core/llm_server.py) serving a tiny random Llama, at concurrency 1 vs N.

    python benchmarks/llm_backend.py [--requests 48] [--concurrency 8] [--latency-s 0 0.05]
                                     [--transport urllib] [--out benchmarks/out/llm_backend.json]

Each request is one /v1/completions call (batch_size 1, 8 new tokens, temperature 1, seeded).
`--latency-s` adds a fixed per-answer delay on the server outside its model lock: 0 measures
the server+client overhead on a CPU-bound tiny model (the model runs under one lock, so
concurrency can only overlap HTTP/JSON work), 0.05 stands in for a remote endpoint's network
and queueing latency (what concurrency is for). Reports requests/s and the ratio N vs 1.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def tiny_backend():
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from methods.core.llm import HFBackend

    vocab = {t: i for i, t in enumerate(["<pad>", "</s>", "<unk>"] + [chr(c) for c in range(32, 127)])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex("[\\s\\S]"), behavior="isolated")
    tk.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="</s>",
                                  unk_token="<unk>")
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=128,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                      max_position_embeddings=128, pad_token_id=0, eos_token_id=1,
                      bos_token_id=None)
    torch.manual_seed(0)
    return HFBackend.from_model(LlamaForCausalLM(cfg).eval(), tok)


def run(requests: int, conc: int, latency: float, transport: str, backend) -> dict:
    from methods.core.llm import OpenAIBackend
    from methods.core.llm_server import LLMServer

    prompts = [f"prompt {i}" for i in range(requests)]
    out = {}
    with LLMServer(backend, latency_s=latency) as srv:
        for c in (1, conc):
            llm = OpenAIBackend(srv.base_url, "tiny", batch_size=1, concurrency=c,
                                transport=transport, max_retries=0, timeout=60)
            llm.generate(prompts[:2], max_new_tokens=8, temperature=1.0, seed=0)  # warm-up
            t0 = time.perf_counter()
            llm.generate(prompts, max_new_tokens=8, temperature=1.0, seed=0)
            out[c] = requests / (time.perf_counter() - t0)
    return {"latency_s": latency, "concurrency": conc, "rps_1": round(out[1], 2),
            f"rps_{conc}": round(out[conc], 2), "ratio": round(out[conc] / out[1], 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--latency-s", type=float, nargs="+", default=[0.0, 0.05])
    ap.add_argument("--transport", default="urllib", choices=["urllib", "openai"])
    ap.add_argument("--out", default="benchmarks/out/llm_backend.json")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    backend = tiny_backend()
    rows = [run(a.requests, a.concurrency, lat, a.transport, backend) for lat in a.latency_s]
    res = {"transport": a.transport, "rows": rows, "loadavg": open("/proc/loadavg").read().split()[:3]}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
