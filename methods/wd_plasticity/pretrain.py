"""Pretraining with AdamW at weight decay λ: the independent variable of the study
(arXiv 2602.11137).

Everything but λ is held fixed across the sweep (model, data order, schedule, seed), so two
runs that differ only in λ see the same batches in the same order from the same init.
"""
from __future__ import annotations

import time
from dataclasses import asdict, replace
from pathlib import Path

from methods.core import distributed
from methods.core.models import build_model, save_trained
from methods.core.results import dumps as strict_dumps, provenance
from methods.core.shards import ShardedTokenStream
from methods.core.tokenizer import load_tokenizer
from methods.core.train import evaluate_loss, train
from methods.wd_plasticity.config import PretrainConfig


def weight_rms(model, min_ndim: int = 2) -> float:
    """Root-mean-square of all entries of the decayed tensors (the ones λ acts on)."""
    import torch

    sq, n = 0.0, 0
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim >= min_ndim:
                # full: under FSDP a parameter is this rank's shard (a sum of it is not the sum)
                sq += float(distributed.full(p).double().pow(2).sum())
                n += p.numel()
    return (sq / max(1, n)) ** 0.5


def pretrain(cfg: PretrainConfig, weight_decay: float, seed: int, shards_dir: str | Path,
             tokenizer_dir: str | Path, out_dir: str | Path, ckpt_path: str | Path) -> dict:
    """`shards_dir` holds train/ and val/: pretrain.txt and val.txt tokenized once by the
    shards step (`python -m methods.core shards`), read from disk by (seed, step)."""
    shards_dir = Path(shards_dir)
    tok = load_tokenizer(tokenizer_dir)
    train_stream = ShardedTokenStream(shards_dir / "train", cfg.seq_len)
    val_stream = ShardedTokenStream(shards_dir / "val", cfg.seq_len)
    val_batches = val_stream.sequential_batches(cfg.train.batch_size, cfg.eval_batches)
    tcfg = replace(cfg.train, weight_decay=weight_decay, seed=seed)
    model = build_model(cfg.model, tok, seed)

    def eval_fn() -> dict:
        return {"val_loss": evaluate_loss(model, val_batches), "weight_rms": weight_rms(model, tcfg.decay_min_ndim)}

    t0 = time.perf_counter()
    log = Path(ckpt_path).with_suffix(".log.jsonl")
    rows = train(model, lambda s: train_stream.batch(s, tcfg.batch_size, seed), tcfg, eval_fn=eval_fn,
                 ckpt_path=ckpt_path, log_path=log, desc=f"pretrain wd={weight_decay:g} seed={seed}",
                 identity={"model": asdict(cfg.model), "seq_len": cfg.seq_len,
                           "data": [s.get("sha256") for s in train_stream.index["shards"]]})
    wall = time.perf_counter() - t0
    final = [r for r in rows if "val_loss" in r][-1]
    summary = {"weight_decay": weight_decay, "seed": seed, "steps": tcfg.steps,
               "tokens": tcfg.steps * tcfg.batch_size * cfg.seq_len,
               "n_params": sum(p.numel() for p in model.parameters()),
               "final_train_loss": [r for r in rows if "loss" in r][-1]["loss"],
               "val_loss": final["val_loss"], "weight_rms": final["weight_rms"],
               "config": {"model": asdict(cfg.model), "train": asdict(tcfg), "seq_len": cfg.seq_len},
               "provenance": provenance(asdict(cfg), seed, wall)}
    save_trained(model, tok, out_dir, log_path=log, extra_files={
        "train_summary.json": strict_dumps(summary, indent=2, sort_keys=True) + "\n"})
    return summary
