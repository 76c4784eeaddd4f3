"""Statistics of the contamination protocol: Wilson intervals, the pipeline closed form, the
factual self-correction hazard fit, the decay-slope interval and Cohen's kappa (judge agreement)."""
from __future__ import annotations

import math

import numpy as np
from scipy import stats as st


def wilson(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k/n (n = 0 gives (0, 1))."""
    if n == 0:
        return 0.0, 1.0
    z = st.norm.ppf(0.5 + conf / 2)
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def compounding(c1: float, p_b: float, q: float, stages: int) -> list[float]:
    """Closed form of stage-wise contamination in a pipeline: stage s is contaminated when the
    upstream contamination is carried over (prob p_b) or its own tool output re-injects (prob q),
    independently: c_s = 1 − (1 − p_b·c_{s−1})(1 − q), with c_1 given."""
    c = [c1]
    for _ in range(stages - 1):
        c.append(1 - (1 - p_b * c[-1]) * (1 - q))
    return c


def fit_hazard(counts: list[int], n: int) -> tuple[float, float]:
    """Binomial maximum-likelihood fit of c(t) = s·(1−h)^t, t = 1..len(counts), to `counts`
    contaminated of `n` trials per turn. Returns (s, h)."""
    from scipy.optimize import minimize

    k = np.asarray(counts, float)
    t = np.arange(1, len(k) + 1)

    def nll(x):
        s, h = 1 / (1 + np.exp(-x[0])), 1 / (1 + np.exp(-x[1]))
        p = np.clip(s * (1 - h) ** t, 1e-12, 1 - 1e-12)
        return -(k * np.log(p) + (n - k) * np.log(1 - p)).sum()

    best = min((minimize(nll, x0, method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-10})
                for x0 in ([0.0, -1.0], [1.0, -2.0], [2.0, 0.0])), key=lambda r: r.fun)
    s, h = 1 / (1 + np.exp(-best.x))
    return float(s), float(h)


def slope_ci(curve_by_trial: np.ndarray, conf: float = 0.95) -> tuple[float, float, float]:
    """Slope of the per-trial contamination indicator against turn (OLS over trials × turns),
    with a cluster-robust (by trial) confidence interval: turns of one trial are not independent.
    `curve_by_trial` is (trials, turns) of 0/1. A constant indicator gives slope 0 and CI (0, 0)."""
    y = np.asarray(curve_by_trial, float)
    m, T = y.shape
    t = np.arange(1, T + 1, dtype=float)
    tc = t - t.mean()
    sxx = m * (tc ** 2).sum()
    beta = (y * tc).sum() / sxx
    resid = y - y.mean(axis=0, keepdims=True).mean() - beta * tc  # intercept = grand mean
    scores = (resid * tc).sum(axis=1)  # per-trial score contributions
    var = (scores ** 2).sum() / sxx ** 2 * (m / max(m - 1, 1))
    z = st.norm.ppf(0.5 + conf / 2)
    se = math.sqrt(var)
    return float(beta), float(beta - z * se), float(beta + z * se)


def cohen_kappa(a, b) -> float:
    """Cohen's kappa of two raters' labels of the same items (Cohen 1960): (p_o − p_e) / (1 − p_e),
    p_o the observed agreement, p_e the agreement expected from the two raters' label marginals.
    NaN where it is undefined (p_e = 1: both raters give every item one and the same label)."""
    a, b = list(a), list(b)
    if len(a) != len(b) or not a:
        raise ValueError(f"cohen_kappa needs two equal-length non-empty label lists, got {len(a)} and {len(b)}")
    labels = sorted(set(a) | set(b))
    idx = {x: i for i, x in enumerate(labels)}
    cm = np.zeros((len(labels), len(labels)))
    for x, y in zip(a, b):
        cm[idx[x], idx[y]] += 1
    n = cm.sum()
    po = np.trace(cm) / n
    pe = float(cm.sum(axis=1) @ cm.sum(axis=0)) / n ** 2
    return float("nan") if pe >= 1.0 else float((po - pe) / (1 - pe))
