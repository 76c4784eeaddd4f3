"""The corpus of the AGoQ study (tiny scale; our choice): the shared synthetic generators (PCFG sentences and
arithmetic lines, char-level), tokenized once by the shards step. At paper scale `source` is a
hub corpus (streamed) and `tokenizer` a hub tokenizer id."""
from __future__ import annotations

import random
from pathlib import Path

from methods.agoq.config import DataConfig
from methods.core.data import arithmetic_line, iter_texts, pcfg_sentence
from methods.core.results import InputError, atomic_path


def _text(rng: random.Random, n: int, cfg: DataConfig) -> str:
    out, size = [], 0
    while size < n:
        line = (arithmetic_line(rng, cfg.max_operand) if rng.random() < cfg.arith_fraction
                else pcfg_sentence(rng))
        out.append(line)
        size += len(line) + 1
    return "\n".join(out) + "\n"


def build(cfg: DataConfig, out_dir: str | Path) -> dict:
    """Write train.txt, val.txt and tokenizer/ into out_dir (atomically). The text is
    tokenized once by the shards step (`python -m methods.core shards`), which the runs and
    the probe read; at paper scale the corpus is streamed to the files, never held whole."""
    import itertools

    from methods.core.data import stream_texts, write_joined_split
    from methods.core.tokenizer import load_tokenizer, train_tokenizer

    with atomic_path(out_dir, is_dir=True) as tmp:
        if cfg.source == "generated":
            rng = random.Random(cfg.seed)
            train, val = _text(rng, cfg.train_chars, cfg), _text(rng, cfg.val_chars, cfg)
            (tmp / "train.txt").write_text(train)
            (tmp / "val.txt").write_text(val)
            n_train, n_val = len(train), len(val)
        else:
            # the texts joined by newlines: the first train_chars characters train, the rest validate
            n_train, n_val = write_joined_split(
                iter_texts(cfg.source, cfg.text_field, cfg.train_chars + cfg.val_chars),
                [(tmp / "train.txt", cfg.train_chars), (tmp / "val.txt", None)])
            if not n_val:
                raise InputError(f"corpus {cfg.source!r} has fewer than {cfg.train_chars} characters")
        if cfg.tokenizer == "char":  # the alphabet of both files, read line by line
            tok = train_tokenizer(itertools.chain(stream_texts(tmp / "train.txt"), stream_texts(tmp / "val.txt")), "char")
        else:
            tok = load_tokenizer(cfg.tokenizer)
        tok.save_pretrained(tmp / "tokenizer")
        return {"train_chars": n_train, "val_chars": n_val, "vocab": len(tok)}


def check_inputs(data_dir: str | Path, shards_dir: str | Path) -> None:
    """The tokenizer and both shard indexes exist and match their files (before any worker starts)."""
    from methods.core.shards import read_index

    if not (Path(data_dir) / "tokenizer").exists():
        raise InputError(f"missing input: {Path(data_dir) / 'tokenizer'}")
    for split in ("train", "val"):
        read_index(Path(shards_dir) / split)


def load(data_dir: str | Path, shards_dir: str | Path, seq_len: int):
    """(tokenizer, train stream, val stream): the data step's tokenizer and the corpus as the
    shards step tokenized it (train/, val/), read from disk by (seed, step)."""
    from methods.core.shards import ShardedTokenStream
    from methods.core.tokenizer import load_tokenizer

    check_inputs(data_dir, shards_dir)
    d = Path(shards_dir)
    return (load_tokenizer(Path(data_dir) / "tokenizer"), ShardedTokenStream(d / "train", seq_len),
            ShardedTokenStream(d / "val", seq_len))
