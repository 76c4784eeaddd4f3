"""Synthetic over-thinking reasoning traces (our tiny task for ASAG, arXiv 2606.15070) and their vocabulary.

A problem "a + b + c = ?" or "a * b + c = ?" (operands in [1, max_operand], 2-digit when
max_operand = 99; b 1-digit for "*", see README) is answered by a thought: one pass "a + b = s1 . s1 + c = s2 . So s2 ." then 0–4
redundant re-checks "Wait check <pass>", then "</think> \\boxed{ s2 }". With `p_late_slip` the
last re-check contains an arithmetic slip that propagates to the boxed answer (over-thinking
harms); with `p_first_slip` the first pass slips and the first re-check fixes it (stopping at
the first ATP hurts); with `p_loop` the trace re-reads the first step verbatim 2–3 times, and
half of those traces then emit `<jump>` and restart cleanly. Numbers are digit tokens.
"""
from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path

from methods.core.results import InputError, atomic_path

from .config import DataConfig

SPECIALS = ["<pad>", "<eos>", "Q:", "?", "<think>", "</think>", "Wait", "check", "So", "<jump>",
            "\\boxed{", "}", "+", "*", "=", "."]
VOCAB = SPECIALS + [str(d) for d in range(10)]


class Vocab:
    """Whitespace word-level vocabulary; numbers are written digit by digit."""

    def __init__(self, words=VOCAB):
        self.words = list(words)
        self.ids = {w: i for i, w in enumerate(self.words)}
        self.pad_token_id, self.eos_token_id = self.ids["<pad>"], self.ids["<eos>"]

    def __len__(self):
        return len(self.words)

    def __getitem__(self, w):
        return self.ids[w]

    def encode(self, text: str) -> list[int]:
        try:
            return [self.ids[w] for w in text.split()]
        except KeyError as e:
            raise InputError(f"word {e.args[0]!r} is not in the ASAG vocabulary") from None

    def decode(self, ids) -> str:
        return " ".join(self.words[i] for i in ids)


def num(n: int) -> str:
    return " ".join(str(n))


def problem(rng: random.Random, p_mul: float, max_operand: int = 99) -> dict:
    op = "*" if rng.random() < p_mul else "+"
    lo = 10 if max_operand >= 99 else 1
    a, c = rng.randint(lo, max_operand), rng.randint(lo, max_operand)
    b = rng.randint(2, 9) if op == "*" else rng.randint(lo, max_operand)
    s1 = a * b if op == "*" else a + b
    return {"a": a, "b": b, "c": c, "op": op, "s1": s1, "answer": s1 + c}


def prompt_text(p: dict) -> str:
    return f"Q: {num(p['a'])} {p['op']} {num(p['b'])} + {num(p['c'])} = ? <think>"


def slip(rng: random.Random, x: int) -> int:
    return max(0, x + rng.choice([-1, 1]) * rng.randint(1, 9))


def a_pass(p: dict, s1: int, s2: int) -> str:
    return (f"{num(p['a'])} {p['op']} {num(p['b'])} = {num(s1)} . {num(s1)} + {num(p['c'])} = {num(s2)} . "
            f"So {num(s2)} .")


def trace(rng: random.Random, p: dict, cfg: DataConfig) -> tuple[str, dict]:
    """The thought (after <think>) and the boxed answer; meta says which pattern it follows."""
    s1, ans = p["s1"], p["answer"]
    first_slip = rng.random() < cfg.p_first_slip
    late_slip = rng.random() < cfg.p_late_slip
    loop = rng.random() < cfg.p_loop
    n_re = rng.randint(1 if (first_slip or late_slip) else 0, cfg.max_rechecks)
    parts = []
    if first_slip:
        w1 = slip(rng, s1)
        parts.append(a_pass(p, w1, w1 + p["c"]))
    else:
        parts.append(a_pass(p, s1, ans))
    jump = False
    if loop:
        step1 = f"{num(p['a'])} {p['op']} {num(p['b'])} = {num(s1)} ."
        parts += [f"Wait check {step1}"] * rng.randint(2, 3)
        if rng.random() < 0.5:
            jump = True
            parts.append(f"<jump> {a_pass(p, s1, ans)}")
            n_re = 1 if first_slip else 0
            first_slip = False
            late_slip = False
    final = ans
    for i in range(n_re):
        if late_slip and i == n_re - 1 and not (first_slip and i == 0):
            w1 = slip(rng, s1)
            final = w1 + p["c"]
            parts.append(f"Wait check {a_pass(p, w1, final)}")
        else:
            parts.append(f"Wait check {a_pass(p, s1, ans)}")
    text = " ".join(parts) + f" </think> \\boxed{{ {num(final)} }} <eos>"
    return text, {"first_slip": first_slip, "late_slip": late_slip and final != ans, "loop": loop,
                  "jump": jump, "rechecks": n_re, "final": final}


def build(cfg: DataConfig, out_dir: str | Path) -> dict:
    """train.jsonl (prompt, thought, answer) and test.jsonl (prompt, answer), disjoint problems."""
    rng, vocab = random.Random(cfg.seed), Vocab()
    seen, rows = set(), {"train": [], "test": []}
    tries = 0
    for split, n in (("test", cfg.n_test), ("train", cfg.n_train)):
        while len(rows[split]) < n:
            tries += 1
            if tries > 20 * (cfg.n_train + cfg.n_test):
                raise InputError("data: could not draw enough distinct problems")
            p = problem(rng, cfg.p_mul, cfg.max_operand)
            key = (p["a"], p["op"], p["b"], p["c"])
            if split == "test":
                if key in seen:
                    continue
                seen.add(key)
                rows[split].append({"prompt": prompt_text(p), "answer": p["answer"]})
                continue
            if key in seen:
                continue
            for _ in range(20):
                t, meta = trace(rng, p, cfg)
                if len(vocab.encode(prompt_text(p) + " " + t)) <= cfg.max_len:
                    break
            else:
                continue
            rows[split].append({"prompt": prompt_text(p), "thought": t, "answer": p["answer"], **meta})
    with atomic_path(out_dir, is_dir=True) as tmp:
        for split in rows:
            (tmp / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[split]))
        (tmp / "vocab.json").write_text(json.dumps(VOCAB))
        (tmp / "config.json").write_text(json.dumps(asdict(cfg)))
    return {k: len(v) for k, v in rows.items()}
