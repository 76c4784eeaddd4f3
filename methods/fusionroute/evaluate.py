"""FusionRoute's evaluation: exact match of every system on the test prompts of each domain,
the sequence-level oracle, and measured costs (FLOPs/token, wall time)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from methods.core.results import InputError, read_jsonl

from . import data as D
from .config import EvalConfig, Hub, is_paper
from .decode import decode, make_step
from .experts import load_experts
from .router import load_router


def em_by_domain(correct: list[int], domains: list[str]) -> dict:
    """Exact match (%) per domain and the macro-average over domains of 0/1 outcomes."""
    em = {d: 100.0 * sum(c for c, x in zip(correct, domains) if x == d) / max(1, domains.count(d))
          for d in D.DOMAINS}
    em["macro"] = sum(em[d] for d in D.DOMAINS) / len(D.DOMAINS)
    return em


def merge(experts):
    """Uniform weight average of the experts (same architecture, same init)."""
    import copy

    m = copy.deepcopy(experts[0])
    sd = {k: sum(e.state_dict()[k] for e in experts) / len(experts) for k in m.state_dict()}
    m.load_state_dict(sd)
    return m.eval()


def costs(models: dict, ev: EvalConfig) -> dict:
    from methods.core.model_pool.pool import analytic_forward_flops, arch, counted_forward_flops, wall_per_token

    n = ev.cost_ctx_len
    out = {}
    for name, m in models.items():
        a = arch(m)
        ana, cnt = analytic_forward_flops(a, n) / n, counted_forward_flops(m, n) / n
        out[name] = {**a, "flops_per_token_analytic": ana, "flops_per_token_counted": cnt,
                     "flops_rel_err": abs(ana - cnt) / cnt,
                     "wall_s_per_token": wall_per_token(m, n, ev.cost_batch, ev.cost_repeats)}
    return out


def evaluate(ev: EvalConfig, data_dir, expert_dirs, sft_dir, cdpo_dir, out, hub: Hub) -> dict:
    if is_paper(hub, "evaluate"):
        return evaluate_hub(ev, expert_dirs, sft_dir, cdpo_dir, hub)
    experts = load_experts(expert_dirs)
    sft, tok = load_router(sft_dir)
    fin, _ = load_router(cdpo_dir)
    merged = merge(experts)
    test = read_jsonl(Path(data_dir) / "test.jsonl")
    prompts = [t["prompt"] for t in test]
    systems = {f"expert_{k}": make_step("expert", sft, experts, expert=i) for i, k in enumerate(D.EXPERT_DOMAINS)}
    systems.update({"merged": make_step("merged", sft, experts, model=merged),
                    "router_alone": make_step("router", sft, experts),
                    "expert_only_routing": make_step("expert_only", sft, experts),
                    "fusionroute_sft": make_step("fusionroute", sft, experts),
                    "fusionroute": make_step("fusionroute", fin, experts)})
    em, timing, samples, correct, outputs = {}, {}, {}, {}, {}
    for name, step in systems.items():
        t0 = time.perf_counter()
        outs = decode(step, tok, prompts, ev.max_new_tokens, ev.batch_size)
        dt = time.perf_counter() - t0
        ntok = sum(len(o) for o in outs)     # char tokenizer: one token per character
        timing[name] = {"decode_s": dt, "tokens": ntok, "s_per_token": dt / max(ntok, 1)}
        correct[name] = [int(o == t["answer"]) for o, t in zip(outs, test)]
        em[name] = em_by_domain(correct[name], [t["domain"] for t in test])
        outputs[name] = outs
        samples[name] = [{"prompt": t["prompt"], "gold": t["answer"], "out": o} for t, o in list(zip(test, outs))[::25]]
        print(f"{name}: {em[name]}", file=sys.stderr)
    # test prompts whose greedy output CDPO changed (SFT-FusionRoute vs SFT+CDPO-FusionRoute)
    cdpo_changed = sum(a != b for a, b in zip(outputs["fusionroute_sft"], outputs["fusionroute"]))
    # sequence-level routing with an oracle domain label (comp: the best expert, an upper bound)
    doms = [t["domain"] for t in test]
    comp_best = max(D.EXPERT_DOMAINS, key=lambda d: em[f"expert_{d}"]["comp"])
    correct["seq_level_oracle"] = [correct[f"expert_{comp_best if x == 'comp' else x}"][i] for i, x in enumerate(doms)]
    em["seq_level_oracle"] = em_by_domain(correct["seq_level_oracle"], doms)
    cost = costs({"expert": experts[0], "router": sft.lm}, ev)
    cost["fusionroute_flops_per_token"] = (cost["router"]["flops_per_token_counted"]
                                           + cost["expert"]["flops_per_token_counted"])
    return {"em": em, "correct": correct, "domains": [t["domain"] for t in test],
            "cdpo_changed": {"k": int(cdpo_changed), "n": len(test)},
            "timing": timing, "costs": cost, "samples": samples}


# ---- paper scale: the hub benchmarks through lm-eval ---------------------------------------------
# benchmark -> the expert domain it measures (math: add, instruction following: rev, code: brk)
TASK_DOMAINS = {"gsm8k": "add", "minerva_math500": "add", "humaneval": "brk", "mbpp": "brk", "ifeval": "rev"}


def per_sample(out: dict, task: str) -> tuple[str, list[int]]:
    """(metric key, 0/1 outcome per document in doc order) of one task from lm-eval's output
    (`log_samples`): the task's first metric under its first filter (gsm8k: exact_match of
    strict-match; humaneval: pass@1; ifeval: prompt_level_strict_acc)."""
    row = out["results"].get(task)
    if row is None:
        raise InputError(f"lm-eval results have no task {task!r}")
    keys = [k for k in row if "," in k and "_stderr" not in k]
    if not keys:
        raise InputError(f"lm-eval results for {task!r} have no metric")
    metric, filt = keys[0].split(",", 1)
    samples = sorted((x for x in out["samples"][task] if x.get("filter") == filt), key=lambda x: x["doc_id"])
    vals = []
    for x in samples:
        v = x.get(metric)
        v = v[0] if isinstance(v, (list, tuple)) else v
        if not isinstance(v, (bool, int, float)) or float(v) not in (0.0, 1.0):
            raise InputError(f"lm-eval task {task!r}: per-document {metric} {v!r} is not a 0/1 outcome")
        vals.append(int(v))
    return keys[0], vals


def load_tasks(tasks: list[str]) -> tuple[object, dict, bool]:
    """(TaskManager, {name: Task}, confirm_unsafe) of the benchmarks, built once for every system:
    lm-eval's registered tasks plus $ICML26_LM_EVAL_TASKS, as methods.core.evaluate.run_lm_eval
    sees them. humaneval / mbpp run model-written code: lm-eval refuses them unless confirmed, and
    we confirm only when HF_ALLOW_CODE_EVAL=1 (the `evaluate` library's own opt-in)."""
    import os

    import lm_eval
    from lm_eval.tasks import TaskManager

    from methods.core.evaluate import LM_EVAL_TASKS_ENV

    tm = TaskManager(include_path=os.environ.get(LM_EVAL_TASKS_ENV) or None)
    unknown = [t for t in tasks if t not in tm.all_tasks]
    if unknown:
        raise InputError(f"lm-eval has no task {unknown[0]!r}")
    task_dict = lm_eval.tasks.get_task_dict(tasks, tm)
    allow = os.environ.get("HF_ALLOW_CODE_EVAL") == "1"
    for name, task in task_dict.items():
        if getattr(task, "UNSAFE_CODE", False) and not allow:
            raise InputError(f"lm-eval task {name!r} executes model-written code: set HF_ALLOW_CODE_EVAL=1 to run it")
        if getattr(task, "OUTPUT_TYPE", "generate_until") != "generate_until":
            raise InputError(f"lm-eval task {name!r} is {task.OUTPUT_TYPE}: FusionRoute is evaluated on "
                             "generate_until tasks")
    return tm, task_dict, allow


def response_texts(out: dict, task: str, key: str) -> list[str]:
    """The raw generated text of every document (doc order) under the scored filter."""
    filt = key.split(",", 1)[1]
    samples = sorted((x for x in out["samples"][task] if x.get("filter") == filt), key=lambda x: x["doc_id"])
    return [str((x.get("resps") or [[None]])[0][0]) for x in samples]


def run_tasks(lm, loaded: tuple, limit: int | None) -> dict:
    """lm-eval on an in-memory LM object over the loaded tasks: chat template applied,
    per-document samples logged."""
    import lm_eval

    tm, task_dict, allow = loaded
    return lm_eval.simple_evaluate(model=lm, tasks=list(task_dict.values()), task_manager=tm, log_samples=True,
                                   limit=limit, bootstrap_iters=0, random_seed=0, numpy_random_seed=0,
                                   torch_random_seed=0, fewshot_random_seed=0, apply_chat_template=True,
                                   confirm_run_unsafe_code=allow)


def evaluate_hub(ev: EvalConfig, expert_dirs, sft_dir, cdpo_dir, hub: Hub) -> dict:
    """Every system of the tiny evaluation (the same `make_step` systems) on the hub benchmarks
    (hub.lm_eval_tasks) through lm-eval: per-document 0/1 outcomes, each document labelled
    with its benchmark's domain (TASK_DOMAINS); the sequence-level oracle picks each benchmark's
    home expert. There is no held-out composition domain at paper scale (C3 is not measured)."""
    from .experts import check_shared_vocab, load_hub_experts, stop_ids
    from .lm import FusionRouteLM

    bad = [t for t in hub.lm_eval_tasks if t not in TASK_DOMAINS]
    if bad:
        raise InputError(f"lm-eval task {bad[0]!r} has no FusionRoute domain (known: {sorted(TASK_DOMAINS)})")
    if not hub.lm_eval_tasks:
        raise InputError("fusionroute.hub.lm_eval_tasks is empty")
    loaded = load_tasks(list(hub.lm_eval_tasks))
    experts, named = load_hub_experts(expert_dirs)
    sft, tok = load_router(sft_dir)
    fin, _ = load_router(cdpo_dir)
    check_shared_vocab([(f"router ({sft_dir})", tok, sft.lm), (f"router ({cdpo_dir})", tok, fin.lm)] + named)
    merged = merge(experts)
    stops = stop_ids(tok, sft.lm)
    device = next(sft.lm.parameters()).device
    systems = {f"expert_{k}": make_step("expert", sft, experts, expert=i) for i, k in enumerate(D.EXPERT_DOMAINS)}
    systems.update({"merged": make_step("merged", sft, experts, model=merged),
                    "router_alone": make_step("router", sft, experts),
                    "expert_only_routing": make_step("expert_only", sft, experts),
                    "fusionroute_sft": make_step("fusionroute", sft, experts),
                    "fusionroute": make_step("fusionroute", fin, experts)})
    em, timing, correct, scores, texts, domains, docs = {}, {}, {}, {}, {}, None, None
    for name, step in systems.items():
        lm = FusionRouteLM(step, tok, stops, batch_size=ev.batch_size, name=name, device=device)
        t0 = time.perf_counter()
        out = run_tasks(lm, loaded, ev.lm_eval_limit)
        timing[name] = {"lm_eval_s": time.perf_counter() - t0}
        c, doms, ids, scores[name] = [], [], [], {}
        texts[name] = []
        for task in hub.lm_eval_tasks:
            key, vals = per_sample(out, task)
            texts[name] += response_texts(out, task, key)
            scores[name][task] = {"metric": key, "value": float(out["results"][task][key]), "n": len(vals)}
            c += vals
            doms += [TASK_DOMAINS[task]] * len(vals)
            ids += [f"{task}/{i}" for i in range(len(vals))]
        if domains is not None and (doms != domains or ids != docs):
            raise InputError(f"{name}: lm-eval scored other documents than the first system")
        domains, docs, correct[name] = doms, ids, c
        em[name] = em_by_domain_present(c, doms)
        print(f"{name}: {scores[name]}", file=sys.stderr)
    # benchmark documents whose greedy output CDPO changed (SFT-FusionRoute vs SFT+CDPO-FusionRoute)
    cdpo_changed = sum(a != b for a, b in zip(texts["fusionroute_sft"], texts["fusionroute"]))
    correct["seq_level_oracle"] = [correct[f"expert_{x}"][i] for i, x in enumerate(domains)]
    em["seq_level_oracle"] = em_by_domain_present(correct["seq_level_oracle"], domains)
    cost = costs({"expert": experts[0], "router": sft.lm}, ev)
    cost["fusionroute_flops_per_token"] = (cost["router"]["flops_per_token_counted"]
                                           + cost["expert"]["flops_per_token_counted"])
    return {"em": em, "correct": correct, "domains": domains, "docs": docs, "benchmarks": scores,
            "lm_eval_tasks": list(hub.lm_eval_tasks), "pooled_macro": True,
            "cdpo_changed": {"k": int(cdpo_changed), "n": len(domains)},
            "timing": timing, "costs": cost}


def em_by_domain_present(correct: list[int], domains: list[str]) -> dict:
    """Paper scale: score (%) per domain that has documents, and `macro` = the pooled rate over
    all documents (benchmarks differ in size, so this is not the mean over domains)."""
    em = {d: 100.0 * sum(c for c, x in zip(correct, domains) if x == d) / domains.count(d)
          for d in D.DOMAINS if d in domains}
    em["macro"] = 100.0 * sum(correct) / max(1, len(correct))
    return em
