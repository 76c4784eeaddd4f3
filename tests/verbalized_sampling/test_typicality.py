"""alpha estimator and sharpening: closed forms and statistical properties."""
from __future__ import annotations

import math

import numpy as np
import pytest

from methods.verbalized_sampling.typicality import (
    closed_form_policy,
    dpo_tabular,
    fit_alpha,
    fit_logit_cluster,
    sharpening_slope,
)
from methods.verbalized_sampling.world import WorldConfig, build_world, preferences

# the tiny scale's world (config/scales/tiny.yaml; WorldConfig has no defaults)
WORLD = dict(n_topics=10, pool_size=20, zipf_s=1.1, k=5, alpha=0.6, n_pref_prompts=1500,
             responses_per_prompt=4, seed=0)


def test_logit_binary_covariate_matches_closed_form():
    # x in {0, 1}: MLE intercept = logit(p0), slope = logit(p1) - logit(p0); naive SE closed form
    rng = np.random.default_rng(0)
    x = np.r_[np.zeros(400), np.ones(600)]
    y = (rng.random(1000) < np.where(x == 1, 0.7, 0.4)).astype(float)
    p0, p1 = y[x == 0].mean(), y[x == 1].mean()
    fit = fit_logit_cluster(x, y, np.arange(1000))
    lg = lambda p: math.log(p / (1 - p))
    assert fit["coef"][0] == pytest.approx(lg(p0), abs=1e-9)
    assert fit["coef"][1] == pytest.approx(lg(p1) - lg(p0), abs=1e-9)
    se = math.sqrt(1 / (400 * p0 * (1 - p0)) + 1 / (600 * p1 * (1 - p1)))
    assert fit["se_naive"][1] == pytest.approx(se, rel=1e-9)
    # singleton clusters: sandwich = HC0 x G/(G-1); for a saturated binary model HC0 = naive
    assert fit["se"][1] == pytest.approx(se * math.sqrt(1000 / 999), rel=1e-6)


def test_cluster_se_grows_with_duplicated_clusters():
    # every row duplicated inside its cluster: the point estimate is unchanged, the clustered SE
    # is the un-duplicated SE (information is not doubled), the naive SE shrinks by sqrt(2)
    rng = np.random.default_rng(1)
    x = rng.normal(size=500)
    y = (rng.random(500) < 1 / (1 + np.exp(-0.8 * x))).astype(float)
    one = fit_logit_cluster(x, y, np.arange(500))
    two = fit_logit_cluster(np.r_[x, x], np.r_[y, y], np.r_[np.arange(500), np.arange(500)])
    assert two["coef"][1] == pytest.approx(one["coef"][1], abs=1e-9)
    assert two["se"][1] == pytest.approx(one["se"][1], rel=1e-6)
    assert two["se_naive"][1] == pytest.approx(one["se_naive"][1] / math.sqrt(2), rel=1e-9)


def test_alpha_recovered_within_its_standard_error():
    cfg = WorldConfig(**{**WORLD, "n_pref_prompts": 3000, "seed": 3})
    w = build_world(cfg)
    fit = fit_alpha(preferences(w, cfg), w)
    assert abs(fit["alpha_hat"] - 0.6) < 2.5 * fit["alpha_se"]
    assert fit["alpha_se"] < 0.05 and fit["alpha_p"] < 1e-14
    assert abs(fit["quality_coef_all_pairs"] - 1.0) < 3 * 0.05  # r_true enters with weight 1


def test_alpha_interval_has_nominal_coverage():
    # 60 independent planted datasets: the 95% interval alpha-hat ± 1.96 SE covers 0.6 in
    # about 95% of them (binomial(60, .95): >= 51 with probability > 0.99)
    hits, zs = 0, []
    for s in range(60):
        cfg = WorldConfig(**{**WORLD, "n_pref_prompts": 400, "seed": 100 + s})
        w = build_world(cfg)
        f = fit_alpha(preferences(w, cfg), w)
        z = (f["alpha_hat"] - 0.6) / f["alpha_se"]
        zs.append(z)
        hits += abs(z) < 1.96
    assert hits >= 51
    assert abs(np.mean(zs)) < 3 / math.sqrt(60) + 0.15  # no gross bias


@pytest.mark.parametrize("alpha, beta", [(0.6, 1.0), (0.6, 0.5), (0.6, 0.25), (0.3, 0.7), (-0.2, 1.0)])
def test_sharpening_slope_equals_closed_form(alpha, beta):
    w = build_world(WorldConfig(**{**WORLD, "seed": 5}))
    t = w["topics"][0]
    p, r = np.asarray(w["p_ref"][t]), w["r_true"][t]
    cf, dpo = closed_form_policy(p, r, alpha, beta), dpo_tabular(p, r, alpha, beta)
    assert sharpening_slope(cf, p, r) == pytest.approx(1 + alpha / beta, abs=1e-9)
    assert sharpening_slope(dpo, p, r) == pytest.approx(1 + alpha / beta, abs=1e-3)
    assert np.abs(np.log(cf) - np.log(dpo)).max() < 1e-3
    # with equal quality the aligned policy is exactly pi_ref^gamma (normalised)
    eq = closed_form_policy(p, np.zeros_like(p), alpha, beta)
    g = p ** (1 + alpha / beta)
    assert eq == pytest.approx(g / g.sum(), rel=1e-9)
    ent = lambda q: -(q * np.log(q)).sum()
    if alpha > 0:
        assert ent(eq) < ent(p)
