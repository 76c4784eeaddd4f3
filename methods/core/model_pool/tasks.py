"""The pool's generated task mixture (no torch).

Two families, both with a step scratchpad (steps are `s:...;` segments, then `A:<answer>`):
  arith  `Q:47*3+18=`  -> `s:141+18;s:159;A:159` (left-to-right evaluation, 1-4 operations; each
                          step rewrites the expression with its first operation done)
  rev    `R:kqzpab=`   -> `s:bap;s:zqk;A:bapzqk`  (reverse, emitted in chunks of 3)
Every answer ends with a newline. Difficulty = #operations (arith) or #chunks (rev).
"""
from __future__ import annotations

import random
import re

from .config import TaskConfig

FAMILIES = ("arith", "rev")
LETTERS = "abcdefghijklmnopqrstuvwxyz"
END = "\n"


def check_ops(ops: str, key: str) -> None:
    """A one-line error unless `ops` is a non-empty string of the operators + - *."""
    from methods.core.results import InputError

    if not isinstance(ops, str) or not ops or set(ops) - set("+-*"):
        raise InputError(f"config key '{key}': {ops!r} must be a non-empty string of the operators + - *")


def _apply(v: int, op: str, x: int) -> int:
    return v + x if op == "+" else v - x if op == "-" else v * x


def _arith_steps(values: list[int], ops: list[tuple[str, int]]) -> list[str]:
    """Rewrite steps: step k = the running value after operation k followed by the operations
    still to do (`Q:9-5+3=` -> `4+3`, `7`). A step needs only its predecessor's first two
    numbers, and copying the rest, which tiny models learn far faster than finding the k-th
    operand in the prompt (the value-only scratchpad `4`, `7`)."""
    return [str(v) + "".join(f"{o}{x}" for o, x in ops[k + 1:]) for k, v in enumerate(values)]


def arith_item(rng: random.Random, max_ops: int, max_digits: int, ops: str = "+-*") -> dict:
    n_ops = rng.randint(1, max_ops)
    digits = rng.randint(1, max_digits)
    val = rng.randint(1, 10 ** digits - 1)
    prompt, todo, values = f"Q:{val}", [], []
    for _ in range(n_ops):
        op = rng.choice(ops)
        x = rng.randint(2, 9) if op == "*" else rng.randint(1, 10 ** digits - 1)
        val = _apply(val, op, x)
        prompt += f"{op}{x}"
        todo.append((op, x))
        values.append(val)
    return {"family": "arith", "prompt": prompt + "=", "steps": _arith_steps(values, todo), "answer": str(val),
            "difficulty": n_ops, "digits": digits}


def rev_item(rng: random.Random, lo: int, hi: int) -> dict:
    s = "".join(rng.choice(LETTERS) for _ in range(rng.randint(lo, hi)))
    r = s[::-1]
    steps = [r[i:i + 3] for i in range(0, len(r), 3)]
    return {"family": "rev", "prompt": f"R:{s}=", "steps": steps, "answer": r,
            "difficulty": len(steps), "digits": 0}


def target(item: dict) -> str:
    """The gold completion (scratchpad + answer + newline)."""
    return "".join(f"s:{s};" for s in item["steps"]) + f"A:{item['answer']}" + END


def generate(cfg: TaskConfig) -> tuple[list[dict], list[dict]]:
    """(train, test): train has n_train items per family; test is disjoint from train by prompt."""
    rng = random.Random(cfg.seed)
    make = {"arith": lambda: arith_item(rng, cfg.max_ops, cfg.max_digits, cfg.ops),
            "rev": lambda: rev_item(rng, cfg.rev_min, cfg.rev_max)}
    train = [make[f]() for f in FAMILIES for _ in range(cfg.n_train)]
    seen = {t["prompt"] for t in train}
    test, i = [], 0
    while len(test) < cfg.n_test:
        item = make[FAMILIES[i % 2]]()
        if item["prompt"] not in seen:
            seen.add(item["prompt"])
            test.append(item)
            i += 1
    for k, t in enumerate(test):
        t["qid"] = k
    return train, test


def parse(text: str) -> tuple[list[str], str | None]:
    """(steps, answer) of a completion; answer None when there is no `A:` segment."""
    text = text.split(END)[0]
    steps, answer = [], None
    for seg in text.split(";"):
        if seg.startswith("s:"):
            steps.append(seg[2:])
        elif seg.startswith("A:"):
            answer = seg[2:]
            break
    return steps, answer


def is_correct(item: dict, text: str) -> bool:
    return parse(text)[1] == item["answer"]


def corrupt(rng: random.Random, s: str, family: str) -> str:
    """A wrong but plausible step value."""
    if family == "arith":
        while True:
            t = str(int(s) + rng.choice([-10, -2, -1, 1, 2, 10, 3]))
            if t != s:
                return t
    i = rng.randrange(len(s))
    c = rng.choice([x for x in LETTERS if x != s[i]])
    return s[:i] + c + s[i + 1:]


def _ops(prompt: str) -> tuple[int, list[tuple[str, int]]]:
    """(first value, [(op, operand), ...]) of an arithmetic prompt `Q:4+7*3=`."""
    body = prompt[2:-1]
    first = re.match(r"\d+", body).group()
    return int(first), [(o, int(x)) for o, x in re.findall(r"([+*-])(\d+)", body[len(first):])]


def _segments(steps: list[str], answer: str) -> list[str]:
    return [f"s:{v};" for v in steps] + [f"A:{answer}?"]


def verifier_example(item: dict, rng: random.Random, p_corrupt: float = 0.5) -> tuple[str, list[tuple[int, str]], int]:
    """One process-verifier training sequence: (text, marks, n_gold).

    text = prompt + `s:v1;s:v2;...A:ans?` (possibly corrupted); marks = (char index of every `;`
    and of the final `?`, label) with label `Y` iff every segment up to that mark equals the gold
    one (exact process labels; the char tokenizer maps chars 1:1 to tokens); n_gold = length of
    the text's prefix that agrees with the gold sequence (LM targets are taken only there).
    Corruptions (probability p_corrupt), at a random segment j: a wrong value (`_slip`), a
    repeated step, a dropped step."""
    gold = _segments(item["steps"], item["answer"])
    segs = list(gold)
    if rng.random() < p_corrupt:
        n = len(gold)
        j = rng.randrange(n)
        kind = rng.choice(["value", "value", "repeat", "drop"]) if n > 2 else "value"
        if kind == "value":
            segs = _slip(item, j, rng)
        elif kind == "repeat":
            j = min(j, n - 2)
            segs = gold[:j + 1] + [gold[j]] + gold[j + 1:]
        else:
            j = min(j, n - 2)
            segs = gold[:j] + gold[j + 1:]
    return label_marks(item, item["prompt"] + "".join(segs))


def _slip(item: dict, j: int, rng: random.Random) -> list[str]:
    """The segments with a wrong value at segment j (j = #steps: the answer). Arithmetic: the
    step's running value is off; with probability 1/2 (when a later step exists) the later steps
    and the answer are recomputed from it, as a model that slipped once would."""
    steps, answer = list(item["steps"]), item["answer"]
    if j == len(steps):
        return _segments(steps, corrupt(rng, answer, item["family"]))
    if item["family"] == "rev":
        steps[j] = corrupt(rng, steps[j], "rev")
        return _segments(steps, answer)
    v, ops = _ops(item["prompt"])
    values = []
    for o, x in ops:
        v = _apply(v, o, x)
        values.append(v)
    values[j] = int(corrupt(rng, str(values[j]), "arith"))
    if j < len(steps) - 1 and rng.random() < 0.5:
        for k in range(j + 1, len(values)):
            values[k] = _apply(values[k - 1], *ops[k])
        answer = str(values[-1])
    return _segments(_arith_steps(values, ops), answer)


def label_marks(item: dict, text: str) -> tuple[str, list[tuple[int, str]], int]:
    """Exact process labels of `text` = prompt + a (partial, possibly wrong) completion.

    The text is put in scored form (`verifier_text`: ends in `;` or `?`); marks = (char index, label)
    of every `;` of the completion and of a final `?`, label `Y` iff the text up to and including
    the mark equals the gold sequence prompt + `s:v1;...A:ans?` up to there (every step so far is
    right, and in the right place); n_gold = length of the common prefix with the gold sequence."""
    text = verifier_text(text)
    gold = item["prompt"] + target(item).replace(END, "?")
    n0 = len(item["prompt"])
    marks = [(i, "Y" if text[:i + 1] == gold[:i + 1] else "N") for i in range(n0, len(text))
             if text[i] == ";" or (text[i] == "?" and i == len(text) - 1)]
    n_gold = next((i for i in range(min(len(text), len(gold))) if text[i] != gold[i]), min(len(text), len(gold)))
    return text, marks, n_gold


def verifier_examples(train: list[dict], n: int, seed: int) -> list[tuple[str, list[tuple[int, str]], int]]:
    """n verifier training sequences drawn from `train` (see `verifier_example`)."""
    rng = random.Random(seed)
    return [verifier_example(train[rng.randrange(len(train))], rng) for _ in range(n)]


def verifier_text(text: str) -> str:
    """The form in which a (prompt + partial completion) is scored: ending in `;` (after a step)
    or in `?` (appended after an answer or a cut-off completion); the score is read there."""
    t = text.rstrip("\n")
    return t if t.endswith((";", "?")) else t + "?"


def alphabet() -> str:
    return "".join(sorted(set("QRAs:;=+-*?YN\n0123456789" + LETTERS)))
