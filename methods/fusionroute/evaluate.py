"""FusionRoute's evaluation: exact match of every system on the test prompts of each domain,
the sequence-level oracle, and measured costs (FLOPs/token, wall time)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from methods.core.results import read_jsonl

from . import data as D
from .config import EvalConfig, Hub, paper_guard
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
    paper_guard(hub, "evaluate")
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
