"""The verifiable-reward task (our tiny task): `^aa+bb=` → digits of a+b then EOS `;`.

15-symbol char vocabulary; operands are zero-padded to two digits so every prompt has the
same length (7), so a batch of prompts needs no padding or position offsets. The SFT contrast
task is `^ab*c=` (2-digit × 1-digit multiplication). Held-out pairs are disjoint from the
training / RL pairs. Everything is a pure function of the seed.
"""
from __future__ import annotations

import random

VOCAB = "0123456789+*=;^"
EOS = ";"
STOI = {c: i for i, c in enumerate(VOCAB)}
EOS_ID = STOI[EOS]


def encode(s: str) -> list[int]:
    return [STOI[c] for c in s]


def decode(ids) -> str:
    return "".join(VOCAB[int(i)] for i in ids)


def add_prompt(a: int, b: int) -> str:
    return f"^{a:02d}+{b:02d}="


def mul_prompt(a: int, b: int) -> str:
    return f"^{a:02d}*{b}="


def split_pairs(max_operand: int, n_eval: int, seed: int, op: str = "add"):
    """(train pairs, held-out pairs): a deterministic shuffle of every (a, b)."""
    hi_b = max_operand if op == "add" else 10
    pairs = [(a, b) for a in range(max_operand) for b in range(hi_b)]
    random.Random(seed).shuffle(pairs)
    if n_eval >= len(pairs):
        raise ValueError(f"n_eval {n_eval} ≥ number of pairs {len(pairs)}")
    return pairs[n_eval:], pairs[:n_eval]


def answer(a: int, b: int, op: str = "add") -> str:
    return str(a + b if op == "add" else a * b) + EOS


def prompt(a: int, b: int, op: str = "add") -> str:
    return add_prompt(a, b) if op == "add" else mul_prompt(a, b)


def reward(completion: str, a: int, b: int, op: str = "add") -> float:
    """1 iff the completion is exactly the answer digits followed by EOS (what comes after
    the first EOS is ignored: generation stops there)."""
    cut = completion.find(EOS)
    if cut < 0:
        return 0.0
    return float(completion[: cut + 1] == answer(a, b, op))
