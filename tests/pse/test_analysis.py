"""The analysis' claim metrics and their intervals: item-level (trials of fixed agents), every
claim metric present as a key."""
from __future__ import annotations

from pathlib import Path

import pytest

from methods.core.claims import evaluate_claims, load_claims
from methods.pse.analysis import CLAIM_METRICS, analyse
from methods.pse.config import AnalysisConfig
from methods.pse.stats import wilson


def _inputs():
    scen, labels = {}, {"a": {}, "b": {}}
    for i in range(12):        # factorial: N = 1 (agent a: 9 of 12 contaminated, agent b: 3 of 8)
        scen[f"f{i}"] = {"kind": "factorial", "type": "factual", "N": 1, "T": 1, "P": 0}
        labels["a"][f"f{i}"] = [int(i < 9), 0]
        if i < 8:
            labels["b"][f"f{i}"] = [int(i < 3), 0]
    for i in range(4):
        scen[f"z{i}"] = {"kind": "factorial", "type": "factual", "N": 0, "T": 1, "P": 0}
        labels["a"][f"z{i}"] = [0, 0]
    pipe = {f"p{i}": [int(i < 4), int(i < 6), int(i < 7), int(i < 8)] for i in range(20)}
    defs = {d: {} for d in ("none", "selfverify", "keyword")}
    for i in range(10):        # defence panel: 8 contaminated drafts, self-verification removes 5
        scen[f"d{i}"] = {"kind": "defence"}
        draft = int(i < 8)
        defs["none"][f"d{i}"] = {"final": draft, "draft": draft, "flagged": False}
        defs["selfverify"][f"d{i}"] = {"final": int(draft and i >= 5), "draft": draft, "flagged": bool(draft and i < 5)}
        defs["keyword"][f"d{i}"] = {"final": 0, "draft": draft, "flagged": bool(draft)}
    for i in range(4):
        scen[f"c{i}"] = {"kind": "control", "mention": i % 2}
        for d in defs:
            defs[d][f"c{i}"] = {"final": 0, "draft": 0, "flagged": bool(d == "keyword" and i % 2)}
    return scen, labels, pipe, defs


def test_intervals_are_over_trials_and_claim_metrics_are_keys():
    scen, labels, pipe, defs = _inputs()
    m, _ = analyse(scen, labels, pipe, defs, None, "a", AnalysisConfig(conf=0.95, min_cells_in_ci=0.9))
    assert set(CLAIM_METRICS) <= set(m)
    iv = m["intervals"]
    # D1: 5 of 8 contaminated drafts removed, Wilson over the drafts (items)
    assert m["d1_reduction"] == pytest.approx(5 / 8)
    assert iv["d1_reduction"]["unit"] == "item" and iv["d1_reduction"]["n"] == 8
    assert (iv["d1_reduction"]["lo"], iv["d1_reduction"]["hi"]) == pytest.approx(wilson(5, 8, 0.95))
    # susceptibility: min over agents (b: 3/8); n = the fewest trials behind one agent's Wilson
    assert m["susceptibility_min"] == pytest.approx(3 / 8)
    s = iv["susceptibility_min"]
    assert s["unit"] == "item" and s["n"] == 8
    assert s["lo"] == pytest.approx(min(wilson(9, 12, 0.95)[0], wilson(3, 8, 0.95)[0]))
    assert iv["compounding_factor"]["unit"] == "item" and iv["compounding_factor"]["n"] == 20
    assert m["compounding_factor"] == pytest.approx(2.0)
    # the paper-scale headline claims read these item intervals (claims replicate over items)
    spec = load_claims(Path(__file__).resolve().parents[2] / "methods/pse/claims.yaml")
    m["judge_kappa"] = 0.9
    rows = {r["id"]: r for r in evaluate_claims(spec, m, "paper")["claims"]}
    assert rows["C4p"]["n"] == 8 and rows["C4p"]["replicates"] == "item"
    assert rows["C6"]["n"] == 8 and rows["C3b"]["n"] == 20
