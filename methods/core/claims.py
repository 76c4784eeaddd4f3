"""Claims are data: `methods/<slug>/claims.yaml` → `claims.json` with a verdict per claim.

claims.yaml:
    paper: <slug>
    title: <paper title>
    claims:
      - id: W1
        kind: headline            # headline | mechanism | sanity (see KINDS)
        statement: the paper's claim, in words
        paper_value: the paper's number (or "qualitative")
        source: where the paper states it (section, table, abstract)
        metric: key in the paper's summary metrics JSON
        statistic: how `metric` is computed (seeds, mean, interval, ...)
        checks: {smoke: null, tiny: {op: ">=", value: 0.05}, paper: {op: ">=", value: 0.0}}
        guards:                   # optional preconditions, see below
          - {metric: base_acc, op: ">=", value: 0.2, why: "the base model must solve the task"}

Headline and mechanism claims also declare `replicates: seed | item`, their outer replication
unit: `seed` when the result depends on training (a model trained again per seed), `item` only
where nothing is trained (a fixed model, a simulator, a closed-form quantity measured on items).

Verdicts (VERDICTS):
- `not_checked`: no check at this scale, or the metric was not measured (JSON null, which is
  what a NaN or ±inf metric is once written by the strict writers of `methods.core.results`).
  A metric a check needs that is *absent* from the summary is an error, not a verdict.
- `inconclusive`: the measurement cannot decide the claim; `undecided_by` says why, one of
  UNDECIDED: a guard failed (or the analysis declared the metric inconclusive,
  `"inconclusive": {metric: reason}`), the interval straddles or touches the threshold, fewer
  than MIN_REPLICATES replicates of the outer unit, or no usable interval (none given, a
  zero-width one, one over another unit than the claim's, a boolean with no per-replicate count).
- `reproduced` / `not_reproduced`: decided. For headline and mechanism claims only by an interval
  over >= MIN_REPLICATES replicates of the claim's unit that lies strictly on one side of the
  threshold: ">=" and ">" both need the whole interval above the value (a tie does not pass
  "improves"); a non-inferiority claim states its margin as the value. The interval comes from
  the summary's `replicates` record (`methods.core.stats.replicate_record`; computed here at the
  level of the current look, `methods.core.sequential`) or else its `intervals` record. A boolean
  (`op: is`) is decided by its `holds` record (k of n replicates): reproduced when the exact
  interval of the rate lies above 1/2, not reproduced when below. Sanity claims (they hold by
  construction) are decided by their point value, or by their interval where one is given.

A check compares with a fixed threshold; `op: "is"` compares a boolean.
"""
from __future__ import annotations

import math
import operator
from pathlib import Path

from . import stats
from .results import InputError

OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "is": operator.is_}
SYMBOL = {">": ">", ">=": "≥", "<": "<", "<=": "≤", "is": "is"}
VERDICTS = ("reproduced", "not_reproduced", "inconclusive", "not_checked")
# headline: the paper's result itself, measured; mechanism: a measured intermediate effect the
# paper reports; sanity: holds by construction (closed form, theorem under our simulator, format
# arithmetic, a simulator recovering its own parameters, agreement with a reference).
KINDS = ("headline", "mechanism", "sanity")
CLAIM_KEYS = {"id", "kind", "statement", "paper_value", "source", "metric", "statistic", "checks"}
OPTIONAL_KEYS = {"guards", "replicates"}
MEASURED_KINDS = ("headline", "mechanism")   # decided only by an interval over replicates
MIN_REPLICATES = 3
UNDECIDED = ("guard failed", "interval straddles", "n < 3", "no interval")
# summary keys that are not metrics
SUMMARY_EXTRAS = {"provenance", "notes", "intervals", "inconclusive", "replicates", "holds"}
GUARD_KEYS = {"metric", "op", "value", "why"}


def _bad_check(chk) -> bool:
    return (not isinstance(chk, dict) or set(chk) != {"op", "value"} or chk["op"] not in OPS
            or (chk["op"] == "is") != isinstance(chk["value"], bool)
            or (chk["op"] != "is" and not isinstance(chk["value"], (int, float))))


def _check_claim(path: Path, c) -> None:
    if not isinstance(c, dict):
        raise InputError(f"{path}: every claim must be a mapping, got {c!r}")
    missing, extra = CLAIM_KEYS - set(c), set(c) - CLAIM_KEYS - OPTIONAL_KEYS
    if missing or extra:
        raise InputError(f"{path}: claim {c.get('id')!r} has missing keys {sorted(missing)} "
                         f"or unknown keys {sorted(extra)}")
    if c["kind"] not in KINDS:
        raise InputError(f"{path}: claim {c['id']}: kind must be one of {list(KINDS)}, got {c['kind']!r}")
    if c["checks"] is not None and not isinstance(c["checks"], dict):
        raise InputError(f"{path}: claim {c['id']}: checks must be a mapping scale → check")
    for scale, chk in (c["checks"] or {}).items():
        if chk is not None and _bad_check(chk):
            raise InputError(f"{path}: claim {c['id']} scale {scale}: check must be "
                             f"{{op: one of {sorted(OPS)}, value: number (bool for 'is')}}, got {chk!r}")
    if c["kind"] in MEASURED_KINDS and c.get("replicates") not in stats.UNITS:
        raise InputError(f"{path}: claim {c['id']} ({c['kind']}): replicates must be one of "
                         f"{list(stats.UNITS)} (its outer replication unit), got {c.get('replicates')!r}")
    guards = c.get("guards", [])
    if not isinstance(guards, list):
        raise InputError(f"{path}: claim {c['id']}: guards must be a list")
    for g in guards:
        if not isinstance(g, dict) or set(g) != GUARD_KEYS or _bad_check({"op": g["op"], "value": g["value"]}) \
                or not isinstance(g["metric"], str) or not isinstance(g["why"], str):
            raise InputError(f"{path}: claim {c['id']}: a guard must be {{metric, op, value, why}} "
                             f"with op one of {sorted(OPS)}, got {g!r}")


def load_claims(path: str | Path) -> dict:
    import yaml

    path = Path(path)
    if not path.is_file():
        raise InputError(f"missing claims file: {path}")
    try:
        spec = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise InputError(f"corrupt YAML in {path}: {str(e).splitlines()[0]}") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("claims"), list):
        raise InputError(f"{path}: expected a mapping with a 'claims' list")
    ids = set()
    for c in spec["claims"]:
        _check_claim(path, c)
        if c["id"] in ids:
            raise InputError(f"{path}: duplicate claim id {c['id']!r}")
        ids.add(c["id"])
    return spec


def _missing(x) -> bool:
    """Not measured: None (JSON null; what a NaN or ±inf metric is once written) or NaN."""
    return x is None or (not isinstance(x, bool) and isinstance(x, (int, float)) and math.isnan(x))


def _holds(measured, op: str, value) -> bool:
    return bool(OPS[op](measured, value))


def check_text(check: dict) -> str:
    return f"{SYMBOL[check['op']]} {check['value']}"


def _side(lo: float, hi: float, check: dict) -> str | None:
    """Where an interval lies against a check's threshold, strictly: "holds" when the whole
    interval is on the side the claim asks for, "fails" when wholly on the other, else None
    (it straddles or touches the threshold)."""
    v = check["value"]
    if check["op"] in (">", ">="):
        return "holds" if lo > v else "fails" if hi < v else None
    return "holds" if hi < v else "fails" if lo > v else None


def verdict(measured, check: dict | None, interval: dict | None = None) -> tuple[str, str | None]:
    """(verdict, human-readable check) of a sanity claim: its point value, or its interval
    (every point of it must satisfy, or every point violate, the check) when it has one."""
    if check is None:
        return "not_checked", None
    text = check_text(check)
    if _missing(measured):
        return "not_checked", text
    if interval is not None and check["op"] != "is":
        at_lo, at_hi = (_holds(interval[k], check["op"], check["value"]) for k in ("lo", "hi"))
        if at_lo and at_hi:
            return "reproduced", text
        if not at_lo and not at_hi:
            return "not_reproduced", text
        return "inconclusive", text
    return ("reproduced" if _holds(measured, check["op"], check["value"]) else "not_reproduced"), text


def guard_failures(guards: list[dict], metrics: dict) -> list[str]:
    """One line per guard that does not hold (or whose metric was not measured)."""
    out = []
    for g in guards:
        x = metrics.get(g["metric"])
        if _missing(x):
            out.append(f"guard metric {g['metric']} not measured ({g['why']})")
        elif not _holds(x, g["op"], g["value"]):
            shown = x if isinstance(x, bool) else f"{float(x):.4g}"
            out.append(f"guard failed: {g['metric']} = {shown}, needs {check_text(g)} ({g['why']})")
    return out


def _record(metrics: dict, key: str, name: str, need: set) -> dict | None:
    rec = (metrics.get(key) or {}).get(name)
    if rec is not None and (not isinstance(rec, dict) or not need <= set(rec)):
        raise InputError(f"malformed {key} record for metric {name!r}: {rec!r} (needs {sorted(need)})")
    return rec


def _interval(metrics: dict, name: str) -> dict | None:
    iv = _record(metrics, "intervals", name, {"lo", "hi"})
    if iv is not None and (_missing(iv["lo"]) or _missing(iv["hi"]) or iv["lo"] > iv["hi"]):
        raise InputError(f"malformed interval for metric {name!r}: {iv!r} (expected lo <= hi)")
    return iv


def _replicates(metrics: dict, name: str) -> dict | None:
    rec = _record(metrics, "replicates", name, {"unit", "values"})
    if rec is not None and (rec["unit"] not in stats.UNITS or not isinstance(rec["values"], list)
                            or not rec["values"] or any(_missing(v) for v in rec["values"])):
        raise InputError(f"malformed replicates record for metric {name!r}: needs a unit in "
                         f"{list(stats.UNITS)} and a non-empty list of finite values")
    return rec


def _fmt_iv(iv: dict) -> str:
    return f"{100 * iv.get('level', stats.LEVEL):.3g}% interval [{iv['lo']:.4g}, {iv['hi']:.4g}]"


def _decide_measured(c: dict, check: dict, metrics: dict, level: float) -> dict:
    """Verdict of a headline or mechanism claim from its replicates (see the module docstring):
    {verdict, undecided_by, reason, interval, n, n_inner, unit}."""
    name, unit = c["metric"], c["replicates"]
    out = {"interval": None, "n": None, "n_inner": None, "unit": None}

    def undecided(by, reason):
        return {**out, "verdict": "inconclusive", "undecided_by": by, "reason": reason}

    if check["op"] == "is":
        h = _record(metrics, "holds", name, {"k", "n", "unit"})
        if h is None:
            return undecided("no interval", "a boolean with no per-replicate count (holds k of n)")
        h = stats.holds_record([True] * int(h["k"]) + [False] * (int(h["n"]) - int(h["k"])),
                               unit=h["unit"], level=level)
        out.update(interval=h, n=h["n"], unit=h["unit"])
        if h["unit"] != unit:
            return undecided("no interval", f"counted over {h['unit']}s, the claim replicates over {unit}s")
        if h["n"] < MIN_REPLICATES:
            return undecided("n < 3", f"n = {h['n']} {unit}s")
        want = check["value"]
        rate = f"holds in {h['k']} of {h['n']} {unit}s, exact {level:.4g} interval of the rate [{h['lo']:.3g}, {h['hi']:.3g}]"
        if h["lo"] > 0.5 or h["hi"] < 0.5:
            mostly = h["lo"] > 0.5
            return {**out, "verdict": "reproduced" if mostly == want else "not_reproduced",
                    "undecided_by": None, "reason": rate}
        return undecided("interval straddles", rate + " contains 1/2")
    rep = _replicates(metrics, name)
    if rep is not None:
        out.update(n=len(rep["values"]), unit=rep["unit"],
                   n_inner=sum(map(len, rep["items"])) if rep.get("items") else
                   sum(k[1] for k in rep["counts"]) if rep.get("counts") else None)
        iv = stats.interval_from_replicates(rep, level)
    else:
        iv = _interval(metrics, name)
        if iv is not None:
            out.update(n=iv.get("n"), n_inner=iv.get("n_inner"), unit=iv.get("unit"))
    out["interval"] = iv
    if out["unit"] is not None and out["unit"] != unit:
        return undecided("no interval", f"interval over {out['unit']}s, the claim replicates over {unit}s")
    if iv is None and out["n"] is None:
        return undecided("no interval", "no interval over replicates")
    if out["n"] is None:
        return undecided("no interval", "the interval does not say over how many replicates")
    if out["n"] < MIN_REPLICATES:
        return undecided("n < 3", f"n = {out['n']} {unit}s")
    if iv["lo"] == iv["hi"]:
        return undecided("no interval", f"zero-width interval at {iv['lo']:.4g} over {out['n']} {unit}s "
                                        "(every replicate equal): no evidence of spread, not certainty")
    side = _side(iv["lo"], iv["hi"], check)
    if side is None:
        return undecided("interval straddles", f"{_fmt_iv(iv)} straddles or touches the threshold")
    return {**out, "verdict": "reproduced" if side == "holds" else "not_reproduced", "undecided_by": None,
            "reason": None}


def needed_metrics(spec: dict, scale: str) -> list[str]:
    """Every metric (and guard metric) a claim with a check at this scale reads."""
    out = []
    for c in spec["claims"]:
        if (c["checks"] or {}).get(scale) is not None:
            out += [c["metric"]] + [g["metric"] for g in c.get("guards", [])]
    return list(dict.fromkeys(out))


def check_summary(spec: dict, metrics, scale: str) -> None:
    """A summary that is not a mapping, has no metric at all, or lacks (as a key) a metric that
    a claim checked at this scale needs, is an error: one line naming the first missing metric."""
    if not isinstance(metrics, dict):
        raise InputError(f"summary of {spec['paper']} must be a JSON object, got {type(metrics).__name__}")
    if not set(metrics) - SUMMARY_EXTRAS:
        raise InputError(f"summary of {spec['paper']} holds no metrics")
    for name in needed_metrics(spec, scale):
        if name not in metrics:
            who = [c["id"] for c in spec["claims"] if (c["checks"] or {}).get(scale) is not None
                   and name in [c["metric"]] + [g["metric"] for g in c.get("guards", [])]]
            raise InputError(f"summary of {spec['paper']} lacks metric {name!r} (needed by claim "
                             f"{', '.join(who)} at scale {scale})")


def evaluate_claim(c: dict, metrics: dict, scale: str, level: float = stats.LEVEL) -> dict:
    measured = metrics.get(c["metric"])
    check = (c["checks"] or {}).get(scale)
    measured_kind = c["kind"] in MEASURED_KINDS
    decision = {"interval": None, "n": None, "n_inner": None, "unit": None, "undecided_by": None, "reason": None}
    if check is None:
        v, text, reasons = "not_checked", None, ["no check at this scale"]
    elif _missing(measured):
        v, text, reasons = "not_checked", check_text(check), ["metric not measured"]
    elif measured_kind:
        decision = _decide_measured(c, check, metrics, level)
        v, text = decision["verdict"], check_text(check)
        reasons = [decision["reason"]] if decision["verdict"] == "inconclusive" else []
    else:
        decision["interval"] = _interval(metrics, c["metric"])
        v, text = verdict(measured, check, decision["interval"])
        reasons = [f"{_fmt_iv(decision['interval'])} straddles the threshold"] if v == "inconclusive" else []
        decision["undecided_by"] = "interval straddles" if v == "inconclusive" else None
    if v in ("reproduced", "not_reproduced", "inconclusive"):
        declared = (metrics.get("inconclusive") or {}).get(c["metric"])
        failures = ([f"analysis: {declared}"] if declared else []) + guard_failures(c.get("guards", []), metrics)
        if failures:
            v, reasons = "inconclusive", failures + (reasons if v == "inconclusive" else [])
            decision["undecided_by"] = "guard failed"
    if decision["reason"] and v != "inconclusive":
        reasons.append(decision["reason"])
    needed = None
    rep = _replicates(metrics, c["metric"]) if measured_kind and check is not None and check["op"] != "is" else None
    if decision["undecided_by"] == "interval straddles" and rep is not None and rep["unit"] == "seed":
        needed = stats.seeds_needed(rep["values"], check["value"], level)
    note = (metrics.get("notes") or {}).get(c["metric"], "")
    note = "; ".join(reasons + ([note] if note else []))
    return {"id": c["id"], "kind": c["kind"], "statement": c["statement"], "paper_value": c["paper_value"],
            "source": c["source"], "metric": c["metric"], "statistic": c["statistic"],
            "replicates": c.get("replicates"), "measured": measured, "interval": decision["interval"],
            "n": decision["n"], "n_inner": decision["n_inner"], "check": text,
            "guards": [f"{g['metric']} {check_text(g)}" for g in c.get("guards", [])],
            "verdict": v, "undecided_by": decision["undecided_by"] if v == "inconclusive" else None,
            "seeds_needed": needed, "note": note}


def count(rows: list[dict]) -> dict:
    """Per kind and in total, how many claims got each verdict; inconclusive split by its cause."""
    by_kind = {k: {v: sum(r["kind"] == k and r["verdict"] == v for r in rows) for v in VERDICTS} for k in KINDS}
    undecided = {u: sum(r["verdict"] == "inconclusive" and r.get("undecided_by") == u for r in rows)
                 for u in UNDECIDED}
    return {"total": {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}, **by_kind,
            "inconclusive_by": undecided}


def evaluate_claims(spec: dict, metrics: dict, scale: str, *, level: float = stats.LEVEL,
                    look: dict | None = None) -> dict:
    """Claims table for one paper at one scale. `metrics` maps metric name → value; optional
    `notes`, `intervals`, `replicates`, `holds` and `inconclusive` mappings in it add a per-metric
    explanation, an interval, per-replicate values, a per-replicate count of a boolean, and an
    analysis-declared reason the claim cannot be decided. `level`: the confidence level of this
    look (`methods.core.sequential.look_level`); `look`: {index, looks, seeds} recorded in the table."""
    check_summary(spec, metrics, scale)
    rows = [evaluate_claim(c, metrics, scale, level) for c in spec["claims"]]
    table = {"paper": spec["paper"], "title": spec.get("title", spec["paper"]), "scale": scale,
             "level": level, "claims": rows, "counts": count(rows)}
    if look is not None:
        table["look"] = look
        for r in rows:
            r["look"] = look["index"]
    return table
