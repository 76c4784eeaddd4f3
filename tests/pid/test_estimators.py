"""The exact BROJA solver against dit 2.3 (a third-party implementation of the same definition) and
the textbook values, the BATCH estimator (at the tiny scale's settings) against the exact one, its
Sinkhorn projection against numpy iterative proportional fitting, and the PID identities."""
from pathlib import Path

import numpy as np
import pytest
import yaml

from methods.core.config import from_dict
from methods.pid.config import Config
from methods.pid.estimators import (
    _sinkhorn,
    batch_pid,
    batch_pid_avg,
    broja_exact,
    conditional_pid,
    discrete_batch_inputs,
)

ROOT = Path(__file__).resolve().parents[2]

dit = pytest.importorskip("dit")
from dit.pid import PID_BROJA  # noqa: E402


def gate(fn, n=2):
    p = np.zeros((n, n, 4))
    for a in range(n):
        for b in range(n):
            p[a, b, fn(a, b)] += 1.0
    return p / p.sum()


def rdn():
    p = np.zeros((2, 2, 4))
    p[0, 0, 0] = p[1, 1, 1] = 0.5
    return p


GATES = {"xor": gate(lambda a, b: a ^ b), "and": gate(lambda a, b: a & b), "rdn": rdn(),
         "copy": gate(lambda a, b: 2 * a + b)}
# textbook BROJA values (bits): Bertschinger et al. 2014; Griffith & Koch 2014
TEXTBOOK = {"xor": (0, 0, 0, 1), "and": (0.311278, 0, 0, 0.5), "rdn": (1, 0, 0, 0), "copy": (0, 1, 1, 0)}


def dit_broja(p):
    outs, probs = [], []
    for (a, b, y), v in np.ndenumerate(p):
        if v > 0:
            outs.append(f"{a}{b}{y}")
            probs.append(v)
    # dit's optimiser starts from a random point and can stop short (a few 1e-3 bits): best of 3 seeded runs
    best = None
    for s in range(3):
        np.random.seed(s)
        dit.math.prng.seed(s)
        r = PID_BROJA(dit.Distribution(outs, probs), [[0], [1]], [2])
        r = {"R": float(r[((0,), (1,))]), "U1": float(r[((0,),)]), "U2": float(r[((1,),)]), "S": float(r[((0, 1),)])}
        if best is None or r["R"] > best["R"]:      # larger R = lower I_q*, the better optimum
            best = r
    return best


@pytest.mark.parametrize("name", sorted(GATES))
def test_exact_matches_dit_and_textbook_on_gates(name):
    ours, ref = broja_exact(GATES[name]), dit_broja(GATES[name])
    for k, tb in zip(("R", "U1", "U2", "S"), TEXTBOOK[name]):
        assert ours[k] == pytest.approx(tb, abs=1e-5), (k, ours)
        assert ours[k] == pytest.approx(float(ref[k]), abs=1e-3), (k, ref)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_matches_dit_on_random_tables(seed):
    """Dense random p[x1, x2, y] (3×3×2): both numerical optimisers agree to a
    few-1e-3-bit solver tolerance, ours reaches an I_q* no worse than dit's (R = I1 + I2 - I_q*
    no smaller), and the identities hold exactly for ours."""
    p = np.random.default_rng(seed).dirichlet(np.ones(18)).reshape(3, 3, 2)
    ours, ref = broja_exact(p), dit_broja(p)
    for k in ("R", "U1", "U2", "S"):
        assert ours[k] == pytest.approx(float(ref[k]), abs=5e-3), (k, ours, ref)
    assert ours["R"] >= float(ref["R"]) - 1e-3
    assert ours["R"] + ours["U1"] == pytest.approx(ours["I1"], abs=1e-12)
    assert ours["R"] + ours["U2"] == pytest.approx(ours["I2"], abs=1e-12)
    assert ours["R"] + ours["U1"] + ours["U2"] + ours["S"] == pytest.approx(ours["I"], abs=1e-12)
    assert min(ours[k] for k in ("U1", "U2", "S")) >= -1e-9


def tiny_pid():
    """The BATCH settings of the tiny scale (config/scales/tiny.yaml, read through the pid Config)."""
    section = yaml.safe_load((ROOT / "config" / "scales" / "tiny.yaml").read_text())["pid"]
    pc = from_dict(Config, section, "pid").pid
    return dict(batch_size=pc.batch_size, n_batches=pc.n_batches, epochs=pc.epochs, lr=pc.lr,
                sinkhorn_iters=pc.sinkhorn_iters, sinkhorn_tol=pc.sinkhorn_tol)


# UNQ: Y = X1, X2 an independent bit (U1 = 1 bit); the textbook values of the others above
BATCH_GATES = {**GATES, "unq": gate(lambda a, b: a)}
BATCH_TEXTBOOK = {**TEXTBOOK, "unq": (0, 1, 0, 0)}


@pytest.mark.parametrize("name", ["and", "xor", "rdn", "unq", "copy"])
def test_batch_matches_exact_at_tiny_settings(name):
    """BATCH with the true conditionals, at the tiny scale's settings, on n_batches * batch_size
    items sampled from the gate: every atom within 0.05 bits of the exact BROJA decomposition
    (itself at the textbook values, checked first), no atom below -0.02 bits, and the atoms sum
    to BATCH's total MI."""
    kw = tiny_pid()
    p = BATCH_GATES[name]
    e = broja_exact(p)
    for k, tb in zip(("R", "U1", "U2", "S"), BATCH_TEXTBOOK[name]):
        assert e[k] == pytest.approx(tb, abs=1e-5), (k, e)
    f1, f2, p1, p2, p12 = discrete_batch_inputs(p, kw["batch_size"] * kw["n_batches"], seed=0)
    b = batch_pid_avg(f1, f2, p1, p2, p12, seed=0, **kw)
    for k in ("R", "U1", "U2", "S"):
        assert b[k] == pytest.approx(e[k], abs=0.05), (k, b, e)
        assert b[k] >= -0.02, (k, b)
    assert b["R"] + b["U1"] + b["U2"] + b["S"] == pytest.approx(b["I"], abs=1e-9)
    assert b["I"] == pytest.approx(e["I"], abs=0.02)   # plug-in MI of the true conditionals


def test_batch_training_moves_the_coupling_to_the_minimum():
    """AND is the gate whose minimiser is not the coupling the untrained networks give: without
    training (epochs = 0) BATCH is > 0.15 bits off on R; trained at the tiny settings it is within
    0.05 (the test above). So the optimisation, not only the Sinkhorn projection, is tested."""
    kw = {**tiny_pid(), "epochs": 0}
    f1, f2, p1, p2, p12 = discrete_batch_inputs(BATCH_GATES["and"], kw["batch_size"] * kw["n_batches"], seed=0)
    b = batch_pid_avg(f1, f2, p1, p2, p12, seed=0, **kw)
    assert broja_exact(BATCH_GATES["and"])["R"] - b["R"] > 0.15, b


def test_batch_steps_once_per_batch_per_epoch(monkeypatch):
    """The reference's training loop: `epochs` passes over all batches of the items, one Adam step
    per (full) batch: 3 epochs over 1000 items in batches of 256 = 3 * 3 steps; with n_batches = 2
    the estimate uses 512 items, 3 * 2 steps."""
    import torch

    steps = []
    orig = torch.optim.Adam.step

    def counting(self, *a, **k):
        steps.append(1)
        return orig(self, *a, **k)

    monkeypatch.setattr(torch.optim.Adam, "step", counting)
    f1, f2, p1, p2, p12 = discrete_batch_inputs(BATCH_GATES["and"], 1000, seed=0)
    r = batch_pid(f1, f2, p1, p2, p12, batch_size=256, epochs=3, sinkhorn_iters=5, seed=0)
    assert len(steps) == 9 and len(r["index"]) == 1000 and len(r["local"]["S"]) == 1000
    steps.clear()
    r = batch_pid(f1, f2, p1, p2, p12, batch_size=256, n_batches=2, epochs=3, sinkhorn_iters=5, seed=0)
    assert len(steps) == 6 and len(r["index"]) == 512 and len(np.unique(r["index"])) == 512


def test_sinkhorn_is_the_unique_diagonal_scaling():
    """On feasible marginals (those of a random positive coupling), the projection meets rows and
    columns to the tolerance and equals the unique D1 K D2 scaling, computed by plain iterative
    proportional fitting in numpy to 1e-13 (ours adds the reference's 1e-8 to each denominator,
    hence the 1e-6 tolerances)."""
    import torch

    rng = np.random.default_rng(0)
    true = rng.random((3, 7, 5)) + 0.1
    r, c = true.sum(2), true.sum(1)
    K = rng.random((3, 7, 5)) + 0.05
    ours = _sinkhorn(torch.tensor(K), torch.tensor(r), torch.tensor(c), 10000, 1e-7).numpy()
    ref = K.copy()
    for _ in range(100000):
        ref *= (c / ref.sum(1))[:, None, :]
        ref *= (r / ref.sum(2))[:, :, None]
        if np.abs(ref.sum(1) - c).max() < 1e-13:
            break
    assert np.abs(ours.sum(2) - r).max() <= 1e-6 and np.abs(ours.sum(1) - c).max() <= 1e-6
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-7)


def test_sensory_pid_is_the_p_t_weighted_sum():
    """Conditional PID given T: with T=0 → XOR and T=1 → RDN (p(t) = 0.75 / 0.25), the
    atoms are 0.75·XOR + 0.25·RDN = R 0.25, S 0.75 bits (tiny BATCH settings)."""
    rng = np.random.default_rng(0)
    parts, ts = [], []
    for t, (p, n) in enumerate(((GATES["xor"], 768), (GATES["rdn"], 256))):
        parts.append(discrete_batch_inputs(p, n, seed=int(rng.integers(1000))))
        ts.append(np.full(n, t))
    f1, f2, p1, p2, p12 = (np.concatenate(x) for x in zip(*parts))
    kw = {**tiny_pid(), "n_batches": 2}
    r = conditional_pid(np.concatenate(ts), f1, f2, p1, p2, p12, seed=0, **kw)
    assert r["S"] == pytest.approx(0.75, abs=0.05)
    assert r["R"] == pytest.approx(0.25, abs=0.05)
    assert abs(r["U1"]) < 0.05 and abs(r["U2"]) < 0.05


def _sinkhorn_reference_loop(K, r, c, iters, tol):
    """The reference's sinkhorn_probs loop as written there (K / colsum * c, a full `where` every
    half-step): what `_sinkhorn` computed before it was rearranged for speed."""
    import torch

    from methods.pid.estimators import EPS

    done = torch.zeros(K.shape[0], dtype=torch.bool)
    for _ in range(iters):
        K = torch.where(done[:, None, None], K, K / (K.sum(1, keepdim=True) + EPS) * c[:, None, :])
        done = done | ((K.sum(2) - r).abs().amax(1) <= tol)
        if bool(done.all()):
            break
        K = torch.where(done[:, None, None], K, K / (K.sum(2, keepdim=True) + EPS) * r[:, :, None])
        done = done | ((K.sum(1) - c).abs().amax(1) <= tol)
        if bool(done.all()):
            break
    return K


@pytest.mark.parametrize("dtype,rel", [("float64", 1e-11), ("float32", 1e-5)])
@pytest.mark.parametrize("iters,tol", [(1, 0.01), (7, 0.01), (20, 0.01), (20, 0.05), (500, 1e-4)])
def test_sinkhorn_matches_the_reference_loop_and_its_gradient(iters, tol, dtype, rel):
    """`_sinkhorn` (scale factor first, `where` only once a label has stopped) gives the reference
    loop's result and gradient up to rounding: max |ours − ref| ≤ rel · max |ref| (1e-11 in
    float64, so the two are the same algebra; 1e-5 in float32, the rounding of 500 iterations), including labels that stop at
    different iterations (tol 0.05 stops some labels early, 1e-4 runs them apart)."""
    import torch

    dt = getattr(torch, dtype)
    g = torch.Generator().manual_seed(iters)
    s = (2 * torch.randn(4, 64, 48, generator=g)).to(dt).requires_grad_(True)
    r = torch.softmax(torch.randn(64, 4, generator=g), 1).T.contiguous().to(dt)
    c = torch.softmax(torch.randn(48, 4, generator=g), 1).T.contiguous().to(dt)
    w = torch.randn(4, 64, 48, generator=g).to(dt)
    out = {}
    for name, f in (("ours", _sinkhorn), ("ref", _sinkhorn_reference_loop)):
        K = f(torch.exp(s), r, c, iters, tol)
        (grad,) = torch.autograd.grad((K * w).sum(), s)
        out[name] = (K.detach(), grad)
    for a, b in zip(out["ours"], out["ref"]):
        assert float((a - b).abs().max()) <= rel * float(b.abs().max())
