"""Typicality bias (arXiv 2510.01171; the estimator as in the official
code's HelpSteer α script): the alpha estimator on preference pairs, and the sharpening
of a KL-regularised aligned policy, pi* ∝ pi_ref^(1+alpha/beta) exp(r_true/beta), both in closed
form and by gradient descent on the population DPO loss of a tabular policy."""
from __future__ import annotations

import math

import numpy as np


def fit_logit_cluster(x: np.ndarray, y: np.ndarray, clusters: np.ndarray, iters: int = 50) -> dict:
    """Logistic regression P(y=1) = sigmoid(c + x @ b) by Newton's method. Returns coefficients
    (intercept first), cluster-robust sandwich SEs (clustered by `clusters`, with the G/(G-1)
    small-sample factor) and two-sided normal p-values."""
    X = np.column_stack([np.ones(len(y)), np.asarray(x, float).reshape(len(y), -1)])
    y = np.asarray(y, float)
    w = np.zeros(X.shape[1])
    for _ in range(iters):
        mu = 1 / (1 + np.exp(-X @ w))
        H = X.T @ (X * (mu * (1 - mu))[:, None])
        step = np.linalg.solve(H, X.T @ (y - mu))
        w += step
        if np.abs(step).max() < 1e-12:
            break
    mu = 1 / (1 + np.exp(-X @ w))
    H = X.T @ (X * (mu * (1 - mu))[:, None])
    scores = X * (y - mu)[:, None]
    uniq, inv = np.unique(clusters, return_inverse=True)
    S = np.zeros((len(uniq), X.shape[1]))
    np.add.at(S, inv, scores)
    G = len(uniq)
    Hi = np.linalg.inv(H)
    V = Hi @ (S.T @ S) @ Hi * (G / (G - 1))
    se = np.sqrt(np.diag(V))
    z = w / se
    p = [math.erfc(abs(v) / math.sqrt(2)) for v in z]
    return {"coef": w.tolist(), "se": se.tolist(), "p": p, "n": int(len(y)), "clusters": G,
            "se_naive": np.sqrt(np.diag(Hi)).tolist()}


def fit_alpha(prefs: list[dict], world: dict, logp: dict | None = None) -> dict:
    """alpha-hat on the equal-correctness slice (r_true(i) = r_true(j)): P(i wins) =
    sigmoid(c + alpha * (logp_i - logp_j)), SE clustered by prompt. `logp[topic][item]` defaults
    to the true log pi_ref (the base model's log-prob in the paper)."""
    logp = logp or {t: np.log(world["p_ref"][t]).tolist() for t in world["topics"]}
    eq = [r for r in prefs if world["r_true"][r["topic"]][r["i"]] == world["r_true"][r["topic"]][r["j"]]]
    if len(eq) < 10:
        raise ValueError(f"only {len(eq)} equal-correctness pairs")
    dx = np.array([logp[r["topic"]][r["i"]] - logp[r["topic"]][r["j"]] for r in eq])
    y = np.array([r["win_i"] for r in eq], float)
    fit = fit_logit_cluster(dx, y, np.array([r["prompt_id"] for r in eq]))
    # secondary fit on all pairs with the quality difference as a covariate
    dr = np.array([world["r_true"][r["topic"]][r["i"]] - world["r_true"][r["topic"]][r["j"]]
                   for r in prefs], float)
    dx_all = np.array([logp[r["topic"]][r["i"]] - logp[r["topic"]][r["j"]] for r in prefs])
    full = fit_logit_cluster(np.column_stack([dx_all, dr]),
                             np.array([r["win_i"] for r in prefs], float),
                             np.array([r["prompt_id"] for r in prefs]))
    return {"alpha_hat": fit["coef"][1], "alpha_se": fit["se"][1], "alpha_p": fit["p"][1],
            "intercept": fit["coef"][0], "n_pairs": fit["n"], "n_clusters": fit["clusters"],
            "alpha_hat_all_pairs": full["coef"][1], "alpha_se_all_pairs": full["se"][1],
            "quality_coef_all_pairs": full["coef"][2]}


def closed_form_policy(p_ref, r_true, alpha: float, beta: float) -> np.ndarray:
    """pi*(y) ∝ pi_ref(y)^(1+alpha/beta) exp(r_true(y)/beta)."""
    z = (1 + alpha / beta) * np.log(p_ref) + np.asarray(r_true, float) / beta
    z -= z.max()
    return np.exp(z) / np.exp(z).sum()


def dpo_tabular(p_ref, r_true, alpha: float, beta: float, steps: int = 200) -> np.ndarray:
    """Minimise the population DPO loss of a tabular policy over all ordered pairs, with
    preference probabilities from the biased reward r = r_true + alpha log pi_ref (L-BFGS)."""
    import torch

    lp_ref = torch.tensor(np.log(p_ref), dtype=torch.float64)
    r = torch.tensor(r_true, dtype=torch.float64) + alpha * lp_ref
    pref = torch.sigmoid(r[:, None] - r[None, :])          # P(i > j)
    theta = lp_ref.clone().requires_grad_(True)             # start at pi_ref
    opt = torch.optim.LBFGS([theta], lr=1, max_iter=steps, tolerance_grad=1e-13,
                            tolerance_change=1e-15, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        logpi = torch.log_softmax(theta, 0)
        h = beta * ((logpi - lp_ref)[:, None] - (logpi - lp_ref)[None, :])
        loss = -(pref * torch.nn.functional.logsigmoid(h)).sum() / len(p_ref) ** 2
        loss.backward()
        return loss

    opt.step(closure)
    return torch.softmax(theta.detach(), 0).numpy()


def sharpening_slope(policy, p_ref, r_true) -> float:
    """Coefficient of log pi_ref in the least-squares fit log policy ~ 1 + log pi_ref + r_true
    (the fitted gamma; r_true as a covariate removes the quality term)."""
    X = np.column_stack([np.ones(len(p_ref)), np.log(p_ref), np.asarray(r_true, float)])
    coef, *_ = np.linalg.lstsq(X, np.log(policy), rcond=None)
    return float(coef[1])


def sharpen_table(world: dict, alpha: float, betas: list[float]) -> list[dict]:
    """Closed-form and gradient-DPO gamma per beta, on the first topic of the world."""
    t = world["topics"][0]
    p, r = np.asarray(world["p_ref"][t]), world["r_true"][t]
    rows = []
    for b in betas:
        cf, dpo = closed_form_policy(p, r, alpha, b), dpo_tabular(p, r, alpha, b)
        rows.append({"beta": b, "gamma_theory": 1 + alpha / b,
                     "gamma_closed_form": sharpening_slope(cf, p, r),
                     "gamma_dpo": sharpening_slope(dpo, p, r),
                     "entropy_ref": float(-(p * np.log(p)).sum()),
                     "entropy_dpo": float(-(dpo * np.log(dpo)).sum()),
                     "max_abs_logp_gap": float(np.abs(np.log(cf) - np.log(dpo)).max()),
                     "p_ref": p.tolist(), "p_dpo": dpo.tolist()})
    return rows
