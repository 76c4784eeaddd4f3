"""UniScale's benchmark queries at paper scale (arXiv 2605.30898, §5: MATH-500, AIME and AMC) from
the hub through `datasets`, in place of the shared pool's generated arithmetic/reversal queries.

Each record: qid, family (the set's name), difficulty (MATH-500's level 1-5; 5 for the competition
sets), digits (0), problem, answer, kind "math". Members see the problem in their chat template with
the Qwen2.5-Math instruction to put the final answer in \\boxed{}; an answer is the last \\boxed{...} of
a completion, compared after light normalisation (`normalize`; exact numeric equality when both
parse as numbers). Steps of the beam are paragraphs (up to "\\n\\n", the OpenR step convention); the PRM
reads its own "\\n" steps inside them (prm.py).
"""
from __future__ import annotations

import re

from methods.core.answers import last_boxed
from methods.core.results import InputError

from .config import QueriesConfig, QuerySet  # noqa: F401 (the config of this step)

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
STEP_END = "\n\n"
# problem / answer columns of the supported sets (the hub datasets' own schemas)
PROBLEM_COLS = ("problem", "question", "Problem")
ANSWER_COLS = ("answer", "Answer")


def _col(row: dict, cols: tuple[str, ...], what: str, where: str):
    for c in cols:
        if c in row and row[c] is not None:
            return row[c]
    raise InputError(f"{where}: no {what} column (looked for {', '.join(cols)}; has {sorted(row)})")


def answer_text(a) -> str:
    """A gold answer as text: a float that is an integer (math-ai/amc23 stores 27.0) loses the .0."""
    if isinstance(a, float) and a.is_integer():
        return str(int(a))
    return str(a)


def load_queries(cfg: QueriesConfig) -> list[dict]:
    from methods.core.data import load_records

    out = []
    for s in cfg.sets:
        rows = load_records(s.dataset, s.split)
        rows = rows[: s.n] if s.n is not None else rows
        if s.n is not None and len(rows) < s.n:
            raise InputError(f"config key 'uniscale.queries.sets' ({s.name}): {s.dataset} split {s.split!r} has "
                             f"{len(rows)} rows, fewer than n={s.n}")
        for r in rows:
            lvl = r.get("level")
            lvl = int(re.sub(r"\D", "", str(lvl)) or 5) if lvl is not None else 5
            prob = str(_col(r, PROBLEM_COLS, "problem", s.dataset))
            out.append({"qid": len(out), "family": s.name, "difficulty": lvl, "digits": 0, "kind": "math",
                        "problem": prob, "prompt": user_message(prob),
                        "answer": answer_text(_col(r, ANSWER_COLS, "answer", s.dataset))})
    return out


def user_message(problem: str) -> str:
    return f"{problem}\n{INSTRUCTION}"


def prompt_for(tok, problem: str) -> str:
    """The member's prompt: its chat template (thinking off for Qwen3: the table's token budget is
    that of a non-thinking answer) when it has one, else the plain message."""
    msg = user_message(problem)
    if getattr(tok, "chat_template", None):
        return tok.apply_chat_template([{"role": "user", "content": msg}], tokenize=False,
                                       add_generation_prompt=True, enable_thinking=False)
    return msg + "\n"


def normalize(a: str) -> str:
    """Light LaTeX normalisation: spacing, \\left/\\right, \\text{}, dfrac/tfrac, $ and a trailing
    period removed; not a full symbolic equivalence check."""
    s = a.strip()
    s = re.sub(r"\\text\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\mbox\{([^{}]*)\}", r"\1", s)
    for x in ("\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "$", " "):
        s = s.replace(x, "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("^\\circ", "").replace("^{\\circ}", "")
    s = s.rstrip(".")
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", s):
        s = s.replace(",", "")
    return s


def _num(s: str):
    try:
        return float(s)
    except ValueError:
        return None


def equal(pred: str | None, gold: str) -> bool:
    if pred is None:
        return False
    p, g = normalize(pred), normalize(gold)
    if p == g:
        return True
    a, b = _num(p), _num(g)
    return a is not None and b is not None and a == b


def answer(text: str) -> str | None:
    return last_boxed(text)


def is_correct(item: dict, text: str) -> bool:
    return equal(answer(text), item["answer"])
