"""The report's summary and provenance: notes for humans (4 significant digits, dicts as k=v),
each paper's seeds and config hash from its scale-config section, the wall time with a job running
(union of job intervals), and the per-paper claims page for `snakemake --report`."""
from __future__ import annotations

import os

import pytest

from methods.core import report
from methods.core.results import config_hash
from tests.core.test_report import HEADER, bench_row, claim, parse, write_paper


def test_fmt_note():
    assert report.fmt_note("ratio 0.6142843674571262); per seed 0.289") == "ratio 0.6143); per seed 0.289"
    assert report.fmt_note("top-K per family {'RED': 105, 'SYN': 99, 'U_TXT': 5}") == \
        "top-K per family RED=105, SYN=99, U_TXT=5"
    assert report.fmt_note('{"a": 0.123456789, "b": null}') == "a=0.1235, b=—"
    assert report.fmt_note("err -1.2345678e-05, v2.4.6, 0.5, x_0.1234567") == "err -1.235e-05, v2.4.6, 0.5, x_0.1234567"
    assert report.fmt_note("a set {1, 2} and {not python}") == "a set {1, 2} and {not python}"


def test_busy_wall_s():
    assert report.busy_wall_s([]) is None
    assert report.busy_wall_s([(0, 10), (5, 12), (20, 21)]) == pytest.approx(13.0)
    assert report.busy_wall_s([(3, 4), (0, 10)]) == pytest.approx(10.0)


SECTION = {"seeds": [0, 1, 2], "data": {"n": 5, "seed": 1234}, "train": {"seed": 7},
           "members": [{"name": "S", "seed": 0}]}


def test_seeds_of():
    assert report.seeds_of(SECTION) == "seeds=[0, 1, 2]; data.seed=1234"
    assert report.all_seeds(SECTION) == "seeds=[0, 1, 2]; data.seed=1234; train.seed=7; members.S.seed=0"
    assert report.seeds_of({"sim": {"seeds": 10, "seed": 3}}) == "sim.seed=3"  # a count is not a seed list
    assert report.seeds_of({"bandit": {"seeds": [0, 1]}, "table": {"seed": 1}}) == "bandit.seeds=[0, 1]; table.seed=1"
    assert report.seeds_of({"lr": 0.1}) == "no seed in config"


def test_provenance_from_scale_config(tmp_path):
    a = write_paper(tmp_path, "paper_a", [claim("A1", "reproduced", note="{'x': 0.98765432}")])
    b = write_paper(tmp_path, "paper_b", [claim("B1", "reproduced")])
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text("paper_a:\n  seeds: [0, 1, 2]\n  data: {n: 5, seed: 1234}\n  train: {seed: 7}\n"
                   "  members: [{name: S, seed: 0}]\npaper_b:\n  lr: 0.1\n")
    t = parse(report.build_report("tiny", [a, b], scale_config=cfg))
    rows = t.tables["paper-provenance"][0]
    assert rows[1][:3] == ["paper_a", "seeds=[0, 1, 2]; data.seed=1234", config_hash(SECTION)]
    assert rows[2][:3] == ["paper_b", "no seed in config", config_hash({"lr": 0.1})]
    assert t.tables["claims"][0][1][8] == "x=0.9877"
    assert len(t.tables["provenance"]) == 1  # once, not per paper


def test_timing_union_across_papers(tmp_path):
    """Two papers whose jobs ran side by side: the sum counts both, the union once."""
    papers = []
    for slug in ("paper_a", "paper_b"):
        d = write_paper(tmp_path, slug, [claim("X", "reproduced")])
        (d / "benchmarks" / "train.tsv").write_text(HEADER + bench_row(100.0, 1.0))
        os.utime(d / "benchmarks" / "train.tsv", (5000.0, 5000.0))
        papers.append(d)
    t = parse(report.build_report("tiny", papers))
    total = t.tables["summary"][0][-1]
    assert total[0] == "total (2 papers)" and total[-2:] == ["200.00", "100.00"]


def test_claims_page(tmp_path, capsys):
    a = write_paper(tmp_path, "paper_a", [claim("A1", "reproduced"), claim("A2", "not_checked", kind="sanity")])
    out = tmp_path / "claims.html"
    assert report.main(["--claims-only", "--scale", "tiny", "--papers", str(a), "--out", str(out)]) == 0
    t = parse(out.read_text())
    assert [r[0] for r in t.tables["claims"][0][1:]] == ["A1", "A2"]
    assert "<h1>Title of paper_a" in out.read_text()
    rc = report.main(["--claims-only", "--scale", "tiny", "--papers", str(a), str(a), "--out", str(out) + "2"])
    assert rc == 2 and "one paper directory" in capsys.readouterr().err
