"""MATH-lite (our synthetic task for TSGD): K = 12 pitfall types with exact answers, 3 surface templates each.

Every problem has a gold answer and the answer a solver falling into the type's pitfall gives
(`pitfall`), so a simulated wrong solution is a plausible one. Pure function of the seed.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

TYPES = ("precedence", "floordiv", "inclusive_count", "pct_of_pct", "neg_mod", "min_hours",
         "avg_of_avg", "gcd_lcm", "neg_square", "digit_sum9", "ordered_select", "geo_terms")


def _frac(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _gen(t: str, v: int, r: random.Random) -> tuple[str, str, str]:
    """(question, gold, pitfall) of type t, surface template v."""
    if t == "precedence":
        a, b = r.randint(2, 12), r.randint(1, 40)
        q = [f"Compute -{a}^2 + {b}.", f"What is the value of -{a}**2 + {b}?",
             f"Evaluate the expression -{a}^2 + {b} exactly."][v]
        return q, str(-a * a + b), str(a * a + b)
    if t == "floordiv":
        a, b = r.randint(10, 60), r.choice([4, 6, 8])
        while a % b == 0:
            a += 1
        q = [f"Share {a} litres equally among {b} tanks. How many litres per tank?",
             f"What is {a} divided by {b}, as an exact number?",
             f"A rope of {a} m is cut into {b} equal pieces. How long is each piece in metres?"][v]
        return q, _frac(Fraction(a, b)), str(a // b)
    if t == "inclusive_count":
        a = r.randint(3, 40); b = a + r.randint(5, 40)
        q = [f"How many integers are there from {a} to {b} inclusive?",
             f"Count the whole numbers n with {a} <= n <= {b}.",
             f"Pages {a} through {b} of a book are read. How many pages is that?"][v]
        return q, str(b - a + 1), str(b - a)
    if t == "pct_of_pct":
        p, s = r.choice(range(5, 55, 5)), r.choice(range(10, 60, 10))
        q = [f"A price rises by {p}% and then by another {s}%. By what percent did it rise in total?",
             f"A population grows {p}% one year and {s}% the next. What is the total percent growth?",
             f"Increase a number by {p}%, then increase the result by {s}%. Total percent increase?"][v]
        tot = Fraction((100 + p) * (100 + s), 100) - 100
        return q, _frac(tot), str(p + s)
    if t == "neg_mod":
        a, m = r.randint(3, 40), r.choice([5, 7, 9, 11])
        while a % m == 0:
            a += 1
        q = [f"Find the remainder when -{a} is divided by {m} (between 0 and {m - 1}).",
             f"Compute -{a} mod {m}, as a least non-negative residue.",
             f"What is the least non-negative integer congruent to -{a} modulo {m}?"][v]
        return q, str((-a) % m), str(-(a % m))
    if t == "min_hours":
        mins = r.choice([m for m in range(5, 600, 5) if m % 60 and m % 60 not in (10, 20, 30, 40, 50)])
        q = [f"How many hours is {mins} minutes?",
             f"A film lasts {mins} minutes. How long is it in hours?",
             f"Convert {mins} minutes to hours."][v]
        return q, _frac(Fraction(mins, 60)), _frac(Fraction(mins // 60 * 100 + mins % 60, 100))
    if t == "avg_of_avg":
        n1, n2 = r.randint(2, 6), r.randint(7, 12)
        m1, m2 = r.randint(50, 70), r.randint(80, 95)
        q = [f"{n1} students average {m1} and {n2} students average {m2}. What is the overall average?",
             f"Group A ({n1} people) has mean {m1}; group B ({n2} people) has mean {m2}. Mean of everyone?",
             f"A class of {n1} scores a mean of {m1}, another of {n2} a mean of {m2}. Combined mean?"][v]
        return q, _frac(Fraction(n1 * m1 + n2 * m2, n1 + n2)), _frac(Fraction(m1 + m2, 2))
    if t == "gcd_lcm":
        a, b = r.choice([(a, b) for a in range(4, 25) for b in range(a + 1, 31)
                         if 1 < math.gcd(a, b) < a])
        q = [f"Two lights blink every {a} and {b} seconds. They blink together now; in how many seconds next?",
             f"Buses leave every {a} and every {b} minutes, together at noon. Minutes until they next coincide?",
             f"What is the smallest positive number divisible by both {a} and {b}?"][v]
        return q, str(a * b // math.gcd(a, b)), str(math.gcd(a, b))
    if t == "neg_square":
        a, b = r.randint(2, 12), r.randint(1, 40)
        q = [f"Compute (-{a})^2 - {b}.", f"What is (-{a})**2 - {b}?",
             f"Evaluate (-{a})^2 - {b} exactly."][v]
        return q, str(a * a - b), str(-a * a - b)
    if t == "digit_sum9":
        n = r.randint(10 ** 4, 10 ** 6)
        if n % 9 == 0:
            n += 1
        q = [f"What is the remainder when {n} is divided by 9?", f"Compute {n} mod 9.",
             f"Find {n} modulo 9."][v]
        return q, str(n % 9), str(sum(map(int, str(n))))
    if t == "ordered_select":
        n = r.randint(5, 60)
        q = [f"In how many ways can a president and a secretary be chosen from {n} people?",
             f"How many ordered pairs of distinct people can be formed from {n} people?",
             f"Gold and silver medals go to 2 of {n} runners. How many outcomes?"][v]
        return q, str(n * (n - 1)), str(n * (n - 1) // 2)
    if t == "geo_terms":
        a, ratio, k = r.choice([1, 2, 3, 5, 7]), r.choice([2, 3]), r.randint(4, 10)
        last = a * ratio ** (k - 1)
        q = [f"How many terms does the geometric sequence {a}, {a * ratio}, ..., {last} have?",
             f"The sequence {a}, {a * ratio}, {a * ratio ** 2}, ... ends at {last}. How many terms?",
             f"Count the terms of {a}, {a * ratio}, ..., {last} (each term {ratio} times the last)."][v]
        return q, str(k), str(k - 1)
    raise ValueError(t)


@dataclass
class SynthConfig:
    n_train: int
    n_val: int
    n_test: int
    n_types: int
    seed: int


def generate(cfg: SynthConfig) -> dict[str, list[dict]]:
    """{"train", "val", "test"}: lists of {id, type, template, question, answer, pitfall}; the
    questions of the three splits are disjoint."""
    r = random.Random(cfg.seed)
    types = TYPES[:cfg.n_types]
    seen, out = set(), {}
    for split, n in (("train", cfg.n_train), ("val", cfg.n_val), ("test", cfg.n_test)):
        rows, tries = [], 0
        while len(rows) < n:
            tries += 1
            if tries > 200 * n:
                raise ValueError(f"cannot draw {n} distinct {split} problems")
            t = types[len(rows) % len(types)]
            v = r.randrange(3)
            q, gold, pit = _gen(t, v, r)
            if q in seen or gold == pit:
                continue
            seen.add(q)
            rows.append({"id": f"{split}{len(rows)}", "type": t, "template": v, "question": q,
                         "answer": gold, "pitfall": pit})
        r.shuffle(rows)
        out[split] = rows
    return out


def write(data: dict[str, list[dict]], out: str | Path) -> None:
    from methods.core.results import write_jsonl

    for split, rows in data.items():
        write_jsonl(Path(out) / f"{split}.jsonl", rows)
