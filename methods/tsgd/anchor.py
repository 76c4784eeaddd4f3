"""The lm-eval anchor (paper scale): the served solver evaluated by lm-eval itself on held-out
benchmark tasks (MATH-500, AIME 2024, AIME 2025 as `hendrycks_math500`, `aime24`, `aime25`),
zero-shot and with the optimised experience library in the system prompt.

The paper's result is test accuracy on MATH / AIME with the optimised library against zero-shot
(OpenReview zVv11MhFLD, abstract: "up to 18.7%"). Our harness scores those with our own answer
checker (methods/tsgd/answer.py); this step scores the same two systems with lm-eval's standard
prompts and answer extraction, so the gain can be read against a common yardstick. lm-eval talks
to the endpoint of `llm.endpoints[0]` through its `local-chat-completions` model (one
/chat/completions request per problem, the server applies the chat template); the system prompt
is `SOLVER_SYSTEM`, plus the library's rules rendered as the solver sees them (all rules: the
library must fit `max_full_context`, as the solver puts all of them in context then).
"""
from __future__ import annotations

import os
import sys
import time

from methods.core.results import InputError, read_json, write_json

from .prompts import solver_messages


def system_prompt(rules: list[str]) -> str:
    """The solver's system message with `rules` in context (none: zero-shot), exactly as
    `prompts.solver_messages` renders it for our own harness."""
    return solver_messages("", list(enumerate(rules)))[0]["content"]


def _solver_endpoint(spec: dict):
    """The solver's client (make_llm: a `base_url`, or the `base_url_file` of a model the DAG
    serves), checked with one tiny chat request: an unreachable endpoint, a 401 or a malformed
    answer is a one-line error naming the endpoint, before lm-eval's own retries."""
    from methods.core.llm import LLMError, make_llm

    llm = make_llm({**spec, "max_retries": min(int(spec.get("max_retries", 3)), 1)})
    try:
        llm.chat([[{"role": "user", "content": "1+1="}]], max_new_tokens=1)
    except LLMError as e:
        raise InputError(f"lm-eval anchor: solver endpoint {llm.base_url}: "
                         + " ".join(str(e).split())) from None
    return llm


def _lm(llm, key_env: str | None, cfg, max_gen_toks: int):
    from lm_eval.models.openai_completions import LocalChatCompletion

    key = os.environ.get(key_env) if key_env else None  # read now, never stored in an output
    return LocalChatCompletion(
        model=llm.model, base_url=llm.base_url + "/chat/completions",
        tokenizer_backend=None, tokenized_requests=False, num_concurrent=cfg.num_concurrent,
        max_retries=cfg.max_retries, timeout=cfg.timeout, max_gen_toks=max_gen_toks,
        header={"Authorization": f"Bearer {key}"} if key else {"Content-Type": "application/json"})


def run_anchor(cfg_json: str, library_json: str, out: str) -> dict:
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    from methods.core.evaluate import LM_EVAL_TASKS_ENV, metric

    from .run import study

    s = study(cfg_json)
    c = s.lm_eval
    if not c.tasks:
        raise InputError("tsgd.lm_eval.tasks is empty: nothing to evaluate")
    lib = read_json(library_json)
    if lib.get("variant") != c.variant:
        raise InputError(f"{library_json}: library of variant {lib.get('variant')!r}, "
                         f"tsgd.lm_eval.variant is {c.variant!r}")
    rules = list(lib["library"]["rules"])
    if len(rules) > s.tsgd.max_full_context:
        raise InputError(f"lm-eval anchor: the {c.variant} library has {len(rules)} rules, more than "
                         f"tsgd.max_full_context = {s.tsgd.max_full_context}: its solver retrieves per "
                         f"problem, which one system prompt cannot express")
    spec = s.llm.endpoints[0]
    solver = _solver_endpoint(spec)
    lm = _lm(solver, spec.get("api_key_env"), c, s.tsgd.max_new_tokens)
    tm = TaskManager(include_path=os.environ.get(LM_EVAL_TASKS_ENV) or None)
    missing = [t for t in c.tasks if t not in tm.all_tasks]
    if missing:
        raise InputError(f"tsgd.lm_eval.tasks: lm-eval has no task {missing[0]!r}")
    systems = {"zero_shot": [], f"tsgd_{c.variant}": rules}
    res: dict = {"tasks": list(c.tasks), "model": solver.model, "endpoint": solver.base_url,
                 "library_size": len(rules), "systems": {}}
    t0 = time.perf_counter()
    for name, sys_rules in systems.items():
        try:
            r = simple_evaluate(model=lm, tasks=list(c.tasks), task_manager=tm, limit=c.limit,
                                system_instruction=system_prompt(sys_rules), apply_chat_template=True,
                                gen_kwargs={"max_gen_toks": s.tsgd.max_new_tokens}, log_samples=False,
                                bootstrap_iters=0, random_seed=0, numpy_random_seed=0, torch_random_seed=0,
                                fewshot_random_seed=0)
        except InputError:
            raise
        except Exception as e:  # lm-eval raises many types once its retries are spent
            raise InputError(f"lm-eval anchor ({name}) on {solver.base_url}: "
                             f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
        rows = {"results": r["results"], "n_samples": r.get("n-samples", {})}
        per = {t: {"exact_match": metric(rows, t, "exact_match,none", tm),
                   "n": int((rows["n_samples"].get(t) or {}).get("effective", 0))} for t in c.tasks}
        n = sum(v["n"] for v in per.values())
        pooled = sum(v["exact_match"] * v["n"] for v in per.values()) / n if n else float("nan")
        res["systems"][name] = {"tasks": per, "exact_match": pooled, "n": n}
        print(f"lm-eval {name}: " + ", ".join(f"{t} {v['exact_match']:.3f} (n={v['n']})"
                                               for t, v in per.items()), file=sys.stderr, flush=True)
    zs, ts = res["systems"]["zero_shot"], res["systems"][f"tsgd_{c.variant}"]
    res["gain_over_zero_shot"] = ts["exact_match"] - zs["exact_match"]
    res["gain_per_task"] = {t: ts["tasks"][t]["exact_match"] - zs["tasks"][t]["exact_match"] for t in c.tasks}
    res["wall_s"] = time.perf_counter() - t0
    write_json(out, res)
    return res
