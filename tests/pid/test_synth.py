"""The generator builds the dependence structure each task family needs (closed-form checks)."""
import numpy as np
import pytest

from methods.pid.estimators import _mi_xy, broja_exact
from methods.pid.synth import N_QUESTIONS, DataConfig, av_items, av_question, build, vl_items


def mi(a, b):
    j = np.zeros((a.max() + 1, b.max() + 1))
    np.add.at(j, (a, b), 1)
    return _mi_xy(j / j.sum())


def test_family_rules():
    d = vl_items(20000, [1, 1, 1, 1], np.random.default_rng(0))
    img, txt, y, fam = d["img"] - 8 * np.arange(4), d["txt"], d["y"], d["fam"]
    tval = txt[:, 2] - 13
    assert np.all(img[:, 3] == fam)                       # scene marker
    assert np.all(txt[:, 0] == fam)                       # task word
    red, utx, uvi, syn = (fam == k for k in range(4))
    assert np.all(y[red] == img[red, 0] % 4) and np.all(tval[red] == img[red, 0])
    assert np.all(y[utx] == tval[utx] % 4)
    assert np.all(y[uvi] == img[uvi, 1] % 4)
    assert np.all(y[syn] == (img[syn, 2] + tval[syn]) % 4)
    # SYN: each modality's attribute alone carries (almost) no information, the pair 2 bits
    assert mi(img[syn, 2], y[syn]) < 0.01 and mi(tval[syn], y[syn]) < 0.01
    assert mi(img[syn, 2] * 8 + tval[syn], y[syn]) == pytest.approx(2.0, abs=0.01)
    # U_VIS: the text value word is independent of Y
    assert mi(tval[uvi], y[uvi]) < 0.01


def cmi(x, y, z):
    """I(X; Y | Z) in bits from samples (plug-in), Z a code."""
    return sum((z == v).mean() * mi(x[z == v], y[z == v]) for v in np.unique(z))


def test_av_vision_dominance():
    d = av_items(20000, 0.9, np.random.default_rng(1))
    v, q = d["img"][:, 0], av_question(d)
    agree = np.mean(d["y"] == (v + q) % 4)
    # Y = v + q on the 90% vision-only items, and by chance (1/4) on the fusion ones
    assert agree == pytest.approx(0.9 + 0.1 * 0.25, abs=0.01)
    t = build(DataConfig(10, 10, 10, 10, 50, 0.9, 0, {}))["av_test"]
    assert t["fusion"].all()


def test_av_question_is_the_text_that_determines_y():
    """The Sensory PID's control variable T (av_question: the text's value word) is what the paper
    conditions on, the text instruction: independent of the sensory inputs, I(T; V, A) ≈ 0, and
    with them it determines the answer: on fusion items Y = (v + a + T) mod 4 exactly, so
    I(Y; T | V, A) = H(Y | V, A) = 2 bits; the filler slot (what was conditioned on before) carries
    nothing, I(Y; filler | V, A) ≈ 0."""
    d = av_items(40000, 0.0, np.random.default_rng(2))
    v, a = d["img"][:, 0], d["aud"][:, 0]       # slot 0 of a 4-patch code holds the value itself
    q = av_question(d)
    assert set(np.unique(q)) == set(range(N_QUESTIONS))
    assert np.all(d["y"] == (v + a + q) % 4)
    va = v * 8 + a
    assert mi(q, va) < 0.01
    assert cmi(d["y"], q, va) == pytest.approx(2.0, abs=0.02)
    assert cmi(d["y"], d["txt"][:, 1], va) < 0.03


def test_pid_step_conditions_on_the_question(monkeypatch):
    """run.pid_of hands conditional_pid the question of each AV-fusion test item as T."""
    from methods.pid import run

    seen = {}

    def fake(t, *args, **kw):
        seen["t"] = np.asarray(t)
        return {k: 0.0 for k in ("R", "U1", "U2", "S", "I")}

    monkeypatch.setattr(run, "conditional_pid", fake)
    test = av_items(200, 0.5, np.random.default_rng(4))
    n = len(test["y"])
    dec = {k: np.full((n, 4), 0.25) for k in ("p_1", "p_2", "p_full")}
    pc = run.PIDConfig(batch_size=64, n_batches=4, epochs=1, lr=1e-3, sinkhorn_iters=5, sinkhorn_tol=0.01,
                       family_configs=[], seed=0)
    run.pid_of(pc, dec, test, omni=True)
    m = test["fusion"]
    v, a = test["img"][m, 0], test["aud"][m, 0]
    np.testing.assert_array_equal(seen["t"], (test["y"][m] - v - a) % 4)


def test_sensory_pid_needs_the_question():
    """Exact BROJA of the fusion items' (v mod 4, a mod 4, y) tables: given the question T, Y is an
    XOR-like (mod 4) function of V and A, so sum_t p(t) PID(. | t) is 2 bits of synergy; ignoring
    T (or conditioning on the independent filler), Y carries no information about (V, A) and every
    atom is ~0. The control variable decides what Sensory PID measures."""
    d = av_items(40000, 0.0, np.random.default_rng(3))
    v, a, y = d["img"][:, 0] % 4, d["aud"][:, 0] % 4, d["y"]

    def table(m):
        t = np.zeros((4, 4, 4))
        np.add.at(t, (v[m], a[m], y[m]), 1)
        return t / t.sum()

    def conditional(z):
        out = {k: 0.0 for k in ("R", "U1", "U2", "S")}
        for val in np.unique(z):
            m = z == val
            r = broja_exact(table(m))
            for k in out:
                out[k] += m.mean() * r[k]
        return out

    by_q = conditional(av_question(d))
    assert by_q["S"] == pytest.approx(2.0, abs=0.01) and max(abs(by_q[k]) for k in ("R", "U1", "U2")) < 0.01
    for z in (np.zeros(len(y), int), d["txt"][:, 1]):
        r = conditional(z)
        assert max(abs(r[k]) for k in ("R", "U1", "U2", "S")) < 0.05, r


def test_training_seed_sets_the_model_and_nothing_else():
    """train_mix is a function of (config, data, mix, seed): the same seed gives the same weights
    bit for bit; another seed gives another model (a replicate of C2 is a fresh training run)."""
    import torch

    from methods.pid import run, synth

    d = synth.build(synth.DataConfig(n_train=256, n_profile=32, n_test=32, n_av_train=64, n_av_test=32,
                                     vision_only_frac=0.9, seed=0, hub={}))
    cfg = run.TrainConfig(d=4, hidden=8, jitter=0.1, steps=5, batch_size=16, lr=1e-2, mask_prob=0.3,
                          checkpoints={"final": 1.0}, mixes={"balanced": [1, 1, 1, 1]}, seeds=[0, 1])
    a, b, c = (run.train_mix(cfg, d, "balanced", s)["final"] for s in (0, 0, 1))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)
