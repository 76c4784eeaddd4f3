"""The domain-switching corpus (our tiny task): documents of `doc_len`+1 characters made of segments
(geometric length, mean `mean_segment`) drawn from 4 generators in turn, never the same domain
twice in a row: digit arithmetic "12+7=19.", Dyck brackets, copy/reverse strings "abc|cba;",
and the PCFG sentence grammar of methods.core.data. Characters are the tokens; the domain of
every character is stored too. Pure function of the seed; no torch."""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np

from methods.core.data import arithmetic_line, pcfg_sentence
from methods.core.results import InputError, atomic_path
from methods.remoe.config import DataConfig

DOMAINS = ("arith", "dyck", "copy", "pcfg")
_BRACKETS = ("()", "[]", "{}", "<>")
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def dyck(rng: random.Random, n_pairs: int = 4) -> str:
    out, stack = [], []
    opened = 0
    while opened < n_pairs or stack:
        if opened < n_pairs and (not stack or rng.random() < 0.5):
            b = rng.choice(_BRACKETS)
            out.append(b[0])
            stack.append(b[1])
            opened += 1
        else:
            out.append(stack.pop())
    return "".join(out) + " "


def copy_reverse(rng: random.Random) -> str:
    s = "".join(rng.choice(_LETTERS) for _ in range(rng.randint(3, 6)))
    return f"{s}|{s[::-1] if rng.random() < 0.5 else s};"


def _unit(domain: int, rng: random.Random, cfg: DataConfig) -> str:
    if domain == 0:
        return arithmetic_line(rng, cfg.max_operand)
    if domain == 1:
        return dyck(rng, rng.randint(2, 6))
    if domain == 2:
        return copy_reverse(rng)
    return pcfg_sentence(rng) + " "


def document(rng: random.Random, cfg: DataConfig) -> tuple[str, list[int]]:
    n = cfg.doc_len + 1
    text, dom = [], []
    d = rng.randrange(len(DOMAINS))
    p = 1.0 / cfg.mean_segment
    while len(text) < n:
        length = 1
        while rng.random() > p:  # geometric on {1, 2, ...} with mean 1/p
            length += 1
        seg = ""
        while len(seg) < length:
            seg += _unit(d, rng, cfg)
        seg = seg[:length]
        text.extend(seg)
        dom.extend([d] * len(seg))
        d = rng.choice([x for x in range(len(DOMAINS)) if x != d])
    return "".join(text[:n]), dom[:n]


VOCAB = "".join(sorted(set(" .+=|;" + "0123456789" + "".join(_BRACKETS) + _LETTERS)))


def encode(text: str) -> list[int]:
    idx = {c: i for i, c in enumerate(VOCAB)}
    try:
        return [idx[c] for c in text]
    except KeyError as e:
        raise InputError(f"character {e.args[0]!r} is not in the vocabulary") from None


def build(cfg: DataConfig, out: str | Path) -> dict:
    rng = random.Random(cfg.seed)
    arrays = {}
    for split, n in (("train", cfg.n_train), ("eval", cfg.n_eval)):
        ids = np.zeros((n, cfg.doc_len + 1), dtype=np.uint8)
        doms = np.zeros_like(ids)
        for i in range(n):
            t, d = document(rng, cfg)
            ids[i], doms[i] = encode(t), d
        arrays[f"{split}_ids"], arrays[f"{split}_dom"] = ids, doms
    with atomic_path(out) as tmp:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, vocab=np.array(VOCAB), **arrays)
    return {"train": cfg.n_train, "eval": cfg.n_eval, "vocab": len(VOCAB)}


def load(path: str | Path) -> dict:
    from methods.core.safeload import load_npz

    return load_npz(path, keys=("vocab", "train_ids", "train_dom", "eval_ids", "eval_dom"))
