"""PID estimators, in bits.

* `broja_exact(p)`: the BROJA decomposition (Bertschinger et al. 2014) of a small discrete joint
  p[x1, x2, y]: q* = argmin_{q in Delta_p} I_q(X1,X2;Y), Delta_p = couplings that keep p(x1,y) and
  p(x2,y). Convex; solved with SLSQP on the full table with the marginal equalities.
* `batch_pid(...)`: the BATCH estimator (Liang et al. 2023, arXiv 2302.12247) for continuous
  sources given the conditionals p(y|x1), p(y|x2), p(y|x1,x2) of a set of items: a learned,
  Sinkhorn-projected coupling q(a, b, y) over the item pairs of each batch stands in for Delta_p;
  one coupling network trained over all batches for `epochs` epochs. Also returns per-item
  (local) atoms. `batch_pid_avg`: the atoms only.
* `conditional_pid`: Sensory PID, the decomposition of I(Y; V, A | T) = sum_t p(t) PID(. | t).

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
# Liang et al. 2023 ("Quantifying & Modeling Multimodal Interactions", NeurIPS 2023, arXiv
# 2302.12247: the BATCH estimator, overview in its Fig. 9; reference code pliang279/PID,
# estimators/ce_alignment_information.py, read as a reference only). In a batch of B items the sources are the item indices a (for x1) and b (for
# x2). Two MLPs map x1_a and x2_b to one embed-dim vector per label; q~(a, b, y) =
# exp(<e1(a, y), e2(b, y)> / sqrt(embed)) is projected per label y by Sinkhorn onto the set with
# rows sum_b q(a, b, y) = p(y|x1_a) and columns sum_a q(a, b, y) = p(y|x2_b) (the marginal
# constraints of Delta_p, up to the 1/B of the uniform item distribution), and the MLPs are trained
# with Adam to minimise I_q(X1, X2; Y) = I(X1; Y) + I_q(X2; Y | X1), anchored at p(y|x1_a) as in
# the reference. Training is `epochs` passes over the batches of the item set, one Adam step per
# batch (the reference's train_ce_alignment); the estimate is the batch-size-weighted mean of the
# per-batch atoms of the trained coupling (its eval_ce_alignment).

EPS = 1e-8          # the reference's additive guard inside logs and Sinkhorn denominators


def _sinkhorn(K, r, c, iters: int, tol: float):
    """Scale K[y, a, b] >= 0 per label y so that its rows sum to r[y, a] and its columns to c[y, b].
    Each iteration normalises the columns, stops that label if its rows are within `tol`
    (absolute), else normalises the rows and stops it if its columns are within `tol`; at most
    `iters` iterations (the reference's sinkhorn_probs loop, all labels at once)."""
    import torch

    done = torch.zeros(K.shape[0], dtype=torch.bool)

    def keep_done(K, Kn):
        # labels that have converged keep their matrix; `where` (and its backward) only when any has
        return torch.where(done[:, None, None], K, Kn) if bool(done.any()) else Kn

    for _ in range(iters):
        # the scaling factor c / colsum first, then one full-size product (same fixed point and
        # iterates up to float rounding, ~4x faster with its backward than K / colsum * c)
        K = keep_done(K, K * (c / (K.sum(1) + EPS))[:, None, :])
        done = done | ((K.sum(2) - r).abs().amax(1) <= tol)
        if bool(done.all()):
            break
        K = keep_done(K, K * (r / (K.sum(2) + EPS))[:, :, None])
        done = done | ((K.sum(1) - c).abs().amax(1) <= tol)
        if bool(done.all()):
            break
    return K


class _Coupling:
    """The two alignment MLPs (Linear-ReLU, `layers` x Linear-ReLU, Linear: the reference's
    mlp(dim, hidden, embed * |Y|, layers=3, relu)) and the Sinkhorn-projected coupling."""

    def __init__(self, d1: int, d2: int, ny: int, hidden: int, embed: int, layers: int, seed: int):
        import torch
        from torch import nn

        def mlp(d):
            seq = [nn.Linear(d, hidden), nn.ReLU()]
            for _ in range(layers):
                seq += [nn.Linear(hidden, hidden), nn.ReLU()]
            return nn.Sequential(*seq, nn.Linear(hidden, embed * ny))

        with torch.random.fork_rng(devices=[]):        # PyTorch's default init, seeded, global RNG untouched
            torch.manual_seed(seed)
            self.m1, self.m2 = mlp(d1), mlp(d2)
        self.ny, self.embed = ny, embed

    def parameters(self):
        return [*self.m1.parameters(), *self.m2.parameters()]

    def __call__(self, f1, f2, p1, p2, iters: int, tol: float):
        """q[y, a, b] of one batch (rows p(y|x1_a), columns p(y|x2_b))."""
        import torch

        def emb(m, f):
            e = m(f).view(len(f), self.ny, self.embed)
            # standardised over the embedding dimension, per item and label (the reference)
            return (e - e.mean(2, keepdim=True)) / torch.sqrt(e.var(2, keepdim=True) + EPS)

        s = torch.einsum("ayk,byk->yab", emb(self.m1, f1), emb(self.m2, f2)) / math.sqrt(self.embed)
        return _sinkhorn(torch.exp(s), p1.T, p2.T, iters, tol)


def _terms(q, p1):
    """From q[y, a, b] and p(y|x1_a): Q(b | a, y), the log term of I_q(X2; Y | X1) and q(y | a, b)
    (the reference: q_x2_x1y, log_term)."""
    import torch

    qb = q / (q.sum(2, keepdim=True) + EPS)                            # Q(b | a, y)
    mix = torch.einsum("yab,ay->ab", qb, p1)                           # sum_y' Q(b|a,y') p(y'|a)
    log_term = torch.log(qb + EPS) - torch.log(mix + EPS)[None]
    return qb, log_term


def _cond_mi(q, p1):
    """I_q(X2; Y | X1) in nats, items uniform: mean_a sum_{b,y} p(y|a) Q(b|a,y) log_term."""
    qb, log_term = _terms(q, p1)
    return (p1.T[:, :, None] * qb * log_term).sum((0, 2)).mean()


def batch_pid(f1, f2, p1, p2, p12, *, batch_size: int, epochs: int = 10, n_batches: int | None = None,
              lr: float = 1e-3, hidden: int = 32, embed: int = 10, layers: int = 3,
              sinkhorn_iters: int = 500, sinkhorn_tol: float = 0.01, seed: int = 0) -> dict:
    """BATCH PID (bits) of items with source features f1 [N, d1], f2 [N, d2] and conditionals p1,
    p2, p12 [N, Y] = p(y|x1), p(y|x2), p(y|x1, x2) (each row a distribution).

    With `n_batches`, the estimate uses `n_batches * batch_size` items drawn without replacement
    (all items when there are fewer). One coupling network is trained for `epochs` epochs, each a
    pass over a fresh shuffle of the items in batches of `batch_size` (the last partial batch
    dropped, as the reference's DataLoader(drop_last=True); one batch of all items when there are
    fewer than `batch_size`), one Adam step per batch. The atoms are then evaluated on a partition
    of the items into batches of about `batch_size` and averaged weighted by batch size. Per batch,
    I_q* is clipped into [max(I1, I2), .): a coupling in Delta_p cannot carry less information
    about Y than either of its fixed marginals (it only binds through Sinkhorn's tolerance).

    Returns the atoms R, U1, U2, S and I1, I2, I (bits), `local` per-item atoms (bits; R, U1, U2,
    S, I from the pointwise KLs to p(y) and q(y | x1_a, x2_a), in the order of `index`) and
    `index`, the items used."""
    import torch

    f1, f2, p1, p2, p12 = (np.asarray(t, dtype=np.float32) for t in (f1, f2, p1, p2, p12))
    n, ny = p12.shape
    if n == 0:
        raise ValueError("batch_pid: no items")
    rng = np.random.default_rng(seed)
    index = np.arange(n)
    if n_batches is not None and n > n_batches * batch_size:
        index = np.sort(rng.choice(n, size=n_batches * batch_size, replace=False))
    m = len(index)
    T = {k: torch.from_numpy(v[index]) for k, v in (("f1", f1), ("f2", f2), ("p1", p1), ("p2", p2), ("p12", p12))}
    py = T["p12"].mean(0)                                              # p(y) of the items
    net = _Coupling(f1.shape[1], f2.shape[1], ny, hidden, embed, layers, seed)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    b = min(batch_size, m)

    def q_of(i):
        return net(T["f1"][i], T["f2"][i], T["p1"][i], T["p2"][i], sinkhorn_iters, sinkhorn_tol)

    for _ in range(epochs):
        perm = torch.from_numpy(rng.permutation(m))
        for s in range(0, m - b + 1, b):
            i = perm[s:s + b]
            opt.zero_grad()
            _cond_mi(q_of(i), T["p1"][i]).backward()
            opt.step()

    def kl_rows(pc):      # per-item KL(p(y|.) || p(y)) in nats
        return (pc * (torch.log(pc + EPS) - torch.log(py + EPS))).sum(1)

    acc = {k: 0.0 for k in ("R", "U1", "U2", "S", "I1", "I2", "I")}
    loc = {k: np.zeros(m) for k in ("R", "U1", "U2", "S", "I")}
    with torch.no_grad():
        for i in np.array_split(rng.permutation(m), max(1, m // b)):
            it = torch.from_numpy(i)
            p1b = T["p1"][it]
            q = q_of(it)
            l1, l2, l12 = kl_rows(p1b), kl_rows(T["p2"][it]), kl_rows(T["p12"][it])
            i1, i2, i12 = float(l1.mean()), float(l2.mean()), float(l12.mean())
            iq = i1 + float(_cond_mi(q, p1b))
            iq = max(iq, i1, i2)
            for k, v in atoms_from(i1, i2, i12, iq).items():
                acc[k] += v / LN2 * len(i) / m
            qb, _ = _terms(q, p1b)
            d = torch.arange(len(i))
            joint = p1b.T * qb[:, d, d]                                # ∝ q(y | a, b = a)
            diag = (joint / (joint.sum(0, keepdim=True) + EPS)).T
            lq = kl_rows(diag)
            for k, v in (("R", l1 + l2 - lq), ("U1", lq - l2), ("U2", lq - l1), ("S", l12 - lq), ("I", l12)):
                loc[k][i] = (v / LN2).numpy()
    return {**acc, "local": loc, "index": index}


def batch_pid_avg(f1, f2, p1, p2, p12, *, batch_size: int, n_batches: int, seed: int = 0, **kw) -> dict:
    """The BATCH atoms (bits) of `n_batches` batches of `batch_size` items (batch_pid), no local atoms."""
    r = batch_pid(f1, f2, p1, p2, p12, batch_size=batch_size, n_batches=n_batches, seed=seed, **kw)
    return {k: r[k] for k in ("R", "U1", "U2", "S", "I1", "I2", "I")}


def conditional_pid(t, f1, f2, p1, p2, p12, **kw) -> dict:
    """Sensory PID given a control variable T (the text): sum_t p(t) * BATCH PID of the items with
    T = t, i.e. the decomposition of I(Y; X1, X2 | T)."""
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
