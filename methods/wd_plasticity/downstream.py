"""Downstream evaluation of one base: the base and its fine-tuned models (one per task, LR
chosen on dev by `finetune`) on the test split, through lm-eval.

Per task, lm-eval runs two of our exported tasks: `<prefix>_<task>_ll` (loglikelihood of the
answer: answer NLL = log perplexity, and whether the answer is the greedy continuation) and
`<prefix>_<task>_gen` (greedy generation, exact match). Plasticity is the fine-tuned score and
its gain over the base (our definition following the paper's wording: Δ_task(λ) = acc_FT(λ) − acc_base(λ)).
"""
from __future__ import annotations

import math
from pathlib import Path

from methods.core.evaluate import export_task, metric, run_lm_eval
from methods.core.models import load_model
from methods.core.results import InputError, read_json
from methods.wd_plasticity.config import EvalConfig

PREFIX = "wdp"


def task_names(task: str) -> tuple[str, str]:
    return f"{PREFIX}_{task.lower()}_ll", f"{PREFIX}_{task.lower()}_gen"


def export_tasks(data_dir: str | Path, tasks: list[str], out_dir: str | Path, max_gen_toks: int) -> list[Path]:
    paths = []
    for t in tasks:
        ll, gen = task_names(t)
        test = Path(data_dir) / "tasks" / t / "test.jsonl"
        paths.append(export_task(out_dir, ll, test, "loglikelihood"))
        paths.append(export_task(out_dir, gen, test, "generate_until", max_gen_toks=max_gen_toks))
    return paths


def scores(results: dict, task: str) -> dict:
    ll, gen = task_names(task)
    return {"answer_nll": math.log(metric(results, ll, "perplexity")),
            "answer_greedy_acc": metric(results, ll, "acc"),
            "exact_match": metric(results, gen, "exact_match")}


def evaluate_base(cfg: EvalConfig, base_dir: str | Path, ft: dict[str, tuple[Path, Path]],
                  tasks_dir: str | Path) -> dict:
    """`ft` maps task → (fine-tuned model dir, its fine-tuning metrics JSON)."""
    all_tasks = [n for t in ft for n in task_names(t)]
    model, tok = load_model(base_dir)
    base_res = run_lm_eval(model, tok, all_tasks, tasks_dir, cfg.batch_size, limit=cfg.limit)
    out = {"tasks": {}, "lm_eval_s": base_res["lm_eval_s"]}
    for task, (model_dir, metrics) in sorted(ft.items()):
        meta = read_json(metrics)
        if meta["task"] != task:
            raise InputError(f"{metrics} is for task {meta['task']!r}, not {task!r}")
        model, tok = load_model(model_dir)
        res = run_lm_eval(model, tok, list(task_names(task)), tasks_dir, cfg.batch_size, limit=cfg.limit)
        out["lm_eval_s"] += res["lm_eval_s"]
        base, tuned = scores(base_res, task), scores(res, task)
        out["tasks"][task] = {
            "selected_lr": meta["selected_lr"],
            "dev_answer_nll_by_lr": {f"{r['lr']:g}": r["dev_answer_nll"] for r in meta["runs"]},
            "base": base, "finetuned": tuned,
            "gain": {k: tuned[k] - base[k] for k in tuned},
            "n_test": res["n_samples"].get(task_names(task)[0], {}).get("effective"),
        }
    return out
