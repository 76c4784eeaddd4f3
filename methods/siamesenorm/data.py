"""The corpus of the SiameseNorm study (our tiny design): arithmetic lines and PCFG sentences, a
char-level tokenizer, and held-out arithmetic prompts for exact match through lm-eval.

Arithmetic lines are "{a}+{b}={a+b}", "{a}-{b}={a-b}" (a, b < max_operand) and
"{a}*{d}={a*d}" (d < max_digit), one per line; the other half of the characters are PCFG
sentences. The held-out prompts are problems that never occur in the training or validation
text (checked problem by problem), so exact match measures computing, not recall.

At paper scale `source` is a hub corpus (streamed, `text_field`) and `tokenizer` a hub id;
the held-out arithmetic set is then lm-eval's own `arithmetic` group (see the scale config).
"""
from __future__ import annotations

import random
from pathlib import Path

from methods.core.data import iter_texts, pcfg_sentence
from methods.core.results import InputError, atomic_path, write_jsonl

from .config import DataConfig

OPS = ("+", "-", "*")


def problem(rng: random.Random, cfg: DataConfig) -> tuple[int, str, int]:
    op = rng.choice(OPS)
    a = rng.randrange(cfg.max_operand)
    b = rng.randrange(cfg.max_digit if op == "*" else cfg.max_operand)
    return a, op, b


def solve(a: int, op: str, b: int) -> int:
    return {"+": a + b, "-": a - b, "*": a * b}[op]


def prompt(a: int, op: str, b: int) -> str:
    return f"{a}{op}{b}="


def corpus(rng: random.Random, n_chars: int, cfg: DataConfig, exclude: set) -> str:
    """Lines until `n_chars`: an arithmetic line with probability such that about
    `arith_fraction` of the characters are arithmetic (lines differ in length), else a
    PCFG sentence. Problems in `exclude` are redrawn."""
    # mean lengths: arithmetic ~ 12 chars, a PCFG sentence ~ 30; pick lines by char share
    out, n, arith = [], 0, 0
    while n < n_chars:
        if arith <= cfg.arith_fraction * max(1, n) and cfg.arith_fraction > 0:
            p = problem(rng, cfg)
            while p in exclude:
                p = problem(rng, cfg)
            line = f"{prompt(*p)}{solve(*p)}"
            arith += len(line) + 1
        else:
            line = pcfg_sentence(rng)
        out.append(line)
        n += len(line) + 1
    return "\n".join(out) + "\n"


def held_out_problems(rng: random.Random, cfg: DataConfig) -> list[tuple[int, str, int]]:
    seen, out = set(), []
    while len(out) < cfg.n_arith_eval:
        p = problem(rng, cfg)
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def build(cfg: DataConfig, out_dir: str | Path) -> dict:
    """Write train.txt, val.txt, arith_eval.jsonl and tokenizer/ into `out_dir` (atomically).
    The text is tokenized once by the shards step (`python -m methods.core shards`), which
    the runs read; at paper scale the corpus is streamed to the files, never held whole."""
    import itertools

    from methods.core.data import stream_texts, write_joined_split
    from methods.core.tokenizer import load_tokenizer, train_tokenizer

    rng = random.Random(cfg.seed)
    with atomic_path(out_dir, is_dir=True) as tmp:
        if cfg.source == "generated":
            evals = held_out_problems(rng, cfg)
            exclude = set(evals)
            train = corpus(rng, cfg.train_chars, cfg, exclude)
            val = corpus(rng, cfg.val_chars, cfg, exclude)
            write_jsonl(tmp / "arith_eval.jsonl",
                        [{"prompt": prompt(*p), "answer": str(solve(*p)), "op": p[1]} for p in evals])
            (tmp / "train.txt").write_text(train)
            (tmp / "val.txt").write_text(val)
            n_train, n_val = len(train), len(val)
        else:
            # the texts joined by newlines; the first train_chars characters train, the rest
            # (val_chars, plus the last text's overshoot) validate
            n_train, n_val = write_joined_split(
                iter_texts(cfg.source, cfg.text_field, cfg.train_chars + cfg.val_chars),
                [(tmp / "train.txt", cfg.train_chars), (tmp / "val.txt", None)])
            if not n_train:
                raise InputError(f"corpus {cfg.source!r} is empty")
            if not n_val:
                raise InputError(f"corpus {cfg.source!r} has fewer than train_chars={cfg.train_chars} characters")
        if cfg.tokenizer == "char":  # the alphabet of both files, read line by line
            tok = train_tokenizer(itertools.chain(stream_texts(tmp / "train.txt"), stream_texts(tmp / "val.txt")), "char")
        else:
            tok = load_tokenizer(cfg.tokenizer)
        tok.save_pretrained(tmp / "tokenizer")
        sizes = {"train_chars": n_train, "val_chars": n_val, "vocab": len(tok)}
    return sizes
