"""SCOPE's claim statistics: strict Pareto domination by hand (an α-point identical to a model
is a tie, not a domination) and the query bootstrap of an AUC against scipy.stats.bootstrap."""
import numpy as np
import pytest

from methods.scope import core
from methods.scope.analysis import bootstrap_queries, strictly_dominated


def test_strict_domination_by_hand():
    curve = [(0.1, 0.2), (0.5, 0.6), (0.9, 0.8)]
    pts = [(0.1, 0.2),    # identical to the α = 0 point: a tie, not dominated
           (0.1, 0.1),    # same cost, less accurate: dominated
           (0.6, 0.6),    # costlier, as accurate: dominated
           (0.4, 0.5),    # cheaper than every better point: not dominated
           (1.0, 0.81)]   # more accurate than every point: not dominated
    assert strictly_dominated(pts, curve) == [False, True, True, False, False]
    assert core.dominated(pts, curve) == [True, True, True, False, False]   # the weak count includes the tie


def test_query_bootstrap_of_an_auc_matches_scipy():
    from scipy.stats import bootstrap

    rng = np.random.default_rng(3)
    n, m = 300, 4
    y = (rng.random((n, m)) < 0.4).astype(float)
    p = np.clip(0.3 * y + 0.7 * rng.random((n, m)), 0, 1)
    stat = lambda idx: core.auc(p[idx].ravel(), y[idx].ravel())   # noqa: E731
    ours = bootstrap_queries(stat, n, seed=0, n_resamples=1500)
    ref = bootstrap((np.arange(n),), lambda i: stat(i.astype(int)), vectorized=False, method="percentile",
                    n_resamples=1500, random_state=np.random.default_rng(1)).confidence_interval
    assert ours["lo"] == pytest.approx(ref.low, abs=0.015) and ours["hi"] == pytest.approx(ref.high, abs=0.015)
    assert ours["lo"] < stat(np.arange(n)) < ours["hi"] and ours["n"] == n
    # an undefined statistic (one class only) in most resamples: no interval
    assert bootstrap_queries(lambda idx: float("nan"), n, seed=0, n_resamples=50) is None


def test_query_intervals_are_item_level_and_decide_no_seed_claim():
    """The query bootstrap is an interval over test queries of one trained run (unit item); every
    SCOPE claim replicates over training seeds, so the claims engine reads it as inconclusive
    (another unit than the claim's), whatever side of the threshold it lies on."""
    from methods.core.claims import evaluate_claims, load_claims
    from methods.core.stats import paired_bootstrap_diff

    rng = np.random.default_rng(0)
    y = (rng.random(200) < 0.5).astype(float)
    iv = bootstrap_queries(lambda idx: float(y[idx].mean()), 200, seed=0, n_resamples=200)
    assert iv["unit"] == "item" and iv["n"] == 200
    spec = load_claims("methods/scope/claims.yaml")
    assert all(c["replicates"] == "seed" for c in spec["claims"])
    far = paired_bootstrap_diff(np.ones(50), np.zeros(50) + (rng.random(50) < 0.1), unit="item")
    assert far["unit"] == "item" and far["lo"] > 0.5   # far above C1b's threshold 0 ...
    metrics = {"c1_margin_vs_knn": 0.9, "intervals": {"c1_margin_vs_knn": far}}
    c1b = [c for c in spec["claims"] if c["id"] == "C1b"]
    row = evaluate_claims({**spec, "claims": c1b}, metrics, "tiny")["claims"][0]
    assert row["verdict"] == "inconclusive" and row["undecided_by"] == "no interval"   # ... but over items
    assert "the claim replicates over seeds" in row["note"]


def test_direct_member_pairs_are_the_shared_mixture_with_direct_answers():
    """The direct-answer member's pairs: training items drawn without replacement, arithmetic making up `mix_arith`
    of them (within one item of rounding; the smaller family's 40 items all used at 0.5), with
    `A:<answer>` targets that the pool's checker scores correct and that are shorter than the
    scratchpad."""
    import random
    from collections import Counter

    from methods.core.model_pool import tasks
    from methods.scope.run import direct_pairs

    rng = random.Random(0)
    train = [tasks.arith_item(rng, 3, 1, "+-") for _ in range(60)] + [tasks.rev_item(rng, 3, 9) for _ in range(40)]
    by_prompt = {t["prompt"]: t for t in train}
    for mix in (0.5, 0.85, 0.15):
        ours = direct_pairs(train, mix, 3)
        prompts = [p for p, _ in ours]
        assert not Counter(prompts) - Counter(t["prompt"] for t in train)   # each item drawn at most once
        n_arith = sum(by_prompt[p]["family"] == "arith" for p in prompts)
        assert abs(n_arith - mix * len(prompts)) <= 1
        if mix == 0.5:
            assert len(prompts) == 80
        for p, t in ours:
            it = by_prompt[p]
            assert t == f"A:{it['answer']}\n" and tasks.is_correct(it, t)
            assert len(t) < len(tasks.target(it))   # terse: fewer output tokens than the scratchpad


def _crossing_outcomes():
    """Two models whose per-query costs cross: A is cheap per token but verbose on family x (20
    output tokens) and terse on y (2); B costs 3× per token, 5 tokens everywhere. A is the
    cheapest model in total (11 < 15 a query); per query, B is cheaper on x (15 < 20), A on y (2 < 15)."""
    rng = np.random.default_rng(0)
    qs, rows = [], {"A": [], "B": []}
    for i in range(120):
        split = "anchor" if i < 60 else "test"
        fam = "x" if i % 2 == 0 else "y"
        qs.append({"qid": i, "split": split, "prompt": f"{fam}{i}", "family": fam})
        for m, price, tok in (("A", 1.0, 20 if fam == "x" else 2), ("B", 3.0, 5)):
            ok = bool(rng.random() < (0.3 if m == "A" else 0.7))
            rows[m].append({"correct": ok, "tokens": tok, "prompt_tokens": 0, "cost": price * tok})
    # retrieval: the query's own family, 6 anchors, similarity 1
    anchors = {f: [q["qid"] for q in qs if q["split"] == "anchor" and q["family"] == f] for f in "xy"}
    retrieval = [[(a, 1.0) for a in anchors[q["family"]] if a != q["qid"]][:10] for q in qs]
    models = {m: {"rows": rows[m], "price_in": 0.0, "price_out": p * 1e6} for m, p in (("A", 1.0), ("B", 3.0))}
    return {"queries": qs, "models": models, "order": ["A", "B"], "unseen": "B", "retrieval": retrieval}


def test_alpha0_follows_the_per_query_cost_and_seeds_become_replicates(tmp_path, monkeypatch):
    """α = 0 under the paper's rule (score = cost terms only) routes each query to its cheaper
    model, so with crossing costs it is no single model: its total cost is the sum of per-query
    minima, below the cheapest model's. Each predictor seed gives one value per claim metric (its
    mean is the metric) and the accuracy differences carry per-query items whose mean is the
    seed's value; the engine decides them over >= 3 seeds."""
    from methods.core.claims import evaluate_claims, load_claims
    from methods.scope import analysis
    from methods.scope.config import RouteConfig

    oc = _crossing_outcomes()
    (tmp_path / "oc.json").write_text(__import__("json").dumps(oc))
    test = [q["qid"] for q in oc["queries"] if q["split"] == "test"]
    corr = np.array([[oc["models"][m]["rows"][q]["correct"] for m in "AB"] for q in test], float)
    toks = np.array([[oc["models"][m]["rows"][q]["tokens"] for m in "AB"] for q in test], float)

    def fake_table(oc_, dirs, k):   # a perfect length predictor, P(correct) noisy by seed
        r = np.random.default_rng(int(dirs["rl"]))
        return {v: {"p": np.clip(corr * 0.8 + 0.2 * r.random(corr.shape), 0, 1), "len": toks, "parse_rate": 1.0}
                for v in ("rl", "sft", "noanchor")}

    monkeypatch.setattr(analysis, "prediction_table", fake_table)
    monkeypatch.setattr(analysis, "predictor_info", lambda d: {})
    monkeypatch.setattr(analysis, "_figure", lambda *a, **k: None)
    cfg = RouteConfig(k_r=6, gamma=2.0, w=0.3, alpha_step=0.25, budgets=[0.5], knn_k=5, seed=0)
    dirs = {s: {"rl": s, "sft": s, "noanchor": s} for s in (1, 2, 3)}
    m = analysis.analyze(cfg, str(tmp_path / "oc.json"), dirs, 5, tmp_path, tmp_path / "s.json", tmp_path / "f.png")
    cost = np.array([[oc["models"][mm]["rows"][q]["cost"] for mm in "AB"] for q in test])
    fam_x = np.array([oc["queries"][q]["family"] == "x" for q in test])
    assert m["c2_alpha0_cheapest_share"] == pytest.approx(1 - fam_x.mean())    # A only on family y
    assert m["c2_alpha0_cost_ratio"] == pytest.approx(cost.min(1).sum() / cost.sum(0).max())
    acc0 = np.where(fam_x, corr[:, 1], corr[:, 0]).mean()
    assert m["c2_acc_margin_vs_cheapest"] == pytest.approx(acc0 - corr[:, 0].mean())
    assert "inconclusive" not in m or "c2_alpha0_cost_ratio" not in m["inconclusive"]
    reps = m["replicates"]
    for k in analysis.SEED_METRICS:
        assert reps[k]["values"] == pytest.approx(m["per_seed"][k]) and len(reps[k]["values"]) == 3
        assert m[k] == pytest.approx(np.mean(m["per_seed"][k]))
    for k in ("c1_margin_vs_best_single", "c1_margin_vs_knn", "c2_acc_margin_vs_cheapest"):
        assert [np.mean(it) for it in reps[k]["items"]] == pytest.approx(reps[k]["values"])
    spec = load_claims("methods/scope/claims.yaml")
    rows = {r["id"]: r for r in evaluate_claims(spec, m, "tiny")["claims"]}
    # a perfect length predictor gives every seed the same α = 0 choices: a zero-width interval over
    # 3 seeds, which the engine reads as no evidence of spread (undecided), not as certainty
    assert rows["C2a"]["n"] == 3 and rows["C2a"]["replicates"] == "seed"
    assert rows["C2a"]["verdict"] == "inconclusive" and "zero-width" in rows["C2a"]["note"]
    assert rows["C4a"]["n"] == 3 and m["c4_unseen_auc"] == pytest.approx(1.0)   # P separates the classes
    assert rows["C2b"]["n"] == 3 and rows["C2b"]["n_inner"] == 3 * len(test)   # seeds, then queries
