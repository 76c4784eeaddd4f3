"""The offline replay table: every (query, arm) run once, like the paper's cached results.

Queries: the pool's generated ones (`Synthetic`) or benchmark ones (`Math`, queries.py); the
verifier: the pool's trained one (P(Y) of its LM head) or, for a hub verifier, the Skywork PRM's
value head (prm.py). Arms = pool policy member × TTS setting. TTS settings: `greedy`, `bon{N}` (N samples, final
answer by verifier-weighted majority vote; BoN-k uses the first k of the same N_max samples) and
`beam` (verifier-guided step-level beam search: each round every kept beam samples CP
continuations up to the next `;` or the end, the verifier scores the partial scratchpads and the
best BS are kept). Each row: correct, verifier score of the final answer, generated tokens,
eFLOPs (the paper's cost model, `cost.py`) and matmul FLOPs from the pool's measured FLOPs/token.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from methods.core.model_pool import tasks
from methods.core.results import InputError

from . import cost, prm as prm_mod, queries as qsets
from .config import TableConfig


class Synthetic:
    """The pool's generated queries (`Q:...=` scratchpads): a completion is one line, its steps end
    in `;`, its answer is the `A:` segment; the model's eos ends the answer as a newline does."""
    final_stops, step_stops, eos_mark = (tasks.END,), (tasks.END, ";"), tasks.END

    def prompt(self, tok, q):
        return q["prompt"]

    def problem(self, q):
        return q["prompt"]

    def answer(self, text):
        return tasks.parse(text)[1]

    def correct(self, q, text):
        return tasks.is_correct(q, text)

    def finished(self, text, ended_eos):
        return text.endswith("\n")


class Math:
    """Benchmark queries (queries.py): the member's chat template, a completion ends at its eos,
    a beam step at a blank line, the answer is the last \\boxed{}."""
    final_stops, step_stops, eos_mark = (), (qsets.STEP_END,), ""

    def prompt(self, tok, q):
        return qsets.prompt_for(tok, q["problem"])

    def problem(self, q):
        return q["problem"]

    def answer(self, text):
        return qsets.answer(text)

    def correct(self, q, text):
        return qsets.is_correct(q, text)

    def finished(self, text, ended_eos):
        return ended_eos


def task_of(queries_: list[dict]):
    kinds = {q.get("kind", "synthetic") for q in queries_}
    if len(kinds) > 1:
        raise InputError(f"queries mix kinds {sorted(kinds)}")
    return Math() if kinds == {"math"} else Synthetic()


class Gen:
    """Batched generation with one pool LM (`pool.complete`: left padding, KV cache)."""

    def __init__(self, model, tok, cfg: TableConfig, task=None):
        self.model, self.tok, self.cfg = model, tok, cfg
        self.task = task or Synthetic()
        self.ended_eos: list[bool] = []
        # the model's own end-of-text tokens (Qwen3: <|im_end|>, <|endoftext|>) end a completion too
        eos = getattr(model.generation_config, "eos_token_id", None)
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        self.eos = tuple(t for t in dict.fromkeys(tok.decode([i]) for i in eos) if t)

    def generate(self, texts, sample: bool, stop_step: bool, max_new: int):
        """(completions, #generated tokens) for each text; stops at newline (and `;` if stop_step) or
        at the model's eos, which ends the answer as a newline does."""
        from methods.core.model_pool import pool

        stops = (self.task.step_stops if stop_step else self.task.final_stops) + self.eos
        ids = pool.complete(self.model, self.tok, texts, max_new, self.cfg.temperature if sample else None,
                            stops, chunk=self.cfg.chunk)
        # the last token may carry text past the stop (a BPE token ";s"): the completion ends at the stop
        texts = [cut_at_stop(self.tok.decode(r), stops) for r in ids]
        self.ended_eos = [any(t.endswith(e) for e in self.eos) for t in texts]
        texts = [next((t[:-len(e)] + self.task.eos_mark for e in self.eos if t.endswith(e)), t) for t in texts]
        return texts, [len(r) for r in ids]

    def n_tokens(self, text: str) -> int:
        return len(self.tok(text, add_special_tokens=False)["input_ids"])


def cut_at_stop(text: str, stops) -> str:
    """`text` up to and including the first occurrence of any of `stops` (all of it when none occurs)."""
    ends = [i + len(s) for s in stops for i in [text.find(s)] if i >= 0]
    return text[:min(ends)] if ends else text


def verifier_scores(vmodel, vtok, texts, chunk: int = 1024) -> list[float]:
    """P(Y) / (P(Y) + P(N)) read at the end of `tasks.verifier_text(text)` (a step `;` or a final `?`)."""
    import torch

    from methods.core.tokenizer import ensure_pad, token_id

    y, n, pad = token_id(vtok, "Y"), token_id(vtok, "N"), ensure_pad(vtok)
    out = []
    for i in range(0, len(texts), chunk):
        ids = [vtok(tasks.verifier_text(t), add_special_tokens=False)["input_ids"] for t in texts[i:i + chunk]]
        w = max(map(len, ids))
        x = torch.full((len(ids), w), pad, dtype=torch.long)
        m = torch.zeros_like(x)
        for j, s in enumerate(ids):
            x[j, :len(s)] = torch.tensor(s)
            m[j, :len(s)] = 1
        with torch.no_grad():
            logits = vmodel(input_ids=x, attention_mask=m).logits
        last = logits[torch.arange(len(ids)), torch.tensor([len(s) - 1 for s in ids])]
        p = torch.softmax(last[:, [y, n]].float(), -1)[:, 0]
        out += p.tolist()
    return out


def vote(answers: list[str | None], scores: list[float]) -> int:
    """Index of the chosen sample: the answer with the largest summed verifier score wins; the
    returned sample is its highest-scoring one."""
    tot = defaultdict(float)
    for a, s in zip(answers, scores):
        tot[a] += s
    best = max(tot, key=lambda a: (tot[a], a is not None))
    return max((i for i, a in enumerate(answers) if a == best), key=lambda i: scores[i])


def lm_verifier(vmodel, vtok, chunk: int):
    """score(problems, completions) of the trained verifier: P(Y) read on problem + completion."""
    return lambda prompts, outs: verifier_scores(vmodel, vtok, [p + o for p, o in zip(prompts, outs)], chunk)


def prm_verifier(prm, ptok, chunk: int):
    """score(problems, completions) of a Skywork-style PRM (prm.py): the reward of the last step."""
    return lambda prompts, outs: prm_mod.scores(prm, ptok, list(prompts), list(outs), chunk)


def run_member(name, model, tok, arch, varch, score, queries, cfg: TableConfig, seed: int) -> list[dict]:
    """All arms of one member; `score(problems, completions)` is the verifier (`lm_verifier` or
    `prm_verifier`)."""
    import torch

    task = task_of(queries)
    g = Gen(model, tok, cfg, task)
    prompts = [task.prompt(tok, q) for q in queries]
    probs = [task.problem(q) for q in queries]          # what the verifier reads as the problem
    n_in = [len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts]
    pw, pkv, I = cfg.bytes_w, cfg.bytes_kv, cfg.intensity
    fpt = arch["flops_per_token"]
    rows = []

    def row(q, k, tts, text, vscore, gen_lens, comp, mem, n_tokens):
        rows.append({"qid": q["qid"], "arm": f"{name}/{tts}", "model": name, "tts": tts,
                     "correct": int(task.correct(q, text)), "verifier": vscore,
                     "tokens": int(sum(gen_lens)), "eflops": cost.eflops(comp, mem, I),
                     "flops_measured": fpt * n_tokens, "output": text})

    # greedy (the verifier score is computed for the reward, not charged: no search uses it)
    outs, lens = g.generate(prompts, False, False, cfg.max_new_tokens)
    vs = score(probs, outs)
    for k, q in enumerate(queries):
        c1, m1 = cost.prefill(arch, n_in[k], pw, pkv)
        c2, m2 = cost.decode(arch, [n_in[k]], [lens[k]], pw, pkv)
        row(q, k, "greedy", outs[k], vs[k], [lens[k]], c1 + c2, m1 + m2, n_in[k] + lens[k])

    # best-of-N with verifier-weighted voting
    if cfg.bon:
        nmax = max(cfg.bon)
        torch.manual_seed(seed)
        outs, lens = g.generate([p for p in prompts for _ in range(nmax)], True, False, cfg.max_new_tokens)
        vs = score([probs[i // nmax] for i in range(len(outs))], outs)
        for k, q in enumerate(queries):
            so, sl, sv = outs[k * nmax:(k + 1) * nmax], lens[k * nmax:(k + 1) * nmax], vs[k * nmax:(k + 1) * nmax]
            for n in cfg.bon:
                j = vote([task.answer(o) for o in so[:n]], sv[:n])
                c1, m1 = cost.prefill(arch, n_in[k], pw, pkv)
                c2, m2 = cost.decode(arch, [n_in[k]] * n, sl[:n], pw, pkv)
                c3, m3 = cost.verify(varch, [n_in[k] + x for x in sl[:n]], pw, pkv)
                row(q, k, f"bon{n}", so[j], sv[j], sl[:n], c1 + c2 + c3, m1 + m2 + m3,
                    n * n_in[k] + sum(sl[:n]))

    # verifier-guided step-level beam search
    if cfg.beam_cp > 0:
        torch.manual_seed(seed + 1)
        beams = [[("", 0.0)] for _ in queries]           # per query: (partial, score)
        done = [[] for _ in queries]
        acc = [{"comp": 0.0, "mem": 0.0, "lens": [], "tok": 0} for _ in queries]
        for k in range(len(queries)):
            c1, m1 = cost.prefill(arch, n_in[k], pw, pkv)
            acc[k]["comp"] += c1
            acc[k]["mem"] += m1
        for _ in range(cfg.max_rounds):
            jobs = [(k, b) for k in range(len(queries)) for b in beams[k] for _ in range(cfg.beam_cp)]
            if not jobs:
                break
            outs, lens = g.generate([prompts[k] + b[0] for k, b in jobs], True, True, cfg.max_new_tokens)
            cand = [b[0] + o for (k, b), o in zip(jobs, outs)]
            vs = score([probs[k] for k, _ in jobs], cand)
            ends = list(g.ended_eos)
            per = defaultdict(list)
            for (k, b), c, ln, v, e in zip(jobs, cand, lens, vs, ends):
                # tokens of the partial as the model saw it (prompt + partial re-encoded each round),
                # not characters: the two differ for a BPE tokenizer
                per[k].append((c, v, ln, g.n_tokens(prompts[k] + b[0]) - n_in[k], e))
            for k in range(len(queries)):
                if k not in per:
                    continue
                ps = per[k]
                starts = [n_in[k] + s for _, _, _, s, _ in ps]
                c2, m2 = cost.decode(arch, starts, [ln for _, _, ln, _, _ in ps], pw, pkv)
                c3, m3 = cost.verify(varch, [st + ln for st, (_, _, ln, _, _) in zip(starts, ps)], pw, pkv)
                acc[k]["comp"] += c2 + c3
                acc[k]["mem"] += m2 + m3
                acc[k]["lens"] += [ln for _, _, ln, _, _ in ps]
                acc[k]["tok"] += sum(ln for _, _, ln, _, _ in ps)
                ps.sort(key=lambda t: -t[1])
                keep = []
                for c, v, ln, _, e in ps[:cfg.beam_bs]:
                    if task.finished(c, e) or g.n_tokens(prompts[k] + c) - n_in[k] >= cfg.max_new_tokens:
                        done[k].append((c, v))
                    else:
                        keep.append((c, v))
                beams[k] = keep
        for k, q in enumerate(queries):
            fin = done[k] or beams[k] or [("", 0.0)]
            text, v = max(fin, key=lambda t: t[1])
            row(q, k, "beam", text, v, acc[k]["lens"], acc[k]["comp"], acc[k]["mem"],
                n_in[k] + acc[k]["tok"])
    return rows


def build_table(cfg: TableConfig, members: dict[str, str], verifier: str, data_dir: str, costs: dict):
    """All (query, arm) rows as a DataFrame."""
    import pandas as pd

    from methods.core.model_pool.pool import arch as arch_of, load
    from methods.core.results import read_json, read_jsonl

    queries = read_jsonl(f"{data_dir}/test.jsonl")[: cfg.n_queries]
    vinfo = read_json(Path(verifier) / "pool_member.json") if (Path(verifier) / "pool_member.json").is_file() else {}
    if vinfo.get("hub"):
        # a hub verifier is a PRM (paper: Skywork-o1-Open-PRM), read through its value head
        vmodel, vtok = prm_mod.load_prm(vinfo["hub"])
        score = prm_verifier(vmodel, vtok, cfg.chunk)
    else:
        vmodel, vtok, _ = load(verifier)
        score = lm_verifier(vmodel, vtok, cfg.chunk)
    varch = arch_of(vmodel)
    rows = []
    for i, (name, path) in enumerate(members.items()):
        model, tok, _ = load(path)
        a = {**arch_of(model), "flops_per_token": costs["members"][name]["flops_per_token_counted"]}
        rows += run_member(name, model, tok, a, varch, score, queries, cfg, cfg.seed + 100 * i)
    df = pd.DataFrame(rows)
    q = pd.DataFrame([{"qid": x["qid"], "family": x["family"], "difficulty": x["difficulty"], "digits": x["digits"],
                       "prompt": x["prompt"]} for x in queries])
    return df.merge(q, on="qid")
