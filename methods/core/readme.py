"""Results tables in the papers' READMEs, generated from the results, never typed by hand.

Each `methods/<slug>/README.md` holds one marker pair per scale it documents:

    <!-- claims:tiny -->
    (generated: the claims table of results/tiny/<slug>/claims.json)
    <!-- /claims:tiny -->

`python -m methods.core readme --scale tiny` rewrites every block whose paper has results;
`--check` rewrites nothing and fails, naming the READMEs, when a block differs from what the
current results give (or when a filled block lists other claims than claims.yaml). A paper
without results keeps a block that says how to produce them. No torch here.
"""
from __future__ import annotations

import re
from pathlib import Path

from .claims import KINDS, load_claims
from .report import fmt_evidence, fmt_measured, fmt_value
from .results import InputError, read_json, write_text


def markers(scale: str) -> tuple[str, str]:
    return f"<!-- claims:{scale} -->", f"<!-- /claims:{scale} -->"


def _cell(x) -> str:
    return " ".join(str(x).split()).replace("|", "\\|")


def render_block(scale: str, slug: str, claims_json: Path) -> str:
    """The markdown between the markers, from one claims.json (or the how-to line without one)."""
    if not claims_json.is_file():
        return (f"Not generated yet: run `make reproduce SCALE={scale}` (it fills this table from "
                f"`results/{scale}/{slug}/claims.json`).")
    data = read_json(claims_json)
    if not isinstance(data, dict) or data.get("scale") != scale or not isinstance(data.get("claims"), list):
        raise InputError(f"malformed claims file {claims_json}: expected the {scale} claims of {slug}")
    prov = data.get("provenance") or {}
    rows = sorted(data["claims"], key=lambda c: KINDS.index(c.get("kind", "sanity")))
    lines = [f"Generated from `results/{scale}/{slug}/claims.json` (git {(prov.get('git_sha') or '?')[:12]}"
             f"{', dirty' if prov.get('git_dirty') else ''}, run {prov.get('time_utc') or '?'}) by "
             f"`python -m methods.core readme --scale {scale}`; do not edit by hand.", "",
             "| id | kind | claim | paper | ours | check | evidence | verdict | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in rows:
        check = (c.get("check") or "—") + "".join(f"; if {g}" for g in c.get("guards") or [])
        lines.append("| " + " | ".join(_cell(x) for x in (
            c.get("id"), c.get("kind"), c.get("statement", ""), fmt_value(c.get("paper_value")),
            fmt_measured(c.get("measured"), c.get("interval")), check, fmt_evidence(c), c.get("verdict"),
            c.get("note") or "")) + " |")
    return "\n".join(lines)


def _span(text: str, scale: str, path: Path) -> tuple[int, int] | None:
    begin, end = markers(scale)
    nb, ne = text.count(begin), text.count(end)
    if nb == ne == 0:
        return None
    if nb != 1 or ne != 1 or text.index(begin) > text.index(end):
        raise InputError(f"{path}: needs exactly one '{begin}' followed by one '{end}'")
    return text.index(begin) + len(begin), text.index(end)


def block_ids(block: str) -> list[tuple[str, str]]:
    """(id, kind) of every row of a generated table."""
    return [(m.group(1).strip(), m.group(2).strip())
            for m in re.finditer(r"^\| ([^|]+) \| (headline|mechanism|sanity) \|", block, re.M)]


def update(root: Path, results: Path, scale: str, slugs: list[str], check: bool) -> list[str]:
    """Rewrite (or, with check, compare) each paper's block; returns the stale READMEs."""
    stale = []
    for slug in slugs:
        path = root / "methods" / slug / "README.md"
        if not path.is_file():
            raise InputError(f"missing README: {path}")
        text = path.read_text()
        span = _span(text, scale, path)
        if span is None:
            continue
        claims_json = results / scale / slug / "claims.json"
        block = "\n" + render_block(scale, slug, claims_json) + "\n"
        old = text[span[0]:span[1]]
        expected = [(c["id"], c["kind"]) for c in load_claims(root / "methods" / slug / "claims.yaml")["claims"]]
        have = block_ids(old)
        if old != block or (have and sorted(have) != sorted(expected)):
            stale.append(str(path))
            if not check:
                write_text(path, text[:span[0]] + block + text[span[1]:])
    return stale


def main(a) -> int:
    from .registry import papers

    root = Path(a.root)
    slugs = a.papers or papers(root)
    stale = update(root, Path(a.results), a.scale, slugs, a.check)
    if a.check and stale:
        raise InputError(f"README results out of date with results/{a.scale} (run "
                         f"`python -m methods.core readme --scale {a.scale}`): {', '.join(stale)}")
    return 0
