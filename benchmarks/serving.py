"""Served models of the DAG: requests/s through the serving path (methods/core/serving/) at
concurrency 1 vs 16, with the server's start-up and tear-down times.

    python benchmarks/serving.py [--requests 64] [--max-new-tokens 8] [--model DIR]
                                 [--out benchmarks/out/serving.json]

What a DAG step does: `python -m methods.core.serving serve --engine local` (our llm_server on
127.0.0.1, the stand-in of `vllm serve`) is started as Snakemake starts a serving job; the client
waits for the published address file and builds its LLM with make_llm(base_url_file=...); it sends
`--requests` chat requests (one conversation each, greedy, `--max-new-tokens`) with OpenAIBackend
concurrency 1, then 16; then SIGTERM stops the serving process and its server. Without --model, a
tiny random Llama with a character tokenizer (d 64, 2 layers) is written to a temporary
directory. The model runs under one lock in llm_server (CPU, not re-entrant), so concurrency can
only overlap the HTTP/JSON work here; vLLM batches concurrent requests, which is where the ratio
grows on a GPU. Reports requests/s at both settings and their ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def tiny_model(d: Path) -> Path:
    import torch
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "</s>", "<unk>"]
    vocab = {t: i for i, t in enumerate(specials + [chr(c) for c in range(32, 127)] + ["\n"])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Split(Regex("[\\s\\S]"), behavior="isolated")
    tk.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512, pad_token_id=0,
                      eos_token_id=1, bos_token_id=None, tie_word_embeddings=False)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).eval().save_pretrained(d)
    tok.save_pretrained(d)
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--max-new-tokens", type=int, default=8)
    ap.add_argument("--model", default=None)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "out" / "serving.json"))
    a = ap.parse_args()

    from methods.core.llm import make_llm
    from methods.core.results import write_json
    from methods.core.serving import read_address

    with tempfile.TemporaryDirectory() as tmp:
        model = Path(a.model) if a.model else tiny_model(Path(tmp) / "model")
        addr = Path(tmp) / "address.json"
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "methods.core.serving", "serve", "--name", "bench",
                                 "--model", str(model), "--served-name", "bench", "--engine", "local",
                                 "--address", str(addr)], cwd=ROOT, stderr=subprocess.DEVNULL,
                                env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
        try:
            info = read_address(addr, wait_s=300)
            ready_s = time.perf_counter() - t0
            convs = [[{"role": "user", "content": f"Tell me about item {i}."}] for i in range(a.requests)]
            rates = {}
            for conc in (1, 16):
                llm = make_llm({"backend": "openai", "base_url_file": str(addr), "api_key_env": None,
                                "concurrency": conc, "timeout": 120})
                llm.chat(convs[:2], max_new_tokens=a.max_new_tokens)  # warm-up
                t1 = time.perf_counter()
                out = llm.chat(convs, max_new_tokens=a.max_new_tokens, temperature=0.0)
                wall = time.perf_counter() - t1
                assert len(out) == a.requests
                rates[conc] = a.requests / wall
        finally:
            t2 = time.perf_counter()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
            stop_s = time.perf_counter() - t2
    res = {"requests": a.requests, "max_new_tokens": a.max_new_tokens, "engine": info["engine"],
           "model": "tiny random Llama (d 64, L 2, char tokenizer)" if not a.model else str(a.model),
           "ready_s": round(ready_s, 3), "stop_s": round(stop_s, 3),
           "requests_per_s": {"concurrency_1": round(rates[1], 2), "concurrency_16": round(rates[16], 2)},
           "ratio_16_vs_1": round(rates[16] / rates[1], 3), "cpu_count": os.cpu_count()}
    write_json(a.out, res)
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
