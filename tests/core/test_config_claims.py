"""methods/core/{config,claims,results}.py: typed configs name the offending key, claim verdicts
at and around their thresholds, atomic writes leave nothing half-done, provenance is complete."""
from __future__ import annotations

import json
import math
import os
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from methods.core import claims as C
from methods.core.config import from_dict, from_json
from methods.core.results import InputError, atomic_path, config_hash, read_json, write_json, write_metrics
from methods.core.train import TrainConfig

REPO_ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------ config ----
# Module level: from_dict resolves the (string) annotations with typing.get_type_hints.
@dataclass
class Inner:
    width: int
    ratio: float = 0.5
    name: str = "x"


@dataclass
class Outer:
    steps: int
    inner: Inner
    tasks: dict[str, Inner] = field(default_factory=dict)
    items: list[Inner] = field(default_factory=list)
    betas: tuple[float, float] = (0.9, 0.95)
    maybe: int | None = None
    flag: bool = False
    lr: float = 1e-3


def good(**over):
    d = {"steps": 10, "inner": {"width": 4}}
    d.update(over)
    return d


def test_from_dict_fills_defaults_and_converts():
    cfg = from_dict(Outer, good(tasks={"a": {"width": 1, "ratio": 2}}, items=[{"width": 3}],
                                betas=[0.8, 1], lr=3, maybe=None, flag=True))
    assert cfg == Outer(steps=10, inner=Inner(4), tasks={"a": Inner(1, 2.0)}, items=[Inner(3)],
                        betas=(0.8, 1.0), maybe=None, flag=True, lr=3.0)
    # int accepted for float and converted (so JSON "3" and "3.0" configs are the same config)
    assert type(cfg.lr) is float and type(cfg.tasks["a"].ratio) is float
    assert type(cfg.betas) is tuple and all(type(b) is float for b in cfg.betas)
    assert cfg.inner.ratio == 0.5 and cfg.inner.name == "x"         # defaults filled
    assert from_dict(Outer, good(maybe=7)).maybe == 7
    assert from_json(Outer, json.dumps(good())) == Outer(10, Inner(4))


@pytest.mark.parametrize("data,key", [
    (good(stesp=1), "'stesp'"),
    (good(inner={"width": 4, "widht": 5}), "'inner.widht'"),
    (good(tasks={"qa": {"width": 1, "bogus": 2}}), "'tasks.qa.bogus'"),
    (good(items=[{"width": 1}, {"width": 2, "extra": 0}]), "'items[1].extra'"),
])
def test_from_dict_unknown_key_names_dotted_path(data, key):
    with pytest.raises(InputError, match="unknown config key " + key.replace("[", r"\[").replace("]", r"\]")):
        from_dict(Outer, data)


@pytest.mark.parametrize("data,key", [
    (good(steps="10"), "steps"),                 # str for int
    (good(steps=True), "steps"),                 # bool is an int subclass: still rejected
    (good(steps=10.0), "steps"),                 # float for int, even integral
    (good(steps=10.5), "steps"),
    (good(lr=True), "lr"),                       # bool for float
    (good(lr="1e-3"), "lr"),
    (good(flag=1), "flag"),                      # int for bool
    (good(inner={"width": "4"}), "inner.width"),
    (good(tasks={"qa": {"width": 1.5}}), "tasks.qa.width"),
    (good(betas=[0.9, "x"]), "betas[1]"),
    (good(maybe="3"), "maybe"),
    (good(inner=[1, 2]), "inner"),
    (good(tasks=[1]), "tasks"),
])
def test_from_dict_wrong_type_names_key(data, key):
    with pytest.raises(InputError) as e:
        from_dict(Outer, data)
    assert f"'{key}'" in str(e.value)


@pytest.mark.parametrize("data,key", [({"inner": {"width": 1}}, "'steps'"),
                                      ({"steps": 1}, "'inner'"),
                                      (good(inner={"ratio": 1.0}), "'inner.width'"),
                                      (good(tasks={"t": {}}), "'tasks.t.width'")])
def test_from_dict_missing_required_key_named(data, key):
    with pytest.raises(InputError, match="missing config key " + key):
        from_dict(Outer, data)


def test_from_dict_on_train_config():
    cfg = from_dict(TrainConfig, {"steps": 5, "batch_size": 2, "lr": 1, "betas": [0.9, 0.99]})
    assert cfg.lr == 1.0 and cfg.betas == (0.9, 0.99) and cfg.optimizer == "adamw"
    with pytest.raises(InputError, match="'optimizer'"):
        from_dict(TrainConfig, {"steps": 5, "batch_size": 2, "lr": 1.0, "optimizer": "adam"})
    with pytest.raises(InputError, match="'warmup_steps'"):
        from_dict(TrainConfig, {"steps": 5, "batch_size": 2, "lr": 1.0, "warmup_steps": 6})
    with pytest.raises(InputError, match="not valid JSON"):
        from_json(TrainConfig, "{steps: 5")


# ------------------------------------------------------------------------------ claims ----
def claim(cid, metric, checks, **over):
    """A sanity claim (decided by its point value) unless `kind`/`replicates` say otherwise; the
    interval rules of headline and mechanism claims are in test_claims_evidence.py."""
    c = {"id": cid, "kind": "sanity", "statement": f"claim {cid}", "paper_value": 1.0, "source": "§1", "metric": metric,
         "statistic": "mean", "checks": checks}
    c.update(over)
    return c


def spec_of(*claims_):
    return {"paper": "p", "title": "T", "claims": list(claims_)}


@pytest.mark.parametrize("op,value,measured,expected", [
    (">", 0.05, 0.06, "reproduced"), (">", 0.05, 0.05, "not_reproduced"), (">", 0.05, 0.04, "not_reproduced"),
    (">=", 0.05, 0.05, "reproduced"), (">=", 0.05, 0.0499999, "not_reproduced"), (">=", 0, 0, "reproduced"),
    ("<", 1.0, 0.99, "reproduced"), ("<", 1.0, 1.0, "not_reproduced"), ("<", 1.0, 1.01, "not_reproduced"),
    ("<=", 1.0, 1.0, "reproduced"), ("<=", 1.0, 1.0000001, "not_reproduced"), ("<=", -1, -2, "reproduced"),
    ("is", True, True, "reproduced"), ("is", True, False, "not_reproduced"),
    ("is", False, False, "reproduced"), ("is", False, True, "not_reproduced"),
    ("is", True, 1, "not_reproduced"),            # a number is not the boolean the claim asks for
    (">", 0.0, -math.inf, "not_reproduced"), (">", 0.0, math.inf, "reproduced"),
])
def test_verdicts_at_and_around_thresholds(op, value, measured, expected):
    spec = spec_of(claim("A", "m", {"tiny": {"op": op, "value": value}}))
    table = C.evaluate_claims(spec, {"m": measured}, "tiny")
    row = table["claims"][0]
    assert row["verdict"] == expected
    assert row["measured"] == measured
    assert row["check"] == f"{C.SYMBOL[op]} {value}"
    assert row["note"] == ""
    assert table["counts"]["total"] == {v: int(v == expected) for v in C.VERDICTS}
    assert table["counts"]["sanity"] == table["counts"]["total"]
    assert table["counts"]["headline"] == {v: 0 for v in C.VERDICTS}


def test_not_checked_cases_and_counts():
    checks = {"smoke": None, "tiny": {"op": ">=", "value": 0.1}}
    spec = spec_of(
        claim("N2", "none", checks),                    # metric present but null
        claim("N3", "nan", checks),                     # metric NaN (e.g. one seed, no CI)
        claim("OK", "good", checks),
        claim("BAD", "bad", checks),
        claim("NS", "good", {"paper": {"op": ">", "value": 0}}),   # no check for "tiny" at all
        claim("NULL", "good", None),                    # checks: null
    )
    metrics = {"none": None, "nan": float("nan"), "good": 0.2, "bad": 0.05,
               "notes": {"nan": "1 seed", "bad": "CI [0.01, 0.09]"}}
    t = C.evaluate_claims(spec, metrics, "tiny")
    rows = {r["id"]: r for r in t["claims"]}
    assert [r["id"] for r in t["claims"]] == ["N2", "N3", "OK", "BAD", "NS", "NULL"]
    for cid in ("N2", "N3"):
        assert rows[cid]["verdict"] == "not_checked" and rows[cid]["check"] == "≥ 0.1"
        assert rows[cid]["note"].startswith("metric not measured")
    assert rows["N3"]["note"] == "metric not measured; 1 seed"
    assert math.isnan(rows["N3"]["measured"])
    assert rows["OK"]["verdict"] == "reproduced" and rows["OK"]["note"] == ""
    assert rows["BAD"]["verdict"] == "not_reproduced" and rows["BAD"]["note"] == "CI [0.01, 0.09]"
    for cid in ("NS", "NULL"):
        assert rows[cid]["verdict"] == "not_checked" and rows[cid]["check"] is None
        assert rows[cid]["note"] == "no check at this scale"
    assert t["counts"]["total"] == {"reproduced": 1, "not_reproduced": 1, "inconclusive": 0, "not_checked": 4}
    assert sum(t["counts"]["total"].values()) == len(spec["claims"])
    # smoke: every check is null → all not_checked, nothing else
    s = C.evaluate_claims(spec, metrics, "smoke")
    assert s["counts"]["total"] == {"reproduced": 0, "not_reproduced": 0, "inconclusive": 0, "not_checked": 6}
    assert (t["paper"], t["title"], t["scale"]) == ("p", "T", "tiny")
    keys = {"id", "kind", "statement", "paper_value", "source", "metric", "statistic", "replicates", "measured",
            "interval", "n", "n_inner", "check", "guards", "verdict", "undecided_by", "seeds_needed", "note"}
    assert all(set(r) == keys for r in t["claims"])


def write_claims(tmp_path, claims_, name="claims.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump({"paper": "p", "title": "T", "claims": claims_}))
    return p


def test_load_claims_validates(tmp_path):
    ok = claim("A", "m", {"smoke": None, "tiny": {"op": "is", "value": True}})
    assert C.load_claims(write_claims(tmp_path, [ok]))["claims"][0]["checks"]["tiny"] == {"op": "is", "value": True}
    bad = [
        ([{**ok, "threshold": 1}], "unknown keys \\['threshold'\\]"),
        ([{k: v for k, v in ok.items() if k != "metric"}], "missing keys \\['metric'\\]"),
        ([claim("B", "m", {"tiny": {"op": "==", "value": 1}})], "claim B scale tiny"),
        ([claim("B", "m", {"tiny": {"op": ">", "value": 1, "strict": True}})], "claim B scale tiny"),
        ([claim("B", "m", {"tiny": {"op": ">"}})], "claim B scale tiny"),
    ]
    for i, (cl, msg) in enumerate(bad):
        with pytest.raises(InputError, match=msg):
            C.load_claims(write_claims(tmp_path, cl, f"bad{i}.yaml"))
    (tmp_path / "nolist.yaml").write_text("paper: p\nclaims: {a: 1}\n")
    with pytest.raises(InputError, match="'claims' list"):
        C.load_claims(tmp_path / "nolist.yaml")
    (tmp_path / "corrupt.yaml").write_text("claims: [a, b\n")
    with pytest.raises(InputError, match="corrupt YAML"):
        C.load_claims(tmp_path / "corrupt.yaml")
    with pytest.raises(InputError, match="missing claims file"):
        C.load_claims(tmp_path / "absent.yaml")


def test_real_wd_plasticity_claims_load_and_evaluate():
    spec = C.load_claims(REPO_ROOT / "methods" / "wd_plasticity" / "claims.yaml")
    assert spec["paper"] == "wd_plasticity" and spec["claims"]
    ids = [c["id"] for c in spec["claims"]]
    assert len(ids) == len(set(ids))
    for c in spec["claims"]:
        for scale, chk in (c["checks"] or {}).items():
            assert scale in ("smoke", "tiny", "paper")
            if chk is not None and chk["op"] == "is":
                assert isinstance(chk["value"], bool), c["id"]   # `is` against a number never holds
    # every metric null (not measured) → every claim not_checked, at every scale; an empty summary
    # is an error, not a table of not_checked claims
    nothing = {m: None for c in spec["claims"] for m in [c["metric"]] + [g["metric"] for g in c.get("guards", [])]}
    for scale in ("smoke", "tiny", "paper"):
        t = C.evaluate_claims(spec, nothing, scale)
        assert t["counts"]["total"]["not_checked"] == len(ids)
        with pytest.raises(InputError, match="holds no metrics"):
            C.evaluate_claims(spec, {}, scale)


GUARD = {"metric": "base", "op": ">=", "value": 0.2, "why": "the base must solve the task"}


@pytest.mark.parametrize("metrics,expected,note", [
    ({"m": 0.5, "base": 0.3}, "reproduced", ""),
    ({"m": -0.5, "base": 0.3}, "not_reproduced", ""),
    # a failed guard turns a pass and a failure alike into inconclusive, with the reason
    ({"m": 0.0, "base": 0.003}, "inconclusive", "guard failed: base = 0.003, needs ≥ 0.2 (the base must solve the task)"),
    ({"m": -0.5, "base": 0.1}, "inconclusive", "guard failed: base = 0.1, needs ≥ 0.2 (the base must solve the task)"),
    ({"m": 0.5, "base": float("nan")}, "inconclusive", "guard metric base not measured (the base must solve the task)"),
    # no measurement of the claim's own metric: not_checked, guards are not consulted
    ({"m": None, "base": 0.003}, "not_checked", "metric not measured"),
])
def test_guards_make_verdicts_inconclusive(metrics, expected, note):
    spec = spec_of(claim("G", "m", {"tiny": {"op": ">=", "value": 0.0}}, guards=[GUARD]))
    row = C.evaluate_claims(spec, metrics, "tiny")["claims"][0]
    assert (row["verdict"], row["note"]) == (expected, note)
    assert row["guards"] == ["base ≥ 0.2"]


def test_analysis_declared_inconclusive_and_bool_guard():
    spec = spec_of(claim("A", "m", {"tiny": {"op": ">", "value": 0.0}},
                         guards=[{"metric": "fired", "op": "is", "value": True, "why": "the gate must fire"}]))
    row = C.evaluate_claims(spec, {"m": 1.0, "fired": False}, "tiny")["claims"][0]
    assert row["verdict"] == "inconclusive" and "fired = False" in row["note"]
    row = C.evaluate_claims(spec, {"m": 1.0, "fired": True, "inconclusive": {"m": "tie by construction"}},
                            "tiny")["claims"][0]
    assert (row["verdict"], row["note"]) == ("inconclusive", "analysis: tie by construction")


@pytest.mark.parametrize("lo,hi,expected", [
    (0.01, 0.3, "reproduced"),          # whole interval above the threshold
    (-0.3, -0.01, "not_reproduced"),    # whole interval below
    (-0.1, 0.3, "inconclusive"),        # straddles: the point value alone does not decide
    (0.0, 0.3, "inconclusive"),         # '>' 0 does not hold at lo = 0
])
def test_interval_decides_a_sanity_verdict(lo, hi, expected):
    spec = spec_of(claim("I", "m", {"tiny": {"op": ">", "value": 0.0}}))
    iv = {"lo": lo, "hi": hi, "level": 0.95, "method": "t", "n": 3, "unit": "seed"}
    row = C.evaluate_claims(spec, {"m": (lo + hi) / 2, "intervals": {"m": iv}}, "tiny")["claims"][0]
    assert row["verdict"] == expected and row["interval"] == iv
    if expected == "inconclusive":
        assert "straddles the threshold" in row["note"]


def test_malformed_interval_and_guard_are_input_errors(tmp_path):
    spec = spec_of(claim("I", "m", {"tiny": {"op": ">", "value": 0.0}}))
    with pytest.raises(InputError, match="malformed interval for metric 'm'"):
        C.evaluate_claims(spec, {"m": 1.0, "intervals": {"m": {"lo": 2.0, "hi": 1.0}}}, "tiny")
    bad = [
        ([claim("K", "m", None, kind="headlin")], "kind must be one of"),
        ([claim("K", "m", None, guards=[{"metric": "b", "op": ">=", "value": 1}])], "a guard must be"),
        ([claim("K", "m", None, guards=[{**GUARD, "op": "=="}])], "a guard must be"),
        ([claim("K", "m", None), claim("K", "n", None)], "duplicate claim id 'K'"),
    ]
    for i, (cl, msg) in enumerate(bad):
        with pytest.raises(InputError, match=msg):
            C.load_claims(write_claims(tmp_path, cl, f"bad{i}.yaml"))


# ----------------------------------------------------------------------------- results ----
def test_atomic_path_failure_leaves_nothing(tmp_path):
    target = tmp_path / "out" / "metrics.json"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("partial")
            assert tmp.parent.parent == target.parent and tmp != target
            raise RuntimeError("step crashed")
    assert not target.exists()
    assert list(target.parent.iterdir()) == []                 # no temp file / dir left behind
    # an existing output survives a failed rewrite untouched
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("new")
            raise RuntimeError
    assert target.read_text() == "old" and [p.name for p in target.parent.iterdir()] == ["metrics.json"]
    # success replaces it, and again leaves no siblings
    with atomic_path(target) as tmp:
        tmp.write_text("new")
        assert target.read_text() == "old"                     # not visible until the block ends
    assert target.read_text() == "new" and [p.name for p in target.parent.iterdir()] == ["metrics.json"]


def test_atomic_path_directory_outputs(tmp_path):
    out = tmp_path / "model"
    with atomic_path(out, is_dir=True) as tmp:
        (tmp / "a.txt").write_text("1")
        (tmp / "sub").mkdir()
        (tmp / "sub" / "b.txt").write_text("2")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == ["a.txt", "sub", "sub/b.txt"]
    umask = os.umask(0)
    os.umask(umask)
    assert (out.stat().st_mode & 0o777) == (0o777 & ~umask)   # not mkdtemp's 0700
    # a second write replaces the whole directory: no stale files from the first
    with atomic_path(out, is_dir=True) as tmp:
        (tmp / "c.txt").write_text("3")
    assert [p.name for p in out.iterdir()] == ["c.txt"]
    # a failed directory write keeps the previous directory intact
    with pytest.raises(ValueError):
        with atomic_path(out, is_dir=True) as tmp:
            (tmp / "d.txt").write_text("4")
            raise ValueError
    assert [p.name for p in out.iterdir()] == ["c.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_write_metrics_provenance(tmp_path):
    cfg = {"lr": 1e-3, "steps": 10, "model": {"d": 64}}
    write_metrics(tmp_path / "m.json", {"loss": 1.5, "acc": 0.25}, cfg, seed=3, wall_s=1.23456)
    m = read_json(tmp_path / "m.json")
    assert m["loss"] == 1.5 and m["acc"] == 0.25
    p = m["provenance"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                          text=True).stdout.strip()
    assert p["git_sha"] == head and len(head) == 40
    assert isinstance(p["git_dirty"], bool)
    for pkg in ("torch", "transformers", "lm_eval", "datasets", "tokenizers", "numpy"):
        assert p["packages"][pkg] == metadata.version(pkg.replace("_", "-")), pkg
    import torch
    assert p["packages"]["torch"].split("+")[0] == torch.__version__.split("+")[0]
    assert p["seed"] == 3 and p["wall_s"] == 1.235
    assert p["config_hash"] == config_hash(cfg) and len(p["config_hash"]) == 16
    # the hash is a function of the config's content: key order does not matter, values do
    assert config_hash({"model": {"d": 64}, "steps": 10, "lr": 1e-3}) == config_hash(cfg)
    assert config_hash({**cfg, "lr": 2e-3}) != config_hash(cfg)
    assert config_hash({**cfg, "model": {"d": 65}}) != config_hash(cfg)
    write_metrics(tmp_path / "m2.json", {"loss": 9.0}, dict(cfg))
    assert read_json(tmp_path / "m2.json")["provenance"]["config_hash"] == p["config_hash"]
    write_metrics(tmp_path / "m3.json", {"loss": 1.5})
    assert read_json(tmp_path / "m3.json")["provenance"]["config_hash"] is None
    assert sorted(x.name for x in tmp_path.iterdir()) == ["m.json", "m2.json", "m3.json"]


def test_write_json_converts_numpy_and_torch_values(tmp_path):
    """_json_default's contract: numpy/torch scalars via .item(), arrays/tensors via .tolist(),
    Paths as strings."""
    import numpy as np
    import torch

    write_json(tmp_path / "s.json", {"a": np.float64(0.5), "b": torch.tensor(2), "c": np.int64(3),
                                     "d": np.bool_(True), "p": Path("x/y")})
    assert read_json(tmp_path / "s.json") == {"a": 0.5, "b": 2, "c": 3, "d": True, "p": "x/y"}
    # arrays with more than one element (e.g. a per-seed vector in a summary)
    write_json(tmp_path / "v.json", {"v": np.arange(3), "t": torch.tensor([1.5, 2.5])})
    assert read_json(tmp_path / "v.json") == {"v": [0, 1, 2], "t": [1.5, 2.5]}
