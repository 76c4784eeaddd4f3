"""FusionRoute's pooled claim metrics: Newcombe's Wilson-based interval of a difference of
proportions against the published values (Newcombe 1998, Stat. Med. 17:873, Table II, method 10),
and the pooled metrics and intervals of synthetic replicates against hand computation."""
import math
import random

import pytest

from methods.core.results import InputError
from methods.core.stats import wilson
from methods.fusionroute import data as D
from methods.fusionroute.report import SYSTEMS, claim_metrics, newcombe_diff, table

# (k1, n1, k2, n2) -> Newcombe's 95% limits for p1 − p2 (Table II, method 10, 4 decimals)
NEWCOMBE = [((56, 70, 48, 80), (0.0524, 0.3339)), ((9, 10, 3, 10), (0.1705, 0.8090)),
            ((5, 56, 0, 29), (-0.0381, 0.1926)), ((0, 10, 0, 20), (-0.1611, 0.2775)),
            ((10, 10, 0, 20), (0.6791, 1.0000))]


@pytest.mark.parametrize("args,want", NEWCOMBE)
def test_newcombe_matches_published_limits(args, want):
    iv = newcombe_diff(*args)
    assert iv["lo"] == pytest.approx(want[0], abs=5e-5) and iv["hi"] == pytest.approx(want[1], abs=5e-5)


def test_newcombe_is_antisymmetric_and_scaled():
    a, b = newcombe_diff(30, 50, 20, 40, scale=100.0), newcombe_diff(20, 40, 30, 50)
    assert a["lo"] == pytest.approx(-100 * b["hi"], abs=1e-12) and a["hi"] == pytest.approx(-100 * b["lo"], abs=1e-12)


def _replicate(rng, acc: dict[str, dict[str, float]], n: int = 20) -> dict:
    """A synthetic evaluation: n prompts per domain, system correct w.p. acc[system][domain]."""
    doms = [d for d in D.DOMAINS for _ in range(n)]
    correct = {s: [int(rng.random() < acc[s][d]) for d in doms] for s in SYSTEMS}
    em = {s: {d: 100 * sum(c for c, x in zip(correct[s], doms) if x == d) / n for d in D.DOMAINS} for s in SYSTEMS}
    for s in SYSTEMS:
        em[s]["macro"] = sum(em[s][d] for d in D.DOMAINS) / 4
    return {"correct": correct, "domains": doms, "em": em, "cdpo_changed": {"k": 3, "n": len(doms)}}


@pytest.fixture(scope="module")
def evals():
    rng = random.Random(0)
    acc = {s: {d: rng.uniform(0.1, 0.9) for d in D.DOMAINS} for s in SYSTEMS}
    return [_replicate(rng, acc) for _ in range(3)]


def _pool(evals, system, doms):
    k = sum(sum(c for c, d in zip(r["correct"][system(r) if callable(system) else system], r["domains"]) if d in doms)
            for r in evals)
    n = sum(sum(d in doms for d in r["domains"]) for r in evals)
    return k, n


def test_pooled_metrics_and_intervals_by_hand(evals):
    m = claim_metrics(evals, [0, 1, 2])
    best = lambda r: max((f"expert_{d}" for d in D.EXPERT_DOMAINS), key=lambda s: r["em"][s]["macro"])
    for key, a, b, doms in [("c1_margin_vs_best_expert", "fusionroute", best, D.DOMAINS),
                            ("c1_margin_vs_expert_only", "fusionroute", "expert_only_routing", D.DOMAINS),
                            ("c3_comp_gain", "fusionroute", "expert_only_routing", ("comp",)),
                            ("c4_add_gain_vs_router", "fusionroute", "router_alone", ("add",)),
                            ("c5_cdpo_minus_sft", "fusionroute", "fusionroute_sft", D.DOMAINS)]:
        (k1, n1), (k2, n2) = _pool(evals, a, doms), _pool(evals, b, doms)
        assert n1 == n2 == 3 * 20 * len(doms)
        assert m[key] == pytest.approx(100 * (k1 / n1 - k2 / n2), abs=1e-9)
        # Newcombe by hand from the two Wilson intervals
        wa, wb = wilson(k1, n1), wilson(k2, n2)
        p1, p2 = k1 / n1, k2 / n2
        lo = p1 - p2 - math.sqrt((p1 - wa["lo"]) ** 2 + (wb["hi"] - p2) ** 2)
        hi = p1 - p2 + math.sqrt((wa["hi"] - p1) ** 2 + (p2 - wb["lo"]) ** 2)
        assert m["intervals"][key]["lo"] == pytest.approx(100 * lo, abs=1e-9)
        assert m["intervals"][key]["hi"] == pytest.approx(100 * hi, abs=1e-9)
        assert m["intervals"][key]["lo"] <= m[key] <= m["intervals"][key]["hi"]
        # per seed: the same difference in each replicate
        for r, v in zip(evals, m["per_seed"][key]):
            (a1, b1), (a2, b2) = _pool([r], a, doms), _pool([r], b, doms)
            assert v == pytest.approx(100 * (a1 / b1 - a2 / b2), abs=1e-9)
    # macro EM = mean of the domain EMs when every domain has the same number of prompts
    k, n = _pool(evals, "fusionroute", D.DOMAINS)
    assert m["fusionroute_macro_em"] == pytest.approx(100 * k / n, abs=1e-9)
    assert m["fusionroute_macro_em"] == pytest.approx(
        sum(sum(r["em"]["fusionroute"][d] for r in evals) / 3 for d in D.DOMAINS) / 4, abs=1e-9)
    assert m["cdpo_changed_frac"] == pytest.approx(9 / 240)


def test_c2_interval_is_min_of_domain_intervals(evals):
    m = claim_metrics(evals, [0, 1, 2])
    ivs = []
    for d in D.EXPERT_DOMAINS:
        (k1, n1), (k2, n2) = _pool(evals, "fusionroute", (d,)), _pool(evals, f"expert_{d}", (d,))
        ivs.append(newcombe_diff(k1, n1, k2, n2, scale=100.0))
        assert m["c2_home_gaps"][d] == pytest.approx(100 * (k1 / n1 - k2 / n2), abs=1e-9)
        assert m["expert_home_em"][d] == pytest.approx(100 * k2 / n2, abs=1e-9)
    assert m["c2_min_home_gap"] == pytest.approx(min(m["c2_home_gaps"].values()), abs=1e-12)
    assert m["intervals"]["c2_min_home_gap"]["lo"] == pytest.approx(min(i["lo"] for i in ivs), abs=1e-12)
    assert m["intervals"]["c2_min_home_gap"]["hi"] == pytest.approx(min(i["hi"] for i in ivs), abs=1e-12)
    assert m["min_expert_home_em"] == pytest.approx(min(m["expert_home_em"].values()), abs=1e-12)


def test_table_has_every_system_and_seed(evals):
    t = table(evals, [0, 1, 2])
    assert all(f"| {s} |" in t for s in SYSTEMS) and "seed 2" in t


def test_bad_input_is_one_line(evals):
    with pytest.raises(InputError, match="3 evaluations"):
        claim_metrics(evals, [0, 1])
    old = {k: v for k, v in evals[0].items() if k != "correct"}
    with pytest.raises(InputError, match="lacks"):
        claim_metrics([old], [0])
