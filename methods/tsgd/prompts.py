"""The solver and reflector prompts (shared by real LLMs and the simulators, which parse them)."""
from __future__ import annotations

import json
import re

SOLVER_SYSTEM = "Solve the math problem step by step. Put the final answer in \\boxed{}."
RULES_HEADER = "Rules from your experience library (apply those that fit):"
EXAMPLES_HEADER = "Similar problems from memory, with the answers given then:"
REFLECT_SYSTEM = (
    "You maintain an experience library of short, general rules that help a solver with math "
    "problems. The solver got a problem wrong. Diagnose the mistake, then propose at most one "
    "operation on the library: ADD a new general, reusable rule; EDIT rule [i] (fix, generalise "
    "or merge it); DELETE rule [i] if it is misleading or redundant; or NONE. Never write a rule "
    "about one specific problem. Reply with JSON only: "
    '{"diagnosis": str, "op": "ADD"|"EDIT"|"DELETE"|"NONE", "index": int|null, "rule": str|null}')
RULE_LINE = re.compile(r"^\[(\d+)\] (.*)$", re.M)
EXAMPLE = re.compile(r"^Problem: (.*)\nAnswer: (.*)$", re.M)


def solver_messages(question: str, rules: list[tuple[int, str]] = (),
                    examples: list[tuple[str, str]] = ()) -> list[dict]:
    """rules: (library index, text); examples: (question, answer) of retrieved experiences."""
    system = SOLVER_SYSTEM
    if rules:
        system += "\n\n" + RULES_HEADER + "\n" + "\n".join(f"[{i + 1}] {r}" for i, r in rules)
    if examples:
        system += "\n\n" + EXAMPLES_HEADER + "\n" + "\n\n".join(
            f"Problem: {q}\nAnswer: {a}" for q, a in examples)
    return [{"role": "system", "content": system}, {"role": "user", "content": f"Problem: {question}"}]


def reflect_messages(question: str, solution: str, gold: str, rules: list[tuple[int, str]],
                     size: int, capacity: int | None) -> list[dict]:
    ctx = "\n".join(f"[{i + 1}] {r}" for i, r in rules) or "(none)"
    cap = "no limit" if capacity is None else str(capacity)
    user = (f"Problem: {question}\nSolver's solution:\n{solution}\nCorrect answer: {gold}\n"
            f"Rules that were in context:\n{ctx}\nLibrary size: {size} (capacity {cap})")
    return [{"role": "system", "content": REFLECT_SYSTEM}, {"role": "user", "content": user}]


def parse_solver(messages: list[dict]) -> tuple[str, list[tuple[int, str]], list[tuple[str, str]]]:
    """Inverse of solver_messages: (question, rules, examples)."""
    system, user = messages[0]["content"], messages[-1]["content"]
    rules_part = system.split(RULES_HEADER, 1)[1].split(EXAMPLES_HEADER)[0] if RULES_HEADER in system else ""
    ex_part = system.split(EXAMPLES_HEADER, 1)[1] if EXAMPLES_HEADER in system else ""
    rules = [(int(i) - 1, t) for i, t in RULE_LINE.findall(rules_part)]
    return user.removeprefix("Problem: "), rules, EXAMPLE.findall(ex_part)


def parse_reflect(messages: list[dict]) -> tuple[str, list[tuple[int, str]]]:
    user = messages[-1]["content"]
    question = user.split("\n", 1)[0].removeprefix("Problem: ")
    ctx = user.split("Rules that were in context:\n", 1)[1]
    return question, [(int(i) - 1, t) for i, t in RULE_LINE.findall(ctx)]


def parse_op(reply: str) -> dict | None:
    """The reflector's JSON reply (first {...} block), or None when it is not valid."""
    m = re.search(r"\{.*\}", reply, re.S)
    if not m:
        return None
    try:
        d = json.loads(m.group(0))
    except json.JSONDecodeError:
        return None
    op = str(d.get("op", "")).upper()
    if op not in ("ADD", "EDIT", "DELETE"):
        return None
    idx = d.get("index")
    if op in ("EDIT", "DELETE"):
        if not isinstance(idx, int) or idx < 1:
            return None
        idx -= 1
    rule = d.get("rule")
    if op in ("ADD", "EDIT") and not (isinstance(rule, str) and rule.strip()):
        return None
    return {"op": op, "index": idx if op != "ADD" else None,
            "rule": rule.strip() if op != "DELETE" else None,
            "diagnosis": str(d.get("diagnosis", ""))}
