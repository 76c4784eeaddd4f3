"""PID estimators, in bits.

* `broja_exact(p)`: the BROJA decomposition (Bertschinger et al. 2014) of a small discrete joint
  p[x1, x2, y]: q* = argmin_{q in Delta_p} I_q(X1,X2;Y), Delta_p = couplings that keep p(x1,y) and
  p(x2,y). Convex; solved with SLSQP on the full table with the marginal equalities.
* `batch_pid(...)`: the BATCH estimator (Liang et al. 2023) for continuous sources given the
  conditionals p(y|x1), p(y|x2), p(y|x1,x2) on a batch: a learned, Sinkhorn-normalised coupling
  q(a, b, y) over batch pairs stands in for Delta_p. Also returns per-sample (local) atoms.
* `conditional_pid`: Sensory PID, I(Y; V, A | T) = sum_t p(t) PID(. | t).

Identities (both estimators): R + U1 = I(X1;Y), R + U2 = I(X2;Y), R + U1 + U2 + S = I(X1,X2;Y).
"""
from __future__ import annotations

import math

import numpy as np

LN2 = math.log(2.0)
ATOMS = ("R", "U1", "U2", "S")


def _mi_xy(pxy: np.ndarray) -> float:
    """I(X;Y) in bits of a 2-D joint."""
    px, py = pxy.sum(1, keepdims=True), pxy.sum(0, keepdims=True)
    m = pxy > 0
    return float((pxy[m] * np.log2(pxy[m] / (px @ py)[m])).sum())


def atoms_from(i1: float, i2: float, i12: float, iq: float) -> dict:
    """The four atoms from I(X1;Y), I(X2;Y), I_p(X1,X2;Y) and I_q*(X1,X2;Y)."""
    return {"R": i1 + i2 - iq, "U1": iq - i2, "U2": iq - i1, "S": i12 - iq,
            "I1": i1, "I2": i2, "I": i12}


def broja_exact(p: np.ndarray, tol: float = 1e-12, maxiter: int = 500) -> dict:
    """Exact BROJA PID of p[x1, x2, y] (any non-negative array; normalised here)."""
    from scipy.optimize import minimize

    p = np.asarray(p, dtype=float)
    p = p / p.sum()
    n1, n2, ny = p.shape
    p1y, p2y, py = p.sum(1), p.sum(0), p.sum((0, 1))
    i1, i2 = _mi_xy(p1y), _mi_xy(p2y)
    i12 = _mi_xy(p.reshape(n1 * n2, ny))
    # variables: q on the support allowed by the marginals (q(x1,y)=0 or q(x2,y)=0 forces 0)
    allowed = (p1y[:, None, :] > 0) & (p2y[None, :, :] > 0)
    idx = np.flatnonzero(allowed.ravel())
    rows = []
    for a in range(n1):          # sum_x2 q(a, x2, y) = p(a, y)
        for y in range(ny):
            m = np.zeros((n1, n2, ny)); m[a, :, y] = 1; rows.append((m.ravel()[idx], p1y[a, y]))
    for b in range(n2):          # sum_x1 q(x1, b, y) = p(b, y)
        for y in range(ny):
            m = np.zeros((n1, n2, ny)); m[:, b, y] = 1; rows.append((m.ravel()[idx], p2y[b, y]))
    A = np.array([r[0] for r in rows]); bvec = np.array([r[1] for r in rows])
    keep = A.any(1)
    A, bvec = A[keep], bvec[keep]
    # start at the conditional-independence coupling p(x1|y) p(x2|y) p(y): feasible, interior
    with np.errstate(invalid="ignore", divide="ignore"):
        q0 = np.where(py > 0, p1y[:, None, :] * p2y[None, :, :] / np.where(py > 0, py, 1), 0.0)
    x0 = q0.ravel()[idx]

    def full(x):
        q = np.zeros(n1 * n2 * ny); q[idx] = np.clip(x, 0, None)
        return q.reshape(n1, n2, ny)

    def f(x):  # -H(Y | X1, X2) in nats = I_q(X1,X2;Y) - H(Y), H(Y) is fixed
        q = full(x); q12 = q.sum(2, keepdims=True)
        m = q > 1e-300
        val = float((q[m] * np.log(q[m] / np.broadcast_to(q12, q.shape)[m])).sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            g = np.log(np.maximum(q, 1e-300) / np.maximum(q12, 1e-300))
        return val, g.ravel()[idx]

    from scipy.linalg import null_space

    N = null_space(A)                                  # feasible directions: x = x0 + N z
    res_x, ok = x0, True
    if N.shape[1]:
        def fz(z, base):
            v, gr = f(base + N @ z)
            return v, N.T @ gr

        best = None
        for base in (x0, p.ravel()[idx]):              # two feasible starts; keep the better optimum
            res = minimize(fz, np.zeros(N.shape[1]), args=(base,), jac=True, method="SLSQP",
                           constraints=[{"type": "ineq", "fun": lambda z, b=base: b + N @ z,
                                         "jac": lambda z: N}],
                           options={"ftol": tol, "maxiter": maxiter})
            x = np.clip(base + N @ res.x, 0, None)
            if np.abs(A @ x - bvec).max() < 1e-8 and (best is None or f(x)[0] < best[0]):
                best = (f(x)[0], x, bool(res.success))
        if best is not None:
            _, res_x, ok = best
    q = full(res_x)
    q = q / q.sum()
    iq = min(_mi_xy(q.reshape(n1 * n2, ny)), _mi_xy(q0.reshape(n1 * n2, ny)))
    # iq can never exceed the conditional-independence start nor fall below max(I1, I2)
    iq = max(iq, i1, i2)
    out = atoms_from(i1, i2, i12, iq)
    out["solver_success"] = ok
    return out


# ----------------------------------------------------------------------------- BATCH

def _sinkhorn(K, r, c, iters: int, tol: float):
    """Scale K[y, a, b] ≥ 0 so that rows sum to r[y, a] and columns to c[y, b]."""
    for _ in range(iters):
        K = K * (c / K.sum(1).clamp_min(1e-30)).unsqueeze(1)     # columns
        K = K * (r / K.sum(2).clamp_min(1e-30)).unsqueeze(2)     # rows
        if (K.sum(1) - c).abs().max() < tol:
            break
    return K


def batch_pid(f1, f2, p1, p2, p12, *, epochs: int = 10, lr: float = 1e-3, hidden: int = 32,
              embed: int = 10, sinkhorn_iters: int = 500, sinkhorn_tol: float = 0.01,
              seed: int = 0) -> dict:
    """BATCH PID on one batch. f1 [B, d1], f2 [B, d2] source features; p1, p2, p12 [B, Y] the
    conditionals p(y|x1_a), p(y|x2_a), p(y|x1_a, x2_a). Returns the atoms (bits) and per-sample
    local atoms (arrays of length B)."""
    import torch
    from torch import nn

    g = torch.Generator().manual_seed(seed)
    f1, f2, p1, p2, p12 = (torch.as_tensor(np.asarray(t), dtype=torch.float32) for t in (f1, f2, p1, p2, p12))
    B, ny = p12.shape
    py = p12.mean(0)                                    # p(y) of the batch
    r = (p1 / B).T.contiguous()                         # q(a, y) = p(y|x1_a)/B → [Y, B]
    c = (p2 / B).T.contiguous()

    def mlp(d):
        net = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                            nn.Linear(hidden, embed * ny))
        for prm in net.parameters():
            with torch.no_grad():
                prm.copy_(torch.randn(prm.shape, generator=g) * (1 / math.sqrt(max(prm.shape[-1], 1))))
        return net

    m1, m2 = mlp(f1.shape[1]), mlp(f2.shape[1])

    def coupling():
        e1 = m1(f1).view(B, ny, embed)
        e2 = m2(f2).view(B, ny, embed)
        e1 = (e1 - e1.mean(0)) / (e1.std(0) + 1e-6)
        e2 = (e2 - e2.mean(0)) / (e2.std(0) + 1e-6)
        s = torch.einsum("ayk,byk->yab", e1, e2) / math.sqrt(embed)
        K = torch.exp(s - s.amax((1, 2), keepdim=True))
        return _sinkhorn(K, r, c, sinkhorn_iters, sinkhorn_tol)   # q[y, a, b]

    def iq_of(q):
        q = q / q.sum()
        qab = q.sum(0, keepdim=True)
        qy = q.sum((1, 2), keepdim=True)
        return (q * (torch.log(q.clamp_min(1e-30)) - torch.log(qab.clamp_min(1e-30))
                     - torch.log(qy.clamp_min(1e-30)))).sum()

    opt = torch.optim.Adam(list(m1.parameters()) + list(m2.parameters()), lr=lr)
    for _ in range(epochs):
        opt.zero_grad()
        loss = iq_of(coupling())
        loss.backward()
        opt.step()
    with torch.no_grad():
        q = coupling(); q = q / q.sum()
        iq_n = float(iq_of(q))

        def kl_rows(pc):      # per-sample KL(p(y|.) || p(y)) in nats
            return (pc * (torch.log(pc.clamp_min(1e-30)) - torch.log(py.clamp_min(1e-30)))).sum(1)

        l1, l2, l12 = kl_rows(p1), kl_rows(p2), kl_rows(p12)
        qy_ab = q / q.sum(0, keepdim=True).clamp_min(1e-30)          # q(y | a, b)
        diag = qy_ab[:, torch.arange(B), torch.arange(B)].T           # [B, Y]
        diag = diag / diag.sum(1, keepdim=True).clamp_min(1e-30)
        lq = kl_rows(diag)
    i1, i2, i12 = float(l1.mean()), float(l2.mean()), float(l12.mean())
    # I_q* lies in [max(I1, I2), I_p]-ish; a coupling with higher I than the conditional-independence
    # one cannot be the minimiser, so clip into [max(I1, I2), ...]
    iq_n = max(iq_n, i1, i2)
    out = {k: v / LN2 for k, v in atoms_from(i1, i2, i12, iq_n).items()}
    loc = {"R": (l1 + l2 - lq), "U1": (lq - l2), "U2": (lq - l1), "S": (l12 - lq), "I": l12}
    out["local"] = {k: (v / LN2).numpy() for k, v in loc.items()}
    return out


def batch_pid_avg(f1, f2, p1, p2, p12, *, batch_size: int, n_batches: int, seed: int = 0, **kw) -> dict:
    """BATCH averaged over `n_batches` random batches (with replacement across batches)."""
    n = len(p12)
    rng = np.random.default_rng(seed)
    acc = {k: 0.0 for k in ("R", "U1", "U2", "S", "I1", "I2", "I")}
    b = min(batch_size, n)
    for k in range(n_batches):
        i = rng.choice(n, size=b, replace=False)
        r = batch_pid(f1[i], f2[i], p1[i], p2[i], p12[i], seed=seed * 1000 + k, **kw)
        for a in acc:
            acc[a] += r[a] / n_batches
    return acc


def conditional_pid(t, f1, f2, p1, p2, p12, **kw) -> dict:
    """Sensory PID: sum over control values t of p(t) * BATCH PID on the items with that t."""
    t = np.asarray(t)
    vals, counts = np.unique(t, return_counts=True)
    acc = {k: 0.0 for k in ("R", "U1", "U2", "S", "I1", "I2", "I")}
    for v, cnt in zip(vals, counts):
        m = t == v
        r = batch_pid_avg(f1[m], f2[m], p1[m], p2[m], p12[m], **kw)
        for a in acc:
            acc[a] += r[a] * cnt / len(t)
    return acc


def discrete_batch_inputs(p: np.ndarray, n: int, seed: int = 0):
    """Samples (one-hot features, exact conditionals) of a discrete p[x1, x2, y]: the inputs
    BATCH gets when the model's conditionals are the true ones (used by the tests)."""
    p = np.asarray(p, float) / np.sum(p)
    n1, n2, ny = p.shape
    rng = np.random.default_rng(seed)
    p12 = p.sum(2)
    flat = rng.choice(n1 * n2, size=n, p=p12.ravel())
    a, b = flat // n2, flat % n2
    with np.errstate(invalid="ignore"):
        c12 = p / p12[..., None].clip(1e-300)
        c1 = p.sum(1) / p.sum((1, 2))[:, None].clip(1e-300)
        c2 = p.sum(0) / p.sum((0, 2))[:, None].clip(1e-300)
    return np.eye(n1)[a], np.eye(n2)[b], c1[a], c2[b], c12[a, b]
