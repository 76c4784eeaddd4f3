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

Verdicts (VERDICTS):
- `not_checked`: no check at this scale, or the metric was not measured: null, NaN or absent.
  Never a pass, whatever the check. (The strict JSON writers of `methods.core.results` write
  NaN and ±Infinity as null, so a summary read back from disk holds null for both.)
- `inconclusive`: the measurement cannot decide the claim, with the reason: a guard failed or
  its metric is missing; the analysis declared the metric inconclusive
  (`"inconclusive": {metric: reason}` in the summary); or the metric's interval
  (`"intervals": {metric: {lo, hi, level, method, n}}`, see `methods.core.stats`) straddles the
  threshold. Never `reproduced`.
- `reproduced` / `not_reproduced`: the check holds / fails — for the whole interval when the
  summary gives one, else for the point value. A failure is reported with the measured number.

A check compares with a fixed threshold; `op: "is"` compares a boolean.
"""
from __future__ import annotations

import math
import operator
from pathlib import Path

from .results import InputError

OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "is": operator.is_}
SYMBOL = {">": ">", ">=": "≥", "<": "<", "<=": "≤", "is": "is"}
VERDICTS = ("reproduced", "not_reproduced", "inconclusive", "not_checked")
# headline: the paper's result itself, measured; mechanism: a measured intermediate effect the
# paper reports; sanity: holds by construction (closed form, theorem under our simulator, format
# arithmetic, a simulator recovering its own parameters, agreement with a reference).
KINDS = ("headline", "mechanism", "sanity")
CLAIM_KEYS = {"id", "kind", "statement", "paper_value", "source", "metric", "statistic", "checks"}
OPTIONAL_KEYS = {"guards"}
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


def verdict(measured, check: dict | None, interval: dict | None = None) -> tuple[str, str | None]:
    """(verdict, human-readable check) for one measured value, with its interval if given."""
    if check is None:
        return "not_checked", None
    text = check_text(check)
    if _missing(measured):
        return "not_checked", text
    if interval is not None and check["op"] != "is":
        lo, hi = interval["lo"], interval["hi"]
        at_lo, at_hi = _holds(lo, check["op"], check["value"]), _holds(hi, check["op"], check["value"])
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


def _interval(metrics: dict, name: str) -> dict | None:
    iv = (metrics.get("intervals") or {}).get(name)
    if iv is None:
        return None
    if not isinstance(iv, dict) or _missing(iv.get("lo")) or _missing(iv.get("hi")) or iv["lo"] > iv["hi"]:
        raise InputError(f"malformed interval for metric {name!r}: {iv!r} (expected lo <= hi)")
    return iv


def evaluate_claim(c: dict, metrics: dict, scale: str) -> dict:
    measured = metrics.get(c["metric"])
    check = (c["checks"] or {}).get(scale)
    interval = _interval(metrics, c["metric"])
    v, text = verdict(measured, check, interval)
    reasons = []
    if v == "not_checked":
        reasons.append("no check at this scale" if text is None else "metric not measured")
    elif v == "inconclusive":
        reasons.append(f"{interval.get('level', 0.95):.0%} interval [{interval['lo']:.4g}, {interval['hi']:.4g}] "
                       f"straddles the threshold")
    if check is not None and v in ("reproduced", "not_reproduced", "inconclusive"):
        declared = (metrics.get("inconclusive") or {}).get(c["metric"])
        failures = ([f"analysis: {declared}"] if declared else []) + guard_failures(c.get("guards", []), metrics)
        if failures:
            v, reasons = "inconclusive", failures + reasons
    note = metrics.get("notes", {}).get(c["metric"], "")
    note = "; ".join(reasons + ([note] if note else []))
    return {"id": c["id"], "kind": c["kind"], "statement": c["statement"], "paper_value": c["paper_value"],
            "source": c["source"], "metric": c["metric"], "statistic": c["statistic"],
            "measured": measured, "interval": interval, "check": text,
            "guards": [f"{g['metric']} {check_text(g)}" for g in c.get("guards", [])],
            "verdict": v, "note": note}


def count(rows: list[dict]) -> dict:
    """Per kind and in total, how many claims got each verdict."""
    by_kind = {k: {v: sum(r["kind"] == k and r["verdict"] == v for r in rows) for v in VERDICTS} for k in KINDS}
    return {"total": {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}, **by_kind}


def evaluate_claims(spec: dict, metrics: dict, scale: str) -> dict:
    """Claims table for one paper at one scale. `metrics` maps metric name → value; optional
    `notes`, `intervals` and `inconclusive` mappings in it add a per-metric explanation, an
    interval the verdict uses, and an analysis-declared reason the claim cannot be decided."""
    rows = [evaluate_claim(c, metrics, scale) for c in spec["claims"]]
    return {"paper": spec["paper"], "title": spec.get("title", spec["paper"]), "scale": scale,
            "claims": rows, "counts": count(rows)}
