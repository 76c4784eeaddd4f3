"""Our GRPO update vs trl 1.16 GRPOTrainer's first update from the same weights, prompts and
completions (token-level loss, β = 0, SGD, no clipping): relative difference ≤ 1e-4."""
from methods.rl_sgd.config import TrlCheckConfig
from methods.rl_sgd.trl_check import compare


def test_first_update_matches_trl():
    r = compare(TrlCheckConfig(width=16, n_layers=1, n_prompts=2, group_size=4, max_new=3, lr=0.1, seed=0,
                               tol=1e-4))
    assert r["update_norm_trl"] > 0, "trl made no update (all groups had equal rewards)"
    assert r["update_rel_diff"] <= 1e-4, r
    assert r["match"] is True
