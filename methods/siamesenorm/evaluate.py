"""Evaluation of every trained run through lm-eval.

Tiny scales: the held-out arithmetic prompts ("123+456=") are exported as an lm-eval
`generate_until` task (greedy decoding until the newline, exact match of the answer).
Paper scale: lm-eval's registered tasks by name (the `arithmetic` group, the OLMo downstream
set, `wikitext`). The validation loss, PPL and divergence flag come from the run's own
`train_summary.json` (measured on the fixed validation windows at the end of training).
"""
from __future__ import annotations

import math
import tempfile
from pathlib import Path

from methods.core.evaluate import export_task, metric, run_lm_eval
from methods.core.models import load_model
from methods.core.results import InputError, read_json

from .config import GENERATED_TASK, EvalConfig


def evaluate_runs(cfg: EvalConfig, run_dirs: list[str | Path], data_dir: str | Path) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as td:
        include = None
        if cfg.tasks == [GENERATED_TASK]:
            export_task(td, GENERATED_TASK, Path(data_dir) / "arith_eval.jsonl", "generate_until",
                        max_gen_toks=cfg.max_gen_toks, stop="\n")
            include = td
        for d in map(Path, run_dirs):
            s = read_json(d / "train_summary.json")
            model, tok = load_model(d)
            res = run_lm_eval(model, tok, cfg.tasks, include, cfg.batch_size, limit=cfg.limit)
            arith = metric(res, cfg.arith_task, cfg.arith_metric)
            rows.append({
                "run": d.name, "scheme": s["scheme"], "lr": s["lr"], "seed": s["seed"],
                "val_loss": s["val_loss"], "val_ppl": s["val_ppl"], "diverged": s["diverged"],
                "arith_score": arith if math.isfinite(arith) else 0.0,
                "lm_eval": res["results"], "lm_eval_s": res["lm_eval_s"],
            })
    if not rows:
        raise InputError("evaluate: no runs given")
    return rows
