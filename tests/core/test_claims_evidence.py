"""methods/core/claims.py, evidence rules of headline and mechanism claims: decided only by an
interval over >= 3 replicates of the claim's own unit lying strictly on one side of the
threshold; ties, zero-width intervals, unit mismatches and booleans without counts stay
undecided; a summary that lacks a needed metric is an error."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import yaml
from scipy import stats as st

from methods.core import claims as C, stats as S
from methods.core.results import InputError


def headline(metric="m", op=">", value=0.0, **over):
    c = {"id": "H", "kind": "headline", "statement": "s", "paper_value": 1.0, "source": "§1", "metric": metric,
         "statistic": "mean over seeds", "checks": {"tiny": {"op": op, "value": value}}, "replicates": "seed"}
    c.update(over)
    return c


def row_of(c, metrics, **kw):
    return C.evaluate_claims({"paper": "p", "claims": [c]}, metrics, "tiny", **kw)["claims"][0]


def iv(lo, hi, n=3, unit="seed"):
    return {"lo": lo, "hi": hi, "level": 0.95, "method": "t", "n": n, "unit": unit}


@pytest.mark.parametrize("op,lo,hi,verdict,by", [
    (">", 0.01, 0.3, "reproduced", None),
    (">=", 0.01, 0.3, "reproduced", None),
    (">=", 0.0, 0.3, "inconclusive", "interval straddles"),      # touches: a tie does not "improve"
    (">", -0.3, -0.01, "not_reproduced", None),
    (">=", -0.3, 0.0, "inconclusive", "interval straddles"),     # touches from below: not a failure either
    (">", -0.1, 0.3, "inconclusive", "interval straddles"),
    ("<", -0.3, -0.01, "reproduced", None),
    ("<=", -0.3, 0.0, "inconclusive", "interval straddles"),
    ("<", 0.01, 0.3, "not_reproduced", None),
])
def test_headline_interval_must_lie_strictly_on_one_side(op, lo, hi, verdict, by):
    r = row_of(headline(op=op), {"m": (lo + hi) / 2, "intervals": {"m": iv(lo, hi)}})
    assert (r["verdict"], r["undecided_by"], r["n"]) == (verdict, by, 3)


@pytest.mark.parametrize("metrics,by,text", [
    ({"m": 0.5}, "no interval", "no interval over replicates"),
    ({"m": 0.5, "intervals": {"m": iv(0.4, 0.6, n=2)}}, "n < 3", "n = 2 seeds"),
    ({"m": 0.5, "intervals": {"m": iv(0.5, 0.5, n=5)}}, "no interval", "zero-width interval"),
    ({"m": 0.5, "intervals": {"m": iv(0.4, 0.6, n=400, unit="item")}}, "no interval",
     "interval over items, the claim replicates over seeds"),
    ({"m": 0.5, "intervals": {"m": {"lo": 0.4, "hi": 0.6}}}, "no interval", "does not say over how many"),
    ({"m": 0.5, "replicates": {"m": S.replicate_record([0.5], unit="seed")}}, "n < 3", "n = 1 seeds"),
])
def test_headline_without_enough_evidence_is_undecided(metrics, by, text):
    r = row_of(headline(), metrics)
    assert (r["verdict"], r["undecided_by"]) == ("inconclusive", by)
    assert text in r["note"]


def test_replicates_give_the_t_interval_at_the_looks_level():
    vals = [0.31, 0.22, 0.25, 0.30]
    m = {"m": float(np.mean(vals)), "replicates": {"m": S.replicate_record(vals, unit="seed", ids=[0, 1, 2, 3])}}
    for level in (0.95, 0.99):
        r = row_of(headline(), m, level=level)
        lo, hi = st.t.interval(level, len(vals) - 1, loc=np.mean(vals), scale=st.sem(vals))
        assert (r["interval"]["lo"], r["interval"]["hi"]) == pytest.approx((lo, hi), abs=1e-12)
        assert (r["n"], r["interval"]["level"], r["verdict"]) == (4, level, "reproduced")
    # the same values, straddling a higher threshold: how many seeds the observed spread would need
    r = row_of(headline(value=0.24), m)
    assert r["undecided_by"] == "interval straddles"
    need = r["seeds_needed"]
    sd, gap = np.std(vals, ddof=1), np.mean(vals) - 0.24
    assert st.t.ppf(0.975, need - 1) * sd / np.sqrt(need) < gap <= st.t.ppf(0.975, need - 2) * sd / np.sqrt(need - 1)


def test_zero_width_seed_interval_is_widened_by_the_pooled_counts():
    # three seeds that all solve every one of 64 prompts: the t interval is [1, 1]; the items allow
    # the Wilson interval of 192/192
    rec = S.replicate_record([1.0, 1.0, 1.0], unit="seed", counts=[(64, 64)] * 3)
    r = row_of(headline(op=">=", value=0.9), {"m": 1.0, "replicates": {"m": rec}})
    w = S.wilson(192, 192)
    assert (r["interval"]["lo"], r["interval"]["hi"]) == pytest.approx((w["lo"], w["hi"]))
    assert r["n_inner"] == 192 and r["verdict"] == "reproduced"     # 192/192 lies above 0.9
    r = row_of(headline(op=">=", value=0.99), {"m": 1.0, "replicates": {"m": rec}})
    assert r["verdict"] == "inconclusive" and r["undecided_by"] == "interval straddles"   # not above 0.99
    # without counts it stays zero-width: undecided
    r = row_of(headline(op=">=", value=0.9), {"m": 1.0, "replicates": {"m": S.replicate_record([1.0] * 3, unit="seed")}})
    assert r["undecided_by"] == "no interval" and "zero-width" in r["note"]


@pytest.mark.parametrize("flags,want,verdict", [
    ([True] * 8, True, "reproduced"),          # exact 95% interval of 8/8: [0.631, 1]
    ([True] * 7 + [False], True, "inconclusive"),   # 7/8: [0.473, 0.997] contains 1/2
    ([True] * 3, True, "inconclusive"),        # 3/3: [0.292, 1]
    ([False] * 8, True, "not_reproduced"),
    ([False] * 8, False, "reproduced"),
    ([True, True], True, "inconclusive"),      # n < 3
])
def test_boolean_is_decided_by_its_per_replicate_count(flags, want, verdict):
    c = headline(op="is", value=want)
    r = row_of(c, {"m": bool(np.mean(flags) > 0.5), "holds": {"m": S.holds_record(flags, unit="seed")}})
    assert r["verdict"] == verdict
    ci = st.binomtest(sum(flags), len(flags)).proportion_ci(method="exact")
    assert (r["interval"]["lo"], r["interval"]["hi"]) == pytest.approx((ci.low, ci.high))
    # a boolean over means with no count never decides
    r = row_of(c, {"m": True})
    assert (r["verdict"], r["undecided_by"]) == ("inconclusive", "no interval")


def test_sanity_claims_keep_point_verdicts_and_counts_split_inconclusive():
    sanity = {**headline(), "id": "S", "kind": "sanity"}
    del sanity["replicates"]
    spec = {"paper": "p", "claims": [sanity, {**headline(), "id": "A"}, {**headline(metric="g"), "id": "B"},
                                     {**headline(metric="k"), "id": "D",
                                      "guards": [{"metric": "base", "op": ">=", "value": 0.5, "why": "w"}]}]}
    t = C.evaluate_claims(spec, {"m": 0.5, "g": 0.1, "k": 0.3, "base": 0.1,
                                 "intervals": {"g": iv(-0.1, 0.3), "k": iv(0.1, 0.5)}}, "tiny")
    assert [r["verdict"] for r in t["claims"]] == ["reproduced", "inconclusive", "inconclusive", "inconclusive"]
    assert t["counts"]["inconclusive_by"] == {"guard failed": 1, "interval straddles": 1, "n < 3": 0,
                                              "no interval": 1}


def test_headline_claims_must_declare_their_unit(tmp_path):
    c = headline()
    del c["replicates"]
    p = tmp_path / "claims.yaml"
    p.write_text(yaml.safe_dump({"paper": "p", "claims": [c]}))
    with pytest.raises(InputError, match="claim H \\(headline\\): replicates must be one of"):
        C.load_claims(p)
    p.write_text(yaml.safe_dump({"paper": "p", "claims": [{**c, "replicates": "prompt"}]}))
    with pytest.raises(InputError, match="replicates must be one of"):
        C.load_claims(p)


@pytest.mark.parametrize("metrics,msg", [
    ({}, "holds no metrics"),
    ({"provenance": {}, "notes": {}}, "holds no metrics"),
    ([1, 2], "must be a JSON object"),
    ({"other": 1.0}, "lacks metric 'm' \\(needed by claim H at scale tiny\\)"),
    ({"m": 1.0}, "lacks metric 'base' \\(needed by claim H"),         # a guard's metric counts too
])
def test_a_summary_lacking_a_needed_metric_is_an_error(metrics, msg):
    c = headline(guards=[{"metric": "base", "op": ">=", "value": 0.5, "why": "w"}])
    with pytest.raises(InputError, match=msg):
        C.evaluate_claims({"paper": "p", "claims": [c]}, metrics, "tiny")
    # a claim without a check at this scale needs nothing
    assert C.evaluate_claims({"paper": "p", "claims": [c]}, {"x": 1}, "smoke")["claims"][0]["verdict"] == "not_checked"


@pytest.mark.parametrize("summary", ["{}", '{"m": 0.3, "provenance": {}}', "[]", "{not json"])
def test_claims_cli_refuses_an_empty_or_partial_summary(tmp_path, summary):
    claims = tmp_path / "claims.yaml"
    claims.write_text(yaml.safe_dump({"paper": "p", "claims": [headline(guards=[
        {"metric": "base", "op": ">=", "value": 0.5, "why": "w"}])]}))
    (tmp_path / "summary.json").write_text(summary)
    out = tmp_path / "claims.json"
    p = subprocess.run([sys.executable, "-m", "methods.core", "claims", "--claims", str(claims), "--metrics",
                        str(tmp_path / "summary.json"), "--scale", "tiny", "--out", str(out)],
                       capture_output=True, text=True)
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "summary.json" in lines[0], p.stderr
    assert not out.exists() and sorted(x.name for x in tmp_path.iterdir()) == ["claims.yaml", "summary.json"]
    json.dumps(lines)
