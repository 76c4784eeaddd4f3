"""Generated tasks: every answer is the exact function of its prompt, eval prompts are held out,
bad task keys fail naming the key; claim C4a uses tokens through the answer's newline."""
import json
import random
import re

import pytest

from methods.core.config import from_dict
from methods.core.results import InputError
from methods.efficient_dlm.analysis import claim_metrics
from methods.efficient_dlm.config import AnalysisConfig, DataConfig
from methods.efficient_dlm.run import LETTERS, build_data, task_line

# a data section (the values these tests were written with); each test overrides what it varies
DATA = {"corpus": None, "n_train_docs": 20000, "n_eval": 300, "tasks": ["add", "rev"], "mix": [1.0, 1.0, 1.0],
        "max_digits": 3, "fixed_format": False, "rev_min": 6, "rev_max": 16, "rev_chars": LETTERS, "seed": 0}


def test_task_answers_are_exact():
    cfg = DataConfig(**{**DATA, "tasks": ["copy", "add", "rev"], "mix": [1, 1, 1, 0], "max_digits": 2,
                        "fixed_format": True, "rev_min": 7, "rev_max": 7, "rev_chars": "0123456789"})
    rng = random.Random(3)
    for _ in range(200):
        p, a = task_line("add", rng, cfg)
        x, y = p[:-1].split("+")
        assert len(x) == len(y) == 2 and len(a) == 3 and int(a) == int(x) + int(y)
        p, a = task_line("copy", rng, cfg)
        assert p == f"copy {a} = " and len(a) == 7 and a.isdigit()
        p, a = task_line("rev", rng, cfg)
        assert p == f"rev {a[::-1]} = "
    free = DataConfig(**{**DATA, "max_digits": 2})
    p, a = task_line("add", random.Random(0), free)
    assert int(a) == sum(int(v) for v in p[:-1].split("+")) and a == str(int(a))   # unpadded


def test_eval_prompts_are_held_out(tmp_path):
    cfg = DataConfig(**{**DATA, "n_train_docs": 3000, "n_eval": 40, "tasks": ["copy", "add"], "mix": [0.5, 0.4, 0.1],
                        "max_digits": 2, "fixed_format": True, "rev_min": 3, "rev_max": 3, "rev_chars": "0123456789"})
    info = build_data(cfg, str(tmp_path))
    assert info["eval"] == 80
    train = set((tmp_path / "train.txt").read_text().splitlines())
    rows = [json.loads(x) for x in (tmp_path / "eval.jsonl").read_text().splitlines()]
    assert [r["task"] for r in rows] == ["copy"] * 40 + ["add"] * 40
    assert not any(r["prompt"] + r["answer"] in train for r in rows)


@pytest.mark.parametrize("kw,key", [({"tasks": ["add", "sort"]}, "data.tasks[1]"), ({"mix": [1.0, 1.0]}, "data.mix"),
                                     ({"mix": [0.0, 0.0, 1.0]}, "data.mix"), ({"rev_min": 17}, "data.rev_min"),
                                     ({"rev_chars": "ab="}, "data.rev_chars")])
def test_bad_data_key_is_named(tmp_path, kw, key):
    with pytest.raises(InputError, match=re.escape(f"'{key}'")):
        build_data(from_dict(DataConfig, {**DATA, **kw}, "data"), str(tmp_path))


def test_c4_counts_tokens_through_newline():
    rows = [{"model": "blk_clean", "threshold": th, "acc": acc, "tpf": 4.0, "useful_tpf": u}
            for th, acc, u in ((0.99, 0.9, 1.0), (0.7, 0.85, 2.5))]
    m, _ = claim_metrics(rows, {}, AnalysisConfig(claim_threshold=0.9, fast_threshold=0.5, mid_threshold=0.7,
                                                  slow_threshold=0.99))
    assert m["c4_tpf_mid"] == 2.5 and m["c4_acc_loss_pp"] == pytest.approx(5.0, abs=1e-9)
    # every claim and guard metric is a key, null where not measured (no fullbidir, no AR row here)
    assert m["c2_acc_gap_vs_fullbidir"] is None and m["ar_acc"] is None and m["c1_drift_ratio"] is None


def _acc_rows(correct_by_model, th=0.9):
    rows = []
    for (model, t), c in correct_by_model.items():
        rows.append({"model": model, "threshold": t, "acc": sum(c) / len(c), "correct": list(c), "tpf": 1.0,
                     "useful_tpf": 1.0})
    return rows


def test_accuracy_gaps_carry_paired_bootstrap_intervals():
    """The gap's interval is scipy's percentile bootstrap of the per-prompt differences (seed 0,
    2000 resamples), scaled to points for C4b; the guard metric is the better model's accuracy."""
    import numpy as np
    from scipy.stats import bootstrap

    rng = np.random.default_rng(3)
    a, b = rng.random(200) < 0.6, rng.random(200) < 0.45
    rows = _acc_rows({("blk_clean", 0.9): a, ("fullbidir", 0.9): b, ("blk_clean", 0.99): a,
                      ("blk_clean", 0.7): b})
    m, _ = claim_metrics(rows, {}, AnalysisConfig(claim_threshold=0.9, fast_threshold=0.5, mid_threshold=0.7,
                                                  slow_threshold=0.99))
    d = a.astype(float) - b.astype(float)
    ref = bootstrap((d,), np.mean, confidence_level=0.95, n_resamples=2000, method="percentile",
                    random_state=np.random.default_rng(0)).confidence_interval
    assert m["c2_acc_gap_vs_fullbidir"] == pytest.approx(d.mean(), abs=1e-12)
    assert m["c2_pair_best_acc"] == pytest.approx(a.mean(), abs=1e-12)
    iv = m["intervals"]["c2_acc_gap_vs_fullbidir"]
    assert (iv["lo"], iv["hi"]) == pytest.approx((ref.low, ref.high), abs=1e-12) and iv["n"] == 200
    assert iv["unit"] == "item"          # prompts of one model: for the report, the claims replicate over seeds
    assert m["replicates"]["c2_acc_gap_vs_fullbidir"] == {"unit": "seed", "values": [pytest.approx(d.mean())],
                                                          "ids": ["s0"]}
    iv4 = m["intervals"]["c4_acc_loss_pp"]
    assert (iv4["lo"], iv4["hi"]) == pytest.approx((100 * ref.low, 100 * ref.high), abs=1e-9)
    assert m["c4_acc_slow"] == pytest.approx(a.mean()) and m["c4_acc_mid"] == pytest.approx(b.mean())


def test_no_accuracy_claim_passes_through_a_zero_tie():
    """Every converted model at 0 exact match (the failure the guards exist for): each accuracy
    claim is inconclusive, never reproduced, whatever its check."""
    from pathlib import Path

    from methods.core.claims import evaluate_claims, load_claims

    zero = [0] * 50
    rows = _acc_rows({(v, t): zero for v in ("blk_clean", "fullbidir", "blk_noisy", "blk_clean_posmask")
                      for t in (0.99, 0.9, 0.7, 0.5)})
    rows.append({"model": "ar", "threshold": None, "acc": 0.53, "correct": [1] * 26 + [0] * 24, "tpf": 1.0,
                 "useful_tpf": 1.0, "tokens_per_s": 100.0})
    for r in rows:
        r.setdefault("tokens_per_s", 10.0)
    m, notes = claim_metrics(rows, {"blk_clean": {"mean": 0.1}, "fullbidir": {"mean": 0.2}},
                             AnalysisConfig(claim_threshold=0.9, fast_threshold=0.5, mid_threshold=0.7,
                                            slow_threshold=0.99))
    spec = load_claims(Path(__file__).parents[2] / "methods" / "efficient_dlm" / "claims.yaml")
    res = {c["id"]: c for c in evaluate_claims(spec, {**m, "notes": notes}, "tiny")["claims"]}
    for cid in ("C2a", "C2b", "C3", "C4a", "C4b"):
        assert res[cid]["verdict"] == "inconclusive", (cid, res[cid])
        assert "guard failed" in res[cid]["note"]
    # drift 0.5 ≤ 0.8, not an accuracy claim (no guard), but one conversion seed: n < 3, undecided
    assert res["C1"]["verdict"] == "inconclusive" and res["C1"]["undecided_by"] == "n < 3"


def test_seed_means_t_intervals_and_a_tied_seed():
    """Three conversion seeds: each claim is the seed mean, its replicates record the per-seed
    values, and the claims' interval scipy's t interval over them; one seed where
    blk_clean solves nothing (0 vs 0) sets the guard metrics to 0, so C4b cannot pass through it."""
    from pathlib import Path

    from scipy import stats

    from methods.core.claims import evaluate_claims, load_claims

    acc = {0: (0.5, 0.0, 0.4), 1: (0.0, 0.0, 0.0), 2: (0.55, 0.0, 0.1)}   # blk_clean, fullbidir, posmask
    rows = [{"model": "ar", "threshold": None, "acc": 0.53, "tpf": 1.0, "useful_tpf": 1.0, "tokens_per_s": 10.0}]
    for s, (c, f, p) in acc.items():
        for th in (0.99, 0.9, 0.7, 0.5):
            for model, a in (("blk_clean", c), ("fullbidir", f), ("blk_noisy", 0.0), ("blk_clean_posmask", p)):
                rows.append({"model": model, "seed": s, "threshold": th, "acc": a, "tpf": 2.0,
                             "useful_tpf": 1.0 + s, "tokens_per_s": 10.0})
    drifts = {"blk_clean": {str(s): {"mean": 0.1 * (s + 1)} for s in acc},
              "fullbidir": {str(s): {"mean": 0.2} for s in acc}}
    m, notes = claim_metrics(rows, drifts, AnalysisConfig(claim_threshold=0.9, fast_threshold=0.5,
                                                          mid_threshold=0.7, slow_threshold=0.99))
    gaps = [c - f for c, f, _ in acc.values()]
    t = stats.t.ppf(0.975, 2) * stats.sem(gaps)
    assert m["c2_acc_gap_vs_fullbidir"] == pytest.approx(sum(gaps) / 3)
    assert m["replicates"]["c2_acc_gap_vs_fullbidir"] == {"unit": "seed", "values": pytest.approx(gaps),
                                                          "ids": ["s0", "s1", "s2"]}
    assert "intervals" not in m          # no interval over prompts where there are seeds
    assert m["c1_drift_ratio"] == pytest.approx((0.5 + 1.0 + 1.5) / 3)
    assert m["c4_tpf_mid"] == pytest.approx(2.0)
    assert m["c2_pair_best_acc"] == 0.0 and m["c4_acc_slow"] == 0.0     # the tied seed
    assert m["c3_pair_best_acc"] == 0.0
    spec = load_claims(Path(__file__).parents[2] / "methods" / "efficient_dlm" / "claims.yaml")
    res = {c["id"]: c for c in evaluate_claims(spec, {**m, "notes": notes}, "tiny")["claims"]}
    iv = res["C2a"]["interval"]
    assert (iv["lo"], iv["hi"]) == pytest.approx((sum(gaps) / 3 - t, sum(gaps) / 3 + t)) and iv["n"] == 3
    assert m["replicates"]["c1_drift_ratio"]["values"] == pytest.approx([0.5, 1.0, 1.5])
    assert m["c4_acc_loss_pp"] == 0 and res["C4b"]["verdict"] == "inconclusive"
