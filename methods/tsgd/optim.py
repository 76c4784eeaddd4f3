"""Textual SGD over the experience library, and the baselines (zero-shot, static RAG).

Every LLM call goes through a `methods.core.llm.LLM` (the simulator at tiny scale, an
OpenAI-compatible endpoint at paper scale).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from .answer import equivalent, last_boxed
from .config import OptimConfig
from .library import Library, Op
from .prompts import parse_op, reflect_messages, solver_messages


@dataclass
class TSGDConfig(OptimConfig):
    """The optimiser settings of one run: tsgd.tsgd (OptimConfig) and a variant's budget and
    verification (tsgd.variants.<name>)."""
    capacity: int | None     # C; None = no budget
    verify: str              # dual | local | none

    def __post_init__(self):
        if self.verify not in ("dual", "local", "none"):
            raise ValueError(f"verify must be dual, local or none, got {self.verify!r}")


class Retriever:
    """Cosine top-k over texts, embeddings cached per text. `embed(texts) -> unit rows`, or a
    zero-argument factory of it (`lazy=True`: the encoder loads on first use only)."""

    def __init__(self, embed, lazy: bool = False):
        self.embed, self.lazy, self.cache = embed, lazy, {}

    def vecs(self, texts: list[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if new:
            if self.lazy:
                self.embed, self.lazy = self.embed(), False
            for t, v in zip(new, self.embed(new)):
                self.cache[t] = np.asarray(v, dtype=np.float32)
        return np.stack([self.cache[t] for t in texts])

    def top(self, query: str, keys: list[str], k: int) -> list[int]:
        """Indices of the k keys most similar to the query (ties: lower index), in key order."""
        if len(keys) <= k:
            return list(range(len(keys)))
        sims = self.vecs(keys) @ self.vecs([query])[0]
        order = sorted(range(len(keys)), key=lambda i: (-float(sims[i]), i))[:k]
        return sorted(order)


def hash_embed(texts: list[str], dim: int = 256) -> np.ndarray:
    """A cheap deterministic bag-of-words embedding (smoke scale and tests; not MiniLM)."""
    import zlib

    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in t.lower().split():
            out[i, zlib.crc32(w.encode()) % dim] += 1.0
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def make_embed(kind: str):
    if kind == "hash":
        return hash_embed
    if kind not in ("hash", "minilm"):
        raise ValueError(f"embedder must be hash or minilm, got {kind!r}")
    if kind == "minilm":
        from methods.core.llm import Embedder

        return Embedder()
    raise ValueError(f"embedder must be hash or minilm, got {kind!r}")


class Agent:
    """Solver + (optional) reflector + retrieval over the library."""

    def __init__(self, solver, reflector, retriever: Retriever | None, cfg: TSGDConfig):
        self.solver, self.reflector, self.ret, self.cfg = solver, reflector, retriever, cfg
        self.n_solver_calls = 0
        self._cache: dict = {}

    def context(self, question: str, lib: Library) -> list[tuple[int, str]]:
        if len(lib) <= self.cfg.max_full_context:
            return list(enumerate(lib.rules))
        if self.ret is None:
            raise ValueError("library larger than max_full_context needs a retriever")
        return [(i, lib.rules[i]) for i in self.ret.top(question, lib.rules, self.cfg.top_r)]

    def solve(self, probs: list[dict], lib: Library, *, n: int = 1, temperature: float = 0.0,
              seed: int = 0) -> list[tuple[list[bool], str]]:
        """Per problem: (correct flag per sample, first solution text). Greedy calls are cached
        per (problem, rules in context): greedy decoding is deterministic."""
        convs = [solver_messages(p["question"], self.context(p["question"], lib)) for p in probs]
        out: list = [None] * len(probs)
        todo = []
        for i, c in enumerate(convs):
            key = (c[0]["content"], c[1]["content"]) if temperature == 0 and n == 1 else None
            if key is not None and key in self._cache:
                out[i] = self._cache[key]
            else:
                todo.append((i, key))
        if todo:
            self.n_solver_calls += len(todo) * n
            replies = self.solver.chat([convs[i] for i, _ in todo], max_new_tokens=self.cfg.max_new_tokens,
                                       temperature=temperature, n=n, seed=seed)
            for (i, key), rep in zip(todo, replies):
                res = ([equivalent(last_boxed(r), probs[i]["answer"]) for r in rep], rep[0])
                out[i] = res
                if key is not None:
                    self._cache[key] = res
        return out

    def accuracy(self, probs: list[dict], lib: Library) -> tuple[float, list[bool]]:
        ok = [r[0][0] for r in self.solve(probs, lib)]
        return float(np.mean(ok)) if ok else float("nan"), ok

    def reflect(self, fails: list[tuple[dict, str]], lib: Library, seed: int) -> list[dict | None]:
        convs = [reflect_messages(p["question"], sol, p["answer"], self.context(p["question"], lib),
                                  len(lib), lib.capacity) for p, sol in fails]
        if not convs:
            return []
        replies = self.reflector.chat(convs, max_new_tokens=256, temperature=0.7, n=1, seed=seed)
        return [parse_op(r[0]) for r in replies]


def verify(agent: Agent, cfg: TSGDConfig, op: Op, trigger: dict, lib: Library, cand: Library,
           vb: list[dict], base_ok: list[bool], base_acc: float, seed: int) -> tuple[bool, str]:
    """Dual verification: V1 local repair (majority of k samples re-solve the trigger), V2
    generalisation (acc on V_t does not drop, and an ADD/EDIT fixes a problem other than its
    trigger). `verify` = local keeps V1 only; none accepts everything."""
    if cfg.verify == "none":
        return True, "unverified"
    flags = agent.solve([trigger], cand, n=cfg.k_repair, temperature=cfg.temperature, seed=seed)[0][0]
    if sum(flags) * 2 <= cfg.k_repair:
        return False, "V1"
    if cfg.verify == "local":
        return True, "V1"
    acc, ok = agent.accuracy(vb, cand)
    if acc < base_acc:
        return False, "V2-acc"
    if op.kind != "DELETE" and not any(o and not b for o, b in zip(ok, base_ok)):
        return False, "V2-fix"
    return True, "V1+V2"


def ablation_drops(agent: Agent, lib: Library, vb: list[dict], base_acc: float) -> list[float]:
    drops = []
    for i in range(len(lib)):
        without = lib.copy()
        del without.rules[i], without.utility[i]
        drops.append(base_acc - agent.accuracy(vb, without)[0])
    return drops


def train_tsgd(agent: Agent, train: list[dict], val: list[dict], classify=None, log=print) -> dict:
    """The TSGD loop (abstract of OpenReview zVv11MhFLD; details inferred). Returns best-validation library, trace rows and op log."""
    cfg = agent.cfg
    rng = random.Random(cfg.seed)
    lib = Library(cfg.capacity)
    best = (agent.accuracy(val, lib)[0], lib.copy(), 0)
    trace, ops_log, step, max_size = [], [], 0, 0
    n_steps = cfg.epochs * (len(train) // cfg.batch_size)
    for epoch in range(cfg.epochs):
        order = list(range(len(train)))
        rng.shuffle(order)
        for s in range(len(train) // cfg.batch_size):
            step += 1
            batch = [train[i] for i in order[s * cfg.batch_size:(s + 1) * cfg.batch_size]]
            res = agent.solve(batch, lib)
            fails = [(p, r[1]) for p, r in zip(batch, res) if not r[0][0]]
            vb = rng.sample(val, min(cfg.val_batch, len(val)))
            base_acc, base_ok = agent.accuracy(vb, lib)
            if cfg.capacity is not None and len(lib):
                lib.update_utility(ablation_drops(agent, lib, vb, base_acc), cfg.beta)
            props = agent.reflect(fails, lib, seed=cfg.seed * 100003 + step)
            n_acc = n_prop = 0
            for (p, _), d in zip(fails, props):
                if n_acc >= cfg.lr:
                    break
                if d is None:
                    continue
                n_prop += 1
                op = Op(d["op"], d["index"], d["rule"])
                if not lib.valid(op):
                    continue
                cand, evicted = lib.apply(op)
                ok, why = verify(agent, cfg, op, p, lib, cand, vb, base_ok, base_acc,
                                 seed=cfg.seed * 7919 + step * 101 + n_prop)
                row = {"step": step, "op": op.kind, "index": op.index, "rule": op.rule,
                       "trigger": p["id"], "accepted": ok, "check": why, "evicted": evicted,
                       "kind": classify(op.rule)[0] if classify and op.rule else None,
                       "replaced": lib.rules[op.index] if op.index is not None else None}
                ops_log.append(row)
                if ok:
                    lib, n_acc = cand, n_acc + 1
                    base_acc, base_ok = agent.accuracy(vb, lib)
                    max_size = max(max_size, len(lib))
                    if cfg.capacity is not None and len(lib) > cfg.capacity:
                        raise AssertionError("library exceeded its capacity")
            val_acc = None
            if step % cfg.eval_every == 0 or step == n_steps:
                val_acc = agent.accuracy(val, lib)[0]
                if val_acc > best[0]:
                    best = (val_acc, lib.copy(), step)
            kinds = [classify(r)[0] for r in lib.rules] if classify else []
            trace.append({"step": step, "epoch": epoch, "lib_size": len(lib), "n_fail": len(fails),
                          "n_proposed": n_prop, "n_accepted": n_acc, "train_batch_acc": 1 - len(fails) / len(batch),
                          "val_acc": val_acc, **{f"n_{k}": kinds.count(k) for k in ("good", "bad", "instance", "other")}})
            if step % 10 == 0:
                log(f"step {step}/{n_steps} |L|={len(lib)} fails={len(fails)} accepted={n_acc} val={val_acc}")
    return {"best_val_acc": best[0], "best_step": best[2], "library": best[1], "final": lib,
            "trace": trace, "ops": ops_log, "max_size": max_size}


def static_rag(agent: Agent, train: list[dict], test: list[dict], k: int, checkpoints: list[int],
               seed: int) -> tuple[list[dict], list[bool]]:
    """Append-only experience memory: every training attempt (question, the solver's own answer)
    is stored unverified; the solver sees the top-k most similar experiences. Test accuracy is
    measured when the memory holds each checkpoint's number of experiences. Returns the curve and
    the per-problem outcomes on test at the last checkpoint."""
    order = list(range(len(train)))
    random.Random(seed).shuffle(order)
    memory: list[tuple[str, str]] = []
    curve, last_ok = [], []
    agent.ret.vecs([p["question"] for p in train + test])   # encode once, in batches

    def run(probs):
        convs = []
        for p in probs:
            idx = agent.ret.top(p["question"], [q for q, _ in memory], k) if memory else []
            convs.append(solver_messages(p["question"], examples=[memory[i] for i in idx]))
        agent.n_solver_calls += len(convs)
        reps = agent.solver.chat(convs, max_new_tokens=agent.cfg.max_new_tokens, temperature=0.0, seed=0)
        return [(last_boxed(r[0]), equivalent(last_boxed(r[0]), p["answer"])) for p, r in zip(probs, reps)]

    for j, i in enumerate(order):
        ans, _ = run([train[i]])[0]
        memory.append((train[i]["question"], ans if ans is not None else ""))
        if j + 1 in checkpoints:
            last_ok = [bool(ok) for _, ok in run(test)]
            curve.append({"memory_size": j + 1, "test_acc": float(np.mean(last_ok))})
    return curve, last_ok
