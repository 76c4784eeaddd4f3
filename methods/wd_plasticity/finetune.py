"""Supervised fine-tuning of a pretrained base on one downstream task (arXiv 2602.11137).

The recipe is the same for every base: AdamW with λ_ft fixed (0 by default), so only the
pretraining λ varies; the loss is on answer tokens only. Each learning rate of the grid is a
separate run from the same base; the run with the lowest answer NLL on the dev split (never
test) is the fine-tuned model of this (base, task).
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, replace
from pathlib import Path

from methods.core.data import PromptAnswerBatches
from methods.core.evaluate import answer_nll
from methods.core.models import load_model, save_model
from methods.core.results import InputError, provenance, read_jsonl
from methods.core.train import train
from methods.wd_plasticity.config import FinetuneConfig

ANSWER_END = "\n"  # the model learns to stop; lm-eval's generate_until stops at "\n"


def select_run(runs: list[dict]) -> dict:
    """The run with the lowest dev answer NLL (ties: the smaller LR); diverged runs are out."""
    ok = [r for r in runs if math.isfinite(r["dev_answer_nll"])]
    if not ok:
        raise InputError("every fine-tuning run diverged (non-finite dev answer NLL)")
    return min(ok, key=lambda r: (r["dev_answer_nll"], r["lr"]))


def finetune(cfg: FinetuneConfig, base_dir: str | Path, task_dir: str | Path, seed: int,
             out_dir: str | Path) -> dict:
    """Run the LR grid; save the dev-selected model to `out_dir`; return every run's metrics."""
    import copy

    task_dir = Path(task_dir)
    train_rows = read_jsonl(task_dir / "train.jsonl")
    dev_rows = read_jsonl(task_dir / "dev.jsonl")
    if not train_rows or not dev_rows:
        raise InputError(f"empty train or dev split in {task_dir}")
    t0 = time.perf_counter()
    runs, best_state = [], None
    for lr in cfg.lrs:
        model, tok = load_model(base_dir, training=True)
        data = PromptAnswerBatches([(r["prompt"], r["answer"]) for r in train_rows], tok, end=ANSWER_END)
        tcfg = replace(cfg.train, lr=lr, seed=seed)
        rows = train(model, lambda s: data.batch(s, tcfg.batch_size, seed), tcfg,
                     desc=f"sft {task_dir.name} lr={lr:g}")
        run = {"lr": lr, "dev_answer_nll": answer_nll(model, tok, dev_rows, cfg.eval_batch_size),
               "final_train_loss": [r for r in rows if "loss" in r][-1]["loss"], "train_log": rows}
        runs.append(run)
        if select_run(runs) is run:
            best_state = copy.deepcopy(model.state_dict())
    best = select_run(runs)
    model.load_state_dict(best_state)
    save_model(model, tok, out_dir)
    return {"task": task_dir.name, "seed": seed, "selected_lr": best["lr"], "runs": runs,
            "config": asdict(cfg), "provenance": provenance(asdict(cfg), seed, time.perf_counter() - t0)}
