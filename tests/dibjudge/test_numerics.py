"""Independent numerics of DIBJudge's pieces: VIB KL vs torch.distributions, VQ straight-through
and commitment vs hand computation, the dependence penalty's C vs numpy's Pearson matrix, dCor vs
its closed form for a bivariate normal, 1-D Wasserstein vs scipy, bias metrics on a hand table."""
import math

import numpy as np
import pytest
import torch
from scipy.stats import wasserstein_distance

from methods.dibjudge.analysis import claim_metrics
from methods.dibjudge.config import ReportConfig
from methods.dibjudge.model import (
    EMAVectorQuantizer,
    cross_correlation,
    dis_loss,
    distance_correlation,
    gaussian_kl,
    wasserstein_1d,
)
from methods.dibjudge.synth_lang import BigramLM, quantile_edges, to_bin, ttr


def test_vib_kl_matches_torch_distributions():
    g = torch.Generator().manual_seed(0)
    mu, logvar = torch.randn(7, 5, generator=g), torch.randn(7, 5, generator=g).clamp(-5, 5)
    q = torch.distributions.Normal(mu, (0.5 * logvar).exp())
    p = torch.distributions.Normal(torch.zeros_like(mu), torch.ones_like(mu))
    ref = torch.distributions.kl_divergence(q, p).sum(-1)
    assert torch.allclose(gaussian_kl(mu, logvar), ref, atol=1e-5, rtol=1e-5)


def test_vq_straight_through_and_commitment():
    vq = EMAVectorQuantizer(2, 2, beta=0.25)
    vq.codebook.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    vq.initialised.fill_(True)
    vq.eval()
    h = torch.tensor([[3.0, 4.0], [1.0, -1.0]], requires_grad=True)  # normalised: (.6,.8), (.707,-.707)
    zq, commit = vq(h)
    z = torch.tensor([[0.6, 0.8], [1 / math.sqrt(2), -1 / math.sqrt(2)]])
    q = torch.tensor([[0.0, 1.0], [1.0, 0.0]])  # nearest codes by hand
    assert torch.allclose(zq, q, atol=1e-6)
    assert torch.allclose(commit, 0.25 * ((z - q) ** 2).sum(-1), atol=1e-6)
    # straight-through: d(w·z_q)/dz = w, so the gradient on h is w pushed through the L2 normalisation
    w = torch.tensor([[1.0, 2.0], [-1.0, 0.5]])
    (zq * w).sum().backward()
    h2 = h.detach().clone().requires_grad_(True)
    (torch.nn.functional.normalize(h2, dim=-1) * w).sum().backward()
    assert torch.allclose(h.grad, h2.grad, atol=1e-6)
    # commitment gradient w.r.t. the normalised input: 2β(z − q)
    zz = z.clone().requires_grad_(True)
    (0.25 * ((zz - q) ** 2).sum()).backward()
    assert torch.allclose(zz.grad, 0.5 * (z - q), atol=1e-6)


def test_cross_correlation_matches_numpy_and_dis_loss():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(200, 3)); b = np.c_[a[:, 0] * 2 + rng.normal(size=200), rng.normal(size=(200, 2))]
    C = cross_correlation(torch.tensor(a), torch.tensor(b)).numpy()
    ref = np.corrcoef(a.T, b.T)[:3, 3:]
    assert np.allclose(C, ref, atol=1e-6, rtol=0)
    ta, tb = torch.tensor(a), torch.tensor(b)
    cos = np.mean(np.abs((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)))
    assert float(dis_loss(ta, tb, 0.5)) == pytest.approx(cos + 0.5 * np.mean(ref ** 2), abs=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cross_correlation_is_pearson_for_small_variance_columns(seed):
    """C equals numpy.corrcoef to 1e-6 on random data whose columns have standard deviations from
    1 down to 1e-9 around large offsets (an additive epsilon on the std, as before, would shrink
    the small-variance columns' correlations toward 0), and |C| <= 1."""
    rng = np.random.default_rng(seed)
    n = 64
    base = rng.normal(size=(n, 4))
    scales = np.array([1.0, 1e-3, 1e-6, 1e-9])
    a = 5.0 + base * scales
    b = np.c_[0.7 * base[:, 1] + 0.3 * rng.normal(size=n), rng.normal(size=(n, 2))] * np.array([1e-4, 1.0, 1e-7]) - 3.0
    C = cross_correlation(torch.tensor(a), torch.tensor(b)).numpy()
    ref = np.corrcoef(a.T, b.T)[:4, 4:]
    np.testing.assert_allclose(C, ref, atol=1e-6, rtol=0)
    assert np.abs(C).max() <= 1 + 1e-12
    assert abs(C[1, 0]) > 0.5                      # the built-in dependence survives the 1e-3 / 1e-4 scales


def test_cross_correlation_constant_column_is_zero_with_finite_gradient():
    """Pearson's r is undefined for a constant column (numpy gives nan): ours defines it as 0, the
    other entries are unchanged, and the penalty's gradient stays finite."""
    rng = np.random.default_rng(3)
    a = np.c_[rng.normal(size=(50, 2)), np.full(50, 0.1)]
    b = rng.normal(size=(50, 2))
    ta = torch.tensor(a, requires_grad=True)
    C = cross_correlation(ta, torch.tensor(b))
    np.testing.assert_allclose(C[:2].detach().numpy(), np.corrcoef(a[:, :2].T, b.T)[:2, 2:], atol=1e-6, rtol=0)
    assert np.abs(C[2].detach().numpy()).max() < 1e-6
    C.pow(2).mean().backward()
    assert torch.isfinite(ta.grad).all()


def test_dcor_closed_form_bivariate_normal():
    """Székely, Rizzo & Bakirov (2007): for a bivariate normal with correlation ρ,
    dCor² = (ρ asin ρ + √(1−ρ²) − ρ asin(ρ/2) − √(4−ρ²) + 1) / (1 + π/3 − √3)."""
    rho = 0.6
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3000, 1, generator=g, dtype=torch.float64)
    y = rho * x + math.sqrt(1 - rho ** 2) * torch.randn(3000, 1, generator=g, dtype=torch.float64)
    num = rho * math.asin(rho) + math.sqrt(1 - rho ** 2) - rho * math.asin(rho / 2) - math.sqrt(4 - rho ** 2) + 1
    ref = math.sqrt(num / (1 + math.pi / 3 - math.sqrt(3)))
    assert distance_correlation(x, y) == pytest.approx(ref, abs=0.03)
    assert distance_correlation(x, 2 * x + 1) == pytest.approx(1.0, abs=1e-9)


def test_wasserstein_1d_matches_scipy():
    logits = torch.tensor([[0.3, -1.0, 2.0, 0.1]])
    t = torch.tensor([[0.0, 0.1, 0.8, 0.1]])
    p = logits.softmax(-1)[0].numpy()
    ref = wasserstein_distance(np.arange(4), np.arange(4), p, t[0].numpy())
    assert float(wasserstein_1d(logits, t)) == pytest.approx(ref, abs=1e-6)


def test_proxy_pieces_by_hand():
    assert ttr("a b a c".split()) == 0.75
    assert quantile_edges([1, 2, 3, 4, 5, 6, 7, 8], 4) == [3, 5, 7]
    assert [to_bin(x, [3, 5, 7]) for x in (1, 3, 6, 9)] == [0, 1, 2, 3]
    lm = BigramLM([["x", "y"]])  # V = 4; every bigram seen once: p = (1+1)/(1+4)
    assert lm.nll(["x", "y"]) == pytest.approx(-math.log(2 / 5), abs=1e-12)


def test_bias_metrics_on_a_hand_table():
    base = {"id_acc_EN": 0.9, "id_acc_L1": 0.8, "id_acc_L2": 0.8, "adv_acc_L2": 0.5, "p_mt_L2": 0.9,
            "probe_acc": 0.9, "dcor": 0.5}
    res = {"sft": base,
           "dib_vib": {**base, "p_mt_L2": 0.7, "adv_acc_L2": 0.6, "id_acc_L1": 0.79, "probe_acc": 0.7, "dcor": 0.2},
           "no_dis": {**base, "p_mt_L2": 0.8},
           "no_bottleneck": {**base, "p_mt_L2": 0.85}, "no_proxy": {**base, "p_mt_L2": 0.4}}
    m = claim_metrics(res, ReportConfig(lang="L2", full="dib_vib"))
    assert m["c1_bias_gap_ratio"] == pytest.approx(0.2 / 0.4)
    assert m["c1_sft_p_mt"] == pytest.approx(0.9)
    assert m["c2_adv_gain"] == pytest.approx(0.1)
    assert m["c2_sft_adv_acc"] == pytest.approx(0.5) and m["c2_sft_min_id_acc"] == pytest.approx(0.8)
    assert m["c2_id_drop"] == pytest.approx(0.01)
    assert m["c2_en_drop"] == pytest.approx(0.0)
    assert m["c3_both_lower"] is True and m["c3_nodis_probe_acc"] == pytest.approx(0.9)
    assert m["c4_ablations_reduce_less"] is False  # no_proxy: |0.4−0.5| = 0.1 reduces more (0.3 > 0.2)
    assert m["c4_full_reduction"] == pytest.approx(0.2)
    # C3/C4 as margins (> 0 iff the boolean holds): min(0.5−0.2, 0.9−0.7); min(0.2−0.05, 0.2−0.3)
    assert m["c3_min_gap"] == pytest.approx(0.2) and m["c4_min_margin"] == pytest.approx(-0.1)
    assert m["replicates"] == {}   # no per-seed results: no replicates
    # missing variants: every claim and guard metric still a key (None: not measured)
    m1 = claim_metrics({"sft": base}, ReportConfig(lang="L2", full="dib_vib"))
    assert m1["c3_min_gap"] is None and m1["c4_min_margin"] is None and m1["c2_adv_gain"] is None


def test_seed_replicates_are_the_paired_per_seed_values():
    """With per-seed results, each headline metric is the mean of its per-seed (paired) value and
    the summary carries those values as a seed replicates record (claims computes the interval;
    checked here against the 95% Student-t interval by hand, scipy.stats.t)."""
    from scipy.stats import t

    from methods.core.stats import interval_from_replicates

    base = {"id_acc_EN": 0.9, "id_acc_L1": 0.8, "id_acc_L2": 0.8, "adv_acc_L2": 0.6, "p_mt_L2": 0.9,
            "probe_acc": 0.9, "dcor": 0.5}
    sft = {"0": base, "1": {**base, "adv_acc_L2": 0.62}, "2": {**base, "adv_acc_L2": 0.58, "id_acc_EN": 0.92}}
    dib = {"0": {**base, "adv_acc_L2": 0.70}, "1": {**base, "adv_acc_L2": 0.66},
           "2": {**base, "adv_acc_L2": 0.67, "id_acc_EN": 0.90, "p_mt_L2": 0.7}}
    mean = lambda runs: {k: float(np.mean([r[k] for r in runs.values()])) for k in base}  # noqa: E731
    m = claim_metrics({"sft": mean(sft), "dib_vib": mean(dib)}, ReportConfig(lang="L2", full="dib_vib"),
                      {"sft": sft, "dib_vib": dib})
    gains = np.array([0.10, 0.04, 0.09])
    assert m["c2_adv_gain"] == pytest.approx(gains.mean())
    half = t.ppf(0.975, 2) * gains.std(ddof=1) / np.sqrt(3)
    rep = m["replicates"]["c2_adv_gain"]
    assert rep["unit"] == "seed" and rep["ids"] == ["0", "1", "2"] and rep["values"] == pytest.approx(gains.tolist())
    iv = interval_from_replicates(rep)
    assert (iv["lo"], iv["hi"], iv["n"]) == (pytest.approx(gains.mean() - half), pytest.approx(gains.mean() + half), 3)
    assert "intervals" not in m
    ratios = np.array([1.0, 1.0, 0.2 / 0.4])
    assert m["c1_bias_gap_ratio"] == pytest.approx(ratios.mean())
    assert m["replicates"]["c1_bias_gap_ratio"]["values"] == pytest.approx(ratios.tolist())
    assert m["c2_en_drop"] == pytest.approx(np.mean([0.0, 0.0, 0.02]))
    assert m["n_seeds"] == 3


def test_c3_c4_margins_per_seed():
    """C3 and C4 are per-seed paired margins (min over the two comparisons), the point value their
    mean, the replicates record the per-seed values; the claims engine decides them by the interval."""
    from pathlib import Path

    from methods.core.claims import evaluate_claims, load_claims

    base = {"id_acc_EN": 0.9, "id_acc_L1": 0.8, "id_acc_L2": 0.8, "adv_acc_L2": 0.6, "p_mt_L2": 0.9,
            "probe_acc": 0.9, "dcor": 0.5}
    seeds = ["0", "1", "2"]
    dd, dp = [0.20, 0.25, 0.30], [0.10, 0.12, 0.08]          # no_dis − DIBJudge in dCor, in probe accuracy
    runs = {"sft": {k: base for k in seeds},
            "dib_vib": {k: {**base, "p_mt_L2": 0.7 + 0.01 * i, "dcor": 0.5 - dd[i], "probe_acc": 0.9 - dp[i]}
                        for i, k in enumerate(seeds)},
            "no_dis": {k: base for k in seeds},
            "no_bottleneck": {k: {**base, "p_mt_L2": 0.85} for k in seeds},
            "no_proxy": {k: {**base, "p_mt_L2": 0.8 - 0.02 * i} for i, k in enumerate(seeds)}}
    mean = lambda r: {k: float(np.mean([x[k] for x in r.values()])) for k in base}  # noqa: E731
    m = claim_metrics({v: mean(r) for v, r in runs.items()}, ReportConfig(lang="L2", full="dib_vib"), runs)
    c3 = [min(a, b) for a, b in zip(dd, dp)]
    # reduction: full 0.4 − (0.2 + 0.01 i); no_bottleneck 0.05; no_proxy 0.1 + 0.02 i
    c4 = [min((0.2 - 0.01 * i) - 0.05, (0.2 - 0.01 * i) - (0.1 + 0.02 * i)) for i in range(3)]
    assert m["replicates"]["c3_min_gap"]["values"] == pytest.approx(c3)
    assert m["replicates"]["c4_min_margin"]["values"] == pytest.approx(c4)
    assert m["c3_min_gap"] == pytest.approx(np.mean(c3)) and m["c4_min_margin"] == pytest.approx(np.mean(c4))
    spec = load_claims(Path(__file__).resolve().parents[2] / "methods/dibjudge/claims.yaml")
    rows = {r["id"]: r for r in evaluate_claims(spec, m, "tiny")["claims"]}
    assert rows["C3"]["n"] == 3 and rows["C3"]["replicates"] == "seed"
    assert rows["C4"]["n"] == 3 and rows["C4"]["verdict"] in ("reproduced", "inconclusive")


def test_vq_kmeanspp_init_and_centring_avoid_collapse():
    """Tokens that share one large common direction (an untrained branch): without centring every
    token would take the same code; with the EMA centre and k-means++ seeding, 4 well-separated
    clusters around the common offset get 4 distinct codes (k-means++ picks one point per
    cluster with probability ≈ 1 when clusters are 100× further apart than their spread)."""
    g = torch.Generator().manual_seed(0)
    offs = torch.full((8,), 10.0)
    centres = torch.eye(8)[:4] * 1.0
    x = (offs + centres.repeat_interleave(25, 0) + 0.01 * torch.randn(100, 8, generator=g))[None]
    assert torch.nn.functional.normalize(x[0], dim=-1).std(0).max() < 0.05  # nearly one direction
    torch.manual_seed(0)
    vq = EMAVectorQuantizer(8, 4, decay=0.99)
    vq.train()
    vq(x)
    assert torch.allclose(vq.centre, x[0].mean(0), atol=1e-5)
    vq.eval()
    codes = vq.nearest(torch.nn.functional.normalize(x[0] - vq.centre, dim=-1), vq.codebook)
    assert len(set(codes.tolist())) == 4
    assert all(len(set(codes[i * 25:(i + 1) * 25].tolist())) == 1 for i in range(4))
