"""Our simulator (not from the paper), standing in for the solver and reflector LLMs at tiny scale.

Both are `methods.core.llm.LLM` subclasses answering the same chat prompts a real model gets
(methods/tsgd/prompts.py), so the optimiser code is the same at every scale. They know each
problem's type (an oracle index over the synthetic splits), which is what a real LLM's
understanding stands in for.

Solver: P(correct | x, context) = sigmoid(t0 + t1*[right rule for type(x), or an instance rule
for x itself] - t2*[wrong rule for type(x)] - t3*n_irrelevant/10 - t4*n_misleading_examples
+ t5*[a correct same-type example]). Outcomes use common random numbers: greedy decoding
compares P with u(x) = hash(x), sample j of a seeded call with hash(x, seed, j), so changing
the context changes an outcome only through P. A correct answer is written in a random
equivalent form (1/2, 0.5, \\frac{1}{2}); a wrong one is the type's pitfall answer.

Reflector: on a failure of type p it proposes DELETE of a wrong rule for p in context w.p.
p_delete; otherwise a right general rule w.p. p_good (EDIT of the rule for p if one is in
context, else ADD), an instance-specific rule ("for this problem the answer is ...") w.p.
p_instance, else a wrong rule for p (EDIT or ADD likewise).
"""
from __future__ import annotations

import hashlib
import json
import math
import random
from fractions import Fraction

from methods.core.llm import LLM

from .answer import equivalent
from .config import ReflectorParams, SolverParams
from .prompts import parse_reflect, parse_solver
from .synth import TYPES

GOOD = {
    "precedence": ["Exponentiation binds tighter than unary minus: -a^2 means -(a^2).",
                   "In -a^2 square first, then negate; only (-a)^2 squares the negative."],
    "floordiv": ["Division of integers gives an exact fraction; do not drop the remainder.",
                 "When sharing equally, keep the fractional part: a/b may not be an integer."],
    "inclusive_count": ["The count of integers from a to b inclusive is b - a + 1.",
                        "Inclusive ranges include both ends: add one to the difference."],
    "pct_of_pct": ["Successive percent increases multiply: (1+p)(1+q) - 1, not p + q.",
                   "Percent changes compound; multiply the growth factors."],
    "neg_mod": ["A least non-negative residue lies in 0..m-1: add m to a negative remainder.",
                "For -a mod m, take m minus (a mod m) when a mod m is non-zero."],
    "min_hours": ["Convert minutes to hours by dividing by 60; 90 minutes is 1.5 hours.",
                  "An hour has 60 minutes, not 100: hours = minutes / 60."],
    "avg_of_avg": ["A combined mean weights each group mean by its group size.",
                   "The mean of everyone is total sum over total count, not the mean of the means."],
    "gcd_lcm": ["Events that repeat every a and b units coincide after lcm(a, b) units.",
                "The smallest common multiple is the lcm, not the gcd."],
    "neg_square": ["A negative number squared is positive: (-a)^2 = a^2.",
                   "Parentheses around -a make the square apply to the sign too."],
    "digit_sum9": ["n mod 9 equals the digit sum reduced mod 9 (repeat until below 9).",
                   "The digit sum itself is not the remainder; reduce it modulo 9."],
    "ordered_select": ["Choosing distinct roles is ordered: n(n-1) ways, not n choose 2.",
                       "When positions differ (gold/silver), order matters; use permutations."],
    "geo_terms": ["A geometric sequence from a to a r^(k-1) has k terms; count exponents 0..k-1.",
                  "Number of terms = (exponent of the last term) + 1."],
}
BAD = {p: [f"For {p.replace('_', ' ')} problems, the quick shortcut answer is right; do not double-check.",
           f"In {p.replace('_', ' ')} questions always take the simpler-looking result."] for p in TYPES}


def rulebook() -> dict[str, tuple[str, str]]:
    """rule text -> (kind, type) for every general rule the simulator knows."""
    book = {}
    for p in TYPES:
        for t in GOOD[p]:
            book[t] = ("good", p)
        for t in BAD[p]:
            book[t] = ("bad", p)
    return book


def instance_rule(question: str, gold: str) -> str:
    return f'For the problem "{question}" the answer is {gold}.'


def classify(rule: str, index: dict[str, dict], book=None) -> tuple[str, str | None]:
    """(kind, type): kind in good | bad | instance | other."""
    book = book or rulebook()
    if rule in book:
        return book[rule]
    if rule.startswith('For the problem "'):
        q = rule[len('For the problem "'):].split('" the answer is', 1)[0]
        return "instance", index[q]["type"] if q in index else None
    return "other", None


def _u(*key) -> float:
    h = hashlib.blake2b(json.dumps(key).encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2 ** 64


def _form(answer: str, v: float) -> str:
    """An equivalent rendering of an exact answer (tests the answer checker)."""
    f = Fraction(answer)
    if v < 0.5:
        return answer
    if f.denominator == 1:
        return f"{f.numerator}.0" if v < 0.75 else f"x = {f.numerator}"
    dec = float(f)
    if v < 0.75 and Fraction(repr(dec)) == f:
        return repr(dec)
    return f"\\frac{{{f.numerator}}}{{{f.denominator}}}" if f > 0 else f"-\\frac{{{-f.numerator}}}{{{f.denominator}}}"


class SimSolver(LLM):
    """Simulated solver LLM (see module docstring)."""

    capabilities = {"chat_template": True, "logprobs": False, "json_mode": False,
                    "instruction_following": True}

    def __init__(self, params: SolverParams, index: dict[str, dict], seed: int = 0):
        self.p, self.index, self.seed, self.book = params, index, seed, rulebook()

    def prob(self, messages: list[dict]) -> float:
        q, rules, examples = parse_solver(messages)
        x = self.index[q]
        t = x["type"]
        good = bad = helpful = False
        irrelevant = misleading = 0
        for _, r in rules:
            kind, rt = classify(r, self.index, self.book)
            if kind == "instance":
                if r == instance_rule(q, x["answer"]):
                    good = True
                else:
                    irrelevant += 1
            elif rt == t:
                good |= kind == "good"
                bad |= kind == "bad"
            else:
                irrelevant += 1
        for eq, ea in examples:
            ex = self.index.get(eq)
            if ex is None or ex["type"] != t:
                irrelevant += 1
            elif equivalent(ea, ex["answer"]):
                helpful = True
            else:
                misleading += 1
        p = self.p
        z = p.t0 + p.t1 * good - p.t2 * bad - p.t3 * irrelevant / 10 - p.t4 * misleading + p.t5 * helpful
        return 1 / (1 + math.exp(-z))

    def _chat(self, conversations, *, max_new_tokens, temperature, n, stop, seed, top_p, json_schema):
        out = []
        for c in conversations:
            q = parse_solver(c)[0]
            x, pr = self.index[q], self.prob(c)
            row = []
            for j in range(n):
                u = _u(self.seed, q) if temperature == 0 else _u(self.seed, q, seed, j)
                ans = _form(x["answer"], _u("form", q, j)) if u < pr else x["pitfall"]
                row.append(f"Working through the problem step by step.\nFinal answer: \\boxed{{{ans}}}")
            out.append(row)
        return out

    def _generate(self, prompts, **kw):
        raise NotImplementedError("SimSolver answers chat() only")


class SimReflector(LLM):
    """Simulated reflector LLM (see module docstring); draws from (seed, conversation, sample)."""

    capabilities = SimSolver.capabilities

    def __init__(self, params: ReflectorParams, index: dict[str, dict]):
        self.p, self.index, self.book = params, index, rulebook()

    def _chat(self, conversations, *, max_new_tokens, temperature, n, stop, seed, top_p, json_schema):
        out = []
        for c in conversations:   # draws depend on (seed, conversation, j), not on batching
            key = hashlib.blake2b(json.dumps([seed, c]).encode(), digest_size=8).hexdigest()
            out.append([json.dumps(self._one(c, random.Random(f"{key}|{j}"))) for j in range(n)])
        return out

    def _one(self, messages, rng: random.Random) -> dict:
        q, rules = parse_reflect(messages)
        x = self.index[q]
        t = x["type"]
        own = [(i, classify(r, self.index, self.book)[0]) for i, r in rules
               if classify(r, self.index, self.book)[1] == t
               and classify(r, self.index, self.book)[0] in ("good", "bad")]
        bad = [i for i, k in own if k == "bad"]
        if bad and rng.random() < self.p.p_delete:
            return {"diagnosis": "a rule in context misled the solver", "op": "DELETE",
                    "index": bad[0] + 1, "rule": None}
        u = rng.random()
        if u < self.p.p_good:
            rule, diag = rng.choice(GOOD[t]), "missed the key idea of this problem type"
        elif u < self.p.p_good + self.p.p_instance:
            return {"diagnosis": "wrong final value", "op": "ADD", "index": None,
                    "rule": instance_rule(q, x["answer"])}
        else:
            rule, diag = rng.choice(BAD[t]), "overthought the problem"
        if own:
            return {"diagnosis": diag, "op": "EDIT", "index": own[0][0] + 1, "rule": rule}
        return {"diagnosis": diag, "op": "ADD", "index": None, "rule": rule}

    def _generate(self, prompts, **kw):
        raise NotImplementedError("SimReflector answers chat() only")
