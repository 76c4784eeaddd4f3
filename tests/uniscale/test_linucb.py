"""LinUCB against the closed-form ridge solution, step by step, and the reward/cost formulas."""
import math

import numpy as np
import pytest

from methods.uniscale import cost
from methods.uniscale.bandit import LinUCB, disjoint, joint


def test_linucb_matches_closed_form_ridge_each_step():
    rng = np.random.default_rng(0)
    d, K, T, alpha, lam = 6, 4, 40, 0.7, 2.0
    bandit = LinUCB(d, alpha, lam)
    A, b = lam * np.eye(d), np.zeros(d)
    for _ in range(T):
        X = rng.normal(size=(K, d))
        Ainv = np.linalg.inv(A)
        theta = np.linalg.solve(A, b)
        ucb = X @ theta + alpha * np.sqrt(np.einsum("kd,de,ke->k", X, Ainv, X))
        np.testing.assert_allclose(bandit.ucb(X), ucb, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(bandit.theta, theta, rtol=1e-9, atol=1e-10)
        a = bandit.choose(X)
        assert a == int(np.argmax(ucb))
        r = float(rng.uniform())
        bandit.update(X[a], r)
        A += np.outer(X[a], X[a])
        b += r * X[a]
    np.testing.assert_allclose(bandit.Ainv, np.linalg.inv(A), rtol=1e-8, atol=1e-10)


def test_disjoint_linucb_is_per_arm_ridge():
    """With x = e_a ⊗ φ, θ restricted to arm a's block is that arm's own ridge estimate."""
    rng = np.random.default_rng(1)
    d, K = 3, 2
    bandit = LinUCB(K * d, 1.0, 1.0)
    per = {a: (np.eye(d), np.zeros(d)) for a in range(K)}
    for t in range(20):
        phi = rng.normal(size=d)
        a, r = t % K, float(rng.normal())
        bandit.update(disjoint(phi, K)[a], r)
        A, b = per[a]
        per[a] = (A + np.outer(phi, phi), b + r * phi)
    for a in range(K):
        np.testing.assert_allclose(bandit.theta[a * d:(a + 1) * d], np.linalg.solve(*per[a]), rtol=1e-9)


def test_joint_features_layout():
    phi, psi = np.array([1.0, 2.0]), np.array([[1.0, 0.0, 3.0], [0.0, 1.0, 0.5]])
    X = joint(phi, psi)
    np.testing.assert_array_equal(X[1], [1, 2, 0, 1, 0.5, 0, 1, 0.5, 0, 2, 1.0])


def test_reward_and_normalisation_by_hand():
    # the normalisation fitted to the official run logs: C̃ = (log10 e − 12.288)/4.772
    e = 10 ** (12.288 + 0.25 * 4.772)
    c = cost.norm_cost(e, 12.288, 12.288 + 4.772)
    assert c == pytest.approx(0.25, abs=1e-12)
    # r = 0.1·1 + 0.1·0.6 + 0.8·(1 − 0.25) = 0.76
    assert cost.reward(1, 0.6, c, (0.1, 0.1, 0.8)) == pytest.approx(0.76, abs=1e-12)
    # r = 0.4·0 + 0.4·0.5 + 0.2·0.75 = 0.35
    assert cost.reward(0, 0.5, c, (0.4, 0.4, 0.2)) == pytest.approx(0.35, abs=1e-12)
    assert cost.norm_cost(1e10, 12.288, 17.06) == 0.0 and cost.norm_cost(1e20, 12.288, 17.06) == 1.0


def test_eflops_formulas_by_hand():
    a = {"P": 1000, "L": 2, "n_q": 2, "n_kv": 1, "head_dim": 4}
    comp, mem = cost.prefill(a, 3)
    # 2·1000·3 + 4·2·2·4·(1+2+3) = 6000 + 384; 1000·2 + 2·3·2·1·4·2
    assert comp == 6384 and mem == 2000 + 96
    # one branch from context 3, 2 tokens: ctx 4 and 5
    comp, mem = cost.decode(a, [3], [2])
    assert comp == 2 * 1000 * 2 + 4 * 2 * 2 * 4 * (4 + 5)
    assert mem == 2 * 2 * 1 * 4 * 2 * (4 + 5) + 1000 * 2 * 2
    # two branches: weights read once per position (max length), not per branch
    _, m2 = cost.decode(a, [3, 3], [2, 1])
    assert m2 == 2 * 2 * 1 * 4 * 2 * (4 + 5 + 4) + 1000 * 2 * 2
    c, m = cost.verify(a, [3, 3])
    assert c == 2 * 6384 and m == 2 * 96 + 2000
    assert cost.eflops(10.0, 2.0, 156) == 10 + 312
    assert math.isclose(cost.eflops(*cost.prefill(a, 3), 156), 6384 + 156 * 2096)


def test_verifier_weighted_vote_by_hand():
    from methods.uniscale.table import vote

    # "7" has total 0.3+0.35 = 0.65 > "8" 0.6: the vote picks "7", returned sample = its best (index 2)
    # an unparsable sample (None) can still win on score: 0.9 > 0.65
    assert vote(["7", "8", "7", None], [0.3, 0.6, 0.35, 0.9]) == 3
    assert vote(["7", "8", "7"], [0.3, 0.6, 0.35]) == 2
    assert vote(["7", "8"], [0.3, 0.6]) == 1
