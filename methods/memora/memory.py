"""Memora's memory (primary abstractions indexing verbatim values, consolidation, cue anchors),
its retrieval policies, and the two baselines it generalises (flat RAG, a Mem0-like fact store).

Every LLM decision (extract facts, judge a consolidation match, merge values, write anchors,
decide REFINE/EXPAND/STOP) is a method of a `MemoraLLM`:
- `TemplateMemoraLLM`: a deterministic *simulator* of the curating/policy LLM that parses the
  template sentences of `synth.py` (tiny scale). It stands in for gpt-4.1-mini's extraction,
  consolidation judge and prompted policy; it is exact on our templates, so tiny results
  measure the memory/retrieval mechanism, not an LLM's extraction quality.
- `PromptedMemoraLLM` (prompted.py): the same calls as prompts to any `methods.core.llm.LLM`.

Embeddings go through `EmbeddingCache` (texts embedded once in the DAG, the MiniLM model loaded
lazily only on a cache miss) or `HashEmbedder` (a bag-of-words hashing embedder for unit tests).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
from typing import Callable

import numpy as np

from . import synth
from .config import BuildConfig, PolicyConfig

Embed = Callable[[list[str]], np.ndarray]
TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def n_tokens(text: str) -> int:
    """Context size in word/punctuation tokens (a tokenizer-free proxy, same for every store)."""
    return len(TOKEN_RE.findall(text))


# --------------------------------------------------------------------------- embeddings
class HashEmbedder:
    """Deterministic bag-of-words embedder (unit vectors): tests and offline fallbacks only."""

    def __init__(self, dim: int = 256):
        self.dim = dim

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                h = int.from_bytes(hashlib.md5(w.encode()).digest()[:4], "little")
                out[i, h % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


class EmbeddingCache:
    """text -> unit vector, pre-filled from the DAG's embedding step; misses are embedded by
    `fallback` (created lazily, so a full cache never loads the encoder) and remembered."""

    def __init__(self, texts: list[str] | None = None, vecs: np.ndarray | None = None,
                 fallback: Callable[[], Embed] | None = None):
        self.table = {t: v for t, v in zip(texts or [], vecs if vecs is not None else [])}
        self._fallback_factory, self._fallback = fallback, None
        self.misses = 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        missing = sorted({t for t in texts if t not in self.table})
        if missing:
            if self._fallback is None:
                if self._fallback_factory is None:
                    raise KeyError(f"{len(missing)} texts not in the embedding cache, e.g. {missing[0]!r}")
                self._fallback = self._fallback_factory()
            self.misses += len(missing)
            for t, v in zip(missing, self._fallback(missing)):
                self.table[t] = v
        dim = next(iter(self.table.values())).shape[0] if self.table else 384
        return np.stack([self.table[t] for t in texts]).astype(np.float32) if texts else np.zeros((0, dim), np.float32)


def make_embedder(kind: str) -> Callable[[], Embed]:
    if kind == "minilm":
        def load():
            from methods.core.llm import Embedder
            return Embedder()
        return load
    if kind == "hash":
        return lambda: HashEmbedder()
    raise ValueError(f"unknown embedder {kind!r}")


def cosine_topk(mat: np.ndarray, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and cosine scores of the k rows of `mat` most similar to `q`, best first, ties
    by lower index."""
    if len(mat) == 0:
        return np.zeros(0, int), np.zeros(0, np.float32)
    scores = (mat @ q) / np.maximum(np.linalg.norm(mat, axis=1) * np.linalg.norm(q), 1e-12)
    order = np.lexsort((np.arange(len(scores)), -scores))[:k]
    return order, scores[order]


# --------------------------------------------------------------------------- data structures
@dataclasses.dataclass
class Entry:
    id: int
    abstraction: str          # primary abstraction: the only indexed text (with the anchors)
    value: str                # returned verbatim, never embedded
    sources: list[str]        # turn ids (D{session}:{turn}) this entry was built from
    anchors: list[str] = dataclasses.field(default_factory=list)
    meta: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Candidate:
    abstraction: str
    value: str
    source: str
    meta: dict


class Store:
    """Entries + abstraction vectors + (optionally) cue anchors linking entries many-to-many."""

    def __init__(self, name: str, embed: Embed, use_anchors: bool):
        self.name, self.embed, self.use_anchors = name, embed, use_anchors
        self.entries: dict[int, Entry] = {}
        self.links: dict[str, set[int]] = {}     # anchor -> entry ids
        self._next = 0
        self.n_updates = 0

    # -- bookkeeping
    def add(self, abstraction, value, sources, meta=None, anchors=()) -> Entry:
        e = Entry(self._next, abstraction, value, list(sources), [], dict(meta or {}))
        self._next += 1
        self.entries[e.id] = e
        self.set_anchors(e, anchors)
        return e

    def set_anchors(self, e: Entry, anchors) -> None:
        """Relink `e` to `anchors` (existing anchor -> link, else create); prune empty anchors."""
        for a in e.anchors:
            self.links[a].discard(e.id)
            if not self.links[a]:
                del self.links[a]
        e.anchors = list(dict.fromkeys(anchors)) if self.use_anchors else []
        for a in e.anchors:
            self.links.setdefault(a, set()).add(e.id)

    def remove(self, eid: int) -> None:
        self.set_anchors(self.entries[eid], [])
        del self.entries[eid]

    def ids(self) -> list[int]:
        return sorted(self.entries)

    def neighbours(self, eid: int) -> set[int]:
        """Entries sharing a cue anchor with `eid`."""
        out = set()
        for a in self.entries[eid].anchors:
            out |= self.links.get(a, set())
        out.discard(eid)
        return out

    # -- search
    def scores(self, q: np.ndarray) -> tuple[list[int], np.ndarray]:
        """Per entry: cosine(query, abstraction), or its max with the cosine to each of the
        entry's anchors (InitFrontier's joint matching) when anchors are on."""
        ids = self.ids()
        if not ids:
            return ids, np.zeros(0, np.float32)
        absv = self.embed([self.entries[i].abstraction for i in ids])
        s = (absv @ q) / np.maximum(np.linalg.norm(absv, axis=1) * np.linalg.norm(q), 1e-12)
        if self.use_anchors and self.links:
            names = sorted(self.links)
            av = self.embed(names)
            asc = dict(zip(names, (av @ q) / np.maximum(np.linalg.norm(av, axis=1) * np.linalg.norm(q), 1e-12)))
            s = np.array([max([s[j]] + [asc[a] for a in self.entries[i].anchors])
                          for j, i in enumerate(ids)], dtype=s.dtype)
        return ids, s

    def search(self, q: np.ndarray, k: int) -> list[tuple[int, float]]:
        ids, s = self.scores(q)
        order = np.lexsort((np.arange(len(s)), -s))[:k]
        return [(ids[j], float(s[j])) for j in order]


# --------------------------------------------------------------------------- the LLM interface
class MemoraLLM:
    """The curating + policy LLM of Memora (one method per prompt of the paper's App. A)."""

    def extract(self, text: str, speaker: str, date: str, source: str) -> list[Candidate]:
        raise NotImplementedError

    def judge(self, cand: Candidate, similar: list[Entry]) -> Entry | None:
        raise NotImplementedError

    def merge(self, entry: Entry, cand: Candidate) -> tuple[str, str]:
        """(new abstraction, new value) of an Update."""
        raise NotImplementedError

    def anchors(self, abstraction: str, value: str, meta: dict) -> list[str]:
        raise NotImplementedError

    def bridges(self, question: str, values: list[str]) -> list[str]:
        """Entities named in retrieved values that the question needs but does not name."""
        raise NotImplementedError

    def sufficient(self, question: str, entries: list[Entry]) -> bool:
        raise NotImplementedError


ASPECT_WORDS = {"city": "city of residence", "job": "job", "pet": "pet", "hobby": "hobby"}
_VALUE = {"city": "{e} lives in {v}.", "job": "{e} works as a {v}.", "pet": "{e} has a {v}.",
          "hobby": "{e} enjoys {v}."}


def _template_regexes():
    out = []
    for kind, temps in synth.TEMPLATES.items():
        for t in temps:
            pat = re.escape(t).replace(r"\{v\}", r"(?P<v>.+?)").replace(r"\{sib\}", r"(?P<sib>[A-Z]\w+)")
            pat = pat.replace(r"\{rel\}", r"(?P<rel>sister|brother)")
            out.append((kind, re.compile("^" + pat + r"(?:\s|$)")))
    return out


class TemplateMemoraLLM(MemoraLLM):
    """Simulator of the LLM for the synthetic templates (see module docstring)."""

    REGEXES = _template_regexes()
    Q_BRIDGE = re.compile(r"(?:What pet does|Where does|What is the job of) (\w+)'s (sister|brother)")
    Q_ASPECT = [(re.compile(r"\bpet\b"), "pet"), (re.compile(r"^Where does"), "city"),
                (re.compile(r"\bjob\b"), "job"), (re.compile(r"\bhobby\b"), "hobby")]

    def extract(self, text, speaker, date, source):
        for kind, rx in self.REGEXES:
            m = rx.match(text)
            if not m:
                continue
            g = m.groupdict()
            v = g.get("v")
            if kind in ("city", "job", "pet", "hobby", "move", "newjob"):
                aspect = {"move": "city", "newjob": "job"}.get(kind, kind)
                value = _VALUE[aspect].format(e=speaker, v=v)
                if kind in ("move", "newjob"):
                    value = value[:-1] + f" (since {synth.fmt_date(dt.date.fromisoformat(date))})."
                return [Candidate(f"{speaker}'s {ASPECT_WORDS[aspect]}", value, source,
                                  {"entity": speaker, "aspect": aspect, "v": v})]
            if kind == "sibling":
                return [Candidate(f"{speaker}'s {g['rel']}", f"{speaker}'s {g['rel']} is {g['sib']}.", source,
                                  {"entity": speaker, "aspect": g["rel"], "v": g["sib"], "other": g["sib"]})]
            if kind.startswith("sib_"):
                aspect = kind[4:]
                return [Candidate(f"{g['sib']}'s {ASPECT_WORDS[aspect]}", _VALUE[aspect].format(e=g["sib"], v=v),
                                  source, {"entity": g["sib"], "aspect": aspect, "v": v})]
            if kind == "event":
                when = synth.fmt_date(dt.date.fromisoformat(date) - dt.timedelta(days=1))
                return [Candidate(f"{speaker} {v}", f"{speaker} {v} on {when}.", source,
                                  {"entity": speaker, "aspect": "event:" + v, "v": when})]
        return []

    def judge(self, cand, similar):
        for e in similar:
            if (e.meta.get("entity"), e.meta.get("aspect")) == (cand.meta["entity"], cand.meta["aspect"]):
                return e
        return None

    def merge(self, entry, cand):
        if entry.meta.get("v") == cand.meta["v"]:
            return entry.abstraction, entry.value        # a restatement: keep, add the source
        latest = entry.value.split(" Previously: ")[0]
        return entry.abstraction, f"{cand.value} Previously: {latest}"

    def anchors(self, abstraction, value, meta):
        e, aspect = meta["entity"], meta["aspect"]
        out = [f"{e} {'events' if aspect.startswith('event:') else aspect}", f"{e} life"]
        if meta.get("other"):
            out.append(f"{meta['other']} life")
        return [a for a in out if a != abstraction][:3]

    def _target(self, question):
        aspect = next((a for rx, a in self.Q_ASPECT if rx.search(question)), None)
        m = self.Q_BRIDGE.search(question)
        return (m.group(1), m.group(2)) if m else None, aspect

    def bridges(self, question, values):
        rel, _ = self._target(question)
        if rel is None:
            return []
        rx = re.compile(rf"{rel[0]}'s {rel[1]} is (\w+)")
        found = [m.group(1) for v in values for m in [rx.search(v)] if m]
        return [b for b in dict.fromkeys(found) if b not in question]

    def sufficient(self, question, entries):
        rel, aspect = self._target(question)
        if aspect is None:
            return True     # temporal / unknown aspect: the simulated policy stops at once
        if rel is None:
            m = re.search(r"(?:does|is) ([A-Z]\w+)(?:'s)? ", question)
            target = m.group(1) if m else None
        else:
            target = next(iter(self.bridges(question, [e.value for e in entries])), None)
            if target is None:
                return False
        want = f"{target}'s {ASPECT_WORDS[aspect]}"
        return any(e.abstraction == want for e in entries)


# --------------------------------------------------------------------------- building stores
def turn_stream(conv: dict):
    for s in conv["sessions"]:
        for t in s["turns"]:
            yield s["date"], t


def build_memora(conv: dict, llm: MemoraLLM, embed: Embed, cfg: BuildConfig, anchors: bool = True,
                 name: str = "memora") -> Store:
    """Extraction -> consolidation (top-k by abstraction cosine, threshold gamma, LLM judge;
    Update merges, else Create) -> cue anchors (link/create, prune on relink)."""
    st = Store(name, embed, anchors)
    for date, t in turn_stream(conv):
        for c in llm.extract(t["text"], t["speaker"], date, t["dia_id"]):
            match = None
            if st.entries:
                ids = st.ids()
                mat = embed([st.entries[i].abstraction for i in ids])
                order, sc = cosine_topk(mat, embed([c.abstraction])[0], cfg.consolidate_k)
                similar = [st.entries[ids[j]] for j, s in zip(order, sc) if s >= cfg.gamma]
                match = llm.judge(c, similar)
            if match is None:
                st.add(c.abstraction, c.value, [c.source], c.meta, llm.anchors(c.abstraction, c.value, c.meta))
            else:
                st.n_updates += 1
                match.abstraction, match.value = llm.merge(match, c)
                match.sources.append(c.source)
                match.meta["v"] = c.meta["v"]
                st.set_anchors(match, llm.anchors(match.abstraction, match.value, match.meta))
    return st


def build_factstore(conv: dict, llm: MemoraLLM, embed: Embed) -> Store:
    """Mem0-like baseline: one entry per extracted fact, append-only, no anchors."""
    st = Store("factstore", embed, False)
    for date, t in turn_stream(conv):
        for c in llm.extract(t["text"], t["speaker"], date, t["dia_id"]):
            st.add(c.abstraction, c.value, [c.source], c.meta)
    return st


def rag_chunks(conv: dict, chunk_turns: int) -> list[tuple[str, list[str]]]:
    """(text, turn ids) of consecutive `chunk_turns`-turn chunks within each session."""
    out = []
    for s in conv["sessions"]:
        ts = s["turns"]
        for i in range(0, len(ts), chunk_turns):
            part = ts[i:i + chunk_turns]
            out.append(("\n".join(f"[{s['date']}] {t['speaker']}: {t['text']}" for t in part),
                        [t["dia_id"] for t in part]))
    return out


class RAGIndex:
    """Flat RAG over chunks (its own code path: a matrix of chunk vectors, one top-k)."""

    def __init__(self, chunks: list[tuple[str, list[str]]], embed: Embed):
        self.texts = [c[0] for c in chunks]
        self.sources = [c[1] for c in chunks]
        self.mat = embed(self.texts)

    def search(self, q: np.ndarray, k: int) -> list[tuple[int, float]]:
        order, sc = cosine_topk(self.mat, q, k)
        return [(int(i), float(s)) for i, s in zip(order, sc)]


def rag_as_memora(chunks, embed: Embed) -> Store:
    """Theorem D.1's instance: a(s) = v(s) = chunk s, no anchors."""
    st = Store("rag_as_memora", embed, False)
    for text, src in chunks:
        st.add(text, text, src)
    return st


# --------------------------------------------------------------------------- retrieval
def retrieve(store: Store, question: str, embed: Embed, policy: str, llm: MemoraLLM,
             cfg: PolicyConfig) -> dict:
    """Alg. 1. `semantic`: one top-k lookup, STOP. `policy`: W0 = the semantic set, frontier =
    anchor neighbours of W; loop: STOP if sufficient, else REFINE (append a bridge entity found
    in W's values), else EXPAND the `expand` frontier entries most similar to the current query;
    each action costs 1 of budget B."""
    q = question
    hits = store.search(embed([q])[0], cfg.k)
    W = [i for i, _ in hits]
    score = {i: s for i, s in hits}
    actions = ["QUERY"]
    if policy == "policy":
        F = set().union(*[store.neighbours(i) for i in W]) - set(W) if W else set()
        b = cfg.budget
        while b > 0:
            entries = [store.entries[i] for i in W]
            if llm.sufficient(question, entries):
                break
            new = [x for x in llm.bridges(question, [e.value for e in entries]) if x not in q]
            if new:
                q = q + " " + " ".join(new)
                actions.append("REFINE")
            elif F:
                ids = sorted(F)
                qv = embed([q])[0]
                order, sc = cosine_topk(embed([store.entries[i].abstraction for i in ids]), qv, cfg.expand)
                dW = [ids[j] for j in order]
                for j, s in zip(order, sc):
                    score[ids[j]] = float(s)
                W += dW
                F = (F | set().union(*[store.neighbours(i) for i in dW])) - set(W)
                actions.append("EXPAND")
            else:
                break
            b -= 1
        actions.append("STOP")
    elif policy != "semantic":
        raise ValueError(f"unknown policy {policy!r}")
    else:
        actions.append("STOP")
    return {"ids": W, "scores": [score[i] for i in W], "actions": actions, "final_query": q,
            "values": [store.entries[i].value for i in W],
            "evidence": sorted({s for i in W for s in store.entries[i].sources})}
