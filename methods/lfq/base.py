"""The full-precision base model (LFQ study, tiny scale): a tiny Llama trained with the shared
trainer on the PCFG + running-sum stream. At paper scale `hub_id` names the real model and
this step only copies it into a local model directory (no training)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from methods.core.models import ModelConfig, build_model, load_model, save_model
from methods.core.results import InputError
from methods.core.train import TrainConfig, evaluate_loss, train


@dataclass
class BaseConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(steps=300, batch_size=32, lr=3e-3))
    seq_len: int = 96
    val_batches: int = 8
    hub_id: str | None = None       # paper scale: the model to quantize, loaded instead of trained
    seed: int = 0

    def __post_init__(self):
        if self.seq_len > self.model.max_seq_len:
            raise InputError(f"config key 'seq_len' {self.seq_len} exceeds model.max_seq_len "
                             f"{self.model.max_seq_len}")


def train_base(cfg: BaseConfig, data_dir: str | Path, out_dir: str | Path) -> dict:
    import dataclasses

    from methods.core.data import TokenStream
    from methods.core.tokenizer import load_tokenizer

    if cfg.hub_id:
        model, tok = load_model(cfg.hub_id, dtype="auto")  # copied in its own dtype
        save_model(model, tok, out_dir)
        return {"hub_id": cfg.hub_id}
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
    save_model(model, tok, out_dir, extra_files={
        "train_log.json": json.dumps({"rows": rows, "summary": summary}, indent=2, sort_keys=True) + "\n"})
    return summary
