"""The prompting methods (the official code's
`verbalized_sampling/methods/prompt.py`; wording paraphrased, not copied), parsing of
verbalized lists (JSON as on real LLMs, and the tiny LM's word format), probability repair and
selection, and the fixed chat template that maps these chat prompts onto the tiny LM's formats.

Methods: direct, direct_cot, sequence, multi_turn, vs_standard, vs_cot, vs_multi. Each gives the
chat `messages` for one call; multi-turn methods continue a chat with `followup` messages.
"""
from __future__ import annotations

import json
import math
import re

METHODS = ("direct", "direct_cot", "sequence", "multi_turn", "vs_standard", "vs_cot", "vs_multi")
LIST_METHODS = ("sequence", "vs_standard", "vs_cot", "vs_multi")

SYSTEM = {
    "direct": "Generate a response to the input prompt. Output only the response.",
    "direct_cot": ("Think step by step, then answer. Return JSON with a \"reasoning\" field and "
                   "then a \"response\" field."),
    "sequence": ("Generate exactly {k} different responses to the input prompt. Return them as a "
                 "Python list of strings."),
    "multi_turn": "Generate a response to the input prompt. Output only the response.",
    "vs_standard": ("Generate {k} responses to the input prompt, each with its estimated "
                    "probability relative to the full distribution of possible responses. "
                    "Randomly sample the responses from the full distribution.{tail} Return JSON: "
                    "{{\"responses\": [{{\"text\": ..., \"probability\": ...}}]}}."),
    "vs_cot": ("First think step by step in a single \"reasoning\" field, then generate {k} "
               "responses, each with its estimated probability relative to the full distribution."
               " Randomly sample from the full distribution.{tail} Return JSON: {{\"reasoning\": ..., "
               "\"responses\": [{{\"text\": ..., \"probability\": ...}}]}}."),
    "vs_multi": ("You will generate {k} responses over several turns, each with its estimated "
                 "probability relative to the full distribution. Randomly sample from the full "
                 "distribution.{tail} This turn, give {m}. Return JSON: {{\"responses\": "
                 "[{{\"text\": ..., \"probability\": ...}}]}}."),
}
FOLLOWUP = {"multi_turn": "Generate an alternative response to the original input prompt.",
            "vs_multi": "Randomly sample {m} alternative responses with their probabilities."}


VS_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["responses"],
             "properties": {"responses": {"type": "array", "items": {
                 "type": "object", "additionalProperties": False,
                 "required": ["text", "probability"],
                 "properties": {"text": {"type": "string"}, "probability": {"type": "number"}}}}}}


def json_schema(method: str) -> dict | None:
    """Structured-output schema of a method (used where the backend has json_mode)."""
    if method in ("vs_standard", "vs_multi"):
        return VS_SCHEMA
    if method == "vs_cot":
        return {**VS_SCHEMA, "required": ["reasoning", "responses"],
                "properties": {"reasoning": {"type": "string"}, **VS_SCHEMA["properties"]}}
    if method == "direct_cot":
        return {"type": "object", "additionalProperties": False,
                "required": ["reasoning", "response"],
                "properties": {"reasoning": {"type": "string"}, "response": {"type": "string"}}}
    return None


def parse_single(method: str, text: str) -> str:
    """The response of a one-response method (Direct-CoT's JSON "response" field)."""
    if method == "direct_cot":
        obj = _json_block(text)
        if isinstance(obj, dict) and isinstance(obj.get("response"), str):
            return obj["response"].strip()
    return text.strip()


def tail_clause(p_threshold: float | None) -> str:
    """Diversity tuning: ask for responses whose probability is below p (None/-1 = off)."""
    if p_threshold is None or p_threshold < 0:
        return ""
    return f" Each response should have probability below {p_threshold:g}."


def messages(method: str, query: str, k: int = 5, m: int = 2,
             p_threshold: float | None = None) -> list[dict]:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r} (one of {METHODS})")
    system = SYSTEM[method].format(k=k, m=m, tail=tail_clause(p_threshold))
    return [{"role": "system", "content": system}, {"role": "user", "content": query}]


def followup(method: str, m: int = 2) -> dict:
    return {"role": "user", "content": FOLLOWUP[method].format(m=m)}


def calls_per_prompt(method: str, n: int, k: int, m: int = 2) -> tuple[int, list[int]]:
    """(chats, items asked per turn) to get n samples: direct n single calls; list methods n/k
    calls of k; vs_multi n/k chats of turns m, m, ..., rest (k=5, m=2 -> 2+2+1)."""
    if method in ("direct", "direct_cot"):
        return n, [1]
    if method == "multi_turn":
        return 1, [1] * n
    chats = math.ceil(n / k)
    if method == "vs_multi":
        turns = [m] * (k // m) + ([k % m] if k % m else [])
        return chats, turns
    return chats, [k]


# ---------------------------------------------------------------- parsing + repair
_PCT = re.compile(r"^\s*([-+]?\d*\.?\d+)\s*(%?)\s*$")


def repair_probability(value) -> float:
    """"70%" -> 0.70, "0.3" -> 0.3, negatives -> 0, > 1 clipped to 1, unparsable -> 0."""
    if isinstance(value, bool):
        return 0.0
    if isinstance(value, (int, float)):
        v = float(value)
    else:
        mt = _PCT.match(str(value))
        if not mt:
            return 0.0
        v = float(mt.group(1)) / (100 if mt.group(2) else 1)
    if math.isnan(v):
        return 0.0
    return min(1.0, max(0.0, v))


def _json_block(text: str):
    """The first JSON object in text (models often wrap it in prose or ``` fences)."""
    start = text.find("{")
    while start >= 0:
        depth = 0
        for i in range(start, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                try:
                    return json.loads(text[start:i + 1])
                except json.JSONDecodeError:
                    break
        start = text.find("{", start + 1)
    return None


def parse_verbalized(text: str) -> list[dict]:
    """[{"text", "probability"}] from a verbalized list: JSON {"responses": [...]} (also a bare
    list of strings, as Sequence asks), or the tiny word format "y1 p21 ; y2 p08 ; ...".
    Probabilities are repaired; items without one get None; empty texts are dropped."""
    obj = _json_block(text)
    if isinstance(obj, dict) and isinstance(obj.get("responses"), list):
        out = []
        for r in obj["responses"]:
            if isinstance(r, dict) and str(r.get("text", "")).strip():
                pr = r.get("probability", r.get("confidence"))
                out.append({"text": str(r["text"]).strip(),
                            "probability": None if pr is None else repair_probability(pr)})
            elif isinstance(r, str) and r.strip():
                out.append({"text": r.strip(), "probability": None})
        return out
    lb = text.find("[")
    if lb >= 0 and "{" not in text:
        try:
            lst = json.loads(text[lb:text.rfind("]") + 1])
            if isinstance(lst, list) and all(isinstance(s, str) for s in lst):
                return [{"text": s.strip(), "probability": None} for s in lst if s.strip()]
        except json.JSONDecodeError:
            pass
    out = []
    for part in text.split(";"):
        words = part.split()
        if not words:
            continue
        pr = None
        if re.fullmatch(r"p\d\d", words[-1]):
            pr, words = int(words[-1][1:]) / 100, words[:-1]
        if words:
            out.append({"text": " ".join(words), "probability": pr})
    return out


def select(items: list[dict], tau: float = 0.12, min_keep: int = 3, mode: str = "elicited") -> list[dict]:
    """The package's post-processing: drop items with p < tau but relax tau to keep >= min_keep,
    renormalise (elicited | softmax | uniform), sort descending."""
    if not items:
        return []
    ps = [it["probability"] or 0.0 for it in items]
    keep = [it for it, p in zip(items, ps) if p >= tau]
    if len(keep) < min(min_keep, len(items)):
        keep = sorted(items, key=lambda it: -(it["probability"] or 0.0))[:min(min_keep, len(items))]
    w = [it["probability"] or 0.0 for it in keep]
    if mode == "uniform" or sum(w) <= 0:
        w = [1.0] * len(keep)
    elif mode == "softmax":
        mx = max(w)
        w = [math.exp(x - mx) for x in w]
    s = sum(w)
    out = [{**it, "weight": x / s} for it, x in zip(keep, w)]
    return sorted(out, key=lambda it: -it["weight"])


# ---------------------------------------------------------------- tiny LM chat template
_TINY_TAG = {"direct": "direct", "sequence": "sequence", "vs_standard": "vs"}


def method_of(messages_: list[dict]) -> str:
    sys_ = next((m["content"] for m in messages_ if m["role"] == "system"), "")
    for name, tpl in SYSTEM.items():
        if sys_.startswith(tpl.split("{")[0]):
            return name
    raise ValueError("unknown system prompt")


def tiny_chat_format(messages_: list[dict]) -> str:
    """The tiny LM knows three formats; this fixed template maps a chat prompt of method
    direct / sequence / vs_standard whose user message is "... about <topic>" to its prompt."""
    method = method_of(messages_)
    if method not in _TINY_TAG:
        raise ValueError(f"the tiny LM was not trained on method {method!r}")
    user = [m["content"] for m in messages_ if m["role"] == "user"][0]
    topic = user.rstrip(". ").split()[-1]
    return f"{_TINY_TAG[method]} {topic} :"
