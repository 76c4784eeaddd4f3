"""E[max of k iid U(0,1)] by Monte Carlo, and its closed form.

M = max(U_1..U_k) has P(M <= x) = x^k on [0, 1] (a Beta(k, 1) variable), so its density is
k x^(k-1), E[M] = k/(k+1) and Var[M] = k / ((k+1)^2 (k+2)).
"""
from __future__ import annotations

import numpy as np

from .config import Config


def exact_mean(k: int) -> float:
    return k / (k + 1)


def exact_var(k: int) -> float:
    return k / ((k + 1) ** 2 * (k + 2))


def draws(cfg: Config) -> np.ndarray:
    """n draws of M, from numpy's PCG64 seeded with cfg.seed."""
    return np.random.default_rng(cfg.seed).random((cfg.n, cfg.k)).max(axis=1)


def estimate(cfg: Config) -> dict:
    """The summary metrics: the sample mean of M, its standard error, the closed form and the
    z-score |mean - k/(k+1)| / se."""
    m = draws(cfg)
    mean, se = float(m.mean()), float(m.std(ddof=1) / np.sqrt(cfg.n))
    exact = exact_mean(cfg.k)
    return {"k": cfg.k, "n": cfg.n, "mean_max": mean, "se": se, "exact_mean": exact,
            "abs_err": abs(mean - exact), "z": abs(mean - exact) / se}
