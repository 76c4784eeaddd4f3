"""`PromptedMemoraLLM`: Memora's curating and policy calls as prompts to any
`methods.core.llm.LLM` (paper scale: gpt-4.1-mini or an open model behind an OpenAI-compatible
endpoint). Prompts paraphrase the paper's App. A (our words); replies are JSON."""
from __future__ import annotations

import json
import re

from .memory import Candidate, Entry, MemoraLLM

EXTRACT = """You curate a long-term memory. From the message below, extract the factual memories
worth keeping. Each memory has a "index": a short unambiguous phrase naming what it is about,
with its entity (e.g. "Jane's city of residence"), and a "value": 1-2 sentences with pronouns
resolved to names and relative dates made absolute using the session date {date}.
Speaker: {speaker}
Message: {text}
Reply with JSON only: {{"memories": [{{"index": "...", "value": "..."}}]}} (an empty list if none)."""

JUDGE = """A new memory may describe the same thing as an existing entry.
New: index "{index}", value "{value}"
Existing entries:
{entries}
Reply with JSON only: {{"match": <the number of the entry about the same thing, or null>}}."""

MERGE = """Merge the new information into the memory entry. Keep the most recent facts first,
note superseded values briefly, keep 1-3 sentences.
Entry: index "{index}", value "{value}"
New: "{new}"
Reply with JSON only: {{"index": "...", "value": "..."}}."""

ANCHORS = """Write 1-3 cue anchors for this memory: phrases of 2-4 words, "[main entity] [key aspect]"
(e.g. "Jane hiking"), atomic, no dates or numbers, not equal to the index.
Index: {index}
Value: {value}
Reply with JSON only: {{"anchors": ["...", "..."]}}."""

POLICY = """Question: {question}
Retrieved memories:
{entries}
Decide whether these memories suffice to answer, and list entity names mentioned in them that
the question needs but does not name (bridge entities).
Reply with JSON only: {{"sufficient": true|false, "bridges": ["..."]}}."""


def parse_json(text: str) -> dict:
    """The first JSON object in a reply ({} when none parses)."""
    m = re.search(r"\{.*\}", text, re.S)
    if not m:
        return {}
    try:
        out = json.loads(m.group(0))
    except json.JSONDecodeError:
        return {}
    return out if isinstance(out, dict) else {}


class PromptedMemoraLLM(MemoraLLM):
    def __init__(self, llm, max_new_tokens: int = 512, seed: int = 42):
        self.llm, self.max_new_tokens, self.seed = llm, max_new_tokens, seed
        self._policy_cache: dict = {}
        self.n_calls = self.n_unparsed = 0   # replies with no JSON object count as "nothing" (reported)

    def _ask(self, prompt: str) -> dict:
        reply = self.llm.chat([[{"role": "user", "content": prompt}]], max_new_tokens=self.max_new_tokens,
                              temperature=0.0, seed=self.seed)[0][0]
        out = parse_json(reply)
        self.n_calls += 1
        self.n_unparsed += not out
        return out

    def extract(self, text, speaker, date, source):
        out = []
        for m in self._ask(EXTRACT.format(date=date, speaker=speaker, text=text)).get("memories", []) or []:
            if isinstance(m, dict) and m.get("index") and m.get("value"):
                out.append(Candidate(str(m["index"]), str(m["value"]), source, {"v": str(m["value"])}))
        return out

    def judge(self, cand, similar):
        if not similar:
            return None
        listing = "\n".join(f"{i + 1}. index \"{e.abstraction}\", value \"{e.value}\"" for i, e in enumerate(similar))
        k = self._ask(JUDGE.format(index=cand.abstraction, value=cand.value, entries=listing)).get("match")
        return similar[k - 1] if isinstance(k, int) and 1 <= k <= len(similar) else None

    def merge(self, entry, cand):
        r = self._ask(MERGE.format(index=entry.abstraction, value=entry.value, new=cand.value))
        return str(r.get("index") or entry.abstraction), str(r.get("value") or f"{cand.value} {entry.value}")

    def anchors(self, abstraction, value, meta):
        r = self._ask(ANCHORS.format(index=abstraction, value=value)).get("anchors", []) or []
        return [a for a in map(str, r) if a and a != abstraction and 2 <= len(a.split()) <= 4][:3]

    def _decide(self, question: str, values: list[str]) -> dict:
        key = (question, tuple(values))
        if key not in self._policy_cache:
            listing = "\n".join(f"- {v}" for v in values)
            self._policy_cache[key] = self._ask(POLICY.format(question=question, entries=listing))
        return self._policy_cache[key]

    def bridges(self, question, values):
        return [str(b) for b in self._decide(question, values).get("bridges", []) or [] if str(b) not in question]

    def sufficient(self, question, entries: list[Entry]):
        return bool(self._decide(question, [e.value for e in entries]).get("sufficient", False))
