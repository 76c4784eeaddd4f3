"""The RaBitQ estimator (methods/rabitqcache/rabitq.py) against a third-party implementation
(faiss.IndexRaBitQ, MIT) and against closed-form statistics over Haar-random rotations:
unbiasedness, the error variance, the bound's coverage at ε0 = 1.9 (a Beta CDF), E⟨ō,o⟩, and
unbiasedness of the INT4 query under randomized rounding."""
import math

import numpy as np
import pytest
import torch

from methods.rabitqcache import rabitq as R
from methods.rabitqcache.stats import coverage_closed_form, mean_ip_ob_uniform

faiss = pytest.importorskip("faiss")


def _faiss_estimates(x, q, qb):
    """faiss's 1-bit RaBitQ inner-product estimates [Q, N] (centroid = mean of x, fitted by train)."""
    idx = faiss.IndexRaBitQ(x.shape[1], faiss.METRIC_INNER_PRODUCT)
    idx.train(x.numpy())
    idx.add(x.numpy())
    idx.qb = qb
    dist, ids = idx.search(q.numpy(), x.shape[0])
    out = np.empty_like(dist)
    np.put_along_axis(out, ids, dist, axis=1)
    return torch.from_numpy(out), torch.from_numpy(faiss.vector_to_array(idx.center)).float()


@pytest.mark.parametrize("qb", [0, 4])
@pytest.mark.parametrize("rotate", [False, True])
def test_matches_faiss_index_rabitq(qb, rotate):
    """faiss rotates outside the quantizer and uses one centroid for data and queries: with
    c_q = c_k = c and x' = x @ P fed to faiss, ours (rotation inside) must agree. qb = 0 is the
    float query, qb = 4 faiss's 4-bit query (min/max range, deterministic rounding)."""
    torch.manual_seed(qb + 10 * rotate)
    d, n = 64, 300
    x = torch.randn(n, d) * 0.7 + torch.linspace(-1, 1, d)     # an offset, as real keys have
    q = torch.randn(4, d) + 0.2
    rot = R.random_rotation(d, torch.Generator().manual_seed(1)) if rotate else torch.eye(d)
    ref, c_rot = _faiss_estimates(x @ rot, q @ rot, qb)
    c = c_rot @ rot.T                                           # back to the unrotated frame
    kc = R.encode_keys(x, rot, c, c)
    qs = R.prepare_query(q, rot, c, c)
    ours = R.estimate_fp(qs, kc) if qb == 0 else R.estimate_int4(qs, kc)
    # fp32 on ~|q·x| ≤ 60: agreement to a few 1e-5 absolute, far below the estimate's own error
    torch.testing.assert_close(ours, ref, rtol=0, atol=2e-4)
    assert (ours - q @ x.T).abs().mean() > 0.1                  # and it is an estimate, not exact


def _unit_pair(d, rho, seed):
    g = torch.Generator().manual_seed(seed)
    o = torch.randn(d, generator=g, dtype=torch.float64)
    o /= o.norm()
    e = torch.randn(d, generator=g, dtype=torch.float64)
    e -= (e @ o) * o
    e /= e.norm()
    return o.float(), (rho * o + math.sqrt(1 - rho ** 2) * e).float()


@pytest.fixture(scope="module")
def rotated_errors():
    """Errors of the float-query estimate of ⟨o, q⟩ for one fixed unit pair over 4000 Haar
    rotations (no centring: c = 0), with ⟨ō,o⟩ and the bound per rotation."""
    d, rho, n_rot = 64, 0.3, 4000
    o, q = _unit_pair(d, rho, 0)
    rots = R.random_rotation(d, torch.Generator().manual_seed(2), n_rot)
    zero = torch.zeros(d)
    # one single-key cache per rotation: keys [R, 1, D] with rotations [R, D, D]
    kc = R.encode_keys(o.expand(n_rot, 1, d), rots, zero, zero)
    qs = R.prepare_query(q.expand(n_rot, d), rots, zero, zero)
    errs = (R.estimate_fp(qs, kc)[:, 0] - o @ q).double().numpy()
    ipob = kc.ip_ob[:, 0].double().numpy()
    bound = R.error_bound(qs, kc, 1.9)[:, 0].double().numpy()
    return d, rho, errs, ipob, bound


def test_unbiased_over_rotations(rotated_errors):
    _, _, err, _, _ = rotated_errors
    sem = err.std() / math.sqrt(len(err))
    assert abs(err.mean()) < 4 * sem, (err.mean(), sem)


def test_error_variance_closed_form(rotated_errors):
    """Var(err | ⟨ō,o⟩) = (1−ρ²)(1−⟨ō,o⟩²)/⟨ō,o⟩² · E[w²], E[w²] = 1/(D−1)."""
    d, rho, err, ipob, _ = rotated_errors
    want = (1 - rho ** 2) / (d - 1) * np.mean((1 - ipob ** 2) / ipob ** 2)
    assert abs(err.var() / want - 1) < 0.08, (err.var(), want)   # SE of a variance at n=4000 ≈ 2.5 %


def test_bound_coverage_closed_form(rotated_errors):
    d, rho, err, _, bound = rotated_errors
    cov = np.mean(np.abs(err) <= bound * (1 + 1e-6))
    want = float(coverage_closed_form(np.array([rho]), d, 1.9)[0])
    se = math.sqrt(want * (1 - want) / len(err))
    assert abs(cov - want) < 4 * se, (cov, want, se)
    assert 0.93 < want < 0.97       # ε0 = 1.9 at D = 64 is a ~95 % band, not a 99 % one


def test_ip_ob_mean_closed_form(rotated_errors):
    d, _, _, ipob, _ = rotated_errors
    want = mean_ip_ob_uniform(d)
    assert abs(ipob.mean() - want) < 4 * ipob.std() / math.sqrt(len(ipob)), (ipob.mean(), want)
    assert 0.79 < want < 0.81


def test_randomized_int4_query_is_unbiased_for_a_fixed_rotation():
    """E over the rounding of ⟨x̄, q̄⟩ equals ⟨x̄, q'⟩, so the INT4 estimate averages to the
    float-query estimate; deterministic rounding is off by a fixed amount."""
    torch.manual_seed(3)
    d, n, draws = 64, 8, 4000
    k, q = torch.randn(n, d), torch.randn(d)
    rot = R.random_rotation(d, torch.Generator().manual_seed(4))
    c_k, c_q = k.mean(0), torch.zeros(d)
    kc = R.encode_keys(k, rot, c_k, c_q)
    fp = R.estimate_fp(R.prepare_query(q, rot, c_q, c_k), kc).double()
    g = torch.Generator().manual_seed(5)
    qs = R.prepare_query(q.expand(draws, d), rot, c_q, c_k, randomized=True, generator=g)
    kcs = R.KeyCodes(kc.codes.expand(draws, -1, -1), kc.kfac.expand(draws, -1, -1), kc.ip_ob, kc.norm)
    est = R.estimate_int4(qs, kcs).double()                       # [draws, n]
    sem = est.std(0) / math.sqrt(draws)
    assert ((est.mean(0) - fp).abs() < 4 * sem + 1e-6).all(), (est.mean(0) - fp, sem)


def test_centring_reduces_error_on_offset_keys():
    """Keys sharing a large offset (as post-RoPE keys do): centring removes it from the part
    that is estimated, so the error shrinks (the official code's `rabitq_no_center` ablation)."""
    torch.manual_seed(6)
    d = 64
    k = torch.randn(400, d) + 3 * torch.randn(d)
    q = torch.randn(20, d) + torch.randn(d)
    rot = R.random_rotation(d, torch.Generator().manual_seed(7))
    true = q @ k.T
    zero = torch.zeros(d)
    c_err = R.estimate_fp(R.prepare_query(q, rot, q.mean(0), k.mean(0)), R.encode_keys(k, rot, k.mean(0), q.mean(0))) - true
    u_err = R.estimate_fp(R.prepare_query(q, rot, zero, zero), R.encode_keys(k, rot, zero, zero)) - true
    assert c_err.pow(2).mean().sqrt() < 0.5 * u_err.pow(2).mean().sqrt()


def test_rotation_is_orthogonal_and_haar_signs():
    rots = R.random_rotation(16, torch.Generator().manual_seed(8), 2000)
    eye = torch.eye(16).expand(2000, 16, 16)
    torch.testing.assert_close(rots @ rots.transpose(1, 2), eye, atol=1e-5, rtol=0)
    # Haar: every entry has mean 0 and variance 1/D (an un-fixed QR biases the diagonal's sign)
    diag = torch.diagonal(rots, dim1=1, dim2=2)
    assert diag.mean().abs() < 4 * math.sqrt(1 / 16 / diag.numel())
    assert abs(float(rots.pow(2).mean()) - 1 / 16) < 1e-6
