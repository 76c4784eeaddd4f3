"""ReMoE loss terms against hand computations (the KL direction written out and checked)."""
import math

import pytest
import torch
import torch.nn.functional as F

from methods.remoe import losses as Lo


def test_kl_direction_against_hand_computation():
    P = torch.tensor([0.5, 0.5], dtype=torch.float64)
    Q = torch.tensor([0.9, 0.1], dtype=torch.float64)
    kl_pq = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)   # 0.5108256...
    kl_qp = 0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5)   # 0.3680642...
    assert float(Lo.kl(P.log(), Q.log())) == pytest.approx(kl_pq, abs=1e-14)
    assert float(Lo.kl(Q.log(), P.log())) == pytest.approx(kl_qp, abs=1e-14)
    # torch's kl_div(input=log Q, target=P) is KL(P‖Q): its argument order is the reverse
    assert float(F.kl_div(Q.log(), P, reduction="sum")) == pytest.approx(kl_pq, abs=1e-14)
    # the trust term is KL(P_t ‖ P_ref): current router first, reference second
    assert float(Lo.trust(P.log()[None], Q.log()[None])) == pytest.approx(kl_pq, abs=1e-14)
    assert float(Lo.symkl(P.log(), Q.log())) == pytest.approx(kl_pq + kl_qp, abs=1e-14)
    assert float(Lo.symkl(P.log(), Q.log(), half=True)) == pytest.approx((kl_pq + kl_qp) / 2, abs=1e-14)


def test_trust_gradient_does_not_reach_the_reference():
    logits = torch.randn(1, 5, 4, dtype=torch.float64, requires_grad=True)
    ref = torch.randn(1, 5, 4, dtype=torch.float64, requires_grad=True)
    Lo.trust(F.log_softmax(logits, -1), F.log_softmax(ref, -1)).backward()
    assert ref.grad is None and logits.grad.abs().sum() > 0


def test_reuse_mass_hand_computation():
    # S = 3, E = 3, K = 2. E_1 = {0, 1}, E_2 = {1, 2}.
    P = torch.tensor([[[0.5, 0.3, 0.2], [0.1, 0.6, 0.3], [0.7, 0.2, 0.1]]], dtype=torch.float64)
    idx = torch.tensor([[[0, 1], [1, 2], [0, 1]]])
    m2 = (0.1 + 0.6) / 2        # P_2 on E_1
    m3 = (0.2 + 0.1) / 2        # P_3 on E_2
    rho = (m2 + m3) / 2
    assert float(Lo.reuse_mass(P.log(), idx)[0]) == pytest.approx(rho, abs=1e-14)
    assert float(Lo.reuse(P.log(), idx)) == pytest.approx(-math.log(rho + 1e-8), abs=1e-12)


def test_smooth_lag_working_set_closed_forms():
    E = 8
    const = torch.log_softmax(torch.randn(1, 1, E, dtype=torch.float64), -1).expand(2, 32, E)
    assert float(Lo.smooth(const)) == pytest.approx(0.0, abs=1e-14)
    assert float(Lo.lag(const, [1, 2, 4, 8, 16])) == pytest.approx(0.0, abs=1e-14)
    uniform = torch.full((2, 32, E), -math.log(E), dtype=torch.float64)
    assert float(Lo.working_set(uniform, 16)) == pytest.approx(math.log(E), abs=1e-12)
    # one-hot-ish distributions alternating between two experts inside a window: P̄ = (½, ½)
    a = torch.full((E,), 1e-30, dtype=torch.float64)
    a[0] = 1.0
    b = a.roll(1)
    seq = torch.stack([a, b] * 8)[None].log()
    assert float(Lo.working_set(seq, 16)) == pytest.approx(math.log(2), abs=1e-9)
    # smooth between the two = SymKL of near-one-hots: large and equal both ways
    assert float(Lo.smooth(seq)) > 10
