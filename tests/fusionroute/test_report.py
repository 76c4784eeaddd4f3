"""FusionRoute's claim metrics: one value per seed (a replicate is a whole pipeline run), their
mean as the metric and the per-seed values as the summary's `replicates` record (unit seed),
against hand computation on synthetic replicates; the prompts of several seeds are never pooled."""
import random

import pytest

from methods.core.results import InputError
from methods.core.stats import interval_from_replicates
from methods.fusionroute import data as D
from methods.fusionroute.report import SYSTEMS, claim_metrics, table


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


def test_per_seed_metrics_and_replicates_by_hand(evals):
    m = claim_metrics(evals, [0, 1, 2])
    best = lambda r: max((f"expert_{d}" for d in D.EXPERT_DOMAINS), key=lambda s: r["em"][s]["macro"])
    for key, a, b, doms in [("c1_margin_vs_best_expert", "fusionroute", best, D.DOMAINS),
                            ("c1_margin_vs_expert_only", "fusionroute", "expert_only_routing", D.DOMAINS),
                            ("c3_comp_gain", "fusionroute", "expert_only_routing", ("comp",)),
                            ("c4_add_gain_vs_router", "fusionroute", "router_alone", ("add",)),
                            ("c5_cdpo_minus_sft", "fusionroute", "fusionroute_sft", D.DOMAINS)]:
        want = []
        for r in evals:   # per seed: the difference of the two rates on that seed's prompts
            (a1, b1), (a2, b2) = _pool([r], a, doms), _pool([r], b, doms)
            assert b1 == b2 == 20 * len(doms)
            want.append(100 * (a1 / b1 - a2 / b2))
        assert m["per_seed"][key] == pytest.approx(want, abs=1e-9)
        assert m[key] == pytest.approx(sum(want) / 3, abs=1e-9)
        # equal prompts per seed: the mean of the seeds' differences is the pooled difference
        (k1, n1), (k2, n2) = _pool(evals, a, doms), _pool(evals, b, doms)
        assert m[key] == pytest.approx(100 * (k1 / n1 - k2 / n2), abs=1e-9)
        rec = m["replicates"][key]
        assert rec["unit"] == "seed" and rec["ids"] == [0, 1, 2]
        assert rec["values"] == pytest.approx(want, abs=1e-9)
        iv = interval_from_replicates(rec)
        assert iv["n"] == 3 and iv["unit"] == "seed" and iv["lo"] < m[key] < iv["hi"]
        assert "n_inner" not in iv   # 3 replicates, not 3 × prompts
    assert "intervals" not in m   # one source: the replicates
    # macro EM = mean of the domain EMs when every domain has the same number of prompts
    k, n = _pool(evals, "fusionroute", D.DOMAINS)
    assert m["fusionroute_macro_em"] == pytest.approx(100 * k / n, abs=1e-9)
    assert m["fusionroute_macro_em"] == pytest.approx(
        sum(sum(r["em"]["fusionroute"][d] for r in evals) / 3 for d in D.DOMAINS) / 4, abs=1e-9)
    rec = m["replicates"]["fusionroute_macro_em"]
    assert rec["values"] == pytest.approx([r["em"]["fusionroute"]["macro"] for r in evals], abs=1e-9)
    assert rec["counts"] == [list(_pool([r], "fusionroute", D.DOMAINS)) for r in evals]
    assert m["cdpo_changed_frac"] == pytest.approx(3 / 80)


def test_c2_is_the_per_seed_smallest_home_gap(evals):
    m = claim_metrics(evals, [0, 1, 2])
    per_seed = [min(r["em"]["fusionroute"][d] - r["em"][f"expert_{d}"][d] for d in D.EXPERT_DOMAINS) for r in evals]
    assert m["replicates"]["c2_min_home_gap"]["values"] == pytest.approx(per_seed, abs=1e-9)
    assert m["c2_min_home_gap"] == pytest.approx(sum(per_seed) / 3, abs=1e-9)
    for d in D.EXPERT_DOMAINS:
        (k1, n1), (k2, n2) = _pool(evals, "fusionroute", (d,)), _pool(evals, f"expert_{d}", (d,))
        assert m["c2_home_gaps"][d] == pytest.approx(100 * (k1 / n1 - k2 / n2), abs=1e-9)
        assert m["expert_home_em"][d] == pytest.approx(100 * k2 / n2, abs=1e-9)
    # the mean of per-seed minima never exceeds the smallest mean gap (the check is conservative)
    assert m["c2_min_home_gap"] <= min(m["c2_home_gaps"].values()) + 1e-9
    assert m["min_expert_home_em"] == pytest.approx(min(m["expert_home_em"].values()), abs=1e-12)


def test_claims_engine_reads_seed_replicates(evals):
    """The claims table decides C1a from the three per-seed values, over seeds (n = 3)."""
    from methods.core.claims import evaluate_claims, load_claims

    m = claim_metrics(evals, [0, 1, 2])
    spec = load_claims("methods/fusionroute/claims.yaml")
    rows = {r["id"]: r for r in evaluate_claims(spec, m, "tiny")["claims"]}
    assert all(r["n"] in (3, None) and r["replicates"] == "seed" for r in rows.values())
    assert rows["C4"]["n"] == 3 and rows["C4"]["n_inner"] is None


def test_table_has_every_system_and_seed(evals):
    t = table(evals, [0, 1, 2])
    assert all(f"| {s} |" in t for s in SYSTEMS) and "seed 2" in t


def test_bad_input_is_one_line(evals):
    with pytest.raises(InputError, match="3 evaluations"):
        claim_metrics(evals, [0, 1])
    old = {k: v for k, v in evals[0].items() if k != "correct"}
    with pytest.raises(InputError, match="lacks"):
        claim_metrics([old], [0])
