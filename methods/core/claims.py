"""Claims are data: `methods/<slug>/claims.yaml` → `claims.json` with a verdict per claim.

claims.yaml:
    paper: <slug>
    title: <paper title>
    claims:
      - id: W1
        statement: the paper's claim, in words
        paper_value: the paper's number (or "qualitative")
        source: where the paper states it (section, table, abstract)
        metric: key in the paper's summary metrics JSON
        statistic: how `metric` is computed (seeds, mean, ...)
        checks: {smoke: null, tiny: {op: ">=", value: 0.05}, paper: {op: ">=", value: 0.0}}

A check compares the measured metric with a fixed threshold; `op: "is"` compares a boolean.
No check for a scale, or a metric that could not be measured, gives `not_checked` with the
reason. A failed comparison is `not_reproduced`, reported with the measured number.
"""
from __future__ import annotations

import math
import operator
from pathlib import Path

from .results import InputError

OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "is": operator.is_}
SYMBOL = {">": ">", ">=": "≥", "<": "<", "<=": "≤", "is": "is"}
VERDICTS = ("reproduced", "not_reproduced", "not_checked")
CLAIM_KEYS = {"id", "statement", "paper_value", "source", "metric", "statistic", "checks"}


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
    for c in spec["claims"]:
        missing, extra = CLAIM_KEYS - set(c), set(c) - CLAIM_KEYS
        if missing or extra:
            raise InputError(f"{path}: claim {c.get('id')!r} has missing keys {sorted(missing)} "
                             f"or unknown keys {sorted(extra)}")
        for scale, chk in (c["checks"] or {}).items():
            if chk is not None and (not isinstance(chk, dict) or set(chk) != {"op", "value"}
                                    or chk["op"] not in OPS
                                    or (chk["op"] == "is") != isinstance(chk["value"], bool)):
                raise InputError(f"{path}: claim {c['id']} scale {scale}: check must be "
                                 f"{{op: one of {sorted(OPS)}, value: number (bool for 'is')}}, got {chk!r}")
    return spec


def verdict(measured, check: dict | None) -> tuple[str, str | None]:
    """(verdict, human-readable check) for one measured value."""
    if check is None:
        return "not_checked", None
    text = f"{SYMBOL[check['op']]} {check['value']}"
    if measured is None or (not isinstance(measured, bool) and math.isnan(float(measured))):
        return "not_checked", text
    ok = OPS[check["op"]](measured, check["value"])
    return ("reproduced" if ok else "not_reproduced"), text


def evaluate_claims(spec: dict, metrics: dict, scale: str) -> dict:
    """Claims table for one paper at one scale. `metrics` maps metric name → value; an optional
    `notes` mapping in it adds a per-metric explanation to the table."""
    notes = metrics.get("notes", {})
    rows, counts = [], {v: 0 for v in VERDICTS}
    for c in spec["claims"]:
        measured = metrics.get(c["metric"])
        v, text = verdict(measured, (c["checks"] or {}).get(scale))
        note = notes.get(c["metric"], "")
        if v == "not_checked":
            why = "no check at this scale" if text is None else "metric not measured"
            note = f"{why}; {note}" if note else why
        counts[v] += 1
        rows.append({"id": c["id"], "statement": c["statement"], "paper_value": c["paper_value"],
                     "source": c["source"], "metric": c["metric"], "statistic": c["statistic"],
                     "measured": measured, "check": text, "verdict": v, "note": note})
    return {"paper": spec["paper"], "title": spec.get("title", spec["paper"]), "scale": scale,
            "claims": rows, "counts": counts}
