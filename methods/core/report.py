"""Build the self-contained HTML report `reports/<scale>/index.html` from per-paper results.

    python -m methods.core.report --scale tiny \
        --papers results/tiny/wd_plasticity [results/tiny/other ...] --out reports/tiny/index.html

Each paper directory holds `claims.json`, `figures/*.png` (+ optional `<stem>.caption.txt`)
and Snakemake `benchmarks/*.tsv`. The report shows every claim, failing ones included, so a
reader sees what did not reproduce as prominently as what did. Figures are inlined as base64
so the single file can be mailed or archived without its results tree.

No torch here: the report must build on a machine that only has the results.
"""
from __future__ import annotations

import argparse
import base64
import math
import shlex
import sys
import time
from pathlib import Path

import jinja2
import pandas as pd

from .claims import KINDS, VERDICTS
from .results import InputError, read_json, write_text

PROG = "report"
DASH = "\u2014"
DECIDED = ("reproduced", "not_reproduced", "inconclusive")  # checkable: a check ran on a measurement


def fmt_value(v) -> str:
    """A claim's number for humans: 4 significant digits, yes/no for bools, a dash for null."""
    if v is None:
        return DASH
    if isinstance(v, bool):  # before the number branch: bool is an int subclass
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def fmt_measured(v, interval) -> str:
    """The measured value, with its interval when the analysis gave one."""
    text = fmt_value(v)
    if isinstance(interval, dict) and "lo" in interval and "hi" in interval:
        level = interval.get("level")
        tag = f" {level:.0%}" if isinstance(level, (int, float)) else ""
        text += f" [{fmt_value(float(interval['lo']))}, {fmt_value(float(interval['hi']))}]{tag}"
        if interval.get("n"):
            text += f", n={interval['n']}"
    return text


def tally(claims: list[dict]) -> dict:
    """Counts for the summary, from the claims themselves so it can never disagree with the table:
    per kind, reproduced / checkable (checkable = a check ran on a measurement) and each verdict."""
    out = {}
    for kind in KINDS:
        rows = [c for c in claims if c["kind"] == kind]
        out[kind] = {v: sum(c["verdict"] == v for c in rows) for v in VERDICTS}
        out[kind]["checkable"] = sum(c["verdict"] in DECIDED for c in rows)
        out[kind]["total"] = len(rows)
    out["all"] = {v: sum(c["verdict"] == v for c in claims) for v in VERDICTS}
    out["all"]["total"] = len(claims)
    return out


def totals(tallies: list[dict]) -> dict:
    """The totals row: every count summed over papers."""
    out = {}
    for t in tallies:
        for group, counts in t.items():
            for k, n in counts.items():
                out.setdefault(group, {}).setdefault(k, 0)
                out[group][k] += n
    return out or tally([])


def _fmt_num(x: float, spec: str) -> str:
    return DASH if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def rule_of(tsv: Path) -> str:
    """`<rule>__<wildcards>.tsv` -> rule; a stem without `__` is the rule itself."""
    return tsv.stem.split("__", 1)[0]


def read_benchmarks(paper_dir: Path) -> pd.DataFrame:
    """All benchmark rows of one paper (`benchmarks/*.tsv`, also in per-seed subdirectories such as
    `seed1/benchmarks/`), with `rule` and `file` (path relative to the paper) columns added."""
    frames = []
    for tsv in sorted(paper_dir.glob("**/benchmarks/*.tsv")):
        try:
            df = pd.read_csv(tsv, sep="\t", na_values=["NA"])
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
            raise InputError(f"corrupt benchmark file {tsv}: {e}") from None
        if "s" not in df.columns:
            raise InputError(f"corrupt benchmark file {tsv}: no 's' column")
        try:  # a non-numeric time would silently vanish from the sums if coerced
            df["s"] = pd.to_numeric(df["s"])
            df["max_rss"] = pd.to_numeric(df["max_rss"]) if "max_rss" in df else math.nan
        except (ValueError, TypeError) as e:
            raise InputError(f"corrupt benchmark file {tsv}: {e}") from None
        df["rule"], df["file"] = rule_of(tsv), str(tsv.relative_to(paper_dir))
        frames.append(df[["rule", "file", "s", "max_rss"]])
    if not frames:
        return pd.DataFrame(columns=["rule", "file", "s", "max_rss"])
    return pd.concat(frames, ignore_index=True)


def runtime_table(bench: pd.DataFrame) -> list[dict]:
    """Per rule: jobs (= benchmark files; repeat() adds rows, not jobs), total/max s, max RSS.

    Snakemake writes max_rss in MB already, so it is reported as is.
    """
    if bench.empty:
        return []
    # min_count=1: a rule whose times are all NA shows a dash, not a made-up 0.
    g = bench.groupby("rule", sort=True)
    agg = pd.DataFrame({"jobs": g["file"].nunique(), "total_s": g["s"].sum(min_count=1),
                        "max_s": g["s"].max(), "max_rss": g["max_rss"].max()})
    return [{"rule": rule, "jobs": int(r.jobs), "total_s": _fmt_num(r.total_s, ".2f"),
             "max_s": _fmt_num(r.max_s, ".2f"), "max_rss_mb": _fmt_num(r.max_rss, ".1f")}
            for rule, r in agg.iterrows()]


def read_figures(fig_dir: Path) -> list[dict]:
    figs = []
    for png in sorted(fig_dir.glob("*.png")):
        cap = png.with_name(png.stem + ".caption.txt")
        caption = cap.read_text(errors="replace").strip() if cap.is_file() else ""
        figs.append({"name": png.name, "caption": caption,
                     "b64": base64.b64encode(png.read_bytes()).decode("ascii")})
    return figs


def load_paper(scale: str, paper_dir: Path) -> dict:
    """Everything the template needs for one paper; InputError on anything malformed."""
    paper_dir = Path(paper_dir)
    if not paper_dir.is_dir():
        raise InputError(f"missing paper directory: {paper_dir}")
    data = read_json(paper_dir / "claims.json")
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list) \
            or not all(isinstance(c, dict) for c in data["claims"]):
        raise InputError(f"malformed claims file {paper_dir / 'claims.json'}: "
                         "expected an object with a list of claim objects under 'claims'")
    # A full-scale number inside a tiny report would be read as a tiny result.
    if data.get("scale") not in (None, scale):
        raise InputError(f"{paper_dir / 'claims.json'} is for scale {data['scale']!r}, "
                         f"not {scale!r}")
    claims = []
    for c in data["claims"]:
        if c.get("kind") not in KINDS or c.get("verdict") not in VERDICTS:
            raise InputError(f"malformed claims file {paper_dir / 'claims.json'}: claim {c.get('id')!r} "
                             f"needs kind in {list(KINDS)} and verdict in {list(VERDICTS)} "
                             "(rerun its claims step)")
        guards = c.get("guards") or []
        claims.append({"id": str(c.get("id", DASH)), "kind": c["kind"], "statement": c.get("statement") or "",
                       "paper_value": fmt_value(c.get("paper_value")),
                       "source": c.get("source") or "",
                       "measured": fmt_measured(c.get("measured"), c.get("interval")),
                       "check": (c.get("check") or DASH) + ("".join(f"; if {g}" for g in guards)),
                       "verdict": c["verdict"],
                       "note": c.get("note") or ""})
    # headline claims first, then mechanism, then sanity; yaml order within a kind
    claims.sort(key=lambda c: KINDS.index(c["kind"]))
    counts = tally(claims)
    bench = read_benchmarks(paper_dir)
    prov = data.get("provenance") if isinstance(data.get("provenance"), dict) else {}
    packages = prov.get("packages") if isinstance(prov.get("packages"), dict) else {}
    slug = str(data.get("paper") or paper_dir.name)
    wall_s = float(bench["s"].sum(min_count=1)) if not bench.empty else None
    return {"slug": slug, "title": data.get("title") or slug, "claims": claims,
            "counts": counts, "wall_s": _fmt_num(wall_s, ".2f"),
            "runtimes": runtime_table(bench), "figures": read_figures(paper_dir / "figures"),
            "prov": {"git_sha": prov.get("git_sha") or DASH,
                     "git_dirty": fmt_value(prov.get("git_dirty")),
                     "config_hash": prov.get("config_hash") or DASH,
                     "python": prov.get("python") or DASH,
                     "seed": fmt_value(prov.get("seed")),
                     "time_utc": prov.get("time_utc") or DASH,
                     "packages": sorted((k, v or DASH) for k, v in packages.items())}}


TEMPLATE = """\
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>icml26-repro report ({{ scale }})</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { border-radius: 0.3em; padding: 0.1em 0.4em; color: #fff; white-space: nowrap; }
.reproduced { background: #2e7d32; } .not_reproduced { background: #c62828; }
.not_checked { background: #757575; } .inconclusive { background: #b26a00; }
tr.totals td { border-top: 2px solid #333; }
figure { display: inline-block; margin: 0 1em 1em 0; } img { max-width: 32em; }
</style></head><body>
<h1>icml26-repro: reproduction report</h1>
<p>Scale: <b id="scale">{{ scale }}</b>. Generated <span id="generated">{{ generated }}</span>.</p>
<h2>Summary</h2>
<p>Headline: the paper's result, measured. Mechanism: a measured intermediate effect the paper
reports. Sanity: holds by construction (closed form, simulator, format arithmetic), not a
reproduction. "r / c": reproduced of checkable (a check ran on a measurement); inconclusive means
a guard failed or the interval straddles the threshold.</p>
<table id="summary">
<tr><th rowspan="2">paper</th><th colspan="3">headline</th><th colspan="2">mechanism</th>
<th>sanity</th><th rowspan="2">not checked</th><th rowspan="2">total job wall time (s)</th></tr>
<tr><th>reproduced / checkable</th><th>not reproduced</th><th>inconclusive</th>
<th>reproduced / checkable</th><th>inconclusive</th><th>passed / checkable</th></tr>
{% for row in summary %}<tr{% if row.total %} class="totals"{% endif %}><td>{% if row.total %}<b>total</b>{% else %}<a href="#{{ row.slug }}">{{ row.slug }}</a>{% endif %}</td>
<td class="num">{{ row.c.headline.reproduced }} / {{ row.c.headline.checkable }}</td>
<td class="num">{{ row.c.headline.not_reproduced }}</td><td class="num">{{ row.c.headline.inconclusive }}</td>
<td class="num">{{ row.c.mechanism.reproduced }} / {{ row.c.mechanism.checkable }}</td>
<td class="num">{{ row.c.mechanism.inconclusive }}</td>
<td class="num">{{ row.c.sanity.reproduced }} / {{ row.c.sanity.checkable }}</td>
<td class="num">{{ row.c.all.not_checked }}</td><td class="num">{{ row.wall_s }}</td></tr>
{% endfor %}</table>
{% for p in papers %}<section id="{{ p.slug }}">
<h2>{{ p.title }} <small>({{ p.slug }})</small></h2>
<h3>Claims</h3>
<table class="claims">
<tr><th>id</th><th>kind</th><th>statement</th><th>paper</th><th>ours</th><th>check</th><th>verdict</th>
<th>note</th></tr>
{% for c in p.claims %}<tr><td>{{ c.id }}</td><td>{{ c.kind }}</td><td>{{ c.statement }}</td>
<td class="num" title="{{ c.source }}">{{ c.paper_value }}</td><td class="num">{{ c.measured }}</td>
<td>{{ c.check }}</td><td><span class="badge {{ c.verdict }}">{{ c.verdict }}</span></td>
<td>{{ c.note }}</td></tr>
{% endfor %}</table>
<h3>Figures</h3>
{% for f in p.figures %}<figure><img alt="{{ f.name }}" src="data:image/png;base64,{{ f.b64 }}">
<figcaption>{{ f.caption or f.name }}</figcaption></figure>
{% else %}<p>No figures.</p>
{% endfor %}
<h3>Run times</h3>
{% if p.runtimes %}<table class="runtimes">
<tr><th>rule</th><th>jobs</th><th>total s</th><th>max s</th><th>max RSS MB</th></tr>
{% for r in p.runtimes %}<tr><td>{{ r.rule }}</td><td class="num">{{ r.jobs }}</td>
<td class="num">{{ r.total_s }}</td><td class="num">{{ r.max_s }}</td>
<td class="num">{{ r.max_rss_mb }}</td></tr>
{% endfor %}</table>{% else %}<p>No benchmark files.</p>{% endif %}
<h3>Provenance</h3>
<table class="provenance">
<tr><th>git sha</th><td>{{ p.prov.git_sha }} (dirty: {{ p.prov.git_dirty }})</td></tr>
<tr><th>config hash</th><td>{{ p.prov.config_hash }}</td></tr>
<tr><th>seed</th><td>{{ p.prov.seed }}</td></tr>
<tr><th>python</th><td>{{ p.prov.python }}</td></tr>
<tr><th>run at (UTC)</th><td>{{ p.prov.time_utc }}</td></tr>
{% for name, version in p.prov.packages %}<tr><th>{{ name }}</th><td>{{ version }}</td></tr>
{% endfor %}</table>
</section>
{% endfor %}</body></html>
"""

_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)


def build_report(scale: str, paper_dirs: list[Path], command: str | None = None) -> str:
    """Return the report HTML. `command` goes into the first-line comment (default: argv)."""
    papers = [load_paper(scale, Path(d)) for d in paper_dirs]
    summary = [{"slug": p["slug"], "c": p["counts"], "wall_s": p["wall_s"], "total": False} for p in papers]
    summary.append({"slug": "total", "c": totals([p["counts"] for p in papers]),
                    "wall_s": _fmt_num(sum(float(p["wall_s"]) for p in papers if p["wall_s"] != DASH)
                                       if any(p["wall_s"] != DASH for p in papers) else None, ".2f"),
                    "total": True})
    if command is None:
        command = shlex.join(["python", "-m", "methods.core.report", *sys.argv[1:]])
    # Inside a comment "<" and ">" could end it early (a path containing "-->").
    command = command.replace("<", "&lt;").replace(">", "&gt;")
    html = _ENV.from_string(TEMPLATE).render(
        scale=scale, papers=papers, summary=summary,
        generated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    return f"<!-- Generated by icml26-repro: {command} -->\n{html}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", required=True)
    parser.add_argument("--papers", required=True, nargs="+", type=Path, metavar="DIR")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "methods.core.report",
                          *(sys.argv[1:] if argv is None else argv)])
    try:
        html = build_report(args.scale, args.papers, command=command)
    except InputError as e:
        msg = " ".join(str(e).split())  # one line, whatever the exception text holds
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 2
    write_text(args.out, html)  # atomic: the report exists complete or not at all
    return 0


if __name__ == "__main__":
    sys.exit(main())
