"""Downstream evaluation of one base: pick each task's fine-tuning LR on dev, then evaluate the
base and the chosen fine-tuned models on the test split through lm-eval.

Per task, lm-eval runs two of our exported tasks: `<prefix>_<task>_ll` (loglikelihood of the
answer: answer NLL = log perplexity, and whether the answer is the greedy continuation) and
`<prefix>_<task>_gen` (greedy generation, exact match). Plasticity is the fine-tuned score and
its gain over the base (card §3: Δ_task(λ) = acc_FT(λ) − acc_base(λ)).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from methods.core.evaluate import export_task, metric, run_lm_eval
from methods.core.models import load_model
from methods.core.results import InputError, read_json

PREFIX = "wdp"


@dataclass
class EvalConfig:
    batch_size: int = 64
    limit: int | None = None       # lm-eval's per-task document limit (smoke only)
    max_gen_toks: int = 8


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


def select_lr(runs: list[dict]) -> dict:
    """The run with the lowest dev answer NLL (ties: the smaller LR)."""
    ok = [r for r in runs if math.isfinite(r["dev_answer_nll"])]
    if not ok:
        raise InputError(f"every fine-tuning run of task {runs[0]['task']} diverged")
    return min(ok, key=lambda r: (r["dev_answer_nll"], r["lr"]))


def scores(results: dict, task: str) -> dict:
    ll, gen = task_names(task)
    return {"answer_nll": math.log(metric(results, ll, "perplexity")),
            "answer_greedy_acc": metric(results, ll, "acc"),
            "exact_match": metric(results, gen, "exact_match")}


def evaluate_base(cfg: EvalConfig, base_dir: str | Path, ft: dict[str, list[tuple[Path, Path]]],
                  tasks_dir: str | Path) -> dict:
    """`ft` maps task → [(model_dir, metrics_json), ...] over the LR grid."""
    all_tasks = [n for t in ft for n in task_names(t)]
    model, tok = load_model(base_dir)
    base_res = run_lm_eval(model, tok, all_tasks, tasks_dir, cfg.batch_size, limit=cfg.limit)
    out = {"tasks": {}, "lm_eval_s": base_res["lm_eval_s"]}
    for task, runs in sorted(ft.items()):
        metas = [{**read_json(m), "dir": str(d)} for d, m in runs]
        best = select_lr(metas)
        model, tok = load_model(best["dir"])
        res = run_lm_eval(model, tok, list(task_names(task)), tasks_dir, cfg.batch_size, limit=cfg.limit)
        out["lm_eval_s"] += res["lm_eval_s"]
        base, tuned = scores(base_res, task), scores(res, task)
        out["tasks"][task] = {
            "selected_lr": best["lr"], "dev_answer_nll_by_lr": {f"{m['lr']:g}": m["dev_answer_nll"] for m in metas},
            "base": base, "finetuned": tuned,
            "gain": {k: tuned[k] - base[k] for k in tuned},
            "n_test": res["n_samples"].get(task_names(task)[0], {}).get("effective"),
        }
    return out
