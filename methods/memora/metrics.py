"""Retrieval metrics: evidence recall over gold evidence groups, answer-in-context, context
tokens, the knowledge-update check; aggregation per (store, policy, category)."""
from __future__ import annotations

import re


def evidence_recall(groups: list[list[str]], retrieved: list[str]) -> float | None:
    """Fraction of gold evidence groups with at least one turn retrieved (a group = every turn
    stating one needed fact; LoCoMo's flat lists are one turn per group). None without gold."""
    if not groups:
        return None
    got = set(retrieved)
    return sum(bool(got & set(g)) for g in groups) / len(groups)


def _norm(s: str) -> str:
    return " ".join(re.findall(r"\w+", s.lower()))


def answer_in_context(answer: str, context: str) -> bool:
    """The gold answer (lower-cased, punctuation stripped) occurs in the context as whole words."""
    a, c = _norm(answer), _norm(context)
    return bool(a) and f" {a} " in f" {c} "


def latest_first(answer: str, stale: str, context: str) -> bool:
    """Knowledge update: the latest value is in context and no stale value precedes it (a reader
    taking the first mention gets the current value)."""
    a, s, c = f" {_norm(answer)} ", f" {_norm(stale)} ", f" {_norm(context)} "
    ia = c.find(a)
    if ia < 0:
        return False
    i_s = c.find(s)
    return i_s < 0 or ia < i_s


def aggregate(rows: list[dict]) -> list[dict]:
    """rows: one per (store, policy, question) with keys store, policy, category, recall (or
    None), in_context (or None), ku_ok (or None), tokens, history_tokens. -> one row per
    (store, policy, category) plus category 'all' (means over defined values)."""
    keys = sorted({(r["store"], r["policy"]) for r in rows})
    out = []
    for st, po in keys:
        mine = [r for r in rows if (r["store"], r["policy"]) == (st, po)]
        for cat in sorted({r["category"] for r in mine}) + ["all"]:
            sel = [r for r in mine if cat == "all" or r["category"] == cat]

            def mean(k):
                v = [float(r[k]) for r in sel if r[k] is not None]
                return sum(v) / len(v) if v else None
            out.append({"store": st, "policy": po, "category": cat, "n": len(sel),
                        "evidence_recall": mean("recall"), "answer_in_context": mean("in_context"),
                        "ku_latest_first": mean("ku_ok"), "context_tokens": mean("tokens"),
                        "history_tokens": mean("history_tokens")})
    return out
