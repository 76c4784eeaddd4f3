"""Diversity and quality metrics of the paper (as in the official code's
`analysis/evals/diversity.py` and `ngram.py`): embedding semantic diversity, pairwise
ROUGE-L, distinct-n (intra-response as in the repo, and corpus-level), Coverage-N, KL of the
answer histogram to the reference distribution, validity and unique-valid fraction."""
from __future__ import annotations

from collections import Counter

import numpy as np


def semantic_diversity(emb: np.ndarray) -> float:
    """100 x mean over unordered pairs of 1 - clip(cos, 0, 1) (rows L2-normalised here)."""
    e = np.asarray(emb, float)
    if len(e) < 2:
        return float("nan")
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    iu = np.triu_indices(len(e), 1)
    return float(100 * np.mean(1 - np.clip((e @ e.T)[iu], 0, 1)))


def pooled_semantic_diversity(groups: list[np.ndarray]) -> float:
    """Pairs within each prompt's responses, pooled across prompts (the repo's average)."""
    d, n = 0.0, 0
    for e in groups:
        if len(e) >= 2:
            k = len(e) * (len(e) - 1) // 2
            d += semantic_diversity(e) * k
            n += k
    return d / n if n else float("nan")


def _ngrams(words: list[str], n: int) -> list[tuple]:
    return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]


def distinct_n_intra(texts: list[str], n: int) -> float:
    """Repo-compatible: mean over responses of unique n-grams / n-grams (whitespace tokens)."""
    vals = []
    for t in texts:
        g = _ngrams(t.split(), n)
        if g:
            vals.append(len(set(g)) / len(g))
    return float(np.mean(vals)) if vals else float("nan")


def distinct_n_corpus(texts: list[str], n: int) -> float:
    """Unique n-grams over all responses / total n-grams."""
    g = [x for t in texts for x in _ngrams(t.split(), n)]
    return len(set(g)) / len(g) if g else float("nan")


def rouge_l_f1(a: str, b: str) -> float:
    """ROUGE-L F1 on whitespace tokens (word LCS)."""
    x, y = a.split(), b.split()
    if not x or not y:
        return 0.0
    prev = [0] * (len(y) + 1)
    for xi in x:
        cur = [0]
        for j, yj in enumerate(y):
            cur.append(prev[j] + 1 if xi == yj else max(prev[j + 1], cur[j]))
        prev = cur
    lcs = prev[-1]
    if lcs == 0:
        return 0.0
    p, r = lcs / len(x), lcs / len(y)
    return 2 * p * r / (p + r)


def mean_pairwise_rouge_l(texts: list[str]) -> float:
    pairs = [(i, j) for i in range(len(texts)) for j in range(i + 1, len(texts))]
    return float(np.mean([rouge_l_f1(texts[i], texts[j]) for i, j in pairs])) if pairs else float("nan")


def coverage(samples: list[str], valid: list[str]) -> float:
    """Coverage-N: distinct valid answers produced / all valid answers."""
    vs = set(valid)
    return len(vs & set(samples)) / len(vs)


def kl_to_reference(samples: list[str], valid: list[str], p_ref, smoothing: float = 0.0) -> float:
    """KL(q || p_ref) of the histogram q of the valid samples (optionally add-`smoothing`)."""
    cnt = Counter(s for s in samples if s in set(valid))
    q = np.array([cnt[v] + smoothing for v in valid], float)
    if q.sum() == 0:
        return float("nan")
    q /= q.sum()
    p = np.asarray(p_ref, float)
    m = q > 0
    return float(np.sum(q[m] * np.log(q[m] / p[m])))


def validity(samples: list[str], valid: list[str]) -> float:
    vs = set(valid)
    return sum(s in vs for s in samples) / len(samples) if samples else float("nan")


def unique_valid_fraction(samples: list[str], valid: list[str]) -> float:
    vs = set(valid)
    return len({s for s in samples if s in vs}) / len(samples) if samples else float("nan")


def bootstrap_ratio_ci(num: list[float], den: list[float], reps: int = 2000, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float, float]:
    """Ratio of means mean(num)/mean(den) and a percentile bootstrap CI resampling the paired
    units (topics)."""
    a, b = np.asarray(num, float), np.asarray(den, float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), (reps, len(a)))
    if b.mean() <= 0:
        return float("nan"), float("nan"), float("nan")
    with np.errstate(divide="ignore", invalid="ignore"):
        r = a[idx].mean(1) / b[idx].mean(1)
    lo, hi = np.quantile(r, [(1 - level) / 2, (1 + level) / 2])
    return float(a.mean() / b.mean()), float(lo), float(hi)


def expected_coverage(q, draws: int) -> float:
    """E[Coverage] of `draws` iid samples from q over len(q) valid answers."""
    q = np.asarray(q, float)
    return float(np.mean(1 - (1 - q) ** draws))


def entropy(p) -> float:
    p = np.asarray(p, float)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("math", "np", "Counter")]
