"""Evaluation of every trained run through lm-eval.

Tiny scales: the held-out arithmetic prompts ("123+456=") are exported as an lm-eval
`generate_until` task (greedy decoding until the newline, exact match of the answer); the
task YAMLs stay next to their data in the results' `lm_eval_tasks/` folder, so
`icml26-lm-eval --include_path <results>/siamesenorm/lm_eval_tasks` reruns the evaluation.
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
from methods.core.results import InputError, atomic_path, read_json, read_jsonl, write_jsonl

from .config import GENERATED_TASK, EvalConfig

NONTRIVIAL_TASK = GENERATED_TASK + "_nontrivial"


def is_trivial(row: dict) -> bool:
    """A held-out product by 0 or 1 (`a*0=`, `a*1=`): answered by one memorised pattern (0, or
    copying a), not by arithmetic."""
    return row["op"] == "*" and row["prompt"].rstrip("=").split("*")[1] in ("0", "1")


def export_tasks(cfg: EvalConfig, data_dir: str | Path, out_dir: str | Path) -> tuple[list[str], int | None]:
    """Write the lm-eval task folder `out_dir` (atomically; `lm_eval --include_path <out_dir>`
    reruns the evaluation): with our generated task, its YAML and the YAML of the held-out
    problems without the trivial products, each next to its data (methods.core.evaluate); at
    paper scale (lm-eval's registered tasks) an empty folder. Returns (the tasks to run, the
    number of non-trivial problems, or None without the split)."""
    with atomic_path(out_dir, is_dir=True) as tmp:
        if cfg.tasks != [GENERATED_TASK]:
            return list(cfg.tasks), None
        src = Path(data_dir) / "arith_eval.jsonl"
        export_task(tmp, GENERATED_TASK, src, "generate_until", max_gen_toks=cfg.max_gen_toks, stop="\n")
        kept = [r for r in read_jsonl(src) if not is_trivial(r)]
        write_jsonl(tmp / f"{NONTRIVIAL_TASK}.jsonl", kept)
        export_task(tmp, NONTRIVIAL_TASK, tmp / f"{NONTRIVIAL_TASK}.jsonl", "generate_until",
                    max_gen_toks=cfg.max_gen_toks, stop="\n")
    return [GENERATED_TASK, NONTRIVIAL_TASK], len(kept)


def evaluate_runs(cfg: EvalConfig, run_dirs: list[str | Path], data_dir: str | Path,
                  tasks_dir: str | Path | None = None) -> list[dict]:
    """lm-eval every run. With our generated task, the held-out problems without the trivial
    products (×0, ×1) are scored as a second task, so an analysis can tell arithmetic from one
    memorised pattern; at paper scale (lm-eval's registered tasks) there is no such split. The
    task YAMLs and their data are written to `tasks_dir` (`export_tasks`; None: a temporary
    folder)."""
    rows = []
    with tempfile.TemporaryDirectory() as td:
        tasks_dir = Path(tasks_dir) if tasks_dir is not None else Path(td) / "lm_eval_tasks"
        tasks, n_kept = export_tasks(cfg, data_dir, tasks_dir)
        include = tasks_dir if n_kept is not None else None
        for d in map(Path, run_dirs):
            s = read_json(d / "train_summary.json")
            model, tok = load_model(d)
            res = run_lm_eval(model, tok, tasks, include, cfg.batch_size, limit=cfg.limit)
            arith = metric(res, cfg.arith_task, cfg.arith_metric)
            row = {
                "run": d.name, "scheme": s["scheme"], "lr": s["lr"], "seed": s["seed"],
                "val_loss": s["val_loss"], "val_ppl": s["val_ppl"], "diverged": s["diverged"],
                "arith_score": arith if math.isfinite(arith) else 0.0,
                "lm_eval": res["results"], "lm_eval_s": res["lm_eval_s"],
            }
            if NONTRIVIAL_TASK in tasks:
                nt = metric(res, NONTRIVIAL_TASK, cfg.arith_metric)
                row["arith_nontrivial_score"] = nt if math.isfinite(nt) else 0.0
                row["n_arith_nontrivial"] = n_kept
            rows.append(row)
    if not rows:
        raise InputError("evaluate: no runs given")
    return rows
