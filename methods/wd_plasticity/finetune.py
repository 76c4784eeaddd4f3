"""Supervised fine-tuning of a pretrained base on one downstream task (card §3, §5).

The fine-tuning recipe is the same for every base: AdamW with λ_ft fixed (0 by default), so
only the pretraining λ varies; the loss is on answer tokens only. Each learning rate of the
grid is a separate run; the best one per (base, task) is chosen on the dev split's answer NLL
(never on test).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from methods.core.data import PromptAnswerBatches
from methods.core.evaluate import answer_nll
from methods.core.models import load_model, save_model
from methods.core.results import InputError, provenance, read_jsonl
from methods.core.train import TrainConfig, train

ANSWER_END = "\n"  # the model learns to stop; lm-eval's generate_until stops at "\n"


@dataclass
class FinetuneConfig:
    train: TrainConfig = field(default_factory=lambda: TrainConfig(steps=300, batch_size=32, lr=1e-3))
    lrs: list[float] = field(default_factory=lambda: [1e-3, 3e-3])
    eval_batch_size: int = 64


def finetune(cfg: FinetuneConfig, base_dir: str | Path, task_dir: str | Path, lr: float, seed: int,
             out_dir: str | Path) -> dict:
    task_dir = Path(task_dir)
    model, tok = load_model(base_dir)
    train_rows = read_jsonl(task_dir / "train.jsonl")
    dev_rows = read_jsonl(task_dir / "dev.jsonl")
    if not train_rows or not dev_rows:
        raise InputError(f"empty train or dev split in {task_dir}")
    data = PromptAnswerBatches([(r["prompt"], r["answer"]) for r in train_rows], tok, end=ANSWER_END)
    tcfg = replace(cfg.train, lr=lr, seed=seed)
    t0 = time.perf_counter()
    rows = train(model, lambda s: data.batch(s, tcfg.batch_size, seed), tcfg,
                 desc=f"sft {task_dir.name} lr={lr:g}")
    dev_nll = answer_nll(model, tok, dev_rows, cfg.eval_batch_size)
    wall = time.perf_counter() - t0
    metrics = {"task": task_dir.name, "lr": lr, "seed": seed, "dev_answer_nll": dev_nll,
               "final_train_loss": [r for r in rows if "loss" in r][-1]["loss"],
               "train_log": rows, "config": asdict(tcfg)}
    save_model(model, tok, out_dir)
    return {**metrics, "provenance": provenance(asdict(cfg), seed, wall)}
