"""LoCoMo (snap-research/locomo data/locomo10.json) and LongMemEval (xiaowu0162/longmemeval
longmemeval_s.json) converted to our (conversations, questions) format (see synth.py)."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from pathlib import Path

from methods.core.results import InputError

LOCOMO_CATEGORY = {1: "multi_hop", 2: "temporal", 3: "open_domain", 4: "single_hop", 5: "adversarial"}


def _read(path: str, sha256: str | None):
    p = Path(path)
    if not p.is_file():
        raise InputError(f"missing dataset file: {p}")
    blob = p.read_bytes()
    if sha256 and hashlib.sha256(blob).hexdigest() != sha256:
        raise InputError(f"sha256 of {p} is {hashlib.sha256(blob).hexdigest()}, config says {sha256}")
    try:
        return json.loads(blob)
    except json.JSONDecodeError as e:
        raise InputError(f"corrupt JSON in {p}: {e}") from None


def _date(text: str, formats: tuple[str, ...]) -> str:
    for f in formats:
        try:
            return dt.datetime.strptime(text.strip(), f).date().isoformat()
        except ValueError:
            pass
    raise InputError(f"unparseable session date {text!r}")


def load_locomo(path: str, sha256: str | None = None, limit: int | None = None):
    data = _read(path, sha256)
    convs, qas = [], []
    for sample in data[:limit] if limit else data:
        c = sample["conversation"]
        n = sorted(int(m.group(1)) for k in c for m in [re.fullmatch(r"session_(\d+)", k)] if m)
        sessions = []
        for s in n:
            turns = []
            for t in c[f"session_{s}"]:
                text = t["text"]
                if t.get("blip_caption"):
                    text += f" [shares an image: {t['blip_caption']}]"
                turns.append({"dia_id": t["dia_id"], "speaker": t["speaker"], "text": text})
            sessions.append({"session": s, "turns": turns,
                             "date": _date(c[f"session_{s}_date_time"], ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"))})
        cid = sample["sample_id"]
        convs.append({"conv_id": cid, "speakers": [c["speaker_a"], c["speaker_b"]], "sessions": sessions})
        for i, q in enumerate(sample["qa"]):
            cat = int(q["category"])
            ans = q.get("answer", q.get("adversarial_answer", ""))
            ev = [e.strip() for e in q.get("evidence", []) if e.strip()]
            qas.append({"conv_id": cid, "qid": f"{cid}-q{i}", "category": LOCOMO_CATEGORY.get(cat, str(cat)),
                        "category_id": cat, "question": q["question"], "answer": str(ans),
                        "evidence_groups": [] if cat == 5 else [[e] for e in ev],
                        "evidence": [] if cat == 5 else ev, "stale": None})
    return convs, qas


def load_longmemeval(path: str, sha256: str | None = None, limit: int | None = None):
    """One conversation per question (its haystack). Gold evidence: per answer session, the
    turns marked has_answer (the whole session where none is marked)."""
    data = _read(path, sha256)
    convs, qas = [], []
    for item in data[:limit] if limit else data:
        qid = item["question_id"]
        sessions, groups = [], []
        answer_sessions = set(item.get("answer_session_ids", []))
        for s, (sid, date, sess) in enumerate(zip(item["haystack_session_ids"], item["haystack_dates"],
                                                  item["haystack_sessions"])):
            turns = [{"dia_id": f"D{s + 1}:{t + 1}", "speaker": m["role"], "text": m["content"]}
                     for t, m in enumerate(sess)]
            sessions.append({"session": s + 1, "session_id": sid, "turns": turns,
                             "date": _date(date.split(" (")[0], ("%Y/%m/%d",))})
            if sid in answer_sessions:
                marked = [tr["dia_id"] for tr, m in zip(turns, sess) if m.get("has_answer")]
                groups.append(marked or [tr["dia_id"] for tr in turns])
        abstain = qid.endswith("_abs")
        convs.append({"conv_id": qid, "speakers": ["user", "assistant"], "sessions": sessions})
        # the category is LongMemEval's question type; `_abs` questions (abstention) keep their type
        qas.append({"conv_id": qid, "qid": qid, "question_date": item.get("question_date"),
                    "category": item["question_type"], "category_id": None,
                    "question_type": item["question_type"], "abstention": abstain,
                    "question": item["question"], "answer": str(item["answer"]),
                    "evidence_groups": [] if abstain else groups,
                    "evidence": [] if abstain else sorted({t for g in groups for t in g}), "stale": None})
    return convs, qas
