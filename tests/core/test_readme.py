"""methods/core/readme.py: the papers' README results tables come from claims.json, are rewritten
only between their markers, and a stale table is caught."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from methods.core import readme as R
from methods.core.claims import load_claims
from methods.core.registry import papers
from methods.core.results import InputError

REPO = Path(__file__).resolve().parents[2]


def make_repo(tmp_path: Path, block: str = "\n") -> Path:
    d = tmp_path / "repo" / "methods" / "p"
    d.mkdir(parents=True)
    (d / "claims.yaml").write_text(yaml.safe_dump({"paper": "p", "claims": [
        {"id": "C1", "kind": "headline", "statement": "s", "paper_value": 1, "source": "x", "metric": "a",
         "statistic": "mean", "checks": None, "replicates": "seed"},
        {"id": "S1", "kind": "sanity", "statement": "s", "paper_value": 1, "source": "x", "metric": "b",
         "statistic": "mean", "checks": None}]}))
    (d / "README.md").write_text(f"# P\n\nIntro.\n\n<!-- claims:tiny -->{block}<!-- /claims:tiny -->\n\nOutro.\n")
    return tmp_path / "repo"


def write_results(tmp_path: Path, rows: list[dict]) -> Path:
    d = tmp_path / "results" / "tiny" / "p"
    d.mkdir(parents=True, exist_ok=True)
    (d / "claims.json").write_text(json.dumps({"paper": "p", "scale": "tiny", "claims": rows, "provenance": {
        "git_sha": "abc1234", "git_dirty": False, "time_utc": "2026-12-01T00:00:00Z"}}))
    return tmp_path / "results"


def row(cid, kind, measured, verdict, **extra):
    return {"id": cid, "kind": kind, "statement": "a | b", "paper_value": 0.5, "measured": measured,
            "check": "≥ 0", "verdict": verdict, "note": "", **extra}


def test_update_fills_only_between_markers_then_check_passes(tmp_path):
    repo = make_repo(tmp_path)
    results = write_results(tmp_path, [
        row("S1", "sanity", True, "reproduced"),
        row("C1", "headline", 0.123456, "inconclusive", guards=["base ≥ 0.2"],
            interval={"lo": -0.1, "hi": 0.3, "level": 0.95, "n": 3}, note="guard failed"),
    ])
    assert R.update(repo, results, "tiny", ["p"], check=True) == [str(repo / "methods/p/README.md")]
    R.update(repo, results, "tiny", ["p"], check=False)
    text = (repo / "methods/p/README.md").read_text()
    assert text.startswith("# P\n\nIntro.\n\n<!-- claims:tiny -->\n") and text.endswith("<!-- /claims:tiny -->\n\nOutro.\n")
    lines = text.splitlines()
    # headline first, pipes escaped, the interval next to the value, guards next to the check
    assert "| C1 | headline | a \\| b | 0.5 | 0.1235 [-0.1, 0.3] 95%, n=3 | ≥ 0; if base ≥ 0.2 | — | inconclusive | guard failed |" in lines
    assert lines.index(next(x for x in lines if x.startswith("| C1"))) < lines.index(next(x for x in lines if x.startswith("| S1")))
    assert "git abc1234" in text
    assert R.block_ids(text) == [("C1", "headline"), ("S1", "sanity")]
    assert R.update(repo, results, "tiny", ["p"], check=True) == []     # idempotent


def test_check_catches_changed_results_and_changed_claims(tmp_path):
    repo = make_repo(tmp_path)
    results = write_results(tmp_path, [row("C1", "headline", 0.2, "reproduced"), row("S1", "sanity", 1, "reproduced")])
    R.update(repo, results, "tiny", ["p"], check=False)
    write_results(tmp_path, [row("C1", "headline", 0.1, "reproduced"), row("S1", "sanity", 1, "reproduced")])
    assert R.update(repo, results, "tiny", ["p"], check=True)           # a number changed
    R.update(repo, results, "tiny", ["p"], check=False)
    spec = yaml.safe_load((repo / "methods/p/claims.yaml").read_text())
    spec["claims"][1].update(kind="mechanism", replicates="item")      # reclassified, table not rerun
    (repo / "methods/p/claims.yaml").write_text(yaml.safe_dump(spec))
    assert R.update(repo, results, "tiny", ["p"], check=True)


def test_without_results_the_block_says_how_to_make_them(tmp_path):
    repo = make_repo(tmp_path)
    R.update(repo, tmp_path / "none", "tiny", ["p"], check=False)
    assert "Not generated yet: run `make reproduce SCALE=tiny`" in (repo / "methods/p/README.md").read_text()


@pytest.mark.parametrize("readme", ["<!-- claims:tiny -->\n<!-- claims:tiny -->\n<!-- /claims:tiny -->\n",
                                    "<!-- /claims:tiny -->\n<!-- claims:tiny -->\n",
                                    "<!-- claims:tiny -->\n"])
def test_broken_markers_are_input_errors(tmp_path, readme):
    repo = make_repo(tmp_path)
    (repo / "methods/p/README.md").write_text(readme)
    with pytest.raises(InputError, match="needs exactly one"):
        R.update(repo, tmp_path / "none", "tiny", ["p"], check=True)


def test_every_paper_readme_has_one_tiny_table_matching_its_claims():
    """Every registered paper documents its tiny results only through the generated table, and a
    filled table lists exactly the claims (id, kind) of its claims.yaml."""
    for slug in papers(REPO):
        path = REPO / "methods" / slug / "README.md"
        text = path.read_text()
        begin, end = R.markers("tiny")
        assert text.count(begin) == 1 and text.count(end) == 1, f"{path}: no generated tiny results table"
        block = text[text.index(begin):text.index(end)]
        have = R.block_ids(block)
        if have:
            want = [(c["id"], c["kind"]) for c in load_claims(REPO / "methods" / slug / "claims.yaml")["claims"]]
            assert sorted(have) == sorted(want), f"{path}: stale results table (rerun make readme-numbers)"


def _num(cell: str) -> float:
    return float(cell.replace("−", "-").replace(",", ""))


def evidence_gaps(block: str, claims: dict) -> list[str]:
    """Decided headline/mechanism rows of a generated table that rest on less than the evidence
    rules allow: no interval, a zero-width one, fewer than 3 outer replicates, or an interval that
    touches or crosses the threshold (a tie)."""
    out = []
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) != 9 or cells[1] not in ("headline", "mechanism") or \
                cells[7] not in ("reproduced", "not_reproduced"):
            continue
        cid, ours, evidence = cells[0], cells[4], cells[6]
        iv = re.search(r"\[(\S+), (\S+)\]", ours)
        n = re.match(r"(\d+) (seed|item)s", evidence)
        if iv is None or n is None:
            out.append(f"{cid}: no interval over counted replicates ({ours!r}, {evidence!r})")
            continue
        lo, hi = _num(iv.group(1)), _num(iv.group(2))
        if int(n.group(1)) < 3 or n.group(2) != claims[cid]["replicates"] or lo == hi:
            out.append(f"{cid}: n = {n.group(1)} {n.group(2)}s, interval [{lo}, {hi}]")
            continue
        chk = claims[cid]["checks"]["tiny"]
        if chk["op"] == "is":
            continue  # an exact interval of the rate at which the boolean holds, against 1/2
        v = chk["value"]
        above, below = lo >= v, hi <= v   # shown to 4 significant digits: touching is allowed here
        if not (above or below) or (cells[7] == "reproduced") != (above == (chk["op"] in (">", ">="))):
            out.append(f"{cid}: interval [{lo}, {hi}] against {chk['op']} {v}")
    return out


def test_scan_finds_each_kind_of_weak_evidence():
    claims = {c: {"replicates": "seed", "checks": {"tiny": {"op": ">", "value": 0.0}}} for c in "ABCDEF"}
    rows = ["| A | headline | s | 1 | 0.2 | > 0 | — | reproduced | |",                       # no interval
            "| B | headline | s | 1 | 0 [0, 0] 95%, n=3 | > 0 | 3 seeds | reproduced | |",     # zero width
            "| C | headline | s | 1 | 0.2 [0.1, 0.3] 95%, n=2 | > 0 | 2 seeds | reproduced | |",  # n < 3
            "| D | headline | s | 1 | 0.2 [-0.1, 0.3] 95%, n=3 | > 0 | 3 seeds | reproduced | |",  # straddles
            "| E | mechanism | s | 1 | 0.2 [0.1, 0.3] 95%, n=400 | > 0 | 400 items | reproduced | |",  # unit
            "| F | headline | s | 1 | 0.2 [0.1, 0.3] 95%, n=3 | > 0 | 3 seeds | reproduced | |"]    # fine
    assert [g[0] for g in evidence_gaps("\n".join(rows), claims)] == list("ABCDE")


def test_committed_readme_tables_decide_only_on_enough_evidence():
    """No decided headline or mechanism verdict in a committed tiny table rests on fewer than 3
    outer replicates, a zero-width interval, no interval, or a tie at the threshold."""
    gaps = []
    for slug in papers(REPO):
        text = (REPO / "methods" / slug / "README.md").read_text()
        begin, end = R.markers("tiny")
        claims = {c["id"]: c for c in load_claims(REPO / "methods" / slug / "claims.yaml")["claims"]}
        gaps += [f"{slug} {g}" for g in evidence_gaps(text[text.index(begin):text.index(end)], claims)]
    assert not gaps, "\n".join(gaps)
