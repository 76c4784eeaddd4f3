"""Synthetic traces follow the planned patterns (slips, re-checks, loops); the DAG plans at every scale; a bad key fails
before any job, naming it."""
import json
import random

import pytest

from methods.asag.config import DataConfig
from methods.asag.data import Vocab, build, problem, trace
from tests.workflow.conftest import bad_scale_edit, plan_paper

# the data step's former defaults, written out (the config classes have none)
DATA = dict(n_train=20000, n_test=300, p_mul=0.3, max_operand=99, max_rechecks=4, p_late_slip=0.15, p_first_slip=0.2,
            p_loop=0.1, max_len=160, seed=0)


def test_trace_patterns_and_rates(tmp_path):
    cfg = DataConfig(**{**DATA, "n_train": 3000, "n_test": 50, "seed": 3})
    build(cfg, tmp_path / "d")
    rows = [json.loads(l) for l in (tmp_path / "d" / "train.jsonl").read_text().splitlines()]
    test = [json.loads(l) for l in (tmp_path / "d" / "test.jsonl").read_text().splitlines()]
    assert not {r["prompt"] for r in rows} & {r["prompt"] for r in test}
    v = Vocab()
    for r in rows:
        assert len(v.encode(r["prompt"] + " " + r["thought"])) <= cfg.max_len
        boxed = int("".join(r["thought"].split("\\boxed{")[1].split("}")[0].split()))
        assert boxed == r["final"]
        assert (boxed != r["answer"]) == r["late_slip"]
    n = len(rows)
    # rates are binomial: 3000 draws, ±4 standard errors
    late = sum(r["late_slip"] for r in rows) / n
    loop = sum(r["loop"] for r in rows) / n
    assert abs(loop - 0.1) < 4 * (0.1 * 0.9 / n) ** 0.5
    assert 0.07 < late < 0.16   # p_late_slip = 0.15 minus traces whose loop jumped / slips that cancel
    assert all("<jump>" in r["thought"] for r in rows if r["jump"])


def test_first_slip_is_fixed_by_the_first_recheck():
    rng = random.Random(0)
    cfg = DataConfig(**{**DATA, "p_first_slip": 1.0, "p_late_slip": 0.0, "p_loop": 0.0})
    for _ in range(50):
        p = problem(rng, 0.3)
        t, meta = trace(rng, p, cfg)
        first, second = t.split(" Wait check ")[:2]
        assert first.split("So ")[1].split(" .")[0] != second.split("So ")[1].split(" .")[0]
        assert meta["final"] == p["answer"]


@pytest.mark.parametrize("scale", ["smoke", "tiny", "paper"])
def test_dry_run_job_counts(scale, tmp_path):
    sec, counts = plan_paper(tmp_path, "asag", scale)
    n = len(sec["decode"]["policies"])
    assert n == 7
    assert counts == {"asag_data": 1, "asag_train": 1, "asag_decode": n, "asag_report": 1, "claims": 1}


def test_bad_key_in_section_is_named(tmp_path):
    assert "asag.decode" in bad_scale_edit(tmp_path, "    window_cap: 64\n", "    window_capp: 64\n")
