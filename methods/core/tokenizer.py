"""Tokenizer training with the `tokenizers` library, saved in HF format.

Two kinds: `char` (one token per character, the vocabulary being the corpus's sorted alphabet:
the tiny worlds use a ~45-symbol alphabet, so a model sees every character and exact-match
answers are not blurred by merges) and `bpe` (byte-level BPE trained with `BpeTrainer`, for
corpora with an open vocabulary). Both save a `PreTrainedTokenizerFast`
that `AutoTokenizer.from_pretrained` and lm-eval's `hf` model load.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
SPECIALS = [PAD, EOS, UNK]


def train_tokenizer(texts: Iterable[str], kind: str = "char", vocab_size: int = 0):
    """Return a trained `PreTrainedTokenizerFast`. `vocab_size` is used by `bpe` only."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if kind == "char":
        # the vocabulary is the sorted alphabet: ids must not depend on frequency ties, whose
        # order is not guaranteed across processes
        alphabet = sorted({c for text in texts for c in text})
        vocab = {t: i for i, t in enumerate(SPECIALS + alphabet)}
        tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
        # every character, newline included, is its own "word"
        tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
        tok.decoder = decoders.Fuse()
        return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=EOS,
                                       unk_token=UNK, padding_side="right")
    if kind == "bpe":
        if vocab_size <= len(SPECIALS) + 256:
            raise ValueError(f"bpe vocab_size must exceed {len(SPECIALS) + 256}, got {vocab_size}")
        tok = Tokenizer(models.BPE(unk_token=None))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        raise ValueError(f"unknown tokenizer kind {kind!r} (char or bpe)")
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, eos_token=EOS,
                                   unk_token=UNK, padding_side="right")


def save_tokenizer(tokenizer, out_dir: str | Path) -> None:
    from .results import atomic_path

    with atomic_path(out_dir, is_dir=True) as tmp:
        tokenizer.save_pretrained(tmp)


def load_tokenizer(path: str | Path):
    """Load a tokenizer from a local directory or, at paper scale, a hub id."""
    from transformers import AutoTokenizer

    from .results import InputError

    p = Path(path)
    if p.exists() and not (p / "tokenizer.json").is_file() and not (p / "tokenizer_config.json").is_file():
        raise InputError(f"no tokenizer files in {p}")
    try:
        return AutoTokenizer.from_pretrained(str(path))
    except (OSError, ValueError) as e:
        raise InputError(f"cannot load tokenizer {path}: {str(e).splitlines()[0]}") from None
