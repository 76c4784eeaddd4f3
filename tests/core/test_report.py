"""The HTML report: every claim shown, run times aggregated per rule, figures inlined, input
escaped, and bad input refused with exit 2 and no output file.

The HTML is parsed with the stdlib `html.parser` (lxml is not a declared dependency).
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from methods.core import report
from methods.core.report import build_report, fmt_value, main, rule_of

REPO = Path(__file__).resolve().parents[2]

# 1x1 RGBA PNG, raw bytes: no plotting library needed to make a real image.
PNG_1x1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJ"
    "RU5ErkJggg==")

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def bench_row(s, rss):
    return f"{s}\t0:00:01\t{rss}\t10.0\t1.0\t1.0\t0.0\t0.0\t0.0\t{s}\n"


def claim(cid, verdict, measured=0.5, statement="a statement", note="", kind="headline", **extra):
    return {"id": cid, "kind": kind, "statement": statement, "paper_value": 0.1, "source": "Tab. 1",
            "metric": "m", "statistic": "mean", "measured": measured, "check": "≥ 0.05",
            "verdict": verdict, "note": note, **extra}


def write_paper(root: Path, slug: str, claims: list[dict], scale="tiny") -> Path:
    d = root / "results" / scale / slug
    (d / "figures").mkdir(parents=True)
    (d / "benchmarks").mkdir()
    counts = {v: sum(c["verdict"] == v for c in claims) for v in report.VERDICTS}  # ignored by the report
    prov = {"git_sha": "abc123def", "git_dirty": True, "packages": {"numpy": "2.4.6",
            "torch": None}, "python": "3.11.9", "config_hash": "cafef00d12345678", "seed": 0,
            "wall_s": 1.5, "host": "h", "time_utc": "2026-01-01T00:00:00Z", "argv": ["x"]}
    (d / "claims.json").write_text(json.dumps({
        "paper": slug, "title": f"Title of {slug}", "scale": scale, "claims": claims,
        "counts": counts, "provenance": prov}))
    return d


class Tables(HTMLParser):
    """Collect every <table> (keyed by its class or id) as rows of cell texts, and every <img>."""

    def __init__(self):
        super().__init__()
        self.tables: dict[str, list[list[list[str]]]] = {}
        self.imgs: list[dict] = []
        self.spans: list[tuple[str, str]] = []  # (class, text) of badge spans
        self._rows = self._cell = self._span = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self._rows = []
            self.tables.setdefault(a.get("class") or a.get("id"), []).append(self._rows)
        elif tag == "tr" and self._rows is not None:
            self._rows.append([])
        elif tag in ("td", "th") and self._rows is not None:
            self._cell = []
        elif tag == "img":
            self.imgs.append(a)
        elif tag == "span" and "badge" in (a.get("class") or ""):
            self._span = [a["class"], []]

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._rows[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._rows = None
        elif tag == "span" and self._span is not None:
            self.spans.append((self._span[0], "".join(self._span[1])))
            self._span = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._span is not None:
            self._span[1].append(data)


def parse(html: str) -> Tables:
    p = Tables()
    p.feed(html)
    p.close()
    return p


@pytest.fixture
def papers(tmp_path):
    a_claims = [claim("A1", "reproduced", measured=0.123456789),
                claim("A2", "not_reproduced", measured=False,
                      statement="<script>alert('x')</script> & more"),
                claim("A3", "not_checked", measured=None, note="needs <b>full</b> scale", kind="sanity"),
                claim("A4", "inconclusive", measured=0.1, kind="mechanism", guards=["base ≥ 0.2"],
                      interval={"lo": -0.05, "hi": 0.25, "level": 0.95, "method": "t", "n": 3},
                      replicates="seed", n=3, n_inner=192, look=1, undecided_by="interval straddles",
                      seeds_needed=9, note="95% interval [-0.05, 0.25] straddles the threshold")]
    a = write_paper(tmp_path, "paper_a", a_claims)
    (a / "figures" / "curve.png").write_bytes(PNG_1x1)
    (a / "figures" / "curve.caption.txt").write_text("Loss <vs> step\n")
    # Two jobs of rule `train` (one repeated twice: two rows in one file), one of `eval`.
    (a / "benchmarks" / "train__tiny_0.tsv").write_text(
        HEADER + bench_row(10.5, 100.0) + bench_row(12.25, 150.5))
    (a / "benchmarks" / "train__tiny_1.tsv").write_text(HEADER + bench_row(7.0, "NA"))
    (a / "benchmarks" / "eval.tsv").write_text(HEADER + bench_row(3.125, 42.0))
    # End times (mtimes) so that the jobs' intervals are fixed: [977.25, 1000], [1003, 1010],
    # [998.875, 1002] → union 24.75 + 7 = 31.75 s, first start to last end 32.75 s.
    for name, end in (("train__tiny_0.tsv", 1000.0), ("train__tiny_1.tsv", 1010.0), ("eval.tsv", 1002.0)):
        os.utime(a / "benchmarks" / name, (end, end))
    b = write_paper(tmp_path, "paper_b", [claim("B1", "reproduced", measured=3, kind="sanity")])
    (b / "benchmarks" / "plot__tiny.tsv").write_text(HEADER + bench_row("NA", "NA"))
    return tmp_path, a, b


def run_cli(tmp_path, paper_dirs, capsys):
    out = tmp_path / "reports" / "tiny" / "index.html"
    rc = main(["--scale", "tiny", "--papers", *map(str, paper_dirs), "--out", str(out)])
    return rc, out, capsys.readouterr()


def test_report_contents(papers, capsys):
    tmp_path, a, b = papers
    rc, out, cap = run_cli(tmp_path, [a, b], capsys)
    assert rc == 0, cap.err
    html = out.read_text()
    assert html.splitlines()[0].startswith("<!-- Generated by icml26-repro: python -m "
                                          "methods.core.report --scale tiny --papers")
    t = parse(html)

    # Summary per kind (headline: reproduced / checkable, not reproduced, inconclusive; mechanism:
    # reproduced / checkable, inconclusive; sanity: passed / checkable), not checked, and the sum of
    # every benchmark row's wall time; then a totals row.
    # every benchmark row's wall time, the wall time with a job running (union of the jobs'
    # intervals); then a totals row. Papers by title, slug in brackets. After sanity: why the
    # headline and mechanism claims are inconclusive (guard failed, interval straddles, n < 3,
    # no interval).
    summary = {r[0]: r[1:] for r in t.tables["summary"][0][2:]}
    # paper_b's only benchmark row is all NA: a dash, not a made-up 0.
    assert summary == {"Title of paper_a (paper_a)": ["1 / 2", "1", "0", "0 / 1", "1", "0 / 0",
                                                      "0", "1", "0", "0", "1", "4", "32.88", "31.75"],
                       "Title of paper_b (paper_b)": ["0 / 0", "0", "0", "0 / 0", "0", "1 / 1",
                                                      "0", "0", "0", "0", "0", "1", "—", "—"],
                       "total (2 papers)": ["1 / 2", "1", "0", "0 / 1", "1", "1 / 1",
                                            "0", "1", "0", "0", "1", "5", "32.88", "31.75"]}
    assert "First job start to last job end:\n32.75 s." in html

    # Every claim, failing ones included, with its kind and verdict, headline first; values
    # formatted for humans, the interval next to the value, guards next to the check.
    claims_a, claims_b = t.tables["claims"]
    assert [r[0] for r in claims_a[1:]] == ["A1", "A2", "A4", "A3"]
    rows = {r[0]: r for r in claims_a[1:]}
    assert rows["A1"][1] == "headline" and rows["A1"][4] == "0.1235" and rows["A1"][7] == "reproduced"
    assert rows["A2"][4] == "no" and rows["A2"][7] == "not_reproduced"
    assert rows["A3"][1] == "sanity" and rows["A3"][4] == "—" and rows["A3"][7] == "not_checked"
    assert rows["A3"][8] == "needs <b>full</b> scale"  # shown as text, not markup
    assert rows["A4"][4] == "0.1 [-0.05, 0.25] 95%, n=3" and rows["A4"][5] == "≥ 0.05; if base ≥ 0.2"
    # the evidence: unit and n per level, the look, why undecided, the seeds that would decide it
    # (job time per seed: paper_a's 32.875 s of jobs over the 3 seeds A4 rests on; 6 more seeds)
    assert rows["A4"][6] == ("3 seeds × 192 items; look 2; interval straddles; ≈ 9 seeds would decide it, "
                             "≈ 66 s more job time")
    assert rows["A4"][7] == "inconclusive" and rows["A1"][6] == "—"
    assert [r[0] for r in claims_b[1:]] == ["B1"] and claims_b[1][4] == "3"
    assert ("badge not_reproduced", "not_reproduced") in t.spans
    assert ("badge inconclusive", "inconclusive") in t.spans
    assert len(t.spans) == 5

    # Per-rule run times, computed by hand from the TSVs above.
    runtimes = {r[0]: r[1:] for r in t.tables["runtimes"][0][1:]}
    assert runtimes == {"eval": ["1", "3.12", "3.12", "42.0"],
                        "train": ["2", "29.75", "12.25", "150.5"]}
    assert t.tables["runtimes"][1][1:] == [["plot", "1", "—", "—", "—"]]

    # Figure: inline base64 that decodes to the very bytes written; caption escaped text.
    [img] = t.imgs
    prefix = "data:image/png;base64,"
    assert img["src"].startswith(prefix)
    assert base64.b64decode(img["src"][len(prefix):]) == PNG_1x1
    assert "Loss &lt;vs&gt; step" in html

    # Provenance, once: what the papers share; then seed and config hash per paper (without a
    # scale config: as the summary step recorded them).
    prov = {r[0]: r[1] for r in t.tables["provenance"][0]}
    assert prov["git sha"] == "abc123def (dirty: yes)" and prov["machine"] == "h"
    assert prov["numpy"] == "2.4.6" and prov["torch"] == "—"
    assert prov["results written (UTC)"] == "2026-01-01T00:00:00Z to 2026-01-01T00:00:00Z"
    assert t.tables["paper-provenance"][0][1:] == [
        ["paper_a", "seed=0", "cafef00d12345678", "2026-01-01T00:00:00Z"],
        ["paper_b", "seed=0", "cafef00d12345678", "2026-01-01T00:00:00Z"]]


def test_special_characters_escaped(papers, capsys):
    tmp_path, a, b = papers
    html = build_report("tiny", [a, b])
    assert "<script>" not in html and "<b>full</b>" not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more" in html
    assert 'src="http' not in html and "<link" not in html  # no external assets


def test_report_does_not_import_torch(papers):
    # A fresh interpreter: this test session may have torch loaded by other tests.
    tmp_path, a, b = papers
    code = ("import sys; from methods.core.report import build_report; "
            f"build_report('tiny', [{str(a)!r}, {str(b)!r}]); "
            "assert 'torch' not in sys.modules, 'torch was imported'")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("breakage", ["missing_claims", "corrupt_claims", "missing_dir",
                                      "malformed_claims", "wrong_scale", "corrupt_tsv", "no_kind",
                                      "unknown_verdict"])
def test_bad_input_exits_2_without_output(papers, capsys, breakage):
    tmp_path, a, b = papers
    target = b
    if breakage == "missing_claims":
        (b / "claims.json").unlink()
    elif breakage == "corrupt_claims":
        (b / "claims.json").write_text('{"paper": "paper_b", "claims": [')
    elif breakage == "missing_dir":
        target = tmp_path / "results" / "tiny" / "nope"
    elif breakage == "malformed_claims":
        (b / "claims.json").write_text('{"paper": "paper_b", "claims": 3}')
    elif breakage == "wrong_scale":
        target = write_paper(tmp_path, "paper_c", [claim("C1", "reproduced")], scale="full")
    elif breakage == "corrupt_tsv":
        (b / "benchmarks" / "x.tsv").write_text(HEADER + "ten\t0\t1\t1\t1\t1\t0\t0\t0\t1\n")
    elif breakage == "no_kind":  # a claims.json from before claim kinds: rerun its claims step
        target = write_paper(tmp_path, "paper_c", [{k: v for k, v in claim("C1", "reproduced").items() if k != "kind"}])
    elif breakage == "unknown_verdict":
        target = write_paper(tmp_path, "paper_c", [claim("C1", "passed")])
    rc, out, cap = run_cli(tmp_path, [a, target], capsys)
    assert rc == 2
    lines = cap.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("report: error: "), cap.err
    assert not out.exists()
    assert not (tmp_path / "reports").exists()  # not even a temporary file or directory


def test_fmt_value_and_rule_of():
    assert fmt_value(None) == "—" and fmt_value(True) == "yes" and fmt_value(False) == "no"
    assert fmt_value(1234.5678) == "1235" and fmt_value(0.000123456) == "0.0001235"
    assert fmt_value(7) == "7"
    assert rule_of(Path("train__tiny_0_seed1.tsv")) == "train"
    assert rule_of(Path("make_report.tsv")) == "make_report"


def test_per_seed_benchmarks_are_counted(tmp_path):
    """A paper that runs its pipeline once per seed (`seed<s>/benchmarks/`) has every job's time in
    the run-time table, and equal file names in two seed directories are two jobs."""
    d = write_paper(tmp_path, "paper_s", [claim("S1", "reproduced")])
    for seed, secs in ((0, 2.5), (1, 4.0)):
        (d / f"seed{seed}" / "benchmarks").mkdir(parents=True)
        (d / f"seed{seed}" / "benchmarks" / "train.tsv").write_text(HEADER + bench_row(secs, 10.0))
    (d / "benchmarks" / "aggregate.tsv").write_text(HEADER + bench_row(1.0, 5.0))
    paper = report.load_paper("tiny", d)
    assert paper["runtimes"] == [
        {"rule": "aggregate", "jobs": 1, "total_s": "1.00", "max_s": "1.00", "max_rss_mb": "5.0"},
        {"rule": "train", "jobs": 2, "total_s": "6.50", "max_s": "4.00", "max_rss_mb": "10.0"}]
    assert paper["wall_s"] == "7.50"
