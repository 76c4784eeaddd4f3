"""SCOPE's pure parts (numpy / scikit-learn, no torch): anchor retrieval, the prediction prompt,
the parser, the GRPO reward, anchor statistics and the two-stage routing
rule of the public code (`scripts/two_stage_routing.py` defaults), Pareto dominance."""
from __future__ import annotations

import math
import re

import numpy as np

PRED_RE = re.compile(r"\{len:\s*(\d+),\s*correct:\s*(yes|no)\}")
ALPHABET = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
            " :;{},=+-*>?\n")


# ---- Stage 0: retrieval -----------------------------------------------------------------
def embed(anchor_texts: list[str], query_texts: list[str], n_features: int = 2 ** 14):
    """Hashed char-3/4-gram TF-IDF (IDF fitted on the anchors), rows L2-normalised (dense)."""
    from sklearn.feature_extraction.text import HashingVectorizer, TfidfTransformer

    hv = HashingVectorizer(analyzer="char", ngram_range=(3, 4), n_features=n_features,
                           alternate_sign=False, norm=None)
    tf = TfidfTransformer(norm="l2").fit(hv.transform(anchor_texts))
    return (tf.transform(hv.transform(anchor_texts)).toarray(),
            tf.transform(hv.transform(query_texts)).toarray())


def topk_cosine(Q: np.ndarray, A: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices, similarities) of the k anchors with the highest cosine similarity per query
    (ties: lower anchor index first)."""
    qn = Q / np.maximum(np.linalg.norm(Q, axis=1, keepdims=True), 1e-12)
    an = A / np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1e-12)
    S = qn @ an.T
    idx = np.argsort(-S, axis=1, kind="stable")[:, :k]
    return idx, np.take_along_axis(S, idx, axis=1)


# ---- Stage 1: prompt, target, parser ----------------------------------------------------
def performance(length: int, correct: bool) -> str:
    return f"{{len: {int(length)}, correct: {'yes' if correct else 'no'}}}"


def build_prompt(model: str, question: str, anchors: list[tuple[str, int, bool]]) -> str:
    """The official code's prompt (`scripts/scope_inference.py`), compacted for a char-level predictor: target model id, one line per anchor
    `Question Performance`, then the target question; the completion is `performance(...)`."""
    lines = [f"Model: {model}"] + [f"{q} {performance(n, c)}" for q, n, c in anchors]
    return "\n".join(lines) + f"\n> {question} "


def parse(text: str) -> tuple[int, bool] | None:
    """(len, correct) of a completion, None when the format is broken (correctness 'unknown')."""
    m = PRED_RE.search(text.replace("*", "").replace("`", ""))
    return None if m is None else (int(m.group(1)), m.group(2) == "yes")


# ---- RL stage: reward (the GRPO advantages and loss are methods.core.rl) --------------------
def reward(text: str, true_len: int, true_correct: bool) -> dict:
    """r = r_format + r_correct + r_len (not stated in what we read; our choice): r_format 1 if the completion parses,
    r_correct 1 if predicted yes/no equals the truth, r_len = max(0, 1 - |L̂ - L| / L)."""
    p = parse(text)
    if p is None:
        return {"format": 0.0, "correct": 0.0, "len": 0.0, "total": 0.0}
    r_c = float(p[1] == bool(true_correct))
    r_l = max(0.0, 1.0 - abs(p[0] - true_len) / max(true_len, 1))
    return {"format": 1.0, "correct": r_c, "len": r_l, "total": 1.0 + r_c + r_l}


# ---- Stage 2: routing -------------------------------------------------------------------
def anchor_stats(sims: np.ndarray, correct: np.ndarray, cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stage I: per (query, model) the s²-weighted mean correctness and cost over the k_r anchors.
    sims (Q, k); correct/cost (Q, k, M) = the model's outcome on each retrieved anchor."""
    w = sims ** 2
    w = np.where(w.sum(1, keepdims=True) > 0, w, 1.0)
    w = w / w.sum(1, keepdims=True)
    return np.einsum("qk,qkm->qm", w, correct), np.einsum("qk,qkm->qm", w, cost)


def minmax_rows(x: np.ndarray) -> np.ndarray:
    """Min-max normalise each row (across the candidate models of one query); 0.5 if all equal."""
    lo, hi = x.min(1, keepdims=True), x.max(1, keepdims=True)
    span = hi - lo
    return np.where(span > 0, (x - lo) / np.where(span > 0, span, 1), 0.5)


def minmax_all(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return np.full_like(x, 0.5, dtype=float) if hi <= lo else (x - lo) / (hi - lo)


def route_scores(norm_acc, norm_cost, pred_correct, norm_pred_cost, alpha: float,
                 gamma: float = 2.0, w: float = 0.3) -> np.ndarray:
    """final = w'·score1 + (1-w')·score2 with γ' = γ(1 + 2(1-α)), w' = w(0.5 + 0.5α);
    score1 = α·norm_acc + (1-α)(1-norm_cost)^γ', score2 = α·pred_correct + (1-α)(1-norm_pred_cost)^γ'.
    w=None means anchor-only (w' = 1)."""
    g = gamma * (1 + 2 * (1 - alpha))
    wp = 1.0 if w is None else w * (0.5 + 0.5 * alpha)
    s1 = alpha * np.asarray(norm_acc) + (1 - alpha) * (1 - np.asarray(norm_cost)) ** g
    s2 = alpha * np.asarray(pred_correct) + (1 - alpha) * (1 - np.asarray(norm_pred_cost)) ** g
    return wp * s1 + (1 - wp) * s2


def route(*args, **kw) -> np.ndarray:
    """argmax over models of `route_scores` (ties → first model)."""
    return np.argmax(route_scores(*args, **kw), axis=-1)


def log_minmax_rows(cost: np.ndarray) -> np.ndarray:
    return minmax_rows(np.log(cost + 1e-9))


# ---- evaluation helpers -----------------------------------------------------------------
def auc(scores, labels) -> float:
    labels = np.asarray(labels).astype(int)
    if labels.min() == labels.max():
        return float("nan")
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, np.asarray(scores, dtype=float)))


def dominated(points: list[tuple[float, float]], curve: list[tuple[float, float]]) -> list[bool]:
    """Per (cost, acc) point: is some curve point at most as costly and at least as accurate?"""
    return [any(c <= pc * (1 + 1e-9) and a >= pa - 1e-12 for c, a in curve) for pc, pa in points]


def pareto_auc(curve: list[tuple[float, float]], c_max: float) -> float:
    """Area under the accuracy-vs-normalised-cost staircase of the frontier on [0, 1]."""
    pts = sorted((c / c_max, a) for c, a in curve)
    area, best, prev = 0.0, 0.0, 0.0
    for c, a in pts + [(1.0, None)]:
        c = min(c, 1.0)
        area += best * max(0.0, c - prev)
        prev = max(prev, c)
        if a is not None:
            best = max(best, a)
    return area


def finite(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


# ---- paper scale: the released predictor's prompt and parser, the dataset's model names -----
# The format the released predictor (Cooolder/SCOPE-CoT-RL-v3) was trained on, as its official
# inference script builds it (github.com/Sullivan07043/SCOPE, scripts/scope_inference.py,
# `build_scope_prompt`); anchors appear as the retrieval records carry them (first 200 chars + "...").
COT_HEAD = ("### Task\nYou are a performance prediction expert. Given a target question, {k} anchor questions with "
            "their performance results, and a target AI model, predict how the model will perform on the target "
            "question, specifically the output length and correctness after related reasoning analysis.\n\n"
            "### Target Model\n{model}\n\n")
COT_EXAMPLE = "Example {i}:\nQuestion: {q}\nPerformance: {perf}\n\n"
COT_TAIL = ("### Target Question\n{q}\n\n### Prediction Requirements\n"
            "1. **Analyze Anchor Patterns**: Examine how the model performed on similar questions\n"
            "2. **Assess Question Difficulty**: Consider the complexity and type of the target question\n"
            "3. **Compare with Anchors**: Find patterns between anchor performance and target characteristics\n"
            "4. **Predict Performance**: Based on your analysis, predict output length and correctness\n\n"
            "### Output Format (STRICT)\n"
            "Analysis: [Your comprehensive analysis covering anchor patterns, target question characteristics, "
            "and reasoning. Keep under 800 words.]\n"
            "Predicted Performance: {{len: [integer], correct: [yes/no]}}\n\n"
            "### Important Notes\n- Provide thorough analysis based on anchor patterns\n"
            "- Use anchor performance as reference points\n- Consider target question characteristics carefully\n"
            "- Do NOT add extra symbols like ** or __ around \"Analysis:\" or \"Predicted Performance:\"\n"
            "- Keep the format exactly as shown above\n\n### Output:")
ANCHOR_CHARS = 200


def anchor_text(question: str) -> str:
    """An anchor question as the official retrieval records carry it into the prompt."""
    return question[:ANCHOR_CHARS] + "..." if len(question) > ANCHOR_CHARS else question


def build_cot_prompt(model_id: str, question: str, anchors: list[tuple[str, int, bool]]) -> str:
    """The released predictor's prompt: task, target model id (the OpenRouter id), one example per
    anchor (the model's recorded token count and correctness on it), the target question, the
    reasoning checklist and the strict output format. With no anchors it says "0 anchor questions"."""
    ex = "".join(COT_EXAMPLE.format(i=i, q=anchor_text(q), perf=performance(n, c))
                 for i, (q, n, c) in enumerate(anchors, 1))
    return COT_HEAD.format(k=len(anchors), model=model_id) + ex + COT_TAIL.format(q=question)


_MD = [(re.compile(r"\*\*([^*]+)\*\*"), r"\1"), (re.compile(r"__([^_]+)__"), r"\1"),
       (re.compile(r"\*([^*]+)\*"), r"\1"), (re.compile(r"`([^`]+)`"), r"\1")]
LEN_RE = re.compile(r"len\s*[:=]\s*(\d+)", re.IGNORECASE)
CORRECT_RE = re.compile(r"correct\s*[:=]\s*(yes|no)", re.IGNORECASE)
CORRECT_SLOT_RE = re.compile(r"(correct\s*[:=])(\s*)(yes|no)", re.IGNORECASE)


def parse_cot(text: str) -> tuple[int | None, bool | None]:
    """(predicted length, predicted correctness) of a reasoning completion as the official parser
    (`parse_prediction`) reads it: markdown emphasis removed; the first `len: N` and `correct:
    yes|no` of the whole text when both are there; else those of the `Predicted Performance:`
    section (brackets removed, `:` or `=`), then anywhere. None where absent (the official parser's
    length 0 / correctness "unknown")."""
    cleaned = text
    for pat, rep in _MD:
        cleaned = pat.sub(rep, cleaned)
    m_len = re.search(r"len:\s*(\d+)", cleaned, re.IGNORECASE)
    m_c = re.search(r"correct:\s*(yes|no)", cleaned, re.IGNORECASE)
    if m_len and m_c:
        return int(m_len.group(1)), m_c.group(1).lower() == "yes"
    length = correct = None
    i = cleaned.find("Predicted Performance:")
    if i != -1:
        perf = re.sub(r"[\[\]()]", "", cleaned[i:])
        m_len, m_c = LEN_RE.search(perf), CORRECT_RE.search(perf)
        length = int(m_len.group(1)) if m_len else None
        correct = None if m_c is None else m_c.group(1).lower() == "yes"
    if correct is None and (m_c := CORRECT_RE.search(cleaned)):
        correct = m_c.group(1).lower() == "yes"
    if length is None and (m_len := LEN_RE.search(cleaned)):
        length = int(m_len.group(1))
    return length, correct


def correctness_slot(text: str) -> tuple[str, str] | None:
    """(text up to and including `correct:`, the whitespace after it) of the first correctness
    slot filled with yes/no in a raw completion (the one the parser reads), for scoring P(yes)
    against P(no) there."""
    m = CORRECT_SLOT_RE.search(text)
    return None if m is None else (text[:m.end(1)], m.group(2))


_PROVIDERS = ("tngtech/", "google/", "meta-llama/", "mistralai/", "qwen/", "nvidia/", "amazon/", "openai/")
_SHORT = {"gemma-3-12b-it": "gemma-3-12b", "gemma-3-27b-it": "gemma-3-27b", "gemma-3-4b-it": "gemma-3-4b",
          "llama-3.1-8b-instruct": "llama-3-1-8b", "llama-3.3-70b-instruct": "llama-3-3-70b"}


def normalize_model_name(name: str) -> str:
    """The official code's model key (scripts/scope_inference.py `normalize_model_name`): the
    OpenRouter id without `:free` and provider prefix, a few instruct suffixes shortened, so
    `meta-llama/llama-3.3-70b-instruct`, `llama-3.3-70b-instruct` and `llama-3-3-70b` agree."""
    name = name.replace(":free", "")
    for p in _PROVIDERS:
        name = name.replace(p, "")
    return _SHORT.get(name, name)
