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
import ast
import base64
import json
import math
import re
import shlex
import sys
import time
from pathlib import Path

import jinja2
import pandas as pd
import yaml
from markupsafe import Markup

from .claims import KINDS, MEASURED_KINDS, UNDECIDED, VERDICTS
from .results import InputError, config_hash, read_json, write_text

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
        tag = f" {100 * level:.3g}%" if isinstance(level, (int, float)) else ""
        text += f" [{fmt_value(float(interval['lo']))}, {fmt_value(float(interval['hi']))}]{tag}"
        if interval.get("n"):
            text += f", n={interval['n']}"
    return text


def fmt_evidence(c: dict, seed_cost_s: float | None = None) -> str:
    """What a claim's verdict rests on: the replication unit and n per level, the look, and for
    an undecided claim why (and the seeds its observed spread would need, with their CPU time at
    `seed_cost_s`, the paper's measured job time per seed)."""
    parts = []
    unit = c.get("replicates")
    if c.get("n") is not None and unit:
        inner = f" × {c['n_inner']} items" if c.get("n_inner") else ""
        parts.append(f"{c['n']} {unit}s{inner}")
    elif unit:
        parts.append(f"per {unit}")
    look = c.get("look")
    if isinstance(look, int):
        parts.append(f"look {look + 1}")
    if c.get("verdict") == "inconclusive" and c.get("undecided_by"):
        parts.append(c["undecided_by"])
    if c.get("seeds_needed"):
        more = c["seeds_needed"] - (c.get("n") or 0)
        cost = f", ≈ {more * seed_cost_s:,.0f} s more job time" if seed_cost_s and more > 0 else ""
        parts.append(f"≈ {c['seeds_needed']} seeds would decide it{cost}")
    return "; ".join(parts) if parts else DASH


_LONG_FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d{5,}(?:[eE][+-]?\d+)?(?![\w.])")
_DICT = re.compile(r"\{[^{}]*\}")


def _fmt_item(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fmt_item(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt_item(x) for x in v) + "]"
    return fmt_value(v)


def fmt_note(text: str) -> str:
    """A claim note for humans: a Python/JSON dict literal inside it becomes `k=v, ...`, and a
    float written with 5 or more decimals is cut to 4 significant digits; the rest is kept."""
    def as_pairs(m):
        try:
            v = ast.literal_eval(m.group(0))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            try:  # JSON: null, true, false
                v = json.loads(m.group(0))
            except ValueError:
                return m.group(0)
        return _fmt_item(v) if isinstance(v, dict) and v else m.group(0)

    text = _DICT.sub(as_pairs, str(text))
    return _LONG_FLOAT.sub(lambda m: f"{float(m.group(0)):.4g}", text)


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
    # why headline and mechanism claims are inconclusive
    out["undecided"] = {u.replace(" ", "_").replace("<", "lt"): sum(
        c["kind"] in MEASURED_KINDS and c["verdict"] == "inconclusive" and c.get("undecided_by") == u
        for c in claims) for u in UNDECIDED}
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
        df["end"] = tsv.stat().st_mtime  # Snakemake writes the file when the job ends
        frames.append(df[["rule", "file", "s", "max_rss", "end"]])
    if not frames:
        return pd.DataFrame(columns=["rule", "file", "s", "max_rss", "end"])
    return pd.concat(frames, ignore_index=True)


def job_intervals(bench: pd.DataFrame) -> list[tuple[float, float]]:
    """(start, end) of every job, in epoch seconds: end = its benchmark file's mtime, start =
    end minus the job's time (the sum of its rows: repeat() runs them one after the other)."""
    if bench.empty:
        return []
    per = bench.groupby("file", sort=True).agg(s=("s", lambda x: x.sum(min_count=1)), end=("end", "max"))
    return [(float(r.end) - float(r.s), float(r.end)) for r in per.itertuples() if not math.isnan(r.s)]


def busy_wall_s(intervals: list[tuple[float, float]]) -> float | None:
    """Wall time during which at least one job ran: the length of the union of the intervals.
    For one uninterrupted `snakemake` run this is its elapsed time from the first job's start to
    the last job's end (never idle in between); jobs rerun in later sessions add only their own
    span, not the idle time between sessions."""
    if not intervals:
        return None
    total, cur_s, cur_e = 0.0, None, None
    for a, b in sorted(intervals):
        if cur_e is None or a > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = a, b
        else:
            cur_e = max(cur_e, b)
    return total + (cur_e - cur_s)


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


def figure_dir(paper_dir: Path, claims: dict) -> Path:
    """A paper's figures: `figures/` of its results, or of its final look's results for a paper
    whose seeds grew in looks (methods/core/sequential.py)."""
    look = claims.get("look")
    if isinstance(look, dict) and isinstance(look.get("index"), int):
        return paper_dir / "looks" / str(look["index"]) / "figures"
    return paper_dir / "figures"


def load_paper(scale: str, paper_dir: Path, scale_cfg: dict | None = None) -> dict:
    """Everything the template needs for one paper; InputError on anything malformed.
    `scale_cfg`: the scale's config (config/scales/<scale>.yaml); the paper's seeds and config
    hash come from its section there, else from the provenance its summary step recorded."""
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
    bench = read_benchmarks(paper_dir)
    wall_s = float(bench["s"].sum(min_count=1)) if not bench.empty else None
    # job time per seed: the paper's summed job time over the most seeds a claim rests on (an
    # upper bound: steps shared by all seeds are counted in it)
    seeds = max((c.get("n") or 0 for c in data["claims"] if c.get("replicates") == "seed"), default=0)
    seed_cost_s = wall_s / seeds if wall_s and seeds else None
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
                       "evidence": fmt_evidence(c, seed_cost_s), "undecided_by": c.get("undecided_by"),
                       "verdict": c["verdict"],
                       "note": fmt_note(c.get("note") or "")})
    # headline claims first, then mechanism, then sanity; yaml order within a kind
    claims.sort(key=lambda c: KINDS.index(c["kind"]))
    counts = tally(claims)
    prov = data.get("provenance") if isinstance(data.get("provenance"), dict) else {}
    packages = prov.get("packages") if isinstance(prov.get("packages"), dict) else {}
    slug = str(data.get("paper") or paper_dir.name)
    intervals = job_intervals(bench)
    section = (scale_cfg or {}).get(slug) if isinstance(scale_cfg, dict) else None
    if section is not None:  # the paper's section of config/scales/<scale>.yaml
        seeds, seed_keys, chash = seeds_of(section), all_seeds(section), config_hash(section)
    else:  # no scale config given: what the summary step recorded
        seed = prov.get("seed")
        seeds, seed_keys, chash = (DASH if seed is None else f"seed={seed}"), "", prov.get("config_hash") or DASH
    return {"slug": slug, "title": data.get("title") or slug, "claims": claims,
            "counts": counts, "wall_s": _fmt_num(wall_s, ".2f"), "intervals": intervals,
            "busy_s": _fmt_num(busy_wall_s(intervals), ".2f"),
            "runtimes": runtime_table(bench), "figures": read_figures(figure_dir(paper_dir, data)),
            "prov": {"git_sha": prov.get("git_sha") or DASH,
                     "git_dirty": fmt_value(prov.get("git_dirty")),
                     "config_hash": chash, "seeds": seeds, "seed_keys": seed_keys,
                     "python": prov.get("python") or DASH,
                     "host": prov.get("host") or DASH,
                     "time_utc": prov.get("time_utc") or DASH,
                     "packages": tuple(sorted((k, v or DASH) for k, v in packages.items()))}}


def _seed_items(node, path=()):
    """(dotted key, value) of every key that names a seed (`seed`, `seeds`, `*_seed`, `*_seeds`),
    shallowest first (stable), so that a section's own keys come before its subsections'."""
    level, deeper = [], []
    items = node.items() if isinstance(node, dict) else \
        ((v.get("name", i) if isinstance(v, dict) else i, v) for i, v in enumerate(node)) \
        if isinstance(node, list) else ()
    for k, v in items:
        key = path + (str(k),)
        if re.fullmatch(r"(\w+_)?seeds?", str(k)):
            level.append((".".join(key), v))
        elif isinstance(v, (dict, list)):
            deeper.append((key, v))
    for key, v in deeper:
        level.extend(_seed_items(v, key))
    return sorted(level, key=lambda kv: kv[0].count(".")) if not path else level


def seeds_of(section) -> str:
    """A paper's seeds as `k=v`: its replicate seeds (the first `seeds` list) and the seed of its
    data step (`data.seed`, else the first other seed key); "no seed in config" if none."""
    items = _seed_items(section)
    reps = next(((k, v) for k, v in items if k.split(".")[-1] == "seeds" and isinstance(v, list)), None)
    base = next(((k, v) for k, v in items if k == "data.seed"), None) or \
        next(((k, v) for k, v in items if re.fullmatch(r"(\w+_)?seed", k.split(".")[-1])), None)
    shown = [f"{kv[0]}={_fmt_item(kv[1])}" for kv in (reps, base) if kv is not None]
    return "; ".join(shown) if shown else "no seed in config"


def all_seeds(section) -> str:
    """Every seed key of a paper's section, `k=v`, for the tooltip."""
    return "; ".join(f"{k}={_fmt_item(v)}" for k, v in _seed_items(section))


def shared_provenance(papers: list[dict]) -> list[tuple[str, str]]:
    """The provenance every paper shares, once: (field, value); a field that differs lists each
    value with the papers it holds for, most common first."""
    def one(field, get):
        groups: dict = {}
        for p in papers:
            groups.setdefault(get(p), []).append(p["slug"])
        if len(groups) <= 1:
            return [(field, next(iter(groups), DASH))]
        ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), str(kv[0])))
        return [(field, "; ".join(f"{v} ({', '.join(ps)})" for v, ps in ordered))]

    times = sorted(p["prov"]["time_utc"] for p in papers if p["prov"]["time_utc"] != DASH)
    rows = one("git sha", lambda p: f"{p['prov']['git_sha']} (dirty: {p['prov']['git_dirty']})")
    rows.append(("results written (UTC)", f"{times[0]} to {times[-1]}" if times else DASH))
    rows += one("machine", lambda p: p["prov"]["host"])
    rows += one("python", lambda p: p["prov"]["python"])
    names = sorted({n for p in papers for n, _ in p["prov"]["packages"]})
    for n in names:
        rows += one(n, lambda p, n=n: dict(p["prov"]["packages"]).get(n, DASH))
    return rows


STYLE = """\
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; padding: 0 1em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
/* long metric names and hashes wrap instead of widening the page */
table.claims td, #provenance td, #paper-provenance td { overflow-wrap: anywhere; }
table.claims td:nth-child(-n+2) { overflow-wrap: normal; white-space: nowrap; }  /* id, kind */
td.num { text-align: right; font-variant-numeric: tabular-nums; }
#summary td.num, table.runtimes td.num { white-space: nowrap; }
#summary { font-size: 0.9em; } #summary td.paper { min-width: 14em; }
.badge { border-radius: 0.3em; padding: 0.1em 0.4em; color: #fff; white-space: nowrap; }
.reproduced { background: #2e7d32; } .not_reproduced { background: #c62828; }
.not_checked { background: #757575; } .inconclusive { background: #b26a00; }
tr.totals td { border-top: 2px solid #333; }
figure { display: block; margin: 0 0 1.5em; }
figure img { display: block; width: 100%; height: auto; cursor: zoom-in; }
input.zoom { display: none; }
/* click a figure: it opens at its own pixel size over the page; click again to close */
input.zoom:checked + label { position: fixed; inset: 0; z-index: 10; overflow: auto;
  background: rgba(0, 0, 0, 0.85); padding: 1em; box-sizing: border-box; }
input.zoom:checked + label img { width: auto; max-width: none; margin: auto; cursor: zoom-out; }
"""

TEMPLATE = """\
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>icml26-repro report ({{ scale }})</title>
<style>
{{ style }}</style></head><body>
<h1>icml26-repro: reproduction report</h1>
<p>Scale: <b id="scale">{{ scale }}</b>. Generated <span id="generated">{{ generated }}</span>.</p>
<h2>Summary</h2>
<p>Headline: the paper's result, measured. Mechanism: a measured intermediate effect the paper
reports. Sanity: holds by construction (closed form, simulator, format arithmetic), not a
reproduction. "r / c": reproduced (for sanity: passed) of checkable, where checkable means a
check ran on a measurement; "not r.": not reproduced; "inconcl.": inconclusive; "not checked": no
measurement at this scale. Why headline and mechanism claims are inconclusive: a guard failed
(a precondition, or the analysis declared the metric undecidable); the interval straddles or
touches the threshold; fewer than 3 replicates of the claim's unit (seeds, or items where nothing
is trained); no usable interval (none, zero-width, over another unit, a boolean without
per-replicate counts).</p>
<p>Time: <i>sum of job times</i> adds every job's own wall time from its Snakemake benchmark
file, so jobs that ran side by side count twice. <i>Wall time with a job running</i> is the
length of the union of the jobs' [start, end] intervals (end: the benchmark file's modification
time, start: end minus the job's time): for one uninterrupted run, the elapsed time from the first
job's start to the last job's end; it leaves out idle time between separate runs. It is measured,
not a critical path (the report has no DAG).{% if span %} First job start to last job end:
{{ span }} s.{% endif %}</p>
<table id="summary">
<tr><th rowspan="2">paper</th><th colspan="3">headline</th><th colspan="2">mechanism</th>
<th>sanity</th><th colspan="4">inconclusive (headline + mechanism) because</th>
<th rowspan="2">not checked</th><th rowspan="2">claims</th>
<th rowspan="2">sum of job times (s)</th><th rowspan="2">wall time with a job running (s)</th></tr>
<tr><th>r / c</th><th>not r.</th><th>inconcl.</th><th>r / c</th><th>inconcl.</th><th>r / c</th>
<th>guard failed</th><th>interval straddles</th><th>n &lt; 3</th><th>no interval</th></tr>
{% for row in summary %}<tr{% if row.total %} class="totals"{% endif %}><td class="paper">{% if row.total %}<b>total ({{ row.n }} papers)</b>{% else %}<a href="#{{ row.slug }}">{{ row.title }}</a> <small>({{ row.slug }})</small>{% endif %}</td>
<td class="num">{{ row.c.headline.reproduced }} / {{ row.c.headline.checkable }}</td>
<td class="num">{{ row.c.headline.not_reproduced }}</td><td class="num">{{ row.c.headline.inconclusive }}</td>
<td class="num">{{ row.c.mechanism.reproduced }} / {{ row.c.mechanism.checkable }}</td>
<td class="num">{{ row.c.mechanism.inconclusive }}</td>
<td class="num">{{ row.c.sanity.reproduced }} / {{ row.c.sanity.checkable }}</td>
<td class="num">{{ row.c.undecided.guard_failed }}</td><td class="num">{{ row.c.undecided.interval_straddles }}</td>
<td class="num">{{ row.c.undecided.n_lt_3 }}</td><td class="num">{{ row.c.undecided.no_interval }}</td>
<td class="num">{{ row.c.all.not_checked }}</td><td class="num">{{ row.c.all.total }}</td>
<td class="num">{{ row.wall_s }}</td><td class="num">{{ row.busy_s }}</td></tr>
{% endfor %}</table>
<h2>Provenance</h2>
<table id="provenance">
{% for name, value in shared %}<tr><th>{{ name }}</th><td>{{ value }}</td></tr>
{% endfor %}</table>
<p>Per paper: {{ prov_source }}</p>
<table id="paper-provenance">
<tr><th>paper</th><th>seeds</th><th>config hash</th><th>results written (UTC)</th></tr>
{% for p in papers %}<tr><td><a href="#{{ p.slug }}">{{ p.slug }}</a></td>
<td title="{{ p.prov.seed_keys }}">{{ p.prov.seeds }}</td><td>{{ p.prov.config_hash }}</td>
<td>{{ p.prov.time_utc }}</td></tr>
{% endfor %}</table>
{% for p in papers %}<section id="{{ p.slug }}">
<h2>{{ p.title }} <small>({{ p.slug }})</small></h2>
<h3>Claims</h3>
{{ claims_table(p) }}
<h3>Figures</h3>
{% for f in p.figures %}<figure><input type="checkbox" class="zoom" id="zoom-{{ p.slug }}-{{ loop.index }}">
<label for="zoom-{{ p.slug }}-{{ loop.index }}" title="click to enlarge"><img alt="{{ f.name }}" src="data:image/png;base64,{{ f.b64 }}"></label>
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
</section>
{% endfor %}</body></html>
"""

CLAIMS_TABLE = """\
<table class="claims">
<tr><th>id</th><th>kind</th><th>statement</th><th>paper</th><th>ours</th><th>check</th><th>evidence</th>
<th>verdict</th><th>note</th></tr>
{% for c in p.claims %}<tr><td>{{ c.id }}</td><td>{{ c.kind }}</td><td>{{ c.statement }}</td>
<td class="num" title="{{ c.source }}">{{ c.paper_value }}</td><td class="num">{{ c.measured }}</td>
<td>{{ c.check }}</td><td>{{ c.evidence }}</td><td><span class="badge {{ c.verdict }}">{{ c.verdict }}</span></td>
<td>{{ c.note }}</td></tr>
{% endfor %}</table>"""

CLAIMS_PAGE = """\
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{{ p.title }}: claims ({{ scale }})</title>
<style>
{{ style }}</style></head><body>
<h1>{{ p.title }} <small>({{ p.slug }}, {{ scale }})</small></h1>
{{ claims_table(p) }}
</body></html>
"""

_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)


def _claims_table(p: dict) -> Markup:
    return Markup(_ENV.from_string(CLAIMS_TABLE).render(p=p))


def read_scale_config(path: Path | None) -> dict | None:
    if path is None:
        return None
    try:
        cfg = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"cannot read scale config {path}: {' '.join(str(e).split())}") from None
    if not isinstance(cfg, dict):
        raise InputError(f"scale config {path} is not a mapping")
    return cfg


def build_report(scale: str, paper_dirs: list[Path], command: str | None = None,
                 scale_config: Path | None = None) -> str:
    """Return the report HTML. `command` goes into the first-line comment (default: argv);
    `scale_config`: config/scales/<scale>.yaml, for each paper's seeds and config hash."""
    scale_cfg = read_scale_config(scale_config)
    papers = [load_paper(scale, Path(d), scale_cfg) for d in paper_dirs]
    summary = [{"slug": p["slug"], "title": p["title"], "c": p["counts"], "wall_s": p["wall_s"],
                "busy_s": p["busy_s"], "total": False} for p in papers]
    intervals = [iv for p in papers for iv in p["intervals"]]
    summary.append({"slug": "total", "title": "total", "n": len(papers), "c": totals([p["counts"] for p in papers]),
                    "wall_s": _fmt_num(sum(float(p["wall_s"]) for p in papers if p["wall_s"] != DASH)
                                       if any(p["wall_s"] != DASH for p in papers) else None, ".2f"),
                    "busy_s": _fmt_num(busy_wall_s(intervals), ".2f"), "total": True})
    span = (_fmt_num(max(e for _, e in intervals) - min(s for s, _ in intervals), ".2f")
            if intervals else None)
    prov_source = (f"seeds and config hash from each paper's section of {scale_config} (config hash: "
                   "the first 16 hex digits of the SHA-256 of its JSON, keys sorted); hover a seed for "
                   "every seed key." if scale_cfg is not None else
                   "seed and config hash as the paper's summary step recorded them.")
    if command is None:
        command = shlex.join(["python", "-m", "methods.core.report", *sys.argv[1:]])
    # Inside a comment "<" and ">" could end it early (a path containing "-->").
    command = command.replace("<", "&lt;").replace(">", "&gt;")
    html = _ENV.from_string(TEMPLATE).render(
        scale=scale, papers=papers, summary=summary, shared=shared_provenance(papers), span=span,
        prov_source=prov_source, style=Markup(STYLE), claims_table=_claims_table,
        generated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    return f"<!-- Generated by icml26-repro: {command} -->\n{html}"


def build_claims_page(scale: str, paper_dir: Path) -> str:
    """One paper's claims table as a standalone HTML page (a `snakemake --report` item)."""
    p = load_paper(scale, Path(paper_dir))
    return _ENV.from_string(CLAIMS_PAGE).render(scale=scale, p=p, style=Markup(STYLE),
                                                claims_table=_claims_table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", required=True)
    parser.add_argument("--papers", required=True, nargs="+", type=Path, metavar="DIR")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--scale-config", type=Path, metavar="YAML",
                        help="config/scales/<scale>.yaml: each paper's seeds and config hash from its section")
    parser.add_argument("--claims-only", action="store_true",
                        help="write one paper's claims table as a standalone page (one --papers DIR)")
    args = parser.parse_args(argv)
    command = shlex.join(["python", "-m", "methods.core.report",
                          *(sys.argv[1:] if argv is None else argv)])
    try:
        if args.claims_only:
            if len(args.papers) != 1:
                raise InputError(f"--claims-only takes one paper directory, got {len(args.papers)}")
            html = build_claims_page(args.scale, args.papers[0])
        else:
            html = build_report(args.scale, args.papers, command=command, scale_config=args.scale_config)
    except InputError as e:
        msg = " ".join(str(e).split())  # one line, whatever the exception text holds
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 2
    write_text(args.out, html)  # atomic: the report exists complete or not at all
    return 0


if __name__ == "__main__":
    sys.exit(main())
