"""LinUCB over the unified action space, its route-only / TTS-only restrictions and baselines,
replayed on the offline table (numpy only)."""
from __future__ import annotations

import numpy as np

from .config import BanditConfig


class LinUCB:
    """a_t = argmax_a θᵀx_a + α·sqrt(x_aᵀ A⁻¹ x_a); A = λI + Σ x xᵀ, b = Σ r x, θ = A⁻¹ b.
    A⁻¹ is kept by Sherman–Morrison (O(d²) per update)."""

    def __init__(self, d: int, alpha: float = 1.0, lam: float = 1.0):
        self.alpha = alpha
        self.Ainv = np.eye(d) / lam
        self.b = np.zeros(d)

    @property
    def theta(self):
        return self.Ainv @ self.b

    def ucb(self, X: np.ndarray) -> np.ndarray:
        width = np.sqrt(np.maximum(np.einsum("kd,de,ke->k", X, self.Ainv, X), 0.0))
        return X @ self.theta + self.alpha * width

    def choose(self, X: np.ndarray) -> int:
        return int(np.argmax(self.ucb(X)))

    def update(self, x: np.ndarray, r: float) -> None:
        Ax = self.Ainv @ x
        self.Ainv -= np.outer(Ax, Ax) / (1.0 + x @ Ax)
        self.b += r * x


def disjoint(phi: np.ndarray, k: int) -> np.ndarray:
    """x_{t,a} = e_a ⊗ φ(q): K×(K·d)."""
    d = len(phi)
    X = np.zeros((k, k * d))
    for a in range(k):
        X[a, a * d:(a + 1) * d] = phi
    return X


def joint(phi: np.ndarray, psi: np.ndarray) -> np.ndarray:
    """The paper variant x_{t,a} = [φ; ψ(a); φ⊗ψ(a)] for every arm (rows of psi)."""
    k = len(psi)
    return np.hstack([np.tile(phi, (k, 1)), psi, np.einsum("d,ke->kde", phi, psi).reshape(k, -1)])


def run_policy(policy: str, R: np.ndarray, Phi: np.ndarray, arms: list[str], psi: np.ndarray,
               cfg: BanditConfig, seed: int) -> np.ndarray:
    """Chosen arm index per step of a stream: R[t] = reward of every arm on the step-t query
    (under the weights in force at t), Phi[t] = its context φ. oracle and best_fixed see all of R."""
    rng = np.random.default_rng(seed)
    K = len(arms)
    if policy == "oracle":
        return np.array([int(np.argmax(R[t])) for t in range(len(R))])
    if policy == "best_fixed":
        best = int(np.argmax(np.mean([R[t] for t in range(len(R))], axis=0)))
        return np.full(len(R), best)
    if policy == "random":
        return rng.integers(0, K, len(R))
    allowed = np.arange(K)
    if policy == "route_linucb":
        allowed = np.array([i for i, a in enumerate(arms) if a.split("/")[1] == cfg.route_tts])
    elif policy == "tts_linucb":
        allowed = np.array([i for i, a in enumerate(arms) if a.split("/")[0] == cfg.tts_model])
    chosen = []
    if policy == "knn":
        hist_phi, hist_a, hist_r = [], [], []
        for t in range(len(R)):
            est = np.full(K, np.inf)
            if hist_phi:
                H, A, Rr = np.array(hist_phi), np.array(hist_a), np.array(hist_r)
                dist = np.linalg.norm(H - Phi[t], axis=1)
                for a in range(K):
                    idx = np.where(A == a)[0]
                    if len(idx):
                        near = idx[np.argsort(dist[idx])[:cfg.knn_k]]
                        est[a] = Rr[near].mean()
            ties = np.flatnonzero(est == est.max())
            a = int(rng.choice(ties))
            chosen.append(a)
            hist_phi.append(Phi[t]); hist_a.append(a); hist_r.append(R[t, a])
        return np.array(chosen)
    k = len(allowed)
    use_joint = policy == "uis_linucb_joint"
    d = (Phi.shape[1] + psi.shape[1] + Phi.shape[1] * psi.shape[1]) if use_joint else k * Phi.shape[1]
    alpha = 0.0 if policy == "greedy_linear" else cfg.alpha
    bandit = LinUCB(d, alpha, cfg.lam)
    for t in range(len(R)):
        X = joint(Phi[t], psi[allowed]) if use_joint else disjoint(Phi[t], k)
        u = bandit.ucb(X)
        ties = np.flatnonzero(u >= u.max() - 1e-12)
        j = int(rng.choice(ties))
        bandit.update(X[j], R[t, allowed[j]])
        chosen.append(int(allowed[j]))
    return np.array(chosen)
