"""Answer extraction and equivalence for the paper-scale benchmarks of ASAG (arXiv 2606.15070),
after DEER's evaluation (github.com/BugSmith/DEER, check.py: the last \\boxed{...} of the
response against the gold answer, numerically where both are numbers).

- math: the last \\boxed{...} (balanced braces); equal when the normalised strings match, or
  both parse as numbers (integers, decimals, \\frac{a}{b}, a/b, thousands separators, a
  trailing unit or degree sign dropped) within 1e-6 relative, or sympy finds the difference zero.
- multiple choice (GPQA): the first letter A–D of the boxed answer equals the gold letter.
"""
from __future__ import annotations

import re
from fractions import Fraction

from methods.core.answers import last_boxed  # noqa: F401 (re-exported)


def _clean(s: str) -> str:
    s = str(s).strip().strip("$").strip()
    s = re.sub(r"\\(left|right|displaystyle|!|,|;|quad)", "", s)
    s = re.sub(r"\\text\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\mbox\{([^{}]*)\}", r"\1", s)
    s = s.replace("^\\circ", "").replace("^{\\circ}", "").replace("\\circ", "").replace("\\%", "").replace("%", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    if "=" in s and not s.startswith("="):   # "x = 3" -> "3"
        s = s.split("=")[-1]
    return s.strip().rstrip(".").strip()


def _number(s: str) -> Fraction | None:
    s = s.replace(" ", "")
    m = re.fullmatch(r"(-?)\\frac\{(-?\d+)\}\{(-?\d+)\}", s)
    if m:
        if int(m.group(3)) == 0:
            return None
        f = Fraction(int(m.group(2)), int(m.group(3)))
        return -f if m.group(1) else f
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", s):
        s = s.replace(",", "")
    if re.fullmatch(r"-?\d+(\.\d+)?", s):
        return Fraction(s)
    m = re.fullmatch(r"(-?\d+)/(\d+)", s)
    if m and int(m.group(2)) != 0:
        return Fraction(int(m.group(1)), int(m.group(2)))
    return None


def _sympy(s: str):
    import sympy

    py = s
    for _ in range(3):
        py = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"((\1)/(\2))", py)
        py = re.sub(r"\\sqrt\{([^{}]*)\}", r"sqrt(\1)", py)
    py = re.sub(r"\\sqrt(\d+)", r"sqrt(\1)", py)
    py = py.replace("\\pi", "pi").replace("\\cdot", "*").replace("\\times", "*").replace("{", "(").replace("}", ")")
    py = re.sub(r"(\d)\s*(sqrt|pi|\()", r"\1*\2", py.replace("^", "**"))
    return sympy.sympify(py, rational=True)


def math_equal(pred: str | None, gold: str | None) -> bool:
    if pred is None or gold is None:
        return False
    a, b = _clean(pred), _clean(gold)
    if a.replace(" ", "") == b.replace(" ", ""):
        return True
    x, y = _number(a), _number(b)
    if x is not None and y is not None:
        return abs(x - y) <= Fraction(1, 10 ** 6) * max(1, abs(y))
    try:
        import sympy

        return bool(sympy.simplify(_sympy(a) - _sympy(b)) == 0)
    except Exception:  # noqa: BLE001 - anything sympy cannot parse is unequal
        return False


def choice_equal(pred: str | None, gold: str) -> bool:
    if pred is None:
        return False
    m = re.search(r"[A-D]", _clean(pred))
    return bool(m) and m.group(0) == gold


def correct(pred: str | None, gold: str, kind: str) -> bool:
    """Whether the extracted answer `pred` matches `gold` for a benchmark of `kind` (math | choice)."""
    return choice_equal(pred, gold) if kind == "choice" else math_equal(pred, gold)
