"""Answer generation from a retrieved memory context and LLM-judge scoring (the paper's QA
metric, arXiv 2602.03315 Tables 1-2: "LLM-judge" accuracy).

The paper reports LLM-judge accuracy on LoCoMo (categories 1-4; the adversarial category 5 is
excluded) and LongMemEval_S. The prompts below are OUR WORDS: we could not read the paper's
appendix prompts, so they follow the evaluation protocols the paper cites:

- answering (both benchmarks): Mem0's LoCoMo answer prompt (github.com/mem0ai/mem0,
  evaluation/prompts.py ANSWER_PROMPT): answer from the memories only, mind their timestamps,
  prefer the most recent of contradicting memories, turn relative dates into absolute ones, a
  short answer (at most 5-6 words).
- LoCoMo judge: Mem0's LLM judge (evaluation/metrics/llm_judge.py ACCURACY_PROMPT): label the
  generated answer CORRECT or WRONG against the gold answer, generously (same topic / same date
  or period counts), one-sentence reason, the label as JSON {"label": ...}; category 5 skipped.
- LongMemEval judge: LongMemEval's evaluate_qa.py (github.com/xiaowu0162/LongMemEval,
  src/evaluation/evaluate_qa.py `get_anscheck_prompt`): a yes/no check per question type
  (off-by-one day counts allowed for temporal-reasoning, an updated answer next to older
  information allowed for knowledge-update, a rubric for single-session-preference, and for
  `_abs` questions whether the response says the question cannot be answered).

A judge reply that holds no verdict (no CORRECT/WRONG label, or both; no yes/no, or both) is a
judge failure: label None, counted and reported per category, never scored as right or wrong.
"""
from __future__ import annotations

import re

from .prompted import parse_json

ANSWER = """You answer questions from the memories of a long conversation between two people.

Memories (each may carry the date of the session it comes from):
{memories}
{today}
Rules:
1. Use only these memories; look for direct evidence of the asked fact or event.
2. Mind the dates. If memories contradict each other, trust the most recent one.
3. Turn relative times ("last year", "two weeks ago") into absolute dates, months or years
   using the date of the memory that mentions them, and give the absolute form.
4. Do not confuse people named inside a memory with the two speakers.
5. Keep the answer short: at most 5-6 words.

Question: {question}
Answer:"""

LOCOMO_JUDGE = """Label an answer to a question as CORRECT or WRONG. You get
(1) a question that one person asks another about their past conversations,
(2) the gold (ground-truth) answer, usually short, naming the topic asked about,
(3) a generated answer.
Be generous: a generated answer may be much longer than the gold answer; it is CORRECT as long
as it is about the same thing as the gold answer. For questions about time, it is CORRECT if it
refers to the same date or period as the gold answer, whatever the format ("May 7th" and
"7 May" are the same date) or if it uses a relative reference that resolves to it.

Question: {question}
Gold answer: {gold}
Generated answer: {response}

Give a one-sentence reason, then the label. Never write both labels. End with JSON:
{{"label": "CORRECT"}} or {{"label": "WRONG"}}."""

_LME_HEAD = ("I will give you a question, a correct answer, and a response from a model. Answer yes if "
             "the response contains the correct answer, or is equivalent to it, or contains all the "
             "intermediate steps that lead to it; otherwise answer no. If the response contains only part "
             "of the information the answer needs, answer no.")
LME_JUDGE = {
    "default": _LME_HEAD,
    "temporal-reasoning": _LME_HEAD + (" Do not penalise off-by-one errors in a number of days (or weeks, "
                                       "months, ...): a response of 19 days for a correct answer of 18 "
                                       "days is still correct."),
    "knowledge-update": ("I will give you a question, a correct answer, and a response from a model. Answer "
                         "yes if the response contains the correct answer, otherwise no. A response that "
                         "also mentions earlier information is correct as long as the updated answer it "
                         "gives is the correct answer."),
    "single-session-preference": ("I will give you a question, a rubric describing the desired personalised "
                                  "response, and a response from a model. Answer yes if the response "
                                  "satisfies the rubric, otherwise no. It need not cover every point of the "
                                  "rubric: it is correct as long as it recalls and uses the user's personal "
                                  "information correctly."),
    "abstention": ("I will give you a question that cannot be answered, an explanation of why, and a response "
                   "from a model. Answer yes if the model identifies the question as unanswerable (for "
                   "example it says the information is missing or incomplete, or that other information "
                   "was given but not the one asked for); otherwise answer no."),
}
_LME_TAIL = {"single-session-preference": "Rubric", "abstention": "Explanation"}
LME_TYPES = ("single-session-user", "single-session-assistant", "single-session-preference", "multi-session",
             "knowledge-update", "temporal-reasoning")


def excluded(q: dict) -> bool:
    """LoCoMo's adversarial category 5 is neither answered nor judged (Mem0's protocol, which
    the paper's LoCoMo numbers over categories 1-4 follow)."""
    return q.get("category_id") == 5


def answer_prompt(q: dict, memories: list[str]) -> str:
    listing = "\n".join(f"- {m}" for m in memories) or "(no memories retrieved)"
    today = f"Current date: {q['question_date']}\n" if q.get("question_date") else ""
    return ANSWER.format(memories=listing, today=today, question=q["question"])


def judge_kind(q: dict) -> str:
    """`locomo` (CORRECT/WRONG) for LoCoMo and the generated data, `lme` (yes/no) for
    LongMemEval questions (they carry a question_type)."""
    return "lme" if q.get("question_type") else "locomo"


def judge_prompt(q: dict, response: str) -> str:
    if judge_kind(q) == "locomo":
        return LOCOMO_JUDGE.format(question=q["question"], gold=q["answer"], response=response)
    kind = "abstention" if q.get("abstention") else q["question_type"]
    head = LME_JUDGE.get(kind, LME_JUDGE["default"])
    tail = _LME_TAIL.get(kind, "Correct Answer")
    ask = ("Does the model correctly identify the question as unanswerable?" if kind == "abstention"
           else "Is the model response correct?")
    return (f"{head}\n\nQuestion: {q['question']}\n\n{tail}: {q['answer']}\n\nModel Response: {response}\n\n"
            f"{ask} Answer yes or no only.")


def parse_locomo_label(reply: str) -> bool | None:
    """True (CORRECT) / False (WRONG) / None (no verdict). The JSON {"label": ...} first; else
    the one label word written in capitals (Mem0's prompt forbids writing both)."""
    label = parse_json(reply).get("label")
    if isinstance(label, str) and label.strip().upper() in ("CORRECT", "WRONG"):
        return label.strip().upper() == "CORRECT"
    words = set(re.findall(r"\b(CORRECT|WRONG)\b", reply))
    return None if len(words) != 1 else words == {"CORRECT"}


def parse_yes_no(reply: str) -> bool | None:
    """True (yes) / False (no) / None (neither word, or both). LongMemEval's own script reads any
    reply without the substring "yes" as no; we count such a reply as a judge failure instead."""
    words = set(re.findall(r"[a-z]+", reply.lower()))
    yes, no = "yes" in words, "no" in words
    return None if yes == no else yes


def parse_label(q: dict, reply: str) -> bool | None:
    return parse_locomo_label(reply) if judge_kind(q) == "locomo" else parse_yes_no(reply)


def accuracy_table(rows: list[dict]) -> list[dict]:
    """rows: judged answers {store, policy, category, label (True/False/None)} -> one row per
    (store, policy, category) and category 'all': n, correct, wrong, failed (no verdict),
    accuracy = correct / (correct + wrong) (None when nothing was judged)."""
    out = []
    for st, po in sorted({(r["store"], r["policy"]) for r in rows}):
        mine = [r for r in rows if (r["store"], r["policy"]) == (st, po)]
        for cat in sorted({r["category"] for r in mine}) + ["all"]:
            sel = [r for r in mine if cat == "all" or r["category"] == cat]
            c = sum(r["label"] is True for r in sel)
            w = sum(r["label"] is False for r in sel)
            out.append({"store": st, "policy": po, "category": cat, "n": len(sel), "correct": c, "wrong": w,
                        "failed": len(sel) - c - w, "accuracy": c / (c + w) if c + w else None})
    return out
