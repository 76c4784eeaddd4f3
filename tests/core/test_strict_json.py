"""Result JSON is strict (RFC 8259): NaN and ±Infinity, which JSON cannot hold, are written as
null by the shared writers (methods/core/results.py), and a null metric is "not measured" for
the claim checker (methods/core/claims.py): `not_checked` with a reason, never a pass."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from methods.core import claims as C
from methods.core.results import read_json, read_jsonl, write_json, write_jsonl, write_metrics

ROOT = Path(__file__).resolve().parents[2]


def strict_loads(text: str):
    """json.loads that refuses the NaN / Infinity / -Infinity extensions of Python's json."""
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")
    return json.loads(text, parse_constant=refuse)


SUMMARY = {"c1_gap": float("nan"), "c2_ratio": float("inf"), "c3_low": -math.inf, "c4_ok": 0.25,
           "flag": True, "count": 3, "nested": {"xs": [1.0, float("nan"), 2.0], "t": (math.inf, 0.5)},
           "np": np.array([np.nan, 1.5], dtype=np.float32), "np_scalar": np.float64("nan"),
           "torch": torch.tensor([float("inf"), 2.0]), "torch_scalar": torch.tensor(float("nan"))}
EXPECTED = {"c1_gap": None, "c2_ratio": None, "c3_low": None, "c4_ok": 0.25, "flag": True, "count": 3,
            "nested": {"xs": [1.0, None, 2.0], "t": [None, 0.5]}, "np": [None, 1.5], "np_scalar": None,
            "torch": [None, 2.0], "torch_scalar": None}


def test_write_json_is_strict(tmp_path):
    write_json(tmp_path / "s.json", SUMMARY)
    assert strict_loads((tmp_path / "s.json").read_text()) == EXPECTED
    assert read_json(tmp_path / "s.json") == EXPECTED


def test_write_metrics_and_jsonl_are_strict(tmp_path):
    write_metrics(tmp_path / "m.json", SUMMARY, cfg={"lr": float("nan")}, seed=0)
    got = strict_loads((tmp_path / "m.json").read_text())
    assert {k: got[k] for k in EXPECTED} == EXPECTED and "provenance" in got
    write_jsonl(tmp_path / "rows.jsonl", [{"step": 1, "loss": float("nan")}, {"step": 2, "loss": 1.25}])
    lines = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert [strict_loads(x) for x in lines] == [{"step": 1, "loss": None}, {"step": 2, "loss": 1.25}]
    assert read_jsonl(tmp_path / "rows.jsonl")[0]["loss"] is None


# sanity claims: their point value decides, so a measured value passes without replicates
# (headline claims need an interval over replicates, tests/core/test_claims_evidence.py)
SPEC = {"paper": "p", "title": "T", "claims": [
    {"id": f"X{i}", "kind": "sanity", "statement": "s", "paper_value": 1, "source": "§1", "metric": m,
     "statistic": "mean", "checks": {"tiny": chk}}
    for i, (m, chk) in enumerate([
        ("c1_gap", {"op": ">=", "value": 0.0}), ("c1_gap", {"op": "<=", "value": 0.0}),
        ("c2_ratio", {"op": ">", "value": 1.0}), ("c3_low", {"op": "<", "value": 0.0}),
        ("c5_null", {"op": ">=", "value": 0.0}), ("c4_ok", {"op": "<=", "value": 0.5})])]}


def test_nan_metric_round_trip_gives_not_checked(tmp_path):
    """NaN/±inf written, read back as null, judged not_checked whatever the check's direction
    (as NaN already is in memory, before the round trip)."""
    write_json(tmp_path / "summary.json", {**SUMMARY, "c5_null": None})
    metrics = read_json(tmp_path / "summary.json")
    table = C.evaluate_claims(SPEC, metrics, "tiny")
    got = {r["id"]: (r["verdict"], r["note"]) for r in table["claims"]}
    for cid in ("X0", "X1", "X2", "X3", "X4"):
        assert got[cid] == ("not_checked", "metric not measured"), (cid, got[cid])
    assert got["X5"] == ("reproduced", "")
    assert table["counts"]["total"]["reproduced"] == 1
    in_memory = {r["id"]: r["verdict"] for r in C.evaluate_claims(SPEC, {**SUMMARY, "c5_null": None}, "tiny")["claims"]}
    assert in_memory["X0"] == in_memory["X1"] == "not_checked"
    write_json(tmp_path / "claims.json", C.evaluate_claims(SPEC, {**SUMMARY, "c5_null": None}, "tiny"))
    rows = strict_loads((tmp_path / "claims.json").read_text())["claims"]
    assert [r["measured"] for r in rows] == [None, None, None, None, None, 0.25]


@pytest.mark.parametrize("value", [None, float("nan"), float("inf"), -float("inf")])
def test_unmeasured_guard_makes_the_claim_inconclusive(value, tmp_path):
    claim = {**SPEC["claims"][-1], "guards": [{"metric": "base", "op": ">=", "value": 0.1, "why": "w"}]}
    write_json(tmp_path / "summary.json", {"c4_ok": 0.25, "base": value})
    row = C.evaluate_claim(claim, read_json(tmp_path / "summary.json"), "tiny")
    assert row["verdict"] == "inconclusive" and "guard metric base not measured" in row["note"]


def test_claims_cli_writes_strict_json(tmp_path):
    import yaml

    (tmp_path / "claims.yaml").write_text(yaml.safe_dump(SPEC))
    (tmp_path / "summary.json").write_text('{"c1_gap": NaN, "c2_ratio": null, "c3_low": NaN, '
                                           '"c4_ok": 0.25, "c5_null": null}')  # an old, non-strict summary
    out = subprocess.run([sys.executable, "-m", "methods.core", "claims", "--claims", str(tmp_path / "claims.yaml"),
                          "--metrics", str(tmp_path / "summary.json"), "--scale", "tiny",
                          "--out", str(tmp_path / "claims.json")], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    table = strict_loads((tmp_path / "claims.json").read_text())
    assert [r["verdict"] for r in table["claims"]] == ["not_checked"] * 5 + ["reproduced"]


@pytest.mark.parametrize("reader", ["read_json", "read_jsonl"])
def test_binary_garbage_is_a_one_line_input_error(tmp_path, reader):
    from methods.core import results

    f = tmp_path / "x.json"
    f.write_bytes(b"\xff\xfe\x00garbage\x80")
    with pytest.raises(results.InputError, match=r"corrupt JSONL? in .*x\.json: not UTF-8 text"):
        getattr(results, reader)(f)
