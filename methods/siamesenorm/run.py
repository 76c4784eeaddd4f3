"""One training run of the sweep: a norm scheme at a peak learning rate and
a seed, with the shared trainer; the validation loss before and after, the divergence flag
and per-layer gradient norms at a fixed step (step 4, C5).

Everything but (scheme, lr) is held fixed within a seed: the same init seed, the same batches
in the same order, the same schedule.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, replace
from pathlib import Path

from methods.core import distributed
from methods.core.models import save_trained
from methods.core.results import InputError, dumps as strict_dumps, provenance
from methods.core.shards import ShardedTokenStream
from methods.core.tokenizer import load_tokenizer
from methods.core.train import evaluate_loss, train

from .config import RunConfig
from .model import build_siamese_model


def layer_grad_norms(model) -> list[float]:
    """‖∇θ_l‖₂ over all parameters of layer l (attention, FFN and the layer's norms), per l."""
    import torch

    out = []
    for layer in model.model.layers:
        # full: under FSDP a gradient is this rank's shard (its sum of squares is not the layer's)
        sq = sum(float(distributed.full(p.grad).double().pow(2).sum())
                 for p in layer.parameters() if p.grad is not None)
        out.append(math.sqrt(sq))
    if not out:
        raise InputError("model has no layers")
    return out if torch.isfinite(torch.tensor(out)).all() else [float("nan")] * len(out)


def is_diverged(initial: float, final: float, ratio: float) -> bool:
    return not math.isfinite(final) or final > ratio * initial


def train_run(cfg: RunConfig, scheme: str, lr: float, seed: int, data_dir: str | Path, shards_dir: str | Path,
              out_dir: str | Path, ckpt_path: str | Path) -> dict:
    """`data_dir` holds the tokenizer; `shards_dir` the corpus tokenized once (train/, val/)."""
    data_dir, shards_dir = Path(data_dir), Path(shards_dir)
    if not (data_dir / "tokenizer").exists():
        raise InputError(f"missing input: {data_dir / 'tokenizer'}")
    tok = load_tokenizer(data_dir / "tokenizer")
    train_stream = ShardedTokenStream(shards_dir / "train", cfg.seq_len)
    val_stream = ShardedTokenStream(shards_dir / "val", cfg.seq_len)
    val_batches = val_stream.sequential_batches(cfg.train.batch_size, cfg.eval_batches)
    tcfg = replace(cfg.train, lr=lr, seed=seed)
    model = build_siamese_model(cfg.model, tok, seed, scheme, cfg.hybrid_attn_norm)
    initial = evaluate_loss(model, val_batches)

    def grad_probe(done: int) -> dict | None:
        if done != cfg.grad_stats_step:
            return None
        return {"layer_grad_norms": layer_grad_norms(model)}

    log = Path(ckpt_path).with_suffix(".log.jsonl")
    t0 = time.perf_counter()
    rows = train(model, lambda s: train_stream.batch(s, tcfg.batch_size, seed), tcfg,
                 eval_fn=lambda: {"val_loss": evaluate_loss(model, val_batches)}, ckpt_path=ckpt_path,
                 log_path=log, desc=f"{scheme} lr={lr:g} seed={seed}", grad_probe=grad_probe,
                 identity={"model": asdict(cfg.model), "scheme": scheme, "hybrid_attn_norm": cfg.hybrid_attn_norm,
                           "seq_len": cfg.seq_len, "data": [s.get("sha256") for s in train_stream.index["shards"]]})
    wall = time.perf_counter() - t0
    final = [r for r in rows if "val_loss" in r][-1]["val_loss"]
    norms = next(r["layer_grad_norms"] for r in rows if "layer_grad_norms" in r)
    summary = {
        "scheme": model.config.norm_scheme, "lr": lr, "seed": seed, "steps": tcfg.steps,
        "n_params": sum(p.numel() for p in model.parameters()),
        "initial_val_loss": initial, "val_loss": final,
        "val_ppl": math.exp(final) if math.isfinite(final) and final < 700 else float("inf"),
        "diverged": is_diverged(initial, final, cfg.diverge_ratio),
        "grad_stats_step": cfg.grad_stats_step, "layer_grad_norms": norms,
        "grad_ratio_first_last": norms[0] / norms[-1] if norms[-1] > 0 else float("nan"),
        "train_s": round(wall, 2), "wall_ms_per_step": round(1000 * wall / tcfg.steps, 2),  # eval included; timing is steptime's job
        "config": {"model": asdict(cfg.model), "train": asdict(tcfg), "seq_len": cfg.seq_len},
        "provenance": provenance(asdict(cfg), seed, wall),
    }
    save_trained(model, tok, out_dir, log_path=log, extra_files={
        "train_summary.json": strict_dumps(summary, indent=2, sort_keys=True) + "\n"})
    return summary
