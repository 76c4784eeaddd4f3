"""The rl_sgd claim metrics on hand-made runs (no training): R1 per-seed differences and their t
interval, R2a's per-seed matched ratio, R5 per seed and its interval, checked against scipy and
hand computation."""
import numpy as np
import pytest
from scipy import stats

from methods.core.claims import evaluate_claims, load_claims
from methods.core.results import read_json
from methods.rl_sgd.analysis import AnalysisConfig, aggregate
from methods.rl_sgd.config import Ablation, Grid

WIDTHS = [32, 128]
GRID = Grid(adamw=[1e-5, 3e-5], sgd=[1e-3, 1e-2])
CFG = AnalysisConfig(ablation_ref_lr=1e-5, match_tol=0.02, widths=WIDTHS, grid=GRID,
                     ablation=Ablation(adam_nomom=1e-5, adam_noadapt=3e-3, sgd_mom=3e-4))
SEEDS = [0, 1, 2]
# accuracy (by seed) and bf16 changed fraction of each (width, optimizer, lr)
ACC = {(128, "adamw", 1e-5): [0.60, 0.62, 0.61], (128, "adamw", 3e-5): [0.64, 0.66, 0.62],
       (128, "sgd", 1e-3): [0.61, 0.63, 0.60], (128, "sgd", 1e-2): [0.65, 0.64, 0.66],
       (128, "adam_nomom", 1e-5): [0.58, 0.60, 0.62], (128, "adam_noadapt", 3e-3): [0.50, 0.55, 0.52],
       (32, "adamw", 1e-5): [0.30, 0.31, 0.29], (32, "adamw", 3e-5): [0.34, 0.33, 0.36],
       (32, "sgd", 1e-3): [0.31, 0.30, 0.33], (32, "sgd", 1e-2): [0.35, 0.32, 0.30]}
CHG = {"adamw": {1e-5: 0.8, 3e-5: 0.9}, "sgd": {1e-3: 0.2, 1e-2: 0.4}, "adam_nomom": {1e-5: 0.8},
       "adam_noadapt": {3e-3: 0.7}}
SFT = {"base_acc": 0.1, "seeds": {str(s): {"adamw": {"acc": 0.5}, "adam_nomom": {"acc": a}, "adam_noadapt": {"acc": b}}
                                  for s, a, b in [(0, 0.45, 0.2), (1, 0.40, 0.25), (2, 0.5, 0.1)]}}


def _runs():
    runs = {}
    for (w, o, lr), accs in ACC.items():
        for s, acc in zip(SEEDS, accs):
            n = 1000 if w == 128 else 100
            runs[f"d{w}_{o}_lr{lr:g}_s{s}"] = {
                "summary": {"width": w, "optimizer": o, "lr": lr, "seed": s, "n_params": n, "base_acc": 0.5,
                            "acc": acc, "state_bytes": 0 if o == "sgd" else 8 * n, "wall_s": 1.0},
                "bf16_changed": CHG[o][lr], "fp32_changed": 0.995, "hidden_bf16_changed": CHG[o][lr],
                "mean_eff_rank_frac": 0.5, "mean_rank99_frac": 0.5}
    return runs


def _t95(x):
    x = np.asarray(x, float)
    return stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))


def test_claim_metrics_over_seeds(tmp_path):
    trl = {"update_rel_diff": 1e-7, "match": True}
    aggregate(CFG, _runs(), SFT, trl, tmp_path / "t.csv", tmp_path / "s.json", tmp_path / "a.png", tmp_path / "w.png")
    m = read_json(tmp_path / "s.json")
    # R1: best lrs by seed mean: AdamW 3e-5 (0.64), SGD 1e-2 (0.65); per-seed differences
    diffs = [0.65 - 0.64, 0.64 - 0.66, 0.66 - 0.62]
    assert m["r1_sgd_minus_adamw"] == pytest.approx(0.65 - 0.64)
    assert m["r1_sgd_minus_adamw_per_seed"] == pytest.approx(diffs)
    assert m["replicates"]["r1_sgd_minus_adamw"] == {"unit": "seed", "values": pytest.approx(diffs),
                                                     "ids": ["s0", "s1", "s2"]}
    assert "r1_sgd_minus_adamw" not in m["intervals"]
    rows = {r["id"]: r for r in evaluate_claims(load_claims("methods/rl_sgd/claims.yaml"), m, "tiny")["claims"]}
    iv = rows["R1"]["interval"]
    assert (iv["lo"], iv["hi"]) == pytest.approx(_t95(diffs)) and iv["unit"] == "seed" and rows["R1"]["n"] == 3
    assert m["r1_adamw_gain_over_base"] == pytest.approx(0.64 - 0.5)
    # R2a per seed: every SGD lr is matched in AdamW's range ± 0.02; AdamW's changed fraction is
    # interpolated linearly in accuracy; the largest ratio per seed
    per_seed = _hand_ratios(128)
    assert m["r2_unmatched_seeds"] == []
    assert m["r2_ratio_large_per_seed"] == pytest.approx(per_seed)
    assert m["r2_ratio_large"] == pytest.approx(np.mean(per_seed))
    assert m["replicates"]["r2_ratio_large"] == {"unit": "seed", "values": pytest.approx(per_seed),
                                                 "ids": ["s0", "s1", "s2"]}
    iv = rows["R2a"]["interval"]
    assert (iv["lo"], iv["hi"]) == pytest.approx(_t95(per_seed))
    # R5 per seed: (ref − var)/ref in RL minus the same in SFT; metric = larger of the two means
    ref = ACC[(128, "adamw", 1e-5)]
    d = {}
    for var, sft_key in (("adam_nomom", "adam_nomom"), ("adam_noadapt", "adam_noadapt")):
        d[var] = [(ref[i] - ACC[(128, var, CFG.ablation.__dict__[var])][i]) / ref[i]
                  - (0.5 - SFT["seeds"][str(i)][sft_key]["acc"]) / 0.5 for i in range(3)]
    means = {k: np.mean(v) for k, v in d.items()}
    assert m["r5_rl_minus_sft_drop"] == pytest.approx(max(means.values()))
    ivs = {k: _t95(v) for k, v in d.items()}
    assert m["intervals"]["r5_rl_minus_sft_drop"]["lo"] == pytest.approx(max(i[0] for i in ivs.values()))
    assert m["intervals"]["r5_rl_minus_sft_drop"]["hi"] == pytest.approx(max(i[1] for i in ivs.values()))
    assert m["intervals"]["r5_rl_minus_sft_drop"]["unit"] == "seed" and m["intervals"]["r5_rl_minus_sft_drop"]["n"] == 3
    assert m["r5_holds_seeds"] == sum(all(d[k][i] < 0 for k in d) for i in range(3))
    assert m["r5_sft_adamw_acc_min"] == pytest.approx(0.5)
    assert m["r4_state_bytes_exact"] is True
    assert m["inconclusive"] == {}


def _hand_ratios(w):
    out = []
    for i in range(3):
        a_acc = [ACC[(w, "adamw", 1e-5)][i], ACC[(w, "adamw", 3e-5)][i]]
        order = np.argsort(a_acc)
        xs, ys = np.asarray(a_acc)[order], np.asarray([0.8, 0.9])[order]
        ratios = [chg / float(np.interp(ACC[(w, "sgd", lr)][i], xs, ys))
                  for lr, chg in ((1e-3, 0.2), (1e-2, 0.4))
                  if min(a_acc) - 0.02 <= ACC[(w, "sgd", lr)][i] <= max(a_acc) + 0.02]
        out.append(max(ratios))
    return out


def test_width_gap_has_a_welch_interval(tmp_path):
    """R2b: mean per-seed ratio at d=32 minus at d=128, with the Welch–Satterthwaite 95% interval
    written out by hand."""
    aggregate(CFG, _runs(), SFT, {"update_rel_diff": 1e-7}, tmp_path / "t.csv", tmp_path / "s.json",
              tmp_path / "a.png", tmp_path / "w.png")
    m = read_json(tmp_path / "s.json")
    small, large = np.asarray(_hand_ratios(32)), np.asarray(_hand_ratios(128))
    va, vb = small.var(ddof=1) / 3, large.var(ddof=1) / 3
    dof = (va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 2)
    gap, half = small.mean() - large.mean(), stats.t.ppf(0.975, dof) * np.sqrt(va + vb)
    assert m["r2_width_gap"] == pytest.approx(gap)
    iv = m["intervals"]["r2_width_gap"]
    # n: the seeds behind the less replicated of the two means
    assert (iv["lo"], iv["hi"], iv["n"]) == pytest.approx((gap - half, gap + half, 3)) and iv["unit"] == "seed"


def test_one_seed_at_a_width_makes_r2b_inconclusive(tmp_path):
    runs = {k: v for k, v in _runs().items() if not (k.startswith("d32_") and not k.endswith("_s0"))}
    aggregate(CFG, runs, SFT, {"update_rel_diff": 1e-7}, tmp_path / "t.csv", tmp_path / "s.json",
              tmp_path / "a.png", tmp_path / "w.png")
    m = read_json(tmp_path / "s.json")
    assert m["r2_width_gap"] == pytest.approx(_hand_ratios(32)[0] - np.mean(_hand_ratios(128)))
    assert "r2_width_gap" not in m["intervals"]
    assert "d=32: 1 matched seed" in m["inconclusive"]["r2_width_gap"]


def test_unmatched_seed_makes_r2a_inconclusive(tmp_path):
    runs = _runs()
    runs["d128_sgd_lr0.001_s1"]["summary"]["acc"] = 0.2   # far outside AdamW's range
    runs["d128_sgd_lr0.01_s1"]["summary"]["acc"] = 0.2
    aggregate(CFG, runs, SFT, {"update_rel_diff": 1e-7}, tmp_path / "t.csv", tmp_path / "s.json",
              tmp_path / "a.png", tmp_path / "w.png")
    m = read_json(tmp_path / "s.json")
    assert m["r2_unmatched_seeds"] == [1]
    assert "r2_ratio_large" in m["inconclusive"] and "r2_ratio_large" not in m["intervals"]
    # the matched seeds' ratios are still the replicates record; the declared reason decides
    assert m["replicates"]["r2_ratio_large"]["ids"] == ["s0", "s2"]
