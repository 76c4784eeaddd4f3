"""The hub path's lm-eval step (arXiv 2602.07729 reports math benchmarks): `hub.lm_eval_tasks` on
every base and GRPO run, in one process so that lm-eval indexes its task files once. Reported beside
the claims (summary.json `lm_eval`, table.csv columns); no claim reads it. Kept apart from
`hub.py` so that this step does not depend on the GRPO code."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from methods.core.results import read_json

from .config import EvalConfig


@dataclass
class LmEvalStep:
    """`hub.lm_eval_tasks` and the `eval` section (lm-eval batch size and item limit)."""
    tasks: list[str]
    eval: EvalConfig


def lm_eval_all(cfg: LmEvalStep, models: list[str]) -> dict:
    """lm-eval's `cfg.tasks` on every model directory (bases and runs, in the inference dtype of
    the runtime): {"models": {dir name: {"hub_id", "tasks": {task: its numeric metrics}}}}."""
    import os

    from lm_eval.tasks import TaskManager

    from methods.core.evaluate import LM_EVAL_TASKS_ENV, run_lm_eval
    from methods.core.models import load_model

    tm = TaskManager(include_path=os.environ.get(LM_EVAL_TASKS_ENV) or None)
    out = {}
    for d in models:
        meta = read_json(Path(d) / "meta.json")
        model, tok = load_model(d)
        res = run_lm_eval(model, tok, cfg.tasks, None, cfg.eval.lm_eval_batch_size, limit=cfg.eval.lm_eval_limit,
                          task_manager=tm)
        out[Path(d).name] = {"hub_id": meta.get("hub_id"), "tasks": {
            t: {k: float(v) for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            for t, row in res["results"].items()}}
        scores = {t: v for t, v in out[Path(d).name]["tasks"].items() if t in cfg.tasks}
        print(json.dumps({"lm_eval": Path(d).name, **scores}), file=sys.stderr, flush=True)
        del model
    return {"models": out}
