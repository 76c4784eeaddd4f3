"""Math answer extraction and equivalence (\\boxed{...}; 1/2 ≡ 0.5 ≡ \\frac{1}{2}, 2\\sqrt{2} ≡
sqrt(8), 3 ≡ 3.0, x=3 ≡ 3), by sympy on a LaTeX-normalised string, with a string fallback."""
from __future__ import annotations

import re

from methods.core.answers import last_boxed  # noqa: F401 (re-exported)


def _latex_to_py(s: str) -> str:
    s = s.strip().strip("$").strip()
    s = re.sub(r"\\(left|right|displaystyle|,|!|;)", "", s)
    s = s.replace("\\%", "").replace("%", "").replace("\\cdot", "*").replace("\\times", "*")
    s = s.replace("^\\circ", "").replace("\\circ", "")
    s = re.sub(r"\\text\{[^}]*\}", "", s)
    if "=" in s:  # "x = 3" -> "3"
        s = s.split("=")[-1]
    for _ in range(3):
        s = re.sub(r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}", r"((\1)/(\2))", s)
        s = re.sub(r"\\sqrt\{([^{}]*)\}", r"sqrt(\1)", s)
    s = re.sub(r"\\sqrt(\d+)", r"sqrt(\1)", s)
    s = s.replace("\\pi", "pi").replace("{", "(").replace("}", ")").replace("^", "**")
    s = s.replace(",", "") if re.fullmatch(r"[\d,]+(\.\d+)?", s.strip()) else s
    s = re.sub(r"(\d)\s*(sqrt|pi|\()", r"\1*\2", s)  # 2sqrt(2) -> 2*sqrt(2)
    return s.strip()


def normalise(s: str):
    """A sympy expression for an answer string, or the stripped string when it does not parse."""
    import sympy

    py = _latex_to_py(s)
    try:
        return sympy.nsimplify(sympy.sympify(py, rational=True), rational=True)
    except Exception:  # noqa: BLE001 - anything unparsable is compared as text
        return py.replace(" ", "")


_FRAC = re.compile(r"^(-?)\\[dt]?frac\{(-?\d+)\}\{(\d+)\}$")


def _rational(s: str):
    """Fast path: a plain rational ("3", "-3.0", "7/4", "1.75", "\\frac{7}{4}", "x = 3"), else None."""
    from fractions import Fraction

    s = s.strip().strip("$").strip()
    if "=" in s:
        s = s.split("=")[-1].strip()
    m = _FRAC.match(s)
    if m:
        f = Fraction(int(m.group(2)), int(m.group(3)))
        return -f if m.group(1) else f
    if re.fullmatch(r"-?\d+(\.\d+)?(/\d+)?", s) and not s.endswith("/0"):
        return Fraction(s)
    return None


def equivalent(a: str | None, b: str | None, tol: float = 1e-9) -> bool:
    """True when the two answers denote the same number (or the same normalised string)."""
    if a is None or b is None:
        return False
    if a.strip() == b.strip():
        return True
    fa, fb = _rational(a), _rational(b)
    if fa is not None and fb is not None:
        return fa == fb
    import sympy

    x, y = normalise(a), normalise(b)
    if isinstance(x, str) or isinstance(y, str):
        return str(x) == str(y)
    try:
        d = sympy.simplify(x - y)
        if d == 0:
            return True
        return abs(complex(sympy.N(d))) <= tol * max(1.0, abs(complex(sympy.N(y))))
    except Exception:  # noqa: BLE001
        return False
