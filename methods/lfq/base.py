"""The full-precision base model (LFQ study, tiny scale): a tiny Llama trained with the shared
trainer on the PCFG + running-sum stream. At paper scale `hub_id` names the real model and
this step only copies it into a local model directory (no training)."""
from __future__ import annotations

import math
from pathlib import Path

from methods.core.models import build_model, hub_or_trained_base
from methods.core.results import dumps as strict_dumps
from methods.core.train import evaluate_loss, train

from .config import BaseConfig


def train_base(cfg: BaseConfig, data_dir: str | Path, out_dir: str | Path) -> dict:
    """The DAG step: the hub model copied as is at paper scale, else the tiny base trained."""
    return hub_or_trained_base(cfg.hub_id, out_dir, lambda: _train(cfg, data_dir))


def _train(cfg: BaseConfig, data_dir: str | Path):
    import dataclasses

    from methods.core.data import TokenStream
    from methods.core.tokenizer import load_tokenizer

    data_dir = Path(data_dir)
    tok = load_tokenizer(data_dir / "tokenizer")
    stream = TokenStream.from_text((data_dir / "train.txt").read_text(), tok, cfg.seq_len)
    val = TokenStream.from_text((data_dir / "val.txt").read_text(), tok, cfg.seq_len)
    val_batches = val.sequential_batches(cfg.train.batch_size, cfg.val_batches)
    model = build_model(cfg.model, tok, cfg.seed)
    tcfg = dataclasses.replace(cfg.train, seed=cfg.seed)
    rows = train(model, lambda s: stream.batch(s, tcfg.batch_size, tcfg.seed), tcfg,
                 eval_fn=lambda: {"val_loss": evaluate_loss(model, val_batches)}, desc="lfq fp")
    val_loss = rows[-1]["val_loss"]
    n_params = sum(p.numel() for p in model.parameters())
    summary = {"val_loss": val_loss, "val_ppl": math.exp(val_loss), "n_params": n_params,
               "final_train_loss": next(r["loss"] for r in reversed(rows) if "loss" in r)}
    # the log goes into the atomically written directory, so a crash leaves no half model
    return model, tok, summary, {
        "train_log.json": strict_dumps({"rows": rows, "summary": summary}, indent=2, sort_keys=True) + "\n"}
