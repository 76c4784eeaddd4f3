"""Passkey / multi-key retrieval data (our tiny task for RaBitQCache,
arXiv 2606.31519; the paper also reports passkey retrieval).

A record is filler words with 1–3 needles "key <name> is d d d d d ." at random depths, then
the query "value of key <name> ?" whose answer is the needle's digits. Filler words are drawn
from a Zipf-distributed vocabulary by a seeded generator; names are NATO code words that never
occur in the filler. Digits are separate words, so a word-level tokenizer gives one token per
digit and every prompt has exactly `length` tokens (equal lengths batch without padding).

Training texts hold 2–6 needles and ask about every one in turn ("value of key a ? 1 2 3 4 5 .
value of key b ? …"), so one sequence supervises several answers; evaluation prompts hold 1–3
needles, ask one and end at "?". The tokenizer is a `tokenizers` WordLevel model over the fixed vocabulary, saved as a
PreTrainedTokenizerFast (AutoTokenizer loads it).
"""
from __future__ import annotations

import random
from pathlib import Path

from methods.core.results import atomic_path, write_jsonl

from .config import DataConfig

NAMES = ["alfa", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett",
         "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
         "uniform", "victor", "whiskey", "xray", "yankee", "zulu"]
DIGITS = [str(d) for d in range(10)]
MARKERS = ["key", "is", "value", "of", "?", "."]
_SYL = ["ba", "ko", "ri", "mu", "se", "ta", "ne", "lo", "pi", "du", "ga", "fe", "zo", "wi", "ha", "ju"]


def filler_vocab(n: int) -> list[str]:
    """n distinct pseudo-words (three syllables), fixed order: word i has Zipf rank i."""
    words = [a + b + c for a in _SYL for b in _SYL for c in _SYL]
    random.Random(12345).shuffle(words)
    return words[:n]


def _needle(name: str, digits: list[str]) -> list[str]:
    return ["key", name, "is", *digits, "."]


def _query(name: str) -> list[str]:
    return ["value", "of", "key", name, "?"]


def make_record(rng: random.Random, cfg: DataConfig, length: int, vocab: list[str], weights: list[float],
                train: bool) -> dict:
    """One text of exactly `length` words: filler with needles at random depths, then the
    query (training: every needle asked, answers included; evaluation: one, answer separate)."""
    k = rng.randint(*((cfg.train_min_needles, cfg.train_max_needles) if train else (cfg.min_needles, cfg.max_needles)))
    names = rng.sample(NAMES, k)
    values = {n: [rng.choice(DIGITS) for _ in range(cfg.n_digits)] for n in names}
    if train:
        asked = rng.sample(names, k)
        tail = [w for n in asked for w in [*_query(n), *values[n], "."]]
    else:
        asked = [rng.choice(names)]
        tail = _query(asked[0])
    n_fill = length - len(tail) - sum(len(_needle(n, values[n])) for n in names)
    if cfg.topic_words:  # a per-text "topic": predicting the filler rewards reading the context
        idx = sorted(rng.sample(range(len(vocab)), cfg.topic_words))
        vocab, weights = [vocab[i] for i in idx], [weights[i] for i in idx]
    filler = rng.choices(vocab, weights=weights, k=n_fill)
    # needle insertion points: sorted random depths in the filler (strictly inside it)
    cuts = sorted(rng.sample(range(1, n_fill), k))
    words, prev = [], 0
    for name, cut in zip(names, cuts):
        words += filler[prev:cut] + _needle(name, values[name])
        prev = cut
    words += filler[prev:] + tail
    assert len(words) == length
    rec = {"text": " ".join(words), "needles": {n: "".join(values[n]) for n in names},
           "depths": [c / n_fill for c in cuts], "asked": asked}
    if not train:
        rec["prompt"] = rec.pop("text")
        rec["answer"] = " " + " ".join(values[asked[0]])
    return rec


def build_tokenizer(vocab: list[str]):
    """Word-level tokenizer over specials + markers + digits + names + filler words."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from methods.core.tokenizer import EOS, PAD, SPECIALS, UNK

    words = SPECIALS + MARKERS + DIGITS + NAMES + vocab
    tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with single spaces
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=EOS, unk_token=UNK,
                                   padding_side="right")


def build(cfg: DataConfig, out_dir: str | Path) -> dict:
    vocab = filler_vocab(cfg.vocab_words)
    weights = [1.0 / (r + 1) ** cfg.zipf_a for r in range(len(vocab))]
    with atomic_path(out_dir, is_dir=True) as tmp:
        for split, n, length, seed in (("train", cfg.n_train, cfg.train_len, 1), ("eval", cfg.n_eval, cfg.eval_len, 2)):
            rng = random.Random(cfg.seed * 1000 + seed)
            write_jsonl(tmp / f"{split}.jsonl",
                        [make_record(rng, cfg, length, vocab, weights, split == "train") for _ in range(n)])
        build_tokenizer(vocab).save_pretrained(tmp / "tokenizer")
    return {"n_train": cfg.n_train, "n_eval": cfg.n_eval, "vocab": len(vocab)}
