"""Final answers of math solutions: the content of the last `\\boxed{...}` (or `\\fbox{...}`), the
convention of MATH (Hendrycks et al., 2021) and of the math-tuned models the papers evaluate."""
from __future__ import annotations


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (or `\\fbox{...}`) of `text`, braces balanced; None
    when there is none or it is not closed."""
    i = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if i < 0:
        return None
    j = text.find("{", i)
    if j < 0:
        return None
    depth = 0
    for k in range(j, len(text)):
        if text[k] == "{":
            depth += 1
        elif text[k] == "}":
            depth -= 1
            if depth == 0:
                return text[j + 1:k]
    return None
