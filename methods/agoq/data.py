"""The corpus of the AGoQ study (card §5): the shared synthetic generators (PCFG sentences and
arithmetic lines, char-level), tokenized once. At paper scale `source` is a hub corpus
(streamed) and `tokenizer` a hub tokenizer id."""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from methods.core.data import arithmetic_line, iter_texts, pcfg_sentence
from methods.core.results import InputError, atomic_path


@dataclass
class DataConfig:
    source: str = "generated"
    text_field: str = "text"
    tokenizer: str = "char"
    train_chars: int = 400_000
    val_chars: int = 20_000
    arith_fraction: float = 0.5   # probability that a line is arithmetic
    max_operand: int = 100
    seed: int = 0

    def __post_init__(self):
        if not 0 <= self.arith_fraction <= 1:
            raise InputError(f"config key 'data.arith_fraction' must be in [0, 1], got {self.arith_fraction}")
        for k in ("train_chars", "val_chars", "max_operand"):
            if getattr(self, k) < 1:
                raise InputError(f"config key 'data.{k}' must be positive, got {getattr(self, k)}")


def _text(rng: random.Random, n: int, cfg: DataConfig) -> str:
    out, size = [], 0
    while size < n:
        line = (arithmetic_line(rng, cfg.max_operand) if rng.random() < cfg.arith_fraction
                else pcfg_sentence(rng))
        out.append(line)
        size += len(line) + 1
    return "\n".join(out) + "\n"


def build(cfg: DataConfig, out_dir: str | Path) -> dict:
    """Write {train,val}_ids.npy and tokenizer/ into out_dir (atomically)."""
    from methods.core.tokenizer import load_tokenizer, train_tokenizer

    with atomic_path(out_dir, is_dir=True) as tmp:
        if cfg.source == "generated":
            rng = random.Random(cfg.seed)
            train, val = _text(rng, cfg.train_chars, cfg), _text(rng, cfg.val_chars, cfg)
        else:
            joined = "\n".join(iter_texts(cfg.source, cfg.text_field, cfg.train_chars + cfg.val_chars))
            train, val = joined[: cfg.train_chars], joined[cfg.train_chars:]
            if not val:
                raise InputError(f"corpus {cfg.source!r} has fewer than {cfg.train_chars} characters")
        tok = train_tokenizer([train, val], "char") if cfg.tokenizer == "char" else load_tokenizer(cfg.tokenizer)
        tok.save_pretrained(tmp / "tokenizer")
        for name, text in (("train", train), ("val", val)):
            ids = tok(text, add_special_tokens=False)["input_ids"]
            np.save(tmp / f"{name}_ids.npy", np.asarray(ids, dtype=np.int32))
        return {"train_chars": len(train), "val_chars": len(val), "vocab": len(tok)}


def load(data_dir: str | Path):
    """(tokenizer, train ids, val ids) of a data directory."""
    from methods.core.tokenizer import load_tokenizer

    d = Path(data_dir)
    for f in ("train_ids.npy", "val_ids.npy", "tokenizer"):
        if not (d / f).exists():
            raise InputError(f"missing input: {d / f}")
    try:
        ids = [np.load(d / f"{n}_ids.npy", allow_pickle=False) for n in ("train", "val")]
    except ValueError as e:
        raise InputError(f"corrupt token file in {d}: {e}") from None
    return load_tokenizer(d / "tokenizer"), ids[0], ids[1]
