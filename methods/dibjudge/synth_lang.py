"""Synthetic languages with a translationese signature (our tiny design) and the proxy labels
(length, NLL and TTR bins, as in the official DIBJudge code, `proxy_tasks.py`).

A fact world (people, objects, colours, counts). EN is SVO. L1/L2 map every EN word to 2-4
synonyms (L2 more: the "low-resource" language), use SOV order, case suffixes and optional
particles. "human" L-text samples synonyms per occurrence in native order; "translationese" (MT)
is a word-by-word map of the EN sentence: EN order, always the most frequent synonym, no
particles -> closer to EN structure, lower NLL under an EN-order LM, lower type-token ratio.
Pure python (no torch): this is the data step.
"""
from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

from methods.core.results import write_json, write_jsonl

from .config import DataConfig

LANGS = ("EN", "L1", "L2")     # the fields of config.NTrain; L1, L2 those of config.NSynonyms


FUNC = ("the", "of", "has", ":", "what", "colour", "count", "is", "fact")


class World:
    """Words and per-language lexicons; deterministic given the config."""

    def __init__(self, cfg: DataConfig):
        self.cfg = cfg
        self.people = [f"p{i}" for i in range(cfg.n_people)]
        self.objects = [f"o{i}" for i in range(cfg.n_objects)]
        self.colours = [f"c{i}" for i in range(cfg.n_colours)]
        self.counts = [f"n{i}" for i in range(1, cfg.max_count + 1)]
        self.lex = {}  # lang -> EN word -> list of synonyms, most frequent first
        for lang in ("L1", "L2"):
            k = getattr(self.cfg.n_synonyms, lang)
            lx = {}
            for w in self.objects + list(FUNC):
                lx[w] = [f"{lang}_{w}_{s}" for s in range(k)]
            # names are transliterated and fact values (colours, counts) have one form each, so
            # correctness is checkable by exact token match between context and answer
            for w in self.people + self.colours + self.counts:
                lx[w] = [f"{lang}_{w}"]
            self.lex[lang] = lx
        # Zipf-like synonym frequencies for human text (most frequent first)
        self.syn_w = {lang: [1.0 / (s + 1) for s in range(getattr(self.cfg.n_synonyms, lang))] for lang in ("L1", "L2")}

    def word(self, rng, lang, w, style):
        if lang == "EN":
            return w
        forms = self.lex[lang][w]
        if style == "mt" or len(forms) == 1:
            return forms[0]
        return rng.choices(forms, weights=self.syn_w[lang][:len(forms)])[0]

    # --- sentences -------------------------------------------------------------------------
    def en_answer(self, p, o, n, c):
        """EN: 'the o of p : p has n c o' (n or c may be None = omitted)."""
        return ["the", o, "of", p, ":", p, "has"] + [x for x in (n, c) if x] + [o]

    def render(self, rng, lang, en, p, o, n, c, style):
        if lang == "EN" or style == "mt":
            # translationese: word-by-word map of the EN sentence (EN order, no particles)
            return [self.word(rng, lang, w, "mt") for w in en]
        W = lambda w: self.word(rng, lang, w, "human")  # noqa: E731
        toks = [W(p), f"{lang}_GEN", W(o), f"{lang}_TOP", W(":"), W(p), f"{lang}_SUBJ"]
        toks += [W(x) for x in (n, c) if x] + [W(o), f"{lang}_OBJ", W("has")]
        if rng.random() < self.cfg.particle_prob:
            toks.insert(rng.randrange(1, len(toks)), f"{lang}_PRT{rng.randrange(3)}")
        return toks

    def context(self, rng, lang, facts):
        out = []
        for (p, o, n, c) in facts:
            out += [self.word(rng, lang, w, "human") for w in ("fact", p, "has", n, c, o)]
        return out

    def question(self, rng, lang, attr, p, o):
        return [self.word(rng, lang, w, "human") for w in ("what", attr, "is", "the", o, "of", p)]


def _response(world, rng, lang, facts, attr, style, correct, omit_frac, swap_frac):
    """A response about facts[0]. Incorrect: the asked value is omitted (prob. omit_frac), else
    replaced by the distractor fact's value (prob. swap_frac, when it differs: needs binding
    to detect) or by a value that occurs nowhere in the context (detectable by token match)."""
    p, o, n, c = facts[0]
    if not correct:
        omit = rng.random() < omit_frac
        k = 3 if attr == "colour" else 2
        pool = world.colours if attr == "colour" else world.counts
        if omit:
            v = None
        elif facts[1][k] != facts[0][k] and rng.random() < swap_frac:
            v = facts[1][k]  # swapped: the distractor fact's value (in the context, wrong binding)
        else:               # hallucinated: a value that occurs nowhere in the context
            v = rng.choice([x for x in pool if all(x != f[k] for f in facts)])
        c, n = (v, n) if attr == "colour" else (c, v)
    en = world.en_answer(p, o, n, c)
    return {"text": " ".join(world.render(rng, lang, en, p, o, n, c, style)), "en": " ".join(en),
            "style": style, "correct": correct}


def make_pair(world, rng, lang, better_style, worse_style, worse_correct=False, omit_frac=0.5, swap_frac=0.5):
    """One judge item: context (2 facts, one a distractor), question, responses A/B, label."""
    w = world
    facts = []
    while len(facts) < 2:
        f = (rng.choice(w.people), rng.choice(w.objects), rng.choice(w.counts), rng.choice(w.colours))
        if all(f[:2] != g[:2] for g in facts):
            facts.append(f)
    rng.shuffle(facts)
    fact = facts[0]
    attr = rng.choice(["colour", "count"])
    prompt = w.context(rng, lang, facts) + ["|"] + w.question(rng, lang, attr, fact[0], fact[1]) + ["|"]
    good = _response(w, rng, lang, facts, attr, better_style, True, omit_frac, swap_frac)
    bad = _response(w, rng, lang, facts, attr, worse_style, worse_correct, omit_frac, swap_frac)
    a_better = rng.random() < 0.5
    ra, rb = (good, bad) if a_better else (bad, good)
    return {"lang": lang, "prompt": " ".join(prompt), "a": ra, "b": rb, "label": 0 if a_better else 1}


def styles_for(rng, lang, mt_frac):
    if lang == "EN":
        return "human", "human"
    return ("mt", "human") if rng.random() < mt_frac else ("human", "mt")


def generate(cfg: DataConfig) -> dict[str, list[dict]]:
    w = World(cfg)
    out = {}
    rng = random.Random(cfg.seed)
    out["train"] = [make_pair(w, rng, lang, *styles_for(rng, lang, cfg.mt_better_frac), omit_frac=cfg.omit_frac, swap_frac=cfg.swap_frac)
                    for lang in LANGS for _ in range(getattr(cfg.n_train, lang))]
    rng.shuffle(out["train"])
    # ID test: balanced (50/50 MT-better) in L1/L2; EN as in training
    out["id"] = [make_pair(w, rng, lang, *styles_for(rng, lang, 0.5), omit_frac=cfg.omit_frac, swap_frac=cfg.swap_frac) for lang in LANGS for _ in range(cfg.n_test)]
    # Bias suite: equal quality (both correct), one human, one MT; label = index of the MT one
    out["bias"] = [make_pair(w, rng, lang, "mt", "human", worse_correct=True)
                   for lang in ("L1", "L2") for _ in range(cfg.n_test)]
    # Adversarial: better = human, worse = MT with one wrong fact (never an omission)
    out["adv"] = [make_pair(w, rng, lang, "human", "mt", omit_frac=0.0, swap_frac=cfg.swap_frac) for lang in ("L1", "L2") for _ in range(cfg.n_test)]
    # EN-order reference corpus for the NLL proxy (reference LM trained on EN-order text)
    ref = []
    for _ in range(cfg.ref_lm_sentences):
        lang = rng.choice(LANGS)
        p, o, n, c = rng.choice(w.people), rng.choice(w.objects), rng.choice(w.counts), rng.choice(w.colours)
        ref.append([w.word(rng, lang, t, "human") for t in w.en_answer(p, o, n, c)])
    return out, ref


# --- proxy labels (official code: length bin, NLL bin, TTR bin) -------------------------------------
class BigramLM:
    """Add-one bigram LM: the reference LM of the NLL proxy (closed form, no training loop)."""

    def __init__(self, sentences):
        self.uni, self.bi = Counter(), Counter()
        for s in sentences:
            toks = ["<s>"] + s + ["</s>"]
            self.uni.update(toks[:-1])
            self.bi.update(zip(toks[:-1], toks[1:]))
        self.V = len({t for s in sentences for t in s}) + 2

    def nll(self, toks):
        toks = ["<s>"] + toks + ["</s>"]
        lp = [math.log((self.bi[(a, b)] + 1) / (self.uni[a] + self.V)) for a, b in zip(toks[:-1], toks[1:])]
        return -sum(lp) / len(lp)


def ttr(toks):
    return len(set(toks)) / max(1, len(toks))


def quantile_edges(values, n_bins):
    """Inner bin edges at the 1/n ... (n-1)/n quantiles (length quantile bins, as in the official code)."""
    v = sorted(values)
    return [v[min(len(v) - 1, int(len(v) * q / n_bins))] for q in range(1, n_bins)]


def to_bin(x, edges):
    return sum(x >= e for e in edges)


def proxy_labels(splits, ref, cfg: DataConfig):
    """Adds 'proxy': {len, nll, ttr} bin ids to every response; edges from train responses."""
    lm = BigramLM(ref)
    tr = [r[k]["text"].split() for r in splits["train"] for k in ("a", "b")]
    edges = {"len": quantile_edges([len(t) for t in tr], cfg.len_bins),
             "nll": quantile_edges([lm.nll(t) for t in tr], cfg.nll_bins),
             "ttr": [i / cfg.ttr_bins for i in range(1, cfg.ttr_bins)]}  # official code: 0-1 in 5 bins
    for rows in splits.values():
        for r in rows:
            for k in ("a", "b"):
                t = r[k]["text"].split()
                v = {"len": len(t), "nll": lm.nll(t), "ttr": ttr(t)}
                r[k]["proxy"] = {n: to_bin(v[n], edges[n]) for n in edges}
                r[k]["nll"] = round(v["nll"], 4)
    return edges


def build(cfg: DataConfig, out_dir: str | Path) -> dict:
    splits, ref = generate(cfg)
    edges = proxy_labels(splits, ref, cfg)
    out = Path(out_dir)
    for name, rows in splits.items():
        write_jsonl(out / f"{name}.jsonl", rows)
    vocab = sorted({t for rows in splits.values() for r in rows
                    for t in (r["prompt"] + " " + r["a"]["text"] + " " + r["b"]["text"]).split()})
    write_json(out / "meta.json", {"vocab": ["<pad>", "<sep>"] + vocab, "edges": edges,
                                   "n_bins": {"len": cfg.len_bins, "nll": cfg.nll_bins, "ttr": cfg.ttr_bins},
                                   "sizes": {k: len(v) for k, v in splits.items()}})
    return {k: len(v) for k, v in splits.items()}
